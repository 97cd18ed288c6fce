//! The reconciler's work queue as a pure state machine: which Ingresses wait for a patch, which
//! are being patched, which changed meanwhile, and which back off after failures. The async
//! reconciler drives it and owns the timers; time comes in as a value, so the rules are tested
//! without sleeping.

use std::{
    collections::{HashMap, VecDeque},
    hash::Hash,
    time::{Duration, Instant},
};

use super::shrink::{shrink, shrink_deque};

pub(crate) const BACKOFF_BASE: Duration = Duration::from_millis(500);
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(300);

/// What is left to do once an attempt has ended ([`Queue::done`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum After {
    /// Nothing: the key is settled until it is judged again.
    Settled,
    /// The key was judged again while in flight: judge it once more now.
    Recheck,
    /// The attempt failed: judge the key again at this instant ([`Queue::release`] first).
    RetryAt(Instant),
}

/// Where a key is, besides its failure count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Nowhere: only its failures are kept.
    Idle,
    /// Waiting in `order`.
    Queued,
    /// Being attempted now; `dirty` if queued again (or held) meanwhile: judged once more when
    /// its attempt ends, so one key never has two attempts in flight.
    InFlight { dirty: bool },
    /// Its delayed retry (or a hold's release) is pending.
    BackingOff,
}

/// One key's state: 8 bytes beside its key.
#[derive(Debug, Clone, Copy)]
struct Slot {
    at: At,
    /// Consecutive failures.
    failures: u32,
}

/// One entry per key however often it is queued; one attempt in flight per key. A key
/// settled, with no failures, has no entry (and the maps shrink as they empty, [`shrink`]).
#[derive(Debug)]
pub(crate) struct Queue<K> {
    order: VecDeque<K>,
    slots: HashMap<K, Slot>,
}

impl<K> Default for Queue<K> {
    fn default() -> Self {
        Queue { order: VecDeque::new(), slots: HashMap::new() }
    }
}

impl<K: Eq + Hash + Clone> Queue<K> {
    fn at(&self, key: &K) -> At {
        self.slots.get(key).map_or(At::Idle, |slot| slot.at)
    }

    /// Sets where `key` is (and, if given, its failures); a key idle without failures leaves.
    fn put(&mut self, key: &K, at: At, failures: Option<u32>) {
        let failures = failures.unwrap_or_else(|| self.slots.get(key).map_or(0, |slot| slot.failures));
        if at == At::Idle && failures == 0 {
            if self.slots.remove(key).is_some() {
                shrink(&mut self.slots);
            }
        } else if let Some(slot) = self.slots.get_mut(key) {
            *slot = Slot { at, failures };
        } else {
            self.slots.insert(key.clone(), Slot { at, failures });
        }
    }

    /// Takes `key` out of `order` if it waits there.
    fn unqueue(&mut self, key: &K) {
        if self.at(key) == At::Queued {
            self.order.retain(|k| k != key);
            shrink_deque(&mut self.order);
            self.put(key, At::Idle, None);
        }
    }

    /// Queues `key` for an attempt; `true` if it is newly waiting (a worker is to be woken).
    /// A key already waiting or backing off is left as it is; one in flight is marked dirty.
    pub(crate) fn enqueue(&mut self, key: K) -> bool {
        match self.at(&key) {
            At::InFlight { .. } => {
                self.put(&key, At::InFlight { dirty: true }, None);
                false
            }
            At::BackingOff | At::Queued => false,
            At::Idle => {
                self.put(&key, At::Queued, None);
                self.order.push_back(key);
                true
            }
        }
    }

    /// The next key to attempt, now in flight.
    pub(crate) fn pop(&mut self) -> Option<K> {
        let key = self.order.pop_front()?;
        shrink_deque(&mut self.order);
        self.put(&key, At::InFlight { dirty: false }, None);
        Some(key)
    }

