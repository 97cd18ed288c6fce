//! The drift measurement: which stored objects of one kind are off canonical, under which
//! policy, whether to patch them, and the count per policy (`drift_objects`). Pure.

use std::{
    collections::{HashMap, HashSet},
    hash::Hash,
    sync::Arc,
};

use super::shrink::shrink;

/// Off-canonical keys by policy, counted per policy.
#[derive(Debug, Default)]
pub(crate) struct Drift<K> {
    /// Each key's policy, as its place in `policies`, and [`PATCH`] if it is to be patched:
    /// 4 bytes a key (a heal of every object has an entry for each), not a shared name's 16.
    by_key: HashMap<K, u32>,
    policies: Vec<Tally>,
    /// Places in `policies` by name.
    places: HashMap<Arc<str>, u32>,
}

/// The bit of a key's entry that says it is to be patched.
const PATCH: u32 = 1 << 31;

/// One policy's count, and whether its gauge is shown (it is in force, [`Drift::publish`]).
#[derive(Debug)]
struct Tally {
    name: Arc<str>,
    count: i64,
    shown: bool,
}

impl<K: Eq + Hash + Clone> Drift<K> {
    /// The place of `policy`, made if it has none, reusing an empty place of a policy that left:
    /// the places stay as many as the policies in force and those some key is still under.
    fn place(&mut self, policy: &str) -> u32 {
        if let Some(&at) = self.places.get(policy) {
            // Judged under it now, so it is in force again (its count carried on meanwhile).
            self.policies[at as usize].shown = true;
            return at;
        }
        let name: Arc<str> = Arc::from(policy);
        let tally = Tally { name: name.clone(), count: 0, shown: true };
        let free = self.policies.iter().position(|t| !t.shown && t.count == 0);
        let at = match free {
            Some(at) => {
                self.places.remove(&self.policies[at].name);
                self.policies[at] = tally;
                at
            }
            None => {
                self.policies.push(tally);
                self.policies.len() - 1
            }
        };
        let at = u32::try_from(at).ok().filter(|at| at & PATCH == 0).expect("fewer than 2^31 policies");
        self.places.insert(name, at);
        at
    }

    /// Records that `key` is off canonical under `policy`, or fine (`None`); `gauge` is told moves.
    pub(crate) fn set(&mut self, key: &K, policy: Option<&str>, gauge: impl FnMut(&str, i64)) {
        self.mark(key, policy, false, gauge);
    }

    /// [`Drift::set`], and whether the key is to be patched ([`Drift::patches`]).
    pub(crate) fn mark(&mut self, key: &K, policy: Option<&str>, patch: bool, mut gauge: impl FnMut(&str, i64)) {
        let policy = policy.map(|p| self.place(p));
        let entry = policy.map(|p| if patch { p | PATCH } else { p });
        let old = match (entry, self.by_key.get_mut(key)) {
            (Some(e), Some(old)) if *old & !PATCH == e & !PATCH => {
                *old = e;
                return;
            }
            (Some(e), Some(old)) => Some(std::mem::replace(old, e) & !PATCH),
            (Some(e), None) => {
                self.by_key.insert(key.clone(), e);
                None
            }
            (None, _) => {
                let old = self.by_key.remove(key);
                shrink(&mut self.by_key);
                old.map(|e| e & !PATCH)
            }
        };
        if let Some(p) = old {
            self.tally(p, -1, &mut gauge);
        }
        if let Some(p) = policy {
            self.tally(p, 1, &mut gauge);
        }
    }

    fn tally(&mut self, at: u32, delta: i64, gauge: &mut impl FnMut(&str, i64)) {
        let tally = &mut self.policies[at as usize];
        tally.count += delta;
        if tally.shown {
            gauge(&tally.name, tally.count);
        }
    }

    /// Every policy in force has a series (0 included), told to `gauge`; those gone are `remove`d.
    pub(crate) fn publish(
        &mut self,
        in_force: &[&str],
        mut gauge: impl FnMut(&str, i64),
        mut remove: impl FnMut(&str),
    ) {
        let names: HashSet<&str> = in_force.iter().copied().collect();
        for tally in &mut self.policies {
            let keep = names.contains(&*tally.name);
            if tally.shown && !keep {
                remove(&tally.name);
            }
            tally.shown = keep;
        }
        for &p in in_force {
            let at = self.place(p) as usize;
            let tally = &mut self.policies[at];
            tally.shown = true;
            gauge(p, tally.count);
        }
    }

