//! Every background task has one owner, a [`Tasks`] set: dropping it stops them all, and each
//! end is logged. A task that ends without being stopped (a panic, or a loop that returned) is
//! reported to [`Failures`], which the root set's [`Tasks::failed`] hands to `serve` to turn
//! `/readyz` false, naming it.

use std::{collections::HashMap, future::Future, time::Duration};

use tokio::{
    sync::mpsc,
    task::{AbortHandle, Id, JoinError, JoinSet},
};
use tokio_util::sync::CancellationToken;

/// Where the unexpected end of an owned task is reported (the root set's channel); without a
/// receiver an end is only logged.
#[derive(Debug, Clone, Default)]
pub(crate) struct Failures(Option<mpsc::UnboundedSender<String>>);

impl Failures {
    /// Reports into `to`; each task ends once, so the channel holds one message a task at most.
    pub(crate) fn new(to: mpsc::UnboundedSender<String>) -> Self {
        Failures(Some(to))
    }

    fn report(&self, task: &str) {
        if let Some(to) = &self.0 {
            // The receiver is gone only at shutdown, when nothing is ready anyway.
            let _ = to.send(task.to_owned());
        }
    }
}

/// `task`'s output, or never without one: a branch of a `select!` on something optional.
pub(crate) async fn or_never<F: Future>(task: Option<F>) -> F::Output {
    match task {
        Some(task) => task.await,
        None => std::future::pending().await,
    }
}

/// A set of tasks that end with their owner. `Tasks::default()` is a root set, which receives
/// the failures of its own tasks and of every set made with `Tasks::new(root.failures())`.
#[derive(Debug)]
pub struct Tasks {
    set: JoinSet<()>,
    names: HashMap<Id, String>,
    failures: Failures,
    /// A root set's end of `failures`.
    reported: Option<mpsc::UnboundedReceiver<String>>,
    /// What every task that stops gracefully watches; cancelled by [`Tasks::stop`].
    shutdown: CancellationToken,
}

impl Default for Tasks {
    fn default() -> Self {
        let (to, reported) = mpsc::unbounded_channel();
        Tasks { reported: Some(reported), ..Tasks::new(Failures::new(to)) }
    }
}

impl Tasks {
    /// An empty set whose unexpected ends go to `failures`.
    pub(crate) fn new(failures: Failures) -> Self {
        Tasks {
            set: JoinSet::new(),
            names: HashMap::new(),
            failures,
            reported: None,
            shutdown: CancellationToken::new(),
        }
    }

    /// Where sets below this one report their unexpected ends.
    pub(crate) fn failures(&self) -> Failures {
        self.failures.clone()
    }

    /// The token every task that stops gracefully watches; cancelled by [`Tasks::stop`].
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Runs `task` until it ends, is aborted through the returned handle, or the set is
    /// dropped or stopped; `name` says which in logs and in `/readyz`.
    pub fn spawn(&mut self, name: impl Into<String>, task: impl Future<Output = ()> + Send + 'static) -> AbortHandle {
        // Tasks that ended meanwhile are reaped here too, so an owner that never waits on
        // `ended` keeps no finished task.
        while let Some(end) = self.set.try_join_next_with_id() {
            self.log(end);
        }
        let handle = self.set.spawn(task);
        self.names.insert(handle.id(), name.into());
        handle
    }

    /// [`Tasks::spawn`] for a `task` that ignores the shutdown token: dropped when it is
    /// cancelled.
    pub(crate) fn spawn_until_shutdown(
        &mut self,
        name: impl Into<String>,
        task: impl Future<Output = ()> + Send + 'static,
    ) {
        let token = self.shutdown.clone();
        self.spawn(name, async move {
            tokio::select! {
                () = task => {}
                () = token.cancelled() => {}
            }
        });
    }

    /// Waits for the next task to end (never, while none does), and logs it; an end that was
    /// not an abort is reported as a failure. Cancel-safe: an end is taken only when returned.
    pub(crate) async fn ended(&mut self) {
        let end = next_end(&mut self.set).await;
        self.log(end);
    }

