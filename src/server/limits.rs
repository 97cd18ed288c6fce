//! Every bound on what a caller can make the webhook hold or spend: per connection, per request
//! and in total, each a flag with a default (listed in README's "Security and limits"). The
//! request side lives here too: reading a body within its size, time and the shared byte
//! budget, before any of it is parsed.

use std::{sync::Arc, time::Duration};

use axum::{
    body::{Body, Bytes},
    http::{HeaderMap, StatusCode, header},
};
use clap::Args;
use http_body_util::BodyExt as _;
use hyper_util::{rt::TokioExecutor, server::conn::auto::Builder};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The bounds, as flags of `serve`.
#[derive(Args, Debug, Clone)]
pub struct LimitFlags {
    /// Seconds a client has to complete the TLS handshake.
    #[arg(long, env = "ISG_TLS_HANDSHAKE_TIMEOUT_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub tls_handshake_timeout_seconds: u64,
    /// Seconds a client has to send a request's headers (and, on a new connection, its first
    /// request), on both ports.
    #[arg(long, env = "ISG_HEADER_READ_TIMEOUT_SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub header_read_timeout_seconds: u64,
    /// Seconds a client has to send a whole request body, well under the API server's webhook
    /// timeout (10 s by default, 30 s at most).
    #[arg(long, env = "ISG_BODY_READ_TIMEOUT_SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub body_read_timeout_seconds: u64,
    /// Seconds a connection may stay silent (no byte read or written) before it is closed. Above
    /// the API server's 90 s idle timeout, so it closes its idle connections first.
    #[arg(long, env = "ISG_IDLE_TIMEOUT_SECONDS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_seconds: u64,
    /// Open connections on the webhook port; more are closed at once and counted in
    /// `connections_refused_total{listener="webhook"}`.
    #[arg(long, env = "ISG_MAX_CONNECTIONS", default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: u64,
    /// Open connections on the admin port (probes and scrapes need few).
    #[arg(long, env = "ISG_ADMIN_MAX_CONNECTIONS", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub admin_max_connections: u64,
    /// Largest request head (request line and headers), in bytes, on both ports.
    #[arg(long, env = "ISG_MAX_HEADER_BYTES", default_value_t = 64 * 1024, value_parser = clap::value_parser!(u64).range(8192..=16 * 1024 * 1024))]
    pub max_header_bytes: u64,
    /// Concurrent HTTP/2 streams per connection.
    #[arg(long, env = "ISG_HTTP2_MAX_CONCURRENT_STREAMS", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub http2_max_concurrent_streams: u32,
    /// Request body bytes held at once across all requests in flight; a request that would go
    /// over gets 503 (the API server retries per its failurePolicy).
    #[arg(long, env = "ISG_MAX_BUFFERED_BODY_BYTES", default_value_t = 16 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1..=1 << 40))]
    pub max_buffered_body_bytes: u64,
    /// Reviews larger than this, in bytes, are read and decided on a small blocking pool (one
    /// thread per CPU), so one heavy caller cannot stall the async workers.
    #[arg(long, env = "ISG_BLOCKING_THRESHOLD_BYTES", default_value_t = 256 * 1024)]
    pub blocking_threshold_bytes: usize,
    /// Seconds a review may take to be read and decided; past it the write is allowed with a
    /// warning, as when the canonical address is unknown.
    #[arg(long, env = "ISG_DECIDE_TIMEOUT_SECONDS", default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    pub decide_timeout_seconds: u64,
}

impl Default for LimitFlags {
    /// The flags' defaults, whatever the environment says.
    fn default() -> Self {
        use clap::{CommandFactory, FromArgMatches, Parser};
        #[derive(Parser)]
        struct Defaults {
            #[command(flatten)]
            flags: LimitFlags,
        }
        let command = Defaults::command().mut_args(|arg| arg.env(None));
        let matches = command.get_matches_from(["defaults"]);
        Defaults::from_arg_matches(&matches).expect("the defaults parse").flags
    }
}

/// The bounds, typed: built once from [`LimitFlags`] (or [`Limits::default`] in tests).
#[derive(Debug, Clone)]
pub struct Limits {
    pub tls_handshake_timeout: Duration,
    pub header_read_timeout: Duration,
    pub body_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
    pub admin_max_connections: usize,
    pub max_header_bytes: usize,
    pub http2_max_concurrent_streams: u32,
    pub max_body_bytes: usize,
    pub max_buffered_body_bytes: usize,
    pub blocking_threshold_bytes: usize,
    pub decide_timeout: Duration,
}

