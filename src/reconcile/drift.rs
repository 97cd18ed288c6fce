//! The drift measurement: which stored objects of one kind are off canonical and under which
//! policy, and the count per policy that the `drift_objects` gauge shows. Pure; the reconciler passes the
//! gauge in.

use std::{
    collections::{HashMap, HashSet},
    hash::Hash,
    sync::Arc,
};

use super::shrink::shrink;

/// Off-canonical keys by policy, counted per policy.
#[derive(Debug)]
pub(crate) struct Drift<K> {
    /// Each key's policy, shared with `counts` (one name per policy, not per key).
    by_key: HashMap<K, Arc<str>>,
    counts: HashMap<Arc<str>, i64>,
}

impl<K> Default for Drift<K> {
    fn default() -> Self {
        Drift { by_key: HashMap::new(), counts: HashMap::new() }
    }
}

impl<K: Eq + Hash + Clone> Drift<K> {
    /// Records that `key` is off canonical under `policy`, or fine (`None`); `gauge` is told
    /// the new count of each policy whose count moved.
    pub(crate) fn set(&mut self, key: &K, policy: Option<&str>, mut gauge: impl FnMut(&str, i64)) {
        let old = match (policy, self.by_key.get_mut(key)) {
            (Some(p), Some(old)) if **old == *p => return,
            (Some(p), Some(old)) => Some(std::mem::replace(old, self.counts.name(p))),
            (Some(p), None) => {
                self.by_key.insert(key.clone(), self.counts.name(p));
                None
            }
            (None, _) => {
                let old = self.by_key.remove(key);
                shrink(&mut self.by_key);
                old
            }
        };
        if let Some(p) = old {
            self.tally(&p, -1, &mut gauge);
        }
        if let Some(p) = policy {
            self.tally(p, 1, &mut gauge);
        }
    }

    fn tally(&mut self, policy: &str, delta: i64, gauge: &mut impl FnMut(&str, i64)) {
        if let Some(count) = self.counts.get_mut(policy) {
            *count += delta;
            gauge(policy, *count);
        }
    }

    /// Every policy in force has a series (0 included), told to `gauge`; those gone lose
    /// theirs (`remove`).
    pub(crate) fn publish(
        &mut self,
        in_force: &[&str],
        mut gauge: impl FnMut(&str, i64),
        mut remove: impl FnMut(&str),
    ) {
        let names: HashSet<&str> = in_force.iter().copied().collect();
        self.counts.retain(|p, _| {
            let keep = names.contains(&**p);
            if !keep {
                remove(p);
            }
            keep
        });
        for &p in in_force {
            let name = self.counts.name(p);
            gauge(p, *self.counts.entry(name).or_insert(0));
        }
    }

    /// How many keys `policy` counts.
    pub(crate) fn count(&self, policy: &str) -> i64 {
        self.counts.get(policy).copied().unwrap_or(0)
    }

    /// How many keys are off canonical.
    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }
}

/// The policies' shared names.
trait Names {
    /// The shared name of `policy`, made (counting 0) if it has none yet.
    fn name(&mut self, policy: &str) -> Arc<str>;
}

impl Names for HashMap<Arc<str>, i64> {
    fn name(&mut self, policy: &str) -> Arc<str> {
        if let Some((name, _)) = self.get_key_value(policy) {
            return name.clone();
        }
        let name: Arc<str> = Arc::from(policy);
        self.insert(name.clone(), 0);
        name
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
}
