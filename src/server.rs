//! The HTTP edges: the admission router (`POST /mutate`), the admin router (`/livez`,
//! `/readyz`, `/metrics`), and `serve`, which binds them (the webhook over TLS) and drains on
//! shutdown.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{
    Router,
    body::Bytes,
    extract::{DefaultBodyLimit, State, rejection::BytesRejection},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use axum_server::{accept::NoDelayAcceptor, tls_rustls::RustlsConfig};

use crate::{
    audit::Finding,
    config::Policies,
    decision::Verdict,
    events::EventSink,
    lifecycle::{Readiness, Tasks},
    metrics::{self, Metrics},
    policy_store::PolicyStore,
    render,
    sources::Sources,
    wire,
};

/// Everything a request handler reads; shared by every connection.
pub struct AppState {
    /// Swapped whole by a reload of `--config`; each review reads one consistent set.
    pub(crate) policies: Arc<PolicyStore>,
    pub sources: Arc<dyn Sources>,
    pub metrics: Arc<Metrics>,
    /// The queue to the background task that logs findings and makes them Kubernetes Events;
    /// `None` logs them on the request path (tests and benchmarks without a runtime task).
    pub events: Option<EventSink>,
    /// Draining on SIGTERM so load balancers stop sending before the listener closes; failed
    /// when a background task ends.
    pub readiness: Readiness,
}

impl AppState {
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

    pub fn ready(&self) -> bool {
        !self.readiness.draining() && self.readiness.failed().is_none() && self.sources.synced()
    }
}

/// The webhook's router. Tests drive this exact router.
pub fn webhook_router(state: Arc<AppState>, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/mutate", post(mutate).fallback(method_not_allowed))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state)
}

/// The admin router: liveness, readiness and Prometheus metrics.
pub fn admin_router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/livez", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    for (service, age) in state.sources.cache_ages() {
        state.metrics.set_cache_age(&service, age);
    }
    let content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    ([(header::CONTENT_TYPE, content_type)], state.metrics.encode()).into_response()
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if state.ready() {
        (StatusCode::OK, "ok\n").into_response()
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

async fn mutate(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let started = Instant::now();
    let (response, result) = match answer(&state, &headers, body) {
        Ok((bytes, result)) => {
            ((StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], bytes).into_response(), result)
        }
        Err((status, message)) => (error(status, message), metrics::ERROR),
    };
    state.metrics.observe(result, started.elapsed());
    response
}

/// Route, read, decide, render, report: the response bytes and the result label, or the HTTP
/// error for a request that is not a review.
fn answer(
    state: &AppState,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(Vec<u8>, &'static str), (StatusCode, String)> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let media_type = content_type.split(';').next().unwrap_or("").trim();
    if !media_type.eq_ignore_ascii_case("application/json") {
        let message = format!("content-type must be application/json, got {content_type:?}");
        return Err((StatusCode::UNSUPPORTED_MEDIA_TYPE, message));
    }
    let body = match body {
        Ok(body) if body.is_empty() => {
            return Err((StatusCode::BAD_REQUEST, "empty body: expected an AdmissionReview JSON object".to_owned()));
        }
        Ok(body) => body,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return Err((StatusCode::PAYLOAD_TOO_LARGE, "body exceeds --max-body-bytes".to_owned()));
        }
        Err(rejection) => return Err((rejection.status(), rejection.body_text())),
    };
    let review = wire::read(&body).map_err(|e| {
        tracing::warn!(error = %e, "rejected malformed AdmissionReview");
        (StatusCode::BAD_REQUEST, e.to_string())
    })?;
    let policies = state.policies.load();
    let verdict = review.decide(&policies, state.sources.as_ref());
    let bytes = render::render(&review, &verdict);
    let result = verdict.result();
    report(state, &policies, review, verdict);
    Ok((bytes, result))
}

