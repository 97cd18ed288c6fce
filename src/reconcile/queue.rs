//! The reconciler's work queue as a pure state machine (time comes in as a value): which
//! objects wait for a patch, are being patched, changed meanwhile, or back off after failures.
//!
//! At most [`ORDER_MAX`] keys wait in line, whatever the number of objects waiting: a key queued
//! past that costs nothing here (the drift says it wants a patch), and the line is refilled from
//! the cache when it runs dry ([`Queue::refill`]), resuming where the last scan stopped.

use std::{
    collections::{HashMap, VecDeque},
    hash::Hash,
    time::{Duration, Instant},
};

use super::shrink::{shrink, shrink_deque};
use crate::sources::follow::fingerprint::{Fingerprints, Print};

pub(crate) const BACKOFF_BASE: Duration = Duration::from_millis(500);
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(300);
/// Keys waiting in line at most; the rest of those queued wait in the cache. A refill scans
/// the cache once per this many patches, so at the default 200 per second about every 20 s.
pub(crate) const ORDER_MAX: usize = 4096;

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

/// One key's state: 8 bytes beside its fingerprint.
#[derive(Debug, Clone, Copy)]
struct Slot {
    at: At,
    /// Consecutive failures.
    failures: u32,
}

/// One slot per key however often it is queued; none for a key settled without failures.
#[derive(Debug, Default)]
pub(crate) struct Queue<K> {
    order: VecDeque<K>,
    slots: HashMap<Print, Slot>,
    prints: Fingerprints,
    /// A key was queued past a full line, and no refill has since scanned every key.
    overflowed: bool,
    /// Where in the cache the last refill stopped.
    scan_from: usize,
}

impl<K: Eq + Hash + Clone> Queue<K> {
    fn at(&self, print: Print) -> At {
        self.slots.get(&print).map_or(At::Idle, |slot| slot.at)
    }

    /// Sets where the key of `print` is (and its failures, if given); idle without failures: no slot.
    fn put(&mut self, print: Print, at: At, failures: Option<u32>) {
        let failures = failures.unwrap_or_else(|| self.slots.get(&print).map_or(0, |slot| slot.failures));
        if at == At::Idle && failures == 0 {
            if self.slots.remove(&print).is_some() {
                shrink(&mut self.slots);
            }
        } else {
            self.slots.insert(print, Slot { at, failures });
        }
    }

    /// Takes `key` out of line if it waits there.
    fn unqueue(&mut self, key: &K, print: Print) {
        if self.at(print) == At::Queued {
            self.order.retain(|k| k != key);
            shrink_deque(&mut self.order);
            self.put(print, At::Idle, None);
        }
    }

    /// Queues `key` for an attempt; `true` if it is newly waiting (a worker is to be woken).
    /// A key already waiting or backing off is left as it is; one in flight is marked dirty;
    /// one past a full line is left to the next [`Queue::refill`].
    pub(crate) fn enqueue(&mut self, key: K) -> bool {
        let print = self.prints.of(&key);
        match self.at(print) {
            At::InFlight { .. } => {
                self.put(print, At::InFlight { dirty: true }, None);
                false
            }
            At::BackingOff | At::Queued => false,
            At::Idle if self.order.len() >= ORDER_MAX => {
                self.overflowed = true;
                true
            }
            At::Idle => {
                self.put(print, At::Queued, None);
                self.order.push_back(key);
                true
            }
        }
    }

    /// The line is empty while keys queued past it may wait: [`Queue::refill`] first.
    pub(crate) fn wants_refill(&self) -> bool {
        self.order.is_empty() && self.overflowed
    }