    /// Ends the attempt on `key` without its having been made (leadership lost meanwhile: the
    /// next leader judges every key anyway).
    pub(crate) fn abandon(&mut self, key: &K) {
        if matches!(self.at(key), At::InFlight { .. }) {
            self.put(key, At::Idle, None);
        }
    }

    /// Ends the attempt on `key`, made at `now`. A success clears the failure count; a failure
    /// backs the key off exponentially, from [`BACKOFF_BASE`] up to [`BACKOFF_MAX`], and the
    /// retry judges it afresh, which covers a dirty mark too.
    pub(crate) fn done(&mut self, key: K, succeeded: bool, now: Instant) -> After {
        let recheck = self.at(&key) == At::InFlight { dirty: true };
        if succeeded {
            self.put(&key, At::Idle, Some(0));
            return if recheck { After::Recheck } else { After::Settled };
        }
        let failures = self.slots.get(&key).map_or(0, |slot| slot.failures).saturating_add(1);
        let delay = BACKOFF_BASE.saturating_mul(1u32 << (failures - 1).min(16)).min(BACKOFF_MAX);
        self.put(&key, At::BackingOff, Some(failures));
        After::RetryAt(now + delay)
    }

    /// Holds `key` back (a fight, [`super::damping`]): taken out of the queue and not queued
    /// again until [`Queue::release`]; `true` if the caller is to arm the release. A key in
    /// flight is marked dirty instead, so its attempt's end judges it again; one backing off
    /// already stays as it is.
    pub(crate) fn hold(&mut self, key: &K) -> bool {
        match self.at(key) {
            At::InFlight { .. } => {
                self.put(key, At::InFlight { dirty: true }, None);
                false
            }
            At::BackingOff => false,
            At::Queued | At::Idle => {
                self.unqueue(key);
                self.put(key, At::BackingOff, None);
                true
            }
        }
    }

    /// Forgets everything about `key`: deleted, or dropped by a re-list. An attempt in flight
    /// still ends ([`Queue::done`]), and a pending release still comes ([`Queue::release`]).
    pub(crate) fn forget(&mut self, key: &K) {
        self.unqueue(key);
        let at = match self.at(key) {
            At::InFlight { .. } => At::InFlight { dirty: false },
            at => at,
        };
        self.put(key, at, Some(0));
    }

    /// The backoff of `key` is over: it may be queued again.
    pub(crate) fn release(&mut self, key: &K) {
        if self.at(key) == At::BackingOff {
            self.put(key, At::Idle, None);
        }
    }

    /// Forgets the failures of `key`: it is fine now, or gone.
    pub(crate) fn clear_failures(&mut self, key: &K) {
        if self.slots.contains_key(key) {
            self.put(key, self.at(key), Some(0));
        }
    }

