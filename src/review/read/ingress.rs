//! A review of an Ingress status write (`ingresses/status`, UPDATE): the parts of the object the
//! decision reads ([`IngressIn`]), and the write they make ([`Reviewed`]).

use serde::Deserialize;

use super::{Forged, MetaIn, ObjectIn, ReviewError, Reviewed, Status, StoredIn, Target, stored};
use crate::{
    address::{Address, Entries},
    kind::{
        Kind,
        ingress::{self, Ingresses, StatusShape, StatusWrite, class_annotation},
    },
};

/// The parts of an Ingress the decision reads.
pub(super) type IngressIn<'a> = ObjectIn<'a, SpecIn, StatusIn>;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", expecting = "an IngressSpec object")]
pub(super) struct SpecIn {
    #[serde(default)]
    pub(super) ingress_class_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "an IngressStatus object")]
pub(super) struct StatusIn {
    #[serde(default, deserialize_with = "crate::strict::optional_object")]
    pub(super) load_balancer: Option<LoadBalancerIn>,
}

#[derive(Deserialize)]
#[serde(expecting = "an IngressLoadBalancerStatus object")]
pub(super) struct LoadBalancerIn {
    #[serde(default)]
    pub(super) ingress: Option<Entries>,
}

/// The class an Ingress status write will be stored with, and the class field it forged. After
/// mutating admission, `ingressStatusStrategy.PrepareForUpdate` copies the stored spec back
/// (`GetResetFields` is `spec` alone), so `spec.ingressClassName` is `oldObject`'s. Metadata is
/// not reset (measured on 1.23 and 1.37: `tests/cluster/forged.rs`), but a governed write's is put
/// back, so the class annotation is read from `metadata`, the metadata the caller judges by.
fn stored_ingress_class(
    spec: SpecIn,
    metadata: Option<&MetaIn<'_>>,
    old: Option<&StoredIn<'_>>,
) -> Result<(Option<String>, Option<Forged>), ReviewError> {
    let annotation = match metadata.and_then(|m| m.annotations) {
        Some(raw) => {
            let mut de = serde_json::Deserializer::from_str(raw);
            class_annotation(&mut de)
                .map_err(|e| ReviewError::Object(Kind::Ingress, format!("metadata.annotations: {e}")))?
        }
        None => None,
    };
    let old = old.map(|old| old.spec.ingress_class_name.clone());
    let (field, forged) = stored(spec.ingress_class_name, old, Forged(Kind::Ingress));
    Ok((ingress::class(field, annotation).0, forged))
}

impl Reviewed for Ingresses {
    /// API servers before 1.22 also serve Ingresses as `extensions/v1beta1`, and send reviews
    /// of either group.
    const OLD_GROUPS: &'static [&'static str] = &["extensions"];

    type In<'a> = IngressIn<'a>;

    fn metadata<'a>(ingress: &mut Self::In<'a>) -> Option<MetaIn<'a>> {
        ingress.metadata.take()
    }

    fn written(
        ingress: IngressIn<'_>,
        metadata: Option<&MetaIn<'_>>,
        old: Option<&StoredIn<'_>>,
        write: StatusWrite,
    ) -> Result<(StatusWrite, StatusShape, Option<Forged>), ReviewError> {
        let lb = ingress.status.as_ref().map(|s| s.load_balancer.as_ref().map(|lb| lb.ingress.as_ref()));
        let shape = StatusShape::of(lb);
        let entries = ingress.status.and_then(|s| s.load_balancer).and_then(|lb| lb.ingress).unwrap_or_default();
        let (class, forged) = stored_ingress_class(ingress.spec, metadata, old)?;
        Ok((StatusWrite { class, addresses: entries.kept, omitted: entries.omitted, ..write }, shape, forged))
    }

    fn target<'a>(status: Status<'a, Address, StatusShape>) -> Target<'a> {
        Target::Ingress(status)
    }
}
