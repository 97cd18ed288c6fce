//! The HTTP edges: the admission router (`POST /mutate`), the admin router (`/livez`,
//! `/readyz`, `/metrics`), and `serve`, which binds them (the webhook over TLS) and drains on
//! shutdown.

pub(crate) mod conn;
pub(crate) mod handshake;
pub(crate) mod lifecycle;
pub(crate) mod limits;
mod plain;

pub use crate::sources::owned::Tasks;
pub use limits::Limits;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::{Request, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use axum_server::{accept::NoDelayAcceptor, tls_rustls::RustlsConfig};

use crate::{
    audit::Finding,
    audit::events::EventSink,
    decision::Verdict,
    metrics::{self, Metrics},
    policy::Policies,
    policy::store::PolicyStore,
    review,
    server::conn::Guard,
    server::lifecycle::Readiness,
    server::limits::{Claim, Intake},
    sources::Sources,
};

/// Everything a request handler reads; shared by every connection.
pub struct AppState {
    /// Swapped whole by a reload of `--config`; each review reads one consistent set.
    pub(crate) policies: Arc<PolicyStore>,
    /// Where the canonical addresses come from (watch-fed caches, or static lists alone).
    pub sources: Arc<dyn Sources>,
    /// What `/metrics` serves.
    pub metrics: Arc<Metrics>,
    /// The queue to the task that logs findings and makes them Events; `None` logs them inline.
    pub events: Option<EventSink>,
    /// Draining on SIGTERM (load balancers stop sending first); failed when a background task ends.
    pub readiness: Readiness,
}

impl AppState {
    /// A webhook judging with `policies` over `sources`, fresh metrics and no Event publisher.
    pub fn new(policies: Policies, sources: Arc<dyn Sources>) -> Arc<Self> {
        Self::with(PolicyStore::new(policies), sources, Arc::new(Metrics::new()), None)
    }

    pub(crate) fn with(
        policies: Arc<PolicyStore>,
        sources: Arc<dyn Sources>,
        metrics: Arc<Metrics>,
        events: Option<EventSink>,
    ) -> Arc<Self> {
        Arc::new(AppState { policies, sources, metrics, events, readiness: Readiness::default() })
    }

    /// What `/readyz` says: not draining, no background task failed, and the sources synced.
    pub fn ready(&self) -> bool {
        !self.readiness.draining() && self.readiness.failed().is_none() && self.sources.synced()
    }
}

/// The webhook's router. Tests drive this exact router.
pub fn webhook_router(state: Arc<AppState>, max_body_bytes: usize) -> Router {
    webhook_router_with(state, Limits { max_body_bytes, ..Limits::default() })
}

/// The webhook's router with every request bound of `limits`.
pub fn webhook_router_with(state: Arc<AppState>, limits: Limits) -> Router {
    Router::new()
        .route("/mutate", post(mutate).fallback(method_not_allowed))
        .fallback(not_found)
        .with_state(Arc::new(Webhook { state, intake: Intake::new(limits) }))
}

/// What the webhook port's handler reads. The intake is router state rather than a request
/// extension: an extension layer would allocate an extension map for every request.
struct Webhook {
    state: Arc<AppState>,
    intake: Intake,
}

/// The admin router: liveness, readiness and Prometheus metrics.
pub fn admin_router(state: Arc<AppState>) -> Router {
    probes().route("/metrics", get(metrics)).with_state(state)
}

/// `/livez` and `/readyz`, on the admin port and the probe port alike.
fn probes() -> Router<Arc<AppState>> {
    Router::new().route("/livez", get(|| async { "ok\n" })).route("/readyz", get(readyz))
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    state.metrics.set_cache_ages(&state.sources.cache_ages());
    // As /readyz would answer: a dashboard shows readiness without probing the probe port.
    state.metrics.set_ready(state.ready());
    let content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    ([(header::CONTENT_TYPE, content_type)], state.metrics.encode()).into_response()
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if state.ready() {
        // Ready, and saying what is inactive meanwhile (a source waiting for the Gateway API).
        let body = state.sources.inactive().iter().fold(String::from("ok\n"), |body, note| body + note + "\n");
        (StatusCode::OK, body).into_response()
    } else if state.readiness.draining() {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response()
    } else if let Some(task) = state.readiness.failed() {
        (StatusCode::SERVICE_UNAVAILABLE, format!("background task {task:?} ended; see the log\n")).into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "publish Service caches not synced yet\n").into_response()
    }
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let body = serde_json::json!({ "error": message.into() });
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

async fn method_not_allowed() -> Response {
    let mut response = error(StatusCode::METHOD_NOT_ALLOWED, "use POST with an AdmissionReview JSON body");
    response.headers_mut().insert(header::ALLOW, header::HeaderValue::from_static("POST"));
    response
}

async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "not found: the webhook path is /mutate")
}

