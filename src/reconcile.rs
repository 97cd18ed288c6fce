//! The reconciler: keeps the stored status addresses of every governed kind canonical between
//! writes (one loop over [`Governed`]: [`kind`]). Every replica watches and measures drift (the
//! `drift_objects` gauge); only the leader ([`crate::reconcile::leader`]) patches.
//!
//! The watch ([`crate::sources::follow`]) keeps per object only what
//! [`crate::decision::decide`] reads ([`cache`]). Work is queued once per object
//! ([`queue::Queue`]), rate limited, bounded in concurrency and backed off per object. A patch
//! carries the resourceVersion it was decided on, so the API server refuses it (409) if the
//! object changed meanwhile; it is then read afresh and decided again. `decide` is the only
//! judge: audit policies and unresolved sources never patch. This module is the async glue;
//! `work` is the leader's loop that patches.
//!
//! It is not a `kube::runtime::Controller`, whose one loop ties the watch to the reconcile of
//! each object: here one watch serves every replica, which all measure drift, while only the
//! leader patches, so patching stops and starts with leadership and the cache stays; a change
//! of a Service, Node or policy re-judges every stored Ingress in one pass under one policy
//! snapshot; and patches are limited in rate (`--reconcile-qps`), not only in concurrency.

mod books;
mod bounds;
mod cache;
mod damping;
mod drift;
mod entering;
mod fights;
mod filter;
mod judge;
mod kind;
pub(crate) mod leader;
#[cfg(feature = "test-support")]
mod probe;
pub(crate) mod queue;
mod release;
mod shrink;
mod work;

use std::{
    sync::{Arc, Mutex, MutexGuard, atomic::AtomicBool, atomic::Ordering},
    time::{Duration, Instant},
};

use kube::Client;
use tokio::sync::{Notify, watch};

use crate::kind::{Governed, Kind, with_kind};
use crate::scope::follow::{Allow, Scope};
use crate::{
    address::Addresses,
    metrics::Metrics,
    policy::Policies,
    policy::store::PolicyStore,
    sources::{
        Sources,
        follow::{self, Change, Hold, Projection},
        known::{Known, KnownByKind, KnownObjects, Lookup},
        owned::{Failures, Tasks},
    },
};
use books::{Books, Gauge};
pub(crate) use bounds::Bounds;
use cache::{Interner, Key, Stored};
use damping::Fight;
use filter::{Filter, Widening};
use judge::Judgement;

#[cfg(feature = "test-support")]
pub use probe::{Bookkeeping, IngressCache, ServiceCache};

/// Field manager (and so audit-log identity of the change) of the reconciler's patches.
pub(crate) const FIELD_MANAGER: &str = "ingress-status-guard";
/// Changes of sources or policies come in bursts (a reload, a Service's status update): wait
/// this long so one full pass covers them.
const COALESCE: Duration = Duration::from_millis(100);

/// Validated reconciler settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Settings {
    /// Patches per second at most (`--reconcile-qps`).
    pub(crate) qps: f64,
    /// Patches in flight at most.
    pub(crate) concurrency: usize,
}

/// A patch rate the reconciler refuses.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("--reconcile-qps {0}: must be between 0.1 and 1000")]
pub(crate) struct QpsError(f64);

impl Settings {
    pub(crate) const DEFAULT_CONCURRENCY: usize = 4;

    pub(crate) fn new(qps: f64) -> Result<Self, QpsError> {
        if !(qps.is_finite() && (0.1..=1000.0).contains(&qps)) {
            return Err(QpsError(qps));
        }
        Ok(Settings { qps, concurrency: Self::DEFAULT_CONCURRENCY })
    }
}

struct State<K: Governed> {
    ingresses: Projection<Key, Stored<K::Entry>>,
    /// Drift, contests, queue, damping and releases of the objects in `ingresses`.
    books: Books<Key>,
}

// By hand: a derive would ask `Write<K::Entry>: Default`, which no projection needs.
impl<K: Governed> Default for State<K> {
    fn default() -> Self {
        State { ingresses: Projection::default(), books: Books::default() }
    }
}

