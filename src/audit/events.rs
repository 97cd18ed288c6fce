//! Findings off the request path. The handler queues each finding without waiting (bounded in
//! count and bytes); the reporter task logs it ([`crate::audit::summary`]) and makes an Event of
//! it only about an object the guard's own watch knows, within the fair shares of [`ratelimit`].
//! A second loop publishes the Events, each under a timeout, so a hung API server delays
//! Events, never the log lines and counts of later findings.

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Client,
    runtime::events::{Event, EventType, Reporter},
};
use tokio::{sync::mpsc, time::Instant};
use tokio_util::sync::CancellationToken;

mod recorder;
use recorder::Recorder;

use crate::{
    audit::{
        Finding,
        ratelimit::{self, Limiter, Rates, Share},
        summary::{self, Seen, Summariser},
    },
    decision::Action,
    metrics::Metrics,
    names::truncate,
    sources::{
        known::{Known, KnownByKind},
        owned::or_never,
    },
};

/// Reason shown by `kubectl describe ingress` (and `kubectl describe gateway`).
pub(crate) const REASON: &str = "RogueStatusWrite";
/// Findings waiting for the reporter, in count and in bytes; beyond either the newest are
/// dropped, counted and (at most every [`DROP_LOG_EVERY`]) logged, so a storm of writes can
/// never make the webhook wait or grow without bound.
const QUEUE: usize = 1024;
const QUEUE_BYTES: usize = 2 * 1024 * 1024;
const DROP_LOG_EVERY: Duration = Duration::from_secs(10);
/// Events waiting for the publisher; while it is stuck, further Events are dropped and counted.
/// Above the overall burst of the Event budget, so a burst the budget allows always fits.
const PUBLISH_QUEUE: usize = 512;
/// Findings about an object the index does not know yet (the watch may deliver it after its
/// first status write) wait this long, at most this many at once.
const AWAIT_INDEX: Duration = Duration::from_secs(2);
const MAX_AWAITING: usize = 64;
/// Longest `related` (writer) name written into an Event.
const MAX_RELATED: usize = 253;

/// How findings are reported.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    /// `--repeat-log-interval` (zero: every finding gets its own line).
    pub repeat_interval: Duration,
    /// Longest wait for one Event to be written.
    pub publish_timeout: Duration,
    /// The Event budget.
    pub rates: Rates,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            repeat_interval: summary::DEFAULT_INTERVAL,
            publish_timeout: Duration::from_secs(10),
            rates: ratelimit::RATES,
        }
    }
}

/// Where Events go: the client, and the indexes of the Ingresses and Gateways they may be about.
pub(crate) struct Publisher {
    pub client: Client,
    /// The objects the guard's watches know, per kind.
    pub known: KnownByKind,
}

/// The handler's end of the queue.
#[derive(Clone)]
pub struct EventSink {
    tx: mpsc::Sender<(Finding, usize)>,
    bytes: Arc<AtomicUsize>,
    drops: Arc<DropLog>,
    metrics: Arc<Metrics>,
}

/// `DropLog::last_ms` before the first line.
const NEVER: u64 = u64::MAX;

/// Logs dropped findings at most once per [`DROP_LOG_EVERY`], with how many since the last line.
struct DropLog {
    start: std::time::Instant,
    last_ms: AtomicU64,
    since: AtomicU64,
}

impl DropLog {
    fn dropped(&self) {
        self.since.fetch_add(1, Ordering::Relaxed);
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.last_ms.load(Ordering::Relaxed);
        let every = u64::try_from(DROP_LOG_EVERY.as_millis()).unwrap_or(u64::MAX);
        if log_due(last, now, every)
            && self.last_ms.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            let dropped = self.since.swap(0, Ordering::Relaxed);
            tracing::warn!(
                dropped,
                "finding queue full: findings dropped unlogged (counted in findings_dropped_total and rogue_writes_total); a flood of writes or a stuck reporter"
            );
        }
    }
}

/// Whether a drop at `now` gets a line, the last line having been at `last` (ms since start).
fn log_due(last: u64, now: u64, every: u64) -> bool {
    last == NEVER || now.saturating_sub(last) >= every
}

impl EventSink {
    /// Queues a finding without waiting; its log line and Event are made in the background.
    pub fn publish(&self, finding: Finding) {
        let weight = finding.weight();
        let held = self.bytes.fetch_add(weight, Ordering::Relaxed) + weight;
        if held > QUEUE_BYTES || self.tx.try_send((finding, weight)).is_err() {
            self.bytes.fetch_sub(weight, Ordering::Relaxed);
            self.metrics.finding_dropped();
            self.metrics.event("dropped");
            self.drops.dropped();
        }
    }
}

