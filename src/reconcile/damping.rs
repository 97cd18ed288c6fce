//! Fight damping: the bookkeeping that tells a heal from a fight, and a fight from a contest the
//! reconciler must stay out of. Pure: time comes in as a value; unit-tested in `damping/tests.rs`.
//!
//! - A **fight** is a patch of ours that another writer undoes within [`FIGHT_WINDOW`], the
//!   [`MAX_PATCHES_PER_HOUR`]th patch of one Ingress in an hour, or [`REWRITES`] foreign writes
//!   within the window. Each is reported once.
//! - An Ingress is **contested** after a rewrite or rate fight, or its second fight within the
//!   hour: another writer insists (another guard, a later webhook, a controller writing while
//!   the webhook is unreachable). Each heal it undoes costs a watcher up to two extra changes
//!   (18,828 changes against 13,898 without any guard, benches/results/history.md), so a
//!   contested Ingress is left alone until its writers have been quiet for twice the longest
//!   gap between their writes (within [`QUIET_MIN`] and [`HOLD_MAX`]), and never sooner than an
//!   exponential hold after its last fight.
//! - Any foreign write is left alone for [`SETTLE`] (restarted by each further one), so a
//!   controller rewriting in quick succession is recognised before we join.
//! - While some Ingress of a policy is contested, the webhook is evidently not stopping its
//!   writes: a foreign write to any of its Ingresses waits for the longer of its own quiet time
//!   and the longest of the policy's contested ones (their writers are likely this one's).
//!   Waiting [`QUIET_MIN`], or an Ingress's own quiet time, was not enough: at 10,000 Ingresses
//!   with controllers every 120 s and 60 s falling behind, each was healed (and undone) before
//!   it was contested: 3,755 heals, 94,396 DNS changes against 76,878 without a guard. The
//!   simulation in `damping/tests.rs` (200 Ingresses, 10 minutes, each write late by 0–60 s)
//!   has 189 patches and 2,263 changes against 1,996 with a flat [`QUIET_MIN`], 182 and 2,256
//!   with an Ingress's own quiet time, and 39 and 2,051 with this rule, all 39 before the
//!   policy's first contest was seen (nothing tells those from lone rogue writes).

use std::{
    collections::HashMap,
    hash::Hash,
    sync::Arc,
    time::{Duration, Instant},
};

use super::shrink::shrink;
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
    /// Judge it again at `until`; `contested` if other writers keep rewriting it; `fight` to report.
    Wait { until: Instant, contested: bool, fight: Option<Fight> },
}

/// Records kept at most: past it the eighth written longest ago is forgotten (O(1) per record
/// made), which only costs one more heal of those objects. At 120 bytes a record, boxed, beside
/// a 16-byte slot (`tests/books_memory.rs`), that is about 4.5 MiB: the [`FIGHT_WINDOW`] of
/// every patch at 200 a second (12,000), and 20,000 contested objects.
pub(crate) const MAX_RECORDS: usize = 28_672;

/// Milliseconds since the damping's base instant: a record's instants in 4 bytes, not 16.
type Ms = u32;
const MEMORY_MS: Ms = MEMORY.as_millis() as Ms;
/// Past this many milliseconds since the base (about 25 days) the base moves forward.
const REBASE_AFTER: u64 = (u32::MAX / 2) as u64;

/// The last `N` instants of some kind, oldest first, in a fixed array.
#[derive(Debug, Clone, Copy)]
struct Stamps<const N: usize> {
    at: [Ms; N],
    len: u8,
}

impl<const N: usize> Default for Stamps<N> {
    fn default() -> Self {
        Stamps { at: [0; N], len: 0 }
    }
}

