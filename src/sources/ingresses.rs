//! The Ingresses the guard knows from its own watch: namespace and name to uid, nothing more
//! (and, in an index of the same type, the Gateways: [`watch_gateways`]).
//! The audit trail writes a Kubernetes Event only about an Ingress in here, so a forged review
//! naming an Ingress that does not exist (or the right name with the wrong uid) can never make
//! the guard write into the cluster. Fed by a watch of its own ([`watch()`]) through the
//! reconciler's bounded reader ([`LeanIngress`]), in small pages, so each Ingress costs its
//! three strings and a list costs one page, whatever their annotations hold.

use std::sync::{Arc, RwLock};

use kube::{Api, Client, Resource, runtime::watcher};
use tokio::sync::watch;

use crate::{
    kind::gateway::LeanGateway,
    kind::ingress::LeanIngress,
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

/// The index; shared by the watch that fills it and the Event publisher that asks it.
#[derive(Debug)]
pub(crate) struct KnownIngresses {
    held: RwLock<Projection<Key, String>>,
    /// Ticks at every change, so a finding about an Ingress created a moment ago can wait for
    /// the watch to deliver it.
    changed: watch::Sender<u64>,
}

impl Default for KnownIngresses {
    fn default() -> Self {
        KnownIngresses { held: RwLock::default(), changed: watch::Sender::new(0) }
    }
}

impl Hold<Key, String> for KnownIngresses {
    fn update<T>(&self, f: impl FnOnce(&mut Projection<Key, String>) -> T) -> T {
        // Every event leaves the projection consistent: a panic cannot leave half of one.
        let out = f(&mut self.held.write().unwrap_or_else(std::sync::PoisonError::into_inner));
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
        out
    }
}

impl KnownIngresses {
    /// An empty index, not synced.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Whether Ingress `namespace/name` with metadata.uid `uid` is known.
    pub(crate) fn check(&self, namespace: &str, name: &str, uid: Option<&str>) -> Known {
        let held = self.held.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(all) = held.view() else { return Known::NotSynced };
        // The map is keyed by owned strings; a lookup by borrowed ones would need a second map
        // type, and this runs once per Event candidate, not per review.
        match (all.get(&(namespace.to_owned(), name.to_owned())), uid) {
            (Some(known), Some(uid)) if known == uid => Known::Yes,
            _ => Known::No,
        }
    }

    /// Fed by the reconciler's watch instead of one of its own (one list of every Ingress per
    /// replica, not two): what a (re-)list left, whole.
    pub(crate) fn relisted(&self, all: impl Iterator<Item = (Key, String)>) {
        self.update(|p| {
            p.apply(watcher::Event::Init);
            for known in all {
                p.apply(watcher::Event::InitApply(known));
            }
            p.apply(watcher::Event::InitDone)
        });
    }

    /// Fed by the reconciler's watch: `key` added or modified, now with `uid`.
    pub(crate) fn applied(&self, key: Key, uid: String) {
        self.update(|p| p.apply(watcher::Event::Apply((key, uid))));
    }

    /// Fed by the reconciler's watch: `key` deleted.
    pub(crate) fn deleted(&self, key: Key) {
        self.update(|p| p.apply(watcher::Event::Delete((key, String::new()))));
    }

    /// Ticks whenever the index changes.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Applies one watch event, as the watch does.
    #[cfg(test)]
    pub(crate) fn apply(&self, event: watcher::Event<(Key, String)>) -> Change<Key, String> {
        self.update(|p| p.apply(event))
    }

    /// How many Ingresses are known.
    pub(crate) fn len(&self) -> usize {
        self.held.read().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }
}

/// Keeps `index` current from a watch of every Gateway, until aborted, from the moment some
/// policy governs Gateways (before, the guard may have no right to list them): the index of
/// Gateways that Events about Gateways are checked against, when the reconciler's Gateway
/// watch (which feeds it otherwise) does not run. Without the Gateway API CRDs the watch is
/// retried at most [`crate::sources::gateway::RETRY_CAP`] apart, and the index stays unsynced.
pub(crate) async fn watch_gateways(client: Client, index: Arc<KnownIngresses>, policies: Arc<PolicyStore>) {
    let mut changed = policies.subscribe();
    while policies.load().gateway_policies().next().is_none() {
        if changed.changed().await.is_err() {
            return;
        }
    }
    let api: Api<LeanGateway> = Api::all(client);
    follow_known(api, &index, "Gateway", Some(crate::sources::gateway::RETRY_CAP)).await;
}

/// Keeps `index` current from a watch of every Ingress, until aborted.
pub(crate) async fn watch(client: Client, index: Arc<KnownIngresses>) {
    // Not a metadata-only watch: its `PartialObjectMeta` keeps every annotation (a tenant's
    // 200 KiB ones included) and lists unpaged; the lean reader keeps three strings, paged.
    let api: Api<LeanIngress> = Api::all(client);
    follow_known(api, &index, "Ingress", None).await;
}

/// Follows every object of `api`'s lean kind into `index` (namespace and name to uid), in
/// small pages; retried at most `cap` apart when set (a kind whose CRDs may be missing).
async fn follow_known<R>(api: Api<R>, index: &KnownIngresses, kind: &'static str, cap: Option<std::time::Duration>)
where
    R: Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let config = watcher::Config::default()
        .page_size(crate::kind::ingress::LIST_PAGE)
        .list_semantic(watcher::ListSemantic::MostRecent);
    let project = |object: R| {
        let meta = object.meta();
        Some(((meta.namespace.clone()?, meta.name.clone()?), meta.uid.clone()?))
    };
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
    match cap {
        None => follow::follow(api, config, project, index, hook).await,
        Some(cap) => follow::follow_capped(api, config, cap, project, index, hook).await,
    }
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
        let index = KnownIngresses::default();
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
