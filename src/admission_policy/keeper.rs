//! The leader's keeper of `--admission=policy`: carries out [`desired`] in the cluster by
//! server-side apply under its own field manager, and deletes what this guard labelled that no
//! policy renders any more. It runs on the changes the reconciler runs on (sources, cluster
//! facts, policy reloads, leadership), coalesced and at most one pass a second, and applies
//! only objects whose rendering changed since its last apply.

use std::{
    collections::{BTreeSet, HashMap},
    sync::Arc,
    time::{Duration, Instant},
};

use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams},
};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
};
use serde_json::Value;
use tokio::sync::watch;

use super::{
    ApiVersion,
    desired::{Desired, OWNER_LABEL, desired},
    enforced::Enforced,
};
use crate::{
    client::{CALL_TIMEOUT, CallError, fenced, within},
    metrics::Metrics,
    policy::{Policies, store::PolicyStore},
    sources::SourceCache,
};

/// Field manager of the applied admission policies: apart from the reconciler's, so the
/// managedFields say which part of the guard wrote what.
pub(crate) const FIELD_MANAGER: &str = "ingress-status-guard-admission-policy";
/// Changes come in bursts (a Service's status, a rollout's Pods): one pass covers them.
const COALESCE: Duration = Duration::from_millis(200);
/// Fewest seconds between two passes, so a source that flaps cannot drive the API server.
const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// A failed pass is tried again after this long (or at the next change).
const RETRY: Duration = Duration::from_secs(5);
/// Everything is applied and swept again this often, which repairs objects that someone else
/// edited or deleted (nothing watches them).
const RESYNC: Duration = Duration::from_secs(300);
/// After an apply, the API server's admission plugin sees the new object once its informer
/// has it; the reconciler judges by the new value only after this, so that its patches do
/// not meet the old one.
const SETTLE: Duration = Duration::from_secs(2);
/// Objects listed per kind when sweeping: far more than any configuration renders.
const LIST_LIMIT: u32 = 500;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

/// What the keeper exports on `/metrics`.
#[derive(Clone, Default)]
pub(crate) struct KeeperMetrics {
    applies: Family<ResultLabel, Counter>,
    lag: Gauge<f64, std::sync::atomic::AtomicU64>,
}

impl KeeperMetrics {
    /// Registers the keeper's metrics in `metrics`.
    pub(crate) fn register(metrics: &mut Metrics) -> Self {
        let this = KeeperMetrics::default();
        metrics.register(
            "admission_policy_applies",
            "Writes of the admission policies and bindings by the leader in --admission=policy, by result (applied, failed, deleted, delete_failed)",
            this.applies.clone(),
        );
        metrics.register(
            "admission_policy_lag_seconds",
            "Seconds since a source or policy changed that the admission policies in the cluster do not show yet (0 when current)",
            this.lag.clone(),
        );
        this
    }

    fn count(&self, result: &'static str) {
        self.applies.get_or_create(&ResultLabel { result }).inc();
    }
}

/// What the keeper needs.
pub(crate) struct Keeper {
    pub(crate) client: Client,
    pub(crate) policies: Arc<PolicyStore>,
    pub(crate) sources: Arc<SourceCache>,
    pub(crate) api: ApiVersion,
    /// This guard's [`OWNER_LABEL`] value.
    pub(crate) owner: String,
    pub(crate) metrics: KeeperMetrics,
    /// What the reconciler judges by, published after each pass.
    pub(crate) enforced: Arc<Enforced>,
}

/// The four kinds, for applying and sweeping.
fn resource(kind: &str, api: ApiVersion) -> Option<ApiResource> {
    let (version, plural) = match kind {
        "MutatingAdmissionPolicy" => (api, "mutatingadmissionpolicies"),
        "MutatingAdmissionPolicyBinding" => (api, "mutatingadmissionpolicybindings"),
        "ValidatingAdmissionPolicy" => (ApiVersion::V1, "validatingadmissionpolicies"),
        "ValidatingAdmissionPolicyBinding" => (ApiVersion::V1, "validatingadmissionpolicybindings"),
        _ => return None,
    };
    let version = match version {
        ApiVersion::V1 => "v1",
        ApiVersion::V1beta1 => "v1beta1",
    };
    let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", version, kind);
    Some(ApiResource::from_gvk_with_plural(&gvk, plural))
}