impl Limits {
    pub fn new(flags: &LimitFlags, max_body_bytes: usize) -> Self {
        let secs = Duration::from_secs;
        let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        Limits {
            tls_handshake_timeout: secs(flags.tls_handshake_timeout_seconds),
            header_read_timeout: secs(flags.header_read_timeout_seconds),
            body_read_timeout: secs(flags.body_read_timeout_seconds),
            idle_timeout: secs(flags.idle_timeout_seconds),
            max_connections: size(flags.max_connections),
            admin_max_connections: size(flags.admin_max_connections),
            max_header_bytes: size(flags.max_header_bytes),
            http2_max_concurrent_streams: flags.http2_max_concurrent_streams,
            max_body_bytes,
            max_buffered_body_bytes: size(flags.max_buffered_body_bytes),
            blocking_threshold_bytes: flags.blocking_threshold_bytes,
            decide_timeout: secs(flags.decide_timeout_seconds),
        }
    }

    /// hyper's per-connection settings, for either port.
    pub(crate) fn configure(&self, builder: &mut Builder<TokioExecutor>) {
        builder
            .http1()
            .header_read_timeout(self.header_read_timeout)
            // The read buffer bounds the request head; bodies stream through it in chunks.
            .max_buf_size(self.max_header_bytes)
            .max_headers(100);
        builder
            .http2()
            .max_concurrent_streams(self.http2_max_concurrent_streams)
            .max_header_list_size(u32::try_from(self.max_header_bytes).unwrap_or(u32::MAX));
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::new(&LimitFlags::default(), 3 * 1024 * 1024)
    }
}

/// Reads request bodies within the limits; shared by every request of the webhook port.
pub(crate) struct Intake {
    pub(crate) limits: Limits,
    /// One permit per body byte held, across all requests.
    buffered: Arc<Semaphore>,
    /// One permit per review being read and decided off the async workers.
    blocking: Arc<Semaphore>,
}

/// A body, and its share of the byte budget (given back when dropped).
pub(crate) struct Held {
    pub(crate) bytes: Bytes,
    _budget: Option<OwnedSemaphorePermit>,
}

/// Why a request was refused before its body was read in full.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum IntakeError {
    #[error("body of {declared} bytes (Content-Length) exceeds --max-body-bytes {max}")]
    Declared { declared: u64, max: usize },
    #[error("body exceeds --max-body-bytes {max}")]
    TooLarge { max: usize },
    #[error("request body not received within --body-read-timeout-seconds {0}")]
    Timeout(u64),
    #[error("too many request body bytes in flight (--max-buffered-body-bytes); retry")]
    Busy,
    #[error("cannot read request body: {0}")]
    Read(String),
}

impl IntakeError {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            IntakeError::Declared { .. } | IntakeError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            IntakeError::Timeout(_) => StatusCode::REQUEST_TIMEOUT,
            IntakeError::Busy => StatusCode::SERVICE_UNAVAILABLE,
            IntakeError::Read(_) => StatusCode::BAD_REQUEST,
        }
    }

    /// The `requests_refused_total` reason.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            IntakeError::Declared { .. } | IntakeError::TooLarge { .. } => "body_too_large",
            IntakeError::Timeout(_) => "body_timeout",
            IntakeError::Busy => "buffered_bytes",
            IntakeError::Read(_) => "body_read_error",
        }
    }
}

/// A body's frames: a body that arrives in one frame is kept as it came, without a copy. That
/// frame may share its allocation with hyper's read buffer (at most `--max-header-bytes` over
/// HTTP/1.1, one frame over HTTP/2), held only until the review is answered.
#[derive(Default)]
enum Collected {
    #[default]
    Empty,
    One(Bytes),
    Many(Vec<u8>),
}

impl Collected {
    fn len(&self) -> usize {
        match self {
            Collected::Empty => 0,
            Collected::One(bytes) => bytes.len(),
            Collected::Many(bytes) => bytes.len(),
        }
    }

    /// Adds a frame; `declared` (the Content-Length, already checked against the limit) sizes
    /// the buffer once a second frame comes.
    fn push(&mut self, data: Bytes, declared: usize) {
        *self = match std::mem::take(self) {
            Collected::Empty => Collected::One(data),
            Collected::One(first) => {
                let mut all = Vec::with_capacity(declared.max(first.len() + data.len()));
                all.extend_from_slice(&first);
                all.extend_from_slice(&data);
                Collected::Many(all)
            }
            Collected::Many(mut all) => {
                all.extend_from_slice(&data);
                Collected::Many(all)
            }
        };
    }

    fn into_bytes(self) -> Bytes {
        match self {
            Collected::Empty => Bytes::new(),
            Collected::One(bytes) => bytes,
            Collected::Many(all) => Bytes::from(all),
        }
    }
}

impl Intake {
    pub(crate) fn new(limits: Limits) -> Self {
        let budget = limits.max_buffered_body_bytes.min(Semaphore::MAX_PERMITS);
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        Intake { limits, buffered: Arc::new(Semaphore::new(budget)), blocking: Arc::new(Semaphore::new(cpus)) }
    }

