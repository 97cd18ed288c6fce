//! The leader's keeper of `--admission=policy`: carries out [`desired`] in the cluster, and
//! deletes what this guard labelled that no policy renders any more. It runs on the reconciler's
//! changes, coalesced, at most one pass a second, writing only changed renderings (all at the
//! resync).
//!
//! Each write reads the object first: another owner's is left alone (said once, counted, and
//! published as that owner's, [`in_force`], so two guards never fight); this owner's (or an
//! unlabelled one: adopted) is replaced whole under its resourceVersion, which also drops fields
//! another manager added, as a server-side apply would not; a missing one is created. Deletes
//! carry the listed uid and resourceVersion.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
    time::{Duration, Instant},
};

use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams, Preconditions},
};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
};
use serde_json::Value;
use tokio::sync::watch;

use super::{
    ApiVersion,
    desired::{Desired, OWNER_LABEL, Owner, desired},
    enforced::{Enforced, in_force},
};
use crate::{
    client::{CALL_TIMEOUT, CallError, fenced, within},
    metrics::Metrics,
    policy::store::PolicyStore,
    sources::SourceCache,
};

/// Changes come in bursts (a Service's status, a rollout's Pods): one pass covers them.
const COALESCE: Duration = Duration::from_millis(200);
/// Fewest seconds between two passes, so a source that flaps cannot drive the API server.
const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// A failed pass is tried again after this long (or at the next change).
const RETRY: Duration = Duration::from_secs(5);
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
    foreign: Gauge,
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
            "admission_policy_foreign_objects",
            "Admission policies and bindings of this guard's names that another guard holds (another ingress-status-guard/lease label): neither written nor deleted",
            this.foreign.clone(),
        );
        metrics.register(
            "admission_policy_lag_seconds",
            "Seconds since a source or policy changed that the admission policies in the cluster do not show yet, or since an object of this guard's names was found held by another guard (0 when current)",
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
    /// Who this guard is: its objects' names, label and field manager.
    pub(crate) owner: Owner,
    pub(crate) metrics: KeeperMetrics,
    /// What the reconciler judges by, published after each pass.
    pub(crate) enforced: Arc<Enforced>,
    /// Everything is written and swept again this often (`--admission-policy-resync`), which
    /// repairs objects someone else edited or deleted (nothing watches them); no change
    /// restarts it, so churn of the sources cannot put the repair off.
    pub(crate) resync: Duration,
}

