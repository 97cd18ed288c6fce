//! What the reconciler concludes about one stored object ([`Judgement`]), and [`knows_enough`],
//! the rule that keeps it from acting on partial knowledge. Pure.

use crate::{
    address::Address,
    policy::Policy,
    sources::{Sources, every_source_read},
};

/// What the reconciler thinks of one stored status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Judgement {
    /// Canonical, not governed, or unresolved: nothing to measure or do.
    Fine,
    /// Off canonical; `patch` unless the policy only audits.
    Drift { policy: String, patch: bool },
}

/// Whether the reconciler knows enough to replace `stored` with `canonical` under `policy`: every
/// source of the policy (and the cluster facts matching needs) has been read, and while a source
/// is unresolved it may add addresses but never remove one, which the missing source may hold.
pub(super) fn knows_enough(policy: &Policy, stored: &[Address], canonical: &[Address], sources: &dyn Sources) -> bool {
    if !every_source_read(policy, sources) {
        return false;
    }
    let unresolved = policy.sources.iter().any(|source| sources.source(source).is_err());
    let kept = |a: &Address| canonical.iter().any(|c| c.ip == a.ip && c.hostname == a.hostname);
    !unresolved || stored.iter().all(kept)
}
