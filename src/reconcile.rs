//! The reconciler: keeps the stored `status.loadBalancer.ingress` of governed Ingresses
//! canonical between writes. Every replica watches the Ingresses and measures drift (the
//! `drift_ingresses` gauge); only the leader ([`crate::reconcile::leader`]) patches.
//!
//! The watch keeps, per Ingress, only what [`decide`] reads (namespace, name, class, stored
//! addresses) plus the resourceVersion, deserialized straight from the watch stream into a
//! small struct: annotations other than the class, the spec's rules and managedFields are
//! skipped unparsed.
//!
//! Work is queued (one entry per Ingress, however often it changes), rate limited, bounded in
//! concurrency and backed off per object. A patch carries the resourceVersion it was decided on,
//! so the API server refuses it (409) if the Ingress changed meanwhile; the Ingress is then read
//! afresh and decided again. `decide` is the only judge: audit policies and unresolved sources
//! never patch. The watch is a [`crate::sources::follow`] follower like every other, the queue
//! the pure [`queue::Queue`]; this module is the async glue between them.
//!
//! It is not a `kube::runtime::Controller`, whose one loop ties the watch to the reconcile of
//! each object: here one watch serves every replica, which all measure drift, while only the
//! leader patches, so patching stops and starts with leadership and the cache stays; a change
//! of a Service, Node or policy re-judges every stored Ingress in one pass under one policy
//! snapshot; and patches are limited in rate (`--reconcile-qps`), not only in concurrency.

mod damping;
mod drift;
mod judge;
pub(crate) mod leader;
pub(crate) mod queue;

use std::{
    sync::{Arc, Mutex, MutexGuard, Weak},
    time::{Duration, Instant},
};

use kube::{
    Api, Client,
    api::{Patch, PatchParams},
    runtime::watcher,
};
use tokio::sync::{Notify, Semaphore, watch};

use crate::{
    address::Addresses,
    client::{CALL_TIMEOUT, CallError, within},
    decision::{Action, Verdict, decide},
    ingress::{LeanIngress, StatusWrite, bounded},
    metrics::Metrics,
    policy::Policies,
    policy::store::PolicyStore,
    sources::{
        Sources,
        follow::{self, Change, Hold, Projection},
        ingresses::KnownIngresses,
    },
};
use damping::{Damping, Fight, Step};
use drift::Drift;
use judge::{Judgement, judge, knows_enough};
use queue::{After, Queue};

/// Field manager (and so audit-log identity of the change) of the reconciler's patches.
pub(crate) const FIELD_MANAGER: &str = "ingress-status-guard";
/// A 409 is retried on a fresh read this many times before the Ingress is backed off.
const CONFLICT_RETRIES: u32 = 3;
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

type Key = (String, String);

/// What is kept per Ingress.
struct Stored {
    write: StatusWrite,
    resource_version: Option<String>,
    /// The field managers that wrote the status, latest first (bounded).
    status_managers: Vec<String>,
    /// `metadata.uid`, for the known-Ingress index the audit trail checks Events against.
    uid: Option<String>,
}

impl Stored {
    fn from(obj: LeanIngress) -> Option<(Key, Stored)> {
        let status_managers = obj.status_managers.clone();
        let uid = obj.meta.uid.clone();
        let (write, resource_version) = obj.into_write()?;
        let key = (write.namespace.clone(), write.name.clone());
        Some((key, Stored { write, resource_version, status_managers, uid }))
    }

    /// Which bound of the lean projection this Ingress hit, if any ([`bounded`]).
    fn trimmed(&self) -> [Option<&'static str>; 2] {
        let class = self.write.class.as_deref() == Some(bounded::INVALID_CLASS);
        let overflow = self.write.omitted > 0;
        [class.then_some("class"), overflow.then_some("addresses")]
    }
}

#[derive(Default)]
struct State {
    ingresses: Projection<Key, Stored>,
    drift: Drift<Key>,
    /// The Ingresses held back because other writers keep rewriting them, by policy: the
    /// `reconcile_contested_ingresses` gauge (same bookkeeping as the drift).
    contested: Drift<Key>,
    /// The Ingresses to patch.
    queue: Queue<Key>,
    /// Our recent patches and others' writes per Ingress, which tell a heal from a fight.
    damping: Damping<Key>,
}

