//! What `serve` owns besides its listeners: the [`Readiness`] that `/readyz` reports, and the
//! background [`Tasks`] (watches, the Event publisher) with the one shutdown token they all
//! obey. A task that ends before shutdown is logged and makes the process not ready.

use std::{
    collections::HashMap,
    future::Future,
    sync::{
        Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use tokio::task::{Id, JoinSet};
use tokio_util::sync::CancellationToken;

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

    fn fail(&self, task: &str) {
        *self.failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(task.to_owned());
    }

    /// The task whose end made the process not ready, if any.
    pub fn failed(&self) -> Option<String> {
        self.failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

/// Background tasks that run until shutdown.
#[derive(Default)]
pub struct Tasks {
    set: JoinSet<()>,
    names: HashMap<Id, &'static str>,
    shutdown: CancellationToken,
}

impl Tasks {
    /// The token every task watches; cancelled when shutdown begins draining tasks.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Runs `task` until it ends or shutdown; `name` says which in logs.
    pub fn spawn(&mut self, name: &'static str, task: impl Future<Output = ()> + Send + 'static) {
        let handle = self.set.spawn(task);
        self.names.insert(handle.id(), name);
    }

    /// Waits for the first task to end (never, while they all run), logs it and marks the
    /// process not ready.
    pub async fn watch(&mut self, readiness: &Readiness) {
        let (id, panic) = match self.set.join_next_with_id().await {
            None => return std::future::pending().await,
            Some(Ok((id, ()))) => (id, None),
            Some(Err(e)) => (e.id(), Some(e.to_string())),
        };
        let name = self.names.get(&id).copied().unwrap_or("unnamed");
        tracing::error!(task = name, panic, "background task ended; not ready");
        readiness.fail(name);
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
