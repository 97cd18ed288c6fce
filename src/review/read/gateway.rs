//! A review of a Gateway status write (`gateways/status`, UPDATE): the parts of the object the
//! decision reads ([`GatewayIn`]), and the write they make ([`super::Reviewed`]).

use serde::Deserialize;

use super::{Forged, MetaIn, ReviewError, StoredIn, Target};
use crate::kind::gateway::{self, GatewayShape, GatewayWrite, Gateways, status::GatewayAddress};

/// The parts of a Gateway the decision reads; everything else is skipped unparsed.
pub(super) type GatewayIn<'a> = super::ObjectIn<'a, SpecIn, StatusIn>;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", expecting = "a GatewaySpec object")]
pub(super) struct SpecIn {
    #[serde(default, deserialize_with = "crate::kind::ingress::bounded::class_field")]
    pub(super) gateway_class_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(expecting = "a GatewayStatus object")]
pub(super) struct StatusIn {
    #[serde(default)]
    pub(super) addresses: Option<gateway::status::Addresses>,
}

/// The class a Gateway status write will be stored with, and the class field it forged.
///
/// After mutating admission, the CRD status strategy (`apiextensions-apiserver`
/// `statusStrategy.PrepareForUpdate`) keeps only the written `status` (and `managedFields`), so
/// everything else is `oldObject`'s (measured on 1.31 and 1.37: `tests/cluster/gateway/forged.rs`)
/// and written metadata is no finding. Without an `oldObject` the object is all there is.
pub(super) fn stored_class(spec: SpecIn, old: Option<&StoredIn<'_>>) -> (Option<String>, Option<Forged>) {
    super::stored(
        spec.gateway_class_name,
        old.map(|old| old.spec.gateway_class_name.clone()),
        Forged(crate::kind::Kind::Gateway),
    )
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