    /// How many keys `policy` counts.
    pub(crate) fn count(&self, policy: &str) -> i64 {
        self.places.get(policy).map_or(0, |&at| self.policies[at as usize].count)
    }

    /// Whether `key` is off canonical and to be patched.
    pub(crate) fn patches(&self, key: &K) -> bool {
        self.by_key.get(key).is_some_and(|e| e & PATCH != 0)
    }

    /// How many keys are off canonical.
    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_each_key() {
        let mut drift = Drift::default();
        let mut told = Vec::new();
        let mut set = |d: &mut Drift<&str>, key, policy: Option<&str>| {
            d.set(&key, policy, |p, n| told.push((p.to_owned(), n)));
        };
        set(&mut drift, "a", Some("p"));
        set(&mut drift, "b", Some("p"));
        set(&mut drift, "b", Some("p"));
        set(&mut drift, "b", Some("q"));
        set(&mut drift, "a", None);
        set(&mut drift, "c", None);
        assert_eq!(drift.len(), 1);
        let want = [("p", 1), ("p", 2), ("p", 1), ("q", 1), ("p", 0)].map(|(p, n)| (p.to_owned(), n));
        assert_eq!(told, want, "unchanged keys and fine keys that were fine tell nothing");
    }

    #[test]
    fn every_policy_in_force_has_a_series() {
        let mut drift = Drift::default();
        drift.set(&"a", Some("old"), |_, _| {});
        drift.set(&"b", Some("p"), |_, _| {});
        let (mut shown, mut removed) = (Vec::new(), Vec::new());
        drift.publish(&["p", "new"], |p, n| shown.push((p.to_owned(), n)), |p| removed.push(p.to_owned()));
        assert_eq!(shown, [("p".to_owned(), 1), ("new".to_owned(), 0)]);
        assert_eq!(removed, ["old"]);
    }

    #[test]
    fn a_policy_gone_keeps_counting_hidden_and_its_place_is_reused_once_empty() {
        let mut drift = Drift::default();
        let mut told = Vec::new();
        drift.set(&"a", Some("old"), |_, _| {});
        drift.set(&"b", Some("old"), |_, _| {});
        drift.publish(&["p"], |_, _| {}, |_| {});
        drift.set(&"a", None, |p, n| told.push((p.to_owned(), n)));
        assert!(told.is_empty(), "its series was removed");
        assert_eq!(drift.count("old"), 1);
        drift.set(&"c", Some("q"), |_, _| {});
        assert_eq!(drift.policies.len(), 3, "a key is still under \"old\"");
        drift.set(&"b", None, |_, _| {});
        drift.set(&"d", Some("r"), |p, n| told.push((p.to_owned(), n)));
        assert_eq!(drift.policies.len(), 3, "the empty place of \"old\" was reused");
        assert_eq!(told, [("r".to_owned(), 1)]);
        assert_eq!((drift.count("old"), drift.count("r"), drift.len()), (0, 1, 2));
        drift.set(&"a", Some("q"), |p, n| told.push((p.to_owned(), n)));
        assert_eq!(told.last(), Some(&("q".to_owned(), 2)));
    }

    #[test]
    fn a_key_to_patch_is_marked_without_counting_twice() {
        let mut drift = Drift::default();
        let mut told = Vec::new();
        drift.mark(&"a", Some("p"), false, |p, n| told.push((p.to_owned(), n)));
        assert!(!drift.patches(&"a"));
        drift.mark(&"a", Some("p"), true, |p, n| told.push((p.to_owned(), n)));
        assert!(drift.patches(&"a"), "now to be patched");
        assert_eq!(told, [("p".to_owned(), 1)], "the same policy: counted once");
        drift.mark(&"a", Some("q"), true, |p, n| told.push((p.to_owned(), n)));
        assert_eq!((drift.count("p"), drift.count("q"), drift.patches(&"a")), (0, 1, true));
        drift.set(&"a", None, |_, _| {});
        assert!(!drift.patches(&"a") && drift.len() == 0);
        assert_eq!(drift.count("q"), 0);
    }
}
