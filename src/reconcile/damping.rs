//! Fight damping: the bookkeeping that tells a heal from a fight. A patch of ours that another
//! writer undoes within [`FIGHT_WINDOW`], or the [`MAX_PATCHES_PER_HOUR`]th patch of one Ingress
//! in an hour, means some other writer insists on its value (another guard, a webhook after
//! ours, a controller writing while the API server cannot reach the webhook); rewriting at once
//! would make the reconciler a third fighter and triple the flapping external-dns sees. So the
//! Ingress is held back exponentially, from [`HOLD_BASE`] to [`HOLD_MAX`], and the fight is
//! reported once per undone patch. Pure: time comes in as a value.

use std::{
    collections::{HashMap, VecDeque},
    hash::Hash,
    time::{Duration, Instant},
};

use crate::address::Address;

/// A patch undone sooner than this after it was made is a fight.
pub(crate) const FIGHT_WINDOW: Duration = Duration::from_secs(60);
/// Patches of one Ingress within an hour beyond which every further one is a fight.
pub(crate) const MAX_PATCHES_PER_HOUR: usize = 10;
/// The hold after the first fight, doubled with each further one up to [`HOLD_MAX`].
pub(crate) const HOLD_BASE: Duration = Duration::from_secs(1);
pub(crate) const HOLD_MAX: Duration = Duration::from_secs(600);
/// Fights are forgotten after this long without one.
const MEMORY: Duration = Duration::from_secs(3600);

/// Why an Ingress off canonical is held back instead of patched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fight {
    /// What our last patch wrote, which the stored value replaced.
    pub(crate) wrote: Vec<Address>,
    /// Consecutive fights over this Ingress, this one included.
    pub(crate) count: u32,
    /// How long the Ingress is left alone.
    pub(crate) hold: Duration,
    /// True when the patch rate, not a quick undo, made it a fight.
    pub(crate) by_rate: bool,
}

#[derive(Debug, Default)]
struct Record {
    /// Our recent patches, oldest first: at most [`MAX_PATCHES_PER_HOUR`] within the hour.
    patches: VecDeque<Instant>,
    wrote: Vec<Address>,
    /// The last patch has been judged a fight already: the next drift after the hold patches.
    judged: bool,
    fights: u32,
    last_fight: Option<Instant>,
}

/// Per-Ingress patch history, for the keys the reconciler has patched within the hour.
#[derive(Debug)]
pub(crate) struct Damping<K> {
    records: HashMap<K, Record>,
}

impl<K> Default for Damping<K> {
    fn default() -> Self {
        Damping { records: HashMap::new() }
    }
}

impl<K: Eq + Hash + Clone> Damping<K> {
    /// Our patch of `key` to `wrote` succeeded at `now`.
    pub(crate) fn patched(&mut self, key: &K, wrote: &[Address], now: Instant) {
        let record = self.records.entry(key.clone()).or_default();
        while record.patches.front().is_some_and(|&at| now.saturating_duration_since(at) > MEMORY) {
            record.patches.pop_front();
        }
        if record.patches.len() >= MAX_PATCHES_PER_HOUR {
            record.patches.pop_front();
        }
        record.patches.push_back(now);
        wrote.clone_into(&mut record.wrote);
        record.judged = false;
    }

    /// `key` is seen off canonical at `now`, storing `stored`: `Some` if that is a fight, and the
    /// Ingress is to be held back instead of patched; `None` to patch it.
    pub(crate) fn off_canonical(&mut self, key: &K, stored: &[Address], now: Instant) -> Option<Fight> {
        let record = self.records.get_mut(key)?;
        let &last = record.patches.back()?;
        if record.judged {
            return None;
        }
        if record.last_fight.is_some_and(|at| now.saturating_duration_since(at) > MEMORY) {
            record.fights = 0;
        }
        // A canonical value that moved (a Service changed) leaves ours stored: no one undid it.
        let undone = !crate::address::same_set(stored, &record.wrote);
        let quick = undone && now.saturating_duration_since(last) < FIGHT_WINDOW;
        let hour = record.patches.iter().filter(|&&at| now.saturating_duration_since(at) <= MEMORY).count();
        let by_rate = hour >= MAX_PATCHES_PER_HOUR;
        if !(quick || by_rate) {
            return None;
        }
        record.judged = true;
        record.fights = record.fights.saturating_add(1);
        record.last_fight = Some(now);
        let hold = HOLD_BASE.saturating_mul(1u32 << (record.fights - 1).min(16)).min(HOLD_MAX);
        Some(Fight { wrote: record.wrote.clone(), count: record.fights, hold, by_rate: by_rate && !quick })
    }

