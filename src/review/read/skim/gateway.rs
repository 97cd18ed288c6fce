//! The fast reader's Gateway object: what [`GatewayIn`] reads (`metadata.uid`,
//! `spec.gatewayClassName`, `status.addresses` through its bounded visitor), walked in the same
//! pass as the rest of the review, and the rule that tells from the request fields whether the
//! object is read as a Gateway at all.

use std::borrow::Cow;

use super::{GroupVersionKind, Skim};
use crate::review::read::gateway::{self as gw, GatewayIn};

impl<'a> Skim<'a> {
    /// A Gateway object as [`GatewayIn`] reads it: `metadata.uid`, `spec.gatewayClassName` and
    /// `status.addresses`; listeners, conditions and everything else skipped a block at a time.
    pub(super) fn gateway(&mut self) -> Option<Option<GatewayIn<'a>>> {
        let (mut metadata, mut spec, mut status) = (None, gw::SpecIn::default(), None);
        let found = self.object(&["metadata", "spec", "status"], true, |s, f| {
            match f {
                0 => metadata = s.metadata()?,
                1 => {
                    let class = s.member(&["gatewayClassName"], false, |s| Some(s.serde::<gw::ClassName>()?.0))?;
                    spec = gw::SpecIn { gateway_class_name: class.flatten().flatten() };
                }
                // The bounded visitor reads the list's bytes only.
                2 => {
                    let addresses = s.member(&["addresses"], true, Self::serde)?;
                    status = addresses.map(|addresses| gw::StatusIn { addresses: addresses.flatten() });
                }
                _ => s.skip(f)?,
            }
            Some(())
        })?;
        Some(found.map(|()| GatewayIn { metadata, spec, status }))
    }

    /// An object of which one member is read, by `read`, the rest skipped: `None` for `null`
    /// (when `nullable`), else the member if present.
    fn member<T>(
        &mut self,
        name: &[&str; 1],
        nullable: bool,
        read: impl Fn(&mut Self) -> Option<T>,
    ) -> Option<Option<Option<T>>> {
        let mut value = None;
        let found = self.object(name, nullable, |s, f| {
            match f {
                0 => value = Some(read(s)?),
                _ => s.skip(f)?,
            }
            Some(())
        })?;
        Some(found.map(|()| value))
    }
}

/// Whether the object is a Gateway's, from the request fields seen so far (`None` for a field
/// not seen yet): `Some` once they decide it, `None` while a field still to come could.
pub(super) fn is_gateway(
    kind: Option<&GroupVersionKind<'_>>,
    sub_resource: Option<&Option<Cow<'_, str>>>,
    operation: Option<&Option<Cow<'_, str>>>,
) -> Option<bool> {
    let kind = kind.map(gw::is_gateway_kind);
    let status = sub_resource.map(|s| gw::is_status(s.as_deref()));
    let update = operation.map(|o| gw::is_update(o.as_deref()));
    match (kind, status, update) {
        (Some(false), ..) | (_, Some(false), _) | (.., Some(false)) => Some(false),
        (Some(true), Some(true), Some(true)) => Some(true),
        _ => None,
    }
}
