//! A key's 64-bit fingerprint: what per-object bookkeeping and a re-list's set of listed keys
//! are keyed by, 8 bytes instead of a copy of the namespace and name each.
//!
//! The hash is keyed afresh per process ([`RandomState`]), so names cannot be chosen to
//! collide. Two keys share a fingerprint by chance at odds of about n² / 2⁶⁵ (1 in 3.7 × 10⁹
//! at 100,000 objects); they then share bookkeeping (a gauge off by one). Nothing that decides
//! a write is looked up by fingerprint alone (`crate::reconcile::queue`).

use std::hash::{BuildHasher, Hash, RandomState};

/// A key's fingerprint.
pub(crate) type Print = u64;

/// The keyed hash that makes fingerprints; clones make the same ones.
#[derive(Debug, Clone, Default)]
pub(crate) struct Fingerprints(RandomState);

impl Fingerprints {
    pub(crate) fn of<K: Hash + ?Sized>(&self, key: &K) -> Print {
        self.0.hash_one(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_agree_and_processes_differ() {
        let a = Fingerprints::default();
        let key = ("team-a", "web");
        assert_eq!(a.of(&key), a.clone().of(&key));
        assert_ne!(a.of(&key), a.of(&("team-a", "api")));
        // Keyed afresh: another instance (as another process) fingerprints differently.
        let others: Vec<Print> = (0..8).map(|_| Fingerprints::default().of(&key)).collect();
        assert!(others.iter().any(|&p| p != a.of(&key)));
    }
}
