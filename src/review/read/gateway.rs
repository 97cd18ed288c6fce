//! A review of a Gateway status write (`gateway.networking.k8s.io` `gateways/status`, UPDATE),
//! read with the bounds of an Ingress review: the same header checks and caller-string bounds,
//! and the object's `status.addresses` through the bounded visitor of
//! [`crate::gateway::status::Addresses`] (at most 16 entries kept, strings cut as read). The
//! fast reader hands these reviews here once it sees their kind.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{ReviewError, ReviewIn, Target, bounds::OutOfBounds, explain, header};
use crate::gateway::{self, GatewayShape, GatewayWrite};
use crate::review::Review;

/// The parts of a Gateway the decision reads; everything else is skipped unparsed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "a Gateway object")]
pub(super) struct GatewayIn<'a> {
    #[serde(default, borrow, deserialize_with = "crate::strict::object")]
    metadata: MetadataIn<'a>,
    #[serde(default, deserialize_with = "crate::strict::object")]
    spec: SpecIn,
    #[serde(default, deserialize_with = "crate::strict::optional_object")]
    status: Option<StatusIn>,
}

#[derive(Deserialize, Default)]
#[serde(expecting = "an ObjectMeta object")]
struct MetadataIn<'a> {
    #[serde(default, borrow)]
    uid: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", expecting = "a GatewaySpec object")]
struct SpecIn {
    #[serde(default, deserialize_with = "crate::ingress::bounded::class_field")]
    gateway_class_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(expecting = "a GatewayStatus object")]
struct StatusIn {
    #[serde(default)]
    addresses: Option<gateway::status::Addresses>,
}

/// Whether a review's request is a Gateway status UPDATE (of any served version).
pub(super) fn is_gateway_status<O>(review: &ReviewIn<'_, O>) -> bool {
    review.request.as_ref().is_some_and(|r| {
        r.kind.group == gateway::GROUP
            && r.kind.kind == "Gateway"
            && r.sub_resource.as_deref() == Some("status")
            && r.operation.as_deref() == Some("UPDATE")
    })
}

/// Reads a Gateway status review in one pass, or again with the object raw to word the error.
pub(super) fn read(body: &[u8]) -> Result<Review<'_>, ReviewError> {
    if let Ok(review) = serde_json::from_slice::<ReviewIn<GatewayIn>>(body) {
        return convert(review, Ok);
    }
    let review: ReviewIn<&RawValue> =
        serde_json::from_slice(body).map_err(|_| ReviewError::Json(explain::<ReviewIn<&RawValue>>(body)))?;
    convert(review, |raw: &RawValue| {
        crate::strict::from_str(raw.get())
            .map_err(|_| ReviewError::GatewayObject(explain::<GatewayIn>(raw.get().as_bytes())))
    })
}

fn convert<'a, O>(
    review: ReviewIn<'a, O>,
    read_object: impl FnOnce(O) -> Result<GatewayIn<'a>, ReviewError>,
) -> Result<Review<'a>, ReviewError> {
    let (api_version, request) = header(review)?;
    let object = read_object(request.object.ok_or(ReviewError::MissingGateway)?)?;
    let (namespace, name) = (request.namespace.unwrap_or_default(), request.name.unwrap_or_default());
    let target = match OutOfBounds::check(&namespace, &name, object.metadata.uid.as_deref()) {
        Some(bound) => Target::OutOfBounds(bound),
        None => {
            let shape = match &object.status {
                None => GatewayShape::NoStatus,
                Some(StatusIn { addresses: None }) => GatewayShape::NoAddresses,
                Some(_) => GatewayShape::Addresses,
            };
            let addresses = object.status.and_then(|s| s.addresses).unwrap_or_default();
            Target::GatewayStatus {
                write: GatewayWrite {
                    namespace,
                    name,
                    class: object.spec.gateway_class_name,
                    addresses: addresses.kept,
                    omitted: addresses.omitted,
                },
                shape,
            }
        }
    };
    Ok(Review {
        api_version,
        uid: request.uid,
        dry_run: request.dry_run.unwrap_or(false),
        user: super::User {
            username: super::bounds::username(request.user_info.username),
            groups: request.user_info.groups,
        },
        target,
    })
}
