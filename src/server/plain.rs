//! The servers of the plain-HTTP ports (admin, probe): one that ends while serving is logged
//! and makes the process not ready, instead of leaving the probes silently unanswered.

use std::{collections::HashMap, future::Future, io};

use axum::Router;
use axum_server::accept::NoDelayAcceptor;
use tokio::task::{Id, JoinError, JoinSet};

use crate::server::{conn::Guard, lifecycle::Readiness, limits::Limits};

/// The plain-HTTP servers, until [`Ports::stopped`].
#[derive(Default)]
pub(super) struct Ports {
    set: JoinSet<io::Result<()>>,
    names: HashMap<Id, &'static str>,
}

impl Ports {
    /// Serves `app` on `listener` until the returned handle shuts it down; `name` says which
    /// in logs and in `/readyz`.
    pub(super) fn serve(
        &mut self,
        name: &'static str,
        listener: std::net::TcpListener,
        app: Router,
        guard: Guard<NoDelayAcceptor>,
        limits: &Limits,
    ) -> io::Result<axum_server::Handle<std::net::SocketAddr>> {
        let handle = axum_server::Handle::new();
        let mut server = axum_server::from_tcp(listener)?
            .acceptor(guard)
            .first_request_timeout(limits.header_read_timeout)
            .handle(handle.clone());
        limits.configure(server.http_builder());
        self.own(name, server.serve(app.into_make_service()));
        Ok(handle)
    }

    fn own(&mut self, name: &'static str, server: impl Future<Output = io::Result<()>> + Send + 'static) {
        let id = self.set.spawn(server).id();
        self.names.insert(id, name);
    }

    /// Waits for a server to end (never, while they all serve): logs it and marks the process
    /// not ready. Cancel-safe.
    pub(super) async fn ended(&mut self, readiness: &Readiness) {
        let Some(end) = self.set.join_next_with_id().await else { return std::future::pending().await };
        let name = self.name(&end);
        match end {
            Ok((_, Ok(()))) => tracing::error!(server = name, "server ended while serving; not ready"),
            Ok((_, Err(e))) => tracing::error!(server = name, error = %e, "server failed; not ready"),
            Err(e) => tracing::error!(server = name, panic = %e, "server panicked; not ready"),
        }
        readiness.fail(name);
    }

    /// Waits for every server to end, once their handles have shut them down.
    pub(super) async fn stopped(mut self) {
        while let Some(end) = self.set.join_next_with_id().await {
            let name = self.name(&end);
            match end {
                Ok((_, Ok(()))) => {}
                Ok((_, Err(e))) => tracing::warn!(server = name, error = %e, "server failed while stopping"),
                Err(e) => tracing::error!(server = name, panic = %e, "server panicked while stopping"),
            }
        }
    }

    fn name(&self, end: &Result<(Id, io::Result<()>), JoinError>) -> &'static str {
        let id = end.as_ref().map_or_else(JoinError::id, |(id, _)| *id);
        self.names.get(&id).copied().unwrap_or("unnamed")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::server::tests::logged;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    #[test]
    fn a_server_that_fails_or_panics_is_logged_and_makes_the_process_not_ready() {
        let runtime = runtime();
        let log = logged(|| {
            runtime.block_on(async {
                let readiness = Readiness::default();
                let mut ports = Ports::default();
                ports.own("admin server", async { Err(io::Error::other("deliberate accept failure")) });
                ports.ended(&readiness).await;
                assert_eq!(readiness.failed().as_deref(), Some("admin server"));
                ports.own("probe server", async { panic!("deliberately") });
                ports.ended(&readiness).await;
                assert_eq!(readiness.failed().as_deref(), Some("probe server"));
            });
        });
        assert!(log.contains("server failed; not ready") && log.contains("deliberate accept failure"), "{log}");
        assert!(log.contains("server panicked; not ready") && log.contains("deliberately"), "{log}");
    }

    #[test]
    fn a_server_shut_down_by_its_handle_is_no_failure() {
        let runtime = runtime();
        let log = logged(|| {
            runtime.block_on(async {
                let readiness = Readiness::default();
                let mut ports = Ports::default();
                let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                listener.set_nonblocking(true).unwrap();
                let limits = Limits::default();
                let guard = Guard::new(
                    NoDelayAcceptor::new(),
                    4,
                    limits.lifetimes(),
                    "admin",
                    std::sync::Arc::new(crate::metrics::Metrics::new()),
                );
                let handle = ports.serve("admin server", listener, Router::new(), guard, &limits).unwrap();
                tokio::select! {
                    () = ports.ended(&readiness) => panic!("ended while serving"),
                    () = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
                handle.graceful_shutdown(Some(Duration::from_secs(1)));
                ports.stopped().await;
                assert_eq!(readiness.failed(), None);
            });
        });
        assert!(!log.contains("server"), "{log}");
    }
}