/// Takes the whole request, not a `HeaderMap` extractor, which would copy the headers.
async fn mutate(State(webhook): State<Arc<Webhook>>, request: Request) -> Response {
    let started = Instant::now();
    let (state, intake) = (&webhook.state, &webhook.intake);
    // Refused before any byte of the body is read: what a review holds while in flight is
    // bounded by the count, not by how many callers came.
    let Some(_in_flight) = intake.admit() else {
        state.metrics.request_refused("in_flight");
        state.metrics.observe(metrics::ERROR, started.elapsed());
        let limit = intake.limits.max_requests_in_flight;
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("too many reviews in flight (--max-requests-in-flight {limit}); retry"),
        );
    };
    let (parts, body) = request.into_parts();
    let (response, result) = match answer(state, intake, &parts.headers, body).await {
        Ok((bytes, result)) => {
            ((StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], bytes).into_response(), result)
        }
        Err((status, message)) => (error(status, message), metrics::ERROR),
    };
    state.metrics.observe(result, started.elapsed());
    response
}

/// Check, read, then review the body: the response bytes and result label, or the HTTP error.
async fn answer(
    state: &Arc<AppState>,
    intake: &Intake,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Vec<u8>, &'static str), (StatusCode, String)> {
    check_headers(headers)?;
    let held = intake.read(headers, body).await.map_err(|e| {
        state.metrics.request_refused(e.reason());
        (e.status(), e.to_string())
    })?;
    if held.bytes.is_empty() {
        return Err((StatusCode::BAD_REQUEST, "empty body: expected an AdmissionReview JSON object".to_owned()));
    }
    // The answer keeps the bytes (a reference) to echo the uid if the work is late; the work
    // keeps the budget until it ends.
    let (work_state, bytes) = (state.clone(), held.bytes.clone());
    match intake.run(held, move |held, claim| review(&work_state, &held.bytes, claim)).await {
        Some(result) => result,
        None => {
            state.metrics.request_refused("decide_timeout");
            let limit = intake.limits.decide_timeout.as_secs();
            tracing::warn!(
                bytes = bytes.len(),
                action = TIMED_OUT,
                "review not decided within --decide-timeout-seconds {limit}: allowed unchanged"
            );
            undecided(&bytes, limit).map(|bytes| (bytes, TIMED_OUT))
        }
    }
}

/// The `result` of a review answered without its decision, and the `action` of its log line
/// and of a rogue write found after the answer went out.
const TIMED_OUT: &str = "timed_out";

/// The media type and encoding of a review: JSON, sent as is.
fn check_headers(headers: &HeaderMap) -> Result<(), (StatusCode, String)> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let media_type = content_type.split(';').next().unwrap_or("").trim();
    if !media_type.eq_ignore_ascii_case("application/json") {
        let message = format!("content-type must be application/json, got {content_type:?}");
        return Err((StatusCode::UNSUPPORTED_MEDIA_TYPE, message));
    }
    // A body we cannot read as sent: a compressed review would fail as malformed JSON, and a
    // plain one under a false header must not be read as if the header were not there.
    if let Some(encoding) = headers.get(header::CONTENT_ENCODING) {
        let text = encoding.to_str().unwrap_or("");
        if !text.trim().eq_ignore_ascii_case("identity") {
            let message = format!("content-encoding {text:?} is not supported: send the review uncompressed");
            return Err((StatusCode::UNSUPPORTED_MEDIA_TYPE, message));
        }
    }
    Ok(())
}

