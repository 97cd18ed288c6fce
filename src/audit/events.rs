//! Findings off the request path: the handler queues each finding without waiting, and one
//! background task logs it and (with a cluster, unless a dry run) writes a Kubernetes Event
//! through kube's recorder, which counts repeats of the same writer on the same Ingress up
//! instead of creating new Events.

use std::{future::Future, sync::Arc};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Client,
    runtime::events::{Event, EventType, Recorder, Reporter},
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{
    audit::Finding,
    audit::ratelimit::{self, Limiter},
    decision::Action,
    metrics::Metrics,
};

/// Reason shown by `kubectl describe ingress`.
pub(crate) const REASON: &str = "RogueStatusWrite";
/// Findings waiting to be logged and published; beyond this the newest are dropped and counted
/// (`kubernetes_events_total{result="dropped"}`), so a storm of writes can never make the webhook
/// wait or grow without bound.
const QUEUE: usize = 1024;

/// The handler's end of the queue.
#[derive(Clone)]
pub struct EventSink {
    tx: mpsc::Sender<Finding>,
    metrics: Arc<Metrics>,
}

impl EventSink {
    /// Queues a finding without waiting: one `try_send`, and the formatting of its log line
    /// and Event happens in the background task.
    pub fn publish(&self, finding: Finding) {
        if self.tx.try_send(finding).is_err() {
            self.metrics.event("dropped");
        }
    }
}

/// The sink for the handler, and the task to run until `shutdown`; then it handles what is
/// still queued (its owner bounds how long) and ends. Without a client findings are only logged.
pub(crate) fn start(
    client: Option<Client>,
    instance: Option<String>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) -> (EventSink, impl Future<Output = ()> + Send + 'static) {
    let (tx, mut rx) = mpsc::channel::<Finding>(QUEUE);
    let reporter = Reporter { controller: "ingress-status-guard".to_owned(), instance };
    let recorder = client.map(|client| Recorder::new(client, reporter));
    let task_metrics = metrics.clone();
    let mut limiter = Limiter::new(ratelimit::PER_INGRESS, ratelimit::OVERALL, tokio::time::Instant::now());
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
            finding.log();
            // A dry run has no side effects: logged, never an Event.
            let Some(recorder) = recorder.as_ref().filter(|_| !finding.dry_run) else { continue };
            // A forged flood must not become an Event flood; the log line above, the metrics,
            // the warning and the audit annotations still report every write.
            if !limiter.allow(&finding.namespace, &finding.name, tokio::time::Instant::now()) {
                task_metrics.event("rate_limited");
                continue;
            }
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
    (EventSink { tx, metrics }, task)
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
