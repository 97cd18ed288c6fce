//! Background tasks owned by the component that starts them (the watches of the policies in
//! force, the reconciler's scope follower, the admission policy keeper): [`Owned`] holds them
//! in a `JoinSet`, so dropping it stops them all, and logs each one's end. A task that ends
//! without being stopped (a panic, or a loop that returned) is reported to [`Failures`], which
//! `serve` turns into `/readyz` false, naming it.

use std::{collections::HashMap, future::Future};

use tokio::{
    sync::mpsc,
    task::{AbortHandle, Id, JoinError, JoinSet},
};

/// Where the unexpected end of an owned task is reported: `serve`'s background tasks
/// (`server::lifecycle::Tasks`), which mark the process not ready. Without a receiver (tests,
/// one-shot commands) an end is only logged.
#[derive(Debug, Clone, Default)]
pub(crate) struct Failures(Option<mpsc::UnboundedSender<String>>);

impl Failures {
    /// Reports into `to`; each task ends once, so the channel holds at most one message per
    /// task.
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

/// A set of tasks that end with their owner.
#[derive(Debug, Default)]
pub(crate) struct Owned {
    set: JoinSet<()>,
    names: HashMap<Id, String>,
    failures: Failures,
}

impl Owned {
    /// An empty set whose unexpected ends go to `failures`.
    pub(crate) fn new(failures: Failures) -> Self {
        Owned { set: JoinSet::new(), names: HashMap::new(), failures }
    }

    /// Runs `task` until it ends, is aborted through the returned handle, or the set is
    /// dropped; `name` says which in logs and in `/readyz`.
    pub(crate) fn spawn(&mut self, name: String, task: impl Future<Output = ()> + Send + 'static) -> AbortHandle {
        // Tasks that ended meanwhile are reaped here too, so an owner that never waits on
        // `ended` keeps no finished task.
        while let Some(end) = self.set.try_join_next_with_id() {
            self.log(end);
        }
        let handle = self.set.spawn(task);
        self.names.insert(handle.id(), name);
        handle
    }

    /// Waits for the next task to end (never, while none does), and logs it; an end that was
    /// not an abort is reported as a failure. Cancel-safe: an end is taken only when returned.
    pub(crate) async fn ended(&mut self) {
        match self.set.join_next_with_id().await {
            Some(end) => self.log(end),
            None => std::future::pending().await,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn aborted_tasks_are_no_failure_but_a_panic_is() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut owned = Owned::new(Failures::new(tx));
        let stopped = owned.spawn("stopped".to_owned(), std::future::pending());
        stopped.abort();
        owned.ended().await;
        assert!(rx.try_recv().is_err(), "an abort is the owner's doing");
        owned.spawn("returns".to_owned(), async {});
        owned.ended().await;
        assert_eq!(rx.try_recv().as_deref(), Ok("returns"));
        owned.spawn("boom".to_owned(), async { panic!("deliberately") });
        owned.ended().await;
        assert_eq!(rx.try_recv().as_deref(), Ok("boom"));
    }

    #[tokio::test]
    async fn dropping_the_set_stops_its_tasks() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let mut owned = Owned::default();
        owned.spawn("holder".to_owned(), async move {
            let _tx = tx;
            std::future::pending::<()>().await;
        });
        drop(owned);
        assert!(rx.await.is_err(), "the task was dropped, and its sender with it");
    }
}