/// Logs, counts and queues the Event for a decision; never waits.
fn report(state: &AppState, policies: &Policies, review: wire::Review, verdict: Verdict<'_>) {
    if let (true, wire::Target::IngressStatus { write, .. }) = (policies.several(), &review.target)
        && let Some((first, second)) = crate::decision::overlap(write, policies, state.sources.as_ref())
    {
        state.metrics.overlap(&first.name, &second.name);
        tracing::warn!(uid = %review.uid, ingress_namespace = %write.namespace, ingress_name = %write.name, first = %first.name, second = %second.name, "two policies match this Ingress; the first governs it");
    }
    match &verdict {
        Verdict::Ignored(what) => {
            tracing::warn!(uid = %review.uid, request = %what, "allowed a request the webhook should not receive");
        }
        Verdict::Unresolved { policy, reason, .. } => {
            state.metrics.unresolved(&policy.name);
            tracing::warn!(uid = %review.uid, policy = %policy.name, reason = %reason, result = verdict.result(), "canonical address unresolved");
        }
        Verdict::NotGoverned | Verdict::Canonical { .. } => {
            tracing::debug!(uid = %review.uid, result = verdict.result(), "reviewed");
        }
        Verdict::Mismatch { .. } => {
            if let Some(finding) = Finding::take(review, verdict) {
                state.metrics.rogue_write(&finding);
                match &state.events {
                    Some(queue) => queue.publish(finding),
                    None => finding.log(),
                }
            }
        }
    }
}

/// How `serve` listens. The sockets are bound by the caller, so tests can use port 0.
pub struct Listeners {
    pub webhook: std::net::TcpListener,
    pub admin: std::net::TcpListener,
    /// Shared with the certificate reloader, which swaps the configuration in place.
    pub tls: RustlsConfig,
    pub max_body_bytes: usize,
    /// Longest wait for in-flight reviews once shutdown starts.
    pub drain: Duration,
}

/// Serves until `shutdown` completes, then stops being ready, lets in-flight reviews finish
/// (up to `drain`), stops the background `tasks` (up to `drain` again) and returns. A task that
/// ends while serving makes the process not ready.
pub async fn serve(
    state: Arc<AppState>,
    listeners: Listeners,
    mut tasks: Tasks,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    listeners.webhook.set_nonblocking(true)?;
    listeners.admin.set_nonblocking(true)?;
    let admin = tokio::net::TcpListener::from_std(listeners.admin)?;
    tracing::info!(address = %admin.local_addr()?, "admin server listening (/livez, /readyz, /metrics)");
    tracing::info!(address = %listeners.webhook.local_addr()?, "webhook listening (HTTPS, POST /mutate)");

    let handle = axum_server::Handle::new();
    let (admin_stop_tx, admin_stop_rx) = tokio::sync::oneshot::channel::<()>();
    let admin_app = admin_router(state.clone());
    let admin_task = tokio::spawn(async move {
        axum::serve(admin, admin_app)
            .with_graceful_shutdown(async {
                let _ = admin_stop_rx.await;
            })
            .await
    });

    let shutdown_handle = handle.clone();
    let shutdown_state = state.clone();
    let drain = listeners.drain;
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!(drain_seconds = drain.as_secs(), "shutting down: not ready, draining in-flight reviews");
        shutdown_state.readiness.drain();
        shutdown_handle.graceful_shutdown(Some(drain));
    });

    let app = webhook_router(state.clone(), listeners.max_body_bytes);
    // TCP_NODELAY: an HTTP/2 response is several small writes (HEADERS, DATA, WINDOW_UPDATE);
    // with Nagle's algorithm on they wait for the client's delayed ACK, which added ~10 ms at
    // p50 and ~40 ms at p99 per review over HTTP/2, the protocol the API server uses.
    let server = axum_server::from_tcp_rustls(listeners.webhook, listeners.tls)?
        .map(|tls| tls.acceptor(NoDelayAcceptor::new()))
        .handle(handle)
        .serve(app.into_make_service());
    tokio::pin!(server);
    let result = loop {
        tokio::select! {
            result = &mut server => break result,
            () = tasks.watch(&state.readiness) => {}
        }
    };
    let _ = admin_stop_tx.send(());
    let _ = admin_task.await;
    tasks.stop(drain).await;
    tracing::info!("stopped");
    result
}

/// Completes on SIGTERM (kubelet stopping the pod) or Ctrl-C.
pub(crate) async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}