    /// Forgets `key` (deleted, or dropped by a re-list).
    pub(crate) fn forget(&mut self, key: &K) {
        self.records.remove(key);
    }

    /// Forgets every key without a patch or a fight within the hour, so the map holds only the
    /// Ingresses patched lately.
    pub(crate) fn prune(&mut self, now: Instant) {
        self.records.retain(|_, r| {
            let recent = |at: Instant| now.saturating_duration_since(at) <= MEMORY;
            r.patches.back().is_some_and(|&at| recent(at)) || r.last_fight.is_some_and(recent)
        });
    }

    /// Keys with a record.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::parse_static_list;

    fn list(s: &str) -> Vec<Address> {
        parse_static_list(s).unwrap()
    }

    #[test]
    fn a_quick_undo_is_a_fight_once_per_patch_and_holds_double() {
        let t0 = Instant::now();
        let ours = list("192.0.2.1");
        let theirs = list("198.51.100.1");
        let mut d = Damping::default();
        assert_eq!(d.off_canonical(&"a", &theirs, t0), None, "never patched: a heal");
        let mut holds = Vec::new();
        let mut now = t0;
        for _ in 0..14 {
            d.patched(&"a", &ours, now);
            now += Duration::from_millis(20);
            let fight = d.off_canonical(&"a", &theirs, now).expect("undone within the window");
            assert_eq!(fight.wrote, ours);
            assert!(!fight.by_rate);
            assert_eq!(d.off_canonical(&"a", &theirs, now), None, "judged once: after the hold it patches");
            holds.push(fight.hold);
            now += fight.hold;
        }
        let s = Duration::from_secs;
        assert_eq!(holds[..5], [s(1), s(2), s(4), s(8), s(16)]);
        assert_eq!(holds[9], s(512));
        assert_eq!(holds[10..], [HOLD_MAX; 4], "capped");
    }

    #[test]
    fn a_late_undo_or_a_moved_canonical_is_a_heal() {
        let t0 = Instant::now();
        let ours = list("192.0.2.1");
        let mut d = Damping::default();
        d.patched(&"a", &ours, t0);
        assert_eq!(d.off_canonical(&"a", &list("198.51.100.1"), t0 + FIGHT_WINDOW), None, "outside the window");
        d.patched(&"a", &ours, t0 + FIGHT_WINDOW);
        assert_eq!(
            d.off_canonical(&"a", &list("192.0.2.1"), t0 + FIGHT_WINDOW + Duration::from_secs(1)),
            None,
            "ours is still stored: the canonical value moved"
        );
    }

    #[test]
    fn too_many_patches_in_an_hour_are_a_fight() {
        let t0 = Instant::now();
        let ours = list("192.0.2.1");
        let theirs = list("198.51.100.1");
        let mut d = Damping::default();
        let period = Duration::from_secs(120);
        let mut fights = Vec::new();
        for i in 0..MAX_PATCHES_PER_HOUR as u32 + 2 {
            let at = t0 + period * i;
            d.patched(&"a", &ours, at);
            fights.push(d.off_canonical(&"a", &theirs, at + Duration::from_secs(90)));
        }
        assert!(fights[..MAX_PATCHES_PER_HOUR - 1].iter().all(Option::is_none), "{fights:?}");
        let fight = fights[MAX_PATCHES_PER_HOUR - 1].clone().expect("the 10th patch within the hour");
        assert!(fight.by_rate);
        assert_eq!(fight.hold, HOLD_BASE);
        assert_eq!(fights[MAX_PATCHES_PER_HOUR].as_ref().map(|f| f.hold), Some(2 * HOLD_BASE));
    }

    #[test]
    fn fights_are_forgotten_after_a_quiet_hour_and_pruned() {
        let t0 = Instant::now();
        let ours = list("192.0.2.1");
        let theirs = list("198.51.100.1");
        let mut d = Damping::default();
        for i in 0..3 {
            d.patched(&"a", &ours, t0 + Duration::from_secs(i));
            d.off_canonical(&"a", &theirs, t0 + Duration::from_secs(i));
        }
        let later = t0 + MEMORY + Duration::from_secs(10);
        d.patched(&"a", &ours, later);
        assert_eq!(d.off_canonical(&"a", &theirs, later).map(|f| f.count), Some(1), "counted afresh");
        d.patched(&"b", &ours, t0);
        d.prune(later + Duration::from_secs(1));
        assert_eq!(d.len(), 1, "b was not patched within the hour");
        d.forget(&"a");
        assert_eq!(d.len(), 0);
    }
}
