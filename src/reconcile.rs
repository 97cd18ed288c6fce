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
//! never patch.

pub(crate) mod leader;

use std::{
    borrow::Cow,
    collections::{HashMap, HashSet, VecDeque},
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use futures::StreamExt;
use k8s_openapi::{NamespaceResourceScope, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kube::{
    Api, Client, Resource,
    api::{Patch, PatchParams},
    runtime::{WatchStreamExt, watcher},
};
use serde::{Deserialize, Deserializer};
use tokio::sync::{Notify, Semaphore, watch};

use crate::{
    address::{Address, Addresses},
    decision::{Action, StatusWrite, Verdict, decide},
    metrics::Metrics,
    policy::Policies,
    policy::store::PolicyStore,
    sources::Sources,
};

/// Field manager (and so audit-log identity of the change) of the reconciler's patches.
pub(crate) const FIELD_MANAGER: &str = "ingress-status-guard";
/// A 409 is retried on a fresh read this many times before the Ingress is backed off.
const CONFLICT_RETRIES: u32 = 3;
const BACKOFF_BASE: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(300);
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

/// An Ingress as the reconciler reads it from the API server: [`StatusWrite`]'s fields and
/// the resourceVersion. Implements [`Resource`] so kube's watcher and `Api` deliver it directly.
#[derive(Clone, Debug)]
pub(crate) struct LeanIngress {
    meta: ObjectMeta,
    class: Option<String>,
    addresses: Vec<Address>,
}

impl Resource for LeanIngress {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Ingress".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "networking.k8s.io".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "ingresses".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

impl<'de> Deserialize<'de> for LeanIngress {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            metadata: Option<WireMeta>,
            spec: Option<WireSpec>,
            status: Option<WireStatus>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct WireMeta {
            name: Option<String>,
            namespace: Option<String>,
            resource_version: Option<String>,
            #[serde(default, deserialize_with = "crate::review::class_annotation")]
            annotations: Option<String>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct WireSpec {
            ingress_class_name: Option<String>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct WireStatus {
            load_balancer: Option<WireLoadBalancer>,
        }
        #[derive(Deserialize)]
        struct WireLoadBalancer {
            ingress: Option<Vec<Address>>,
        }
        let wire = Wire::deserialize(d)?;
        let (name, namespace, resource_version, annotation) = match wire.metadata {
            Some(m) => (m.name, m.namespace, m.resource_version, m.annotations),
            None => (None, None, None, None),
        };
        Ok(LeanIngress {
            meta: ObjectMeta { name, namespace, resource_version, ..ObjectMeta::default() },
            class: wire.spec.and_then(|s| s.ingress_class_name).or(annotation),
            addresses: wire.status.and_then(|s| s.load_balancer).and_then(|lb| lb.ingress).unwrap_or_default(),
        })
    }
}

type Key = (String, String);

/// What is kept per Ingress.
struct Stored {
    write: StatusWrite,
    resource_version: Option<String>,
}

impl Stored {
    fn from(obj: LeanIngress) -> Option<(Key, Stored)> {
        let namespace = obj.meta.namespace?;
        let name = obj.meta.name?;
        let key = (namespace.clone(), name.clone());
        let write = StatusWrite { namespace, name, class: obj.class, addresses: obj.addresses };
        Some((key, Stored { write, resource_version: obj.meta.resource_version }))
    }
}

/// What the reconciler thinks of one stored status.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Judgement {
    /// Canonical, not governed, or unresolved: nothing to measure or do.
    Fine,
    /// Off canonical; `patch` unless the policy only audits.
    Drift { policy: String, patch: bool },
}

fn judge(write: &StatusWrite, policies: &Policies, sources: &dyn Sources) -> Judgement {
    match decide(write, policies, sources) {
        Verdict::Mismatch { policy, action, .. } => {
            Judgement::Drift { policy: policy.name.clone(), patch: action != Action::Audit }
        }
        Verdict::Ignored(_) | Verdict::NotGoverned | Verdict::Canonical { .. } | Verdict::Unresolved { .. } => {
            Judgement::Fine
        }
    }
}

#[derive(Default)]
struct State {
    ingresses: HashMap<Key, Stored>,
    /// Keys seen in the current (re-)list, while one is running.
    listing: Option<HashSet<Key>>,
    synced: bool,
    /// Off-canonical Ingresses and their policy, and the count per policy.
    drift: HashMap<Key, String>,
    drift_counts: HashMap<String, i64>,
    queue: VecDeque<Key>,
    queued: HashSet<Key>,
    /// Being patched now; a key judged again meanwhile is marked dirty and judged once more
    /// when its patch ends, so one Ingress never has two patches in flight.
    in_flight: HashSet<Key>,
    dirty: HashSet<Key>,
    /// Consecutive failures, and whether a delayed retry is pending.
    failures: HashMap<Key, u32>,
    backing_off: HashSet<Key>,
}

/// The reconciler's shared state; see the module documentation.
pub(crate) struct Reconciler {
    state: Mutex<State>,
    work: Notify,
    policies: Arc<PolicyStore>,
    sources: Arc<dyn Sources>,
    metrics: Arc<Metrics>,
    settings: Settings,
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
/// `sources_changed` ticks when some source's addresses change. Must be called inside a tokio
/// runtime.
pub(crate) fn start(
    client: Client,
    policies: Arc<PolicyStore>,
    sources: Arc<dyn Sources>,
    sources_changed: watch::Receiver<u64>,
    leader: watch::Receiver<bool>,
    metrics: Arc<Metrics>,
    settings: Settings,
) -> Running {
    let reconciler = Arc::new(Reconciler {
        state: Mutex::new(State::default()),
        work: Notify::new(),
        policies: policies.clone(),
        sources,
        metrics,
        settings,
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
        let mut events = watcher(api, watcher::Config::default()).default_backoff().boxed();
        let mut failing = false;
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => {
                    if failing {
                        tracing::info!("Ingress watch recovered");
                        failing = false;
                    }
                    self.on_event(event);
                }
                Err(e) => {
                    self.metrics.ingress_watch_error();
                    // The watcher backs off; one line per failure streak, not per retry.
                    if !failing {
                        tracing::warn!(error = %e, "Ingress watch failed; retrying with backoff (admission keeps working from its caches)");
                        failing = true;
                    }
                }
            }
        }
    }

    fn on_event(&self, event: watcher::Event<LeanIngress>) {
        match event {
            watcher::Event::Init => self.lock().listing = Some(HashSet::new()),
            watcher::Event::InitApply(obj) => {
                if let Some((key, stored)) = Stored::from(obj) {
                    let mut state = self.lock();
                    if let Some(listing) = &mut state.listing {
                        listing.insert(key.clone());
                    }
                    state.ingresses.insert(key, stored);
                }
            }
            watcher::Event::InitDone => {
                {
                    let mut state = self.lock();
                    if let Some(listing) = state.listing.take() {
                        state.ingresses.retain(|key, _| listing.contains(key));
                    }
                    if !state.synced {
                        tracing::info!(ingresses = state.ingresses.len(), "Ingress cache synced");
                    }
                    state.synced = true;
                }
                self.resync();
            }
            watcher::Event::Apply(obj) => {
                if let Some((key, stored)) = Stored::from(obj) {
                    self.upsert(key, stored);
                }
            }
            watcher::Event::Delete(obj) => {
                if let Some((key, _)) = Stored::from(obj) {
                    let mut state = self.lock();
                    state.ingresses.remove(&key);
                    state.failures.remove(&key);
                    self.set_drift(&mut state, &key, None);
                }
            }
        }
    }

    /// Stores the latest state of one Ingress and judges it.
    fn upsert(&self, key: Key, stored: Stored) {
        self.store(key, stored, None);
    }

    /// Stores what a request of ours returned, unless the watch has delivered a change since
    /// `seen` (the resourceVersion the request was based on): that change is at least as new,
    /// and a response arriving late must not overwrite it. (Resource versions are only compared
    /// for equality, as the API conventions require.)
    fn upsert_unless_newer(&self, key: Key, seen: Option<&str>, stored: Stored) {
        self.store(key, stored, Some(seen));
    }

    fn store(&self, key: Key, stored: Stored, only_if_at: Option<Option<&str>>) {
        let policies = self.policies.load();
        let judgement = judge(&stored.write, &policies, self.sources.as_ref());
        let mut state = self.lock();
        if let Some(seen) = only_if_at
            && state.ingresses.get(&key).map(|current| current.resource_version.as_deref()) != Some(seen)
        {
            return;
        }
        state.ingresses.insert(key.clone(), stored);
        if !state.synced {
            return;
        }
        self.apply_judgement(&mut state, &key, judgement);
    }

    fn apply_judgement(&self, state: &mut State, key: &Key, judgement: Judgement) {
        match judgement {
            Judgement::Fine => {
                state.failures.remove(key);
                self.set_drift(state, key, None);
            }
            Judgement::Drift { policy, patch } => {
                self.set_drift(state, key, Some(policy));
                if patch {
                    self.enqueue(state, key.clone());
                }
            }
        }
    }

    fn set_drift(&self, state: &mut State, key: &Key, policy: Option<String>) {
        let old = match &policy {
            Some(p) => state.drift.insert(key.clone(), p.clone()),
            None => state.drift.remove(key),
        };
        if old == policy {
            return;
        }
        for (p, delta) in [(old, -1), (policy, 1)] {
            if let Some(p) = p {
                let count = state.drift_counts.entry(p.clone()).or_insert(0);
                *count += delta;
                self.metrics.set_drift(&p, *count);
            }
        }
    }

    fn enqueue(&self, state: &mut State, key: Key) {
        if state.in_flight.contains(&key) {
            state.dirty.insert(key);
            return;
        }
        if state.backing_off.contains(&key) || !state.queued.insert(key.clone()) {
            return;
        }
        state.queue.push_back(key);
        self.work.notify_one();
    }

    /// Judges every stored Ingress again: after the first list, and whenever sources,
    /// policies or leadership change.
    fn resync(&self) {
        let policies = self.policies.load();
        let mut state = self.lock();
        if !state.synced {
            return;
        }
        let judgements: Vec<(Key, Judgement)> = state
            .ingresses
            .iter()
            .map(|(key, stored)| (key.clone(), judge(&stored.write, &policies, self.sources.as_ref())))
            .collect();
        for (key, judgement) in judgements {
            self.apply_judgement(&mut state, &key, judgement);
        }
        // Every policy in force has a series (0 included); those gone lose theirs.
        let in_force: HashSet<&str> = policies.iter().map(|p| p.name.as_str()).collect();
        state.drift_counts.retain(|p, _| {
            let keep = in_force.contains(p.as_str());
            if !keep {
                self.metrics.remove_drift(p);
            }
            keep
        });
        for p in policies.iter() {
            let count = *state.drift_counts.entry(p.name.clone()).or_insert(0);
            self.metrics.set_drift(&p.name, count);
        }
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
                let mut state = self.lock();
                if let Some(key) = state.queue.pop_front() {
                    state.queued.remove(&key);
                    state.in_flight.insert(key.clone());
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
                let mut state = self.lock();
                state.in_flight.remove(&key);
                state.dirty.remove(&key);
                continue;
            }
            let this = self.clone();
            let client = client.clone();
            tokio::spawn(async move {
                let result = this.reconcile_one(&client, &key).await;
                drop(slot);
                this.finish(key, result);
            });
        }
    }

    fn finish(self: &Arc<Self>, key: Key, result: Result<(), ()>) {
        let policies = self.policies.load();
        let mut state = self.lock();
        state.in_flight.remove(&key);
        let recheck = state.dirty.remove(&key);
        if result.is_ok() {
            state.failures.remove(&key);
            if recheck && let Some(stored) = state.ingresses.get(&key) {
                let judgement = judge(&stored.write, &policies, self.sources.as_ref());
                self.apply_judgement(&mut state, &key, judgement);
            }
            return;
        }
        let failures = state.failures.entry(key.clone()).or_insert(0);
        *failures = failures.saturating_add(1);
        let delay = BACKOFF_BASE.saturating_mul(1u32 << (*failures - 1).min(16)).min(BACKOFF_MAX);
        state.backing_off.insert(key.clone());
        drop(state);
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let policies = this.policies.load();
            let mut state = this.lock();
            state.backing_off.remove(&key);
            let judgement = match state.ingresses.get(&key) {
                Some(stored) => judge(&stored.write, &policies, this.sources.as_ref()),
                None => return,
            };
            this.apply_judgement(&mut state, &key, judgement);
        });
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
                    Verdict::Mismatch { policy, action: Action::Rewrite | Action::Deny, canonical } => (
                        policy.name.clone(),
                        stored.write.addresses.clone(),
                        canonical,
                        stored.resource_version.clone(),
                    ),
                    _ => return Ok(()),
                }
            };
            // The resourceVersion makes the patch conditional: it applies only to the state
            // it was decided on.
            let patch = serde_json::json!({
                "metadata": {"resourceVersion": resource_version},
                "status": {"loadBalancer": {"ingress": canonical}},
            });
            match api.patch_status(&key.1, &params, &Patch::Merge(&patch)).await {
                Ok(obj) => {
                    self.metrics.patch(&policy, "patched");
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
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    self.metrics.patch(&policy, "conflict");
                    match api.get(&key.1).await {
                        Ok(fresh) => {
                            if let Some((key, stored)) = Stored::from(fresh) {
                                self.upsert_unless_newer(key, resource_version.as_deref(), stored);
                            }
                        }
                        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
                        Err(e) => {
                            tracing::warn!(ingress = %format!("{}/{}", key.0, key.1), error = %e, "cannot re-read the Ingress after a conflict; backing off");
                            return Err(());
                        }
                    }
                }
                Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
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
mod tests {
    use super::*;
    use crate::{
        address::parse_static_list,
        policy::{ClassScope, Mode, OnUnresolved, Policy, ServiceRef, Source},
        sources::Unresolved,
    };

    #[test]
    fn lean_ingress_reads_only_what_decide_needs() {
        let json = serde_json::json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "42",
                         "annotations": {"kubernetes.io/ingress.class": "legacy", "big": "x".repeat(10_000)},
                         "managedFields": [{"manager": "kubectl"}]},
            "spec": {"rules": [{"host": "a.example"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}, {"hostname": "lb.example"}]}}
        });
        let lean: LeanIngress = serde_json::from_value(json).unwrap();
        assert_eq!(lean.meta.name.as_deref(), Some("web"));
        assert_eq!(lean.meta.namespace.as_deref(), Some("shop"));
        assert_eq!(lean.meta.resource_version.as_deref(), Some("42"));
        assert!(lean.meta.annotations.is_none() && lean.meta.managed_fields.is_none());
        assert_eq!(lean.class.as_deref(), Some("legacy"), "the annotation when there is no ingressClassName");
        assert_eq!(lean.addresses, parse_static_list("192.0.2.1,lb.example").unwrap());

        let cases = [
            (serde_json::json!({"metadata": {"name": "a"}}), None, 0),
            (
                serde_json::json!({"metadata": {"name": "a", "annotations": null}, "spec": null, "status": null}),
                None,
                0,
            ),
            (
                serde_json::json!({"spec": {"ingressClassName": "new"}, "metadata": {"annotations": {"kubernetes.io/ingress.class": "old"}}}),
                Some("new"),
                0,
            ),
            (serde_json::json!({"status": {"loadBalancer": {}}}), None, 0),
            (serde_json::json!({"status": {"loadBalancer": {"ingress": null}}}), None, 0),
        ];
        for (json, class, count) in cases {
            let lean: LeanIngress = serde_json::from_value(json.clone()).unwrap();
            assert_eq!(lean.class.as_deref(), class, "{json}");
            assert_eq!(lean.addresses.len(), count, "{json}");
        }
    }

    struct Fixed(Result<Vec<Address>, Unresolved>);
    impl Sources for Fixed {
        fn service(&self, _: &ServiceRef) -> Result<Vec<Address>, Unresolved> {
            self.0.clone()
        }
    }

    fn policies(mode: Mode) -> Policies {
        Policies::new(vec![Policy {
            name: "p".into(),
            scope: ClassScope { classes: vec!["nginx".into()], ..Default::default() },
            namespace_selector: None,
            sources: vec![Source::Service("ns/lb".parse().unwrap())],
            mode,
            keep_ports: false,
            on_unresolved: OnUnresolved::Allow,
        }])
        .unwrap()
    }

    #[test]
    fn judgements() {
        let lb = Fixed(Ok(parse_static_list("192.0.2.10").unwrap()));
        let missing = Fixed(Err(Unresolved::Missing("ns/lb".parse().unwrap())));
        let write = |class: Option<&str>, list: &str| StatusWrite {
            namespace: "a".into(),
            name: "b".into(),
            class: class.map(String::from),
            addresses: if list.is_empty() { Vec::new() } else { parse_static_list(list).unwrap() },
        };
        let drift = |patch| Judgement::Drift { policy: "p".into(), patch };
        let cases = [
            ("canonical", Mode::Enforce, &lb, write(Some("nginx"), "192.0.2.10"), Judgement::Fine),
            ("stale, enforce", Mode::Enforce, &lb, write(Some("nginx"), "192.0.2.99"), drift(true)),
            ("empty, enforce", Mode::Enforce, &lb, write(Some("nginx"), ""), drift(true)),
            ("stale, deny", Mode::Deny, &lb, write(Some("nginx"), "192.0.2.99"), drift(true)),
            ("stale, audit: measured only", Mode::Audit, &lb, write(Some("nginx"), "192.0.2.99"), drift(false)),
            ("not governed", Mode::Enforce, &lb, write(Some("other"), "192.0.2.99"), Judgement::Fine),
            ("unresolved never patches", Mode::Enforce, &missing, write(Some("nginx"), "192.0.2.99"), Judgement::Fine),
        ];
        for (name, mode, sources, write, want) in cases {
            assert_eq!(judge(&write, &policies(mode), sources), want, "case {name}");
        }
    }

    #[test]
    fn qps_is_bounded() {
        assert!(Settings::new(20.0).is_ok());
        for bad in [0.0, -1.0, f64::NAN, 1e6] {
            assert!(Settings::new(bad).unwrap_err().to_string().starts_with("--reconcile-qps"), "{bad}");
        }
    }
}
