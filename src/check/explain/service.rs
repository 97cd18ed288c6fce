//! What `check` and `explain` say of a Service ([`Explained`]): it is read as its lean
//! projection (a Service that is not `type: LoadBalancer` says so and is never governed), its
//! class is `spec.loadBalancerClass`, its policies' class field `loadBalancerClasses`, and a
//! governing policy's line says what kube-proxy does with the addresses it would write.

use crate::kind::{
    ingress::{StatusShape, bounded::INVALID_CLASS},
    service::{LeanService, NO_CLASS, NOT_LOAD_BALANCER, ServiceWrite, Services},
};
use crate::{
    check::Explained,
    names,
    policy::{self, ClassRule, Source},
    review,
    sources::Sources,
};

/// A stored Service.
pub(crate) type StoredService = super::Leaned<ServiceWrite, StatusShape>;

impl Explained for Services {
    type Read = LeanService;
    type Stored = StoredService;
    const LISTED: &'static str = "Services";

    fn stored(service: LeanService) -> StoredService {
        let shape = service.shape;
        // The API server names every object it returns: `leaned` always has a write.
        let write = <Self as crate::kind::Governed>::leaned(service).map(|lean| lean.write).unwrap_or_default();
        StoredService { write, shape }
    }

    fn stored_write(stored: &StoredService) -> &ServiceWrite {
        &stored.write
    }

    fn review_target(stored: &StoredService) -> review::Target<'static> {
        let write = stored.write.clone();
        let status = review::Status { write, object_uid: None, shape: stored.shape, forged: None, metadata: None };
        review::Target::Service(status)
    }

    fn class_shown(stored: &StoredService, _: &dyn Sources) -> String {
        match stored.write.class.as_deref() {
            Some(NOT_LOAD_BALANCER) => "none: not type LoadBalancer, so never governed".to_owned(),
            Some(NO_CLASS) | None => "\"\" (no spec.loadBalancerClass)".to_owned(),
            Some(INVALID_CLASS) => "not a qualified name, so no class".to_owned(),
            Some(class) => format!("{:?} (from spec.loadBalancerClass)", names::truncate(class, 80, usize::MAX)),
        }
    }

    /// The policy's classes, and what kube-proxy does with the canonical addresses, which it
    /// programs on every node from a LoadBalancer Service's status.
    fn governs_shown(policy: &policy::Policy) -> String {
        let own = policy.sources.iter().any(|s| matches!(s, Source::Static(_) | Source::Pods(_)));
        let whose = if own {
            "addresses that are not the load balancer's (acknowledgeKubeProxyImpact)"
        } else {
            "the source's load-balancer addresses"
        };
        format!(
            "; governs {}; kube-proxy: each canonical IP ({whose}) is written with ipMode VIP, so kube-proxy routes traffic to it from inside the cluster straight to this Service's endpoints on every node instead of through the load balancer; an entry with ipMode Proxy would leave it to the load balancer",
            scope_shown(policy)
        )
    }

    fn none_shown(policies: &policy::Policies) -> String {
        let why: Vec<String> = policies
            .of(crate::kind::Kind::Service)
            .map(|p| format!("policy {:?} governs {}", p.name, scope_shown(p)))
            .collect();
        if why.is_empty() { "no policy governs Services".to_owned() } else { why.join("; ") }
    }

    /// A Service that is not `type: LoadBalancer` is never governed, so never reported.
    fn listed(write: &ServiceWrite) -> bool {
        write.class.as_deref() != Some(NOT_LOAD_BALANCER)
    }

    /// A Service matches by its class alone (every Service policy lists its classes).
    fn rule_shown(rule: &ClassRule) -> String {
        match rule {
            ClassRule::ClassName => "its spec.loadBalancerClass (\"\": none) is in loadBalancerClasses".to_owned(),
            other => other.to_string(),
        }
    }
}

/// What a Service policy governs, as `explain` says it.
fn scope_shown(policy: &policy::Policy) -> String {
    let classes: Vec<String> = policy.scope.classes.iter().map(|c| format!("{c:?}")).collect();
    let namespaces =
        policy.namespace_selector.as_ref().map_or_else(String::new, |s| format!(", in Namespaces labelled {s}"));
    format!("LoadBalancer Services of loadBalancerClasses [{}]{namespaces}", classes.join(","))
}
