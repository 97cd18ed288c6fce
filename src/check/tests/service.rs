//! `explain` of a Service: its class as `spec.loadBalancerClass` (or none, or not a load
//! balancer), its policy's `loadBalancerClasses`, and what kube-proxy does with the canonical IPs.

use serde_json::json;

use super::snapshot;
use crate::{
    check::Explained as _,
    kind::service::{LeanService, Services},
    policy::parse_file,
    sources::snapshot::Fetched,
};

fn explained(service: serde_json::Value) -> String {
    let policies = parse_file(
        "p.yaml",
        "policies:\n  - {name: metallb, kind: Service, loadBalancerClasses: [''], publishStatusAddress: 192.0.2.7, acknowledgeKubeProxyImpact: true}\n",
    )
    .unwrap();
    let sources = snapshot(Fetched::of(None));
    let stored = Services::stored(serde_json::from_value::<LeanService>(service).unwrap());
    crate::check::explain::explain::<Services>(&stored, None, &policies, &sources).text()
}

fn service(kind: &str, class: Option<&str>) -> serde_json::Value {
    let mut object = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "apps"},
        "spec": {"type": kind},
        "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.9", "ipMode": "VIP"}]}},
    });
    if let Some(class) = class {
        object["spec"]["loadBalancerClass"] = json!(class);
    }
    object
}

#[test]
fn a_service_explanation_names_its_class_and_what_kube_proxy_does() {
    let text = explained(service("LoadBalancer", None));
    assert!(text.contains("Service:   apps/web\n"), "{text}");
    assert!(text.contains("Class:     \"\" (no spec.loadBalancerClass)\n"), "{text}");
    assert!(
        text.contains(
            "Policy:    \"metallb\" (mode audit; governs LoadBalancer Services of loadBalancerClasses [\"\"]"
        ),
        "{text}"
    );
    assert!(
        text.contains("kube-proxy routes traffic to it from inside the cluster straight to this Service's endpoints"),
        "{text}"
    );
    assert!(text.contains("ipMode Proxy would leave it to the load balancer"), "{text}");
    assert!(
        text.contains(
            "Rule:      governed because its spec.loadBalancerClass (\"\": none) is in loadBalancerClasses\n"
        ),
        "{text}"
    );

    let other = explained(service("LoadBalancer", Some("example.com/other")));
    assert!(other.contains("Class:     \"example.com/other\" (from spec.loadBalancerClass)\n"), "{other}");
    assert!(
        other.contains(
            "Policy:    none: policy \"metallb\" governs LoadBalancer Services of loadBalancerClasses [\"\"]"
        ),
        "{other}"
    );
    let internal = explained(service("ClusterIP", None));
    assert!(internal.contains("Class:     none: not type LoadBalancer, so never governed\n"), "{internal}");
    assert!(internal.contains("Stored:    <none>"), "a Service that is not a load balancer keeps no entry: {internal}");
}
