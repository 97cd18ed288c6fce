//! The reconciler's per-object bookkeeping of one kind, and the one rule that moves a judged
//! object between its parts ([`Books::judged`]). Pure: time comes in as a value, what the glue
//! is to do goes out as [`Effects`]. All but the queue's line and the release schedule is keyed
//! by the key's [`fingerprint`](crate::sources::follow::fingerprint), not a copy of it.

use std::{hash::Hash, time::Instant};

use super::{
    damping::{Damping, Fight, Step},
    drift::Drift,
    fights::FightLog,
    judge::Judgement,
    queue::Queue,
    release::Releases,
};
use crate::{
    address::Address,
    sources::follow::fingerprint::{Fingerprints, Print},
};

/// Which gauge a count is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Gauge {
    /// `drift_objects`.
    Drift,
    /// `reconcile_contested_ingresses`.
    Contested,
}

/// What the caller of [`Books::judged`] is to do.
#[derive(Debug, Default)]
pub(super) struct Effects {
    /// A key was newly queued: wake a worker.
    pub(super) wake: bool,
    /// A release earlier than all pending ones was armed: wake the release timer.
    pub(super) armed: bool,
    /// A fight to count, and whether to log it in full ([`FightLog`]).
    pub(super) fight: Option<(Fight, bool)>,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub(super) struct Books<K> {
    pub(super) drift: Drift<Print>,
    /// The keys held back because other writers keep rewriting them, by policy.
    pub(super) contested: Drift<Print>,
    /// The keys to patch.
    pub(super) queue: Queue<K>,
    /// Our recent patches and others' writes per key, which tell a heal from a fight.
    pub(super) damping: Damping<Print>,
    /// When the keys held back or backing off are let queue again.
    pub(super) releases: Releases<K>,
    /// How many fight WARN lines each policy has had lately.
    pub(super) fights: FightLog,
    prints: Fingerprints,
}

impl<K: Eq + Hash + Ord + Clone> Books<K> {
    /// Books `judgement` of `key`, storing `seen`; `foreign`: another writer just changed it;
    /// `leading`: only the leader reports fights. `gauge` is told each policy count that moved.
    #[allow(clippy::too_many_arguments, reason = "one judgement's inputs, each a value")]
    pub(super) fn judged(
        &mut self,
        key: &K,
        judgement: &Judgement,
        seen: &[Address],
        foreign: bool,
        leading: bool,
        now: Instant,
        gauge: &mut dyn FnMut(Gauge, &str, i64),
    ) -> Effects {
        let mut effects = Effects::default();
        let print = &self.prints.of(key);
        let &Judgement::Drift { ref policy, patch } = judgement else {
            self.queue.clear_failures(key);
            self.damping.fine(print);
            self.drift.set(print, None, |p, n| gauge(Gauge::Drift, p, n));
            self.contested.set(print, None, |p, n| gauge(Gauge::Contested, p, n));
            return effects;
        };
        if patch {
            if foreign {
                self.damping.foreign_write(print, now);
            }
            let policy_contested = self.contested.count(policy) > 0;
            match self.damping.step(print, seen, policy, policy_contested, now) {
                Step::Patch => self.contested.set(print, None, |p, n| gauge(Gauge::Contested, p, n)),
                Step::Wait { until, contested, fight } => {
                    if let Some(fight) = fight.filter(|_| leading) {
                        effects.fight = Some((fight, self.fights.observe(policy, now)));
                    }
                    if self.queue.hold(key) {
                        effects.armed = self.releases.arm(key.clone(), until);
                    }
                    let contested = contested.then_some(policy.as_str());
                    self.contested.set(print, contested, |p, n| gauge(Gauge::Contested, p, n));
                    self.drift.mark(print, Some(policy), true, |p, n| gauge(Gauge::Drift, p, n));
                    return effects;
                }
            }
        }
        self.drift.mark(print, Some(policy), patch, |p, n| gauge(Gauge::Drift, p, n));
        effects.wake = patch && self.queue.enqueue(key.clone());
        effects
    }

    /// Forgets a key that is gone (deleted, or not returned by a re-list).
    pub(super) fn forget(&mut self, key: &K, gauge: &mut dyn FnMut(Gauge, &str, i64)) {
        let print = &self.prints.of(key);
        self.queue.forget(key);
        self.damping.forget(print);
        self.drift.set(print, None, |p, n| gauge(Gauge::Drift, p, n));
        self.contested.set(print, None, |p, n| gauge(Gauge::Contested, p, n));
    }

    /// Refills the queue's line from the cache's `keys` that the drift says are to be patched.
    pub(super) fn refill<'a>(&mut self, keys: impl ExactSizeIterator<Item = &'a K> + Clone)
    where
        K: 'a,
    {
        let (drift, prints) = (&self.drift, &self.prints);
        self.queue.refill(keys, |key| drift.patches(&prints.of(key)));
    }

    /// Our patch of `key` to `wrote` succeeded at `now` ([`Damping::patched`]).
    pub(super) fn patched(&mut self, key: &K, wrote: &[Address], now: Instant) {
        self.damping.patched(&self.prints.of(key), wrote, now);
    }
}