impl<const N: usize> Stamps<N> {
    fn as_slice(&self) -> &[Ms] {
        &self.at[..usize::from(self.len)]
    }
    fn back(&self) -> Option<Ms> {
        self.as_slice().last().copied()
    }
    fn len(&self) -> usize {
        usize::from(self.len)
    }
    /// Appends `at`, forgetting the oldest when full.
    fn push(&mut self, at: Ms) {
        if self.len() == N {
            self.at.copy_within(1.., 0);
            self.len -= 1;
        }
        self.at[self.len()] = at;
        self.len += 1;
    }
    /// Forgets the oldest while `old` says so.
    fn drop_front_while(&mut self, old: impl Fn(Ms) -> bool) {
        let gone = self.as_slice().iter().take_while(|&&at| old(at)).count();
        let len = self.len();
        self.at.copy_within(gone..len, 0);
        self.len -= gone as u8;
    }
    fn rebase(&mut self, shift: Ms) {
        self.at.iter_mut().for_each(|at| *at = at.saturating_sub(shift));
    }
}

#[derive(Debug, Default)]
struct Record {
    /// Our recent patches, oldest first: at most [`MAX_PATCHES_PER_HOUR`] within the hour.
    patches: Stamps<MAX_PATCHES_PER_HOUR>,
    /// Foreign writes seen off canonical, oldest first: at most [`FOREIGN_KEPT`].
    foreign: Stamps<FOREIGN_KEPT>,
    /// What our last patch wrote, shared with every record that wrote the same.
    wrote: Option<Arc<[Address]>>,
    /// Foreign writes counted by a [`Cause::Rewritten`] fight already (they make one fight).
    rewrites_judged: Option<Ms>,
    last_fight: Option<Ms>,
    fights: u32,
    /// The last patch has been judged a fight already.
    judged: bool,
    contested: bool,
}

impl Record {
    fn recent(now: Ms, at: Ms) -> bool {
        now.saturating_sub(at) <= MEMORY_MS
    }

    /// The latest instant recorded: what eviction and pruning go by.
    fn last(&self) -> Option<Ms> {
        [self.patches.back(), self.foreign.back(), self.last_fight].into_iter().flatten().max()
    }

    /// The quiet time that ends a contest: twice the longest gap between the foreign writes
    /// remembered (a periodic writer is so outwaited), within [`QUIET_MIN`] and [`HOLD_MAX`].
    fn quiet(&self) -> Duration {
        let foreign = self.foreign.as_slice();
        let gap = foreign
            .iter()
            .zip(foreign.iter().skip(1))
            .map(|(a, b)| Duration::from_millis(u64::from(b.saturating_sub(*a))))
            .filter(|gap| *gap < HOLD_MAX)
            .max()
            .unwrap_or_default();
        gap.saturating_mul(2).clamp(QUIET_MIN, HOLD_MAX)
    }

    fn hold(&self) -> Duration {
        HOLD_BASE.saturating_mul(1u32 << self.fights.saturating_sub(1).min(16)).min(HOLD_MAX)
    }

    /// Which fight, if any, the state at `now` with `stored` makes.
    fn fight(&self, stored: &[Address], now: Ms) -> Option<Cause> {
        if let Some(last) = self.patches.back()
            && !self.judged
        {
            let undone = !crate::address::same_set(stored, self.wrote.as_deref().unwrap_or_default());
            if undone && u128::from(now.saturating_sub(last)) < FIGHT_WINDOW.as_millis() {
                return Some(Cause::Undone);
            }
            let hour = self.patches.as_slice().iter().filter(|&&at| Self::recent(now, at)).count();
            if hour >= MAX_PATCHES_PER_HOUR {
                return Some(Cause::Rate);
            }
        }
        let rewrites = self.rewrites(now, self.rewrites_judged);
        (!self.contested && rewrites >= REWRITES).then_some(Cause::Rewritten)
    }

    /// Foreign writes within [`FIGHT_WINDOW`] of `now`, after `since` if given.
    fn rewrites(&self, now: Ms, since: Option<Ms>) -> usize {
        self.foreign
            .as_slice()
            .iter()
            .filter(|&&at| {
                u128::from(now.saturating_sub(at)) < FIGHT_WINDOW.as_millis() && since.is_none_or(|s| at > s)
            })
            .count()
    }

