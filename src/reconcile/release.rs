//! When the keys held back ([`super::queue::Queue::hold`]) are released: one timer for every
//! held key, so holding 10,000 Ingresses costs two small entries each, not a task each.
//! [`Releases`] is the pure schedule; [`run`] the loop that sleeps until its next instant.

use std::{
    collections::{BTreeSet, HashMap},
    hash::Hash,
    time::Instant,
};

use tokio::sync::Notify;

use super::shrink::shrink;

/// At most one pending release per key, the earliest: it judges the key afresh (and may hold it
/// again), which covers a later instant armed meanwhile.
#[derive(Debug, Default)]
pub(crate) struct Releases<K> {
    by_instant: BTreeSet<(Instant, K)>,
    pending: HashMap<K, Instant>,
}

impl<K: Ord + Hash + Clone> Releases<K> {
    /// Releases `key` at `at`, unless it is released at or before then already; `true` if
    /// the next release moved earlier (the loop is to be woken).
    pub(crate) fn arm(&mut self, key: K, at: Instant) -> bool {
        let earliest = self.next();
        match self.pending.get(&key) {
            Some(&armed) if armed <= at => return false,
            Some(&armed) => {
                self.by_instant.remove(&(armed, key.clone()));
            }
            None => {}
        }
        self.pending.insert(key.clone(), at);
        self.by_instant.insert((at, key));
        earliest.is_none_or(|earliest| at < earliest)
    }

    /// The instant of the next release.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.by_instant.first().map(|(at, _)| *at)
    }

    /// Takes the keys due at `now`, earliest first.
    pub(crate) fn due(&mut self, now: Instant) -> Vec<K> {
        let mut due = Vec::new();
        while let Some((at, _)) = self.by_instant.first()
            && *at <= now
        {
            let Some((_, key)) = self.by_instant.pop_first() else { break };
            self.pending.remove(&key);
            due.push(key);
        }
        shrink(&mut self.pending);
        due
    }

    /// Pending releases.
    #[cfg(any(test, feature = "test-support"))]
    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }
}

/// Sleeps until the `next` release instant, then calls `fire` with the time; woken early by
/// `armed` ([`Releases::arm`]'s `true`). Never returns.
pub(crate) async fn run(armed: &Notify, mut next: impl FnMut() -> Option<Instant>, mut fire: impl FnMut(Instant)) {
    loop {
        // A release armed between `next` and the wait below leaves a permit: not missed.
        let sleep = next().map(|at| tokio::time::sleep_until(at.into()));
        tokio::select! {
            () = armed.notified() => continue,
            () = crate::sources::owned::or_never(sleep) => {}
        }
        fire(tokio::time::Instant::now().into_std());
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{Arc, Mutex},
        time::Duration,
    };

    use super::*;

    fn now() -> Instant {
        tokio::time::Instant::now().into_std()
    }

    #[test]
    fn one_pending_release_per_key_the_earliest() {
        let t = Instant::now();
        let s = Duration::from_secs;
        let mut r = Releases::default();
        assert!(r.arm("a", t + s(10)), "the first release: wake the loop");
        assert!(!r.arm("b", t + s(20)), "later than the next: no wake-up");
        assert!(!r.arm("a", t + s(30)), "a later release of a pending key is covered");
        assert_eq!(r.len(), 2);
        assert!(r.arm("a", t + s(5)), "an earlier one replaces it");
        assert_eq!(r.len(), 2, "re-arming keeps one entry per key");
        assert_eq!(r.next(), Some(t + s(5)));
        assert_eq!(r.due(t + s(4)), Vec::<&str>::new());
        assert_eq!(r.due(t + s(5)), ["a"], "due at the instant");
        assert_eq!(r.due(t + s(60)), ["b"], "a's replaced release is gone with it");
        assert_eq!((r.len(), r.next()), (0, None));
    }

    /// The loop over a shared schedule, as the reconciler runs it; the keys it releases, in
    /// order.
    fn started(releases: &Arc<Mutex<Releases<u32>>>, armed: &Arc<Notify>) -> Arc<Mutex<Vec<u32>>> {
        let fired = Arc::new(Mutex::new(Vec::new()));
        let (releases, armed, log) = (releases.clone(), armed.clone(), fired.clone());
        tokio::spawn(async move {
            let next = || releases.lock().unwrap().next();
            let fire = |now| {
                let due = releases.lock().unwrap().due(now);
                log.lock().unwrap().extend(due);
            };
            run(&armed, next, fire).await;
        });
        fired
    }

    fn arm(releases: &Mutex<Releases<u32>>, armed: &Notify, key: u32, at: Instant) {
        if releases.lock().unwrap().arm(key, at) {
            armed.notify_one();
        }
    }

    const MS: Duration = Duration::from_millis(1);

    #[tokio::test(start_paused = true)]
    async fn a_release_fires_at_its_instant_and_an_earlier_one_wakes_the_loop() {
        let (releases, armed) = (Arc::default(), Arc::new(Notify::new()));
        let fired = started(&releases, &armed);
        let start = now();
        arm(&releases, &armed, 1, start + 10_000 * MS);
        tokio::time::sleep(5_000 * MS).await;
        // An earlier release, armed while the loop sleeps for the later one.
        arm(&releases, &armed, 2, start + 8_000 * MS);
        tokio::time::sleep(2_999 * MS).await;
        assert!(fired.lock().unwrap().is_empty(), "not before its instant");
        tokio::time::sleep(2 * MS).await;
        assert_eq!(*fired.lock().unwrap(), [2], "at its instant, though armed after a later one");
        tokio::time::sleep(1_998 * MS).await;
        assert_eq!(*fired.lock().unwrap(), [2]);
        tokio::time::sleep(2 * MS).await;
        assert_eq!(*fired.lock().unwrap(), [2, 1]);
        assert!(releases.lock().unwrap().next().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn re_arming_a_key_keeps_one_entry() {
        let (releases, armed) = (Arc::default(), Arc::new(Notify::new()));
        let fired = started(&releases, &armed);
        let start = now();
        for i in 0..1_000 {
            arm(&releases, &armed, 7, start + 60_000 * MS - i * MS);
            arm(&releases, &armed, 7, start + 60_000 * MS + i * MS);
        }
        assert_eq!(releases.lock().unwrap().len(), 1);
        tokio::time::sleep(120_000 * MS).await;
        assert_eq!(*fired.lock().unwrap(), [7], "released once");
    }

    #[tokio::test(start_paused = true)]
    async fn many_held_keys_are_one_task() {
        let (releases, armed) = (Arc::default(), Arc::new(Notify::new()));
        let fired = started(&releases, &armed);
        tokio::task::yield_now().await;
        let metrics = tokio::runtime::Handle::current().metrics();
        let tasks = metrics.num_alive_tasks();
        let start = now();
        for key in 0..10_000 {
            arm(&releases, &armed, key, start + (key % 100 + 1) * MS);
        }
        assert_eq!(metrics.num_alive_tasks(), tasks, "no task per held key");
        tokio::time::sleep(200 * MS).await;
        let fired = fired.lock().unwrap();
        assert_eq!(fired.len(), 10_000, "every key released");
        assert!(fired.windows(2).all(|w| w[0] % 100 <= w[1] % 100), "in the order of their instants");
        assert_eq!(releases.lock().unwrap().len(), 0);
    }
}