    /// Waits for a task of this set, or of a set reporting here, to end unexpectedly (never in
    /// a set that is not a root), and returns its name. Cancel-safe.
    pub async fn failed(&mut self) -> String {
        loop {
            tokio::select! {
                // The sender is in `self`: never closed while this waits.
                Some(name) = or_never(self.reported.as_mut().map(mpsc::UnboundedReceiver::recv)) => return name,
                end = next_end(&mut self.set) => self.log(end),
            }
        }
    }

    /// Cancels the shutdown token and waits up to `grace` for every task to finish (the Event
    /// publisher flushes its queue meanwhile); the rest are aborted.
    pub async fn stop(mut self, grace: Duration) {
        self.shutdown.cancel();
        let all = async { while self.set.join_next().await.is_some() {} };
        if tokio::time::timeout(grace, all).await.is_err() {
            tracing::warn!(grace_seconds = grace.as_secs(), "background tasks did not stop in time; aborted");
            self.set.abort_all();
        }
    }

    fn log(&mut self, end: Result<(Id, ()), JoinError>) {
        let id = end.as_ref().map_or_else(JoinError::id, |(id, ())| *id);
        let name = self.names.remove(&id).unwrap_or_else(|| "unnamed".to_owned());
        match end {
            Err(e) if e.is_cancelled() => tracing::debug!(task = %name, "task stopped"),
            Err(e) => {
                tracing::error!(task = %name, panic = %e, "task panicked; not ready");
                self.failures.report(&name);
            }
            Ok(_) => {
                tracing::error!(task = %name, "task ended unexpectedly; not ready");
                self.failures.report(&name);
            }
        }
    }
}

/// The next end in `set`, or never while it is empty.
async fn next_end(set: &mut JoinSet<()>) -> Result<(Id, ()), JoinError> {
    match set.join_next_with_id().await {
        Some(end) => end,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn aborted_tasks_are_no_failure_but_a_panic_is() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut owned = Tasks::new(Failures::new(tx));
        let stopped = owned.spawn("stopped", std::future::pending());
        stopped.abort();
        owned.ended().await;
        assert!(rx.try_recv().is_err(), "an abort is the owner's doing");
        owned.spawn("returns", async {});
        owned.ended().await;
        assert_eq!(rx.try_recv().as_deref(), Ok("returns"));
        owned.spawn("boom", async { panic!("deliberately") });
        owned.ended().await;
        assert_eq!(rx.try_recv().as_deref(), Ok("boom"));
    }

    #[tokio::test]
    async fn dropping_the_set_stops_its_tasks() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let mut owned = Tasks::new(Failures::default());
        owned.spawn("holder", async move {
            let _tx = tx;
            std::future::pending::<()>().await;
        });
        drop(owned);
        assert!(rx.await.is_err(), "the task was dropped, and its sender with it");
    }

    /// A root set names the first task to end, its own or one a set below it owns, and not
    /// one that still runs.
    #[tokio::test]
    async fn a_root_set_names_its_own_and_its_owned_tasks_that_end() {
        let mut root = Tasks::default();
        let token = root.shutdown_token();
        root.spawn("forever", async move { token.cancelled().await });
        root.spawn("short-lived", async {});
        assert_eq!(root.failed().await, "short-lived");
        let mut below = Tasks::new(root.failures());
        below.spawn("owned boom", async { panic!("deliberately") });
        below.ended().await;
        assert_eq!(root.failed().await, "owned boom");
        root.stop(Duration::from_secs(5)).await;
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

    #[tokio::test]
    async fn stop_aborts_a_task_that_outlives_the_grace() {
        let mut tasks = Tasks::default();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tasks.spawn_until_shutdown("stubborn", async move {
            let _tx = tx;
            std::future::pending::<()>().await;
        });
        tasks.spawn("ignores the token", std::future::pending());
        tasks.stop(Duration::from_millis(50)).await;
        assert!(rx.await.is_err(), "a task that ignores the token is stopped by spawn_until_shutdown");
    }
}