/// The reconciler's shared state for one kind; see the module documentation.
struct Reconciler<K: Governed> {
    state: Mutex<State<K>>,
    work: Notify,
    /// Notified when a release earlier than all pending ones is armed.
    armed: Notify,
    /// The audit trail's index of known Ingresses, fed from this watch when Events are on.
    known: Option<Arc<KnownObjects>>,
    /// The values the stored objects share (namespaces, classes, status lists).
    interner: Mutex<Interner<K::Entry>>,
    /// Which objects the watch keeps ([`filter`]).
    filter: Mutex<Filter>,
    /// Notified when the filter widens beyond Namespaces entering the scope: the watch lists again.
    relist: Notify,
    /// Namespaces entered the scope whose objects are to be listed ([`entering`]).
    entering: entering::Entering,
    /// The scope says no webhook reviews the kind (warned once, until that changes).
    unreviewed: AtomicBool,
    common: Common,
}

/// The audit trail's index of known objects is this cache (each object's uid is kept here).
impl<K: Governed> Lookup for Reconciler<K> {
    fn check(&self, namespace: &str, name: &str, uid: Option<&str>) -> Known {
        let state = self.lock();
        let Some(all) = state.ingresses.view() else { return Known::NotSynced };
        // Once per Event candidate, not per review: the owned key costs two small copies.
        match (all.get(&(namespace.into(), name.into())).and_then(Stored::uid), uid) {
            (Some(known), Some(uid)) if known.is(uid) => Known::Yes,
            _ => Known::No,
        }
    }

    fn len(&self) -> usize {
        self.lock().ingresses.len()
    }
}

impl<K: Governed> Hold<Key, Stored<K::Entry>> for Reconciler<K> {
    fn update<T>(&self, f: impl FnOnce(&mut Projection<Key, Stored<K::Entry>>) -> T) -> T {
        f(&mut self.lock().ingresses)
    }
}

/// Starts every governed kind's watch, the drift measurement and (while `common.leader` is
/// true) the patching, in tasks that report to `failures` and stop when dropped. Must be called
/// inside a tokio runtime.
pub(crate) fn start(common: Common, known: Option<KnownByKind>, failures: Failures) -> Tasks {
    let mut tasks = Tasks::new(failures);
    for kind in Kind::ALL {
        let known = known.as_ref().map(|k| k[kind.index()].clone());
        with_kind!(kind, K => spawn::<K>(&mut tasks, &common, known));
    }
    tasks
}

/// What every kind's reconciler is started with.
#[derive(Clone)]
pub(crate) struct Common {
    pub(crate) client: Client,
    pub(crate) policies: Arc<PolicyStore>,
    pub(crate) sources: Arc<dyn Sources>,
    /// Ticks when some source's addresses change ([`crate::sources::SourceCache::subscribe`], or
    /// what the admission policies enforce in admission policy mode).
    pub(crate) sources_changed: watch::Receiver<u64>,
    /// Whether this replica leads: only the leader patches and reports fights (every replica
    /// holds back the same Ingresses, so a new leader honours the contests it saw as a follower).
    pub(crate) leader: watch::Receiver<bool>,
    pub(crate) metrics: Arc<Metrics>,
    /// The bounds of `--reconcile-*` settings, shared by every kind ([`Bounds::new`]).
    pub(crate) bounds: Arc<Bounds>,
    /// The Namespaces the guard's webhook configuration selects ([`crate::scope`]).
    pub(crate) scope: Arc<Scope>,
}

/// Starts one kind's watch, triggers, release timer and work loop.
fn spawn<K: Governed>(tasks: &mut Tasks, common: &Common, known: Option<Arc<KnownObjects>>) {
    let reconciler = Arc::new(Reconciler::<K> {
        state: Mutex::new(State::default()),
        work: Notify::new(),
        armed: Notify::new(),
        known,
        interner: Mutex::default(),
        filter: Mutex::default(),
        relist: Notify::new(),
        entering: entering::Entering::default(),
        unreviewed: AtomicBool::new(false),
        common: common.clone(),
    });
    if let Some(known) = &reconciler.known {
        let cache: Arc<dyn Lookup> = reconciler.clone();
        known.fed_by(Arc::downgrade(&cache));
    }
    let triggers = reconciler.clone().triggers(
        [common.sources_changed.clone(), common.policies.subscribe(), common.scope.subscribe()],
        common.leader.clone(),
    );
    let kind = K::KIND.name();
    tasks.spawn(format!("reconciler's {kind} watch"), reconciler.clone().watch());
    tasks.spawn(format!("reconciler's {kind} triggers"), triggers);
    tasks.spawn(format!("reconciler's {kind} releases"), reconciler.clone().releases());
    tasks.spawn(format!("reconciler's {kind} Namespace lists"), reconciler.clone().list_entering());
    tasks.spawn(format!("reconciler's {kind} work loop"), reconciler.work_loop());
}

