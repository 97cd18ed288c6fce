//! What `check` and `explain` say of a Gateway ([`Explained`]): it is read as its lean
//! projection with the shape of its status (where a write's patch goes), its class shown with
//! its GatewayClass's controller, its policies' class fields.

use crate::kind::gateway::{GatewayShape, GatewayWrite, Gateways, LeanGateway};
use crate::{
    check::Explained,
    names,
    policy::{self, ClassRule},
    review,
    sources::Sources,
};

/// A stored Gateway, its shape read by the review reader's rule ([`GatewayShape::of`]).
pub(crate) type StoredGateway = super::Leaned<GatewayWrite, GatewayShape>;

impl Explained for Gateways {
    type Read = LeanGateway;
    type Stored = StoredGateway;
    const LISTED: &'static str = "Gateways";

    fn stored(gateway: LeanGateway) -> StoredGateway {
        let shape = gateway.shape;
        // The API server names every object it returns: `leaned` always has a write.
        let write = <Self as crate::kind::Governed>::leaned(gateway).map(|lean| lean.write).unwrap_or_default();
        StoredGateway { write, shape }
    }

    fn stored_write(stored: &StoredGateway) -> &GatewayWrite {
        &stored.write
    }

    fn review_target(stored: &StoredGateway) -> review::Target<'static> {
        let write = stored.write.clone();
        let status = review::Status { write, object_uid: None, shape: stored.shape, forged: None, metadata: None };
        review::Target::Gateway(status)
    }

    /// The class, and its GatewayClass's controller when the sources read it.
    fn class_shown(stored: &StoredGateway, sources: &dyn Sources) -> String {
        let write = &stored.write;
        let class = write
            .class
            .as_deref()
            .map_or_else(|| "none".to_owned(), |c| format!("{:?}", names::truncate(c, 63, usize::MAX)));
        match write.class.as_deref().and_then(|c| sources.class_controller(crate::kind::Kind::Gateway, c)) {
            Some(ctl) => format!("{class} (GatewayClass controller {ctl})"),
            None => class,
        }
    }

    fn governs_shown(_: &policy::Policy) -> String {
        String::new()
    }

    fn none_shown(policies: &policy::Policies) -> String {
        let why: Vec<String> = policies
            .of(crate::kind::Kind::Gateway)
            .map(|p| {
                format!(
                    "policy {:?} governs gatewayClasses [{}] and gatewayControllers [{}]",
                    p.name,
                    p.scope.classes.join(","),
                    p.scope.controllers.join(",")
                )
            })
            .collect();
        if why.is_empty() { "no policy governs Gateways".to_owned() } else { why.join("; ") }
    }

    /// The class fields are `gatewayClasses` and `gatewayControllers` (a Gateway always names
    /// its class, so the other rules never apply).
    fn rule_shown(rule: &policy::ClassRule) -> String {
        match rule {
            ClassRule::ClassName => "its class is in gatewayClasses".to_owned(),
            ClassRule::Controller(c) => format!("its GatewayClass's controller {c} is in gatewayControllers"),
            other => other.to_string(),
        }
    }
}
