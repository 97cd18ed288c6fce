//! Every bound on what a caller can make the webhook hold or spend, each set by a flag of
//! `serve` (`cli::limits`, defaults in docs/security.md), and reading a body within them.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU8, Ordering},
    },
    time::Duration,
};

use axum::{
    body::{Body, Bytes},
    http::{HeaderMap, StatusCode, header},
};
use http_body_util::BodyExt as _;
use hyper_util::{rt::TokioExecutor, server::conn::auto::Builder};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::conn;

/// The bounds, typed: built once from `serve`'s flags (or [`Limits::default`] in tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Longest TLS handshake (`--tls-handshake-timeout-seconds`).
    pub tls_handshake_timeout: Duration,
    /// Longest wait for a request head (`--header-read-timeout-seconds`).
    pub header_read_timeout: Duration,
    /// Longest wait for a request body (`--body-read-timeout-seconds`).
    pub body_read_timeout: Duration,
    /// A connection silent this long is closed (`--idle-timeout-seconds`).
    pub idle_timeout: Duration,
    /// Open connections on the webhook port (`--max-connections`).
    pub max_connections: usize,
    /// Open connections on the admin port (`--admin-max-connections`).
    pub admin_max_connections: usize,
    /// Open connections on the probe port (`--probe-max-connections`).
    pub probe_max_connections: usize,
    /// A connection open this long is closed gracefully, on every port (`--max-connection-age-seconds`).
    pub max_connection_age: Duration,
    /// Reviews being read, decided and answered at once (`--max-requests-in-flight`).
    pub max_requests_in_flight: usize,
    /// Largest HTTP/1.1 request head or HTTP/2 header list (`--max-header-bytes`).
    pub max_header_bytes: usize,
    /// Concurrent HTTP/2 streams per connection (`--http2-max-concurrent-streams`).
    pub http2_max_concurrent_streams: u32,
    /// Largest AdmissionReview body (`--max-body-bytes`).
    pub max_body_bytes: usize,
    /// Body bytes held by all requests together (`--max-buffered-body-bytes`).
    pub max_buffered_body_bytes: usize,
    /// Reviews this large are decided on the blocking pool (`--blocking-threshold-bytes`).
    pub blocking_threshold_bytes: usize,
    /// Longest decision of one review before it is allowed as written (`--decide-timeout-seconds`).
    pub decide_timeout: Duration,
}

impl Limits {
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
            .max_header_list_size(u32::try_from(self.max_header_bytes).unwrap_or(u32::MAX))
            // Body bytes a client may send before they are read are outside the byte budget;
            // hyper's 1 MiB windows would let each connection park that much.
            .initial_stream_window_size(HTTP2_STREAM_WINDOW)
            .initial_connection_window_size(HTTP2_CONNECTION_WINDOW);
    }

    /// How long connections of every port may live.
    pub(crate) fn lifetimes(&self) -> conn::Lifetimes {
        conn::Lifetimes {
            idle: self.idle_timeout,
            max_age: self.max_connection_age,
            // Long enough for a request begun just before the age to be received and decided.
            grace: self.header_read_timeout + self.body_read_timeout + self.decide_timeout,
        }
    }
}

/// HTTP/2 flow-control window of each request stream: body bytes sent ahead of being read
/// (HTTP/2's own default, 64 KiB, where hyper's is 1 MiB).
pub(crate) const HTTP2_STREAM_WINDOW: u32 = 64 * 1024;
/// HTTP/2 flow-control window of each connection, all its streams together. Twice the stream
/// window: 16 streams of typical reviews (5 to 8 KiB) fit at once. At 64 KiB they did not, and
/// requests waited for WINDOW_UPDATEs: in one loaded run HTTP/2 p99 rose from 24 to 87 ms and
/// throughput fell from 76 to 44 % of the baseline server (the benchmark history, "The HTTP/2
/// regression is the connection window").
pub(crate) const HTTP2_CONNECTION_WINDOW: u32 = 128 * 1024;

impl Default for Limits {
    /// The defaults of `serve`'s flags (a test in `cli::limits` keeps the two the same).
    fn default() -> Self {
        let secs = Duration::from_secs;
        Limits {
            tls_handshake_timeout: secs(10),
            header_read_timeout: secs(5),
            body_read_timeout: secs(5),
            idle_timeout: secs(120),
            max_connections: 64,
            admin_max_connections: 64,
            probe_max_connections: 16,
            max_connection_age: secs(300),
            max_requests_in_flight: 64,
            max_header_bytes: 8 * 1024,
            http2_max_concurrent_streams: 16,
            max_body_bytes: 3 * 1024 * 1024,
            max_buffered_body_bytes: 8 * 1024 * 1024,
            blocking_threshold_bytes: 256 * 1024,
            decide_timeout: secs(2),
        }
    }
}

/// Reads request bodies within the limits; shared by every request of the webhook port.
pub(crate) struct Intake {
    pub(crate) limits: Limits,
    /// One permit per body byte held, across all requests.
    buffered: Arc<Semaphore>,
    /// One permit per review being read and decided off the async workers.
    blocking: Arc<Semaphore>,
    /// One permit per review in flight on the webhook port.
    in_flight: Arc<Semaphore>,
}

/// The most threads of the blocking pool (the runtime's `max_blocking_threads`, and the most
/// reviews decided on it at once): each decides one review of up to `--max-body-bytes`.
pub(crate) const BLOCKING_THREADS: usize = 2;

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

