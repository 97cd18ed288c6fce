//! The `writer` label of the rogue-writes metric: which value a username becomes
//! (`--writer-labels`), and the bounded LRU table of the values with a series now
//! (`--max-writer-labels`). Whoever reaches the webhook chooses usernames, so they must not
//! choose how many series exist, nor keep a label once they stop writing ([`IDLE`]).

use std::{collections::HashMap, time::Duration};

use prometheus_client::metrics::counter::Counter;
use std::time::Instant;

/// A label that has not counted a write for this long is dropped, series and all.
pub(crate) const IDLE: Duration = Duration::from_secs(600);
/// The label of every writer that is not a ServiceAccount, with `--writer-labels=serviceaccount`.
pub(crate) const USER: &str = "user";
/// Longest label value kept, in bytes: a ServiceAccount username is at most ~340 bytes.
pub(crate) const MAX_LABEL_BYTES: usize = 512;

/// What the `writer` label shows of a username (`--writer-labels`). `/metrics` is served without
/// authentication, so an operator may keep people's usernames out of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum WriterLabels {
    /// The username, as sent (cut to 512 bytes).
    #[default]
    User,
    /// ServiceAccount usernames (`system:serviceaccount:NS:NAME`) as they are; every other writer
    /// as `user`.
    #[value(name = "serviceaccount")]
    ServiceAccount,
    /// `h:` and 16 hex digits of a stable hash (64-bit FNV-1a) of the username: the same writer
    /// keeps one label across restarts and replicas, and the name itself is not shown. Not a
    /// secret: whoever can guess a username can hash it too.
    Hashed,
}

impl WriterLabels {
    /// The label value of `username`.
    pub(crate) fn label(self, username: &str) -> String {
        match self {
            WriterLabels::User => crate::names::truncate(username, usize::MAX, MAX_LABEL_BYTES),
            WriterLabels::ServiceAccount if username.starts_with("system:serviceaccount:") => {
                crate::names::truncate(username, usize::MAX, MAX_LABEL_BYTES)
            }
            WriterLabels::ServiceAccount => USER.to_owned(),
            WriterLabels::Hashed => format!("h:{:016x}", fnv1a(username.as_bytes())),
        }
    }
}

