//! The sources the reconciler judges by in `--admission=policy`: the live caches, except that a
//! policy's canonical value is the one its admission policy in the cluster carries. The
//! reconciler's patches pass through that policy: judged by a newer value, each would be
//! rewritten to the old one and read as a fight. A policy another guard holds has no value at
//! all ([`Unresolved::HeldByAnotherGuard`]): that guard's policy enforces, and this one stays off.

use std::{
    borrow::Cow,
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{Arc, RwLock},
    time::Duration,
};

use tokio::sync::watch;

use super::desired::Desired;
use crate::{
    address::Address,
    kind::{Classes, Kind},
    policy::{PodsRef, Policy, ServiceRef, Source},
    sources::{SourceCache, Sources, Unresolved},
};

/// What one pass of the keeper found in force, by policy name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct InForce {
    /// The value this guard's admission policy carries.
    pub(crate) values: HashMap<String, Vec<Address>>,
    /// The policies whose objects another guard holds, with that guard's owner label.
    pub(crate) held: BTreeMap<String, String>,
}

/// What is in force after a pass that wrote `plan`, from `previous`: a rendered policy's value
/// once written; the previous value of a kept one or a failed write (the old object still
/// enforces); nothing for a removed one; and no value but the owner for a policy whose object
/// another owner holds (`foreign`: object name to owner label; a kept policy stays held).
pub(crate) fn in_force(
    previous: InForce,
    plan: &Desired,
    failed: &BTreeSet<String>,
    foreign: &BTreeMap<String, String>,
) -> InForce {
    let InForce { mut values, held } = previous;
    let rendered = |policy: &str| plan.values.iter().any(|(name, _)| name == policy);
    values.retain(|policy, _| plan.kept_policies.contains(policy) || rendered(policy));
    let mut held: BTreeMap<String, String> =
        held.into_iter().filter(|(policy, _)| plan.kept_policies.contains(policy)).collect();
    for (policy, value) in &plan.values {
        let name = plan.names.iter().find(|(p, _)| p == policy).map(|(_, n)| n);
        match name.and_then(|n| foreign.get(n)) {
            Some(owner) => {
                values.remove(policy);
                held.insert(policy.clone(), owner.clone());
            }
            None if name.is_some_and(|n| failed.contains(n)) => {}
            None => {
                values.insert(policy.clone(), value.clone());
            }
        }
    }
    for policy in held.keys() {
        values.remove(policy);
    }
    InForce { values, held }
}

/// What the admission policies in the cluster enforce, as far as this leader knows.
#[derive(Debug)]
pub(crate) struct Enforced {
    live: Arc<SourceCache>,
    /// `None` until the keeper has completed a pass as leader: until then the reconciler does
    /// not know what the API server does to its patches, and waits ([`Sources::synced`]).
    values: RwLock<Option<InForce>>,
    /// Ticks after each pass of the keeper, which itself follows every change of the caches.
    changed: watch::Sender<u64>,
}

impl Enforced {
    pub(crate) fn new(live: Arc<SourceCache>) -> Arc<Self> {
        Arc::new(Enforced { live, values: RwLock::new(None), changed: watch::Sender::new(0) })
    }

    /// Ticks whenever what the reconciler judges by may have changed.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// After a pass: `values` are in force (`None`: not known, not leading).
    pub(crate) fn publish(&self, values: Option<InForce>) {
        *self.values.write().unwrap_or_else(std::sync::PoisonError::into_inner) = values;
        self.changed.send_modify(|g| *g += 1);
    }

    /// The values published last, for the keeper's next pass to start from.
    pub(crate) fn current(&self) -> InForce {
        self.values.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone().unwrap_or_default()
    }
}

impl Sources for Enforced {
    fn service(&self, svc: &ServiceRef) -> Result<Vec<Address>, Unresolved> {
        self.live.service(svc)
    }

    fn synced(&self) -> bool {
        self.values.read().unwrap_or_else(std::sync::PoisonError::into_inner).is_some() && self.live.synced()
    }

    fn cache_ages(&self) -> Vec<(String, Duration)> {
        self.live.cache_ages()
    }

    fn pods(&self, pods: &PodsRef) -> Result<Vec<Address>, Unresolved> {
        self.live.pods(pods)
    }

    fn classes(&self, kind: Kind) -> Option<Classes> {
        self.live.classes(kind)
    }

    fn class_controller(&self, kind: Kind, class: &str) -> Option<String> {
        self.live.class_controller(kind, class)
    }

