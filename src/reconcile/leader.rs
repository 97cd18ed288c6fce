//! Leader election among the replicas of `serve`, so exactly one reconciler writes: a
//! `coordination.k8s.io/v1` Lease, with client-go's rules.
//!
//! - Expiry is judged by locally observed time: a non-leader notes, on its own monotonic clock,
//!   when the holder's record (the Lease's spec) last changed, and takes the Lease over once it
//!   has not changed for the holder's `leaseDurationSeconds` (else ours). The holder's
//!   `renewTime` is never compared with the local clock, so clock skew cannot make two leaders;
//!   a write of the metadata alone is no renewal, so it cannot keep a dead leader's Lease alive.
//! - The leader renews every retry period, each attempt bounded by what is left of the renew
//!   deadline, and **steps down** (stops reconciling) when the deadline passes without a
//!   successful renewal, which is before any other replica may consider the Lease expired.
//! - A non-leader reads the Lease every retry period plus a jitter of up to 1.2 times it
//!   (client-go's factor), so replicas started together do not contend in lockstep.

use std::time::{Duration, Instant};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
};
use tokio::sync::{oneshot, watch};

use crate::{
    client::{CALL_TIMEOUT, CallError, PodIdentity, within},
    metrics::Metrics,
    names,
};

/// The Lease annotation with the holder's version (`version` warns of skew against it).
pub(crate) const VERSION_ANNOTATION: &str = "ingress-status-guard/version";
/// The Lease annotation listing the policy fields the holder knows ([`crate::policy::spec::FIELDS`]).
pub(crate) const POLICY_FIELDS_ANNOTATION: &str = "ingress-status-guard/policy-fields";

/// What the holder says of itself on the Lease.
fn published() -> [(String, String); 2] {
    [
        (VERSION_ANNOTATION.to_owned(), crate::metrics::VERSION.to_owned()),
        (POLICY_FIELDS_ANNOTATION.to_owned(), crate::policy::spec::FIELDS.join(",")),
    ]
}

/// Longest wait for the Lease's release at shutdown.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// Validated leader-election settings (client-go's meaning for the three durations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    pub(crate) namespace: String,
    pub(crate) lease_name: String,
    /// Unique among the replicas: the Pod's name, else host and process id.
    pub(crate) identity: String,
    /// How long a Lease is valid after its last renewal; a successor waits at most this long.
    pub(crate) lease_duration: Duration,
    /// The leader renews once this much of the lease has passed.
    pub(crate) renew_deadline: Duration,
    /// How often a non-leader looks at the Lease.
    pub(crate) retry_period: Duration,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum SettingsError {
    #[error("{flag} {value:?}: {reason}")]
    Flag { flag: &'static str, value: String, reason: String },
    #[error(
        "--leader-election-renew-deadline ({renew:?}) must be shorter than --leader-election-lease-duration ({lease:?}), and --leader-election-retry-period ({retry:?}) shorter than the renew deadline"
    )]
    Order { lease: Duration, renew: Duration, retry: Duration },
}

impl Settings {
    pub(crate) fn new(
        namespace: String,
        lease_name: String,
        identity: String,
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Result<Self, SettingsError> {
        if !(renew_deadline < lease_duration && retry_period < renew_deadline) {
            return Err(SettingsError::Order { lease: lease_duration, renew: renew_deadline, retry: retry_period });
        }
        let names = [
            ("--leader-election-namespace", &namespace, names::is_dns1123_label(&namespace)),
            ("--leader-election-lease-name", &lease_name, names::is_dns1123_subdomain(&lease_name)),
        ];
        if let Some((flag, value, _)) = names.into_iter().find(|(_, _, valid)| !valid) {
            let reason = "must be a valid Kubernetes name".to_owned();
            return Err(SettingsError::Flag { flag, value: value.clone(), reason });
        }
        Ok(Settings { namespace, lease_name, identity, lease_duration, renew_deadline, retry_period })
    }

    /// This process's identity: its Pod's name, else the host name and process id.
    pub(crate) fn default_identity(pod: &PodIdentity) -> String {
        if let Some(pod) = &pod.name {
            return pod.clone();
        }
        let host = std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "ingress-status-guard".to_owned());
        format!("{host}-{}", std::process::id())
    }
}

