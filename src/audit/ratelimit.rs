//! Token buckets for Kubernetes Events: one per Ingress and one overall, so that a flood of
//! forged reviews (anyone who reaches the webhook port can send one) cannot become a flood of
//! Events written with the webhook's identity. Pure: the caller passes the time.

use std::{collections::HashMap, time::Duration};

use tokio::time::Instant;

/// Events per Ingress: a burst of 5, then one a minute.
pub(crate) const PER_INGRESS: Rate = Rate { burst: 5.0, every: Duration::from_secs(60) };
/// Events overall: a burst of 50, then one a second.
pub(crate) const OVERALL: Rate = Rate { burst: 50.0, every: Duration::from_secs(1) };
/// Ingresses tracked at once; past it, buckets that have refilled are forgotten, and while none
/// has, Events about untracked Ingresses are suppressed. Bounds the limiter's own memory.
const MAX_TRACKED: usize = 10_000;

/// A bucket's size and how long one token takes to come back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rate {
    pub burst: f64,
    pub every: Duration,
}

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

/// The limiter: [`Limiter::allow`] says whether an Event about an Ingress may be written now.
#[derive(Debug)]
pub(crate) struct Limiter {
    per_ingress: Rate,
    overall_rate: Rate,
    overall: Bucket,
    ingresses: HashMap<(String, String), Bucket>,
}

impl Limiter {
    pub(crate) fn new(per_ingress: Rate, overall: Rate, now: Instant) -> Self {
        Limiter { per_ingress, overall_rate: overall, overall: Bucket::full(now, overall), ingresses: HashMap::new() }
    }

    /// Takes a token from the Ingress's bucket and the overall one, or neither.
    pub(crate) fn allow(&mut self, namespace: &str, name: &str, now: Instant) -> bool {
        self.overall.refill(now, self.overall_rate);
        if self.overall.tokens < 1.0 {
            return false;
        }
        let key = (namespace.to_owned(), name.to_owned());
        if !self.ingresses.contains_key(&key) && self.ingresses.len() >= MAX_TRACKED {
            let rate = self.per_ingress;
            self.ingresses.retain(|_, bucket| {
                bucket.refill(now, rate);
                bucket.tokens < rate.burst
            });
            if self.ingresses.len() >= MAX_TRACKED {
                return false;
            }
        }
        let bucket = self.ingresses.entry(key).or_insert_with(|| Bucket::full(now, self.per_ingress));
        bucket.refill(now, self.per_ingress);
        if bucket.tokens < 1.0 {
            return false;
        }
        bucket.tokens -= 1.0;
        self.overall.tokens -= 1.0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_ingress_and_overall_buckets() {
        let t0 = Instant::now();
        let per = Rate { burst: 2.0, every: Duration::from_secs(10) };
        let all = Rate { burst: 3.0, every: Duration::from_secs(1) };
        let mut l = Limiter::new(per, all, t0);
        assert!(l.allow("ns", "a", t0));
        assert!(l.allow("ns", "a", t0));
        assert!(!l.allow("ns", "a", t0), "burst of 2 per Ingress");
        assert!(l.allow("ns", "b", t0));
        assert!(!l.allow("ns", "c", t0), "burst of 3 overall");
        let t1 = t0 + Duration::from_secs(1);
        assert!(!l.allow("ns", "a", t1), "a's token comes back after 10 s");
        assert!(l.allow("ns", "c", t1), "one overall token a second");
        let t2 = t0 + Duration::from_secs(12);
        assert!(l.allow("ns", "a", t2));
    }

    #[test]
    fn tracked_ingresses_are_bounded() {
        let t0 = Instant::now();
        let many = Rate { burst: 1e9, every: Duration::from_nanos(1) };
        let per = Rate { burst: 1.0, every: Duration::from_secs(3600) };
        let mut l = Limiter::new(per, many, t0);
        for i in 0..MAX_TRACKED {
            assert!(l.allow("ns", &i.to_string(), t0));
        }
        assert!(!l.allow("ns", "one-more", t0), "no bucket has refilled: suppressed");
        assert_eq!(l.ingresses.len(), MAX_TRACKED);
        let later = t0 + Duration::from_secs(3600);
        assert!(l.allow("ns", "one-more", later), "refilled buckets are forgotten");
        assert!(l.ingresses.len() <= MAX_TRACKED);
    }
}