/// The four kinds, for applying and sweeping (and for `check`, reading them).
pub(crate) fn resource(kind: &str, api: ApiVersion) -> Option<ApiResource> {
    let (version, plural) = match kind {
        "MutatingAdmissionPolicy" => (api, "mutatingadmissionpolicies"),
        "MutatingAdmissionPolicyBinding" => (api, "mutatingadmissionpolicybindings"),
        "ValidatingAdmissionPolicy" => (ApiVersion::V1, "validatingadmissionpolicies"),
        "ValidatingAdmissionPolicyBinding" => (ApiVersion::V1, "validatingadmissionpolicybindings"),
        _ => return None,
    };
    let version = version.group_version().trim_start_matches("admissionregistration.k8s.io/");
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

/// What one leader term remembers.
#[derive(Default)]
struct Memory {
    applied: HashMap<(String, String), Value>,
    swept: Option<BTreeSet<(String, String)>>,
    skipped: Vec<(String, String)>,
    /// The objects found held by another owner, with that owner: warned of once each.
    foreign: HashMap<(String, String), String>,
}

/// What one write found and did.
enum Written {
    /// Created, or replaced with the rendering (a no-op write when it already was).
    Done,
    /// Left alone: another owner's, whose label this is.
    Foreign(String),
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
        let period = self.resync.max(MIN_INTERVAL);
        let mut resync = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let leading = *leader.borrow_and_update();
            // Nothing to do until a change, the resync, or (a failed pass, caches not synced) this.
            let mut wait = None;
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
                wait = Some(Duration::from_millis(500));
            } else {
                if let Some(at) = last_pass {
                    tokio::time::sleep(MIN_INTERVAL.saturating_sub(at.elapsed())).await;
                }
                last_pass = Some(Instant::now());
                sources.mark_unchanged();
                policies.mark_unchanged();
                // Fenced: a pass stops at its next write, or mid-write, once leadership is lost,
                // so a deposed leader never overwrites or deletes what its successor wrote.
                match fenced(&leader, self.pass(&mut memory, &leader)).await {
                    // A name another guard holds leaves its policy unenforced by this one: that
                    // is lag too, and the alert on it names the cause.
                    Some(true) if memory.foreign.is_empty() => behind_since = None,
                    Some(true) => {
                        behind_since.get_or_insert_with(Instant::now);
                    }
                    Some(false) => wait = Some(RETRY),
                    None => continue,
                }
            }
            self.show_lag(leading, behind_since);
            let deadline = tokio::time::sleep(wait.unwrap_or(period));
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    () = changed(&mut sources) => {}
                    () = changed(&mut policies) => {}
                    () = changed(&mut leader) => {}
                    () = &mut deadline, if wait.is_some() => break,
                    _ = resync.tick() => {
                        memory.applied.clear();
                        memory.swept = None;
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
        let mut foreign = HashMap::new();
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
            let Some(written) = fenced(leader, self.write(&key, object)).await else { return false };
            match written {
                Ok(Written::Done) => {
                    applied_any = true;
                    self.metrics.count("applied");
                    tracing::info!(kind = %key.0, name = %key.1, "admission policy written");
                    memory.applied.insert(key, object.clone());
                }
                Ok(Written::Foreign(other)) => {
                    if memory.foreign.get(&key) != Some(&other) {
                        let policy = plan.names.iter().find(|(_, n)| *n == key.1).map_or("", |(p, _)| p.as_str());
                        tracing::warn!(kind = %key.0, name = %key.1, policy = %policy, owner = %other, this_owner = %self.owner.label, "admission policy held by another guard (its ingress-status-guard/lease label): neither written nor deleted, and this guard's reconciler leaves the policy's Ingresses and Gateways alone; give one of the two guards another --leader-election-lease-name (chart: another release name)");
                    }
                    foreign.insert(key, other);
                }
                Err(e) => {
                    ok = false;
                    failed.insert(key.1.clone());
                    self.metrics.count("failed");
                    tracing::warn!(kind = %key.0, name = %key.1, error = %e, "cannot write the admission policy; retrying");
                }
            }
        }
        // Not a failure to retry: read again at the next change and at the resync.
        self.metrics.foreign.set(i64::try_from(foreign.len()).unwrap_or(i64::MAX));
        memory.foreign = foreign;
        let names: BTreeSet<(String, String)> =
            plan.objects.iter().map(key_of).chain(plan.kept.iter().map(|n| (String::new(), n.clone()))).collect();
        if memory.swept.as_ref() != Some(&names) {
            if self.sweep(&plan, memory, leader).await {
                memory.swept = Some(names);
            } else {
                ok = false;
            }
        }
        // What is in force now, told the reconciler once the API server had time to see it.
        let held: BTreeMap<String, String> =
            memory.foreign.iter().map(|((_, name), owner)| (name.clone(), owner.clone())).collect();
        let values = in_force(self.enforced.current(), &plan, &failed, &held);
        if applied_any {
            tokio::time::sleep(SETTLE).await;
        }
        self.enforced.publish(Some(values));
        ok
    }

    /// Writes `object` (of kind and name `key`) unless another owner holds it: created when
    /// missing, else replaced whole under the live resourceVersion (see the module's text).
    async fn write(&self, key: &(String, String), object: &Value) -> Result<Written, CallError> {
        let Some(resource) = resource(&key.0, self.api) else { return Ok(Written::Done) };
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let params = PostParams { field_manager: Some(self.owner.field_manager()), ..PostParams::default() };
        let mut body: DynamicObject =
            serde_json::from_value(object.clone()).map_err(|e| CallError::Api(kube::Error::SerdeError(e)))?;
        let Some(live) = within(CALL_TIMEOUT, api.get_opt(&key.1)).await? else {
            within(CALL_TIMEOUT, api.create(&params, &body)).await?;
            return Ok(Written::Done);
        };
        let label = live.metadata.labels.as_ref().and_then(|l| l.get(OWNER_LABEL)).map(String::as_str);
        if let Some(other) = self.owner.other(label) {
            return Ok(Written::Foreign(other.to_owned()));
        }
        body.metadata.resource_version = live.metadata.resource_version;
        body.metadata.uid = live.metadata.uid;
        within(CALL_TIMEOUT, api.replace(&key.1, &params, &body)).await?;
        Ok(Written::Done)
    }

    /// Deletes this guard's objects that the plan neither renders nor keeps.
    async fn sweep(&self, plan: &Desired, memory: &mut Memory, leader: &watch::Receiver<bool>) -> bool {
        let mut ok = true;
        for kind in KINDS {
            let Some(resource) = resource(kind, self.api) else { continue };
            let sweep = sweep_kind(&self.client, kind, &resource, &self.owner.label, |name| plan.keeps(kind, name));
            let Some(swept) = fenced(leader, sweep).await else { return false };
            ok &= swept.ok;
            for name in swept.gone {
                memory.applied.remove(&(kind.to_owned(), name));
            }
            for _ in 0..swept.deleted {
                self.metrics.count("deleted");
            }
            for _ in 0..swept.failed {
                self.metrics.count("delete_failed");
            }
        }
        ok
    }
}

