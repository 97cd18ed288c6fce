//! What the reconciler does with one governed kind, written once over [`Governed`]: the kept
//! projection of a watched object, the judgement of its stored status, the patch, and the
//! watch's life (wanted, retried, failing). The glue in `reconcile.rs` (watch, queue, damping,
//! leader, conflicts) is shared by every kind.

use std::borrow::Cow;

use super::{
    Key, Stored,
    judge::{Judgement, knows_enough},
};
use crate::{
    address::Address,
    decision::{Action, Verdict, decide},
    kind::{Governed, Write},
    metrics::Metrics,
    policy::{Policies, Policy},
    sources::Sources,
};

/// A patch the reconciler is to send: under which policy, the canonical addresses (as the
/// damping compares them) and the `status` fields to merge.
pub(super) struct Decided {
    pub(super) policy: String,
    pub(super) canonical: Vec<Address>,
    pub(super) status: serde_json::Value,
}

/// The kept projection of a watched or read object; `None` without a namespace and name.
pub(super) fn project<K: Governed>(obj: K::Lean, metrics: &Metrics) -> Option<(Key, Stored<Write<K::Entry>>)> {
    let leaned = K::leaned(obj)?;
    for field in K::trimmed(&leaned.write).into_iter().flatten() {
        metrics.ingress_cache_trimmed(field);
    }
    let key = (leaned.write.namespace.clone(), leaned.write.name.clone());
    let stored = Stored {
        write: leaned.write,
        resource_version: leaned.resource_version,
        status_managers: leaned.status_managers,
        uid: leaned.uid,
    };
    Some((key, stored))
}

/// The stored addresses as the damping and the foreign-write check compare them.
pub(super) fn addresses<K: Governed>(write: &Write<K::Entry>) -> Cow<'_, [Address]> {
    K::seen(&write.addresses)
}

/// A mismatch `decide` found, with the canonical entries (as written and as they read back).
struct Mismatch<'p, E: Clone + 'static> {
    policy: &'p Policy,
    action: Action,
    entries: Cow<'p, [E]>,
    seen: Vec<Address>,
}

fn mismatch<'p, K: Governed>(
    write: &Write<K::Entry>,
    policies: &'p Policies,
    sources: &dyn Sources,
) -> Option<Mismatch<'p, K::Entry>> {
    let Verdict::Mismatch { policy, action, canonical } = decide(write, policies, sources) else {
        return None;
    };
    let entries = match canonical {
        Cow::Borrowed(canonical) => K::entries(canonical).ok()?,
        Cow::Owned(canonical) => Cow::Owned(K::entries(&canonical).ok()?.into_owned()),
    };
    let seen = K::seen(&entries).into_owned();
    Some(Mismatch { policy, action, entries, seen })
}

/// The reconciler's judgement of a stored status.
pub(super) fn judge<K: Governed>(write: &Write<K::Entry>, policies: &Policies, sources: &dyn Sources) -> Judgement {
    match mismatch::<K>(write, policies, sources) {
        Some(m) => Judgement::Drift {
            policy: m.policy.name.clone(),
            patch: m.action != Action::Audit && knows_enough(m.policy, &addresses::<K>(write), &m.seen, sources),
        },
        None => Judgement::Fine,
    }
}

/// The patch to send, if `decide` still says to rewrite and enough is known.
pub(super) fn to_patch<K: Governed>(
    write: &Write<K::Entry>,
    policies: &Policies,
    sources: &dyn Sources,
) -> Option<Decided> {
    let m = mismatch::<K>(write, policies, sources)?;
    let rewrite = matches!(m.action, Action::Rewrite | Action::Deny);
    (rewrite && knows_enough(m.policy, &addresses::<K>(write), &m.seen, sources)).then(|| Decided {
        policy: m.policy.name.clone(),
        status: K::status(&m.entries),
        canonical: m.seen,
    })
}

/// The policies that govern this kind: their gauges are published.
pub(super) fn in_force<K: Governed>(policies: &Policies) -> Vec<&str> {
    policies.of(K::KIND).map(|p| p.name.as_str()).collect()
}

/// Whether the policies need the watch at all; it starts the first time they do. A kind whose
/// API is always served is always watched.
pub(super) fn wanted<K: Governed>(policies: &Policies) -> bool {
    K::KIND.info().optional_api.is_none() || policies.of(K::KIND).next().is_some()
}

/// Longest wait between two attempts of a failing watch (`None`: kube's default backoff): an
/// API installed after start-up is noticed within it.
pub(super) fn retry_cap<K: Governed>() -> Option<std::time::Duration> {
    K::KIND.info().optional_api.map(|_| crate::sources::gateway::RETRY_CAP)
}

/// Counts and logs one failure of the watch; `first` of a streak (one line per streak).
pub(super) fn watch_failed<K: Governed>(error: &kube::runtime::watcher::Error, metrics: &Metrics, first: bool) {
    let info = K::KIND.info();
    // An API not served is the documented inactive state (logged once, named by /readyz), not a
    // failure: counting it would make a rate alert fire for as long as the CRDs are absent.
    let absent = info.optional_api.filter(|_| crate::sources::gateway::is_api_absent(error));
    if absent.is_none() {
        metrics.watch_error(info.plural);
    }
    if !first {
        return;
    }
    let name = info.name;
    match absent {
        Some(why) => {
            tracing::warn!(retry_every = ?crate::sources::gateway::RETRY_CAP, "the API server serves no {name}s ({why}): the reconciler leaves {name} policies inactive until they appear");
        }
        None => {
            tracing::warn!(error = %error, "{name} watch failed; retrying with backoff (admission keeps working from its caches)");
        }
    }
}
