//! Token buckets for Kubernetes Events, in fair shares: per (Ingress, writer), per writer, per
//! policy and overall. A flood of forged reviews (anyone who reaches the webhook port can send
//! one) cannot become a flood of Events with the guard's identity, and one writer's flood
//! empties only its own buckets. Pure: the caller passes the time.

use std::{collections::HashMap, hash::Hash, time::Duration};

use tokio::time::Instant;

/// Events per Ingress and writer: a burst of 5, then one a minute (the recorder counts repeats
/// of the same writer on the same Ingress up in one Event's series anyway).
pub(crate) const PER_PAIR: Rate = Rate { burst: 5.0, every: Duration::from_secs(60) };
/// Events per writer, over all Ingresses: a burst of 10, then one every 6 s.
pub(crate) const PER_WRITER: Rate = Rate { burst: 10.0, every: Duration::from_secs(6) };
/// Events per policy: a burst of 200, then one a second.
pub(crate) const PER_POLICY: Rate = Rate { burst: 200.0, every: Duration::from_secs(1) };
/// Events overall: a burst of 300, then two a second. Above one policy's share, so that one
/// policy's flood leaves room for the others.
pub(crate) const OVERALL: Rate = Rate { burst: 300.0, every: Duration::from_millis(500) };
/// Keys tracked per kind of bucket (a key holds up to ~1 KiB: namespace, name and writer); past
/// it, buckets that have refilled are forgotten, and while none has, Events of untracked keys are
/// suppressed. Only Events written take a bucket, and the overall bucket lets through at most
/// 300 and then 2 a second, so the bound is reached only by a flood lasting many minutes.
const MAX_TRACKED: usize = 4096;

/// A bucket's size and how long one token takes to come back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rate {
    pub burst: f64,
    pub every: Duration,
}

/// Every rate of a [`Limiter`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rates {
    pub pair: Rate,
    pub writer: Rate,
    pub policy: Rate,
    pub overall: Rate,
}

/// The shipped rates.
pub(crate) const RATES: Rates = Rates { pair: PER_PAIR, writer: PER_WRITER, policy: PER_POLICY, overall: OVERALL };

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(now: Instant, rate: Rate) -> Self {
        Bucket { tokens: rate.burst, at: now }
    }

    fn refill(&mut self, now: Instant, rate: Rate) {
        let earned = now.saturating_duration_since(self.at).as_secs_f64() / rate.every.as_secs_f64();
        self.tokens = (self.tokens + earned).min(rate.burst);
        self.at = now;
    }
}

/// Buckets of one kind, by key, at most [`MAX_TRACKED`].
#[derive(Debug)]
struct Buckets<K> {
    rate: Rate,
    by_key: HashMap<K, Bucket>,
}

impl<K: Eq + Hash + Clone> Buckets<K> {
    fn new(rate: Rate) -> Self {
        Buckets { rate, by_key: HashMap::new() }
    }

    /// Whether `key`'s bucket has a token now. A key without a bucket has a full one, if there
    /// is room to track it; nothing is stored until [`Buckets::take`], so refused attempts
    /// cannot fill the map.
    fn ready(&mut self, key: &K, now: Instant) -> bool {
        let rate = self.rate;
        if let Some(bucket) = self.by_key.get_mut(key) {
            bucket.refill(now, rate);
            return bucket.tokens >= 1.0;
        }
        if self.by_key.len() >= MAX_TRACKED {
            self.by_key.retain(|_, bucket| {
                bucket.refill(now, rate);
                bucket.tokens < rate.burst
            });
        }
        self.by_key.len() < MAX_TRACKED
    }

    fn take(&mut self, key: K, now: Instant) {
        let rate = self.rate;
        self.by_key.entry(key).or_insert_with(|| Bucket::full(now, rate)).tokens -= 1.0;
    }
}

/// What an Event is about, as the limiter shares it out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Share<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub writer: &'a str,
    pub policy: &'a str,
}

/// The limiter: [`Limiter::allow`] says whether an Event may be written now.
#[derive(Debug)]
pub(crate) struct Limiter {
    pairs: Buckets<(String, String, String)>,
    writers: Buckets<String>,
    policies: Buckets<String>,
    overall_rate: Rate,
    overall: Bucket,
}

impl Limiter {
    pub(crate) fn new(rates: Rates, now: Instant) -> Self {
        Limiter {
            pairs: Buckets::new(rates.pair),
            writers: Buckets::new(rates.writer),
            policies: Buckets::new(rates.policy),
            overall_rate: rates.overall,
            overall: Bucket::full(now, rates.overall),
        }
    }

