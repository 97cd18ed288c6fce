//! What the reconciler needs to know of one kind of object it keeps canonical ([`Kind`]), and
//! the Ingress side of it ([`Ingresses`]); Gateways are in [`super::gateway`]. The glue in
//! `reconcile.rs` (watch, queue, damping, leader, conflicts) is shared by both.

use std::{borrow::Cow, fmt::Debug};

use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use serde::de::DeserializeOwned;

use super::{
    Key, Stored,
    judge::{Judgement, judge, knows_enough},
};
use crate::{
    address::Address,
    decision::{Action, Verdict, decide},
    kind::ingress::{LeanIngress, StatusWrite, bounded},
    metrics::Metrics,
    policy::Policies,
    sources::Sources,
};

/// A patch the reconciler is to send: under which policy, the canonical addresses (as the
/// damping compares them) and the `status` fields to merge.
pub(super) struct Decided {
    pub(super) policy: String,
    pub(super) canonical: Vec<Address>,
    pub(super) status: serde_json::Value,
}

/// One kind of object the reconciler keeps canonical.
pub(super) trait Kind: Send + Sync + Sized + 'static {
    /// The kind as logs name it.
    const NAME: &'static str;
    /// The kind as the `kind` label of metrics names it (as `check`'s KIND column does).
    const LABEL: &'static str;
    /// The lean projection the watch deserializes.
    type Object: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + DeserializeOwned
        + Clone
        + Debug
        + Send
        + Sync
        + 'static;
    /// What `decide` reads of one object.
    type Write: Send + Sync + 'static;

    /// The kept projection of a watched or read object; `None` without a namespace and name.
    fn project(obj: Self::Object, metrics: &Metrics) -> Option<(Key, Stored<Self::Write>)>;
    /// The stored addresses as the damping and the foreign-write check compare them.
    fn addresses(write: &Self::Write) -> Cow<'_, [Address]>;
    /// The reconciler's judgement of a stored status.
    fn judge(write: &Self::Write, policies: &Policies, sources: &dyn Sources) -> Judgement;
    /// The patch to send, if `decide` still says to rewrite and enough is known.
    fn to_patch(write: &Self::Write, policies: &Policies, sources: &dyn Sources) -> Option<Decided>;
    /// The policies that govern this kind: their gauges are published.
    fn in_force(policies: &Policies) -> Vec<&str>;
    /// Longest wait between two attempts of a failing watch (`None`: kube's default backoff).
    const RETRY_CAP: Option<std::time::Duration>;
    /// Whether the policies need the watch at all; it starts the first time they do.
    fn wanted(policies: &Policies) -> bool;
    /// Counts and logs one failure of the watch; `first` of a streak (one line per streak).
    fn watch_failed(error: &kube::runtime::watcher::Error, metrics: &Metrics, first: bool);
}

/// Which bound of the lean projection an Ingress hit, if any ([`bounded`]).
pub(super) fn trimmed(write: &StatusWrite) -> [Option<&'static str>; 2] {
    let class = write.class.as_deref() == Some(bounded::INVALID_CLASS);
    let overflow = write.omitted > 0;
    [class.then_some("class"), overflow.then_some("addresses")]
}

/// Ingresses: `status.loadBalancer.ingress`.
pub(super) struct Ingresses;

impl Kind for Ingresses {
    const NAME: &'static str = "Ingress";
    const LABEL: &'static str = "ingress";
    type Object = LeanIngress;
    type Write = StatusWrite;

    fn project(obj: LeanIngress, metrics: &Metrics) -> Option<(Key, Stored<StatusWrite>)> {
        let status_managers = obj.status_managers.clone();
        let uid = obj.meta.uid.clone();
        let (write, resource_version) = obj.into_write()?;
        for field in trimmed(&write).into_iter().flatten() {
            metrics.ingress_cache_trimmed(field);
        }
        let key = (write.namespace.clone(), write.name.clone());
        Some((key, Stored { write, resource_version, status_managers, uid }))
    }

    fn addresses(write: &StatusWrite) -> Cow<'_, [Address]> {
        Cow::Borrowed(&write.addresses)
    }

    fn judge(write: &StatusWrite, policies: &Policies, sources: &dyn Sources) -> Judgement {
        judge(write, policies, sources)
    }

    fn to_patch(write: &StatusWrite, policies: &Policies, sources: &dyn Sources) -> Option<Decided> {
        match decide(write, policies, sources) {
            Verdict::Mismatch { policy, action: Action::Rewrite | Action::Deny, canonical }
                if knows_enough(policy, &write.addresses, &canonical, sources) =>
            {
                let status = serde_json::json!({"loadBalancer": {"ingress": canonical}});
                Some(Decided { policy: policy.name.clone(), canonical: canonical.into_owned(), status })
            }
            _ => None,
        }
    }

    fn in_force(policies: &Policies) -> Vec<&str> {
        policies.iter().map(|p| p.name.as_str()).collect()
    }

    const RETRY_CAP: Option<std::time::Duration> = None;

    fn wanted(_: &Policies) -> bool {
        true
    }

    fn watch_failed(error: &kube::runtime::watcher::Error, metrics: &Metrics, first: bool) {
        metrics.watch_error(crate::metrics::objects::INGRESSES);
        if first {
            tracing::warn!(error = %error, "Ingress watch failed; retrying with backoff (admission keeps working from its caches)");
        }
    }
}
