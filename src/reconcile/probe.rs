//! The reconciler's caches ([`IngressCache`], [`ServiceCache`]) and bookkeeping ([`Bookkeeping`])
//! outside a reconciler, through its own reader, filter and projection, for the memory and list
//! tests (built only with the `test-support` feature).

use std::{
    net::IpAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use kube::runtime::watcher::{self, Event};

use super::{
    books::Books,
    cache::{Key, Shared, Stored},
    filter::Filter,
    judge::Judgement,
    kind,
    queue::After,
};
use crate::{
    address::Address,
    kind::{
        Governed,
        ingress::Ingresses,
        service::{LoadBalancerIngress, Services},
    },
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
    /// An empty cache that keeps the Ingresses `policies` could govern, as the watch does
    /// (every Namespace in scope; IngressClasses not read, so class-less ones are kept).
    pub fn governed_by(policies: &Policies) -> Self {
        IngressCache { filter: Filter::of::<Ingresses>(policies, None, None), ..Self::default() }
    }

    /// One (re-)list of `objects` (JSON) as the watch applies it; the objects held after it.
    pub fn list<'a>(&mut self, objects: impl IntoIterator<Item = &'a [u8]>) -> usize {
        list_kind::<Ingresses>(&mut self.held, &self.interner, &self.metrics, &self.filter, objects)
    }

    /// Ingresses held.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Whether [`IngressCache::listed`] got its list by streaming (WatchList), not in pages.
    pub fn streamed(&self) -> bool {
        self.streamed
    }

    /// The cache the reconciler's own watch builds of the Ingresses `client` lists under
    /// `policies`, once its first list ends. The client is dropped before it returns.
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

/// One (re-)list of `objects` (kind `K`'s, JSON) applied to `held` as `K`'s watch applies it.
fn list_kind<'a, K: Governed>(
    held: &mut Projection<Key, Stored<K::Entry>>,
    interner: &Shared<K::Entry>,
    metrics: &Metrics,
    filter: &Filter,
    objects: impl IntoIterator<Item = &'a [u8]>,
) -> usize {
    held.apply(Event::Init);
    for json in objects {
        let lean: K::Lean = serde_json::from_slice(json).expect("an object of the kind");
        let admits = |namespace: &str, class: Option<&str>| filter.admits(namespace, class);
        if let Projected::Keep(key, stored) = kind::project_kept::<K>(lean, metrics, interner, admits) {
            held.apply(Event::InitApply((key, stored)));
        }
    }
    held.apply(Event::InitDone);
    held.len()
}

/// What one replica's reconciler holds of the LoadBalancer Services it has listed.
#[doc(hidden)]
#[derive(Default)]
pub struct ServiceCache {
    interner: Shared<LoadBalancerIngress>,
    held: Projection<Key, Stored<LoadBalancerIngress>>,
    metrics: Metrics,
    filter: Filter,
}

impl std::fmt::Debug for ServiceCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceCache").field("objects", &self.held.len()).finish()
    }
}

impl ServiceCache {
    /// An empty cache that keeps the Services `policies` could govern, as the watch does.
    pub fn governed_by(policies: &Policies) -> Self {
        ServiceCache { filter: Filter::of::<Services>(policies, None, None), ..Self::default() }
    }

    /// One (re-)list of `objects` (JSON) as the watch applies it; the objects held after it.
    pub fn list<'a>(&mut self, objects: impl IntoIterator<Item = &'a [u8]>) -> usize {
        list_kind::<Services>(&mut self.held, &self.interner, &self.metrics, &self.filter, objects)
    }
}

/// One kind's bookkeeping ([`super::books`]) of the keys judged, patched and released, as the
/// reconciler's glue drives it; time is a [`Duration`] since the probe was made.
#[doc(hidden)]
#[derive(Debug)]
pub struct Bookkeeping {
    books: Books<Key>,
    start: Instant,
}

impl Default for Bookkeeping {
    fn default() -> Self {
        Bookkeeping { books: Books::default(), start: Instant::now() }
    }
}

impl Bookkeeping {
    pub fn new() -> Self {
        Self::default()
    }

    /// `key`, storing `stored`, judged off canonical under `policy` at `at` (`foreign`: the
    /// watch has just seen another writer write it); `true` if it was queued, `false` if held.
    pub fn drifted(
        &mut self,
        key: &(Arc<str>, Box<str>),
        policy: &str,
        stored: IpAddr,
        foreign: bool,
        at: Duration,
    ) -> bool {
        let judgement = Judgement::Drift { policy: policy.to_owned(), patch: true };
        let now = self.start + at;
        self.books.judged(key, &judgement, &[Address::ip(stored)], foreign, true, now, &mut |_, _, _| {}).wake
    }

    /// The next key to patch, now in flight, refilling the line from `cache` when it runs dry.
    pub fn pop(&mut self, cache: &[Key]) -> Option<(Arc<str>, Box<str>)> {
        if self.books.queue.wants_refill() {
            self.books.refill(cache.iter());
        }
        self.books.queue.pop()
    }

    /// The patch of `key` (in flight) to `wrote` succeeded at `at`, and the response was
    /// judged canonical, as the work loop books it; `true` if the key is settled.
    pub fn patched(&mut self, key: (Arc<str>, Box<str>), wrote: IpAddr, at: Duration) -> bool {
        let now = self.start + at;
        self.books.patched(&key, &[Address::ip(wrote)], now);
        self.books.judged(&key, &Judgement::Fine, &[Address::ip(wrote)], false, true, now, &mut |_, _, _| {});
        self.books.queue.done(key, true, now) == After::Settled
    }

    /// The keys whose release is due at `at`, let queue again (the caller judges them).
    pub fn due(&mut self, at: Duration) -> Vec<(Arc<str>, Box<str>)> {
        let due = self.books.releases.due(self.start + at);
        for key in &due {
            self.books.queue.release(key);
        }
        due
    }

    /// Forgets the records without a write within the hour before `at`, as each full pass does.
    pub fn prune(&mut self, at: Duration) {
        self.books.damping.prune(self.start + at);
    }

    /// Keys drifted, contested, waiting in the queue's line (those past it wait in the
    /// cache), with a queue slot, with a damping record, with a pending release.
    pub fn counts(&self) -> [usize; 6] {
        let b = &self.books;
        [b.drift.len(), b.contested.len(), b.queue.len(), b.queue.tracked(), b.damping.len(), b.releases.len()]
    }
}