    /// Takes a token from each bucket `share` draws on, or from none.
    pub(crate) fn allow(&mut self, share: Share<'_>, now: Instant) -> bool {
        self.overall.refill(now, self.overall_rate);
        if self.overall.tokens < 1.0 {
            return false;
        }
        let pair = (share.namespace.to_owned(), share.name.to_owned(), share.writer.to_owned());
        let writer = share.writer.to_owned();
        let policy = share.policy.to_owned();
        // Narrowest first: a writer over its share is refused before it touches the shared ones.
        if !(self.pairs.ready(&pair, now) && self.writers.ready(&writer, now) && self.policies.ready(&policy, now)) {
            return false;
        }
        self.pairs.take(pair, now);
        self.writers.take(writer, now);
        self.policies.take(policy, now);
        self.overall.tokens -= 1.0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLENTY: Rate = Rate { burst: 1e9, every: Duration::from_nanos(1) };

    fn share<'a>(name: &'a str, writer: &'a str, policy: &'a str) -> Share<'a> {
        Share { namespace: "ns", name, writer, policy }
    }

    #[test]
    fn per_ingress_and_writer_then_overall() {
        let t0 = Instant::now();
        let pair = Rate { burst: 2.0, every: Duration::from_secs(10) };
        let all = Rate { burst: 4.0, every: Duration::from_secs(1) };
        let mut l = Limiter::new(Rates { pair, writer: PLENTY, policy: PLENTY, overall: all }, t0);
        assert!(l.allow(share("a", "w", "p"), t0));
        assert!(l.allow(share("a", "w", "p"), t0));
        assert!(!l.allow(share("a", "w", "p"), t0), "burst of 2 per Ingress and writer");
        assert!(l.allow(share("a", "other", "p"), t0), "another writer on the same Ingress has its own");
        assert!(l.allow(share("b", "w", "p"), t0));
        assert!(!l.allow(share("c", "w", "p"), t0), "burst of 4 overall");
        let t1 = t0 + Duration::from_secs(1);
        assert!(!l.allow(share("a", "w", "p"), t1), "a's token comes back after 10 s");
        assert!(l.allow(share("c", "w", "p"), t1), "one overall token a second");
        assert!(l.allow(share("a", "w", "p"), t0 + Duration::from_secs(12)));
    }

    #[test]
    fn one_writers_flood_leaves_another_writers_first_event() {
        let t0 = Instant::now();
        let mut l = Limiter::new(RATES, t0);
        let mut written = 0;
        for i in 0..10_000 {
            if l.allow(share(&format!("ghost-{}", i % 500), "flooder", "p"), t0) {
                written += 1;
            }
        }
        assert_eq!(written, 10, "the flooder gets its writer's share, over every Ingress");
        assert!(l.allow(share("ghost-0", "dev", "p"), t0), "dev's first Event goes out");
    }

    #[test]
    fn many_writers_on_one_ingress_leave_room_for_one_more() {
        let t0 = Instant::now();
        let mut l = Limiter::new(RATES, t0);
        for i in 0..150 {
            assert!(l.allow(share("web", &format!("forged-{i}"), "p"), t0), "forged-{i}");
        }
        assert!(l.allow(share("web", "dev", "p"), t0), "the 151st writer still gets its first Event");
    }

    #[test]
    fn one_policys_flood_leaves_room_for_another_policy() {
        let t0 = Instant::now();
        let policy = Rate { burst: 3.0, every: Duration::from_secs(60) };
        let mut l = Limiter::new(Rates { pair: PLENTY, writer: PLENTY, policy, overall: PLENTY }, t0);
        let flood = (0..100).filter(|i| l.allow(share("a", &i.to_string(), "loud"), t0)).count();
        assert_eq!(flood, 3);
        assert!(l.allow(share("b", "dev", "quiet"), t0));
    }

    #[test]
    fn a_refusal_takes_no_token() {
        let t0 = Instant::now();
        let writer = Rate { burst: 1.0, every: Duration::from_secs(3600) };
        let overall = Rate { burst: 2.0, every: Duration::from_secs(3600) };
        let mut l = Limiter::new(Rates { pair: PLENTY, writer, policy: PLENTY, overall }, t0);
        assert!(l.allow(share("a", "w", "p"), t0));
        for _ in 0..10 {
            assert!(!l.allow(share("a", "w", "p"), t0));
        }
        assert!(l.allow(share("a", "v", "p"), t0), "w's refusals did not spend the overall bucket");
    }

    #[test]
    fn tracked_keys_are_bounded() {
        let t0 = Instant::now();
        let pair = Rate { burst: 1.0, every: Duration::from_secs(3600) };
        let mut l = Limiter::new(Rates { pair, writer: PLENTY, policy: PLENTY, overall: PLENTY }, t0);
        for i in 0..MAX_TRACKED {
            assert!(l.allow(share(&i.to_string(), "w", "p"), t0));
        }
        assert!(!l.allow(share("one-more", "w", "p"), t0), "no bucket has refilled: suppressed");
        assert_eq!(l.pairs.by_key.len(), MAX_TRACKED);
        let later = t0 + Duration::from_secs(3600);
        assert!(l.allow(share("one-more", "w", "p"), later), "refilled buckets are forgotten");
        assert!(l.pairs.by_key.len() <= MAX_TRACKED);
    }
}
