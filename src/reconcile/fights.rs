//! How many fight WARN lines the reconciler logs: per policy, the first [`FULL_PER_WINDOW`]
//! fights of each [`WINDOW`] in full, the rest counted in one summary line when the window ends.
//! So the log grows with the number of policies, not of contested objects (10,000 contested
//! Ingresses logged 2,259 lines a minute before). Pure: time comes in as a value.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

/// Fights of one policy logged in full per window.
pub(super) const FULL_PER_WINDOW: u32 = 10;
/// The window the count of fights logged in full is kept over.
pub(super) const WINDOW: Duration = Duration::from_secs(60);

/// One policy's window: when it began, and its fights not logged in full.
#[derive(Debug)]
struct Window {
    began: Instant,
    full: u32,
    quiet: u64,
}

/// The summary of a window that ended with fights not logged in full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Quiet {
    pub(super) policy: String,
    pub(super) fights: u64,
}

/// The windows of the policies with a fight lately (at most one per policy in force).
#[derive(Debug, Default)]
pub(super) struct FightLog {
    windows: HashMap<String, Window>,
}

impl FightLog {
    /// A fight of `policy` at `now`: whether to log it in full.
    pub(super) fn observe(&mut self, policy: &str, now: Instant) -> bool {
        let window = self.windows.entry(policy.to_owned()).or_insert(Window { began: now, full: 0, quiet: 0 });
        if window.full < FULL_PER_WINDOW {
            window.full += 1;
            return true;
        }
        window.quiet += 1;
        false
    }

    /// Forgets the windows ended by `now`, returning those with fights not logged in full.
    pub(super) fn due(&mut self, now: Instant) -> Vec<Quiet> {
        let mut quiet = Vec::new();
        self.windows.retain(|policy, w| {
            let ended = now.saturating_duration_since(w.began) >= WINDOW;
            if ended && w.quiet > 0 {
                quiet.push(Quiet { policy: policy.clone(), fights: w.quiet });
            }
            !ended
        });
        quiet.sort_by(|a, b| a.policy.cmp(&b.policy));
        quiet
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fights_past_the_first_of_a_window_are_counted_per_policy_and_summarised_once() {
        let t0 = Instant::now();
        let mut log = FightLog::default();
        let full: usize = (0..10_000).filter(|_| log.observe("a", t0)).count();
        assert_eq!(full, FULL_PER_WINDOW as usize, "10,000 fights of one policy: the first ten in full");
        assert!(log.observe("b", t0), "another policy has a window of its own");
        assert!(log.due(t0 + WINDOW / 2).is_empty(), "not before the window ends");
        let due = log.due(t0 + WINDOW);
        assert_eq!(due, [Quiet { policy: "a".into(), fights: 10_000 - u64::from(FULL_PER_WINDOW) }]);
        assert!(log.due(t0 + WINDOW * 2).is_empty(), "said once; b's window ended with none to say");
        assert!(log.observe("a", t0 + WINDOW), "a new window logs in full again");
    }
}
