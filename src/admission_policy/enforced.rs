//! The sources the reconciler judges by in `--admission=policy`: the live caches, except that a
//! policy's canonical value is the one its admission policy in the cluster carries, once the
//! keeper has applied it. The reconciler's patches pass through that admission policy; judged by
//! a newer value than it carries, each patch would be rewritten to the old one, read as a fight
//! and backed off, until the keeper caught up.

use std::{
    borrow::Cow,
    collections::{BTreeMap, HashMap},
    sync::{Arc, RwLock},
    time::Duration,
};

use tokio::sync::watch;

use crate::{
    address::Address,
    kind::{Classes, Kind},
    policy::{PodsRef, Policy, ServiceRef, Source},
    sources::{SourceCache, Sources, Unresolved},
};

/// What the admission policies in the cluster enforce, as far as this leader knows.
#[derive(Debug)]
pub(crate) struct Enforced {
    live: Arc<SourceCache>,
    /// `None` until the keeper has completed a pass as leader: until then the reconciler does
    /// not know what the API server does to its patches, and waits ([`Sources::synced`]).
    values: RwLock<Option<HashMap<String, Vec<Address>>>>,
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

    /// After a pass: `values` per policy name are in force (`None`: not known, not leading).
    pub(crate) fn publish(&self, values: Option<HashMap<String, Vec<Address>>>) {
        *self.values.write().unwrap_or_else(std::sync::PoisonError::into_inner) = values;
        self.changed.send_modify(|g| *g += 1);
    }

    /// The values published last, for the keeper's next pass to start from.
    pub(crate) fn current(&self) -> HashMap<String, Vec<Address>> {
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

    /// The value the policy's admission policy carries, else (none applied: unresolved, or not
    /// rendered yet) what the caches say.
    fn canonical<'p>(&self, policy: &'p Policy) -> Result<Cow<'p, [Address]>, Unresolved> {
        let values = self.values.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        match values.as_ref().and_then(|v| v.get(&policy.name)) {
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
        let (a, b) = (policies.iter().next().unwrap(), others.iter().next().unwrap());
        // Before any pass, and for a policy without a published value, the caches decide.
        assert_eq!(enforced.canonical(a).unwrap().to_vec(), parse_static_list("192.0.2.1").unwrap());
        let old = parse_static_list("192.0.2.9").unwrap();
        enforced.publish(Some(HashMap::from([("a".to_owned(), old.clone())])));
        assert!(changed.has_changed().unwrap(), "the reconciler is told");
        assert!(enforced.synced());
        assert_eq!(enforced.canonical(a).unwrap().to_vec(), old, "what the admission policy carries");
        assert_eq!(enforced.canonical(b).unwrap().to_vec(), parse_static_list("192.0.2.2").unwrap());
        assert_eq!(enforced.current().len(), 1);
        enforced.publish(None);
        assert!(!enforced.synced(), "not leading: not known");
    }
}