/// What one sweep of one kind did.
#[derive(Default)]
struct Swept {
    /// Whether every call succeeded (the list, and each delete).
    ok: bool,
    /// Names no longer there: deleted, or gone already.
    gone: Vec<String>,
    deleted: usize,
    failed: usize,
}

/// Deletes the objects of `kind` labelled `owner` that `keep` does not keep, each under its
/// listed uid and resourceVersion: never one created again or changed (relabelled) since.
async fn sweep_kind(
    client: &Client,
    kind: &str,
    resource: &ApiResource,
    owner: &str,
    keep: impl Fn(&str) -> bool,
) -> Swept {
    let mut swept = Swept { ok: true, ..Swept::default() };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let params = ListParams::default().labels(&format!("{OWNER_LABEL}={owner}")).limit(LIST_LIMIT);
    let listed = match within(CALL_TIMEOUT, api.list_metadata(&params)).await {
        Ok(list) => list,
        Err(e) => {
            tracing::warn!(kind, error = %e, "cannot list this guard's admission policies; retrying");
            swept.ok = false;
            return swept;
        }
    };
    for object in listed.items {
        let Some(name) = object.metadata.name else { continue };
        if keep(&name) {
            continue;
        }
        let preconditions =
            Preconditions { uid: object.metadata.uid, resource_version: object.metadata.resource_version };
        let params = DeleteParams { preconditions: Some(preconditions), ..DeleteParams::default() };
        match within(CALL_TIMEOUT, api.delete(&name, &params)).await {
            Ok(_) => {
                tracing::info!(kind, name = %name, "admission policy deleted: no policy renders it any more");
                swept.deleted += 1;
                swept.gone.push(name);
            }
            // Gone already: the next sweep sees what is there now.
            Err(CallError::Api(kube::Error::Api(status))) if status.code == 404 => swept.gone.push(name),
            Err(e) => {
                swept.ok = false;
                swept.failed += 1;
                tracing::warn!(kind, name = %name, error = %e, "cannot delete the admission policy; retrying");
            }
        }
    }
    swept
}

/// Why `admission-policy remove` did not remove everything.
#[derive(Debug, thiserror::Error)]
#[error(
    "{failed} of the admission policies and bindings labelled ingress-status-guard/lease={owner} could not be listed or deleted (see the log); run it again, with an identity that may delete them"
)]
pub(crate) struct NotRemoved {
    owner: String,
    failed: usize,
}

/// `admission-policy remove`: deletes every admission policy and binding labelled as `owner`'s,
/// in either served version, and nothing else; how many it deleted.
pub(crate) async fn remove(client: &Client, owner: &Owner) -> Result<usize, NotRemoved> {
    let (mut deleted, mut failed) = (0, 0);
    for api in [ApiVersion::V1, ApiVersion::V1beta1] {
        for kind in KINDS {
            // The ValidatingAdmissionPolicy is v1 whatever the version: once is enough.
            if api == ApiVersion::V1beta1 && kind.starts_with("Validating") {
                continue;
            }
            let Some(resource) = resource(kind, api) else { continue };
            // A version the server does not serve has nothing to remove.
            let served = within(CALL_TIMEOUT, client.list_api_group_resources(&resource.api_version)).await;
            if !served.is_ok_and(|list| list.resources.iter().any(|r| r.name == resource.plural)) {
                continue;
            }
            let swept = sweep_kind(client, kind, &resource, &owner.label, |_| false).await;
            deleted += swept.deleted;
            failed += swept.failed + usize::from(!swept.ok && swept.failed == 0);
        }
    }
    if failed == 0 { Ok(deleted) } else { Err(NotRemoved { owner: owner.label.clone(), failed }) }
}

fn key_of(object: &Value) -> (String, String) {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    (text(&object["kind"]), text(&object["metadata"]["name"]))
}
