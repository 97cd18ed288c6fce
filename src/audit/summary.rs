//! Repeated findings, summarised: the first finding of a (writer, Ingress, attempted value) in
//! an interval (`--repeat-log-interval`) is logged in full; its repeats are counted and logged
//! once when the interval ends. Metrics count every finding regardless. Pure.
//!
//! Past [`MAX_KEYS`] keys, findings are counted by (writer, policy), at most [`MAX_WRITERS`],
//! then in one bucket, so an interval logs at most `2 × MAX_KEYS + MAX_WRITERS + 1` lines (a
//! full line per write was 98,124 lines in 10 minutes at 10,000 fought-over Ingresses).

use std::{
    collections::{HashMap, VecDeque},
    hash::{Hash, Hasher},
    time::Duration,
};

use tokio::time::Instant;

use crate::audit::Finding;

/// Default of `--repeat-log-interval`.
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// Keys summarised at once. A finding of a new key past it is logged in full and not tracked,
/// so the table (each entry a bounded [`Finding`], under 8 KiB at worst, a few hundred bytes
/// typically) stays under 4 MiB.
pub(crate) const MAX_KEYS: usize = 512;
/// (writer, policy) pairs counted apart once the table is full; the rest share one count.
pub(crate) const MAX_WRITERS: usize = 64;

/// How a finding is to be logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// The first of its key in the interval: its own line.
    First,
    /// A repeat: counted, summarised at the interval's end.
    Repeat,
    /// Summarising is off, or a hash collision: its own line, untracked.
    Untracked,
    /// The table is full: counted by writer, summarised at the interval's end.
    Overflow,
}

/// What a summary line counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grouped {
    /// Repeats of one key after its first, logged in full.
    Key,
    /// Findings of one writer under one policy, none logged in full (the table was full).
    Writer,
    /// Findings of any further writer, none logged in full (the writers were full too).
    All,
}

/// An interval that ended with repeats: the first finding and how many repeated it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Repeated {
    pub finding: Finding,
    pub repeats: u64,
    pub grouped: Grouped,
}

#[derive(Debug)]
struct Open {
    until: Instant,
    repeats: u64,
    first: Finding,
}

/// The open intervals, by a hash of their key; the first finding of each is kept to compare
/// keys exactly (a hash collision makes a finding untracked, never merged with another) and to
/// write the summary line.
#[derive(Debug)]
pub(crate) struct Summariser {
    interval: Duration,
    max: usize,
    open: HashMap<u64, Open>,
    /// Hashes in the order their intervals end (the interval is fixed, so in insertion order).
    ends: VecDeque<(Instant, u64)>,
    /// Past the table: counts by (writer, policy); `None` is the bucket for all the rest.
    overflow: HashMap<Option<(String, String)>, Open>,
    overflow_ends: VecDeque<(Instant, Option<(String, String)>)>,
}

/// What makes findings repeats of one another: the writer, the object and what it wrote.
fn key(f: &Finding) -> (&str, &str, &str, u64) {
    (&f.writer.username, &f.namespace, &f.name, f.attempted_hash)
}

impl Summariser {
    /// A summariser over `interval` (zero: every finding is logged in full) of at most `max` keys.
    pub(crate) fn new(interval: Duration, max: usize) -> Self {
        Summariser {
            interval,
            max,
            open: HashMap::new(),
            ends: VecDeque::new(),
            overflow: HashMap::new(),
            overflow_ends: VecDeque::new(),
        }
    }