/// Read, decide, render, report. A decision that comes after its answer went out (the
/// `claim` says so) is reported as what happened: the write was allowed unchanged.
fn review(state: &AppState, body: &Bytes, claim: &Claim) -> Result<(Vec<u8>, &'static str), (StatusCode, String)> {
    let review = review::read(body).map_err(|e| {
        if e.is_out_of_bounds() {
            state.metrics.request_refused("out_of_bounds");
        }
        // The error quotes the body (a forged `kind` of 3 MiB): bounded in the log.
        tracing::warn!(error = %crate::names::truncate(&e.to_string(), usize::MAX, 1024), "rejected malformed AdmissionReview");
        (StatusCode::BAD_REQUEST, e.to_string())
    })?;
    let policies = state.policies.load();
    let verdict = review.decide(&policies, state.sources.as_ref());
    if !claim.decided() {
        report_late(state, &review, &verdict);
        return Ok((Vec::new(), TIMED_OUT));
    }
    let bytes = review::render(&review, &verdict);
    let result = review.result(&verdict);
    report(state, &policies, review, verdict);
    Ok((bytes, result))
}

/// A decision made after its review was answered without it: the write went through as written,
/// so a mismatch is logged and counted as `timed_out`, and no Event is written for it.
fn report_late(state: &AppState, review: &review::Review, verdict: &Verdict<'_>) {
    let bounded = |text: &str| crate::names::truncate(text, usize::MAX, 1024);
    if let Verdict::Mismatch { policy, .. } = verdict {
        state.metrics.rogue_write(&policy.name, &review.user.username, TIMED_OUT);
    }
    let (namespace, name) = review.object_key();
    crate::kind::object_event!(
        warn,
        review.kind().unwrap_or(crate::kind::Kind::Ingress),
        { uid = %bounded(&review.uid), },
        bounded(namespace),
        bounded(name),
        writer = %bounded(&review.user.username),
        action = TIMED_OUT,
        would_have = verdict.result(),
        "review decided after --decide-timeout-seconds: the write was allowed unchanged"
    );
}

/// The answer to a review not decided in time: allowed as written, with a warning, as when
/// the canonical address is unknown. Only the fields the response must echo are read.
fn undecided(body: &[u8], limit: u64) -> Result<Vec<u8>, (StatusCode, String)> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Echo {
        api_version: String,
        request: EchoRequest,
    }
    #[derive(serde::Deserialize)]
    struct EchoRequest {
        uid: String,
    }
    let busy = || (StatusCode::SERVICE_UNAVAILABLE, format!("review not decided within {limit} s; retry"));
    let echo: Echo = serde_json::from_slice(body).map_err(|_| busy())?;
    // Echoed unread by the reader's bounds, so held to them here: a forged megabyte uid or
    // apiVersion gets the plain 503, never itself back.
    if review::bounds::uid(&echo.request.uid).is_err() || echo.api_version != "admission.k8s.io/v1" {
        return Err(busy());
    }
    let warning = format!("ingress-status-guard: not decided within {limit} s; status left as written");
    let response = serde_json::json!({
        "apiVersion": echo.api_version,
        "kind": "AdmissionReview",
        "response": {"uid": echo.request.uid, "allowed": true, "warnings": [warning]},
    });
    Ok(response.to_string().into_bytes())
}

/// The first two policies that both match `status`'s object.
fn overlap<'p, K: crate::kind::Governed>(
    status: &review::Status<'_, K::Entry, K::Shape>,
    policies: &'p Policies,
    state: &AppState,
) -> Option<(crate::kind::Kind, &'p crate::policy::Policy, &'p crate::policy::Policy)> {
    let overlap = || crate::decision::overlap::<K>(&status.write, policies, state.sources.as_ref());
    let (first, second) = policies.several(K::KIND).then(overlap)??;
    Some((K::KIND, first, second))
}

