//! The flags of `serve` for the reconciler and its leader election (client-go's names and
//! defaults for the lease timing), validated into the settings each takes.

use std::time::Duration;

use clap::Args;

use super::{CliError, duration::Seconds};
use crate::{client::PodIdentity, reconcile, reconcile::leader};

#[derive(Args, Debug, Clone)]
pub(crate) struct ReconcileArgs {
    /// Patch stored statuses that are off canonical (the leader replica only). On by default
    /// whenever a Kubernetes client exists; `--reconcile=false` turns it off.
    #[arg(long, env = "ISG_RECONCILE", default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub(crate) reconcile: bool,
    /// Most status patches per second the reconciler sends.
    #[arg(long, env = "ISG_RECONCILE_QPS", default_value_t = 20.0)]
    pub(crate) reconcile_qps: f64,
    /// The guard's own MutatingWebhookConfiguration: the reconciler patches an object only in
    /// the Namespaces the namespaceSelectors of the webhooks whose rules review its kind's
    /// status writes select, read from the API server and
    /// followed (the scope admission has), and nothing while that is unknown. Empty: the
    /// policies' namespaceSelectors alone (as with --admission=policy, which ignores it).
    #[arg(long, env = "ISG_WEBHOOK_CONFIGURATION", default_value = crate::scope::DEFAULT_CONFIGURATION)]
    pub(crate) webhook_configuration: String,
    /// Namespace of the leader-election Lease; default: POD_NAMESPACE, else `default`.
    #[arg(long, env = "ISG_LEADER_ELECTION_NAMESPACE")]
    pub(crate) leader_election_namespace: Option<String>,
    /// Name of the leader-election Lease.
    #[arg(long, env = "ISG_LEADER_ELECTION_LEASE_NAME", default_value = "ingress-status-guard")]
    pub(crate) leader_election_lease_name: String,
    /// The lease this replica writes when it leads: how long a successor waits once it stops
    /// renewing (whole seconds). A successor waits the holder's duration, not its own.
    #[arg(long, env = "ISG_LEADER_ELECTION_LEASE_DURATION", default_value = "15s", value_parser = Seconds::UP_TO_AN_HOUR)]
    pub(crate) leader_election_lease_duration: Duration,
    /// The leader renews its Lease once this much of it has passed.
    #[arg(long, env = "ISG_LEADER_ELECTION_RENEW_DEADLINE", default_value = "10s", value_parser = Seconds::UP_TO_AN_HOUR)]
    pub(crate) leader_election_renew_deadline: Duration,
    /// How often a non-leader looks at the Lease.
    #[arg(long, env = "ISG_LEADER_ELECTION_RETRY_PERIOD", default_value = "2s", value_parser = Seconds::UP_TO_AN_HOUR)]
    pub(crate) leader_election_retry_period: Duration,
}

impl ReconcileArgs {
    /// The validated settings of the reconciler and of its leader election, or the flag to fix.
    pub(crate) fn settings(&self, pod: &PodIdentity) -> Result<(reconcile::Settings, leader::Settings), CliError> {
        let reconcile = reconcile::Settings::new(self.reconcile_qps)?;
        let namespace = (self.leader_election_namespace.clone())
            .or_else(|| pod.namespace.clone())
            .unwrap_or_else(|| "default".to_owned());
        let leader = leader::Settings::new(
            namespace,
            self.leader_election_lease_name.clone(),
            leader::Settings::default_identity(pod),
            self.leader_election_lease_duration,
            self.leader_election_renew_deadline,
            self.leader_election_retry_period,
        )?;
        Ok((reconcile, leader))
    }
}