    /// Keys waiting for an attempt.
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    /// Keys with an entry (waiting, in flight, backing off, or with failures).
    pub(crate) fn tracked(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(q: &mut Queue<&'static str>) -> Vec<&'static str> {
        std::iter::from_fn(|| q.pop()).collect()
    }

    #[test]
    fn enqueue_dedups_and_keeps_order() {
        let mut q = Queue::default();
        assert!(q.enqueue("a"));
        assert!(q.enqueue("b"));
        assert!(!q.enqueue("a"), "already waiting");
        assert_eq!(q.len(), 2);
        assert_eq!(drain(&mut q), ["a", "b"]);
        assert_eq!(q.len(), 0);
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn judged_in_flight_is_rechecked_once() {
        let now = Instant::now();
        let mut q = Queue::default();
        q.enqueue("a");
        assert_eq!(q.pop(), Some("a"));
        assert!(!q.enqueue("a"), "in flight: marked dirty, not queued beside itself");
        assert!(!q.enqueue("a"));
        assert_eq!(q.pop(), None, "never two attempts at once");
        assert_eq!(q.done("a", true, now), After::Recheck);
        assert!(q.enqueue("a"), "the recheck queues it again");
        assert_eq!(drain(&mut q), ["a"], "once");
        assert_eq!(q.done("a", true, now), After::Settled, "the dirty mark was used up");
    }

    #[test]
    fn failures_back_off_exponentially_up_to_the_max() {
        let now = Instant::now();
        let mut q = Queue::default();
        let mut delays = Vec::new();
        for _ in 0..12 {
            assert!(q.enqueue("a"));
            assert_eq!(q.pop(), Some("a"));
            let After::RetryAt(at) = q.done("a", false, now) else { panic!("a failure is retried") };
            delays.push(at - now);
            assert!(!q.enqueue("a"), "backing off: not queued");
            assert_eq!(q.pop(), None);
            q.release(&"a");
        }
        let ms = |ms| Duration::from_millis(ms);
        assert_eq!(delays[..6], [ms(500), ms(1000), ms(2000), ms(4000), ms(8000), ms(16_000)]);
        assert!(delays.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(delays[9], Duration::from_secs(256));
        assert_eq!(delays[10..], [BACKOFF_MAX; 2], "bounded");
    }

    #[test]
    fn success_and_clearing_reset_the_backoff() {
        let now = Instant::now();
        let fail = |q: &mut Queue<&'static str>| {
            q.enqueue("a");
            q.pop();
            let after = q.done("a", false, now);
            q.release(&"a");
            after
        };
        let mut q = Queue::default();
        fail(&mut q);
        assert_eq!(fail(&mut q), After::RetryAt(now + 2 * BACKOFF_BASE));
        q.enqueue("a");
        q.pop();
        assert_eq!(q.done("a", true, now), After::Settled);
        assert_eq!(fail(&mut q), After::RetryAt(now + BACKOFF_BASE), "success cleared the count");
        q.clear_failures(&"a");
        assert_eq!(fail(&mut q), After::RetryAt(now + BACKOFF_BASE), "so does a fine judgement");
    }

    #[test]
    fn a_failure_supersedes_the_dirty_mark() {
        let now = Instant::now();
        let mut q = Queue::default();
        q.enqueue("a");
        q.pop();
        q.enqueue("a");
        assert_eq!(q.done("a", false, now), After::RetryAt(now + BACKOFF_BASE), "the retry judges it afresh");
        q.release(&"a");
        q.enqueue("a");
        q.pop();
        assert_eq!(q.done("a", true, now), After::Settled, "no recheck left over");
    }

    #[test]
    fn abandoned_keys_can_be_queued_again() {
        let mut q = Queue::default();
        q.enqueue("a");
        q.pop();
        q.enqueue("a");
        q.abandon(&"a");
        assert!(q.enqueue("a"));
        assert_eq!(drain(&mut q), ["a"]);
    }

    #[test]
    fn a_held_key_waits_for_its_release() {
        let mut q = Queue::default();
        q.enqueue("a");
        q.enqueue("b");
        assert!(q.hold(&"a"), "taken out of the queue");
        assert!(!q.hold(&"a"), "held already");
        assert!(!q.enqueue("a"));
        assert_eq!(drain(&mut q), ["b"]);
        assert!(!q.hold(&"b"), "in flight: marked dirty");
        assert_eq!(q.done("b", true, Instant::now()), After::Recheck);
        q.release(&"a");
        assert!(q.enqueue("a"));
        q.forget(&"a");
        assert_eq!(q.len(), 0, "forgotten keys leave the queue");
    }

    #[test]
    fn keys_are_independent() {
        let now = Instant::now();
        let mut q = Queue::default();
        q.enqueue("a");
        q.enqueue("b");
        assert_eq!(q.pop(), Some("a"));
        assert!(matches!(q.done("a", false, now), After::RetryAt(_)));
        assert!(q.enqueue("c"));
        assert_eq!(drain(&mut q), ["b", "c"], "a backs off alone");
    }
}
