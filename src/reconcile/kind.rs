//! What the reconciler does with one governed kind, written once over [`Governed`]: the kept
//! projection of a watched object, the judgement of its stored status, the patch, the watch's
//! failures.

use std::borrow::Cow;

use super::{
    cache::{Key, Shared, Stored},
    judge::{Judgement, knows_enough},
};
use crate::{
    address::Address,
    decision::{Action, Verdict, decide},
    kind::{Governed, Write},
    metrics::Metrics,
    policy::{Policies, Policy},
    sources::{Sources, follow::Projected},
};

/// A patch to send: its policy, the canonical addresses (as damping compares them), the `status`.
pub(super) struct Decided {
    pub(super) policy: String,
    pub(super) canonical: Vec<Address>,
    pub(super) status: serde_json::Value,
}

/// The kept projection of a watched or read object; `None` without a namespace and name.
pub(super) fn project<K: Governed>(
    obj: K::Lean,
    metrics: &Metrics,
    interner: &Shared<K::Entry>,
) -> Option<(Key, Stored<K::Entry>)> {
    match project_kept::<K>(obj, metrics, interner, |_, _| true) {
        Projected::Keep(key, stored) => Some((key, stored)),
        Projected::Gone(_) | Projected::Skip => None,
    }
}

/// The projection of a watched object if `admits` its namespace and class, else [`Projected::Gone`].
pub(super) fn project_kept<K: Governed>(
    obj: K::Lean,
    metrics: &Metrics,
    interner: &Shared<K::Entry>,
    admits: impl FnOnce(&str, Option<&str>) -> bool,
) -> Projected<Key, Stored<K::Entry>> {
    let Some(leaned) = K::leaned(obj) else { return Projected::Skip };
    // Counts what the reader bounded, of every object read (kept or not).
    for field in K::trimmed(&leaned.write).into_iter().flatten() {
        metrics.ingress_cache_trimmed(field);
    }
    if !admits(&leaned.write.namespace, leaned.write.class.as_deref()) {
        let Write { namespace, name, .. } = leaned.write;
        return Projected::Gone((namespace.into(), name.into_boxed_str()));
    }
    let (key, stored) = interner.lock().unwrap_or_else(std::sync::PoisonError::into_inner).store(leaned);
    Projected::Keep(key, stored)
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
    let Verdict::Mismatch { policy, action, canonical } = decide::<K>(write, policies, sources) else {
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
            patch: m.action != Action::Audit && knows_enough(m.policy, &K::seen(&write.addresses), &m.seen, sources),
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
    (rewrite && knows_enough(m.policy, &K::seen(&write.addresses), &m.seen, sources)).then(|| Decided {
        policy: m.policy.name.clone(),
        status: K::status(&m.entries),
        canonical: m.seen,
    })
}

/// Counts and logs one failure of the watch; `first` of a streak (one line per streak).
pub(super) fn watch_failed<K: Governed>(error: &kube::runtime::watcher::Error, metrics: &Metrics, first: bool) {
    let info = K::KIND.info();
    // An API not served is the documented inactive state (logged once, named by /readyz), not a
    // failure: counting it would make a rate alert fire for as long as the CRDs are absent.
    let absent = info.optional_api.filter(|_| crate::sources::follow::is_api_absent(error));
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