/// Logs, counts and queues the Event for a decision; never waits.
fn report(state: &AppState, policies: &Policies, review: review::Review, verdict: Verdict<'_>) {
    if let Some((kind, first, second)) =
        review::on_status!(&review.target, K, s => overlap::<K>(s, policies, state), _ => None)
    {
        state.metrics.overlap(&first.name, &second.name);
        let (namespace, name) = review.object_key();
        crate::kind::object_event!(warn, kind, { uid = %review.uid, }, namespace, name, first = %first.name, second = %second.name, "two policies match this {kind}; the first governs it");
    }
    if let Some(forged) = review.forged() {
        let result = if review.dry_run { "dry_run" } else { verdict.result() };
        state.metrics.forged_spec(forged.field(), result);
        // A mismatch says it in its finding's line; any other verdict at debug only, so a flood of
        // forged writes floods no log (the metric and the audit annotation count every one).
        if !matches!(verdict, Verdict::Mismatch { .. }) {
            let (namespace, name) = review.object_key();
            tracing::debug!(uid = %review.uid, namespace = %crate::names::truncate(namespace, usize::MAX, 253), name = %crate::names::truncate(name, usize::MAX, 253), writer = %crate::names::truncate(&review.user.username, usize::MAX, 1024), forged_spec = forged.field(), result = verdict.result(), "status write changed a field the API server resets; judged under the stored value");
        }
    }
    if let Some(metadata) = review.forged_metadata() {
        let result = match review.metadata_verdict(&verdict) {
            _ if review.dry_run => "dry_run",
            Some((_, _, action)) => action.result(),
            None => "not_governed",
        };
        for field in metadata.fields() {
            state.metrics.forged_metadata(field.path(), result);
        }
    }
    match &verdict {
        Verdict::Ignored(what) => match &review.target {
            review::Target::OutOfBounds(bound) => {
                state.metrics.request_refused("out_of_bounds");
                tracing::warn!(uid = %review.uid, bound = %bound, "review out of bounds: allowed as written");
            }
            // `what` is bounded by the reader.
            _ => tracing::warn!(uid = %review.uid, request = %what, "allowed a request the webhook should not receive"),
        },
        Verdict::Unresolved { policy, reason, .. } => {
            state.metrics.unresolved(&policy.name);
            tracing::warn!(uid = %review.uid, policy = %policy.name, reason = %reason, result = verdict.result(), "canonical address unresolved");
        }
        Verdict::NotGoverned | Verdict::Canonical { .. } | Verdict::Trusted { .. } => {
            tracing::debug!(uid = %review.uid, result = verdict.result(), "reviewed");
        }
        Verdict::Mismatch { .. } => {}
    }
    // A governed write that changed metadata is a finding whatever its status.
    if matches!(verdict, Verdict::Mismatch { .. }) || review.metadata_verdict(&verdict).is_some() {
        report_finding(state, review, verdict);
    }
}

/// Counts, logs and queues the Event of a rogue write.
fn report_finding(state: &AppState, review: review::Review, verdict: Verdict<'_>) {
    if let Some(finding) = Finding::take(review, verdict) {
        state.metrics.rogue_write(&finding.policy, &finding.writer.username, finding.outcome());
        match &state.events {
            Some(queue) => queue.publish(finding),
            None => finding.log(),
        }
    }
}

/// The HTTPS webhook port (`--listen`) and what its handshakes need.
pub struct WebhookPort {
    /// The bound socket.
    pub listener: std::net::TcpListener,
    /// Shared with the certificate reloader, which swaps the configuration in place.
    pub tls: RustlsConfig,
    /// With `--client-ca`: the required client names (also counting handshakes without any).
    pub client_names: Option<crate::tls::ClientNames>,
}

/// How `serve` listens. The sockets are bound by the caller, so tests can use port 0.
pub struct Listeners {
    /// The webhook port; `None` in `--admission=policy`, where no review reaches the guard.
    pub webhook: Option<WebhookPort>,
    /// The plain-HTTP admin port (`--admin-listen`).
    pub admin: std::net::TcpListener,
    /// The plain-HTTP probe port (`--probe-listen`): `/livez` and `/readyz` only, with a table
    /// of its own, so that whatever fills the admin port cannot fail the kubelet's probes.
    pub probe: std::net::TcpListener,
    /// Every bound on connections and requests, for every port.
    pub limits: Limits,
    /// Longest wait for in-flight reviews once shutdown starts.
    pub drain: Duration,
}

