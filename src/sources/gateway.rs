//! The `publishGateway` source: a Gateway's `status.addresses` as canonical Ingress entries
//! (pure: [`addresses`]), and its wire for the publish-source cache ([`PublishGateway`]). A
//! cluster without the Gateway API CRDs leaves the source inactive, not the guard unready:
//! the watch keeps retrying (at most [`RETRY_CAP`] apart) and the source resolves once the
//! CRDs appear, without a restart.

use std::time::Duration;

use super::{
    Unresolved,
    published::{News, Publish, Why, log_news},
};
use crate::{
    address::{self, Address},
    kind::gateway::{LeanGateway, Programmed, status::MAX_ADDRESSES, status::ToIngressError},
    policy::{GatewayRef, Policies},
};

pub(crate) use super::follow::RETRY_CAP;

/// Why a Gateway yields no address to publish on an Ingress.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatewayError {
    /// `status.addresses` is empty; the Programmed condition says more.
    #[error("has no addresses in status.addresses yet (it {0})")]
    NoAddresses(Programmed),
    /// Addresses, but the Gateway is not (or no longer) Programmed.
    #[error("{0}, so its addresses are not published")]
    NotProgrammed(Programmed),
    /// More entries than the CRD allows (only a review can carry those).
    #[error("has {0} entries in status.addresses, more than the {MAX_ADDRESSES} the CRD allows")]
    TooMany(usize),
    /// An entry that cannot be an Ingress status entry.
    #[error("status.addresses[{index}]: {error}")]
    Entry { index: usize, error: ToIngressError },
}

/// The canonical Ingress entries a Gateway publishes: each `status.addresses` entry
/// (`IPAddress` → `ip`, `Hostname` → `hostname`), de-duplicated and sorted as for Ingress;
/// unresolved while it has none or is not `Programmed`, or when an entry has no Ingress form.
pub(crate) fn addresses(gateway: &LeanGateway) -> Result<Vec<Address>, GatewayError> {
    let list = &gateway.addresses;
    if list.omitted > 0 {
        return Err(GatewayError::TooMany(list.kept.len() + list.omitted));
    }
    if list.kept.is_empty() {
        return Err(GatewayError::NoAddresses(gateway.programmed.clone()));
    }
    if gateway.programmed != Programmed::True {
        return Err(GatewayError::NotProgrammed(gateway.programmed.clone()));
    }
    let mut entries = Vec::with_capacity(list.kept.len());
    for (index, entry) in list.kept.iter().enumerate() {
        entries.push(entry.to_ingress().map_err(|error| GatewayError::Entry { index, error })?);
    }
    Ok(address::canonicalize(entries))
}

/// The wire of the `publishGateway` source for the [`super::published::Published`] cache.
#[derive(Debug)]
pub(crate) struct PublishGateway;

impl Publish for PublishGateway {
    type Ref = GatewayRef;
    type Object = LeanGateway;
    const KIND: &'static str = "Gateway";
    type Error = GatewayError;
    const RETRY_CAP: Option<Duration> = Some(RETRY_CAP);
    const WATCH_METRIC: Option<&'static str> = Some(crate::metrics::objects::PUBLISH_GATEWAY);

    fn refs(policies: &Policies) -> Vec<GatewayRef> {
        policies.gateways()
    }

    fn locate(gw: &GatewayRef) -> (&str, &str) {
        (&gw.namespace, &gw.name)
    }

    fn addresses(gateway: &LeanGateway) -> Result<Vec<Address>, GatewayError> {
        addresses(gateway)
    }

    fn unresolved(gw: &GatewayRef, why: Why<GatewayError>) -> Unresolved {
        let gw = gw.clone();
        match why {
            Why::NotSynced => Unresolved::GatewayNotSynced(gw),
            Why::ApiAbsent => Unresolved::GatewayApiAbsent(gw),
            Why::Missing => Unresolved::GatewayMissing(gw),
            Why::Unusable(e) => Unresolved::Gateway(gw, Box::new(e)),
        }
    }

    fn log(gw: &GatewayRef, news: News<'_, GatewayError>) {
        log_news!(gateway, "Gateway", "the Gateway API CRDs", gw, news);
    }
}

#[cfg(test)]
mod tests;
