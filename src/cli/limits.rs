//! The flags of `serve` that bound what a caller can make the webhook hold or spend; they
//! become the typed [`Limits`] the server takes.

use std::time::Duration;

use clap::Args;

use super::duration::Seconds;
use crate::server::Limits;

/// The bounds, as flags of `serve`.
#[derive(Args, Debug, Clone)]
pub(crate) struct LimitArgs {
    /// Seconds a client has to complete the TLS handshake.
    #[arg(long, env = "ISG_TLS_HANDSHAKE_TIMEOUT_SECONDS", default_value = "10", value_parser = Seconds::POSITIVE)]
    pub(crate) tls_handshake_timeout_seconds: Duration,
    /// Seconds a client has to send a request's headers (and, on a new connection, its first
    /// request), on both ports.
    #[arg(long, env = "ISG_HEADER_READ_TIMEOUT_SECONDS", default_value = "5", value_parser = Seconds::POSITIVE)]
    pub(crate) header_read_timeout_seconds: Duration,
    /// Seconds a client has to send a whole request body, well under the API server's webhook
    /// timeout (10 s by default, 30 s at most).
    #[arg(long, env = "ISG_BODY_READ_TIMEOUT_SECONDS", default_value = "5", value_parser = Seconds::POSITIVE)]
    pub(crate) body_read_timeout_seconds: Duration,
    /// Seconds a connection may stay silent (no byte read or written) before it is closed. Above
    /// the API server's 90 s idle timeout, so it closes its idle connections first.
    #[arg(long, env = "ISG_IDLE_TIMEOUT_SECONDS", default_value = "120", value_parser = Seconds::POSITIVE)]
    pub(crate) idle_timeout_seconds: Duration,
    /// Open connections on the webhook port. When all are open, the idle one silent longest
    /// of the peer holding the most is closed for the newcomer (`connections_evicted_total`);
    /// only when every one has a request in flight is the newcomer closed
    /// (`connections_refused_total{listener="webhook"}`).
    #[arg(long, env = "ISG_MAX_CONNECTIONS", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_connections: u64,
    /// Open connections on the admin port (probes and scrapes need few).
    #[arg(long, env = "ISG_ADMIN_MAX_CONNECTIONS", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) admin_max_connections: u64,
    /// Open connections on the probe port (--probe-listen).
    #[arg(long, env = "ISG_PROBE_MAX_CONNECTIONS", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) probe_max_connections: u64,
    /// Seconds a connection may stay open, however busy, on every port; then it is closed
    /// gracefully (GOAWAY on HTTP/2, after the response on HTTP/1.1) and the client reconnects.
    #[arg(long, env = "ISG_MAX_CONNECTION_AGE_SECONDS", default_value = "300", value_parser = Seconds::POSITIVE)]
    pub(crate) max_connection_age_seconds: Duration,
    /// Reviews read, decided and answered at once on the webhook port; more get 503 at once
    /// (`requests_refused_total{reason="in_flight"}`), and the API server applies its failurePolicy.
    #[arg(long, env = "ISG_MAX_REQUESTS_IN_FLIGHT", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub(crate) max_requests_in_flight: u64,
    /// Largest request head (request line and headers) or HTTP/2 header list, in bytes, on
    /// every port.
    #[arg(long, env = "ISG_MAX_HEADER_BYTES", default_value_t = 8 * 1024, value_parser = clap::value_parser!(u64).range(8192..=16 * 1024 * 1024))]
    pub(crate) max_header_bytes: u64,
    /// Concurrent HTTP/2 streams per connection.
    #[arg(long, env = "ISG_HTTP2_MAX_CONCURRENT_STREAMS", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) http2_max_concurrent_streams: u32,
    /// Request body bytes held at once across all requests in flight; a request that would go
    /// over gets 503 (the API server retries per its failurePolicy).
    #[arg(long, env = "ISG_MAX_BUFFERED_BODY_BYTES", default_value_t = 8 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1..=1 << 40))]
    pub(crate) max_buffered_body_bytes: u64,
    /// Reviews larger than this, in bytes, are read and decided on a small blocking pool (at
    /// most two threads), so one heavy caller cannot stall the async workers.
    #[arg(long, env = "ISG_BLOCKING_THRESHOLD_BYTES", default_value_t = 256 * 1024)]
    pub(crate) blocking_threshold_bytes: usize,
    /// Seconds a review may take to be read and decided; past it the write is allowed with a
    /// warning, as when the canonical address is unknown.
    #[arg(long, env = "ISG_DECIDE_TIMEOUT_SECONDS", default_value = "2", value_parser = Seconds::POSITIVE)]
    pub(crate) decide_timeout_seconds: Duration,
}

impl LimitArgs {
    /// The typed bounds; `max_body_bytes` is `serve`'s own flag (it is also the router's).
    pub(crate) fn limits(&self, max_body_bytes: usize) -> Limits {
        let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        Limits {
            tls_handshake_timeout: self.tls_handshake_timeout_seconds,
            header_read_timeout: self.header_read_timeout_seconds,
            body_read_timeout: self.body_read_timeout_seconds,
            idle_timeout: self.idle_timeout_seconds,
            max_connections: size(self.max_connections),
            admin_max_connections: size(self.admin_max_connections),
            probe_max_connections: size(self.probe_max_connections),
            max_connection_age: self.max_connection_age_seconds,
            max_requests_in_flight: size(self.max_requests_in_flight),
            max_header_bytes: size(self.max_header_bytes),
            http2_max_concurrent_streams: self.http2_max_concurrent_streams,
            max_body_bytes,
            max_buffered_body_bytes: size(self.max_buffered_body_bytes),
            blocking_threshold_bytes: self.blocking_threshold_bytes,
            decide_timeout: self.decide_timeout_seconds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Default for LimitArgs {
        /// The flags' defaults, whatever the environment says.
        fn default() -> Self {
            use clap::{CommandFactory, FromArgMatches, Parser};
            #[derive(Parser)]
            struct Defaults {
                #[command(flatten)]
                flags: LimitArgs,
            }
            let command = Defaults::command().mut_args(|arg| arg.env(None));
            let matches = command.get_matches_from(["defaults"]);
            Defaults::from_arg_matches(&matches).expect("the defaults parse").flags
        }
    }

    #[test]
    fn the_flags_defaults_are_the_library_defaults() {
        assert_eq!(LimitArgs::default().limits(3 * 1024 * 1024), Limits::default());
    }
}