    fn rebase(&mut self, shift: Ms) {
        self.patches.rebase(shift);
        self.foreign.rebase(shift);
        for at in [&mut self.rewrites_judged, &mut self.last_fight].into_iter().flatten() {
            *at = at.saturating_sub(shift);
        }
    }
}

/// Per-Ingress patch and write history of the last hour (at most [`MAX_RECORDS`]).
#[derive(Debug, Default)]
pub(crate) struct Damping<K> {
    /// Boxed: a hash table with this much churn doubles past its room (an eviction leaves
    /// tombstones, and hashbrown grows rather than rehash a table over half full), and a
    /// doubled table of 16-byte slots costs 1 MiB, one of whole records 8 MiB.
    records: HashMap<K, Box<Record>>,
    /// Per contested policy, the longest quiet time of its contested Ingresses: what a foreign
    /// write to its other Ingresses waits for. Removed when its contest ends.
    policies: HashMap<String, Duration>,
    /// The instant the records' milliseconds count from (the first one booked).
    base: Option<Instant>,
    /// The lists written lately, shared by the records that wrote them (a heal writes one
    /// canonical list per policy to every object): at most [`WROTE_KEPT`].
    wrote: Vec<Arc<[Address]>>,
}

/// Distinct written lists [`Damping`] shares at most.
const WROTE_KEPT: usize = 16;

impl<K: Eq + Hash + Clone> Damping<K> {
    /// `now` in the records' milliseconds, moving the base as needed. Rounded up, so a hold or
    /// settle delay counted from a recorded instant is never shorter than its constant.
    fn ms(&mut self, now: Instant) -> Ms {
        let base = *self.base.get_or_insert(now);
        let since = now.saturating_duration_since(base);
        let ms = since.as_millis() + u128::from(!since.subsec_nanos().is_multiple_of(1_000_000));
        if ms <= u128::from(REBASE_AFTER) {
            return ms as Ms;
        }
        // Everything older than twice the memory is forgotten anyway: count from then.
        match Ms::try_from(ms - 2 * u128::from(MEMORY_MS)) {
            Ok(shift) => {
                self.records.values_mut().for_each(|r| r.rebase(shift));
                self.base = Some(base + Duration::from_millis(u64::from(shift)));
            }
            Err(_) => {
                // Idle for weeks: every record is older than the memory.
                self.records.clear();
                self.base = Some(now);
            }
        }
        self.ms(now)
    }

    /// The instant `at` stands for.
    fn instant(&self, at: Ms) -> Instant {
        self.base.map_or_else(Instant::now, |base| base + Duration::from_millis(u64::from(at)))
    }

    /// The record of `key`, made if there is none (evicting the oldest past [`MAX_RECORDS`]).
    fn record(&mut self, key: &K) -> &mut Record {
        if !self.records.contains_key(key) && self.records.len() >= MAX_RECORDS {
            self.evict();
        }
        self.records.entry(key.clone()).or_default()
    }

    /// Forgets the eighth of the records written longest ago.
    fn evict(&mut self) {
        let mut last: Vec<Option<Ms>> = self.records.values().map(|r| r.last()).collect();
        let cut = last.len() / 8;
        let (_, &mut threshold, _) = last.select_nth_unstable(cut);
        // Exactly `cut + 1` go, however many were written in the same millisecond.
        let mut ties = cut + 1 - last.iter().filter(|&&at| at < threshold).count();
        self.records.retain(|_, r| match r.last().cmp(&threshold) {
            std::cmp::Ordering::Less => false,
            std::cmp::Ordering::Equal if ties > 0 => {
                ties -= 1;
                false
            }
            _ => true,
        });
        shrink(&mut self.records);
    }