    /// Classifies `finding`, seen at `now`, and remembers it.
    pub(crate) fn observe(&mut self, finding: &Finding, now: Instant) -> Seen {
        if self.interval.is_zero() {
            return Seen::Untracked;
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        key(finding).hash(&mut hasher);
        let hash = hasher.finish();
        if let Some(open) = self.open.get_mut(&hash) {
            if key(&open.first) != key(finding) {
                return Seen::Untracked;
            }
            if now < open.until {
                open.repeats += 1;
                return Seen::Repeat;
            }
            // Its interval is over but not yet reported: the caller reports due intervals
            // before observing, so this only happens when it did not; start afresh.
            return Seen::Untracked;
        }
        if self.open.len() >= self.max {
            self.count_overflow(finding, now);
            return Seen::Overflow;
        }
        let until = now + self.interval;
        self.open.insert(hash, Open { until, repeats: 0, first: finding.clone() });
        self.ends.push_back((until, hash));
        Seen::First
    }

    fn count_overflow(&mut self, finding: &Finding, now: Instant) {
        let pair = Some((finding.writer.username.clone(), finding.policy.clone()));
        let key = if self.overflow.contains_key(&pair) || self.overflow.len() < MAX_WRITERS { pair } else { None };
        if let Some(open) = self.overflow.get_mut(&key) {
            open.repeats += 1;
            return;
        }
        let until = now + self.interval;
        self.overflow.insert(key.clone(), Open { until, repeats: 1, first: finding.clone() });
        self.overflow_ends.push_back((until, key));
    }

    /// The intervals that have ended by `now`, with their repeats (those without any end
    /// silently: their one line said it all).
    pub(crate) fn due(&mut self, now: Instant) -> Vec<Repeated> {
        let mut out = Vec::new();
        while self.overflow_ends.front().is_some_and(|(until, _)| *until <= now) {
            let Some((_, key)) = self.overflow_ends.pop_front() else { break };
            out.extend(self.overflow.remove(&key).map(|open| overflowed(&key, open)));
        }
        while self.ends.front().is_some_and(|(until, _)| *until <= now) {
            let Some((_, hash)) = self.ends.pop_front() else { break };
            let open = self.open.remove(&hash).filter(|open| open.repeats > 0);
            out.extend(open.map(|o| Repeated { finding: o.first, repeats: o.repeats, grouped: Grouped::Key }));
        }
        out
    }

    /// When the next interval ends, if one is open.
    pub(crate) fn next_end(&self) -> Option<Instant> {
        let overflow = self.overflow_ends.front().map(|(until, _)| *until);
        self.ends.front().map(|&(until, _)| until).into_iter().chain(overflow).min()
    }

    /// Every open interval with repeats, ended now (at shutdown).
    pub(crate) fn flush(&mut self) -> Vec<Repeated> {
        self.ends.clear();
        self.overflow_ends.clear();
        let mut out: Vec<Repeated> = self
            .open
            .drain()
            .filter(|(_, o)| o.repeats > 0)
            .map(|(_, o)| Repeated { finding: o.first, repeats: o.repeats, grouped: Grouped::Key })
            .collect();
        out.sort_by(|a, b| a.finding.name.cmp(&b.finding.name));
        let mut overflow: Vec<Repeated> = self.overflow.drain().map(|(key, o)| overflowed(&key, o)).collect();
        overflow.sort_by(|a, b| {
            (a.grouped == Grouped::All, &a.finding.writer.username)
                .cmp(&(b.grouped == Grouped::All, &b.finding.writer.username))
        });
        out.extend(overflow);
        out
    }
}

/// The count of findings past the table, by writer (`None`: every further writer).
fn overflowed(key: &Option<(String, String)>, open: Open) -> Repeated {
    let grouped = if key.is_some() { Grouped::Writer } else { Grouped::All };
    Repeated { finding: open.first, repeats: open.repeats, grouped }
}

/// Logs the summary line of an interval that had repeats (or findings past the table).
pub(crate) fn log(repeated: &Repeated, interval: Duration) {
    let f = &repeated.finding;
    if repeated.grouped != Grouped::Key {
        let writer = match repeated.grouped {
            Grouped::All => format!("(any writer past the first {MAX_WRITERS})"),
            _ => f.writer.username.clone(),
        };
        tracing::warn!(
            writer = %writer,
            policy = %f.policy,
            findings = repeated.repeats,
            example_kind = f.kind.name(),
            example_namespace = %f.namespace,
            example_name = %f.name,
            interval_seconds = interval.as_secs(),
            max_keys = MAX_KEYS,
            "rogue status writes not logged one by one: more distinct (writer, object, value) keys than the summary holds in one interval; they are in the metrics"
        );
        return;
    }
    tracing::warn!(
        kind = f.kind.name(),
        ingress_namespace = %f.namespace,
        ingress_name = %f.name,
        policy = %f.policy,
        writer = %f.writer.username,
        attempted = %f.attempted,
        canonical = %f.canonical,
        action = f.action.result(),
        repeats = repeated.repeats,
        interval_seconds = interval.as_secs(),
        "rogue status write repeated (after the first, logged in full)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        address::Address,
        audit::{Shown, Writer},
        decision::Action,
    };

    fn finding(writer: &str, name: &str, ip: &str) -> Finding {
        let attempted = vec![Address { ip: Some(ip.into()), ..Address::default() }];
        let mut h = std::collections::hash_map::DefaultHasher::new();
        attempted.hash(&mut h);
        Finding {
            kind: crate::kind::Kind::Ingress,
            uid: "u".into(),
            object_uid: Some("o".into()),
            namespace: "ns".into(),
            name: name.into(),
            class: None,
            policy: "p".into(),
            writer: Writer::new(writer.into(), vec![]),
            attempted_hash: h.finish(),
            attempted: Shown::of(attempted, 0),
            canonical: Shown::default(),
            action: Action::Rewrite,
            dry_run: false,
            forged: None,
            forged_metadata: None,
        }
    }

    #[test]
    fn first_in_full_repeats_counted_then_summarised_once() {
        let t0 = Instant::now();
        let mut s = Summariser::new(Duration::from_secs(60), MAX_KEYS);
        let f = finding("rogue", "web", "10.0.0.1");
        assert_eq!(s.observe(&f, t0), Seen::First);
        for i in 1..=5 {
            assert_eq!(s.observe(&f, t0 + Duration::from_secs(i)), Seen::Repeat);
        }
        assert_eq!(s.observe(&finding("rogue", "web", "10.0.0.2"), t0), Seen::First, "another value");
        assert_eq!(s.observe(&finding("other", "web", "10.0.0.1"), t0), Seen::First, "another writer");
        assert_eq!(s.observe(&finding("rogue", "api", "10.0.0.1"), t0), Seen::First, "another Ingress");
        assert_eq!(s.next_end(), Some(t0 + Duration::from_secs(60)));
        assert!(s.due(t0 + Duration::from_secs(59)).is_empty());
        let due = s.due(t0 + Duration::from_secs(60));
        assert_eq!(
            due,
            [Repeated { finding: f.clone(), repeats: 5, grouped: Grouped::Key }],
            "only the interval with repeats"
        );
        assert_eq!(s.next_end(), None);
        assert_eq!(s.observe(&f, t0 + Duration::from_secs(61)), Seen::First, "a new interval, a new full line");
    }

    #[test]
    fn the_table_is_bounded() {
        let t0 = Instant::now();
        let mut s = Summariser::new(Duration::from_secs(60), 3);
        for i in 0..3 {
            assert_eq!(s.observe(&finding(&i.to_string(), "web", "10.0.0.1"), t0), Seen::First);
        }
        let late = finding("late", "web", "10.0.0.1");
        assert_eq!(s.observe(&late, t0), Seen::Overflow, "counted by writer, not logged in full");
        assert_eq!(s.observe(&late, t0), Seen::Overflow);
        assert_eq!(s.open.len(), 3);
        let due = s.due(t0 + Duration::from_secs(60));
        assert_eq!(due.iter().filter(|r| r.grouped == Grouped::Writer).map(|r| r.repeats).sum::<u64>(), 2);
        assert_eq!(s.observe(&late, t0 + Duration::from_secs(60)), Seen::First, "room again");
    }

    /// The bench's case: 10,000 Ingresses, two values each, from more writers than are counted
    /// apart. Every finding is counted once, and an interval's lines stay bounded.
    #[test]
    fn findings_past_the_table_are_counted_in_bounded_lines() {
        let t0 = Instant::now();
        let mut s = Summariser::new(Duration::from_secs(60), MAX_KEYS);
        let (mut first, mut overflow) = (0u64, 0u64);
        for i in 0..20_000u64 {
            let writer = format!("controller-{}", i % (MAX_WRITERS as u64 + 36));
            let ip = if i % 2 == 0 { "10.0.0.1" } else { "10.0.0.2" };
            match s.observe(&finding(&writer, &format!("web-{}", i / 2), ip), t0) {
                Seen::First => first += 1,
                Seen::Overflow => overflow += 1,
                other => panic!("finding {i}: {other:?}"),
            }
        }
        assert_eq!(first, MAX_KEYS as u64);
        assert_eq!(s.next_end(), Some(t0 + Duration::from_secs(60)));
        let lines = s.due(t0 + Duration::from_secs(60));
        assert_eq!(lines.iter().filter(|r| r.grouped == Grouped::Writer).count(), MAX_WRITERS);
        assert_eq!(lines.iter().filter(|r| r.grouped == Grouped::All).count(), 1);
        assert_eq!(lines.iter().filter(|r| r.grouped != Grouped::Key).map(|r| r.repeats).sum::<u64>(), overflow);
        assert!(lines.len() <= MAX_WRITERS + 1, "no repeats of the first keys here: {}", lines.len());
        assert!(s.due(t0 + Duration::from_secs(120)).is_empty());
        assert_eq!(s.next_end(), None);
    }

    #[test]
    fn flush_reports_counts_past_the_table() {
        let t0 = Instant::now();
        let mut s = Summariser::new(Duration::from_secs(60), 1);
        s.observe(&finding("a", "web", "10.0.0.1"), t0);
        s.observe(&finding("b", "api", "10.0.0.1"), t0);
        let flushed = s.flush();
        assert_eq!(flushed.len(), 1);
        assert_eq!((flushed[0].grouped, flushed[0].repeats), (Grouped::Writer, 1));
        assert_eq!(flushed[0].finding.writer.username, "b");
    }

    #[test]
    fn zero_interval_logs_everything() {
        let t0 = Instant::now();
        let mut s = Summariser::new(Duration::ZERO, MAX_KEYS);
        let f = finding("rogue", "web", "10.0.0.1");
        assert_eq!(s.observe(&f, t0), Seen::Untracked);
        assert_eq!(s.observe(&f, t0), Seen::Untracked);
        assert!(s.flush().is_empty());
    }

    #[test]
    fn flush_reports_open_intervals() {
        let t0 = Instant::now();
        let mut s = Summariser::new(Duration::from_secs(60), MAX_KEYS);
        let f = finding("rogue", "web", "10.0.0.1");
        s.observe(&f, t0);
        s.observe(&f, t0);
        s.observe(&finding("quiet", "web", "10.0.0.1"), t0);
        assert_eq!(s.flush(), [Repeated { finding: f, repeats: 1, grouped: Grouped::Key }]);
        assert_eq!(s.next_end(), None);
    }
}
