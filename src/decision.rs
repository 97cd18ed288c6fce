//! The decision: given a status write of any governed kind, the policies and the sources, what is
//! canonical and what to do about it. Pure; the webhook, the reconciler and `check` call it alike.

use std::borrow::Cow;

use crate::{
    address::Address,
    kind::{Governed, Write},
    policy::{Mode, OnUnresolved, Policies, Policy, Subject},
    sources::{Sources, Unresolved},
};

/// What a policy does with a write that differs from the canonical addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Rewrite,
    Audit,
    Deny,
}

impl From<Mode> for Action {
    fn from(mode: Mode) -> Self {
        match mode {
            Mode::Enforce => Action::Rewrite,
            Mode::Audit => Action::Audit,
            Mode::Deny => Action::Deny,
        }
    }
}

impl Action {
    /// The `result` of the webhook's answer when it takes this action.
    pub fn result(self) -> &'static str {
        match self {
            Action::Rewrite => "patched",
            Action::Audit => "audited",
            Action::Deny => "denied",
        }
    }
}

/// Everything [`decide`] can conclude; each variant maps to one response shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict<'p> {
    /// Not a status UPDATE of a governed kind; says what the request was.
    Ignored(String),
    /// No policy governs the object.
    NotGoverned,
    /// The written addresses are already canonical; under a trusted-writer policy, a write by
    /// anyone else that leaves the stored status as it is.
    Canonical { policy: &'p Policy },
    /// The policy's source is its trusted writers and the status stands as written: a trusted
    /// identity wrote it, or it is stored, which no source can recompute.
    Trusted { policy: &'p Policy },
    /// The written addresses differ from the canonical ones (under a trusted-writer policy, the
    /// stored status shown as addresses; the rewrite restores the stored entries themselves).
    Mismatch { policy: &'p Policy, action: Action, canonical: Cow<'p, [Address]> },
    /// The policy's source has no addresses now; `deny` refuses the write until it has.
    Unresolved { policy: &'p Policy, deny: bool, reason: Unresolved },
}

impl<'p> Verdict<'p> {
    /// The policy that governs the write, if one does.
    pub fn policy(&self) -> Option<&'p Policy> {
        match self {
            Verdict::Canonical { policy }
            | Verdict::Trusted { policy }
            | Verdict::Mismatch { policy, .. }
            | Verdict::Unresolved { policy, .. } => Some(policy),
            Verdict::Ignored(_) | Verdict::NotGoverned => None,
        }
    }

    /// The label this verdict is counted under (`admission_requests_total{result}`).
    pub fn result(&self) -> &'static str {
        match self {
            Verdict::Ignored(_) => "ignored",
            Verdict::NotGoverned => "not_governed",
            Verdict::Canonical { .. } => "unchanged",
            Verdict::Trusted { .. } => "trusted",
            Verdict::Mismatch { action, .. } => action.result(),
            Verdict::Unresolved { deny: false, .. } => "unresolved",
            Verdict::Unresolved { deny: true, .. } => "unresolved_denied",
        }
    }
}

/// What matching needs to know about `write`'s object, read only when a policy of its kind needs it.
pub(crate) fn subject<'w, K: Governed>(
    write: &'w Write<K::Entry>,
    policies: &Policies,
    sources: &dyn Sources,
) -> Subject<'w> {
    let kind = K::KIND;
    let classes = policies.need_classes(kind);
    let default_classes = match classes && write.class.is_none() {
        true => {
            let with_controller = |class: String| (sources.class_controller(kind, &class), class);
            sources.default_classes(kind).into_iter().map(with_controller).map(|(ctl, class)| (class, ctl)).collect()
        }
        false => Vec::new(),
    };
    Subject {
        namespace: &write.namespace,
        class: write.class.as_deref(),
        class_controller: write.class.as_deref().filter(|_| classes).and_then(|c| sources.class_controller(kind, c)),
        default_classes,
        namespace_labels: if policies.need_namespaces() { sources.namespace_labels(&write.namespace) } else { None },
    }
}

