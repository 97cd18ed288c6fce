//! Fight damping: the bookkeeping that tells a heal from a fight, and a fight from a contest the
//! reconciler must stay out of. Pure: time comes in as a value; unit-tested in `damping/tests.rs`.
//!
//! - A **fight** is a patch of ours that another writer undoes within [`FIGHT_WINDOW`], the
//!   [`MAX_PATCHES_PER_HOUR`]th patch of one Ingress in an hour, or [`REWRITES`] foreign writes
//!   within the window (others keep rewriting before we joined). Each is reported once.
//! - An Ingress is **contested** after a rewrite or rate fight, or its second fight within the
//!   hour: some other writer insists on its value (another guard, a webhook after ours, a
//!   controller writing while the API server cannot reach the webhook). Every heal the other
//!   writer undoes costs a watcher up to two extra changes, so joining made the reconciler a
//!   third fighter (18,828 changes against 13,898 without any guard, BENCHMARKS.md). A contested
//!   Ingress is left alone until the other writers have been quiet for a quiet time (at least
//!   [`QUIET_MIN`], twice the longest gap seen between their writes, at most [`HOLD_MAX`]),
//!   and never sooner than an exponential hold after its last fight.
//! - Any foreign write is left alone for [`SETTLE`] first (restarted by each further one), so a
//!   controller rewriting in quick succession is recognised before we join. A lone rogue write
//!   in a quiet policy is so healed [`SETTLE`] after it is seen (plus the patch rate).
//! - While some Ingress of the policy is contested, the webhook is evidently not stopping writes
//!   for that policy, and every foreign write to any of its Ingresses is judged by the contest
//!   rule at once: it waits for the longer of its own quiet time and the longest quiet time of
//!   the policy's contested Ingresses (learned per policy, forgotten when its contest ends),
//!   so at least [`QUIET_MIN`], at most [`HOLD_MAX`]. The writers that contest some of a
//!   policy's Ingresses are most likely the ones writing the rest (one controller per class),
//!   so their pace is the better guess; a lone rogue write there is still healed, after at most
//!   [`HOLD_MAX`]. Waiting [`QUIET_MIN`] instead, or an Ingress's own quiet time once it has two
//!   writes, was not enough: at 10,000 Ingresses with controllers every 120 s and 60 s falling
//!   behind (BENCHMARKS.md), their gaps often exceed a minute, and each Ingress was healed (and
//!   undone) before it was itself contested: 3,755 heals, 94,396 DNS changes against 76,878
//!   without a guard. The simulation in `damping/tests.rs` (200 Ingresses, 10 minutes, each
//!   write late by 0–60 s) has 189 patches and 2,263 changes against 1,996 with a flat
//!   [`QUIET_MIN`], 182 and 2,256 with an Ingress's own quiet time, and 39 and 2,051 with this
//!   rule, all 39 before the policy's first contest was seen: from a cold start nothing can tell
//!   those first writes from lone rogue ones, and each heal costs a watcher at least one change.

use std::{
    collections::{HashMap, VecDeque},
    hash::Hash,
    time::{Duration, Instant},
};

use crate::address::Address;

/// A patch undone sooner than this after it was made is a fight; so are [`REWRITES`] foreign
/// writes within it.
pub(crate) const FIGHT_WINDOW: Duration = Duration::from_secs(60);
/// Patches of one Ingress within an hour beyond which every further one is a fight.
pub(crate) const MAX_PATCHES_PER_HOUR: usize = 10;
/// The hold after the first fight, doubled with each further one up to [`HOLD_MAX`].
pub(crate) const HOLD_BASE: Duration = Duration::from_secs(1);
pub(crate) const HOLD_MAX: Duration = Duration::from_secs(600);
/// How long a foreign write is left alone before it is healed, restarted by each further one.
pub(crate) const SETTLE: Duration = Duration::from_secs(2);
/// The least quiet time (no foreign write) that ends a contest; also the settle delay of a
/// foreign write while another Ingress of the policy is contested.
pub(crate) const QUIET_MIN: Duration = Duration::from_secs(60);
/// Foreign writes within [`FIGHT_WINDOW`] that make a contest.
pub(crate) const REWRITES: usize = 2;
/// Foreign writes remembered per Ingress (their gaps give the quiet time).
const FOREIGN_KEPT: usize = 8;
/// Fights and writes are forgotten after this long.
const MEMORY: Duration = Duration::from_secs(3600);