/// Whether nobody holds the Lease (never held, or released), or `identity` does.
pub(crate) fn is_free(spec: Option<&LeaseSpec>, identity: &str) -> bool {
    spec.and_then(|s| s.holder_identity.as_deref()).is_none_or(|holder| holder.is_empty() || holder == identity)
}

/// Longest lease a holder may claim that is honoured as written: a Lease is anyone's to edit
/// with `patch` on it, and a record saying "valid for 68 years" must not stop every successor
/// for good. Far above any real setting (client-go's default is 15 s).
const MAX_HOLDER_LEASE: Duration = Duration::from_secs(3600);

/// When this replica last saw the holder's record change, on its own clock.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Observed {
    /// The Lease's spec as read: exactly client-go's `LeaderElectionRecord`.
    record: Option<LeaseSpec>,
    at: Instant,
}

impl Observed {
    /// Notes the holder's record as read at `now`: only a changed record restarts the clock.
    pub(crate) fn observe(seen: Option<Self>, record: Option<&LeaseSpec>, now: Instant) -> Self {
        match seen {
            Some(seen) if seen.record.as_ref() == record => seen,
            _ => Observed { record: record.cloned(), at: now },
        }
    }

    /// How long the holder's record is valid after its last change: the holder's own
    /// `leaseDurationSeconds` (at most [`MAX_HOLDER_LEASE`]), else `own` when it wrote none.
    pub(crate) fn lease_duration(&self, own: Duration) -> Duration {
        match self.record.as_ref().and_then(|r| r.lease_duration_seconds).and_then(|s| u64::try_from(s).ok()) {
            Some(secs) if secs > 0 => Duration::from_secs(secs).min(MAX_HOLDER_LEASE),
            _ => own,
        }
    }

    /// Whether the record stood unchanged for its lease duration (`own` for a record without one).
    pub(crate) fn expired(&self, now: Instant, own: Duration) -> bool {
        now.saturating_duration_since(self.at) >= self.lease_duration(own)
    }
}

/// A non-leader's wait: the retry period plus up to 1.2 times it (client-go's `JitterFactor`) by `unit`.
pub(crate) fn jittered(retry: Duration, unit: f64) -> Duration {
    retry + retry.mul_f64(1.2 * unit.clamp(0.0, 1.0))
}

/// A number in `[0, 1)` differing between replicas and calls: enough randomness to spread retries.
fn unit_random() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    // The top 53 bits make an f64 in [0, 1) exactly.
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// A running election; dropping it without [`Leadership::release`] leaves the Lease to expire.
pub(crate) struct Leadership {
    leader: watch::Receiver<bool>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Leadership {
    /// `true` while this replica leads.
    pub(crate) fn subscribe(&self) -> watch::Receiver<bool> {
        self.leader.clone()
    }

    /// Stops contending and, if leading, releases the Lease so a successor takes over at once.
    pub(crate) async fn release(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if tokio::time::timeout(RELEASE_TIMEOUT, &mut self.task).await.is_err() {
            tracing::warn!("could not release the leader Lease in time; it expires on its own");
            self.task.abort();
        }
    }
}

/// Starts contending for the Lease. Must be called inside a tokio runtime.
pub(crate) fn start(client: Client, settings: Settings, metrics: std::sync::Arc<Metrics>) -> Leadership {
    let (tx, leader) = watch::channel(false);
    let (stop_tx, stop) = oneshot::channel();
    metrics.set_leader(false);
    let task = tokio::spawn(run(client, settings, tx, metrics, stop));
    Leadership { leader, stop: Some(stop_tx), task }
}

/// Writes `lease`'s spec as a merge patch conditional on the resourceVersion it was read at
/// (a 409 if it changed meanwhile): the RBAC grants `patch` on the one Lease, not `update`.
async fn write(leases: &Api<Lease>, s: &Settings, lease: &Lease) -> kube::Result<Lease> {
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": lease.metadata.resource_version,
            "annotations": serde_json::Map::from_iter(published().map(|(k, v)| (k, v.into()))),
        },
        "spec": lease.spec,
    });
    let params = PatchParams { field_manager: Some(super::FIELD_MANAGER.to_owned()), ..PatchParams::default() };
    leases.patch(&s.lease_name, &params, &Patch::Merge(&patch)).await
}

