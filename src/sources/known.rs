//! The governed objects the guard knows from its own watches: namespace and name to uid, one
//! index per kind ([`watch()`]). The audit trail writes a Kubernetes Event only about an object
//! in its kind's index, so a forged review naming an object that does not exist (or the wrong
//! uid) can never make the guard write into the cluster. When the reconciler runs, its cache
//! answers instead ([`KnownObjects::fed_by`]): one map per kind, not two.

use std::sync::{Arc, OnceLock, RwLock, Weak};

use kube::{Client, Resource, runtime::watcher};
use tokio::sync::watch;

use crate::{
    kind::Governed,
    policy::store::PolicyStore,
    sources::follow::{self, Change, Hold, Projection},
};

type Key = (String, String);

/// What the index says of the target of a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    /// The namespace, name and uid are an Ingress the watch has seen and not seen deleted.
    Yes,
    /// Not an Ingress the guard knows: no such namespace and name, or another uid.
    No,
    /// The watch has not finished its first list: nobody can tell yet.
    NotSynced,
}

/// A cache that knows the objects of a kind already (the reconciler's): the index asks it.
pub(crate) trait Lookup: Send + Sync {
    /// As [`KnownObjects::check`].
    fn check(&self, namespace: &str, name: &str, uid: Option<&str>) -> Known;
    fn len(&self) -> usize;
}

/// Every kind's index, indexed by [`crate::kind::Kind::index`].
pub(crate) type KnownByKind = [Arc<KnownObjects>; crate::kind::Kind::ALL.len()];

/// One empty index per kind.
pub(crate) fn by_kind() -> KnownByKind {
    crate::kind::Kind::ALL.map(|_| KnownObjects::new())
}

/// The index; shared by the watch that fills it and the Event publisher that asks it.
#[derive(Default)]
pub(crate) struct KnownObjects {
    held: RwLock<Projection<Key, String>>,
    /// The cache that answers instead of `held`, once the reconciler runs.
    fed: OnceLock<Weak<dyn Lookup>>,
    /// Ticks at every change, so a finding about a brand-new Ingress can wait for the watch.
    changed: watch::Sender<u64>,
}

impl std::fmt::Debug for KnownObjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnownObjects").field("objects", &self.len()).field("fed", &self.fed.get().is_some()).finish()
    }
}

impl Hold<Key, String> for KnownObjects {
    fn update<T>(&self, f: impl FnOnce(&mut Projection<Key, String>) -> T) -> T {
        let out = f(&mut self.held.write().unwrap_or_else(std::sync::PoisonError::into_inner));
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
        out
    }
}

impl KnownObjects {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Whether Ingress `namespace/name` with metadata.uid `uid` is known.
    pub(crate) fn check(&self, namespace: &str, name: &str, uid: Option<&str>) -> Known {
        if let Some(fed) = self.fed.get() {
            return fed.upgrade().map_or(Known::NotSynced, |cache| cache.check(namespace, name, uid));
        }
        let held = self.held.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(all) = held.view() else { return Known::NotSynced };
        // The map is keyed by owned strings; a lookup by borrowed ones would need a second map
        // type, and this runs once per Event candidate, not per review.
        match (all.get(&(namespace.to_owned(), name.to_owned())), uid) {
            (Some(known), Some(uid)) if known == uid => Known::Yes,
            _ => Known::No,
        }
    }

    /// Answered by `cache` from now on (the reconciler's), which calls
    /// [`KnownObjects::touched`] at each change.
    pub(crate) fn fed_by(&self, cache: Weak<dyn Lookup>) {
        let _ = self.fed.set(cache);
    }