/// A body's frames: one frame is kept as it came, without a copy (it may share hyper's read
/// buffer until the review is answered). From a second frame on, the bytes are copied into one
/// buffer that doubles, never past the declared `Content-Length` or the limit; the budget pays
/// for its capacity, so a caller holds at most twice what it sent.
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

    /// What the buffer holds against the budget: its capacity once frames are copied.
    fn held(&self) -> usize {
        match self {
            Collected::Many(all) => all.capacity(),
            _ => self.len(),
        }
    }

    /// The bytes held once `more` is pushed, the growth capped by `declared` (checked against `max`).
    fn held_after(&self, more: usize, declared: Option<usize>, max: usize) -> usize {
        let needed = self.len() + more;
        match self {
            Collected::Empty => more,
            Collected::Many(all) if needed <= all.capacity() => all.capacity(),
            Collected::One(_) | Collected::Many(_) => {
                let ceiling = declared.filter(|&d| d >= needed).unwrap_or(max);
                needed.saturating_mul(2).min(ceiling).max(needed)
            }
        }
    }

    /// Adds a frame, growing the buffer to `held` bytes when it must grow.
    fn push(&mut self, data: Bytes, held: usize) {
        *self = match std::mem::take(self) {
            Collected::Empty => Collected::One(data),
            Collected::One(first) => {
                let mut all = Vec::with_capacity(held);
                all.extend_from_slice(&first);
                all.extend_from_slice(&data);
                Collected::Many(all)
            }
            Collected::Many(mut all) => {
                if all.len() + data.len() > all.capacity() {
                    all.reserve_exact(held - all.len());
                }
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
        let in_flight = Arc::new(Semaphore::new(limits.max_requests_in_flight.clamp(1, Semaphore::MAX_PERMITS)));
        let blocking = Arc::new(Semaphore::new(cpus.min(BLOCKING_THREADS)));
        Intake { limits, buffered: Arc::new(Semaphore::new(budget)), blocking, in_flight }
    }

    /// A review's place among those in flight until answered; `None` at `--max-requests-in-flight`.
    pub(crate) fn admit(&self) -> Option<OwnedSemaphorePermit> {
        self.in_flight.clone().try_acquire_owned().ok()
    }

    /// The body, read in full within the limits; a declared `Content-Length` over the limit is
    /// refused before any byte is read.
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
            let declared = declared.map(|d| usize::try_from(d).unwrap_or(max));
            let held = body_bytes.held_after(data.len(), declared, max);
            let grow = held.saturating_sub(body_bytes.held());
            if grow > 0 {
                let n = u32::try_from(grow).map_err(|_| IntakeError::TooLarge { max })?;
                let more = self.buffered.clone().try_acquire_many_owned(n).map_err(|_| IntakeError::Busy)?;
                match &mut budget {
                    Some(paid) => paid.merge(more),
                    None => budget = Some(more),
                }
            }
            body_bytes.push(data, held);
        }
        Ok(Held { bytes: body_bytes.into_bytes(), _budget: budget })
    }

    /// Runs `work` on `held` inline when the body is at most the threshold, else on the blocking
    /// pool within `--decide-timeout-seconds`: `None` when the answer goes out without it. The
    /// work keeps `held` (the budget) until it ends, and asks its [`Claim`] before side effects.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        held: Held,
        work: impl FnOnce(&Held, &Claim) -> T + Send + 'static,
    ) -> Option<T> {
        let claim = Claim::default();
        if held.bytes.len() <= self.limits.blocking_threshold_bytes {
            return Some(work(&held, &claim));
        }
        let deadline = tokio::time::Instant::now() + self.limits.decide_timeout;
        // Past the deadline before a thread is free: the work never starts (its bytes go back).
        let permit = tokio::time::timeout_at(deadline, self.blocking.clone().acquire_owned()).await.ok()?.ok()?;
        let late = claim.clone();
        let mut task = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work(&held, &late)
        });
        match tokio::time::timeout_at(deadline, &mut task).await {
            Ok(done) => done.ok(),
            // The work claimed first: it is reporting as decided, so its answer is the one.
            Err(_) if !claim.time_out() => task.await.ok(),
            Err(_) => None,
        }
    }
}

/// Which came first for work that may outlive its answer: the decision, or the timeout that
/// answered without it. Claimed once; a late decision must not report what it would have done.
#[derive(Debug, Clone, Default)]
pub(crate) struct Claim(Arc<AtomicU8>);

const PENDING: u8 = 0;
const DECIDED: u8 = 1;
const TIMED_OUT: u8 = 2;

impl Claim {
    /// Called by the work before its side effects: `true` when the answer will be its own.
    pub(crate) fn decided(&self) -> bool {
        match self.0.compare_exchange(PENDING, DECIDED, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => true,
            Err(state) => state == DECIDED,
        }
    }

    /// A claim the timeout already took, for tests of what late work reports.
    #[cfg(test)]
    pub(crate) fn late() -> Self {
        let claim = Claim::default();
        claim.time_out();
        claim
    }

    /// Called at the deadline: `true` when the answer goes out without the work.
    fn time_out(&self) -> bool {
        match self.0.compare_exchange(PENDING, TIMED_OUT, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => true,
            Err(state) => state == TIMED_OUT,
        }
    }
}

#[cfg(test)]
mod tests;
