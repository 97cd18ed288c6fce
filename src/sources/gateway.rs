//! The `publishGateway` source: a Gateway's `status.addresses` as canonical Ingress entries
//! (pure: [`addresses`]), and the watch of each publish Gateway into the [`SourceCache`]. A
//! cluster without the Gateway API CRDs leaves the source inactive, not the guard unready:
//! the watch keeps retrying (at most [`RETRY_CAP`] apart) and the source resolves once the
//! CRDs appear, without a restart.

use std::{
    sync::{Arc, RwLock, atomic::AtomicBool},
    time::Duration,
};

use kube::{Api, Client, runtime::watcher};

use super::{
    SourceCache, Unresolved,
    follow::{self, Change, Projection},
};
use crate::{
    address::{self, Address, Addresses},
    kind::gateway::{LeanGateway, Programmed, status::MAX_ADDRESSES, status::ToIngressError},
    policy::GatewayRef,
};

/// Longest wait between two attempts of a failing Gateway watch: how soon CRDs installed after
/// start-up are noticed.
pub(crate) const RETRY_CAP: Duration = Duration::from_secs(10);

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
    Entry {
        /// Its position in `status.addresses`.
        index: usize,
        /// Why it cannot be used.
        error: ToIngressError,
    },
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

/// What the cache holds for one publish Gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum GatewayEntry {
    NotSynced,
    /// The API server does not serve Gateways (no CRDs): inactive, but read.
    ApiAbsent,
    Missing,
    Resolved(Result<Vec<Address>, GatewayError>),
}

/// Whether the "Gateway API not installed" warning was logged: once per process, however many
/// publish Gateways wait for it.
static ABSENT_LOGGED: AtomicBool = AtomicBool::new(false);

/// Whether a watch error says the API server serves no Gateways (the CRDs are not installed).
pub(crate) fn is_api_absent(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status)) => status.code == 404,
        _ => false,
    }
}

impl SourceCache {
    /// Makes the Gateway watches count their failures (not "no Gateway API", which is the
    /// inactive state) in `errors`; before this, they only log them.
    pub(crate) fn count_watch_errors(&self, errors: crate::metrics::objects::WatchErrors) {
        // Set once at start-up; a second call would be a bug, and counting into the first is fine.
        let _ = self.watch_errors.set(errors);
    }

    /// Counts one failure of `watch` ([`crate::metrics::objects::WATCHES`]).
    pub(super) fn watch_failed(&self, watch: &'static str) {
        if let Some(errors) = self.watch_errors.get() {
            errors.inc(watch);
        }
    }

    /// Makes the cache hold exactly `gateways`; as [`SourceCache::track`] for Services.
    pub(crate) fn track_gateways(&self, gateways: &[GatewayRef]) {
        let mut entries = self.gateways.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.retain(|gw, _| gateways.contains(gw));
        for gw in gateways {
            entries.entry(gw.clone()).or_insert(GatewayEntry::NotSynced);
        }
        drop(entries);
        self.generation.send_modify(|g| *g += 1);
    }

    fn set_gateway(&self, gw: &GatewayRef, entry: GatewayEntry) {
        let mut entries = self.gateways.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(slot) = entries.get_mut(gw) else { return };
        if *slot == entry {
            return;
        }
        match &entry {
            GatewayEntry::Resolved(Ok(addrs)) => {
                tracing::info!(gateway = %gw, addresses = %Addresses(addrs), "publish Gateway resolved");
            }
            GatewayEntry::Resolved(Err(e)) => {
                tracing::warn!(gateway = %gw, error = %e, "publish Gateway has no usable address");
            }
            GatewayEntry::Missing => tracing::warn!(gateway = %gw, "publish Gateway not found"),
            GatewayEntry::ApiAbsent => {
                if !ABSENT_LOGGED.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    tracing::warn!(gateway = %gw, retry_every = ?RETRY_CAP, "the API server serves no Gateways (the Gateway API CRDs are not installed): publishGateway sources are inactive until they appear");
                }
            }
            GatewayEntry::NotSynced => {}
        }
        if *slot == GatewayEntry::ApiAbsent {
            tracing::info!(gateway = %gw, "the API server serves Gateways now: publishGateway source active");
            ABSENT_LOGGED.store(false, std::sync::atomic::Ordering::Relaxed);
        }
        *slot = entry;
        drop(entries);
        self.generation.send_modify(|g| *g += 1);
    }

    /// Watches one publish Gateway (field-selected by name) until the task is aborted, as
    /// [`SourceCache::watch_service`] watches a Service. A 404 from the API server (no CRDs)
    /// marks the source inactive; the watch is retried at most [`RETRY_CAP`] apart.
    pub(crate) async fn watch_gateway(self: Arc<Self>, client: Client, gw: GatewayRef) {
        let api: Api<LeanGateway> = Api::namespaced(client, &gw.namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", gw.name));
        let held = RwLock::new(Projection::default());
        let project = |obj: LeanGateway| Some(((), addresses(&obj)));
        follow::follow_capped(api, config, RETRY_CAP, project, &held, |change| {
            let held = || held.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(&()).cloned();
            match change {
                Ok(Change::Listing) => {
                    if let Some(addresses) = held() {
                        self.set_gateway(&gw, GatewayEntry::Resolved(addresses));
                    }
                }
                Ok(Change::Listed { .. } | Change::Applied { .. } | Change::Deleted { .. }) => {
                    self.set_gateway(&gw, held().map_or(GatewayEntry::Missing, GatewayEntry::Resolved));
                }
                Err(e) if is_api_absent(&e) => self.set_gateway(&gw, GatewayEntry::ApiAbsent),
                Err(e) => {
                    self.watch_failed(crate::metrics::objects::PUBLISH_GATEWAY);
                    tracing::warn!(gateway = %gw, error = %e, "watch of publish Gateway failed; retrying");
                }
            }
        })
        .await;
    }

    /// The publish Gateway's addresses, as [`super::Sources::gateway`] answers.
    pub(super) fn gateway_entry(&self, gw: &GatewayRef) -> Result<Vec<Address>, Unresolved> {
        let entries = self.gateways.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        match entries.get(gw) {
            Some(GatewayEntry::Resolved(Ok(addrs))) => Ok(addrs.clone()),
            Some(GatewayEntry::Resolved(Err(e))) => Err(Unresolved::Gateway(gw.clone(), Box::new(e.clone()))),
            Some(GatewayEntry::Missing) => Err(Unresolved::GatewayMissing(gw.clone())),
            Some(GatewayEntry::ApiAbsent) => Err(Unresolved::GatewayApiAbsent(gw.clone())),
            Some(GatewayEntry::NotSynced) | None => Err(Unresolved::GatewayNotSynced(gw.clone())),
        }
    }

    /// Whether every publish Gateway has been read (found, missing, or the API absent).
    pub(super) fn gateways_synced(&self) -> bool {
        let entries = self.gateways.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.values().all(|e| *e != GatewayEntry::NotSynced)
    }

    /// The publish Gateways that are inactive because the API server serves no Gateways.
    pub(crate) fn inactive_gateways(&self) -> Vec<GatewayRef> {
        let entries = self.gateways.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut inactive: Vec<_> =
            entries.iter().filter(|(_, e)| **e == GatewayEntry::ApiAbsent).map(|(gw, _)| gw.clone()).collect();
        inactive.sort();
        inactive
    }
}

pub(crate) mod classes;

#[cfg(test)]
mod tests;
