//! A review of a Service status write (core `services/status`, UPDATE): the parts of the object
//! the decision reads ([`ServiceIn`]), and the write they make ([`super::Reviewed`]).

use serde::Deserialize;

use super::{Forged, MetaIn, ReviewError, StoredIn, Target};
use crate::kind::{
    Kind,
    ingress::StatusShape,
    service::{self, LoadBalancerIngress, ServiceWrite, Services},
};

/// The parts of a Service the decision reads; everything else is skipped unparsed.
pub(super) type ServiceIn<'a> = super::ObjectIn<'a, SpecIn, StatusIn>;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a ServiceStatus object")]
pub(super) struct StatusIn {
    #[serde(default, deserialize_with = "crate::strict::optional_object")]
    pub(super) load_balancer: Option<LoadBalancerIn>,
}

#[derive(Deserialize)]
#[serde(expecting = "a LoadBalancerStatus object")]
pub(super) struct LoadBalancerIn {
    #[serde(default)]
    pub(super) ingress: Option<service::Entries>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", expecting = "a ServiceSpec object")]
pub(super) struct SpecIn {
    #[serde(default, rename = "type")]
    pub(super) service_type: Option<String>,
    #[serde(default)]
    pub(super) load_balancer_class: Option<String>,
}

/// The class a Service status write will be stored with, and the class field it forged. After
/// mutating admission, `serviceStatusStrategy.PrepareForUpdate` copies the stored spec back, so
/// `spec.type` and `spec.loadBalancerClass` are `oldObject`'s: a status write can neither make a
/// Service a load balancer nor move it to another class.
fn stored_class(spec: SpecIn, old: Option<&StoredIn<'_>>) -> (String, Option<Forged>) {
    let old_spec = old.map(|old| &old.spec);
    let load_balancer = old_spec.map_or(spec.service_type.as_deref(), |s| s.service_type.as_deref());
    let old_class = old_spec.map(|s| s.load_balancer_class.clone());
    let (class, forged) = super::stored(spec.load_balancer_class, old_class, Forged(Kind::Service));
    (service::class(load_balancer == Some(service::LOAD_BALANCER), class.as_deref()), forged)
}

impl super::Reviewed for Services {
    type In<'a> = ServiceIn<'a>;

    fn metadata<'a>(service: &mut Self::In<'a>) -> Option<MetaIn<'a>> {
        service.metadata.take()
    }

    fn written(
        service: ServiceIn<'_>,
        _metadata: Option<&MetaIn<'_>>,
        old: Option<&StoredIn<'_>>,
        write: ServiceWrite,
    ) -> Result<(ServiceWrite, StatusShape, Option<Forged>), ReviewError> {
        let lb = service.status.as_ref().map(|s| s.load_balancer.as_ref().map(|lb| lb.ingress.as_ref()));
        let shape = StatusShape::of(lb);
        let entries = service.status.and_then(|s| s.load_balancer).and_then(|lb| lb.ingress).unwrap_or_default();
        let (class, forged) = stored_class(service.spec, old);
        Ok((
            ServiceWrite { class: Some(class), addresses: entries.kept, omitted: entries.omitted, ..write },
            shape,
            forged,
        ))
    }

    fn target<'a>(status: super::Status<'a, LoadBalancerIngress, StatusShape>) -> Target<'a> {
        Target::Service(status)
    }
}
