//! Leader election among the replicas of `serve`, so exactly one reconciler writes: a
//! `coordination.k8s.io/v1` Lease held through the `kube-lease-manager` crate.
//!
//! The crate holds and renews the Lease, but a non-holder only looks again when the holder's
//! lease would expire. A successor should take over as soon as a leader releases the Lease on
//! shutdown, so a non-leader reads the Lease itself every retry period (as client-go does) and
//! contends through the crate only when the Lease is free, expired or already its own.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::{Api, Client};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::{oneshot, watch};

use crate::{client::PodIdentity, metrics::Metrics, names};

/// Field manager of our writes to the Lease.
const FIELD_MANAGER: &str = "ingress-status-guard";
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
        for (flag, value, valid) in names {
            if !valid {
                return Err(SettingsError::Flag {
                    flag,
                    value: value.clone(),
                    reason: "must be a valid Kubernetes name".to_owned(),
                });
            }
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

/// Whether `identity` may try to take the Lease now: nobody holds it, it is its own, or the
/// holder has not renewed it within its duration.
pub(crate) fn is_free(spec: Option<&LeaseSpec>, identity: &str, now: SystemTime) -> bool {
    let Some(spec) = spec else { return true };
    match spec.holder_identity.as_deref() {
        None | Some("") => return true,
        Some(holder) if holder == identity => return true,
        Some(_) => {}
    }
    let (Some(renewed), Some(duration)) = (&spec.renew_time, spec.lease_duration_seconds) else {
        return true;
    };
    let renewed: SystemTime = renewed.0.into();
    renewed + Duration::from_secs(u64::try_from(duration).unwrap_or(0)) < now
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

async fn run(
    client: Client,
    s: Settings,
    tx: watch::Sender<bool>,
    metrics: std::sync::Arc<Metrics>,
    mut stop: oneshot::Receiver<()>,
) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), &s.namespace);
    let set = |leading: bool| {
        tx.send_replace(leading);
        metrics.set_leader(leading);
    };
    loop {
        tokio::select! {
            _ = &mut stop => return,
            () = wait_free(&leases, &s) => {}
        }
        let manager = match build(&client, &s).await {
            Ok(manager) => manager,
            Err(e) => {
                tracing::warn!(lease = %format!("{}/{}", s.namespace, s.lease_name), error = %e, "cannot use the leader Lease; retrying");
                tokio::select! {
                    _ = &mut stop => return,
                    () = tokio::time::sleep(s.retry_period) => continue,
                }
            }
        };
        // Someone else may win the race; then go back to reading the Lease.
        let won = tokio::select! {
            _ = &mut stop => {
                let _ = manager.release().await;
                return;
            }
            result = tokio::time::timeout(s.retry_period, manager.changed()) => matches!(result, Ok(Ok(true))),
        };
        if !won {
            continue;
        }
        set(true);
        tracing::info!(lease = %format!("{}/{}", s.namespace, s.lease_name), identity = %s.identity, "became leader: this replica reconciles");
        tokio::select! {
            _ = &mut stop => {
                set(false);
                match manager.release().await {
                    Ok(()) => tracing::info!(identity = %s.identity, "released the leader Lease"),
                    Err(e) => tracing::warn!(error = %e, "could not release the leader Lease; it expires on its own"),
                }
                return;
            }
            result = manager.changed() => {
                set(false);
                match result {
                    Ok(_) => tracing::warn!(identity = %s.identity, "lost the leader Lease; reconciling stops"),
                    Err(e) => tracing::warn!(identity = %s.identity, error = %e, "cannot renew the leader Lease; reconciling stops"),
                }
            }
        }
    }
}

async fn build(client: &Client, s: &Settings) -> Result<LeaseManager, kube_lease_manager::LeaseManagerError> {
    LeaseManagerBuilder::new(client.clone(), &s.lease_name)
        .with_namespace(&s.namespace)
        .with_identity(&s.identity)
        .with_duration(s.lease_duration.as_secs())
        .with_grace((s.lease_duration - s.renew_deadline).as_secs())
        .with_field_manager(FIELD_MANAGER)
        .build()
        .await
}

/// Returns once the Lease may be taken (absent, free, expired or ours).
async fn wait_free(leases: &Api<Lease>, s: &Settings) {
    let mut logged = false;
    loop {
        match leases.get_opt(&s.lease_name).await {
            Ok(None) => return,
            Ok(Some(lease)) if is_free(lease.spec.as_ref(), &s.identity, SystemTime::now()) => return,
            Ok(Some(_)) => logged = false,
            Err(e) if !logged => {
                tracing::warn!(lease = %format!("{}/{}", s.namespace, s.lease_name), error = %e, "cannot read the leader Lease; retrying");
                logged = true;
            }
            Err(_) => {}
        }
        tokio::time::sleep(s.retry_period).await;
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{apimachinery::pkg::apis::meta::v1::MicroTime, jiff::Timestamp};

    use super::*;

    fn spec(holder: Option<&str>, renewed_secs_ago: Option<i64>, duration: Option<i32>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(String::from),
            renew_time: renewed_secs_ago
                .map(|ago| MicroTime(Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(ago))),
            lease_duration_seconds: duration,
            ..Default::default()
        }
    }

    #[test]
    fn when_the_lease_is_free() {
        let now = SystemTime::now();
        let cases = [
            ("no spec", None, true),
            ("no holder", Some(spec(None, Some(1), Some(15))), true),
            ("empty holder (released)", Some(spec(Some(""), None, None)), true),
            ("ours", Some(spec(Some("me"), Some(1), Some(15))), true),
            ("held and renewed", Some(spec(Some("other"), Some(1), Some(15))), false),
            ("held but expired", Some(spec(Some("other"), Some(20), Some(15))), true),
            ("held, no renew time", Some(spec(Some("other"), None, Some(15))), true),
        ];
        for (name, spec, want) in cases {
            assert_eq!(is_free(spec.as_ref(), "me", now), want, "case {name}");
        }
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