/// The reconciler's shared state; see the module documentation.
pub(crate) struct Reconciler {
    /// Itself, for the timers that release an Ingress held back.
    me: Weak<Reconciler>,
    state: Mutex<State>,
    work: Notify,
    policies: Arc<PolicyStore>,
    sources: Arc<dyn Sources>,
    metrics: Arc<Metrics>,
    settings: Settings,
    /// The audit trail's index of known Ingresses, fed from this watch when Events are on.
    known: Option<Arc<KnownIngresses>>,
    /// Whether this replica leads: only the leader reports fights (every replica holds back
    /// the same Ingresses, so a new leader honours the contests it saw as a follower).
    leading: watch::Receiver<bool>,
}

impl Hold<Key, Stored> for Reconciler {
    fn update<T>(&self, f: impl FnOnce(&mut Projection<Key, Stored>) -> T) -> T {
        f(&mut self.lock().ingresses)
    }
}

/// Keeps the reconciler's tasks alive; dropping it stops them.
pub(crate) struct Running {
    tasks: Vec<tokio::task::AbortHandle>,
}

impl Drop for Running {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Starts the Ingress watch, the drift measurement and (while `leader` is true) the patching.
/// `sources_changed` ticks when some source's addresses change (the cache's
/// [`crate::sources::SourceCache::subscribe`], or in admission policy mode what the admission policies enforce).
/// Must be called inside a tokio runtime.
#[allow(clippy::too_many_arguments, reason = "one composition root calls it")]
pub(crate) fn start(
    client: Client,
    policies: Arc<PolicyStore>,
    sources: Arc<dyn Sources>,
    sources_changed: watch::Receiver<u64>,
    leader: watch::Receiver<bool>,
    metrics: Arc<Metrics>,
    settings: Settings,
    known: Option<Arc<KnownIngresses>>,
) -> Running {
    let reconciler = Arc::new_cyclic(|me| Reconciler {
        me: me.clone(),
        state: Mutex::new(State::default()),
        work: Notify::new(),
        policies: policies.clone(),
        sources,
        metrics,
        settings,
        known,
        leading: leader.clone(),
    });
    let tasks = vec![
        tokio::spawn(reconciler.clone().watch_ingresses(client.clone())).abort_handle(),
        tokio::spawn(reconciler.clone().triggers(sources_changed, policies.subscribe(), leader.clone())).abort_handle(),
        tokio::spawn(reconciler.work_loop(client, leader)).abort_handle(),
    ];
    Running { tasks }
}

/// Waits for the next change of `rx`; never returns once its sender is gone.
async fn changed<T>(rx: &mut watch::Receiver<T>) {
    if rx.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

impl Reconciler {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update below leaves the state consistent at each step.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn watch_ingresses(self: Arc<Self>, client: Client) {
        let api: Api<LeanIngress> = Api::all(client);
        let mut failing = false;
        let project = |obj| {
            let projected = Stored::from(obj)?;
            for field in projected.1.trimmed().into_iter().flatten() {
                self.metrics.ingress_cache_trimmed(field);
            }
            Some(projected)
        };
        // Small list pages: a page is held whole while it is parsed, and tenants choose the size
        // of their Ingresses (up to etcd's 1.5 MiB each), so the page bounds the peak. A list
        // at resourceVersion "0" (any) is served whole from the watch cache, ignoring the page
        // size, so the list asks for the most recent state, which pages.
        let config = watcher::Config::default()
            .page_size(crate::ingress::LIST_PAGE)
            .list_semantic(watcher::ListSemantic::MostRecent);
        follow::follow(api, config, project, self.as_ref(), |change| match change {
            Ok(change) => {
                if failing {
                    tracing::info!("Ingress watch recovered");
                    failing = false;
                }
                self.on_change(change);
            }
            Err(e) => {
                self.metrics.ingress_watch_error();
                // The watcher backs off; one line per failure streak, not per retry.
                if !failing {
                    tracing::warn!(error = %e, "Ingress watch failed; retrying with backoff (admission keeps working from its caches)");
                    failing = true;
                }
            }
        })
        .await;
    }

    fn on_change(&self, change: Change<Key, Stored>) {
        match change {
            Change::Listing => {}
            Change::Listed { first, dropped } => {
                if first {
                    tracing::info!(ingresses = self.lock().ingresses.len(), "Ingress cache synced");
                }
                let mut state = self.lock();
                for key in &dropped {
                    self.forget(&mut state, key);
                }
                if let (Some(known), Some(all)) = (&self.known, state.ingresses.view()) {
                    known.relisted(all.iter().filter_map(|(k, s)| Some((k.clone(), s.uid.clone()?))));
                }
                drop(state);
                self.resync();
            }
            Change::Applied { key, old } => {
                let policies = self.policies.load();
                let mut state = self.lock();
                if let (Some(known), Some(uid)) = (&self.known, state.ingresses.get(&key).and_then(|s| s.uid.clone())) {
                    known.applied(key.clone(), uid);
                }
                if state.ingresses.synced() {
                    // Another writer's change of the addresses (ours are canonical; a creation has none).
                    let foreign = old.zip(state.ingresses.get(&key)).is_some_and(|(old, new)| {
                        !crate::address::same_set(&old.write.addresses, &new.write.addresses)
                    });
                    self.rejudge(&mut state, &key, &policies, foreign);
                }
            }
            Change::Deleted { key, .. } => {
                let mut state = self.lock();
                if let Some(known) = &self.known {
                    known.deleted(key.clone());
                }
                self.forget(&mut state, &key);
            }
        }
    }

    /// Forgets an Ingress that is gone (deleted, or not returned by a re-list).
    fn forget(&self, state: &mut State, key: &Key) {
        state.queue.forget(key);
        state.damping.forget(key);
        self.set_drift(state, key, None);
        self.set_contested(state, key, None);
    }

    /// Judges one stored Ingress again, if it is still there; `foreign` when the watch has just
    /// seen another writer change its addresses.
    fn rejudge(&self, state: &mut State, key: &Key, policies: &Policies, foreign: bool) {
        let Some(stored) = state.ingresses.get(key) else { return };
        let judgement = judge(&stored.write, policies, self.sources.as_ref());
        self.apply_judgement(state, key, judgement, foreign);
    }

    /// Stores what a request of ours returned, and judges it, unless the watch has delivered a
    /// change since `seen` (the resourceVersion the request was based on): that change is at
    /// least as new, and a response arriving late must not overwrite it. (Resource versions are
    /// only compared for equality, as the API conventions require.)
    fn upsert_unless_newer(&self, key: Key, seen: Option<&str>, stored: Stored) {
        let policies = self.policies.load();
        let judgement = judge(&stored.write, &policies, self.sources.as_ref());
        let mut state = self.lock();
        let Some(current) = state.ingresses.get(&key) else { return };
        if current.resource_version.as_deref() != seen {
            return;
        }
        // Changed addresses off canonical are another writer's (a 409's fresh read sees them first).
        let foreign = !crate::address::same_set(&current.write.addresses, &stored.write.addresses);
        state.ingresses.insert(key.clone(), stored);
        if !state.ingresses.synced() {
            return;
        }
        self.apply_judgement(&mut state, &key, judgement, foreign);
    }

    fn apply_judgement(&self, state: &mut State, key: &Key, judgement: Judgement, foreign: bool) {
        match judgement {
            Judgement::Fine => {
                state.queue.clear_failures(key);
                state.damping.fine(key);
                self.set_drift(state, key, None);
                self.set_contested(state, key, None);
            }
            Judgement::Drift { policy, patch } => {
                if patch && let Some(stored) = state.ingresses.get(key) {
                    let now = tokio::time::Instant::now().into_std();
                    if foreign {
                        state.damping.foreign_write(key, now);
                    }
                    let policy_contested = state.contested.count(&policy) > 0;
                    match state.damping.step(key, &stored.write.addresses, policy_contested, now) {
                        Step::Patch => self.set_contested(state, key, None),
                        Step::Wait { until, contested, fight } => {
                            if let Some(fight) = fight
                                && *self.leading.borrow()
                            {
                                self.report_fight(key, stored, &policy, &fight);
                            }
                            if state.queue.hold(key) {
                                self.release_at(key.clone(), until);
                            }
                            self.set_contested(state, key, contested.then(|| policy.clone()));
                            self.set_drift(state, key, Some(policy));
                            return;
                        }
                    }
                }
                self.set_drift(state, key, Some(policy));
                if patch && state.queue.enqueue(key.clone()) {
                    self.work.notify_one();
                }
            }
        }
    }

    /// One WARN and one count per fight; the holds bound how often.
    fn report_fight(&self, key: &Key, stored: &Stored, policy: &str, fight: &Fight) {
        self.metrics.reconcile_fight(policy);
        let writers =
            if stored.status_managers.is_empty() { "unknown".to_owned() } else { stored.status_managers.join(",") };
        let hint = if stored.status_managers.iter().any(|m| m == FIELD_MANAGER) {
            " (ingress-status-guard is among them: another guard, or a replica with other policies, writes too)"
        } else {
            ""
        };
        tracing::warn!(
            ingress = %format!("{}/{}", key.0, key.1),
            policy = %policy,
            wrote = %Addresses(&fight.wrote),
            replaced_by = %Addresses(&stored.write.addresses),
            writers = %writers,
            fights = fight.count,
            hold_seconds = fight.hold.as_secs(),
            cause = fight.cause.describe(),
            "another writer keeps replacing the canonical status: backing off instead of fighting{hint}; the webhook should be stopping these writes (is it registered and reachable?)"
        );
    }

    /// Lets `key` be queued again at `at`, and judges it then.
    fn release_at(&self, key: Key, at: Instant) {
        let Some(this) = self.me.upgrade() else { return };
        tokio::spawn(async move {
            tokio::time::sleep_until(at.into()).await;
            let policies = this.policies.load();
            let mut state = this.lock();
            state.queue.release(&key);
            this.rejudge(&mut state, &key, &policies, false);
        });
    }

    fn set_drift(&self, state: &mut State, key: &Key, policy: Option<String>) {
        state.drift.set(key, policy, |p, count| self.metrics.set_drift(p, count));
    }
    fn set_contested(&self, state: &mut State, key: &Key, policy: Option<String>) {
        state.contested.set(key, policy, |p, count| self.metrics.set_contested(p, count));
    }

    /// Judges every stored Ingress again: after the first list, and whenever sources,
    /// policies or leadership change.
    fn resync(&self) {
        let policies = self.policies.load();
        let mut state = self.lock();
        if !state.ingresses.synced() {
            return;
        }
        let judgements: Vec<(Key, Judgement)> = state
            .ingresses
            .iter()
            .map(|(key, stored)| (key.clone(), judge(&stored.write, &policies, self.sources.as_ref())))
            .collect();
        for (key, judgement) in judgements {
            self.apply_judgement(&mut state, &key, judgement, false);
        }
        state.damping.prune(tokio::time::Instant::now().into_std());
        let in_force = policies.iter().map(|p| p.name.as_str()).collect::<Vec<_>>();
        state.drift.publish(&in_force, |p, count| self.metrics.set_drift(p, count), |p| self.metrics.remove_drift(p));
        state.contested.publish(
            &in_force,
            |p, count| self.metrics.set_contested(p, count),
            |p| self.metrics.remove_contested(p),
        );
        let drifted = state.drift.len();
        let queued = state.queue.len();
        drop(state);
        tracing::debug!(drifted, queued, "reconciler pass");
    }

    async fn triggers(
        self: Arc<Self>,
        mut sources: watch::Receiver<u64>,
        mut policies: watch::Receiver<u64>,
        mut leader: watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                () = changed(&mut sources) => {}
                () = changed(&mut policies) => {}
                () = changed(&mut leader) => {}
            }
            tokio::time::sleep(COALESCE).await;
            sources.mark_unchanged();
            policies.mark_unchanged();
            self.resync();
        }
    }