    /// Puts the idle keys that `waits` says want a patch back in line, up to [`ORDER_MAX`], from
    /// `keys` (every key the cache holds, in an order that must not change between refills for
    /// the scan to resume fairly).
    pub(crate) fn refill<'a>(&mut self, keys: impl ExactSizeIterator<Item = &'a K> + Clone, waits: impl Fn(&K) -> bool)
    where
        K: 'a,
    {
        let n = keys.len();
        let start = if n == 0 { 0 } else { self.scan_from % n };
        let mut scanned = 0;
        for key in keys.clone().skip(start).chain(keys.take(start)) {
            if self.order.len() >= ORDER_MAX {
                break;
            }
            scanned += 1;
            let print = self.prints.of(key);
            if self.at(print) == At::Idle && waits(key) {
                self.put(print, At::Queued, None);
                self.order.push_back(key.clone());
            }
        }
        self.scan_from = start + scanned;
        if scanned == n {
            self.overflowed = false;
        }
    }

    /// The next key to attempt, now in flight.
    pub(crate) fn pop(&mut self) -> Option<K> {
        let key = self.order.pop_front()?;
        shrink_deque(&mut self.order);
        self.put(self.prints.of(&key), At::InFlight { dirty: false }, None);
        Some(key)
    }

    /// Ends the attempt on `key` unmade (leadership lost: the next leader judges every key).
    pub(crate) fn abandon(&mut self, key: &K) {
        let print = self.prints.of(key);
        if matches!(self.at(print), At::InFlight { .. }) {
            self.put(print, At::Idle, None);
        }
    }

    /// Ends the attempt on `key`, made at `now`. A success clears the failure count; a failure
    /// backs the key off exponentially, from [`BACKOFF_BASE`] up to [`BACKOFF_MAX`], and the
    /// retry judges it afresh, which covers a dirty mark too.
    pub(crate) fn done(&mut self, key: K, succeeded: bool, now: Instant) -> After {
        let print = self.prints.of(&key);
        let recheck = self.at(print) == At::InFlight { dirty: true };
        if succeeded {
            self.put(print, At::Idle, Some(0));
            return if recheck { After::Recheck } else { After::Settled };
        }
        let failures = self.slots.get(&print).map_or(0, |slot| slot.failures).saturating_add(1);
        let delay = BACKOFF_BASE.saturating_mul(1u32 << (failures - 1).min(16)).min(BACKOFF_MAX);
        self.put(print, At::BackingOff, Some(failures));
        After::RetryAt(now + delay)
    }

    /// Holds `key` back (a fight, [`super::damping`]) until [`Queue::release`]; `true` if the
    /// caller is to arm the release. A key in flight is marked dirty instead; one backing off
    /// stays as it is.
    pub(crate) fn hold(&mut self, key: &K) -> bool {
        let print = self.prints.of(key);
        match self.at(print) {
            At::InFlight { .. } => {
                self.put(print, At::InFlight { dirty: true }, None);
                false
            }
            At::BackingOff => false,
            At::Queued | At::Idle => {
                self.unqueue(key, print);
                self.put(print, At::BackingOff, None);
                true
            }
        }
    }

    /// Forgets everything about `key`: deleted, or dropped by a re-list. An attempt in flight
    /// still ends ([`Queue::done`]), and a pending release still comes ([`Queue::release`]).
    pub(crate) fn forget(&mut self, key: &K) {
        let print = self.prints.of(key);
        self.unqueue(key, print);
        let at = match self.at(print) {
            At::InFlight { .. } => At::InFlight { dirty: false },
            at => at,
        };
        self.put(print, at, Some(0));
    }

    /// The backoff of `key` is over: it may be queued again.
    pub(crate) fn release(&mut self, key: &K) {
        let print = self.prints.of(key);
        if self.at(print) == At::BackingOff {
            self.put(print, At::Idle, None);
        }
    }

    /// Forgets the failures of `key`: it is fine now, or gone.
    pub(crate) fn clear_failures(&mut self, key: &K) {
        let print = self.prints.of(key);
        if self.slots.contains_key(&print) {
            self.put(print, self.at(print), Some(0));
        }
    }

    /// Keys waiting in line (those queued past it wait in the cache).
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    /// Keys with a slot (waiting, in flight, backing off, or with failures).
    #[cfg(any(test, feature = "test-support"))]
    pub(crate) fn tracked(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn drain<K: Eq + Hash + Clone>(q: &mut Queue<K>) -> Vec<K> {
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
    fn past_the_line_keys_wait_in_the_cache_and_each_gets_its_turn() {
        let keys: Vec<String> = (0..ORDER_MAX * 2 + 10).map(|i| format!("k{i}")).collect();
        // What the drift says wants a patch.
        let mut waiting: HashSet<String> = keys.iter().cloned().collect();
        let mut q = Queue::default();
        for key in &keys {
            assert!(q.enqueue(key.clone()), "newly waiting, in line or in the cache");
        }
        assert_eq!((q.len(), q.tracked()), (ORDER_MAX, ORDER_MAX), "past the line a key costs nothing here");
        let mut popped = Vec::new();
        loop {
            if q.wants_refill() {
                q.refill(keys.iter(), |k| waiting.contains(k));
            }
            let Some(key) = q.pop() else { break };
            assert_eq!(q.done(key.clone(), true, Instant::now()), After::Settled);
            waiting.remove(&key);
            popped.push(key);
        }
        popped.sort();
        let mut want = keys.clone();
        want.sort();
        assert_eq!(popped, want, "every key once");
        assert_eq!((q.len(), q.tracked(), q.wants_refill()), (0, 0, false));
    }

    #[test]
    fn a_refill_takes_idle_keys_that_wait_and_a_full_round_ends_the_overflow() {
        let keys: Vec<String> = (0..ORDER_MAX + 3).map(|i| format!("k{i}")).collect();
        let mut q = Queue::default();
        keys.iter().for_each(|k| _ = q.enqueue(k.clone()));
        let [a, b, c] = [&keys[ORDER_MAX], &keys[ORDER_MAX + 1], &keys[ORDER_MAX + 2]];
        assert!(q.hold(a), "a key past the line is held like a queued one");
        let mut waiting: HashSet<&String> = keys.iter().collect();
        waiting.remove(b);
        q.forget(b);
        (0..ORDER_MAX).for_each(|_| _ = q.pop().map(|k| q.done(k, true, Instant::now())));
        keys[..ORDER_MAX].iter().for_each(|k| _ = waiting.remove(k));
        assert!(q.wants_refill());
        // `a` backs off, `b` no longer waits, the cache no longer holds `c`: nothing to take,
        // and the round ends the overflow instead of scanning for it at every pop.
        q.refill(keys[..=ORDER_MAX + 1].iter(), |k| waiting.contains(k));
        assert!(!q.wants_refill());
        assert_eq!((q.len(), q.pop()), (0, None));
        q.release(a);
        assert!(q.enqueue(a.clone()) && q.enqueue(c.clone()));
        assert_eq!(drain(&mut q).len(), 2);
    }

    #[test]
    fn a_refill_resumes_where_the_last_stopped() {
        let keys: Vec<String> = (0..ORDER_MAX * 3).map(|i| format!("k{i}")).collect();
        let others: Vec<String> = (0..ORDER_MAX).map(|i| format!("other{i}")).collect();
        let mut q = Queue::default();
        let settle = |q: &mut Queue<String>| drain(q).into_iter().for_each(|k| _ = q.done(k, true, Instant::now()));
        let mut firsts = Vec::new();
        for _ in 0..3 {
            // The line full of others, every key of the cache waits (again): a scan from the
            // start would take the same ones every time.
            others.iter().for_each(|k| _ = q.enqueue(k.clone()));
            keys.iter().for_each(|k| _ = q.enqueue(k.clone()));
            settle(&mut q);
            assert!(q.wants_refill());
            q.refill(keys.iter(), |_| true);
            firsts.push(q.order.front().cloned());
            settle(&mut q);
        }
        assert_eq!(firsts, [Some(keys[0].clone()), Some(keys[ORDER_MAX].clone()), Some(keys[2 * ORDER_MAX].clone())]);
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
