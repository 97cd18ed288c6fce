//! The leader's work in `serve`: one leader election for the reconciler and the admission
//! policy keeper, each started when on, and stopped (the Lease handed over) at SIGTERM.

use std::sync::Arc;

use tokio::sync::oneshot;

use crate::{
    admission_policy::keeper::Keeper,
    metrics::Metrics,
    policy::store::PolicyStore,
    reconcile::{self, leader},
    scope,
    sources::SourceCache,
    sources::known::KnownByKind,
    sources::owned::{Tasks, or_never},
};

/// What the leader does (the reconciler, the keeper, or both), and its election.
pub(super) struct Leader {
    pub(super) client: kube::Client,
    pub(super) settings: leader::Settings,
    pub(super) reconcile: Option<reconcile::Settings>,
    /// `--webhook-configuration`, which scopes the reconciler.
    pub(super) webhook_configuration: String,
    pub(super) keeper: Option<Keeper>,
}

/// Starts leader election with the reconciler and the keeper, each if on; the sender stops them.
pub(super) fn start_leader_work(
    tasks: &mut Tasks,
    leader: Option<Leader>,
    store: &Arc<PolicyStore>,
    cache: &Arc<SourceCache>,
    metrics: &Arc<Metrics>,
    known: Option<KnownByKind>,
) -> oneshot::Sender<()> {
    let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
    let Some(Leader { client, settings: leader_settings, reconcile, webhook_configuration, keeper }) = leader else {
        tracing::info!("reconciler off (--reconcile=false or no Kubernetes client)");
        return stop_tx;
    };
    let lease = format!("{}/{}", leader_settings.namespace, leader_settings.lease_name);
    let identity = leader_settings.identity.clone();
    let leadership = leader::start(client.clone(), leader_settings, metrics.clone());
    // In admission policy mode the reconciler judges by what the admission policies enforce.
    let (sources, changed): (Arc<dyn crate::sources::Sources>, _) = match &keeper {
        Some(keeper) => (keeper.enforced.clone(), keeper.enforced.subscribe()),
        None => (cache.clone(), cache.subscribe()),
    };
    // The scope follower and the keeper are owned by the leader task below: a panic of either
    // is logged and makes the process not ready.
    let mut owned = Tasks::new(tasks.failures());
    // In admission policy mode there is no webhook configuration: the policies scope it.
    let scope = match (&reconcile, &keeper) {
        (Some(_), None) if !webhook_configuration.is_empty() => {
            tracing::info!(webhook_configuration = %webhook_configuration, "the reconciler patches only in the Namespaces this MutatingWebhookConfiguration selects");
            let (scope, follow) = scope::follow::Scope::start(client.clone(), webhook_configuration, metrics.clone());
            owned.spawn("watch of the reconciler's scope (webhook configuration, Namespaces)", follow);
            scope
        }
        _ => scope::follow::Scope::everywhere(),
    };
    let mut running = reconcile.map(|settings| {
        tracing::info!(qps = settings.qps, lease = %lease, identity = %identity, "reconciler on: the leader patches stored statuses that are off canonical");
        let common = reconcile::Common {
            client,
            policies: store.clone(),
            sources,
            sources_changed: changed,
            leader: leadership.subscribe(),
            metrics: metrics.clone(),
            bounds: Arc::new(reconcile::Bounds::new(settings)),
            scope,
        };
        reconcile::start(common, known, tasks.failures())
    });
    if running.is_none() {
        tracing::info!("reconciler off (--reconcile=false)");
    }
    if let Some(keeper) = keeper {
        tracing::info!(lease = %lease, identity = %identity, api_version = keeper.api.group_version(), "admission policy mode: the leader keeps the admission policies current; /mutate is not served");
        owned.spawn("admission policy keeper", keeper.run(leadership.subscribe()));
    }
    // At SIGTERM (not only when tasks stop, after the drain): stop patching, then hand the
    // Lease over at once. The admission policies stay: they enforce while no guard runs.
    let token = tasks.shutdown_token();
    tasks.spawn("reconciler, admission policy keeper and leader election", async move {
        loop {
            tokio::select! {
                _ = &mut stop_rx => break,
                () = token.cancelled() => break,
                () = owned.ended() => {}
                () = or_never(running.as_mut().map(Tasks::ended)) => {}
            }
        }
        drop(running);
        drop(owned);
        leadership.release().await;
        // Ending before the other tasks stop would read as a failure.
        token.cancelled().await;
    });
    stop_tx
}