/// 64-bit FNV-1a: tiny, stable across builds and platforms (std's hasher promises neither).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// One label with a series now: when it last counted, and its counters by (policy, action),
/// resolved once so a repeat costs one lookup here and an atomic add.
#[derive(Debug)]
struct Entry {
    last: Instant,
    series: Vec<(String, &'static str, Counter)>,
}

/// What [`Table::count`] did besides counting.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Churn {
    /// Labels dropped, with the (policy, action) pairs of their series, for the caller to remove.
    pub(crate) dropped: Vec<(String, Vec<(String, &'static str)>)>,
    /// Of those, how many were pushed out by a newcomer (the rest had been idle for [`IDLE`]).
    pub(crate) evicted: usize,
}

/// The labels with a series now: at most `max`, least recently used out first.
#[derive(Debug)]
pub(crate) struct Table {
    max: usize,
    idle: Duration,
    entries: HashMap<String, Entry>,
}

impl Table {
    pub(crate) fn new(max: usize, idle: Duration) -> Self {
        Table { max, idle, entries: HashMap::new() }
    }

    /// The counter of (`label`, `policy`, `action`), made by `create` when new; `None` when the
    /// table holds no label at all (`max` 0), and the write counts as `other`. Labels pushed out
    /// or expired on the way are in the returned [`Churn`].
    pub(crate) fn count(
        &mut self,
        label: &str,
        policy: &str,
        action: &'static str,
        now: Instant,
        create: impl FnOnce() -> Counter,
    ) -> (Option<Counter>, Churn) {
        let mut churn = Churn::default();
        if !self.entries.contains_key(label) {
            if self.max == 0 {
                return (None, churn);
            }
            churn = self.expire(now);
            if self.entries.len() >= self.max
                && let Some(oldest) = self.entries.iter().min_by_key(|(_, e)| e.last).map(|(k, _)| k.clone())
                && let Some(entry) = self.entries.remove(&oldest)
            {
                churn.dropped.push((oldest, pairs(&entry)));
                churn.evicted += 1;
            }
            self.entries.insert(label.to_owned(), Entry { last: now, series: Vec::new() });
        }
        let Some(entry) = self.entries.get_mut(label) else { return (None, churn) };
        entry.last = now;
        if let Some((_, _, counter)) = entry.series.iter().find(|(p, a, _)| p == policy && *a == action) {
            return (Some(counter.clone()), churn);
        }
        let counter = create();
        entry.series.push((policy.to_owned(), action, counter.clone()));
        (Some(counter), churn)
    }

    /// Drops the labels idle for longer than the expiry.
    pub(crate) fn expire(&mut self, now: Instant) -> Churn {
        let idle = self.idle;
        let stale = self.entries.extract_if(|_, e| now.saturating_duration_since(e.last) >= idle);
        Churn { dropped: stale.map(|(k, entry)| (k, pairs(&entry))).collect(), evicted: 0 }
    }

    #[cfg(test)]
    fn labels(&self) -> Vec<&str> {
        let mut all: Vec<&str> = self.entries.keys().map(String::as_str).collect();
        all.sort_unstable();
        all
    }
}

fn pairs(entry: &Entry) -> Vec<(String, &'static str)> {
    entry.series.iter().map(|(p, a, _)| (p.clone(), *a)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(t: &mut Table, label: &str, at: Instant) -> Churn {
        let (counter, churn) = t.count(label, "p", "patched", at, Counter::default);
        counter.expect("a label").inc();
        churn
    }

    #[test]
    fn a_full_table_pushes_out_the_least_recently_used() {
        let t0 = Instant::now();
        let mut t = Table::new(3, IDLE);
        for (i, name) in ["a", "b", "c"].iter().enumerate() {
            count(&mut t, name, t0 + Duration::from_secs(i as u64));
        }
        // `a` writes again, so `b` is now the least recently used.
        count(&mut t, "a", t0 + Duration::from_secs(10));
        let churn = count(&mut t, "dev", t0 + Duration::from_secs(11));
        assert_eq!(churn.evicted, 1);
        assert_eq!(churn.dropped, [("b".to_owned(), vec![("p".to_owned(), "patched")])]);
        assert_eq!(t.labels(), ["a", "c", "dev"]);
    }

    #[test]
    fn a_flood_of_writers_cannot_keep_a_real_writer_out() {
        let t0 = Instant::now();
        let mut t = Table::new(50, IDLE);
        for i in 0..150 {
            count(&mut t, &format!("forged-{i}"), t0);
        }
        assert_eq!(t.entries.len(), 50);
        count(&mut t, "dev", t0 + Duration::from_millis(1));
        assert!(t.labels().contains(&"dev"), "the real writer has its label at its first write");
        assert_eq!(t.entries.len(), 50, "still bounded");
    }

    #[test]
    fn idle_labels_expire_even_with_room() {
        let t0 = Instant::now();
        let mut t = Table::new(10, Duration::from_secs(600));
        count(&mut t, "old", t0);
        count(&mut t, "busy", t0);
        count(&mut t, "busy", t0 + Duration::from_secs(500));
        assert!(t.expire(t0 + Duration::from_secs(599)).dropped.is_empty());
        let churn = t.expire(t0 + Duration::from_secs(600));
        assert_eq!(churn.dropped.len(), 1);
        assert_eq!(churn.dropped[0].0, "old");
        assert_eq!(churn.evicted, 0, "expiry is not eviction");
        assert_eq!(t.labels(), ["busy"]);
    }

    #[test]
    fn one_counter_per_policy_and_action() {
        let t0 = Instant::now();
        let mut t = Table::new(2, IDLE);
        let (a, _) = t.count("w", "p", "patched", t0, Counter::default);
        let (b, _) = t.count("w", "p", "patched", t0, || panic!("resolved once"));
        a.unwrap().inc();
        assert_eq!(b.unwrap().get(), 1, "the same counter");
        let (c, _) = t.count("w", "p", "denied", t0, Counter::default);
        assert_eq!(c.unwrap().get(), 0);
        assert!(Table::new(0, IDLE).count("w", "p", "patched", t0, Counter::default).0.is_none());
    }

    #[test]
    fn label_modes() {
        let sa = "system:serviceaccount:ingress-nginx:controller";
        assert_eq!(WriterLabels::User.label("dev"), "dev");
        assert_eq!(WriterLabels::ServiceAccount.label(sa), sa);
        assert_eq!(WriterLabels::ServiceAccount.label("dev"), USER);
        assert_eq!(WriterLabels::ServiceAccount.label("system:node:worker"), USER);
        let hashed = WriterLabels::Hashed.label("dev");
        assert_eq!(hashed, WriterLabels::Hashed.label("dev"), "stable");
        assert_ne!(hashed, WriterLabels::Hashed.label("dev2"));
        assert!(hashed.starts_with("h:") && hashed.len() == 18 && !hashed.contains("dev"), "{hashed}");
        // FNV-1a's published test vector: a change of hash function would relabel every writer.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(WriterLabels::User.label(&"x".repeat(1 << 20)).len(), MAX_LABEL_BYTES);
    }
}
