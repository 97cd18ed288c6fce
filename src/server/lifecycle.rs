//! What `serve` owns besides its listeners: the [`Readiness`] that `/readyz` reports, and the
//! background [`Tasks`] (watches, the Event publisher) with the one shutdown token they all
//! obey. A task that ends before shutdown is logged and makes the process not ready, and so
//! does a task those own ([`crate::sources::owned::Owned`]) that panics or ends: they report
//! it through [`Tasks::failures`].

use std::{
    collections::HashMap,
    future::Future,
    sync::{
        Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use tokio::{
    sync::mpsc,
    task::{Id, JoinSet},
};
use tokio_util::sync::CancellationToken;

use crate::sources::owned::Failures;

/// Why the process is not ready, apart from caches not being synced.
#[derive(Debug, Default)]
pub struct Readiness {
    draining: AtomicBool,
    /// The name of a background task that ended unexpectedly.
    failed: Mutex<Option<String>>,
}

impl Readiness {
    /// Shutdown started: load balancers should stop sending.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    pub(super) fn fail(&self, task: &str) {
        *self.failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(task.to_owned());
    }

    /// The task whose end made the process not ready, if any.
    pub fn failed(&self) -> Option<String> {
        self.failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

/// Background tasks that run until shutdown.
pub struct Tasks {
    set: JoinSet<()>,
    names: HashMap<Id, &'static str>,
    shutdown: CancellationToken,
    /// The unexpected ends of the tasks these own, reported by their owners.
    failed: (mpsc::UnboundedSender<String>, mpsc::UnboundedReceiver<String>),
}

impl Default for Tasks {
    fn default() -> Self {
        Tasks {
            set: JoinSet::new(),
            names: HashMap::new(),
            shutdown: CancellationToken::new(),
            failed: mpsc::unbounded_channel(),
        }
    }
}

impl Tasks {
    /// Where the owners of further tasks report their unexpected ends ([`Tasks::watch`] then
    /// marks the process not ready).
    pub(crate) fn failures(&self) -> Failures {
        Failures::new(self.failed.0.clone())
    }

    /// The token every task watches; cancelled when shutdown begins draining tasks.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Runs `task` until it ends or shutdown; `name` says which in logs.
    pub fn spawn(&mut self, name: &'static str, task: impl Future<Output = ()> + Send + 'static) {
        let handle = self.set.spawn(task);
        self.names.insert(handle.id(), name);
    }

    /// [`Tasks::spawn`] for a `task` that ignores the shutdown token: dropped when it is
    /// cancelled.
    pub(crate) fn spawn_until_shutdown(&mut self, name: &'static str, task: impl Future<Output = ()> + Send + 'static) {
        let token = self.shutdown.clone();
        self.spawn(name, async move {
            tokio::select! {
                () = task => {}
                () = token.cancelled() => {}
            }
        });
    }

    /// Waits for the next task to end (never, while they all run), or an owned task's end
    /// to be reported, logs it and marks the process not ready. Cancel-safe.
    pub async fn watch(&mut self, readiness: &Readiness) {
        let ended = async {
            match self.set.join_next_with_id().await {
                None => std::future::pending().await,
                Some(Ok((id, ()))) => (id, None),
                Some(Err(e)) => (e.id(), Some(e.to_string())),
            }
        };
        tokio::select! {
            (id, panic) = ended => {
                let name = self.names.get(&id).copied().unwrap_or("unnamed");
                tracing::error!(task = name, panic, "background task ended; not ready");
                readiness.fail(name);
            }
            // The sender is in `self`: never closed while this waits. The owner logged it.
            Some(owned) = self.failed.1.recv() => readiness.fail(&owned),
        }
    }

    /// Cancels every task and waits up to `grace` for them to finish (the Event publisher
    /// flushes its queue meanwhile); the rest are aborted.
    pub async fn stop(mut self, grace: Duration) {
        self.shutdown.cancel();
        let all = async { while self.set.join_next().await.is_some() {} };
        if tokio::time::timeout(grace, all).await.is_err() {
            tracing::warn!(grace_seconds = grace.as_secs(), "background tasks did not stop in time; aborted");
            self.set.abort_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::tests::logged;

    #[tokio::test]
    async fn a_task_that_ends_makes_the_process_not_ready() {
        let readiness = Readiness::default();
        let mut tasks = Tasks::default();
        let token = tasks.shutdown_token();
        tasks.spawn("forever", async move { token.cancelled().await });
        tasks.spawn("short-lived", async {});
        tasks.watch(&readiness).await;
        assert_eq!(readiness.failed().as_deref(), Some("short-lived"));
        tasks.stop(Duration::from_secs(5)).await;
    }

    #[tokio::test]
    async fn a_panicked_task_is_reported() {
        let readiness = Readiness::default();
        let mut tasks = Tasks::default();
        tasks.spawn("boom", async { panic!("boom") });
        tasks.watch(&readiness).await;
        assert_eq!(readiness.failed().as_deref(), Some("boom"));
    }

    /// A watch (or work loop) owned by a background task panics: it is logged with its name,
    /// and `/readyz` turns false, naming it, while its owner and siblings run on.
    #[test]
    fn a_panicking_owned_task_is_logged_and_makes_the_process_not_ready() {
        let policies = crate::PolicySpec { publish_status_address: Some("192.0.2.10".into()), ..Default::default() }
            .into_policies()
            .unwrap();
        let state = crate::AppState::new(policies.clone(), crate::SourceCache::new(&policies));
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let log = logged(|| {
            runtime.block_on(async {
                assert!(state.ready(), "static sources: ready at once");
                let mut tasks = Tasks::default();
                let mut owned = crate::sources::owned::Owned::new(tasks.failures());
                let (alive_tx, alive_rx) = tokio::sync::oneshot::channel::<()>();
                owned.spawn("sibling".to_owned(), async move {
                    let _alive = alive_tx;
                    std::future::pending::<()>().await;
                });
                owned.spawn("watch of publish Service ns/edge".to_owned(), async { panic!("deliberately") });
                owned.ended().await;
                tasks.watch(&state.readiness).await;
                assert!(!state.ready(), "a panicked watch makes the process not ready");
                assert_eq!(state.readiness.failed().as_deref(), Some("watch of publish Service ns/edge"));
                drop(owned);
                assert!(alive_rx.await.is_err(), "dropping the owner stops the rest");
            });
        });
        assert!(log.contains("task panicked; not ready") && log.contains("watch of publish Service ns/edge"), "{log}");
        assert!(log.contains("deliberately"), "the panic's message is logged: {log}");
    }

    /// Readiness waits for every watch started at start-up to drop its handle (after its first
    /// list), whatever the order, and then stays.
    #[test]
    fn readiness_waits_for_every_watch_handle() {
        let policies = crate::PolicySpec { publish_status_address: Some("192.0.2.10".into()), ..Default::default() }
            .into_policies()
            .unwrap();
        let cache = crate::SourceCache::new(&policies);
        let state = crate::AppState::new(policies, cache.clone());
        let handles: Vec<_> = (0..3).map(|_| cache.initialize.handle()).collect();
        for (i, handle) in handles.into_iter().rev().enumerate() {
            assert!(!state.ready(), "{} handles still out", 3 - i);
            drop(handle);
        }
        assert!(state.ready());
        let late = cache.initialize.handle();
        assert!(state.ready(), "a watch a reload adds does not unready a serving webhook");
        drop(late);
    }

    #[tokio::test]
    async fn stop_cancels_and_waits() {
        let mut tasks = Tasks::default();
        let token = tasks.shutdown_token();
        let (tx, rx) = tokio::sync::oneshot::channel();
        tasks.spawn("flusher", async move {
            token.cancelled().await;
            let _ = tx.send("flushed");
        });
        tasks.stop(Duration::from_secs(5)).await;
        assert_eq!(rx.await.unwrap(), "flushed");
    }
}