/// The first two policies that both match `write`, when more than one does: a run-time overlap.
pub(crate) fn overlap<'p, K: Governed>(
    write: &Write<K::Entry>,
    policies: &'p Policies,
    sources: &dyn Sources,
) -> Option<(&'p Policy, &'p Policy)> {
    let subject = subject::<K>(write, policies, sources);
    match policies.matching(K::KIND, &subject)[..] {
        [first, second, ..] => Some((first, second)),
        _ => None,
    }
}

/// Who sent a reviewed status write, and the stored status it would replace: what a
/// trusted-writer policy judges by.
pub(crate) struct Author<'a, E> {
    /// `request.userInfo.username`, bounded by the reader.
    pub(crate) username: &'a str,
    /// The stored status list, read only when an untrusted write must be compared with it.
    pub(crate) stored: &'a dyn Fn() -> Result<Write<E>, String>,
}

/// Decides one stored status of any governed kind (no writer).
pub(crate) fn decide<'p, K: Governed>(
    write: &Write<K::Entry>,
    policies: &'p Policies,
    sources: &dyn Sources,
) -> Verdict<'p> {
    decide_by::<K>(write, None, policies, sources)
}

/// Decides one status write of any governed kind, by `author` when it comes from a review.
pub(crate) fn decide_by<'p, K: Governed>(
    write: &Write<K::Entry>,
    author: Option<&Author<'_, K::Entry>>,
    policies: &'p Policies,
    sources: &dyn Sources,
) -> Verdict<'p> {
    let Some(policy) = policies.governing(K::KIND, &subject::<K>(write, policies, sources)) else {
        return Verdict::NotGoverned;
    };
    if let Some(writers) = policy.trusted_writers() {
        return trusted::<K>(write, author, policy, writers);
    }
    let unresolved = |reason| Verdict::Unresolved { policy, deny: policy.on_unresolved == OnUnresolved::Deny, reason };
    let canonical = match sources.canonical(policy) {
        Err(reason) => return unresolved(reason),
        Ok(canonical) => canonical,
    };
    let entries = match K::entries(&canonical) {
        Err(too_many) => return unresolved(too_many.into()),
        Ok(entries) => entries,
    };
    // A list longer than the reader keeps is longer than any canonical one.
    if write.omitted == 0 && K::same(&write.addresses, &entries) {
        Verdict::Canonical { policy }
    } else {
        Verdict::Mismatch { policy, action: policy.mode.into(), canonical }
    }
}

/// The verdict of a trusted-writer policy: a trusted identity's write, and a stored status, stand
/// as written; anyone else's is compared with the stored list entry by entry, in order (as the
/// admission policy compares it), and `enforce` restores it.
fn trusted<'p, K: Governed>(
    write: &Write<K::Entry>,
    author: Option<&Author<'_, K::Entry>>,
    policy: &'p Policy,
    writers: &crate::policy::TrustedWriters,
) -> Verdict<'p> {
    let Some(author) = author.filter(|a| !writers.contains(a.username)) else {
        return Verdict::Trusted { policy };
    };
    let stored = match (author.stored)() {
        Ok(stored) => stored,
        Err(why) => {
            let deny = policy.mode == crate::policy::Mode::Deny;
            return Verdict::Unresolved { policy, deny, reason: Unresolved::StoredStatus(why) };
        }
    };
    if write.omitted == 0 && stored.omitted == 0 && write.addresses == stored.addresses {
        return Verdict::Canonical { policy };
    }
    // A stored list longer than the reader keeps cannot be put back whole: refused instead.
    let action = match Action::from(policy.mode) {
        Action::Rewrite if stored.omitted > 0 => Action::Deny,
        action => action,
    };
    Verdict::Mismatch { policy, action, canonical: Cow::Owned(K::shown(stored.addresses)) }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod matching_and_union;