    async fn next_key(&self) -> Key {
        loop {
            {
                if let Some(key) = self.lock().queue.pop() {
                    return key;
                }
            }
            self.work.notified().await;
        }
    }

    async fn work_loop(self: Arc<Self>, client: Client, mut leader: watch::Receiver<bool>) {
        let slots = Arc::new(Semaphore::new(self.settings.concurrency));
        let mut limiter = tokio::time::interval(Duration::from_secs_f64(1.0 / self.settings.qps));
        limiter.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if leader.wait_for(|leading| *leading).await.is_err() {
                return;
            }
            let key = tokio::select! {
                key = self.next_key() => key,
                _ = leader.wait_for(|leading| !*leading) => continue,
            };
            limiter.tick().await;
            let Ok(slot) = slots.clone().acquire_owned().await else { return };
            if !*leader.borrow() {
                // Lost the lead while waiting: the next leader's full pass covers this one.
                self.lock().queue.abandon(&key);
                continue;
            }
            let this = self.clone();
            let client = client.clone();
            let mut lost = leader.clone();
            tokio::spawn(async move {
                // Leadership lost mid-patch: the attempt is cancelled (its request dropped)
                // before the Lease can expire, so a successor never patches beside it.
                let result = tokio::select! {
                    result = this.reconcile_one(&client, &key) => Some(result),
                    _ = lost.wait_for(|leading| !*leading) => None,
                };
                drop(slot);
                match result {
                    Some(result) => this.finish(key, result),
                    None => this.lock().queue.abandon(&key),
                }
            });
        }
    }

    fn finish(self: &Arc<Self>, key: Key, result: Result<(), ()>) {
        let now = tokio::time::Instant::now();
        let policies = self.policies.load();
        let mut state = self.lock();
        match state.queue.done(key.clone(), result.is_ok(), now.into_std()) {
            After::Settled => {}
            After::Recheck => self.rejudge(&mut state, &key, &policies, false),
            After::RetryAt(at) => {
                drop(state);
                self.release_at(key, at);
            }
        }
    }

    /// Patches one Ingress to its canonical status if `decide` still says so. `Err` means the
    /// attempt failed and the Ingress is to be retried after a backoff.
    async fn reconcile_one(&self, client: &Client, key: &Key) -> Result<(), ()> {
        let api: Api<LeanIngress> = Api::namespaced(client.clone(), &key.0);
        let params = PatchParams { field_manager: Some(FIELD_MANAGER.to_owned()), ..PatchParams::default() };
        for _ in 0..=CONFLICT_RETRIES {
            let policies = self.policies.load();
            let (policy, from, canonical, resource_version) = {
                let state = self.lock();
                let Some(stored) = state.ingresses.get(key) else { return Ok(()) };
                match decide(&stored.write, &policies, self.sources.as_ref()) {
                    Verdict::Mismatch { policy, action: Action::Rewrite | Action::Deny, canonical }
                        if knows_enough(policy, &stored.write.addresses, &canonical, self.sources.as_ref()) =>
                    {
                        (
                            policy.name.clone(),
                            stored.write.addresses.clone(),
                            canonical,
                            stored.resource_version.clone(),
                        )
                    }
                    _ => return Ok(()),
                }
            };
            // The resourceVersion makes the patch conditional: it applies only to the state
            // it was decided on.
            let patch = serde_json::json!({
                "metadata": {"resourceVersion": resource_version},
                "status": {"loadBalancer": {"ingress": canonical}},
            });
            match within(CALL_TIMEOUT, api.patch_status(&key.1, &params, &Patch::Merge(&patch))).await {
                Ok(obj) => {
                    self.metrics.patch(&policy, "patched");
                    let now = tokio::time::Instant::now().into_std();
                    self.lock().damping.patched(key, &canonical, now);
                    tracing::info!(
                        ingress = %format!("{}/{}", key.0, key.1),
                        from = %Addresses(&from),
                        to = %Addresses(&canonical),
                        policy = %policy,
                        "reconciled stored status to the canonical addresses"
                    );
                    if let Some((key, stored)) = Stored::from(obj) {
                        self.upsert_unless_newer(key, resource_version.as_deref(), stored);
                    }
                    return Ok(());
                }
                Err(CallError::Api(kube::Error::Api(status))) if status.code == 409 => {
                    self.metrics.patch(&policy, "conflict");
                    match within(CALL_TIMEOUT, api.get(&key.1)).await {
                        Ok(fresh) => {
                            if let Some((key, stored)) = Stored::from(fresh) {
                                self.upsert_unless_newer(key, resource_version.as_deref(), stored);
                            }
                        }
                        Err(CallError::Api(kube::Error::Api(status))) if status.code == 404 => return Ok(()),
                        Err(e) => {
                            tracing::warn!(ingress = %format!("{}/{}", key.0, key.1), error = %e, "cannot re-read the Ingress after a conflict; backing off");
                            return Err(());
                        }
                    }
                }
                Err(CallError::Api(kube::Error::Api(status))) if status.code == 404 => return Ok(()),
                Err(e) => {
                    self.metrics.patch(&policy, "failed");
                    tracing::warn!(ingress = %format!("{}/{}", key.0, key.1), policy = %policy, error = %e, "status patch failed; backing off");
                    return Err(());
                }
            }
        }
        Err(())
    }
}

#[cfg(test)]
mod tests;
