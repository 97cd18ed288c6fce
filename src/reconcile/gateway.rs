//! The Gateway side of the reconciler ([`Gateways`]): governed Gateways' stored
//! `status.addresses` judged by the webhook's own [`decide`] and healed with a merge
//! patch of `status.addresses` alone (a list, so replaced whole; conditions and listeners are
//! not in the patch), conditional on the resourceVersion as for Ingresses.

use std::borrow::Cow;

use super::{
    Key, Stored,
    judge::{Judgement, knows_enough},
    kind::{Decided, Kind},
};
use crate::{
    address::Address,
    decision::{Action, Verdict, decide},
    kind::gateway::{GatewayWrite, LeanGateway, status::GatewayAddress},
    metrics::Metrics,
    policy::Policies,
    sources::Sources,
};

/// Gateways governed by `gatewayClasses` / `gatewayControllers` policies.
pub(super) struct Gateways;

/// An entry as the damping compares it: its Ingress form, or for a type an Ingress cannot
/// express a hostname that no canonical address has (so it always reads as another writer's).
fn view(entry: &GatewayAddress) -> Address {
    entry.to_ingress().unwrap_or_else(|_| Address::hostname(format!("{}={}", entry.kind, entry.value)))
}

/// The canonical entries as written to a Gateway, and as they then read back.
fn written(canonical: &[Address]) -> (Vec<GatewayAddress>, Vec<Address>) {
    let entries = GatewayAddress::from_addresses(canonical);
    let seen = entries.iter().map(view).collect();
    (entries, seen)
}

impl Kind for Gateways {
    const NAME: &'static str = "Gateway";
    const LABEL: &'static str = "gateway";
    type Object = LeanGateway;
    type Write = GatewayWrite;

    fn project(mut obj: LeanGateway, _: &Metrics) -> Option<(Key, Stored<GatewayWrite>)> {
        let uid = obj.meta.uid.clone();
        let resource_version = obj.meta.resource_version.clone();
        let namespace = obj.meta.namespace.clone()?;
        let name = obj.meta.name.clone()?;
        // The writers of its status, as for an Ingress: a fight's WARN names them.
        let status_managers = std::mem::take(&mut obj.status_managers);
        let write = crate::check::explain_gateway::write_of(obj);
        Some(((namespace, name), Stored { write, resource_version, status_managers, uid }))
    }

    fn addresses(write: &GatewayWrite) -> Cow<'_, [Address]> {
        Cow::Owned(write.addresses.iter().map(view).collect())
    }

    fn judge(write: &GatewayWrite, policies: &Policies, sources: &dyn Sources) -> Judgement {
        match decide(write, policies, sources) {
            Verdict::Mismatch { policy, action, canonical } => {
                let (_, canonical) = written(&canonical);
                let stored = Self::addresses(write);
                Judgement::Drift {
                    policy: policy.name.clone(),
                    patch: action != Action::Audit && knows_enough(policy, &stored, &canonical, sources),
                }
            }
            Verdict::Ignored(_) | Verdict::NotGoverned | Verdict::Canonical { .. } | Verdict::Unresolved { .. } => {
                Judgement::Fine
            }
        }
    }

    fn to_patch(write: &GatewayWrite, policies: &Policies, sources: &dyn Sources) -> Option<Decided> {
        match decide(write, policies, sources) {
            Verdict::Mismatch { policy, action: Action::Rewrite | Action::Deny, canonical } => {
                let (entries, canonical) = written(&canonical);
                if !knows_enough(policy, &Self::addresses(write), &canonical, sources) {
                    return None;
                }
                let list: Vec<serde_json::Value> =
                    entries.iter().map(|e| serde_json::json!({"type": e.kind, "value": e.value})).collect();
                Some(Decided { policy: policy.name.clone(), canonical, status: serde_json::json!({"addresses": list}) })
            }
            _ => None,
        }
    }

    fn in_force(policies: &Policies) -> Vec<&str> {
        policies.gateway_policies().map(|p| p.name.as_str()).collect()
    }

    // CRDs installed after start-up are noticed within this.
    const RETRY_CAP: Option<std::time::Duration> = Some(crate::sources::gateway::RETRY_CAP);

    fn wanted(policies: &Policies) -> bool {
        policies.gateway_policies().next().is_some()
    }

    fn watch_failed(error: &kube::runtime::watcher::Error, metrics: &Metrics, first: bool) {
        // No Gateway API is the documented inactive state (logged once, named by /readyz), not
        // a failure: counting it would make a rate alert fire for as long as the CRDs are absent.
        let absent = crate::sources::gateway::is_api_absent(error);
        if !absent {
            metrics.watch_error(crate::metrics::objects::GATEWAYS);
        }
        if !first {
            return;
        }
        if absent {
            tracing::warn!(retry_every = ?crate::sources::gateway::RETRY_CAP, "the API server serves no Gateways (the Gateway API CRDs are not installed): the reconciler leaves Gateway policies inactive until they appear");
        } else {
            tracing::warn!(error = %error, "Gateway watch failed; retrying with backoff (admission keeps working from its caches)");
        }
    }
}
