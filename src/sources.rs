//! Where a policy's canonical addresses come from at request time: static lists held in the
//! policy, publish Services and Gateways held in watch-fed caches ([`published`]), and
//! (through [`Inventory`]) the node-IP source and the cluster facts class and namespace
//! matching need. The request path only reads memory.

pub(crate) mod follow;
pub(crate) mod gateway;
pub(crate) mod initialized;
pub(crate) mod inventory;
pub(crate) mod known;
pub(crate) mod nodeip;
pub(crate) mod owned;
pub(crate) mod published;
pub(crate) mod service;
pub(crate) mod snapshot;
pub(crate) mod watches;

pub use nodeip::NodeAddrs;

use gateway::{GatewayError, PublishGateway};
use initialized::Initialize;
use inventory::Inventory;
use nodeip::NodeIpError;
use published::Published;
use service::{PublishService, ServiceError};

use std::{
    borrow::Cow,
    collections::{BTreeMap, HashMap},
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};

use kube::Client;

use crate::{
    address::Address,
    kind::{Classes, Kind},
    policy::{GatewayRef, PodsRef, Policies, Policy, ServiceRef, Source, SourceList},
};

/// Why a policy's source has no canonical addresses right now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unresolved {
    #[error("Service {0} is not in the cache yet (watch not synced)")]
    NotSynced(ServiceRef),
    #[error("Service {0} not found")]
    Missing(ServiceRef),
    #[error("Service {0} {1}")]
    Service(ServiceRef, ServiceError),
    #[error("{0}: not watched yet")]
    PodsNotSynced(String),
    #[error("{0}: {1}")]
    Pods(String, NodeIpError),
    #[error("Gateway {0} is not in the cache yet (watch not synced)")]
    GatewayNotSynced(GatewayRef),
    #[error("Gateway {0} not found")]
    GatewayMissing(GatewayRef),
    #[error(
        "Gateway {0}: the API server serves no Gateways (the Gateway API CRDs are not installed); inactive until they appear"
    )]
    GatewayApiAbsent(GatewayRef),
    #[error("Gateway {0} {1}")]
    Gateway(GatewayRef, Box<GatewayError>),
    #[error(transparent)]
    TooMany(#[from] crate::kind::TooMany),
    /// In `--admission=policy`, another guard holds the policy's admission objects (owner label
    /// named).
    #[error(
        "its admission policy is held by another guard (ingress-status-guard/lease={0}): this guard leaves the policy's objects alone; give one of the two guards another --leader-election-lease-name (chart: another release name)"
    )]
    HeldByAnotherGuard(String),
    #[error("its trusted writers define the status: there is no canonical value to compute")]
    Trusted,
    /// No API server sends a review whose stored status cannot be read.
    #[error("the stored status (request.oldObject) cannot be read: {0}")]
    StoredStatus(String),
    #[error("every source is unresolved: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    All(Vec<Unresolved>),
}

impl Unresolved {
    /// A source not read yet (its watch has not listed): no fact about the cluster, so nothing
    /// there is replaced or removed on its account until it is read.
    pub(crate) fn not_read_yet(&self) -> bool {
        match self {
            Unresolved::NotSynced(_) | Unresolved::PodsNotSynced(_) | Unresolved::GatewayNotSynced(_) => true,
            Unresolved::All(all) => all.iter().any(Unresolved::not_read_yet),
            _ => false,
        }
    }
}

/// Whether every source of `policy` has been read at least once: the rule by which the
/// reconciler patches and the admission-policy keeper renders or sweeps (a reload may add a
/// source after the sources as a whole have synced).
pub(crate) fn every_source_read(policy: &Policy, sources: &dyn Sources) -> bool {
    sources.synced() && policy.sources.iter().all(|s| !sources.source(s).is_err_and(|e| e.not_read_yet()))
}

/// Lookup of the current canonical addresses of a policy ([`SourceCache`], or fixed values).
pub trait Sources: Send + Sync {
    /// The canonical addresses a publish Service gives now.
    fn service(&self, svc: &ServiceRef) -> Result<Vec<Address>, Unresolved>;

    /// Whether every source has been read at least once (readiness).
    fn synced(&self) -> bool {
        true
    }

    /// `(namespace/name, time since the API server was last heard)` of each watched Service.
    fn cache_ages(&self) -> Vec<(String, Duration)> {
        Vec::new()
    }

    /// The node-IP source's addresses: the nodes of its Running and Ready Pods (`sources::nodeip`).
    fn pods(&self, pods: &PodsRef) -> Result<Vec<Address>, Unresolved> {
        Err(Unresolved::PodsNotSynced(pods.to_string()))
    }

