//! Support for in-process tests: the production `server::serve` on loopback ports, with a static
//! policy (`192.0.2.10`) and a TLS configuration the test chooses.

use std::{net::SocketAddr, time::Duration};

use axum_server::tls_rustls::RustlsConfig;
use ingress_status_guard::{AppState, Limits, Listeners, PolicySpec, SourceCache, Tasks, WebhookPort, serve};

/// A running `serve`; stops when told to, or when the test's runtime ends.
pub(crate) struct LocalServer {
    pub webhook: SocketAddr,
    pub admin: SocketAddr,
    pub probe: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl LocalServer {
    /// Starts `serve` on 127.0.0.1 ports chosen by the kernel.
    pub(crate) fn start(tls: RustlsConfig) -> LocalServer {
        Self::start_with(tls, Limits { max_body_bytes: 1 << 20, ..Limits::default() })
    }

    /// Starts `serve` with the given bounds.
    pub(crate) fn start_with(tls: RustlsConfig, limits: Limits) -> LocalServer {
        Self::start_counting(tls, limits, None)
    }

    /// Starts `serve` with the given bounds, counting handshakes without a client certificate
    /// in `client_names`' refusals (as `serve --client-ca` does).
    pub(crate) fn start_counting(
        tls: RustlsConfig,
        limits: Limits,
        client_names: Option<ingress_status_guard::ClientNames>,
    ) -> LocalServer {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let policies = PolicySpec { publish_status_address: Some("192.0.2.10".into()), ..Default::default() }
            .into_policies()
            .unwrap();
        let state = AppState::new(policies.clone(), SourceCache::new(&policies));
        let webhook = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (webhook_addr, admin_addr) = (webhook.local_addr().unwrap(), admin.local_addr().unwrap());
        let probe_addr = probe.local_addr().unwrap();
        let webhook = Some(WebhookPort { listener: webhook, tls, client_names });
        let listeners = Listeners { webhook, admin, probe, limits, drain: Duration::from_secs(5) };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(serve(state, listeners, Tasks::default(), async {
            let _ = stopped.await;
        }));
        LocalServer { webhook: webhook_addr, admin: admin_addr, probe: probe_addr, stop, task }
    }

    /// Shuts down and waits for `serve` to return; panics if it failed.
    pub(crate) async fn stop(self) {
        self.stop.send(()).unwrap();
        self.task.await.unwrap().unwrap();
    }
}