/// The sink for the handler, and the task to run until `shutdown`, then through what is still
/// queued (Events included). Without a publisher findings are only logged.
pub(crate) fn start(
    publisher: Option<Publisher>,
    instance: Option<String>,
    metrics: Arc<Metrics>,
    settings: Settings,
    shutdown: CancellationToken,
) -> (EventSink, impl Future<Output = ()> + Send + 'static) {
    let (tx, rx) = mpsc::channel::<(Finding, usize)>(QUEUE);
    let bytes = Arc::new(AtomicUsize::new(0));
    let drops = Arc::new(DropLog {
        start: std::time::Instant::now(),
        last_ms: AtomicU64::new(NEVER),
        since: AtomicU64::new(0),
    });
    let sink = EventSink { tx, bytes: bytes.clone(), drops, metrics: metrics.clone() };
    let reporter = Reporter { controller: "ingress-status-guard".to_owned(), instance };
    let (events, known, publish) = match publisher {
        Some(Publisher { client, known }) => {
            let (events_tx, events_rx) = mpsc::channel(PUBLISH_QUEUE);
            let recorder = Recorder::new(client, reporter);
            let publish = publish_loop(recorder, events_rx, metrics.clone(), settings.publish_timeout);
            (Some(events_tx), Some(known), Some(publish))
        }
        None => (None, None, None),
    };
    let report = Report {
        metrics,
        settings,
        summariser: Summariser::new(settings.repeat_interval, summary::MAX_KEYS),
        limiter: Limiter::new(settings.rates, Instant::now()),
        known,
        events,
        awaiting: Vec::new(),
    }
    .run(rx, bytes, shutdown);
    // The publisher ends when the reporter has ended and dropped its queue's sender.
    let task = async move {
        tokio::join!(report, futures::future::OptionFuture::from(publish));
    };
    (sink, task)
}

/// An Event ready to be written, and the object it is about (for the log).
type Ready = (Event, ObjectReference, String);

/// Whether the index of the finding's kind knows its object.
fn check(known: &KnownByKind, finding: &Finding) -> Known {
    known[finding.kind as usize].check(&finding.namespace, &finding.name, finding.object_uid.as_deref())
}

/// The reporter's state.
struct Report {
    metrics: Arc<Metrics>,
    settings: Settings,
    summariser: Summariser,
    limiter: Limiter,
    known: Option<KnownByKind>,
    events: Option<mpsc::Sender<Ready>>,
    /// Findings whose Ingress the index does not know yet: until when they wait, and whether
    /// their skip deserves its own line.
    awaiting: Vec<(Instant, Finding, bool)>,
}

