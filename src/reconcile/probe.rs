//! The reconciler's cache of Ingresses outside a reconciler, for the memory test of issue 34
//! (`tests/cache_memory.rs`): objects read from JSON by the watch's own reader, projected by
//! the watch's own projection and filter into the same map, as one list delivers them.

use kube::runtime::watcher::Event;

use super::{
    cache::{Key, Shared, Stored},
    filter::Filter,
    kind,
};
use crate::{
    address::Address,
    kind::ingress::{Ingresses, LeanIngress},
    metrics::Metrics,
    policy::Policies,
    sources::follow::{Projected, Projection},
};

/// What one replica's reconciler holds of the Ingresses it has listed.
#[doc(hidden)]
#[derive(Default)]
pub struct IngressCache {
    interner: Shared<Address>,
    held: Projection<Key, Stored<Address>>,
    metrics: Metrics,
    filter: Filter,
}

impl std::fmt::Debug for IngressCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngressCache").field("objects", &self.held.len()).finish()
    }
}

impl IngressCache {
    /// An empty cache that keeps every Ingress.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty cache that keeps the Ingresses `policies` could govern, as the watch does
    /// (every Namespace in scope; IngressClasses not read, so class-less ones are kept).
    pub fn governed_by(policies: &Policies) -> Self {
        IngressCache { filter: Filter::of::<Ingresses>(policies, None, None), ..Self::default() }
    }

    /// One (re-)list of `objects` (Ingresses as the API server serves them, JSON), as the
    /// watch applies it; the objects held after it.
    pub fn list<'a>(&mut self, objects: impl IntoIterator<Item = &'a [u8]>) -> usize {
        self.held.apply(Event::Init);
        for json in objects {
            let lean: LeanIngress = serde_json::from_slice(json).expect("an Ingress");
            let admits = |namespace: &str, class: Option<&str>| self.filter.admits(namespace, class);
            if let Projected::Keep(key, stored) =
                kind::project_kept::<Ingresses>(lean, &self.metrics, &self.interner, admits)
            {
                self.held.apply(Event::InitApply((key, stored)));
            }
        }
        self.held.apply(Event::InitDone);
        self.held.len()
    }
}
