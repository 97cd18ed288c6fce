//! The leader's side of the reconciler: the work loop (rate limited, bounded in concurrency,
//! stopped the moment leadership is lost) and the conditional patch of one object.

use std::{borrow::Cow, sync::Arc};

use tokio::{
    sync::watch,
    task::{JoinError, JoinSet},
};

use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};

use super::{
    FIELD_MANAGER, Key, Reconciler,
    kind::{self, Decided},
    queue::After,
};
use crate::{
    address::Addresses,
    client::{CALL_TIMEOUT, CallError, fenced, within},
    kind::Governed,
    scope::follow::Allow,
};

/// A 409 is retried on a fresh read this many times before the Ingress is backed off.
const CONFLICT_RETRIES: u32 = 3;

/// Raises the panic of an attempt that ended with one again, in the work loop.
fn raise(end: Result<(), JoinError>) {
    if let Err(e) = end
        && e.is_panic()
    {
        std::panic::resume_unwind(e.into_panic());
    }
}

impl<K: Governed> Reconciler<K> {
    async fn next_key(&self) -> Key {
        loop {
            {
                let mut state = self.lock();
                let super::State { ingresses, books } = &mut *state;
                if books.queue.wants_refill() {
                    books.refill(ingresses.keys());
                }
                if let Some(key) = books.queue.pop() {
                    return key;
                }
            }
            self.work.notified().await;
        }
    }

    /// The next key to attempt while leading; `None` once leadership can no longer be had.
    async fn next_leading(&self, leader: &mut watch::Receiver<bool>) -> Option<Key> {
        loop {
            leader.wait_for(|leading| *leading).await.ok()?;
            tokio::select! {
                key = self.next_key() => return Some(key),
                _ = leader.wait_for(|leading| !*leading) => {}
            }
        }
    }

    /// Takes keys off the queue and attempts them, each in a task held here: a panicking attempt
    /// panics the loop (logged, `/readyz` false), and the attempts stop with it.
    pub(super) async fn work_loop(self: Arc<Self>) {
        let (client, mut leader) = (self.common.client.clone(), self.common.leader.clone());
        let slots = self.common.bounds.slots.clone();
        let mut attempts = JoinSet::new();
        loop {
            let key = tokio::select! {
                Some(end) = attempts.join_next() => {
                    raise(end);
                    continue;
                }
                key = self.next_leading(&mut leader) => match key {
                    Some(key) => key,
                    None => return,
                },
            };
            self.common.bounds.limiter.lock().await.tick().await;
            let Ok(slot) = slots.clone().acquire_owned().await else { return };
            if !*leader.borrow() {
                // Lost the lead while waiting: the next leader's full pass covers this one.
                self.lock().books.queue.abandon(&key);
                continue;
            }
            let this = self.clone();
            let client = client.clone();
            let mut lost = leader.clone();
            while let Some(end) = attempts.try_join_next() {
                raise(end);
            }
            attempts.spawn(async move {
                // Leadership lost mid-patch: the attempt is cancelled (its request dropped)
                // before the Lease can expire, so a successor never patches beside it.
                // Biased: a patch the fence refused (leadership lost) ends as abandoned, not done.
                let result = tokio::select! {
                    biased;
                    _ = lost.wait_for(|leading| !*leading) => None,
                    result = this.reconcile_one(&client, &key) => Some(result),
                };
                drop(slot);
                match result {
                    Some(result) => this.finish(key, result),
                    None => this.lock().books.queue.abandon(&key),
                }
            });
        }
    }

    fn finish(self: &Arc<Self>, key: Key, result: Result<(), ()>) {
        let now = tokio::time::Instant::now();
        let policies = self.common.policies.load();
        let mut state = self.lock();
        match state.books.queue.done(key.clone(), result.is_ok(), now.into_std()) {
            After::Settled => {}
            After::Recheck => self.rejudge(&mut state, &key, &policies, false),
            // Queued again at `at` by the releases task, and judged then.
            After::RetryAt(at) => {
                if state.books.releases.arm(key, at) {
                    self.armed.notify_one();
                }
            }
        }
    }

    /// Patches one object to canonical if `decide` still says so; `Err`: retry after a backoff.
    async fn reconcile_one(&self, client: &Client, key: &Key) -> Result<(), ()> {
        let api: Api<K::Lean> = Api::namespaced(client.clone(), &key.0);
        let params = PatchParams { field_manager: Some(FIELD_MANAGER.to_owned()), ..PatchParams::default() };
        let object = format!("{}/{}", key.0, key.1);
        for _ in 0..=CONFLICT_RETRIES {
            let policies = self.common.policies.load();
            let (Decided { policy, canonical, status }, from, resource_version) = {
                let state = self.lock();
                let Some(stored) = state.ingresses.get(key) else { return Ok(()) };
                // The scope may have narrowed, or become unknown, since this was queued.
                if self.common.scope.allows(K::KIND, &key.0) != Allow::Yes {
                    return Ok(());
                }
                let Some(decided) = kind::to_patch::<K>(&stored.write(key), &policies, self.common.sources.as_ref())
                else {
                    return Ok(());
                };
                (decided, K::seen(&stored.addresses()).into_owned(), stored.resource_version().map(Cow::into_owned))
            };
            // Conditional: the patch applies only to the resourceVersion it was decided on.
            let patch = serde_json::json!({"metadata": {"resourceVersion": resource_version}, "status": status});
            // Fenced: checked as leader right before the write, and dropped if the lead goes.
            let Some(result) = fenced(
                &self.common.leader,
                within(CALL_TIMEOUT, api.patch_status(&key.1, &params, &Patch::Merge(&patch))),
            )
            .await
            else {
                return Ok(());
            };
            match result {
                Ok(obj) => {
                    self.common.metrics.patch(&policy, "patched");
                    let now = tokio::time::Instant::now().into_std();
                    self.lock().books.patched(key, &canonical, now);
                    K::healed(&object, &Addresses(&from), &Addresses(&canonical), &policy);
                    self.upsert_unless_newer(obj, resource_version.as_deref());
                    return Ok(());
                }
                Err(CallError::Api(kube::Error::Api(status))) if status.code == 409 => {
                    self.common.metrics.patch(&policy, "conflict");
                    match within(CALL_TIMEOUT, api.get(&key.1)).await {
                        Ok(fresh) => self.upsert_unless_newer(fresh, resource_version.as_deref()),
                        Err(CallError::Api(kube::Error::Api(status))) if status.code == 404 => return Ok(()),
                        Err(e) => {
                            tracing::warn!(kind = K::KIND.name(), object = %object, error = %e, "cannot re-read the object after a conflict; backing off");
                            return Err(());
                        }
                    }
                }
                Err(CallError::Api(kube::Error::Api(status))) if status.code == 404 => return Ok(()),
                Err(e) => {
                    self.common.metrics.patch(&policy, "failed");
                    tracing::warn!(kind = K::KIND.name(), object = %object, policy = %policy, error = %e, "status patch failed; backing off");
                    return Err(());
                }
            }
        }
        Err(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicked_attempt_is_raised_in_the_loop_and_a_finished_one_is_not() {
        let mut attempts = JoinSet::new();
        attempts.spawn(async {});
        raise(attempts.join_next().await.unwrap());
        attempts.spawn(async { panic!("deliberately") });
        let end = attempts.join_next().await.unwrap();
        let raised = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| raise(end))).expect_err("raised again");
        assert_eq!(raised.downcast_ref::<&str>(), Some(&"deliberately"));
    }
}
