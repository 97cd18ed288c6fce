//! A review of an Ingress status write (`networking.k8s.io` or `extensions` `ingresses/status`,
//! UPDATE): the parts of the object the decision reads ([`IngressIn`], which the fast reader
//! ([`super::skim`]) reads the same), and the write they make ([`Reviewed`]).

use std::borrow::Cow;

use serde::Deserialize;

use super::{Forged, ObjectIn, Reviewed, Status, StoredIn, Target, stored};
use crate::{
    address::{Address, Entries},
    kind::{
        Kind,
        ingress::{self, Ingresses, StatusShape, StatusWrite, class_annotation},
    },
};

/// The parts of an Ingress the decision reads.
pub(super) type IngressIn<'a> = ObjectIn<MetadataIn<'a>, SpecIn, StatusIn>;

#[derive(Deserialize, Default)]
#[serde(expecting = "an ObjectMeta object")]
pub(super) struct MetadataIn<'a> {
    #[serde(default, borrow)]
    pub(super) uid: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "class_annotation")]
    pub(super) annotations: Option<String>,
}

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

/// The class an Ingress status write will be stored with, and the class field it forged.
///
/// The API server runs mutating admission on the object as the client wrote it, and only then
/// `ingressStatusStrategy.PrepareForUpdate` (`pkg/registry/networking/ingress/strategy.go`:
/// `newIngress.Spec = oldIngress.Spec`; `GetResetFields` is `spec` alone) copies the stored
/// spec back. So `spec.ingressClassName` is `oldObject`'s. Metadata is not reset by a status
/// write (measured on 1.23 and 1.37: `tests/forged.rs`), so the legacy class annotation is
/// the object's: it is what will be stored. Without an `oldObject` (no API server sends an
/// UPDATE without one) the object is all there is.
fn stored_ingress_class(
    spec: SpecIn,
    annotation: Option<String>,
    old: Option<StoredIn>,
) -> (Option<String>, Option<Forged>) {
    let old = old.map(|old| old.spec.ingress_class_name);
    let (field, forged) = stored(spec.ingress_class_name, old, Forged(Kind::Ingress));
    (ingress::class(field, annotation).0, forged)
}

impl Reviewed for Ingresses {
    type In<'a> = IngressIn<'a>;

    fn uid<'a>(ingress: &mut Self::In<'a>) -> Option<Cow<'a, str>> {
        ingress.metadata.uid.take()
    }

    fn written(
        ingress: IngressIn<'_>,
        old: Option<StoredIn>,
        write: StatusWrite,
    ) -> (StatusWrite, StatusShape, Option<Forged>) {
        let shape = shape(ingress.status.as_ref());
        let entries = ingress.status.and_then(|s| s.load_balancer).and_then(|lb| lb.ingress).unwrap_or_default();
        let (class, forged) = stored_ingress_class(ingress.spec, ingress.metadata.annotations, old);
        (StatusWrite { class, addresses: entries.kept, omitted: entries.omitted, ..write }, shape, forged)
    }

    fn target<'a>(status: Status<'a, Address, StatusShape>) -> Target<'a> {
        Target::Ingress(status)
    }
}

fn shape(status: Option<&StatusIn>) -> StatusShape {
    match status {
        None => StatusShape::NoStatus,
        Some(StatusIn { load_balancer: None }) => StatusShape::NoLoadBalancer,
        Some(StatusIn { load_balancer: Some(LoadBalancerIn { ingress: None }) }) => StatusShape::NoIngressList,
        Some(_) => StatusShape::IngressList,
    }
}
