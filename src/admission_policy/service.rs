//! A Service policy's admission objects in CEL: the Ingress's (`status.loadBalancer.ingress`
//! and the metadata rule are alike), matched on `services/status` of LoadBalancer Services of
//! the governed classes.

use serde_json::json;

use crate::{
    address::Address,
    admission_policy::{Admitted, Governed, RenderError, Shape, cel},
    kind::{
        ingress::Ingresses,
        service::{LOAD_BALANCER, Services},
    },
    policy::Policy,
};

impl Admitted for Services {
    /// The Ingress's shape with the Service's resources and class condition. The literal has
    /// no `ipMode` (the Ingress schema has none): the API server defaults it to `VIP`.
    fn admission_shape(policy: &Policy, canonical: &[Address], governed: &Governed) -> Result<Shape, RenderError> {
        let shape = <Ingresses as Admitted>::admission_shape(policy, canonical, &Governed::Everything)?;
        Ok(Shape {
            match_constraints: super::status_updates("", "services/status"),
            match_conditions: json!([{"name": "governed-class", "expression": class_condition(governed.names())}]),
            ..shape
        })
    }

    /// The Ingress's rebuild with the Service's `ipMode`, which kube-proxy reads.
    fn rebuilt(list: &str) -> Option<String> {
        Some(super::ingress::load_balancer_entries(list, &["ipMode"]))
    }
}

/// Whether the Service is `type: LoadBalancer` and its class (`""` without
/// `spec.loadBalancerClass`) one of `classes`, both from `oldObject`: the service status
/// strategy puts the stored spec back after admission (`review::read::service`).
pub(crate) fn class_condition(classes: &[String]) -> String {
    let list = cel::string_list(classes.iter().map(String::as_str));
    format!(
        "has(oldObject.spec.type) && oldObject.spec.type == {} && (has(oldObject.spec.loadBalancerClass) ? oldObject.spec.loadBalancerClass : \"\") in {list}",
        cel::string(LOAD_BALANCER)
    )
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::admission_policy::ApiVersion;

    fn policy(yaml: &str) -> Policy {
        crate::policy::parse_file("f", yaml).unwrap().of(crate::kind::Kind::Service).next().cloned().unwrap()
    }

    #[test]
    fn renders_a_service_policy_on_services_status_of_its_classes() {
        let p = policy(
            "policies: [{name: lb, kind: Service, loadBalancerClasses: ['', example.com/lb], publishStatusAddress: 192.0.2.7, acknowledgeKubeProxyImpact: true, mode: enforce}]",
        );
        let governed = Governed::resolve(&p.scope, &Default::default());
        let canonical = [Address::parse("192.0.2.7").unwrap()];
        let objects =
            crate::admission_policy::tests::render::<Services>(&p, &canonical, &governed, ApiVersion::V1).unwrap();
        let admission = &objects[0];
        assert_eq!(admission["kind"], "MutatingAdmissionPolicy");
        let rules = &admission["spec"]["matchConstraints"]["resourceRules"][0];
        assert_eq!(rules["resources"], json!(["services/status"]));
        assert_eq!(rules["apiGroups"], json!([""]));
        let condition = admission["spec"]["matchConditions"][0]["expression"].as_str().unwrap();
        assert!(condition.contains("oldObject.spec.type == \"LoadBalancer\""), "{condition}");
        assert!(condition.contains("[\"\", \"example.com/lb\"]"), "{condition}");
        let text = serde_json::to_string(admission).unwrap();
        assert!(text.contains("192.0.2.7") && text.contains("/status/loadBalancer"), "{text}");

        let audit = Policy { mode: crate::policy::Mode::Audit, ..p };
        let objects =
            crate::admission_policy::tests::render::<Services>(&audit, &canonical, &governed, ApiVersion::V1).unwrap();
        assert_eq!(objects[0]["kind"], Value::from("ValidatingAdmissionPolicy"));
    }
}