fn now_micro() -> MicroTime {
    MicroTime(Timestamp::now())
}

/// `lease` held by `identity` from now; a new holder counts a transition.
fn held(mut lease: Lease, s: &Settings) -> Lease {
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    if spec.holder_identity.as_deref() != Some(&s.identity) {
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        spec.acquire_time = Some(now_micro());
        spec.holder_identity = Some(s.identity.clone());
    }
    spec.lease_duration_seconds = Some(i32::try_from(s.lease_duration.as_secs()).unwrap_or(i32::MAX));
    spec.renew_time = Some(now_micro());
    lease
}

async fn run(
    client: Client,
    s: Settings,
    tx: watch::Sender<bool>,
    metrics: std::sync::Arc<Metrics>,
    mut stop: oneshot::Receiver<()>,
) {
    let leases: Api<Lease> = Api::namespaced(client, &s.namespace);
    let lease_ref = format!("{}/{}", s.namespace, s.lease_name);
    let set = |leading: bool| {
        tx.send_replace(leading);
        metrics.set_leader(leading);
    };
    loop {
        let mut lease = tokio::select! {
            _ = &mut stop => return,
            lease = acquire(&leases, &s) => lease,
        };
        set(true);
        tracing::info!(lease = %lease_ref, identity = %s.identity, "became leader: this replica reconciles");
        let mut renewed = Instant::now();
        loop {
            tokio::select! {
                _ = &mut stop => {
                    set(false);
                    match release(&leases, &s, lease).await {
                        Ok(()) => tracing::info!(identity = %s.identity, "released the leader Lease"),
                        Err(e) => tracing::warn!(error = %e, "could not release the leader Lease; it expires on its own"),
                    }
                    return;
                }
                () = tokio::time::sleep(s.retry_period) => {}
            }
            let attempt = Instant::now();
            let left = (renewed + s.renew_deadline).saturating_duration_since(attempt);
            match tokio::time::timeout(left, renew(&leases, &s, &lease)).await {
                Ok(Ok(Some(fresh))) => {
                    lease = fresh;
                    renewed = attempt;
                    continue;
                }
                Ok(Ok(None)) => {
                    set(false);
                    tracing::warn!(identity = %s.identity, "another replica holds the leader Lease now; reconciling stops");
                    break;
                }
                Ok(Err(e)) if attempt + s.retry_period < renewed + s.renew_deadline => {
                    tracing::debug!(error = %e, "renewal of the leader Lease failed; retrying within the renew deadline");
                    continue;
                }
                Ok(Err(_)) | Err(_) => {}
            }
            set(false);
            tracing::warn!(
                identity = %s.identity,
                renew_deadline = ?s.renew_deadline,
                "could not renew the leader Lease within the renew deadline: stepping down; reconciling stops"
            );
            break;
        }
    }
}