    /// The canonical addresses a publish Gateway gives now (`sources::gateway`).
    fn gateway(&self, gw: &GatewayRef) -> Result<Vec<Address>, Unresolved> {
        Err(Unresolved::GatewayNotSynced(gw.clone()))
    }

    /// What is inactive though ready, for `/readyz` to name (publish Gateways of a cluster
    /// without the Gateway API CRDs).
    fn inactive(&self) -> Vec<String> {
        Vec::new()
    }

    /// Every class of `kind` once read, for the admission-policy mode's class names: none when
    /// no policy needs them, `None` until their watch has listed.
    fn classes(&self, _kind: Kind) -> Option<Classes> {
        Some(Classes::new())
    }

    /// The controller of `kind`'s class `class`, if it is known.
    fn class_controller(&self, kind: Kind, class: &str) -> Option<String> {
        self.classes(kind)?.remove(class)?.controller
    }

    /// The names of `kind`'s classes annotated as the cluster default, sorted.
    fn default_classes(&self, kind: Kind) -> Vec<String> {
        self.classes(kind).into_iter().flatten().filter(|(_, c)| c.default).map(|(name, _)| name).collect()
    }

    /// The labels of Namespace `namespace`, if it is known.
    fn namespace_labels(&self, _namespace: &str) -> Option<BTreeMap<String, String>> {
        None
    }

    /// One source's addresses, ports as the source gives them.
    fn source(&self, source: &Source) -> Result<Vec<Address>, Unresolved> {
        match source {
            Source::Static(list) => Ok(list.clone()),
            Source::Service(svc) => self.service(svc),
            Source::Pods(pods) => self.pods(pods),
            Source::Gateway(gw) => self.gateway(gw),
            Source::Trusted(_) => Err(Unresolved::Trusted),
        }
    }

    /// The union of the policy's sources, canonical; unresolved only when every source is. A
    /// lone static list, already canonical, is lent: no copy per review.
    fn canonical<'p>(&self, policy: &'p Policy) -> Result<Cow<'p, [Address]>, Unresolved> {
        if let [Source::Static(list)] = &policy.sources[..]
            && (policy.keep_ports || list.iter().all(|a| a.ports.is_empty()))
            && crate::address::is_canonical(list)
        {
            return Ok(Cow::Borrowed(list));
        }
        let (mut all, mut failed) = (Vec::new(), Vec::new());
        for source in &policy.sources {
            match self.source(source) {
                Ok(addrs) => all.extend(addrs),
                Err(e) => failed.push(e),
            }
        }
        if failed.len() == policy.sources.len() {
            return Err(if failed.len() == 1 { failed.remove(0) } else { Unresolved::All(failed) });
        }
        if !failed.is_empty() && partial_warning_due(&policy.name, Instant::now()) {
            for e in &failed {
                tracing::warn!(policy = %policy.name, sources = %SourceList(&policy.sources), unresolved = %e, "some sources of the policy are unresolved; publishing the others (the reconciler adds addresses but removes none until every source resolves; said once a minute per policy)");
            }
        }
        if !policy.keep_ports {
            for a in &mut all {
                a.ports.clear();
            }
        }
        Ok(Cow::Owned(crate::address::canonicalize(all)))
    }
}

/// How often the "some sources are unresolved" warning is logged per policy: every review and
/// every judgement of the reconciler computes the union, so unlimited it would log per write.
const PARTIAL_WARNING_EVERY: Duration = Duration::from_secs(60);

/// Whether the partial-sources warning of `policy` is due at `now`. Policy names come from the
/// configuration, so the map is bounded by it; it is emptied if reloads ever leave it large.
fn partial_warning_due(policy: &str, now: Instant) -> bool {
    static LAST: std::sync::Mutex<Option<HashMap<String, Instant>>> = std::sync::Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let last = last.get_or_insert_with(HashMap::new);
    if last.len() > 1024 {
        last.clear();
    }
    match last.get(policy) {
        Some(&at) if now.saturating_duration_since(at) < PARTIAL_WARNING_EVERY => false,
        _ => {
            last.insert(policy.to_owned(), now);
            true
        }
    }
}

/// In-memory state of every publish source, each updated by its own watch
/// (`watches::ServiceWatches`), and the inventory of cluster facts the policies need.
#[derive(Debug)]
pub struct SourceCache {
    pub(crate) services: Published<PublishService>,
    pub(crate) gateways: Published<PublishGateway>,
    /// Counts changes of any source's entry, so the reconciler need not poll.
    generation: Arc<tokio::sync::watch::Sender<u64>>,
    /// Readiness: latched once every start-up source and collection was read.
    pub(crate) initialize: Initialize,
    /// Replaced when a reload changes what is needed ([`SourceCache::track_inventory`]).
    inventory: RwLock<Arc<Inventory>>,
    watch_errors: std::sync::OnceLock<crate::metrics::objects::WatchErrors>,
}

