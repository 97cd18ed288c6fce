//! The policies in force and what follows them: an atomically swapped [`Policies`] that the
//! webhook and the reconciler read, the publish-Service watches that the policies need, and the
//! hot reload of `--config`.
//!
//! A reload reads the file whenever its directory changes (a ConfigMap volume's `..data`
//! symlink swap) or the poll ticks. A file that parses to different policies replaces them in
//! one swap, so a reader sees the old set or the new one, never a mix; then Service watches
//! start and stop to match, and subscribers (the reconciler) are told. A file that does not
//! parse is refused: the old policies stay, and the refusal is logged at ERROR with the field,
//! counted, and written as a Warning Event on the webhook's own Pod when the Downward API
//! names it ([`PodIdentity`]).

use std::{collections::HashMap, path::PathBuf, sync::Arc, time::Duration};

use arc_swap::ArcSwap;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Client,
    runtime::events::{Event, EventType, Recorder, Reporter},
};
use tokio::{sync::watch, task::AbortHandle};

use crate::{
    client::PodIdentity,
    metrics::Metrics,
    policy::{self, Policies, ServiceRef},
    reload::fswatch::Changes,
    sources::SourceCache,
};

/// How often the config file is read even without a filesystem event.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_secs(10);
/// Reason of the Warning Event on the Pod for a refused file.
pub(crate) const REFUSED_REASON: &str = "PolicyConfigRefused";
/// The API server refuses Event notes over 1 kB.
const MAX_NOTE: usize = 1000;

/// The current policies; cheap to read from any thread.
pub(crate) struct PolicyStore {
    current: ArcSwap<Policies>,
    generation: watch::Sender<u64>,
}

impl PolicyStore {
    pub(crate) fn new(policies: Policies) -> Arc<Self> {
        Arc::new(PolicyStore { current: ArcSwap::from_pointee(policies), generation: watch::Sender::new(0) })
    }

    /// The policies in force now. Hold the result for one decision, not longer.
    pub(crate) fn load(&self) -> Arc<Policies> {
        self.current.load_full()
    }

    /// Changes whenever the policies are replaced.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    fn replace(&self, policies: Policies) {
        self.current.store(Arc::new(policies));
        self.generation.send_modify(|g| *g += 1);
    }
}

/// One watch task per publish Service of the policies in force.
pub(crate) struct ServiceWatches {
    client: Client,
    cache: Arc<SourceCache>,
    tasks: HashMap<ServiceRef, AbortHandle>,
    /// The watches of the cache's inventory (IngressClasses, Namespaces, Pods, Nodes).
    inventory: Option<AbortHandle>,
}

impl ServiceWatches {
    /// Starts watching what `policies` need. Must be called inside a tokio runtime.
    pub(crate) fn start(client: Client, cache: Arc<SourceCache>, policies: &Policies) -> Self {
        let mut watches = ServiceWatches { client, cache, tasks: HashMap::new(), inventory: None };
        watches.sync_policies(policies);
        watches
    }

    /// Makes the watches exactly those `policies` need: their publish Services, and the
    /// inventory's watches (restarted when the needed cluster facts change).
    pub(crate) fn sync_policies(&mut self, policies: &Policies) {
        self.sync(&policies.services());
        if self.cache.track_inventory(policies) || self.inventory.is_none() {
            if let Some(old) = self.inventory.take() {
                old.abort();
            }
            let task = tokio::spawn(self.cache.clone().watch_inventory(self.client.clone()));
            self.inventory = Some(task.abort_handle());
        }
    }

    /// Makes the set of watches exactly `services`.
    pub(crate) fn sync(&mut self, services: &[ServiceRef]) {
        self.cache.track(services);
        self.tasks.retain(|svc, task| {
            let keep = services.contains(svc);
            if !keep {
                tracing::info!(service = %svc, "stopped watching publish Service (no policy uses it)");
                task.abort();
            }
            keep
        });
        for svc in services {
            if !self.tasks.contains_key(svc) {
                let task = tokio::spawn(self.cache.clone().watch_service(self.client.clone(), svc.clone()));
                self.tasks.insert(svc.clone(), task.abort_handle());
            }
        }
    }
}

impl Drop for ServiceWatches {
    fn drop(&mut self) {
        if let Some(task) = &self.inventory {
            task.abort();
        }
        for task in self.tasks.values() {
            task.abort();
        }
    }
}

/// Where the refusal of a file is reported besides the log and the metric.
pub(crate) struct PodEvents {
    recorder: Recorder,
    pod: ObjectReference,
}

impl PodEvents {
    /// The webhook's own Pod, if the Downward API names it (`POD_NAME` and `POD_NAMESPACE`).
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
        let mut note = format!("policy file refused, previous policies stay in force: {message}");
        if note.len() > MAX_NOTE {
            let mut cut = MAX_NOTE - 3;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
            note.push_str("...");
        }
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
            changes.next().await;
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
        let needs = policies.cluster_needs();
        if self.watches.is_none() && (needs.pods || needs.ingress_classes || needs.namespaces) {
            return Err(format!(
                "config file {}: its policies need IngressClasses, Namespaces or controller Pods, and there is no Kubernetes client to watch them (start with --kubeconfig or in a cluster)",
                self.path.display()
            ));
        }
        if self.watches.is_none()
            && let Some(svc) = policies.services().first()
        {
            return Err(format!(
                "config file {}: publishService {svc}: no Kubernetes client to watch it (start with --kubeconfig or in a cluster)",
                self.path.display()
            ));
        }
        Ok(policies)
    }

    fn apply(&mut self, policies: Policies) {
        for p in policies.iter() {
            tracing::info!(policy = %p.name, sources = %policy::SourceList(&p.sources), mode = %p.mode, "policy reloaded");
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