/// Waits for the next change of `rx`; never returns once its sender is gone.
async fn changed<T>(rx: &mut watch::Receiver<T>) {
    if rx.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

impl<K: Governed> Reconciler<K> {
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // Every update below leaves the state consistent at each step.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Follows every object of the kind, once [`follow::wanted`] by the policies, keeping
    /// those the [`Filter`] admits; lists again whenever it widens.
    async fn watch(self: Arc<Self>) {
        let mut policies = self.common.policies.subscribe();
        while !follow::wanted::<K>(&self.common.policies.load()) {
            changed(&mut policies).await;
        }
        self.refilter(&mut self.lock(), &self.common.policies.load());
        let mut failing = false;
        let admits = |namespace: &str, class: Option<&str>| self.filter().admits(namespace, class);
        let project = |obj| kind::project_kept::<K>(obj, &self.common.metrics, &self.interner, &admits);
        let hook = |change| match change {
            Ok(change) => {
                if failing {
                    tracing::info!("{} watch recovered", K::KIND.name());
                    failing = false;
                }
                self.on_change(change);
            }
            Err(e) => {
                // The watcher backs off; one line per failure streak, not per retry.
                kind::watch_failed::<K>(&e, &self.common.metrics, !failing);
                failing = true;
            }
        };
        let (client, metrics) = (&self.common.client, &self.common.metrics);
        let strategy = |s| metrics.set_list_streaming(K::KIND.info().plural, s == follow::Strategy::Streaming);
        follow::follow_all(client, follow::retry_cap::<K>(), project, self.as_ref(), hook, &self.relist, strategy)
            .await;
    }

    fn filter(&self) -> MutexGuard<'_, Filter> {
        // A filter is replaced whole: a panic cannot leave half of one.
        self.filter.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps the [`Filter`] current: what a narrower one rejects is forgotten at once; what a wider
    /// one admits was never kept, so the Namespaces entering the scope, or every object, are listed.
    fn refilter(&self, state: &mut State<K>, policies: &Policies) {
        let unreviewed = !self.common.scope.reviews(K::KIND);
        let warned = self.unreviewed.swap(unreviewed, Ordering::Relaxed);
        if unreviewed && !warned {
            tracing::warn!(kind = K::KIND.name(), "{}", crate::scope::unreviewed(K::KIND));
        }
        let classes = self.common.sources.classes(K::KIND);
        let new = Filter::of::<K>(policies, classes.as_ref(), self.common.scope.namespaces(K::KIND));
        let old = std::mem::replace(&mut *self.filter(), new.clone());
        if old == new {
            return;
        }
        match new.widening(&old) {
            Widening::None => {}
            Widening::Namespaces(names) => self.entering.add(names),
            Widening::Everywhere => {
                tracing::info!(
                    kind = K::KIND.name(),
                    "the objects kept widened (policies, classes or scope changed): listing them again"
                );
                self.relist.notify_one();
            }
        }
        let rejected: Vec<Key> =
            state.ingresses.iter().filter(|(k, v)| !new.admits(&k.0, v.class())).map(|(k, _)| k.clone()).collect();
        for key in &rejected {
            state.ingresses.remove(key.clone());
            self.forget(state, key);
        }
        if let Some(known) = self.known.as_ref().filter(|_| !rejected.is_empty()) {
            known.touched();
        }
    }

    fn on_change(&self, change: Change<Key, Stored<K::Entry>>) {
        match change {
            Change::Listing => {}
            Change::Listed { first, dropped } => {
                let objects = self.lock().ingresses.len();
                if first {
                    tracing::info!(objects, "{} cache synced", K::KIND.name());
                } else {
                    tracing::info!(objects, dropped = dropped.len(), "{} cache listed again", K::KIND.name());
                }
                let mut state = self.lock();
                for key in &dropped {
                    self.forget(&mut state, key);
                }
                if let Some(known) = &self.known {
                    known.touched();
                }
                drop(state);
                self.resync();
            }
            Change::Applied { key, old } => {
                let policies = self.common.policies.load();
                let mut state = self.lock();
                if let Some(known) = &self.known {
                    known.touched();
                }
                if state.ingresses.synced() {
                    // Another writer's change of the addresses (ours are canonical; a creation has none).
                    let foreign = old.zip(state.ingresses.get(&key)).is_some_and(|(old, new)| {
                        !crate::address::same_set(&K::seen(&old.addresses()), &K::seen(&new.addresses()))
                    });
                    self.rejudge(&mut state, &key, &policies, foreign);
                }
            }
            Change::Deleted { key, .. } => {
                let mut state = self.lock();
                if let Some(known) = &self.known {
                    known.touched();
                }
                self.forget(&mut state, &key);
            }
        }
    }

    /// [`kind::judge`] within the webhook's scope: outside it an object is not the guard's (as
    /// at admission), and while the scope is unknown drift is measured but never patched.
    fn judge(&self, key: &Key, stored: &Stored<K::Entry>, policies: &Policies) -> Judgement {
        let write = stored.write(key);
        match (
            self.common.scope.allows(K::KIND, &key.0),
            kind::judge::<K>(&write, policies, self.common.sources.as_ref()),
        ) {
            (Allow::Yes, judgement) => judgement,
            (Allow::No, _) => Judgement::Fine,
            (Allow::Unknown, Judgement::Drift { policy, .. }) => Judgement::Drift { policy, patch: false },
            (Allow::Unknown, fine) => fine,
        }
    }

    /// Forgets an Ingress that is gone (deleted, or not returned by a re-list).
    fn forget(&self, state: &mut State<K>, key: &Key) {
        state.books.forget(key, &mut |g, p, n| self.gauge(g, p, n));
    }

    /// Judges one stored object again, if still there; `foreign`: another writer just changed it.
    fn rejudge(&self, state: &mut State<K>, key: &Key, policies: &Policies, foreign: bool) {
        let Some(stored) = state.ingresses.get(key) else { return };
        let judgement = self.judge(key, stored, policies);
        self.book(&state.ingresses, &mut state.books, key, &judgement, foreign);
    }

    /// Stores and judges what a request of ours returned, unless the watch has delivered a change
    /// since `seen` (the resourceVersion the request was based on), which is at least as new.
    /// (Resource versions are only compared for equality, as the API conventions require.)
    fn upsert_unless_newer(&self, obj: K::Lean, seen: Option<&str>) {
        let Some((key, stored)) = kind::project::<K>(obj, &self.common.metrics, &self.interner) else { return };
        let policies = self.common.policies.load();
        let judgement = self.judge(&key, &stored, &policies);
        let mut state = self.lock();
        let Some(current) = state.ingresses.get(&key) else { return };
        if current.resource_version().as_deref() != seen {
            return;
        }
        // Changed addresses off canonical are another writer's (a 409's fresh read sees them first).
        let foreign = !crate::address::same_set(&K::seen(&current.addresses()), &K::seen(&stored.addresses()));
        state.ingresses.insert(key.clone(), stored);
        if !state.ingresses.synced() {
            return;
        }
        let State { ingresses, books } = &mut *state;
        self.book(ingresses, books, &key, &judgement, foreign);
    }

    /// Books `judgement` of `key` ([`Books::judged`]) and does what it says.
    fn book(
        &self,
        ingresses: &Projection<Key, Stored<K::Entry>>,
        books: &mut Books<Key>,
        key: &Key,
        judgement: &Judgement,
        foreign: bool,
    ) {
        let now = tokio::time::Instant::now().into_std();
        let leading = *self.common.leader.borrow();
        // Damping compares the stored addresses only when it may patch; every caller judged
        // the object from the cache just now, so it is there.
        let addresses = match judgement {
            Judgement::Drift { patch: true, .. } => ingresses.get(key).map(Stored::addresses).unwrap_or_default(),
            _ => Vec::new(),
        };
        let seen = K::seen(&addresses);
        let effects = books.judged(key, judgement, &seen, foreign, leading, now, &mut |g, p, n| self.gauge(g, p, n));
        if let (Some((fight, full)), Some(stored), Judgement::Drift { policy, .. }) =
            (effects.fight, ingresses.get(key), judgement)
        {
            self.report_fight(key, stored, policy, &fight, full);
        }
        if effects.armed {
            self.armed.notify_one();
        }
        if effects.wake {
            self.work.notify_one();
        }
    }

    fn gauge(&self, gauge: Gauge, policy: &str, count: i64) {
        match gauge {
            Gauge::Drift => self.common.metrics.set_drift(K::KIND, policy, count),
            Gauge::Contested => self.common.metrics.set_contested(policy, count),
        }
    }

    /// One count per fight, and its WARN line if `full` (else [`Reconciler::summarise_fights`]).
    fn report_fight(&self, key: &Key, stored: &Stored<K::Entry>, policy: &str, fight: &Fight, full: bool) {
        self.common.metrics.reconcile_fight(policy);
        if !full {
            return;
        }
        let writers: Vec<&str> = stored.status_managers().collect();
        let writers = if writers.is_empty() { "unknown".to_owned() } else { writers.join(",") };
        let hint = if stored.status_managers().any(|m| m == FIELD_MANAGER) {
            " (ingress-status-guard is among them: another guard, or a replica with other policies, writes too)"
        } else {
            ""
        };
        tracing::warn!(
            kind = K::KIND.name(),
            ingress = %format!("{}/{}", key.0, key.1),
            policy = %policy,
            wrote = %Addresses(&fight.wrote),
            replaced_by = %Addresses(&K::seen(&stored.addresses())),
            writers = %writers,
            fights = fight.count,
            hold_seconds = fight.hold.as_secs(),
            cause = fight.cause.describe(),
            "another writer keeps replacing the canonical status: backing off instead of fighting{hint}; the webhook should be stopping these writes (is it registered and reachable?)"
        );
    }

    /// One WARN line per policy whose fights of the window ended were not all logged in full.
    fn summarise_fights(state: &mut State<K>, now: Instant) {
        for quiet in state.books.fights.due(now) {
            tracing::warn!(
                kind = K::KIND.name(),
                policy = %quiet.policy,
                fights = quiet.fights,
                window_seconds = fights::WINDOW.as_secs(),
                logged_in_full = fights::FULL_PER_WINDOW,
                "more fights under this policy than are logged one by one: counted here (and in reconcile_fights_total); other writers keep replacing the canonical status"
            );
        }
    }

    /// Releases each held key at its instant ([`release::run`]): one task for all of them.
    async fn releases(self: Arc<Self>) {
        let next = || self.lock().books.releases.next();
        let fire = |now| {
            let policies = self.common.policies.load();
            let mut state = self.lock();
            for key in state.books.releases.due(now) {
                state.books.queue.release(&key);
                self.rejudge(&mut state, &key, &policies, false);
            }
            Self::summarise_fights(&mut state, now);
        };
        release::run(&self.armed, next, fire).await;
    }

    /// Judges every stored object again: after a list, and on [`Reconciler::triggers`].
    fn resync(&self) {
        let policies = self.common.policies.load();
        let mut state = self.lock();
        self.refilter(&mut state, &policies);
        if !state.ingresses.synced() {
            return;
        }
        // Booked as judged, not collected first: a list of every object's key and judgement
        // would be one more peak of a heal of all of them.
        let State { ingresses, books } = &mut *state;
        for (key, stored) in ingresses.iter() {
            let judgement = self.judge(key, stored, &policies);
            self.book(ingresses, books, key, &judgement, false);
        }
        let now = tokio::time::Instant::now().into_std();
        state.books.damping.prune(now);
        Self::summarise_fights(&mut state, now);
        let in_force: Vec<_> = policies.of(K::KIND).map(|p| p.name.as_str()).collect();
        state.books.drift.publish(
            &in_force,
            |p, count| self.common.metrics.set_drift(K::KIND, p, count),
            |p| self.common.metrics.remove_drift(K::KIND, p),
        );
        state.books.contested.publish(
            &in_force,
            |p, count| self.common.metrics.set_contested(p, count),
            |p| self.common.metrics.remove_contested(p),
        );
        let drifted = state.books.drift.len();
        let queued = state.books.queue.len();
        drop(state);
        tracing::debug!(kind = K::KIND.name(), drifted, queued, "reconciler pass");
    }

    /// Judges everything again when a source, the policies, the scope or leadership change.
    async fn triggers(self: Arc<Self>, mut changes: [watch::Receiver<u64>; 3], mut leader: watch::Receiver<bool>) {
        loop {
            let [sources, policies, scope] = &mut changes;
            tokio::select! {
                () = changed(sources) => {}
                () = changed(policies) => {}
                () = changed(scope) => {}
                () = changed(&mut leader) => {}
            }
            tokio::time::sleep(COALESCE).await;
            for rx in &mut changes {
                rx.mark_unchanged();
            }
            self.resync();
        }
    }
}

#[cfg(test)]
mod tests;
