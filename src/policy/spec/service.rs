//! A `kind: Service` policy's validation: `loadBalancerClasses`, its mode's default, and the
//! acknowledgement a source whose addresses are not a load balancer's needs (kube-proxy programs
//! every node from a LoadBalancer Service's status).

use super::{PolicySpec, SpecError};
use crate::{
    kind::Kind,
    policy::{Mode, Policy, Source},
};

impl PolicySpec {
    /// A `kind: Service` policy: its `loadBalancerClasses` are its class names (`""` for Services
    /// without one), and `mode` defaults to `audit`.
    pub(super) fn build_service(mut self) -> Result<Policy, SpecError> {
        use crate::kind::service::NO_CLASS;
        let classes = std::mem::take(&mut self.load_balancer_classes);
        if classes.is_empty() {
            return Err(SpecError::NoLoadBalancerClasses);
        }
        if let Some(bad) = classes.iter().find(|c| c.as_str() != NO_CLASS && !crate::names::is_label_key(c)) {
            return Err(SpecError::InvalidLoadBalancerClass(bad.clone()));
        }
        let mode = self.mode.unwrap_or(Mode::Audit);
        let acknowledged = self.acknowledge_kube_proxy_impact;
        let mut policy = self.build_one()?;
        if !acknowledged {
            let guards_own = policy.sources.iter().find_map(|source| match source {
                Source::Static(_) => Some("publishStatusAddress"),
                Source::Pods(_) => Some("publishPods"),
                Source::Service(_) | Source::Gateway(_) | Source::Trusted(_) => None,
            });
            if let Some(field) = guards_own {
                return Err(SpecError::KubeProxyImpact(field));
            }
        }
        policy.scope.classes = classes;
        policy.scope.classes.sort();
        policy.scope.classes.dedup();
        Ok(Policy { kind: Kind::Service, kind_inferred: false, mode, ..policy })
    }
}
