//! Kubernetes Events about rogue writes, published off the request path: the handler queues a
//! finding without waiting, and one background task writes Events through kube's recorder,
//! which counts repeats of the same writer on the same Ingress up instead of creating new Events.

use std::{
    future::Future,
    sync::{Arc, Mutex},
};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Client,
    runtime::events::{Event, EventType, Recorder, Reporter},
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{
    audit::Finding,
    decision::Action,
    metrics::Metrics,
    ratelimit::{self, Limiter},
};

/// Reason shown by `kubectl describe ingress`.
pub(crate) const REASON: &str = "RogueStatusWrite";
/// Findings waiting to be published; beyond this the newest are dropped and counted, so a storm
/// of writes can never make the webhook wait or grow without bound.
const QUEUE: usize = 1024;

/// The handler's end of the queue.
#[derive(Clone)]
pub struct EventSink {
    tx: mpsc::Sender<Finding>,
    metrics: Arc<Metrics>,
    limiter: Arc<Mutex<Limiter>>,
}

impl EventSink {
    /// Queues a finding without waiting. Dry runs must not get here (no side effects).
    pub fn publish(&self, finding: Finding) {
        debug_assert!(!finding.dry_run);
        let now = tokio::time::Instant::now();
        let allowed = self.limiter.lock().unwrap_or_else(std::sync::PoisonError::into_inner).allow(
            &finding.namespace,
            &finding.name,
            now,
        );
        if !allowed {
            // Logs, metrics, warnings and audit annotations still report the write.
            self.metrics.event("rate_limited");
            return;
        }
        if self.tx.try_send(finding).is_err() {
            self.metrics.event("dropped");
        }
    }
}

/// The sink for the handler, and the publisher task to run until `shutdown`; then it publishes
/// what is still queued (its owner bounds how long) and ends.
pub(crate) fn start(
    client: Client,
    instance: Option<String>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) -> (EventSink, impl Future<Output = ()> + Send + 'static) {
    let (tx, mut rx) = mpsc::channel::<Finding>(QUEUE);
    let reporter = Reporter { controller: "ingress-status-guard".to_owned(), instance };
    let recorder = Recorder::new(client, reporter);
    let task_metrics = metrics.clone();
    let task = async move {
        loop {
            let finding = tokio::select! {
                finding = rx.recv() => finding,
                () = shutdown.cancelled() => {
                    rx.close();
                    rx.recv().await
                }
            };
            let Some(finding) = finding else { break };
            let (event, regarding) = to_event(&finding);
            match recorder.publish(&event, &regarding).await {
                Ok(()) => task_metrics.event("published"),
                Err(e) => {
                    task_metrics.event("failed");
                    tracing::warn!(ingress = %format!("{}/{}", finding.namespace, finding.name), error = %e, "cannot write Kubernetes Event; check RBAC for events.k8s.io events create/patch");
                }
            }
        }
    };
    let limiter = Limiter::new(ratelimit::PER_INGRESS, ratelimit::OVERALL, tokio::time::Instant::now());
    (EventSink { tx, metrics, limiter: Arc::new(Mutex::new(limiter)) }, task)
}

/// The Event for a finding. The writer is the `related` object, so the recorder aggregates
/// repeats per writer and Ingress.
pub(crate) fn to_event(finding: &Finding) -> (Event, ObjectReference) {
    let regarding = ObjectReference {
        api_version: Some("networking.k8s.io/v1".to_owned()),
        kind: Some("Ingress".to_owned()),
        namespace: Some(finding.namespace.clone()),
        name: Some(finding.name.clone()),
        uid: finding.object_uid.clone(),
        ..Default::default()
    };
    let writer = match &finding.writer.service_account {
        Some((namespace, name)) => ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("ServiceAccount".to_owned()),
            namespace: Some(namespace.clone()),
            name: Some(name.clone()),
            ..Default::default()
        },
        None => ObjectReference {
            api_version: Some("rbac.authorization.k8s.io/v1".to_owned()),
            kind: Some("User".to_owned()),
            name: Some(finding.writer.username.clone()),
            ..Default::default()
        },
    };
    let action = match finding.action {
        Action::Rewrite => "RewriteStatus",
        Action::Deny => "DenyStatus",
        Action::Audit => "AuditStatus",
    };
    let event = Event {
        type_: EventType::Warning,
        reason: REASON.to_owned(),
        note: Some(finding.note()),
        action: action.to_owned(),
        secondary: Some(writer),
    };
    (event, regarding)
}