/// What made a fight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// Our patch was undone within [`FIGHT_WINDOW`].
    Undone,
    /// The [`MAX_PATCHES_PER_HOUR`]th patch within the hour.
    Rate,
    /// [`REWRITES`] foreign writes within [`FIGHT_WINDOW`], whether we patched between or not.
    Rewritten,
}

impl Cause {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Cause::Undone => "undone within a minute",
            Cause::Rate => "patch rate",
            Cause::Rewritten => "rewritten twice within a minute",
        }
    }
}

/// A fight to report, once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fight {
    /// What our last patch wrote (empty if we never patched this Ingress).
    pub(crate) wrote: Vec<Address>,
    /// Fights over this Ingress within the hour, this one included.
    pub(crate) count: u32,
    /// How long the Ingress is left alone from now, as it stands (further writes extend it).
    pub(crate) hold: Duration,
    pub(crate) cause: Cause,
}

/// What to do with an Ingress seen off canonical ([`Damping::step`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Patch it now.
    Patch,
    /// Leave it alone and judge it again at `until`; `contested` if other writers keep
    /// rewriting it; `fight` to report.
    Wait { until: Instant, contested: bool, fight: Option<Fight> },
}

#[derive(Debug, Default)]
struct Record {
    /// Our recent patches, oldest first: at most [`MAX_PATCHES_PER_HOUR`] within the hour.
    patches: VecDeque<Instant>,
    wrote: Vec<Address>,
    /// The last patch has been judged a fight already.
    judged: bool,
    /// Foreign writes seen off canonical, oldest first: at most [`FOREIGN_KEPT`].
    foreign: VecDeque<Instant>,
    /// Foreign writes counted by a [`Cause::Rewritten`] fight already (they make one fight).
    rewrites_judged: Option<Instant>,
    contested: bool,
    fights: u32,
    last_fight: Option<Instant>,
}

impl Record {
    fn recent(now: Instant, at: Instant) -> bool {
        now.saturating_duration_since(at) <= MEMORY
    }

    /// The quiet time that ends a contest: twice the longest gap between the foreign writes
    /// remembered (a periodic writer is so outwaited), within [`QUIET_MIN`] and [`HOLD_MAX`].
    fn quiet(&self) -> Duration {
        let gap = self
            .foreign
            .iter()
            .zip(self.foreign.iter().skip(1))
            .map(|(a, b)| b.saturating_duration_since(*a))
            .filter(|gap| *gap < HOLD_MAX)
            .max()
            .unwrap_or_default();
        gap.saturating_mul(2).clamp(QUIET_MIN, HOLD_MAX)
    }

    fn hold(&self) -> Duration {
        HOLD_BASE.saturating_mul(1u32 << self.fights.saturating_sub(1).min(16)).min(HOLD_MAX)
    }

    /// Which fight, if any, the state at `now` with `stored` makes.
    fn fight(&self, stored: &[Address], now: Instant) -> Option<Cause> {
        if let Some(&last) = self.patches.back()
            && !self.judged
        {
            let undone = !crate::address::same_set(stored, &self.wrote);
            if undone && now.saturating_duration_since(last) < FIGHT_WINDOW {
                return Some(Cause::Undone);
            }
            let hour = self.patches.iter().filter(|&&at| Self::recent(now, at)).count();
            if hour >= MAX_PATCHES_PER_HOUR {
                return Some(Cause::Rate);
            }
        }
        let rewrites = self.rewrites(now, self.rewrites_judged);
        (!self.contested && rewrites >= REWRITES).then_some(Cause::Rewritten)
    }

    /// Foreign writes within [`FIGHT_WINDOW`] of `now`, after `since` if given.
    fn rewrites(&self, now: Instant, since: Option<Instant>) -> usize {
        self.foreign
            .iter()
            .filter(|&&at| now.saturating_duration_since(at) < FIGHT_WINDOW && since.is_none_or(|s| at > s))
            .count()
    }
}

/// Per-Ingress patch and write history, for the keys the reconciler has patched or seen
/// written by others within the hour.
#[derive(Debug)]
pub(crate) struct Damping<K> {
    records: HashMap<K, Record>,
    /// Per contested policy, the longest quiet time of its contested Ingresses: what every
    /// foreign write to its other Ingresses waits for. One entry per policy, removed when its
    /// contest ends.
    policies: HashMap<String, Duration>,
}

impl<K> Default for Damping<K> {
    fn default() -> Self {
        Damping { records: HashMap::new(), policies: HashMap::new() }
    }
}

