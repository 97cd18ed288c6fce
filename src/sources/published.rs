//! The cache of one kind of publish source (a Service, a Gateway): one watch per object the
//! policies name, field-selected by name, keeping only its addresses. What differs per kind is
//! its wire ([`Publish`]).

use std::{
    collections::HashMap,
    fmt::{Debug, Display},
    hash::Hash,
    sync::{
        Arc, RwLock,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use k8s_openapi::NamespaceResourceScope;
use kube::{Api, Client, Resource, runtime::watcher};
use serde::de::DeserializeOwned;

use super::{
    Unresolved,
    follow::{self, Change, Projection},
    initialized::{Handle, Initialize},
};
use crate::{address::Address, policy::Policies};

/// The wire of one kind of publish source.
pub(crate) trait Publish: Send + Sync + 'static {
    /// How a policy names one source object (`namespace/name`).
    type Ref: Clone + Eq + Hash + Ord + Display + Debug + Send + Sync + 'static;
    /// The object watched, read leanly where it may be large.
    type Object: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + 'static;
    /// What the logs and task names call the kind.
    const KIND: &'static str;
    /// Why an object yields no address to publish.
    type Error: Clone + PartialEq + Display + Debug + Send + Sync + 'static;
    /// `Some` for a kind whose API may not be served yet (a CRD): its watch retries at most
    /// this far apart, and an API server without it leaves the source inactive, not unsynced.
    const RETRY_CAP: Option<Duration>;
    /// The `watch_errors_total` label its watch failures count under, if they are counted.
    const WATCH_METRIC: Option<&'static str>;

    fn refs(policies: &Policies) -> Vec<Self::Ref>;
    /// The namespace and name of `r`.
    fn locate(r: &Self::Ref) -> (&str, &str);
    /// The canonical addresses an object publishes, ports kept.
    fn addresses(object: &Self::Object) -> Result<Vec<Address>, Self::Error>;
    fn unresolved(r: &Self::Ref, why: Why<Self::Error>) -> Unresolved;
    /// Logs `news` about `r` (with the kind's field name: `service=`, `gateway=`).
    fn log(r: &Self::Ref, news: News<'_, Self::Error>);
}

/// Why a lookup of a publish source has no addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Why<E> {
    NotSynced,
    /// The API server does not serve the kind (its CRDs are not installed).
    ApiAbsent,
    Missing,
    Unusable(E),
}

/// What is logged about a publish source.
#[derive(Debug)]
pub(crate) enum News<'a, E> {
    Resolved(&'a [Address]),
    Unusable(&'a E),
    Missing,
    /// The first source to find the kind's API absent (said once until it is back); its watch
    /// retries this far apart.
    ApiAbsent(Duration),
    ApiBack,
    WatchFailed(&'a watcher::Error),
    /// No policy uses the source any more: its watch stopped.
    Stopped,
}

/// The log lines of [`Publish::log`]: `$field` is the kind's field name, `$kind` its name in
/// the messages and `$api` what serves it when it may be absent.
macro_rules! log_news {
    ($field:ident, $kind:literal, $api:literal, $r:expr, $news:expr) => {
        match $news {
            $crate::sources::published::News::Resolved(addrs) => {
                tracing::info!($field = %$r, addresses = %$crate::address::Addresses(addrs), concat!("publish ", $kind, " resolved"));
            }
            $crate::sources::published::News::Unusable(e) => {
                tracing::warn!($field = %$r, error = %e, concat!("publish ", $kind, " has no usable address"));
            }
            $crate::sources::published::News::Missing => {
                tracing::warn!($field = %$r, concat!("publish ", $kind, " not found"));
            }
            $crate::sources::published::News::ApiAbsent(retry_every) => {
                tracing::warn!($field = %$r, retry_every = ?retry_every, concat!("the API server serves no ", $kind, "s (", $api, " are not installed): publish", $kind, " sources are inactive until they appear"));
            }
            $crate::sources::published::News::ApiBack => {
                tracing::info!($field = %$r, concat!("the API server serves ", $kind, "s now: publish", $kind, " source active"));
            }
            $crate::sources::published::News::WatchFailed(e) => {
                tracing::warn!($field = %$r, error = %e, concat!("watch of publish ", $kind, " failed; retrying"));
            }
            $crate::sources::published::News::Stopped => {
                tracing::info!($field = %$r, concat!("stopped watching publish ", $kind, " (no policy uses it)"));
            }
        }
    };
}
pub(crate) use log_news;

/// One source object's addresses, ports kept (policies that drop them strip them at lookup),
/// or why it has none.
type Entry<E> = Result<Vec<Address>, Why<E>>;

/// The publish sources of one kind, each fed by its own watch ([`Published::watch`]).
#[derive(Debug)]
pub(crate) struct Published<P: Publish> {
    entries: RwLock<HashMap<P::Ref, Entry<P::Error>>>,
    /// When each source's watch last heard from the API server.
    heard: RwLock<HashMap<P::Ref, Instant>>,
    /// Whether the "API not served" warning was logged: once, however many sources wait for it.
    absent_logged: AtomicBool,
    /// Each unread source's readiness handle, dropped when its watch first reads it.
    unread: std::sync::Mutex<HashMap<P::Ref, Handle>>,
    initialize: Initialize,
    /// Bumped at every change of an entry.
    generation: Arc<tokio::sync::watch::Sender<u64>>,
}

impl<P: Publish> Published<P> {
    /// The sources `policies` publish, unsynced, each holding a handle of `initialize` until
    /// its watch has read it.
    pub(crate) fn new(
        policies: &Policies,
        generation: Arc<tokio::sync::watch::Sender<u64>>,
        initialize: &Initialize,
    ) -> Self {
        let published = Published {
            entries: RwLock::default(),
            heard: RwLock::default(),
            absent_logged: AtomicBool::new(false),
            unread: std::sync::Mutex::default(),
            initialize: initialize.clone(),
            generation,
        };
        published.track(&P::refs(policies));
        published
    }

    fn unread(&self) -> std::sync::MutexGuard<'_, HashMap<P::Ref, Handle>> {
        self.unread.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<P::Ref, Entry<P::Error>>> {
        // A panic while holding the lock cannot leave a half-written entry (insert is atomic).
        self.entries.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes the cache hold exactly `refs`: new ones start unsynced, dropped ones are
    /// forgotten. The caller starts and stops their watches.
    pub(crate) fn track(&self, refs: &[P::Ref]) {
        let mut entries = self.entries.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.retain(|r, _| refs.contains(r));
        let mut unread = self.unread();
        unread.retain(|r, _| refs.contains(r));
        for r in refs {
            if let std::collections::hash_map::Entry::Vacant(slot) = entries.entry(r.clone()) {
                slot.insert(Err(Why::NotSynced));
                unread.insert(r.clone(), self.initialize.handle());
            }
        }
        drop(unread);
        self.heard.write().unwrap_or_else(std::sync::PoisonError::into_inner).retain(|r, _| refs.contains(r));
        drop(entries);
        self.generation.send_modify(|g| *g += 1);
    }

    /// Sets `r`'s entry, logging and telling subscribers when it changed.
    fn set(&self, r: &P::Ref, entry: Entry<P::Error>) {
        if entry != Err(Why::NotSynced) {
            self.unread().remove(r);
        }
        let mut entries = self.entries.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        // A watch that outlived its policy (stopped by a reload) must not bring its source back.
        let Some(slot) = entries.get_mut(r) else { return };
        if *slot == entry {
            return;
        }
        match &entry {
            Ok(addrs) => P::log(r, News::Resolved(addrs)),
            Err(Why::Unusable(e)) => P::log(r, News::Unusable(e)),
            Err(Why::Missing) => P::log(r, News::Missing),
            Err(Why::ApiAbsent) => {
                if let Some(cap) = P::RETRY_CAP
                    && !self.absent_logged.swap(true, Ordering::Relaxed)
                {
                    P::log(r, News::ApiAbsent(cap));
                }
            }
            Err(Why::NotSynced) => {}
        }
        if *slot == Err(Why::ApiAbsent) {
            P::log(r, News::ApiBack);
            self.absent_logged.store(false, Ordering::Relaxed);
        }
        *slot = entry;
        drop(entries);
        self.generation.send_modify(|g| *g += 1);
    }

    /// Watches source `r` (field-selected by name) until the task is aborted. Watch errors are
    /// logged (counted through `failed`) and retried; for a kind with a retry cap, a 404 (no
    /// CRDs) marks the source inactive.
    pub(crate) async fn watch(&self, client: Client, r: P::Ref, failed: impl Fn(&'static str)) {
        let (namespace, name) = P::locate(&r);
        let api: Api<P::Object> = Api::namespaced(client, namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        // The field selector leaves one object at most, kept as its addresses.
        let held = RwLock::new(Projection::default());
        let project = |obj: P::Object| Some(((), P::addresses(&obj)));
        follow::follow(api, config, P::RETRY_CAP, project, &held, |change| {
            if change.is_ok() {
                self.heard.write().unwrap_or_else(std::sync::PoisonError::into_inner).insert(r.clone(), Instant::now());
            }
            let held = || held.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(&()).cloned();
            match change {
                // A list shows the object as soon as it returns it; only its end can say the
                // object is missing.
                Ok(Change::Listing) => {
                    if let Some(addresses) = held() {
                        self.set(&r, addresses.map_err(Why::Unusable));
                    }
                }
                Ok(Change::Listed { .. } | Change::Applied { .. } | Change::Deleted { .. }) => {
                    self.set(&r, held().map_or(Err(Why::Missing), |addresses| addresses.map_err(Why::Unusable)));
                }
                Err(e) if P::RETRY_CAP.is_some() && follow::is_api_absent(&e) => self.set(&r, Err(Why::ApiAbsent)),
                Err(e) => {
                    if let Some(watch) = P::WATCH_METRIC {
                        failed(watch);
                    }
                    P::log(&r, News::WatchFailed(&e));
                }
            }
        })
        .await;
    }

    pub(crate) fn lookup(&self, r: &P::Ref) -> Result<Vec<Address>, Unresolved> {
        let entry = self.read().get(r).cloned();
        entry.unwrap_or(Err(Why::NotSynced)).map_err(|why| P::unresolved(r, why))
    }

    /// The sources that are inactive because the API server does not serve their kind.
    pub(crate) fn inactive(&self) -> Vec<P::Ref> {
        let mut inactive: Vec<_> =
            self.read().iter().filter(|(_, e)| **e == Err(Why::ApiAbsent)).map(|(r, _)| r.clone()).collect();
        inactive.sort();
        inactive
    }

    /// `(namespace/name, time since the API server was last heard)` of each watched source.
    pub(crate) fn ages(&self) -> Vec<(String, Duration)> {
        let heard = self.heard.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        heard.iter().map(|(r, at)| (r.to_string(), at.elapsed())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        policy::ServiceRef,
        sources::service::{PublishService, ServiceError},
    };

    fn svc(name: &str) -> ServiceRef {
        ServiceRef { namespace: "ingress".into(), name: name.into() }
    }

    fn cache(services: &[&str], init: &Initialize) -> Published<PublishService> {
        let spec =
            crate::PolicySpec { publish_service: Some(format!("ingress/{}", services[0])), ..Default::default() };
        let published = Published::new(&spec.into_policies().unwrap(), Arc::default(), init);
        published.track(&services.iter().map(|s| svc(s)).collect::<Vec<_>>());
        published
    }

    /// Each source holds readiness until its watch reads it: found, missing or unusable alike;
    /// a source no policy names any more is not waited for.
    #[test]
    fn readiness_waits_for_each_source_to_be_read() {
        let init = Initialize::default();
        let published = cache(&["a", "b", "c"], &init);
        assert_eq!(published.lookup(&svc("a")), Err(Unresolved::NotSynced(svc("a"))));
        published.set(&svc("a"), Ok(vec![Address::parse("192.0.2.1").unwrap()]));
        assert!(!init.initialized(), "b and c are unread");
        published.set(&svc("b"), Err(Why::Unusable(ServiceError::Pending)));
        assert_eq!(published.lookup(&svc("b")), Err(Unresolved::Service(svc("b"), ServiceError::Pending)));
        assert!(!init.initialized(), "c is unread");
        published.track(&[svc("a"), svc("b")]);
        assert!(init.initialized(), "c is no policy's any more");
        assert_eq!(published.lookup(&svc("a")).map(|a| a.len()), Ok(1));
        assert_eq!(published.lookup(&svc("c")), Err(Unresolved::NotSynced(svc("c"))), "forgotten");
        published.set(&svc("c"), Err(Why::Missing));
        assert_eq!(
            published.lookup(&svc("c")),
            Err(Unresolved::NotSynced(svc("c"))),
            "a stopped watch brings nothing back"
        );
    }

    #[test]
    fn a_source_read_missing_is_missing_and_read() {
        let init = Initialize::default();
        let published = cache(&["a"], &init);
        published.set(&svc("a"), Err(Why::Missing));
        assert_eq!(published.lookup(&svc("a")), Err(Unresolved::Missing(svc("a"))));
        assert!(init.initialized());
        assert!(published.inactive().is_empty(), "a Service is never inactive");
    }
}