/// Returns the Lease once this replica holds it: read every (jittered) retry period, taken when
/// free, ours, or [`Observed::expired`].
async fn acquire(leases: &Api<Lease>, s: &Settings) -> Lease {
    let mut seen: Option<Observed> = None;
    let mut logged = false;
    loop {
        let result = match within(CALL_TIMEOUT.min(s.retry_period), leases.get_opt(&s.lease_name)).await {
            Ok(None) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(s.lease_name.clone()),
                        annotations: Some(published().into_iter().collect()),
                        ..ObjectMeta::default()
                    },
                    spec: None,
                };
                let params =
                    PostParams { field_manager: Some(super::FIELD_MANAGER.to_owned()), ..PostParams::default() };
                within(CALL_TIMEOUT, leases.create(&params, &held(lease, s))).await.map(Some)
            }
            Ok(Some(lease)) => {
                let now = Instant::now();
                let observed = Observed::observe(seen.take(), lease.spec.as_ref(), now);
                let take = is_free(lease.spec.as_ref(), &s.identity) || observed.expired(now, s.lease_duration);
                seen = Some(observed);
                if take {
                    // The resourceVersion read makes the write conditional: of two contenders
                    // one gets a 409 and goes on watching.
                    within(CALL_TIMEOUT, write(leases, s, &held(lease, s))).await.map(Some)
                } else {
                    Ok(None)
                }
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(Some(lease)) => return lease,
            // Lost the race to another contender: the next read shows who won.
            Ok(None) => logged = false,
            Err(CallError::Api(kube::Error::Api(status))) if status.code == 409 => logged = false,
            Err(e) if !logged => {
                tracing::warn!(lease = %format!("{}/{}", s.namespace, s.lease_name), error = %e, "cannot read the leader Lease; retrying");
                logged = true;
            }
            Err(_) => {}
        }
        tokio::time::sleep(jittered(s.retry_period, unit_random())).await;
    }
}