impl Report {
    async fn run(
        mut self,
        mut rx: mpsc::Receiver<(Finding, usize)>,
        bytes: Arc<AtomicUsize>,
        shutdown: CancellationToken,
    ) {
        let mut index_changed = self.known.as_ref().map(|k| k.each_ref().map(|index| index.subscribe()));
        let mut stopping = false;
        loop {
            let wake = [self.summariser.next_end(), self.awaiting.iter().map(|(at, ..)| *at).min()]
                .into_iter()
                .flatten()
                .min();
            let index_ticked = async {
                let ticked = match index_changed.as_mut() {
                    Some(indexes) => {
                        let changes = indexes.iter_mut().map(|index| Box::pin(index.changed()));
                        futures::future::select_all(changes).await.0.is_ok()
                    }
                    None => false,
                };
                if !ticked {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                item = rx.recv() => match item {
                    // Under load, one wake-up takes what has queued since: fewer timers set
                    // and wake-ups made, on the CPUs the webhook answers on.
                    Some(first) => {
                        for (finding, weight) in std::iter::once(first).chain(std::iter::from_fn(|| rx.try_recv().ok())) {
                            bytes.fetch_sub(weight, Ordering::Relaxed);
                            self.handle(finding);
                        }
                    }
                    None => break,
                },
                () = or_never(wake.map(tokio::time::sleep_until)) => {}
                () = index_ticked, if !self.awaiting.is_empty() => {}
                () = shutdown.cancelled(), if !stopping => {
                    rx.close();
                    stopping = true;
                }
            }
            let now = Instant::now();
            for repeated in self.summariser.due(now) {
                summary::log(&repeated, self.settings.repeat_interval);
            }
            self.recheck(now);
        }
        for repeated in self.summariser.flush() {
            summary::log(&repeated, self.settings.repeat_interval);
        }
    }

    fn handle(&mut self, finding: Finding) {
        let now = Instant::now();
        for repeated in self.summariser.due(now) {
            summary::log(&repeated, self.settings.repeat_interval);
        }
        let loud = match self.summariser.observe(&finding, now) {
            Seen::First | Seen::Untracked => {
                finding.log();
                self.metrics.finding_logged(true);
                true
            }
            Seen::Repeat | Seen::Overflow => {
                self.metrics.finding_logged(false);
                false
            }
        };
        // A dry run has no side effects: logged, never an Event.
        if finding.dry_run {
            return;
        }
        let Some(known) = &self.known else { return };
        match check(known, &finding) {
            Known::Yes => self.offer(&finding),
            // Not known yet, or not listed yet: wait a moment for the watch.
            Known::No | Known::NotSynced if self.awaiting.len() < MAX_AWAITING => {
                self.awaiting.push((now + AWAIT_INDEX, finding, loud));
            }
            known => self.skip(&finding, known, loud),
        }
    }

    /// Findings whose Ingress has since appeared get their Event; those out of time, none.
    fn recheck(&mut self, now: Instant) {
        let Some(known) = self.known.take() else { return };
        for (until, finding, loud) in std::mem::take(&mut self.awaiting) {
            match check(&known, &finding) {
                Known::Yes => self.offer(&finding),
                known if now >= until => self.skip(&finding, known, loud),
                _ => self.awaiting.push((until, finding, loud)),
            }
        }
        self.known = Some(known);
    }

    /// Counts (and, for a finding logged in full, logs) a finding that gets no Event.
    fn skip(&self, finding: &Finding, known: Known, loud: bool) {
        if known == Known::NotSynced {
            self.metrics.event_skipped("not_synced");
            if loud {
                tracing::info!(kind = finding.kind.name(), object = %format!("{}/{}", finding.namespace, finding.name), "no Event: the watch of known objects of this kind has not listed yet");
            }
            return;
        }
        self.metrics.event_skipped("unknown_object");
        if loud {
            tracing::warn!(
                kind = finding.kind.name(),
                namespace = %finding.namespace,
                name = %finding.name,
                object_uid = finding.object_uid.as_deref().unwrap_or(""),
                writer = %truncate(&finding.writer.username, usize::MAX, 1024),
                "no Event: the namespace, name and uid are not an Ingress (or Gateway, by kind) the guard's watch knows (a forged review?)"
            );
        }
    }

    /// Passes the finding's Event to the publisher if the budget allows.
    fn offer(&mut self, finding: &Finding) {
        let Some(events) = &self.events else { return };
        let share = Share {
            namespace: &finding.namespace,
            name: &finding.name,
            writer: &finding.writer.username,
            policy: &finding.policy,
        };
        // A forged flood must not become an Event flood; the log line, the metrics, the warning
        // and the audit annotations still report every write.
        if !self.limiter.allow(share, Instant::now()) {
            self.metrics.event("rate_limited");
            return;
        }
        let (event, regarding) = to_event(finding);
        let object = format!("{} {}/{}", finding.kind.name(), finding.namespace, finding.name);
        if events.try_send((event, regarding, object)).is_err() {
            self.metrics.event("dropped");
        }
    }
}

/// Writes Events one at a time, each within `timeout`.
async fn publish_loop(mut recorder: Recorder, mut rx: mpsc::Receiver<Ready>, metrics: Arc<Metrics>, timeout: Duration) {
    while let Some((event, regarding, object)) = rx.recv().await {
        match tokio::time::timeout(timeout, recorder.publish(&event, &regarding)).await {
            Ok(Ok(())) => metrics.event("published"),
            Ok(Err(e)) => {
                metrics.event("failed");
                tracing::warn!(object = %object, error = %e, "cannot write Kubernetes Event; check RBAC for events.k8s.io events create/patch");
            }
            Err(_) => {
                metrics.event("timed_out");
                tracing::warn!(object = %object, timeout_seconds = timeout.as_secs_f64(), "Kubernetes Event not written in time; the API server is slow or unreachable (findings are still logged and counted)");
            }
        }
    }
}

/// The Event for a finding. The writer is the `related` object, so the recorder aggregates
/// repeats per writer and Ingress. Every caller-chosen string in it is bounded.
pub(crate) fn to_event(finding: &Finding) -> (Event, ObjectReference) {
    let regarding = ObjectReference {
        api_version: Some(finding.kind.api_version().to_owned()),
        kind: Some(finding.kind.name().to_owned()),
        namespace: Some(finding.namespace.clone()),
        name: Some(finding.name.clone()),
        uid: finding.object_uid.clone(),
        ..Default::default()
    };
    let cut = |s: &str| truncate(s, usize::MAX, MAX_RELATED);
    let writer = match &finding.writer.service_account {
        Some((namespace, name)) => ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("ServiceAccount".to_owned()),
            namespace: Some(cut(namespace)),
            name: Some(cut(name)),
            ..Default::default()
        },
        None => ObjectReference {
            api_version: Some("rbac.authorization.k8s.io/v1".to_owned()),
            kind: Some("User".to_owned()),
            name: Some(cut(&finding.writer.username)),
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

#[cfg(test)]
mod tests;