/// Bindings first when sweeping: a binding whose policy is gone only logs errors meanwhile.
const KINDS: [&str; 4] = [
    "MutatingAdmissionPolicyBinding",
    "ValidatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy",
    "ValidatingAdmissionPolicy",
];

/// What one leader term remembers: the last object applied per (kind, name), and the plan
/// of the last complete sweep.
#[derive(Default)]
struct Memory {
    applied: HashMap<(String, String), Value>,
    swept: Option<BTreeSet<(String, String)>>,
    skipped: Vec<(String, String)>,
}

/// Waits for the next change of `rx`; never returns once its sender is gone.
async fn changed<T>(rx: &mut watch::Receiver<T>) {
    if rx.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

impl Keeper {
    /// Runs until the task is aborted, acting while `leader` is true.
    pub(crate) async fn run(self, mut leader: watch::Receiver<bool>) {
        let mut sources = self.sources.subscribe();
        let mut policies = self.policies.subscribe();
        let mut memory = Memory::default();
        let mut behind_since = Some(Instant::now());
        let mut last_pass: Option<Instant> = None;
        let mut lag_tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            let leading = *leader.borrow_and_update();
            let mut wait = RESYNC;
            if !leading {
                // A new term starts from what is in the cluster, not from what was applied.
                memory = Memory::default();
                self.metrics.lag.set(0.0);
                if crate::sources::Sources::synced(self.enforced.as_ref()) {
                    self.enforced.publish(None);
                }
            } else if !crate::sources::Sources::synced(self.sources.as_ref()) {
                // Nothing is rendered or deleted from caches that have not listed yet: the
                // objects in the cluster (a previous leader's) keep enforcing meanwhile.
                wait = Duration::from_millis(500);
            } else {
                if let Some(at) = last_pass {
                    tokio::time::sleep(MIN_INTERVAL.saturating_sub(at.elapsed())).await;
                }
                last_pass = Some(Instant::now());
                sources.mark_unchanged();
                policies.mark_unchanged();
                // Fenced: a pass stops at its next write, or mid-write, once leadership is lost,
                // so a deposed leader never overwrites or deletes what its successor applied.
                match fenced(&leader, self.pass(&mut memory, &leader)).await {
                    Some(true) => behind_since = None,
                    Some(false) => wait = RETRY,
                    None => continue,
                }
            }
            self.show_lag(leading, behind_since);
            let deadline = tokio::time::sleep(wait);
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    () = changed(&mut sources) => {}
                    () = changed(&mut policies) => {}
                    () = changed(&mut leader) => {}
                    () = &mut deadline => {
                        if wait == RESYNC {
                            memory.applied.clear();
                            memory.swept = None;
                        }
                        break;
                    }
                    _ = lag_tick.tick() => {
                        self.show_lag(*leader.borrow(), behind_since);
                        continue;
                    }
                }
                behind_since.get_or_insert_with(Instant::now);
                tokio::time::sleep(COALESCE).await;
                break;
            }
        }
    }

    fn show_lag(&self, leading: bool, behind_since: Option<Instant>) {
        let lag = behind_since.filter(|_| leading).map_or(0.0, |at| at.elapsed().as_secs_f64());
        self.metrics.lag.set(lag);
    }

    /// One pass: apply what changed, then sweep if the set of objects changed. Whether every
    /// call succeeded.
    async fn pass(&self, memory: &mut Memory, leader: &watch::Receiver<bool>) -> bool {
        let policies = self.policies.load();
        let plan = desired(&policies, self.sources.as_ref(), self.api, &self.owner);
        if plan.skipped != memory.skipped {
            for (policy, reason) in &plan.skipped {
                tracing::warn!(policy = %policy, reason = %reason, "admission policy not rendered (the one in the cluster, if any, stays unless the policy's onUnresolved is allow)");
            }
            memory.skipped = plan.skipped.clone();
        }
        let mut ok = true;
        let mut failed: BTreeSet<String> = BTreeSet::new();
        let mut applied_any = false;
        for object in &plan.objects {
            let key = key_of(object);
            if memory.applied.get(&key) == Some(object) {
                continue;
            }
            let Some(applied) = fenced(leader, self.apply(&key, object)).await else { return false };
            match applied {
                Ok(()) => {
                    applied_any = true;
                    self.metrics.count("applied");
                    tracing::info!(kind = %key.0, name = %key.1, "admission policy applied");
                    memory.applied.insert(key, object.clone());
                }
                Err(e) => {
                    ok = false;
                    failed.insert(key.1.clone());
                    self.metrics.count("failed");
                    tracing::warn!(kind = %key.0, name = %key.1, error = %e, "cannot apply the admission policy; retrying");
                }
            }
        }
        let names: BTreeSet<(String, String)> =
            plan.objects.iter().map(key_of).chain(plan.kept.iter().map(|n| (String::new(), n.clone()))).collect();
        if memory.swept.as_ref() != Some(&names) {
            if self.sweep(&plan, memory, leader).await {
                memory.swept = Some(names);
            } else {
                ok = false;
            }
        }
        self.publish(&plan, &policies, &failed, applied_any).await;
        ok
    }

    /// Tells the reconciler what is in force now: a rendered policy's new value once its
    /// objects applied (and the API server had time to see them), the last value of a kept
    /// one, none for a policy whose mutation was removed. `policies`: those `plan` was drawn from.
    async fn publish(&self, plan: &Desired, policies: &Policies, failed: &BTreeSet<String>, applied_any: bool) {
        let mut values = self.enforced.current();
        values.retain(|policy, _| {
            plan.kept_policies.contains(policy) || plan.values.iter().any(|(name, _)| name == policy)
        });
        for (policy, value) in &plan.values {
            // Named as the plan named it: a Gateway policy's objects carry the kind's prefix.
            let object = policies.iter().find(|p| p.name == *policy).map(super::object_name_of);
            if !object.is_some_and(|o| failed.contains(&o)) {
                values.insert(policy.clone(), value.clone());
            }
        }
        if applied_any {
            tokio::time::sleep(SETTLE).await;
        }
        self.enforced.publish(Some(values));
    }

    async fn apply(&self, key: &(String, String), object: &Value) -> Result<(), CallError> {
        let Some(resource) = resource(&key.0, self.api) else { return Ok(()) };
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        within(CALL_TIMEOUT, api.patch(&key.1, &params, &Patch::Apply(object))).await.map(|_| ())
    }

    /// Deletes this guard's objects that the plan neither renders nor keeps.
    async fn sweep(&self, plan: &Desired, memory: &mut Memory, leader: &watch::Receiver<bool>) -> bool {
        let mut ok = true;
        let params = ListParams::default().labels(&format!("{OWNER_LABEL}={}", self.owner)).limit(LIST_LIMIT);
        for kind in KINDS {
            let Some(resource) = resource(kind, self.api) else { continue };
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
            let listed = match within(CALL_TIMEOUT, api.list_metadata(&params)).await {
                Ok(list) => list,
                Err(e) => {
                    tracing::warn!(kind, error = %e, "cannot list this guard's admission policies; retrying");
                    ok = false;
                    continue;
                }
            };
            for object in listed.items {
                let Some(name) = object.metadata.name else { continue };
                if plan.keeps(kind, &name) {
                    continue;
                }
                let Some(deleted) =
                    fenced(leader, within(CALL_TIMEOUT, api.delete(&name, &DeleteParams::default()))).await
                else {
                    return false;
                };
                match deleted {
                    Ok(_) => {
                        self.metrics.count("deleted");
                        tracing::info!(kind, name = %name, "admission policy deleted: no policy renders it any more");
                        memory.applied.remove(&(kind.to_owned(), name));
                    }
                    Err(CallError::Api(kube::Error::Api(status))) if status.code == 404 => {
                        memory.applied.remove(&(kind.to_owned(), name));
                    }
                    Err(e) => {
                        ok = false;
                        self.metrics.count("delete_failed");
                        tracing::warn!(kind, name = %name, error = %e, "cannot delete the admission policy; retrying");
                    }
                }
            }
        }
        ok
    }
}

fn key_of(object: &Value) -> (String, String) {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    (text(&object["kind"]), text(&object["metadata"]["name"]))
}