/// Renews the Lease: the renewed Lease, `None` if someone else holds it now.
async fn renew(leases: &Api<Lease>, s: &Settings, lease: &Lease) -> Result<Option<Lease>, CallError> {
    match write(leases, s, &held(lease.clone(), s)).await {
        Ok(lease) => return Ok(Some(lease)),
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    // Changed meanwhile (by us, on a retried write, or by a successor): read it afresh.
    let fresh = leases.get(&s.lease_name).await?;
    if fresh.spec.as_ref().and_then(|spec| spec.holder_identity.as_deref()) != Some(s.identity.as_str()) {
        return Ok(None);
    }
    Ok(Some(write(leases, s, &held(fresh, s)).await?))
}

/// Gives the Lease up (holder empty, as client-go does) if it is still ours.
async fn release(leases: &Api<Lease>, s: &Settings, mut lease: Lease) -> Result<(), CallError> {
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some(String::new());
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(now_micro());
    match within(CALL_TIMEOUT, write(leases, s, &lease)).await {
        Err(CallError::Api(kube::Error::Api(status))) if status.code == 409 => Ok(()),
        other => other.map(drop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn when_the_lease_is_free() {
        let spec = |holder: Option<&str>| LeaseSpec { holder_identity: holder.map(String::from), ..Default::default() };
        let cases = [
            ("no spec", None, true),
            ("no holder", Some(spec(None)), true),
            ("empty holder (released)", Some(spec(Some(""))), true),
            ("ours", Some(spec(Some("me"))), true),
            ("held by another", Some(spec(Some("other"))), false),
        ];
        for (name, spec, want) in cases {
            assert_eq!(is_free(spec.as_ref(), "me"), want, "case {name}");
        }
    }

    fn record(holder: &str, renew_secs: i64, duration: Option<i32>) -> LeaseSpec {
        let renew = Timestamp::from_second(1_700_000_000 + renew_secs).unwrap();
        LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            lease_duration_seconds: duration,
            renew_time: Some(MicroTime(renew)),
            ..Default::default()
        }
    }

    #[test]
    fn expiry_is_judged_by_locally_observed_time() {
        let t0 = Instant::now();
        let own = Duration::from_secs(15);
        let s = Duration::from_secs;
        let r1 = record("a", 0, Some(15));
        let seen = Observed::observe(None, Some(&r1), t0);
        assert!(!seen.expired(t0 + s(14), own));
        let seen = Observed::observe(Some(seen), Some(&r1), t0 + s(10));
        assert!(seen.expired(t0 + s(15), own), "unchanged since first seen");
        let r2 = record("a", 2, Some(15));
        let seen = Observed::observe(Some(seen), Some(&r2), t0 + s(16));
        assert!(!seen.expired(t0 + s(30), own), "a renewal restarts the local clock, whatever its renewTime says");
        assert!(seen.expired(t0 + s(31), own));
    }

    #[test]
    fn only_a_change_of_the_holders_record_counts_as_a_renewal() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let own = s(15);
        let r = record("a", 0, Some(15));
        let mut seen = Observed::observe(None, Some(&r), t0);
        // Another controller annotates the Lease every 10 s: its resourceVersion moves, the
        // record read back is the same, so the clock keeps running.
        for at in [10, 20] {
            seen = Observed::observe(Some(seen), Some(&r.clone()), t0 + s(at));
        }
        assert!(seen.expired(t0 + s(15), own), "metadata writes do not keep a dead leader's Lease");
        // Each field of the record is a change.
        let changes = [
            LeaseSpec { holder_identity: Some("b".into()), ..r.clone() },
            LeaseSpec { acquire_time: Some(MicroTime(Timestamp::from_second(1).unwrap())), ..r.clone() },
            record("a", 1, Some(15)),
            LeaseSpec { lease_transitions: Some(3), ..r.clone() },
        ];
        for (i, changed) in changes.iter().enumerate() {
            let seen = Observed::observe(Some(seen.clone()), Some(changed), t0 + s(20));
            assert!(!seen.expired(t0 + s(34), own), "change {i} restarts the clock");
        }
    }

    #[test]
    fn the_holders_lease_duration_decides_not_ours() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let short = Observed::observe(None, Some(&record("a", 0, Some(4))), t0);
        assert!(short.expired(t0 + s(4), s(60)), "the holder's 4 s, though ours is 60 s");
        assert!(!short.expired(t0 + s(3), s(60)));
        let long = Observed::observe(None, Some(&record("a", 0, Some(30))), t0);
        assert!(!long.expired(t0 + s(20), s(4)), "the holder's 30 s, though ours is 4 s");
        for missing in [None, Some(0), Some(-5)] {
            let seen = Observed::observe(None, Some(&record("a", 0, missing)), t0);
            assert_eq!(seen.lease_duration(s(15)), s(15), "{missing:?}: ours");
        }
        let absurd = Observed::observe(None, Some(&record("a", 0, Some(i32::MAX))), t0);
        assert_eq!(absurd.lease_duration(s(15)), MAX_HOLDER_LEASE, "bounded");
    }

    #[test]
    fn retries_are_jittered_within_client_gos_factor() {
        let retry = Duration::from_secs(2);
        assert_eq!(jittered(retry, 0.0), retry);
        assert_eq!(jittered(retry, 0.5), Duration::from_millis(3200));
        assert!(jittered(retry, 1.0) <= Duration::from_millis(4400));
        let draws: Vec<f64> = (0..64).map(|_| unit_random()).collect();
        assert!(draws.iter().all(|u| (0.0..1.0).contains(u)));
        assert!(draws.iter().any(|u| *u != draws[0]), "the draws differ");
    }

    #[test]
    fn timing_order_is_checked() {
        let s = |lease, renew, retry| {
            Settings::new(
                "default".into(),
                "isg".into(),
                "me".into(),
                Duration::from_secs(lease),
                Duration::from_secs(renew),
                Duration::from_secs(retry),
            )
        };
        assert!(s(15, 10, 2).is_ok());
        assert!(matches!(s(10, 10, 2), Err(SettingsError::Order { .. })));
        assert!(matches!(s(15, 10, 10), Err(SettingsError::Order { .. })));
        let bad_name = Settings::new(
            "Bad_NS".into(),
            "isg".into(),
            "me".into(),
            Duration::from_secs(15),
            Duration::from_secs(10),
            Duration::from_secs(2),
        );
        assert!(bad_name.unwrap_err().to_string().starts_with("--leader-election-namespace \"Bad_NS\""));
    }
}