    /// The body, read in full within `--max-body-bytes`, `--body-read-timeout-seconds` and the
    /// shared byte budget. A declared `Content-Length` over the limit is refused before any byte
    /// of the body is read.
    pub(crate) async fn read(&self, headers: &HeaderMap, mut body: Body) -> Result<Held, IntakeError> {
        let max = self.limits.max_body_bytes;
        let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
        if let Some(declared) = declared
            && declared > max as u64
        {
            return Err(IntakeError::Declared { declared, max });
        }
        // One timer for the whole body, armed only if a frame is not there at once.
        let deadline = tokio::time::sleep(self.limits.body_read_timeout);
        tokio::pin!(deadline);
        let mut budget: Option<OwnedSemaphorePermit> = None;
        let mut body_bytes = Collected::default();
        loop {
            let frame = tokio::select! {
                biased;
                frame = body.frame() => frame,
                () = &mut deadline => return Err(IntakeError::Timeout(self.limits.body_read_timeout.as_secs())),
            };
            let frame = match frame {
                None => break,
                Some(Err(e)) => return Err(IntakeError::Read(e.to_string())),
                Some(Ok(frame)) => frame,
            };
            let Ok(data) = frame.into_data() else { continue };
            if body_bytes.len() + data.len() > max {
                return Err(IntakeError::TooLarge { max });
            }
            let n = u32::try_from(data.len()).map_err(|_| IntakeError::TooLarge { max })?;
            let more = self.buffered.clone().try_acquire_many_owned(n).map_err(|_| IntakeError::Busy)?;
            match &mut budget {
                Some(held) => held.merge(more),
                None => budget = Some(more),
            }
            body_bytes.push(data, declared.map_or(0, |d| usize::try_from(d).unwrap_or(max)));
        }
        Ok(Held { bytes: body_bytes.into_bytes(), _budget: budget })
    }

    /// Runs `work` on the blocking pool when `size` is over the threshold, else inline; either
    /// way within `--decide-timeout-seconds` (`None` past it).
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        size: usize,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        if size <= self.limits.blocking_threshold_bytes {
            return Some(work());
        }
        let deadline = tokio::time::Instant::now() + self.limits.decide_timeout;
        let permit = tokio::time::timeout_at(deadline, self.blocking.clone().acquire_owned()).await.ok()?.ok()?;
        let task = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work()
        });
        tokio::time::timeout_at(deadline, task).await.ok()?.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intake(max_body: usize, budget: usize) -> Intake {
        Intake::new(Limits { max_body_bytes: max_body, max_buffered_body_bytes: budget, ..Limits::default() })
    }

    #[tokio::test]
    async fn bodies_within_limits() {
        let i = intake(10, 15);
        let held = i.read(&HeaderMap::new(), Body::from("0123456789")).await.unwrap();
        assert_eq!(held.bytes.as_ref(), b"0123456789");
        // Ten bytes held: the next body of ten does not fit the budget of fifteen.
        assert_eq!(i.read(&HeaderMap::new(), Body::from("0123456789")).await.err(), Some(IntakeError::Busy));
        drop(held);
        assert!(i.read(&HeaderMap::new(), Body::from("0123456789")).await.is_ok(), "budget given back");
        assert_eq!(
            i.read(&HeaderMap::new(), Body::from("0123456789x")).await.err(),
            Some(IntakeError::TooLarge { max: 10 })
        );
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, "1073741825".parse().unwrap());
        assert_eq!(
            i.read(&headers, Body::from("")).await.err(),
            Some(IntakeError::Declared { declared: 1_073_741_825, max: 10 })
        );
    }

    #[test]
    fn defaults_ignore_the_environment() {
        let limits = Limits::default();
        assert_eq!(limits.max_connections, 512);
        assert_eq!(limits.max_header_bytes, 64 * 1024);
        assert_eq!(limits.max_buffered_body_bytes, 16 * 1024 * 1024);
        assert_eq!(limits.body_read_timeout, Duration::from_secs(5));
    }

    #[tokio::test]
    async fn heavy_work_runs_off_the_workers_within_the_deadline() {
        let limits =
            Limits { blocking_threshold_bytes: 10, decide_timeout: Duration::from_millis(50), ..Limits::default() };
        let i = Intake::new(limits);
        assert_eq!(i.run(10, || 1).await, Some(1), "small: inline");
        let worker = std::thread::current().id();
        let ran_on = i.run(11, move || std::thread::current().id()).await.unwrap();
        assert_ne!(ran_on, worker, "large: on the blocking pool");
        // Work past the deadline is answered without its result (the caller allows the write).
        assert_eq!(i.run(11, || std::thread::sleep(Duration::from_millis(500))).await, None);
    }

    #[tokio::test]
    async fn stalled_bodies_time_out() {
        let limits = Limits { max_body_bytes: 10, body_read_timeout: Duration::from_millis(50), ..Limits::default() };
        let i = Intake::new(limits);
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<axum::body::Bytes, std::io::Error>>(1);
        tx.send(Ok(Bytes::from_static(b"01234"))).await.unwrap();
        let body = Body::from_stream(tokio_stream_from(rx));
        let err = i.read(&HeaderMap::new(), body).await.err();
        assert_eq!(err, Some(IntakeError::Timeout(0)));
        drop(tx);
    }

    fn tokio_stream_from(
        mut rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
    ) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
    }
}