impl<K: Eq + Hash + Clone> Damping<K> {
    /// Our patch of `key` to `wrote` succeeded at `now`.
    pub(crate) fn patched(&mut self, key: &K, wrote: &[Address], now: Instant) {
        let record = self.records.entry(key.clone()).or_default();
        while record.patches.front().is_some_and(|&at| !Record::recent(now, at)) {
            record.patches.pop_front();
        }
        if record.patches.len() >= MAX_PATCHES_PER_HOUR {
            record.patches.pop_front();
        }
        record.patches.push_back(now);
        wrote.clone_into(&mut record.wrote);
        record.judged = false;
    }

    /// The watch saw another writer change the status of `key` to a value off canonical at `now`.
    pub(crate) fn foreign_write(&mut self, key: &K, now: Instant) {
        let record = self.records.entry(key.clone()).or_default();
        if record.foreign.len() >= FOREIGN_KEPT {
            record.foreign.pop_front();
        }
        record.foreign.push_back(now);
    }

    /// `key` of `policy` is seen off canonical at `now`, storing `stored`; `policy_contested`
    /// when some Ingress of its policy is contested. Patch it now, or wait (see the module
    /// documentation).
    pub(crate) fn step(
        &mut self,
        key: &K,
        stored: &[Address],
        policy: &str,
        policy_contested: bool,
        now: Instant,
    ) -> Step {
        if !policy_contested {
            self.policies.remove(policy);
        }
        let Some(record) = self.records.get_mut(key) else {
            // Never patched, never seen rewritten: stale since before we looked (start-up), or
            // the canonical value moved. Heal at once.
            return Step::Patch;
        };
        if record.last_fight.is_some_and(|at| !Record::recent(now, at)) {
            record.fights = 0;
            record.contested = false;
        }
        while record.foreign.front().is_some_and(|&at| !Record::recent(now, at)) {
            record.foreign.pop_front();
        }
        let fight = record.fight(stored, now).inspect(|&cause| {
            record.judged = true;
            if cause == Cause::Rewritten {
                record.rewrites_judged = record.foreign.back().copied();
            }
            record.fights = record.fights.saturating_add(1);
            record.last_fight = Some(now);
            // One undo may be a lone rogue write; with a second fight, or a second write
            // within the window, someone insists.
            if cause != Cause::Undone || record.fights >= 2 || record.rewrites(now, None) >= REWRITES {
                record.contested = true;
            }
        });
        let mut until = now;
        if (fight.is_some() || record.contested)
            && let Some(at) = record.last_fight
        {
            until = until.max(at + record.hold());
        }
        if let Some(&at) = record.foreign.back() {
            let settle = if record.contested || policy_contested {
                // The webhook is evidently not stopping this policy's writes: judge the write by
                // the contest rule at once, with the longest quiet time the policy's contested
                // Ingresses have shown (their writers are likely this one's too).
                let quiet = record.quiet();
                let learned = self.policies.get(policy).copied().unwrap_or_default();
                if record.contested && quiet > learned {
                    self.policies.insert(policy.to_owned(), quiet);
                }
                quiet.max(learned)
            } else {
                SETTLE
            };
            until = until.max(at + settle);
        }
        let fight = fight.map(|cause| Fight {
            wrote: record.wrote.clone(),
            count: record.fights,
            hold: until.saturating_duration_since(now),
            cause,
        });
        if until <= now {
            // Waited out: the other writers have been quiet long enough. Try once more; a new
            // undo makes it contested again, with a longer hold.
            record.contested = false;
            return Step::Patch;
        }
        Step::Wait { until, contested: record.contested, fight }
    }

    /// `key` is canonical again: whatever contest there was is over.
    pub(crate) fn fine(&mut self, key: &K) {
        if let Some(record) = self.records.get_mut(key) {
            record.contested = false;
        }
    }

    /// Forgets `key` (deleted, or dropped by a re-list).
    pub(crate) fn forget(&mut self, key: &K) {
        self.records.remove(key);
    }

    /// Forgets every key without a patch, a foreign write or a fight within the hour, so the
    /// map holds only the Ingresses written lately.
    pub(crate) fn prune(&mut self, now: Instant) {
        self.records.retain(|_, r| {
            let recent = |at: Instant| Record::recent(now, at);
            r.patches.back().is_some_and(|&at| recent(at))
                || r.foreign.back().is_some_and(|&at| recent(at))
                || r.last_fight.is_some_and(recent)
        });
    }

    /// Keys with a record.
    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }
}

#[cfg(test)]
mod tests;
