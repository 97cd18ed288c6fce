//! Prometheus metrics of the webhook, served as text on the admin port's `/metrics`. Label
//! values that a caller controls are escaped and bounded, in length ([`labels`]) and in number
//! (the `writer` label's table: [`writers`]).

mod labels;
pub(crate) mod objects;
pub(crate) mod writers;

use std::{sync::Mutex, time::Duration};

use prometheus_client::{
    encoding::text::encode,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

pub(crate) use writers::WriterLabels;

use labels::*;

use crate::kind::Kind;

/// Default of `--max-writer-labels`: distinct `writer` label values at once; a newcomer then
/// takes the label of the writer seen least recently ([`writers`]).
pub(crate) const DEFAULT_MAX_WRITERS: usize = 50;
/// The `writer` label of every write with `--max-writer-labels=0`.
pub(crate) const OTHER_WRITER: &str = "other";
/// The crate version and the git revision it was built from ("unknown" without git: build.rs).
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");
pub(crate) const REVISION: &str = env!("ISG_GIT_REVISION");
/// What `--version` prints after the program name.
pub(crate) const VERSION_LINE: &str = concat!(env!("CARGO_PKG_VERSION"), " (revision ", env!("ISG_GIT_REVISION"), ")");

/// Review outcomes, plus `error` for requests answered with an HTTP error.
pub(crate) const ERROR: &str = "error";

/// Every `result` a review can be counted under (`Verdict::result`, and [`ERROR`]).
const RESULTS: [&str; 10] = [
    "patched",
    "unchanged",
    "trusted",
    "not_governed",
    "audited",
    "denied",
    "unresolved",
    "unresolved_denied",
    "ignored",
    ERROR,
];

/// A new metric of type `M`, registered under `name`.
fn registered<M: prometheus_client::registry::Metric + Clone + Default>(
    registry: &mut Registry,
    name: &str,
    help: &str,
) -> M {
    let metric = M::default();
    registry.register(name, help, metric.clone());
    metric
}

/// Declares [`Metrics`] and its constructor from a table of fields, each made by its
/// expression in the table's order (the order of the exposition) with `$registry`,
/// `$max_writers` and `$labels` in scope.
macro_rules! metrics {
    ($registry:ident, $max_writers:ident, $labels:ident; $($(#[$doc:meta])* $field:ident: $ty:ty = $init:expr;)*) => {
        /// Every metric the webhook exports.
        pub struct Metrics {
            $($(#[$doc])* $field: $ty,)*
        }

        impl Metrics {
            /// Metrics whose `writer` label takes at most `max_writers` distinct values at once,
            /// each shown as `labels` says.
            pub(crate) fn with_writer_labels($max_writers: usize, $labels: WriterLabels) -> Self {
                let mut $registry = Registry::with_prefix("ingress_status_guard");
                $(let $field: $ty = $init;)*
                Metrics { $($field,)* }
            }
        }
    };
}

metrics! { registry, max_writers, labels;
    requests: Family<ResultLabel, Counter> = registered(&mut registry, "admission_requests",
        "AdmissionReviews answered, by result (patched, unchanged, not_governed, audited, denied, unresolved, unresolved_denied, ignored, error)");
    // Handling takes tens of microseconds: buckets from 25 µs, so the histogram resolves it.
    duration: Histogram = {
        let buckets = [0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25];
        let duration = Histogram::new(buckets);
        let help = "Time from request body received to response built";
        registry.register("admission_duration_seconds", help, duration.clone());
        duration
    };
    rogue_writes: Family<RogueLabels, Counter> = registered(&mut registry, "rogue_writes",
        "Governed status writes whose addresses differed from the canonical ones, by policy, writer and action (patched, audited, denied, or dry_run for dry runs)");
    unresolved: Family<PolicyLabel, Counter> = registered(&mut registry, "unresolved_sources",
        "Governed status writes let through or denied because the policy's source had no address");
    cache_age: Family<ServiceLabel, Gauge<f64, std::sync::atomic::AtomicU64>> = registered(&mut registry, "source_cache_age_seconds",
        "Seconds since the publish Service cache last heard from the API server (list or watch event)");
    /// The Services `cache_age` has a series for: those the policies no longer name are removed
    /// at the next scrape instead of staying, frozen at their last age.
    cache_age_services: Mutex<Vec<String>> = Mutex::default();
    events: Family<ResultLabel, Counter> = registered(&mut registry, "kubernetes_events",
        "Kubernetes Events about rogue writes, by result (published, failed (or timed out), dropped when the queue to the publisher was full, rate_limited by the token buckets per Ingress and writer, per writer, per policy and overall)");
    drift: Family<PolicyLabel, Gauge> = registered(&mut registry, "drift_ingresses",
        "Governed Ingresses whose stored status differs from the canonical addresses now, by Ingress policy (deprecated: drift_objects has both kinds)");
    // Beside `drift_ingresses`, which it supersedes; `drift_ingresses` and `ingress_watch_errors`
    // stay Ingress-only, so that a name never counts what it does not say.
    drift_objects: Family<KindPolicyLabels, Gauge> = registered(&mut registry, "drift_objects",
        "Governed objects whose stored status differs from the canonical addresses now, by policy and kind (ingress: status.loadBalancer.ingress, gateway: status.addresses)");
    watch_errors_by_watch: objects::WatchErrors = objects::WatchErrors::register(&mut registry);
    forged: Family<ForgedLabels, Counter> = registered(&mut registry, "forged_spec_writes",
        "Status writes that also changed a field the API server resets from the stored object (field: spec.ingressClassName, spec.gatewayClassName), by the result of the review (judged under the stored value; dry_run for dry runs)");
    forged_metadata: Family<ForgedLabels, Counter> = registered(&mut registry, "forged_metadata_writes",
        "Status writes that also changed metadata a status write stores as written (field: metadata.annotations, metadata.labels, metadata.ownerReferences, metadata.finalizers), one per field, by the result of the review (patched: put back, denied, audited, not_governed: stored as written; dry_run for dry runs)");
    streaming: Family<WatchLabel, Gauge> = registered(&mut registry, "watch_streaming_lists",
        "Whether the reconciler's watch of a governed kind (watch: ingresses, gateways) gets its state by streaming lists (1: WatchList) or in list pages (0: the API server does not serve streaming lists); no series before the watch starts");
    patches: Family<PatchLabels, Counter> = registered(&mut registry, "reconcile_patches",
        "Status patches by the reconciler, by policy and result (patched, conflict, failed)");
    fights: Family<PolicyLabel, Counter> = registered(&mut registry, "reconcile_fights",
        "Fights of the reconciler over an Ingress, by policy: a patch another writer undid within a minute, a patch beyond 10 per Ingress in an hour, or other writers rewriting it twice within a minute; the Ingress is then held back, not rewritten");
    contested: Family<PolicyLabel, Gauge> = registered(&mut registry, "reconcile_contested_ingresses",
        "Governed Ingresses off canonical that the reconciler leaves alone because other writers keep rewriting them (the webhook is not stopping these writes), by policy");
    trimmed: Family<FieldLabel, Counter> = registered(&mut registry, "ingress_cache_trimmed",
        "Ingresses the reconciler's cache holds bounded, by field: class (not a valid class name, so it matches nothing), addresses (more than 256, kept as drift)");
    leader: Gauge = registered(&mut registry, "leader",
        "1 while this replica holds the reconciler's Lease, else 0");
    scope_known: Gauge = registered(&mut registry, "reconcile_scope_known",
        "0 while the reconciler's scope (the namespaceSelector of --webhook-configuration) is unknown, so it patches nothing; else 1");
    ready: Gauge = registered(&mut registry, "ready",
        "1 while /readyz answers 200 (not draining, no background task ended, the sources synced), else 0; read at each scrape");
    reloads: Family<ResultLabel, Counter> = registered(&mut registry, "config_reloads",
        "Reloads of the --config file, by result (success, failed: the old policies stay)");
    // Labels are policy names from the configuration: bounded by it.
    overlaps: Family<OverlapLabels, Counter> = registered(&mut registry, "policy_overlaps",
        "Reviews of an Ingress that two policies match (seen only at run time: IngressClass controllers, the default class, Namespace labels); the first policy governs");
    watch_errors: Counter = registered(&mut registry, "ingress_watch_errors",
        "Errors of the reconciler's Ingress watch (API server unreachable, forbidden, ...); retried with backoff (deprecated: watch_errors_total{watch=\"ingresses\"})");
    /// The counters of `requests` for every result, resolved once: a review costs one atomic add
    /// instead of a lock and a hash lookup. (`build_info` is registered here, in exposition order.)
    by_result: Vec<(&'static str, Counter)> = {
        scope_known.set(1);
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info.get_or_create(&BuildLabels { version: VERSION, revision: REVISION }).set(1);
        registry.register("build_info", "Always 1; the labels say which build is running", build_info);
        RESULTS.iter().map(|&result| (result, requests.get_or_create(&ResultLabel { result }).clone())).collect()
    };
    /// Writers with a label of their own now; at most `--max-writer-labels`.
    writers: Mutex<writers::Table> = Mutex::new(writers::Table::new(max_writers, writers::IDLE));
    writer_labels: WriterLabels = labels;
    folded_writers: Counter = registered(&mut registry, "writer_labels_folded",
        "Rogue writes counted under writer=\"other\" because --max-writer-labels is 0");
    evicted_writers: Counter = registered(&mut registry, "writer_labels_evicted",
        "Writer labels dropped (with their series) to make room for a new writer, --max-writer-labels being reached; the least recently seen goes");
    events_skipped: Family<ReasonLabel, Counter> = registered(&mut registry, "events_skipped",
        "Findings that got no Kubernetes Event, by reason (unknown_object: the namespace, name and uid are not an Ingress the guard's watch knows; not_synced: the watch has not listed yet)");
    /// `findings_logged` for `full` and `repeat`, resolved once: counted per finding.
    findings_logged: [Counter; 2] = {
        let family: Family<LineLabel, Counter> = registered(&mut registry, "findings_logged",
            "Findings reported in the log, by line (full: the first of a writer, Ingress and value in --repeat-log-interval, one WARN line; repeat: counted, then summarised in one line at the interval's end)");
        ["full", "repeat"].map(|line| family.get_or_create(&LineLabel { line }).clone())
    };
    findings_dropped: Counter = registered(&mut registry, "findings_dropped",
        "Findings neither logged nor published because the queue to the reporter was full (in count or in bytes); the metrics above still count them");
    connections_refused: Family<ListenerLabel, Counter> = registered(&mut registry, "connections_refused",
        "Connections closed on accept because the listener had --max-connections (or --admin-max-connections, --probe-max-connections) open, each with a request in flight");
    connections_evicted: Family<ListenerLabel, Counter> = registered(&mut registry, "connections_evicted",
        "Idle connections closed to make room for a new one on a full listener (of the peer holding the most)");
    requests_refused: Family<ReasonLabel, Counter> = registered(&mut registry, "requests_refused",
        "Requests refused before their body was read in full, by reason (in_flight, body_too_large, body_timeout, buffered_bytes, body_read_error), or answered without a decision (decide_timeout, out_of_bounds: a review field over the bounds of the wire)");
    registry: Registry = registry;
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Metrics with the default writer labels.
    pub fn new() -> Self {
        Self::with_writer_labels(DEFAULT_MAX_WRITERS, WriterLabels::User)
    }

    /// Registers a metric that another module owns and keeps current (its name gets the
    /// `ingress_status_guard_` prefix).
    pub(crate) fn register(&mut self, name: &str, help: &str, metric: impl prometheus_client::registry::Metric) {
        self.registry.register(name, help, metric);
    }

    /// Exports the serving certificate's expiry, kept current by the certificate reloader.
    pub fn register_tls_cert_expiry(&mut self, expiry: Gauge) {
        self.registry.register(
            "tls_cert_expiry_timestamp_seconds",
            "When the serving certificate in use expires (its notAfter), in seconds since the Unix epoch",
            expiry,
        );
    }

    /// Counts one answered review: `result` is the verdict's label, or [`ERROR`].
    pub fn observe(&self, result: &'static str, elapsed: Duration) {
        match self.by_result.iter().find(|(r, _)| *r == result) {
            Some((_, counter)) => counter.inc(),
            None => self.requests.get_or_create(&ResultLabel { result }).inc(),
        };
        self.duration.observe(elapsed.as_secs_f64());
    }

    /// Counts a rogue write of `policy`'s Ingress by `writer`, which got `action`
    /// (`Finding::outcome`). The writer has a label of its own while it is among the
    /// `--max-writer-labels` seen most recently ([`writers`]).
    pub fn rogue_write(&self, policy: &str, writer: &str, action: &'static str) {
        let label = self.writer_labels.label(writer);
        let now = std::time::Instant::now();
        let create = || {
            let labels = RogueLabels { policy: Escaped::new(policy), writer: Escaped::new(&label), action };
            self.rogue_writes.get_or_create(&labels).clone()
        };
        let (counter, churn) = self.lock_writers().count(&label, policy, action, now, create);
        self.drop_writers(churn);
        let Some(counter) = counter else {
            self.folded_writers.inc();
            let labels = RogueLabels { policy: Escaped::new(policy), writer: Escaped::new(OTHER_WRITER), action };
            self.rogue_writes.get_or_create(&labels).inc();
            return;
        };
        counter.inc();
    }

    fn lock_writers(&self) -> std::sync::MutexGuard<'_, writers::Table> {
        // Every step of the table leaves it consistent.
        self.writers.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Removes the series of labels the writer table let go.
    fn drop_writers(&self, churn: writers::Churn) {
        self.evicted_writers.inc_by(churn.evicted as u64);
        for (label, series) in churn.dropped {
            for (policy, action) in series {
                let labels = RogueLabels { policy: Escaped::new(&policy), writer: Escaped::new(&label), action };
                self.rogue_writes.remove(&labels);
            }
        }
    }

    /// Counts a finding that got no Event, and why (`unknown_object`, `not_synced`).
    pub fn event_skipped(&self, reason: &'static str) {
        self.events_skipped.get_or_create(&ReasonLabel { reason }).inc();
    }

    /// Counts a finding reported in the log: `in_full` (a line of its own, `line="full"`) or as
    /// a repeat in an interval's summary (`line="repeat"`).
    pub fn finding_logged(&self, in_full: bool) {
        self.findings_logged[usize::from(!in_full)].inc();
    }

    pub fn finding_dropped(&self) {
        self.findings_dropped.inc();
    }

    /// Counts a status write that changed the metadata `field`, answered as `result`.
    pub fn forged_metadata(&self, field: &'static str, result: &'static str) {
        self.forged_metadata.get_or_create(&ForgedLabels { field, result }).inc();
    }

    /// Counts a status write that forged `field` (`Forged::field`), judged as `result`.
    pub fn forged_spec(&self, field: &'static str, result: &'static str) {
        self.forged.get_or_create(&ForgedLabels { field, result }).inc();
    }

    pub fn unresolved(&self, policy: &str) {
        self.unresolved.get_or_create(&PolicyLabel { policy: Escaped::new(policy) }).inc();
    }

    pub fn connection_refused(&self, listener: &'static str) {
        self.connections_refused.get_or_create(&ListenerLabel { listener }).inc();
    }

    pub fn connection_evicted(&self, listener: &'static str) {
        self.connections_evicted.get_or_create(&ListenerLabel { listener }).inc();
    }

    pub fn request_refused(&self, reason: &'static str) {
        self.requests_refused.get_or_create(&ReasonLabel { reason }).inc();
    }

    pub fn overlap(&self, first: &str, second: &str) {
        self.overlaps.get_or_create(&OverlapLabels { first: Escaped::new(first), second: Escaped::new(second) }).inc();
    }

    pub fn event(&self, result: &'static str) {
        self.events.get_or_create(&ResultLabel { result }).inc();
    }

    /// Sets the cache age of every Service the policies name now (`Sources::cache_ages`), and
    /// drops the series of those they no longer name (a reload moved the policy on).
    pub fn set_cache_ages(&self, ages: &[(String, Duration)]) {
        let mut known = self.cache_age_services.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for gone in known.iter().filter(|s| !ages.iter().any(|(service, _)| service == *s)) {
            self.cache_age.remove(&ServiceLabel { service: Escaped::new(gone) });
        }
        for (service, age) in ages {
            self.cache_age.get_or_create(&ServiceLabel { service: Escaped::new(service) }).set(age.as_secs_f64());
        }
        *known = ages.iter().map(|(service, _)| service.clone()).collect();
    }

    /// Sets the drift gauges of a policy governing `kind`: `drift_objects`, and for Ingress
    /// policies the older `drift_ingresses` too.
    pub(crate) fn set_drift(&self, kind: Kind, policy: &str, count: i64) {
        let labels = KindPolicyLabels { policy: Escaped::new(policy), kind: kind.label() };
        self.drift_objects.get_or_create(&labels).set(count);
        if kind == Kind::Ingress {
            self.drift.get_or_create(&PolicyLabel { policy: Escaped::new(policy) }).set(count);
        }
    }

    /// Drops the drift series of a policy no longer in force.
    pub(crate) fn remove_drift(&self, kind: Kind, policy: &str) {
        self.drift_objects.remove(&KindPolicyLabels { policy: Escaped::new(policy), kind: kind.label() });
        if kind == Kind::Ingress {
            self.drift.remove(&PolicyLabel { policy: Escaped::new(policy) });
        }
    }

    pub fn patch(&self, policy: &str, result: &'static str) {
        self.patches.get_or_create(&PatchLabels { policy: Escaped::new(policy), result }).inc();
    }

    pub fn reconcile_fight(&self, policy: &str) {
        self.fights.get_or_create(&PolicyLabel { policy: Escaped::new(policy) }).inc();
    }

    pub fn set_contested(&self, policy: &str, count: i64) {
        self.contested.get_or_create(&PolicyLabel { policy: Escaped::new(policy) }).set(count);
    }

    pub fn remove_contested(&self, policy: &str) {
        self.contested.remove(&PolicyLabel { policy: Escaped::new(policy) });
    }

    /// Counts an Ingress the reconciler's cache keeps bounded in `field` (`class`, `addresses`).
    pub fn ingress_cache_trimmed(&self, field: &'static str) {
        self.trimmed.get_or_create(&FieldLabel { field }).inc();
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    pub(crate) fn set_scope_known(&self, known: bool) {
        self.scope_known.set(i64::from(known));
    }

    /// Sets the readiness gauge: what `/readyz` would answer now.
    pub fn set_ready(&self, ready: bool) {
        self.ready.set(i64::from(ready));
    }

    pub fn config_reload(&self, result: &'static str) {
        self.reloads.get_or_create(&ResultLabel { result }).inc();
    }

    /// Whether the reconciler's watch `watch` (of [`objects::WATCHES`]) streams its lists (else
    /// it pages them).
    pub(crate) fn set_list_streaming(&self, watch: &'static str, streaming: bool) {
        self.streaming.get_or_create(&WatchLabel { watch }).set(i64::from(streaming));
    }

    /// The `watch_errors_total` family, for watches started before the reconciler's.
    pub(crate) fn watch_errors(&self) -> objects::WatchErrors {
        self.watch_errors_by_watch.clone()
    }

    /// Counts a failure of one of the guard's watches ([`objects::WATCHES`]); the Ingress
    /// watch's also in the older `ingress_watch_errors_total`.
    pub fn watch_error(&self, watch: &'static str) {
        self.watch_errors_by_watch.inc(watch);
        if watch == objects::INGRESSES {
            self.watch_errors.inc();
        }
    }

    /// Adds `client_certificates_refused_total{reason}`, counted by the TLS verifier of
    /// `--client-ca` (its counters outlive certificate reloads).
    pub(crate) fn register_client_refusals(&mut self, refusals: crate::tls::identity::Refusals) {
        self.registry.register(
            "client_certificates_refused",
            "Client certificates refused in the TLS handshake, by reason (untrusted, name_not_allowed, missing)",
            refusals,
        );
    }

    /// The text exposition format. Writer labels idle past their expiry go first.
    pub fn encode(&self) -> String {
        let churn = self.lock_writers().expire(std::time::Instant::now());
        self.drop_writers(churn);
        let mut text = String::new();
        encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        text
    }
}

#[cfg(test)]
mod tests;