    /// The cache that answers changed.
    pub(crate) fn touched(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Applies one watch event, as the watch does.
    #[cfg(test)]
    pub(crate) fn apply(&self, event: watcher::Event<(Key, String)>) -> Change<Key, String> {
        self.update(|p| p.apply(event))
    }

    pub(crate) fn len(&self) -> usize {
        if let Some(cache) = self.fed.get().and_then(Weak::upgrade) {
            return cache.len();
        }
        self.held.read().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }
}

/// Keeps `index` current from a watch of every object of kind `K`, until aborted; a kind whose
/// API may not be served is watched from the moment some policy governs it (before, the guard
/// may have no right to list it), and without its CRDs the watch is retried at most
/// [`crate::sources::gateway::RETRY_CAP`] apart while the index stays unsynced. Fed by the
/// reconciler's watch of the kind instead when that runs.
pub(crate) async fn watch<K: Governed>(client: Client, index: Arc<KnownObjects>, policies: Arc<PolicyStore>) {
    let mut changed = policies.subscribe();
    while !follow::wanted::<K>(&policies.load()) {
        if changed.changed().await.is_err() {
            return;
        }
    }
    // Not a metadata-only watch: its `PartialObjectMeta` keeps every annotation (a tenant's
    // 200 KiB ones included) and lists unpaged; the lean reader keeps three strings, paged.
    let project = |object: K::Lean| {
        let meta = object.meta();
        Some(((meta.namespace.clone()?, meta.name.clone()?), meta.uid.clone()?))
    };
    let (kind, index) = (K::KIND.name(), index.as_ref());
    let mut failing = false;
    let hook = |change: Result<Change<Key, String>, watcher::Error>| match change {
        Ok(Change::Listed { first: true, .. }) => {
            failing = false;
            tracing::info!(
                kind,
                objects = index.len(),
                "known-object index synced (Events are written only about these)"
            );
        }
        Ok(_) => failing = false,
        Err(e) => {
            if !failing {
                tracing::warn!(kind, error = %e, "known-object watch failed; retrying with backoff (Events about objects it has not seen are withheld)");
                failing = true;
            }
        }
    };
    // Never notified: what the index keeps does not depend on the policies.
    let relist = tokio::sync::Notify::new();
    follow::follow_all(&client, follow::retry_cap::<K>(), project, index, hook, &relist, |_| {}).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use watcher::Event::{Apply, Delete, Init, InitApply, InitDone};

    fn key(ns: &str, name: &str) -> Key {
        (ns.to_owned(), name.to_owned())
    }

    #[test]
    fn knows_namespace_name_and_uid_once_synced() {
        let index = KnownObjects::default();
        let mut ticks = index.subscribe();
        index.apply(Init);
        index.apply(InitApply((key("ns", "web"), "uid-1".into())));
        assert_eq!(index.check("ns", "web", Some("uid-1")), Known::NotSynced, "a partial list tells nothing");
        index.apply(InitDone);
        assert!(ticks.has_changed().unwrap());
        ticks.mark_unchanged();
        assert_eq!(index.check("ns", "web", Some("uid-1")), Known::Yes);
        assert_eq!(index.check("ns", "web", Some("uid-2")), Known::No, "wrong uid");
        assert_eq!(index.check("ns", "web", None), Known::No, "no uid");
        assert_eq!(index.check("ns", "ghost-0", Some("uid-1")), Known::No, "unknown name");
        assert_eq!(index.check("nowhere", "web", Some("uid-1")), Known::No, "unknown namespace");
        index.apply(Apply((key("ns", "new"), "uid-3".into())));
        assert!(ticks.has_changed().unwrap(), "a change wakes whoever waits for it");
        assert_eq!(index.check("ns", "new", Some("uid-3")), Known::Yes);
        index.apply(Delete((key("ns", "web"), "uid-1".into())));
        assert_eq!(index.check("ns", "web", Some("uid-1")), Known::No, "deleted");
        // Re-created under the same name: a new uid, and the old one is refused.
        index.apply(Apply((key("ns", "web"), "uid-9".into())));
        assert_eq!(index.check("ns", "web", Some("uid-1")), Known::No);
        assert_eq!(index.len(), 2);
    }
}
