//! A review of a Gateway status write (`gateway.networking.k8s.io` `gateways/status`, UPDATE),
//! read with the bounds of an Ingress review: the same header checks and caller-string bounds,
//! and the object's `status.addresses` through the bounded visitor of
//! [`crate::kind::gateway::status::Addresses`] (at most 16 entries kept, strings cut as read). The
//! fast reader ([`super::skim`]) reads the same [`GatewayIn`] in its one pass when the request
//! says it is a Gateway status UPDATE; this module turns either reading into a [`Review`], and
//! holds the serde_json reading that is the reference for what a Gateway review means.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{Forged, GroupVersionKind, MetaIn, ReviewError, ReviewIn, StoredIn, Target, explain, header};
use crate::kind::gateway::{self, GatewayShape, GatewayWrite, Gateways, status::GatewayAddress};
use crate::review::Review;

/// The parts of a Gateway the decision reads; everything else is skipped unparsed.
pub(super) type GatewayIn<'a> = super::ObjectIn<'a, SpecIn, StatusIn>;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", expecting = "a GatewaySpec object")]
pub(super) struct SpecIn {
    #[serde(default, deserialize_with = "crate::kind::ingress::bounded::class_field")]
    pub(super) gateway_class_name: Option<String>,
}

/// `spec.gatewayClassName` alone, read as [`SpecIn`] reads it: what the fast reader hands
/// serde_json.
#[derive(Deserialize)]
pub(super) struct ClassName(
    #[serde(deserialize_with = "crate::kind::ingress::bounded::class_field")] pub(super) Option<String>,
);

#[derive(Deserialize)]
#[serde(expecting = "a GatewayStatus object")]
pub(super) struct StatusIn {
    #[serde(default)]
    pub(super) addresses: Option<gateway::status::Addresses>,
}

/// The class a Gateway status write will be stored with, and the class field it forged.
///
/// A Gateway is a custom resource: after mutating admission, the CRD status strategy
/// (`apiextensions-apiserver` `pkg/registry/customresource/strategy.go`,
/// `statusStrategy.PrepareForUpdate`) replaces the written object with the stored one and puts
/// back only its `status` (and `managedFields`). So everything outside `status` is
/// `oldObject`'s (measured on 1.31 and 1.37: `tests/gateway/forged.rs`), and of that the
/// decision reads `spec.gatewayClassName` and `metadata.uid`; written metadata is never
/// stored, so it is no finding. Without an `oldObject` the object is all there is.
pub(super) fn stored_class(spec: SpecIn, old: Option<&StoredIn<'_>>) -> (Option<String>, Option<Forged>) {
    super::stored(
        spec.gateway_class_name,
        old.map(|old| old.spec.gateway_class_name.clone()),
        Forged(crate::kind::Kind::Gateway),
    )
}

/// Whether a review's request is a Gateway status UPDATE (of any served version).
pub(super) fn is_gateway_status<O>(review: &ReviewIn<'_, O>) -> bool {
    review.request.as_ref().is_some_and(|r| {
        is_gateway_kind(&r.kind) && is_status(r.sub_resource.as_deref()) && is_update(r.operation.as_deref())
    })
}

/// The three parts of [`is_gateway_status`], one per request field, for a reader that sees
/// them one at a time.
pub(super) fn is_gateway_kind(kind: &GroupVersionKind<'_>) -> bool {
    kind.group == gateway::GROUP && kind.kind == "Gateway"
}

pub(super) fn is_status(sub_resource: Option<&str>) -> bool {
    sub_resource == Some("status")
}

pub(super) fn is_update(operation: Option<&str>) -> bool {
    operation == Some("UPDATE")
}

/// Reads a Gateway status review in one pass, or again with the object raw to word the error.
pub(super) fn read(body: &[u8]) -> Result<Review<'_>, ReviewError> {
    if let Ok(review) = serde_json::from_slice::<ReviewIn<GatewayIn>>(body) {
        return convert(review, Ok);
    }
    let review: ReviewIn<&RawValue> =
        serde_json::from_slice(body).map_err(|_| ReviewError::Json(explain::<ReviewIn<&RawValue>>(body)))?;
    convert(review, super::parse::<Gateways>)
}

/// A review read as a Gateway status UPDATE (by serde_json or the fast reader) into a [`Review`].
pub(super) fn convert<'a, O>(
    review: ReviewIn<'a, O>,
    read_object: impl FnOnce(O) -> Result<GatewayIn<'a>, ReviewError>,
) -> Result<Review<'a>, ReviewError> {
    let (api_version, request) = header(review)?;
    super::convert_status::<Gateways, O>(api_version, request, read_object)
}

impl super::Reviewed for Gateways {
    type In<'a> = GatewayIn<'a>;

    fn metadata<'a>(gateway: &mut Self::In<'a>) -> Option<MetaIn<'a>> {
        gateway.metadata.take()
    }

    fn written(
        gateway: GatewayIn<'_>,
        _metadata: Option<&MetaIn<'_>>,
        old: Option<&StoredIn<'_>>,
        write: GatewayWrite,
    ) -> Result<(GatewayWrite, GatewayShape, Option<Forged>), ReviewError> {
        let shape = GatewayShape::of(gateway.status.as_ref().map(|s| s.addresses.as_ref()));
        let addresses = gateway.status.and_then(|s| s.addresses).unwrap_or_default();
        let (class, forged) = stored_class(gateway.spec, old);
        Ok((GatewayWrite { class, addresses: addresses.kept, omitted: addresses.omitted, ..write }, shape, forged))
    }

    fn target<'a>(status: super::Status<'a, GatewayAddress, GatewayShape>) -> Target<'a> {
        Target::Gateway(status)
    }
}
