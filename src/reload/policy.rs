//! The hot reload of the policy file of `--config`: new policies replace the old in one swap
//! ([`PolicyStore`]) after the watches start and stop to match ([`ServiceWatches`]). A file that
//! does not parse is refused, logged, counted, and written as a Warning Event on the webhook's
//! own Pod when the Downward API names it ([`PodIdentity`]).

use std::{path::PathBuf, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Client,
    runtime::events::{Event, EventType, Recorder, Reporter},
};

use crate::{
    client::PodIdentity,
    metrics::Metrics,
    names,
    policy::{self, Policies, store::PolicyStore},
    reload::fswatch::Changes,
    sources::{owned::or_never, watches::ServiceWatches},
};

/// How often the config file is read even without a filesystem event.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_secs(10);
/// Reason of the Warning Event on the Pod for a refused file.
pub(crate) const REFUSED_REASON: &str = "PolicyConfigRefused";
/// The API server refuses Event notes over 1 kB.
const MAX_NOTE: usize = 1000;

/// Where the refusal of a file is reported besides the log and the metric.
pub(crate) struct PodEvents {
    recorder: Recorder,
    pod: ObjectReference,
}

impl PodEvents {
    /// The webhook's own Pod, if the Downward API names it.
    pub(crate) fn new(client: Client, pod: &PodIdentity) -> Option<Self> {
        let (name, namespace) = (pod.name.clone()?, pod.namespace.clone()?);
        let reporter = Reporter { controller: "ingress-status-guard".to_owned(), instance: Some(name.clone()) };
        let pod = ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Pod".to_owned()),
            namespace: Some(namespace),
            name: Some(name),
            ..Default::default()
        };
        Some(PodEvents { recorder: Recorder::new(client, reporter), pod })
    }

    async fn refused(&self, message: &str) {
        let note = format!("policy file refused, previous policies stay in force: {message}");
        let note = names::truncate(&note, usize::MAX, MAX_NOTE);
        let event = Event {
            type_: EventType::Warning,
            reason: REFUSED_REASON.to_owned(),
            note: Some(note),
            action: "ReloadConfig".to_owned(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &self.pod).await {
            tracing::warn!(error = %e, "cannot write the Event about the refused policy file on this Pod");
        }
    }
}

/// What a reload needs besides the file.
pub(crate) struct Reload {
    pub(crate) path: PathBuf,
    pub(crate) poll: Duration,
    pub(crate) store: Arc<PolicyStore>,
    /// `None` without a Kubernetes client: then a file naming a publish Service is refused.
    pub(crate) watches: Option<ServiceWatches>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) pod_events: Option<PodEvents>,
    /// The API server predates Ingress status ports: reloaded policies keep none either.
    pub(crate) drops_ports: bool,
}

impl Reload {
    /// Watches the file until the task is dropped or aborted.
    pub(crate) async fn run(mut self) {
        let mut changes = Changes::watch(&[self.path.as_path()], self.poll, "config");
        // The last refusal, so a broken file is reported once, not at every poll.
        let mut refused: Option<String> = None;
        loop {
            // A watch's end is logged and reported by `ended`; the reload goes on.
            tokio::select! {
                () = changes.next() => {}
                () = or_never(self.watches.as_mut().map(ServiceWatches::ended)) => continue,
            }
            match self.read() {
                Ok(policies) if policies == *self.store.load() => refused = None,
                Ok(policies) => {
                    refused = None;
                    self.apply(policies);
                }
                Err(message) if refused.as_deref() == Some(message.as_str()) => {}
                Err(message) => {
                    tracing::error!(error = %message, file = %self.path.display(), "refused the new policy file; the previous policies stay in force");
                    self.metrics.config_reload("failed");
                    if let Some(events) = &self.pod_events {
                        events.refused(&message).await;
                    }
                    refused = Some(message);
                }
            }
        }
    }

    fn read(&self) -> Result<Policies, String> {
        let mut policies = policy::load_file(&self.path).map_err(|e| e.to_string())?;
        if self.drops_ports {
            policies = policies.without_ports();
        }
        if self.watches.is_some() {
            return Ok(policies);
        }
        let (needs, file) = (policies.cluster_needs(), self.path.display());
        if needs.pods || needs.classes.contains(&true) || needs.namespaces {
            return Err(format!(
                "config file {file}: its policies need class objects (IngressClasses, GatewayClasses), Namespaces or controller Pods, and there is no Kubernetes client to watch them (start with --kubeconfig or in a cluster)"
            ));
        }
        if let Some(svc) = policies.services().first() {
            return Err(format!(
                "config file {file}: publishService {svc}: no Kubernetes client to watch it (start with --kubeconfig or in a cluster)"
            ));
        }
        Ok(policies)
    }

    fn apply(&mut self, policies: Policies) {
        for p in policies.iter() {
            tracing::info!(policy = %p.name, sources = %policy::SourceList(&p.sources), mode = %p.mode, "policy reloaded");
            p.warn_if_kind_inferred();
        }
        // Watches first: a Service new to the policies is then already being read (and
        // unresolved until synced, which the webhook treats as any unresolved source).
        if let Some(watches) = &mut self.watches {
            watches.sync_policies(&policies);
        }
        self.store.replace(policies);
        self.metrics.config_reload("success");
        tracing::info!(file = %self.path.display(), "policy file reloaded");
    }
}
