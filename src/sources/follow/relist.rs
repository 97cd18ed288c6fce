//! How often the watch of every object of a kind ([`super::follow_all`]) lists everything
//! again when its owner asks: once per [`RELIST_EVERY`] at most, the watch going on meanwhile.
//! A re-list costs the API server a list of every object of the kind (about 11 s at 100,000
//! Ingresses), so changes that widen what the owner keeps (a reload, a class newly governed)
//! coming faster than that must not restart it before it ends.

use std::time::Duration;

use tokio::{sync::Notify, time::Instant};

/// Re-lists asked for start at most this often; notifications meanwhile are one.
pub(crate) const RELIST_EVERY: Duration = Duration::from_secs(30);

/// Returns once `relist` is notified and `every` has passed since `last` (the start of the
/// previous re-list it allowed, if any): the first one asked for in a while starts at once.
pub(super) async fn relist_due(relist: &Notify, last: Option<Instant>, every: Duration) {
    relist.notified().await;
    if let Some(last) = last {
        tokio::time::sleep_until(last + every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn re_lists_asked_for_are_coalesced_to_one_per_interval() {
        let relist = Notify::new();
        let every = Duration::from_secs(30);
        let start = Instant::now();
        relist.notify_one();
        relist_due(&relist, None, every).await;
        assert_eq!(start.elapsed(), Duration::ZERO, "the first is not held back");
        let last = Instant::now();
        tokio::time::sleep(Duration::from_secs(1)).await;
        for _ in 0..5 {
            relist.notify_one();
        }
        relist_due(&relist, Some(last), every).await;
        assert_eq!(last.elapsed(), every, "the next waits out the interval");
        let due = tokio::time::timeout(Duration::from_secs(3600), relist_due(&relist, Some(Instant::now()), every));
        assert!(due.await.is_err(), "five notifications were one re-list");
        relist.notify_one();
        let late = Instant::now();
        relist_due(&relist, Some(last), every).await;
        assert_eq!(late.elapsed(), Duration::ZERO, "one asked for long after the last starts at once");
    }
}
