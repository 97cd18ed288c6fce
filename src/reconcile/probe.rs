//! The reconciler's cache of Ingresses outside a reconciler, for the memory test of issue 34
//! (`tests/cache_memory.rs`): objects read from JSON by the watch's own reader, projected by
//! the watch's own projection and filter into the same map, as one list delivers them.

use kube::runtime::watcher::{self, Event};

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
    sources::follow::{self, Change, Projected, Projection},
};

/// What one replica's reconciler holds of the Ingresses it has listed.
#[doc(hidden)]
#[derive(Default)]
pub struct IngressCache {
    interner: Shared<Address>,
    held: Projection<Key, Stored<Address>>,
    metrics: Metrics,
    filter: Filter,
    /// Whether [`IngressCache::listed`]'s watch last started streaming (else in pages).
    streamed: bool,
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

    /// Ingresses held.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Whether [`IngressCache::listed`] got its list by streaming (WatchList), not in pages.
    pub fn streamed(&self) -> bool {
        self.streamed
    }

    /// Lists every Ingress of the cluster `client` talks to through the reconciler's own
    /// watch (a streaming list, else its pages and their byte cap; its filter under `policies`,
    /// its projection) until the first list ends; the cache it built. The client is dropped
    /// before it returns.
    pub async fn listed(client: kube::Client, policies: &Policies) -> IngressCache {
        let filter = Filter::of::<Ingresses>(policies, None, None);
        let (interner, metrics) = (Shared::default(), Metrics::default());
        let held = std::sync::RwLock::new(Projection::default());
        let (done, never) = (tokio::sync::Notify::new(), tokio::sync::Notify::new());
        let streamed = std::sync::atomic::AtomicBool::new(false);
        {
            let strategy = |s| streamed.store(s == follow::Strategy::Streaming, std::sync::atomic::Ordering::Relaxed);
            let admits = |namespace: &str, class: Option<&str>| filter.admits(namespace, class);
            let project = |obj| kind::project_kept::<Ingresses>(obj, &metrics, &interner, &admits);
            let hook = |change: Result<Change<Key, Stored<Address>>, watcher::Error>| {
                if let Ok(Change::Listed { .. }) = change {
                    done.notify_one();
                }
            };
            tokio::select! {
                () = follow::follow_all(&client, None, project, &held, hook, &never, strategy) => {}
                () = done.notified() => {}
            }
        }
        drop(client);
        let held = held.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        IngressCache { interner, held, metrics, filter, streamed: streamed.into_inner() }
    }
}