impl SourceCache {
    /// An empty cache for the sources `policies` publish; the watches fill it.
    pub fn new(policies: &Policies) -> Arc<Self> {
        let generation = Arc::new(tokio::sync::watch::Sender::new(0));
        let initialize = Initialize::default();
        Arc::new(SourceCache {
            services: Published::new(policies, generation.clone(), &initialize),
            gateways: Published::new(policies, generation.clone(), &initialize),
            inventory: RwLock::new(Inventory::new(policies, generation.clone(), &initialize)),
            initialize,
            generation,
            watch_errors: std::sync::OnceLock::new(),
        })
    }

    fn inventory(&self) -> Arc<Inventory> {
        self.inventory.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Makes the watches count their failures (not "no Gateway API", the inactive state) in
    /// `errors`; until then they only log them.
    pub(crate) fn count_watch_errors(&self, errors: crate::metrics::objects::WatchErrors) {
        let _ = self.watch_errors.set(errors);
    }

    /// Counts one failure of `watch` ([`crate::metrics::objects::WATCHES`]).
    pub(crate) fn watch_failed(&self, watch: &'static str) {
        if let Some(errors) = self.watch_errors.get() {
            errors.inc(watch);
        }
    }

    /// Replaces the inventory when `policies` need other cluster facts than it holds; returns
    /// whether it did (its watches must then be started: [`SourceCache::watch_inventory`]).
    pub(crate) fn track_inventory(&self, policies: &Policies) -> bool {
        let mut current = self.inventory.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if current.serves(policies) {
            return false;
        }
        *current = Inventory::new(policies, self.generation.clone(), &self.initialize);
        drop(current);
        self.generation.send_modify(|g| *g += 1);
        true
    }

    /// Runs the current inventory's watches until the task is aborted.
    pub(crate) async fn watch_inventory(self: Arc<Self>, client: Client) {
        self.inventory().run(client, self.watch_errors.get()).await;
    }

    /// Changes whenever a source's addresses (or resolvability) or an inventory fact change.
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.generation.subscribe()
    }
}

impl Sources for SourceCache {
    fn cache_ages(&self) -> Vec<(String, Duration)> {
        // The `source_cache_age_seconds` series are the publish Services'.
        self.services.ages()
    }

    fn synced(&self) -> bool {
        self.initialize.initialized()
    }

    fn gateway(&self, gw: &GatewayRef) -> Result<Vec<Address>, Unresolved> {
        self.gateways.lookup(gw)
    }

    fn classes(&self, kind: Kind) -> Option<Classes> {
        self.inventory().classes(kind)
    }

    fn class_controller(&self, kind: Kind, class: &str) -> Option<String> {
        self.inventory().class_controller(kind, class)
    }

    fn default_classes(&self, kind: Kind) -> Vec<String> {
        self.inventory().default_classes(kind)
    }

    fn inactive(&self) -> Vec<String> {
        let why = "inactive, the API server serves no Gateways (Gateway API CRDs not installed)";
        self.gateways.inactive().iter().map(|gw| format!("publishGateway {gw}: {why}")).collect()
    }

    fn pods(&self, pods: &PodsRef) -> Result<Vec<Address>, Unresolved> {
        match self.inventory().pods(pods) {
            None => Err(Unresolved::PodsNotSynced(pods.to_string())),
            Some(result) => result.map_err(|e| Unresolved::Pods(pods.to_string(), e)),
        }
    }

    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.inventory().namespace_labels(namespace)
    }

    fn service(&self, svc: &ServiceRef) -> Result<Vec<Address>, Unresolved> {
        self.services.lookup(svc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_partial_sources_warning_is_rate_limited_per_policy() {
        let t0 = Instant::now();
        let due = |policy, after| partial_warning_due(policy, t0 + after);
        assert!(due("rate-limit-test-a", Duration::ZERO));
        assert!(!due("rate-limit-test-a", Duration::from_secs(1)));
        assert!(due("rate-limit-test-b", Duration::from_secs(1)), "each policy has its own");
        assert!(!due("rate-limit-test-a", PARTIAL_WARNING_EVERY - Duration::from_secs(1)));
        assert!(due("rate-limit-test-a", PARTIAL_WARNING_EVERY));
    }
}
