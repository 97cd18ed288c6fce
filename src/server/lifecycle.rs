//! The [`Readiness`] that `/readyz` reports, which a background task that ends before shutdown
//! turns false ([`watch`]).

use std::sync::{
    Mutex,
    atomic::{AtomicBool, Ordering},
};

use crate::sources::owned::Tasks;

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

/// Waits for a background task to end unexpectedly (never, while they all run) and marks the
/// process not ready, naming it. Cancel-safe.
pub(crate) async fn watch(tasks: &mut Tasks, readiness: &Readiness) {
    readiness.fail(&tasks.failed().await);
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
        watch(&mut tasks, &readiness).await;
        assert_eq!(readiness.failed().as_deref(), Some("short-lived"));
        tasks.stop(std::time::Duration::from_secs(5)).await;
    }

    #[tokio::test]
    async fn a_panicked_task_is_reported() {
        let readiness = Readiness::default();
        let mut tasks = Tasks::default();
        tasks.spawn("boom", async { panic!("boom") });
        watch(&mut tasks, &readiness).await;
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
                let mut owned = Tasks::new(tasks.failures());
                let (alive_tx, alive_rx) = tokio::sync::oneshot::channel::<()>();
                owned.spawn("sibling", async move {
                    let _alive = alive_tx;
                    std::future::pending::<()>().await;
                });
                owned.spawn("watch of publish Service ns/edge", async { panic!("deliberately") });
                owned.ended().await;
                watch(&mut tasks, &state.readiness).await;
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
}