    /// The shared copy of `list`.
    fn shared(&mut self, list: &[Address]) -> Arc<[Address]> {
        if let Some(shared) = self.wrote.iter().find(|w| ***w == *list) {
            return shared.clone();
        }
        if self.wrote.len() >= WROTE_KEPT {
            self.wrote.retain(|w| Arc::strong_count(w) > 1);
            if self.wrote.len() >= WROTE_KEPT {
                self.wrote.remove(0);
            }
        }
        let shared: Arc<[Address]> = Arc::from(list);
        self.wrote.push(shared.clone());
        shared
    }

    /// Our patch of `key` to `wrote` succeeded at `now`.
    pub(crate) fn patched(&mut self, key: &K, wrote: &[Address], now: Instant) {
        let now = self.ms(now);
        let wrote = self.shared(wrote);
        let record = self.record(key);
        record.patches.drop_front_while(|at| !Record::recent(now, at));
        record.patches.push(now);
        record.wrote = Some(wrote);
        record.judged = false;
    }

    /// Another writer changed the status of `key` off canonical at `now`.
    pub(crate) fn foreign_write(&mut self, key: &K, now: Instant) {
        let now = self.ms(now);
        self.record(key).foreign.push(now);
    }

    /// `key` of `policy` is off canonical at `now`, storing `stored`; `policy_contested` when some
    /// Ingress of its policy is. Patch it now, or wait (see the module documentation).
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
        if !self.records.contains_key(key) {
            // Never patched, never seen rewritten: stale since before we looked (start-up), or
            // the canonical value moved. Heal at once.
            return Step::Patch;
        }
        let (at, ms) = (now, self.ms(now));
        let Some(record) = self.records.get_mut(key) else { return Step::Patch };
        let now = ms;
        if record.last_fight.is_some_and(|at| !Record::recent(now, at)) {
            record.fights = 0;
            record.contested = false;
        }
        record.foreign.drop_front_while(|at| !Record::recent(now, at));
        let fight = record.fight(stored, now).inspect(|&cause| {
            record.judged = true;
            if cause == Cause::Rewritten {
                record.rewrites_judged = record.foreign.back();
            }
            record.fights = record.fights.saturating_add(1);
            record.last_fight = Some(now);
            // One undo may be a lone rogue write; with a second fight, or a second write
            // within the window, someone insists.
            if cause != Cause::Undone || record.fights >= 2 || record.rewrites(now, None) >= REWRITES {
                record.contested = true;
            }
        });
        let (last_fight, hold, last_foreign) = (record.last_fight, record.hold(), record.foreign.back());
        let (contested, quiet) = (record.contested, record.quiet());
        let mut until = at;
        if (fight.is_some() || contested)
            && let Some(last) = last_fight
        {
            until = until.max(self.instant(last) + hold);
        }
        if let Some(last) = last_foreign {
            let settle = if contested || policy_contested {
                // The contest rule at once, with the longest quiet time the policy has shown.
                let learned = self.policies.get(policy).copied().unwrap_or_default();
                if contested && quiet > learned {
                    self.policies.insert(policy.to_owned(), quiet);
                }
                quiet.max(learned)
            } else {
                SETTLE
            };
            until = until.max(self.instant(last) + settle);
        }
        let Some(record) = self.records.get_mut(key) else { return Step::Patch };
        let fight = fight.map(|cause| Fight {
            wrote: record.wrote.as_deref().unwrap_or_default().to_vec(),
            count: record.fights,
            hold: until.saturating_duration_since(at),
            cause,
        });
        if until <= at {
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
        if self.records.remove(key).is_some() {
            shrink(&mut self.records);
        }
    }

    /// Forgets every key without a patch, a foreign write or a fight within the hour.
    pub(crate) fn prune(&mut self, now: Instant) {
        if self.records.is_empty() {
            return;
        }
        let now = self.ms(now);
        self.records.retain(|_, r| r.last().is_some_and(|at| Record::recent(now, at)));
        shrink(&mut self.records);
        self.wrote.retain(|w| Arc::strong_count(w) > 1);
    }

    /// Keys with a record.
    #[cfg(any(test, feature = "test-support"))]
    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }
}

#[cfg(test)]
mod tests;