/// Serves until `shutdown` completes, then stops being ready, lets in-flight reviews finish
/// (up to `drain`), stops the background `tasks` (up to `drain` again) and returns. A task or
/// admin or probe server that ends while serving makes the process not ready.
pub async fn serve(
    state: Arc<AppState>,
    listeners: Listeners,
    mut tasks: Tasks,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    listeners.admin.set_nonblocking(true)?;
    listeners.probe.set_nonblocking(true)?;
    tracing::info!(address = %listeners.admin.local_addr()?, "admin server listening (/livez, /readyz, /metrics)");
    tracing::info!(address = %listeners.probe.local_addr()?, "probe server listening (/livez, /readyz)");
    match &listeners.webhook {
        Some(port) => {
            port.listener.set_nonblocking(true)?;
            tracing::info!(address = %port.listener.local_addr()?, "webhook listening (HTTPS, POST /mutate)");
        }
        None => {
            tracing::info!("no webhook port: admission policy mode, the API server enforces the admission policies");
        }
    }
    let limits = listeners.limits;

    let handle = axum_server::Handle::new();
    // TCP_NODELAY: an HTTP/2 response is several small writes (HEADERS, DATA, WINDOW_UPDATE);
    // with Nagle's algorithm on they wait for the client's delayed ACK, which added ~10 ms at
    // p50 and ~40 ms at p99 per review over HTTP/2, the protocol the API server uses.
    let bounded = |max_connections, name| {
        Guard::new(NoDelayAcceptor::new(), max_connections, limits.lifetimes(), name, state.metrics.clone())
    };
    // The admin and probe ports get connection bounds of their own: a flood of idle
    // connections must take neither the file descriptors /mutate needs nor the probes' slots.
    let mut ports = plain::Ports::default();
    let admin_guard = bounded(limits.admin_max_connections, "admin");
    let admin_app = admin_router(state.clone());
    let admin_handle = ports.serve("admin server", listeners.admin, admin_app, admin_guard, &limits)?;
    let probe_guard = bounded(limits.probe_max_connections, "probe");
    let probe_app = probes().with_state(state.clone());
    let probe_handle = ports.serve("probe server", listeners.probe, probe_app, probe_guard, &limits)?;

    let shutdown_handle = handle.clone();
    let drain = listeners.drain;

    let server = match listeners.webhook {
        Some(port) => {
            let guard = bounded(limits.max_connections, "webhook");
            let mut server = axum_server::from_tcp_rustls(port.listener, port.tls)?
                .map(|tls| handshake::CountMissing {
                    inner: tls.handshake_timeout(limits.tls_handshake_timeout).acceptor(guard),
                    names: port.client_names,
                })
                .first_request_timeout(limits.header_read_timeout)
                .handle(handle);
            limits.configure(server.http_builder());
            Some(server.serve(webhook_router_with(state.clone(), limits.clone()).into_make_service()))
        }
        None => None,
    };
    let serves_reviews = server.is_some();
    let server = crate::sources::owned::or_never(server);
    tokio::pin!(server, shutdown);
    let mut shutting_down = false;
    let result = loop {
        tokio::select! {
            result = &mut server => break result,
            () = lifecycle::watch(&mut tasks, &state.readiness) => {}
            () = ports.ended(&state.readiness) => {}
            () = &mut shutdown, if !shutting_down => {
                shutting_down = true;
                tracing::info!(drain_seconds = drain.as_secs(), "shutting down: not ready, draining in-flight reviews");
                state.readiness.drain();
                if !serves_reviews {
                    break Ok(());
                }
                shutdown_handle.graceful_shutdown(Some(drain));
            }
        }
    };
    for handle in [&admin_handle, &probe_handle] {
        handle.graceful_shutdown(Some(Duration::from_secs(1)));
    }
    ports.stopped().await;
    tasks.stop(drain).await;
    tracing::info!("stopped");
    result
}

/// Completes on SIGTERM (kubelet stopping the pod) or Ctrl-C received after this call: the
/// SIGTERM handler is registered now, not when the future is first polled, so a signal that
/// arrives in between is not lost (and does not kill the process with the default action).
pub(crate) fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    async move {
        let ctrl_c = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        #[cfg(unix)]
        let term = async move {
            crate::sources::owned::or_never(term.as_mut().map(tokio::signal::unix::Signal::recv)).await;
        };
        #[cfg(not(unix))]
        let term = std::future::pending::<()>();
        tokio::select! { () = ctrl_c => {}, () = term => {} }
    }
}

#[cfg(test)]
pub(crate) mod tests;