    fn default_classes(&self, kind: Kind) -> Vec<String> {
        self.live.default_classes(kind)
    }

    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.live.namespace_labels(namespace)
    }

    fn source(&self, source: &Source) -> Result<Vec<Address>, Unresolved> {
        self.live.source(source)
    }

    /// The value the policy's admission policy carries; none for a policy another guard holds;
    /// else (none applied yet) what the caches say.
    fn canonical<'p>(&self, policy: &'p Policy) -> Result<Cow<'p, [Address]>, Unresolved> {
        let values = self.values.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(owner) = values.as_ref().and_then(|v| v.held.get(&policy.name)) {
            return Err(Unresolved::HeldByAnotherGuard(owner.clone()));
        }
        match values.as_ref().and_then(|v| v.values.get(&policy.name)) {
            Some(value) => Ok(Cow::Owned(value.clone())),
            None => {
                drop(values);
                self.live.canonical(policy)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{address::parse_static_list, policy::parse_file};

    #[test]
    fn the_published_value_is_canonical_until_the_next_pass() {
        let parse = |name: &str, ip: &str| {
            let file = format!(
                "policies:\n- {{name: {name}, ingressClasses: [{name}], watchIngressWithoutClass: true, publishStatusAddress: {ip}}}\n"
            );
            parse_file("t", &file).unwrap()
        };
        let (policies, others) = (parse("a", "192.0.2.1"), parse("b", "192.0.2.2"));
        let enforced = Enforced::new(SourceCache::new(&policies));
        let changed = enforced.subscribe();
        assert!(!enforced.synced(), "not before the keeper's first pass");
        let (a, b) = (
            policies.of(crate::kind::Kind::Ingress).next().unwrap(),
            others.of(crate::kind::Kind::Ingress).next().unwrap(),
        );
        // Before any pass, and for a policy without a published value, the caches decide.
        assert_eq!(enforced.canonical(a).unwrap().to_vec(), parse_static_list("192.0.2.1").unwrap());
        let old = parse_static_list("192.0.2.9").unwrap();
        enforced
            .publish(Some(InForce { values: HashMap::from([("a".to_owned(), old.clone())]), ..InForce::default() }));
        assert!(changed.has_changed().unwrap(), "the reconciler is told");
        assert!(enforced.synced());
        assert_eq!(enforced.canonical(a).unwrap().to_vec(), old, "what the admission policy carries");
        assert_eq!(enforced.canonical(b).unwrap().to_vec(), parse_static_list("192.0.2.2").unwrap());
        assert_eq!(enforced.current().values.len(), 1);
        // Held by another guard: no value, not even the caches' (hands off), until it is not.
        let held = InForce { held: BTreeMap::from([("a".to_owned(), "other.isg".to_owned())]), ..InForce::default() };
        enforced.publish(Some(held));
        assert_eq!(enforced.canonical(a), Err(Unresolved::HeldByAnotherGuard("other.isg".to_owned())));
        assert_eq!(enforced.canonical(b).unwrap().to_vec(), parse_static_list("192.0.2.2").unwrap());
        enforced.publish(None);
        assert!(!enforced.synced(), "not leading: not known");
    }

    #[test]
    fn a_policy_another_guard_holds_has_no_value_but_its_owner() {
        let v = |s: &str| parse_static_list(s).unwrap();
        let plan = |rendered: &[&str], kept: &[&str]| Desired {
            values: rendered.iter().map(|p| ((*p).to_owned(), v("192.0.2.1"))).collect(),
            names: rendered.iter().chain(kept).map(|p| ((*p).to_owned(), format!("isg-{p}"))).collect(),
            kept_policies: kept.iter().map(|p| (*p).to_owned()).collect(),
            ..Desired::default()
        };
        let owner = |names: &[&str]| names.iter().map(|n| (format!("isg-{n}"), "ns.isg".to_owned())).collect();
        let previous = InForce {
            values: ["theirs", "broken", "gone", "kept"].iter().map(|p| ((*p).to_owned(), v("192.0.2.9"))).collect(),
            held: BTreeMap::new(),
        };
        let failed = BTreeSet::from(["isg-broken".to_owned()]);
        let first = in_force(previous, &plan(&["mine", "theirs", "broken"], &["kept"]), &failed, &owner(&["theirs"]));
        let want = |pairs: &[(&str, &str)]| -> HashMap<String, Vec<Address>> {
            pairs.iter().map(|(p, a)| ((*p).to_owned(), v(a))).collect()
        };
        assert_eq!(
            first.values,
            want(&[("mine", "192.0.2.1"), ("broken", "192.0.2.9"), ("kept", "192.0.2.9")]),
            "the held policy has no value (not even its old one); a failed write keeps the last; gone is gone"
        );
        assert_eq!(first.held, BTreeMap::from([("theirs".to_owned(), "ns.isg".to_owned())]));
        // Kept (not written this pass): still held, still no value.
        let kept = in_force(first.clone(), &plan(&["mine"], &["theirs"]), &BTreeSet::new(), &BTreeMap::new());
        assert_eq!(kept.held, first.held);
        assert!(!kept.values.contains_key("theirs"));
        // The other guard gone: this guard's value is in force again.
        let freed = in_force(kept, &plan(&["mine", "theirs"], &[]), &BTreeSet::new(), &BTreeMap::new());
        assert!(freed.held.is_empty());
        assert_eq!(freed.values, want(&[("mine", "192.0.2.1"), ("theirs", "192.0.2.1")]));
    }
}
