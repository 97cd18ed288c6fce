//! The Service kind through the production path: its policies' validation, its three readers
//! (review, lean projection, packed cache bytes), the decision and the webhook's patch applied to
//! the object as sent.

use base64::Engine as _;
use serde_json::{Value, json};

use super::*;
use crate::{
    Kind,
    decision::Verdict,
    kind::{Entry as _, Governed},
    policy::{Mode, Policies, SpecError, parse_file},
    review::{Target, read, render},
    sources::Sources,
};

/// No cluster facts: static lists only.
struct NoCluster;
impl Sources for NoCluster {
    fn service(&self, svc: &crate::policy::ServiceRef) -> Result<Vec<Address>, crate::sources::Unresolved> {
        Err(crate::sources::Unresolved::NotSynced(svc.clone()))
    }
}

const ACK: &str = "acknowledgeKubeProxyImpact: true";

fn policies(line: &str) -> Policies {
    parse_file("p.yaml", &format!("policies:\n  - {{{line}}}\n")).unwrap_or_else(|e| panic!("{line}: {e}"))
}

fn refused(line: &str) -> String {
    parse_file("p.yaml", &format!("policies:\n  - {{{line}}}\n")).expect_err(line).to_string()
}

/// A LoadBalancer (or other `type`) Service as the API server sends and stores it.
fn service(kind: &str, class: Option<&str>, status: Option<Value>) -> Value {
    let mut spec = json!({"type": kind, "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}], "selector": {"app": "web"}});
    if let Some(class) = class {
        spec["loadBalancerClass"] = json!(class);
    }
    let mut object = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "apps", "uid": "3c0d8a52-1d84-4d5c-9c61-5b1d6f0f2a11", "resourceVersion": "7",
            "labels": {"app": "web"}},
        "spec": spec,
    });
    if let Some(status) = status {
        object["status"] = status;
    }
    object
}

/// A `services/status` UPDATE review writing `object` over `old`.
fn review(object: &Value, old: &Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "0a1b2c3d-0000-4000-8000-000000000002",
            "kind": {"group": "", "version": "v1", "kind": "Service"},
            "resource": {"group": "", "version": "v1", "resource": "services"},
            "subResource": "status", "name": "web", "namespace": "apps", "operation": "UPDATE",
            "userInfo": {"username": "system:serviceaccount:metallb-system:controller"},
            "object": object, "oldObject": old,
        }
    })
}

fn lb(entries: Value) -> Value {
    json!({"loadBalancer": {"ingress": entries}})
}

fn answer(body: &Value, policies: &Policies) -> Value {
    let bytes = serde_json::to_vec(body).unwrap();
    let review = read(&bytes).expect("a Service review reads");
    let verdict = review.decide(policies, &NoCluster);
    serde_json::from_slice(&render(&review, &verdict)).unwrap()
}

fn patched(body: &Value, response: &Value) -> Value {
    let patch =
        base64::engine::general_purpose::STANDARD.decode(response["response"]["patch"].as_str().unwrap()).unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
    let mut object = body["request"]["object"].clone();
    json_patch::patch(&mut object, &patch).expect("the patch applies to the object as sent");
    object
}

#[test]
fn service_policies_are_validated_and_default_to_audit() {
    let p = policies(&format!(
        "name: lb, kind: Service, loadBalancerClasses: ['', example.com/lb], publishStatusAddress: 192.0.2.7, {ACK}"
    ));
    let policy = p.of(Kind::Service).next().unwrap();
    assert_eq!(policy.mode, Mode::Audit, "a Service policy reports unless told otherwise");
    assert_eq!(policy.scope.classes, ["", "example.com/lb"]);
    let with_mode = policies(&format!(
        "name: lb, kind: Service, loadBalancerClasses: [''], publishStatusAddress: 192.0.2.7, {ACK}, mode: enforce"
    ));
    assert_eq!(with_mode.of(Kind::Service).next().unwrap().mode, Mode::Enforce);
    let ingress = policies("name: i, publishStatusAddress: 192.0.2.7");
    assert_eq!(ingress.of(Kind::Ingress).next().unwrap().mode, Mode::Enforce, "other kinds keep enforce");
    // A load balancer's own addresses need no acknowledgement.
    policies("name: lb, kind: Service, loadBalancerClasses: [''], publishService: lb/upstream");

    for (source, field) in [
        ("publishStatusAddress: 192.0.2.7", "publishStatusAddress"),
        ("publishPods: {namespace: lb, selector: app=lb}", "publishPods"),
        ("sources: [{publishService: lb/a}, {publishStatusAddress: 192.0.2.7}]", "publishStatusAddress"),
    ] {
        let error = refused(&format!("name: lb, kind: Service, loadBalancerClasses: [''], {source}"));
        assert!(error.contains("policies[0].acknowledgeKubeProxyImpact: must be true"), "{error}");
        assert!(error.contains(&format!("with a {field} source")) && error.contains("kube-proxy"), "{error}");
    }
    let cases = [
        (
            "name: lb, kind: Service, publishService: lb/a",
            "policies[0].loadBalancerClasses: is required for kind: Service",
        ),
        (
            "name: lb, kind: Service, loadBalancerClasses: [Bad/Class/x], publishService: lb/a",
            "\"Bad/Class/x\" is not a loadBalancerClass",
        ),
        (
            "name: lb, loadBalancerClasses: [''], publishService: lb/a",
            "loadBalancerClasses is a field of Service policies; this policy has kind: Ingress",
        ),
        (
            "name: lb, kind: Gateway, publishService: lb/a, acknowledgeKubeProxyImpact: true",
            "acknowledgeKubeProxyImpact is a field of Service policies",
        ),
        (
            "name: lb, kind: Service, loadBalancerClasses: [''], ingressClasses: [nginx], publishService: lb/a",
            "ingressClasses is a field of Ingress policies; this policy has kind: Service",
        ),
    ];
    for (line, want) in cases {
        let error = refused(line);
        assert!(error.contains(want), "{line}: {error}");
    }
    assert_eq!(SpecError::NoLoadBalancerClasses.field(), "loadBalancerClasses");
    // Two Service policies of one class overlap; of two classes they do not.
    let two = |a: &str, b: &str| {
        format!(
            "policies:\n  - {{name: a, kind: Service, loadBalancerClasses: [{a}], publishService: lb/a}}\n  - {{name: b, kind: Service, loadBalancerClasses: [{b}], publishService: lb/b}}\n"
        )
    };
    assert!(parse_file("p", &two("''", "''")).unwrap_err().to_string().contains("overlap"));
    parse_file("p", &two("''", "x.example/lb")).unwrap();
}

#[test]
fn a_governed_write_is_rewritten_touching_only_the_list_and_keeping_its_shape() {
    let p = policies(&format!(
        "name: lb, kind: Service, loadBalancerClasses: [''], publishStatusAddress: '192.0.2.7, lb.example.test', {ACK}, mode: enforce"
    ));
    let old = service("LoadBalancer", None, Some(lb(json!([{"ip": "192.0.2.7", "ipMode": "VIP"}]))));
    for status in [
        Some(lb(json!([{"ip": "198.51.100.9", "ipMode": "VIP", "ports": [{"port": 80, "protocol": "TCP"}]}]))),
        Some(json!({"loadBalancer": {}})),
        Some(
            json!({"conditions": [{"type": "x", "status": "True", "reason": "R", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
        ),
        None,
    ] {
        let body = review(&service("LoadBalancer", None, status.clone()), &old);
        let response = answer(&body, &p);
        assert_eq!(response["response"]["allowed"], true, "{response}");
        let object = patched(&body, &response);
        assert_eq!(
            object["status"]["loadBalancer"]["ingress"],
            json!([{"ip": "192.0.2.7", "ipMode": "VIP"}, {"hostname": "lb.example.test"}]),
            "{status:?}"
        );
        assert_eq!(object["spec"], body["request"]["object"]["spec"], "nothing but the status list");
        if let Some(conditions) = status.as_ref().and_then(|s| s.get("conditions")) {
            assert_eq!(&object["status"]["conditions"], conditions);
        }
    }
    // The API server defaults ipMode to VIP for an IP entry: that write is canonical.
    let defaulted = lb(json!([{"hostname": "lb.example.test"}, {"ip": "192.0.2.7", "ipMode": "VIP"}]));
    let again = answer(&review(&service("LoadBalancer", None, Some(defaulted)), &old), &p);
    assert!(again["response"]["patch"].is_null(), "{again}");
    // ipMode Proxy is another entry: kube-proxy would leave the IP to the load balancer.
    let proxy = lb(json!([{"hostname": "lb.example.test"}, {"ip": "192.0.2.7", "ipMode": "Proxy"}]));
    let response = answer(&review(&service("LoadBalancer", None, Some(proxy)), &old), &p);
    assert!(response["response"]["patch"].is_string(), "{response}");
}

#[test]
fn services_that_are_not_load_balancers_or_of_another_class_are_never_governed() {
    let p = policies(&format!(
        "name: lb, kind: Service, loadBalancerClasses: ['', example.com/lb], publishStatusAddress: 192.0.2.7, {ACK}, mode: deny"
    ));
    let rogue = Some(lb(json!([{"ip": "198.51.100.9"}])));
    for (kind, class) in [
        ("ClusterIP", None),
        ("NodePort", None),
        ("ExternalName", None),
        ("LoadBalancer", Some("other.example/lb")),
        ("LoadBalancer", Some("not a class")),
    ] {
        let object = service(kind, class, rogue.clone());
        // A status write cannot make a Service a load balancer nor change its class: the
        // stored spec is judged.
        let forged = service("LoadBalancer", Some("example.com/lb"), rogue.clone());
        for written in [&object, &forged] {
            let bytes = serde_json::to_vec(&review(written, &object)).unwrap();
            let r = read(&bytes).unwrap();
            assert_eq!(r.decide(&p, &NoCluster), Verdict::NotGoverned, "{kind} {class:?}");
            let response = answer(&review(written, &object), &p);
            assert_eq!(response["response"]["allowed"], true);
            assert!(
                response["response"]["patch"].is_null() && response["response"]["warnings"].is_null(),
                "{response}"
            );
        }
    }
    // The same write to a governed Service is refused, naming the policy.
    let governed = service("LoadBalancer", Some("example.com/lb"), rogue.clone());
    let response = answer(&review(&governed, &governed), &p);
    assert_eq!(response["response"]["allowed"], false, "{response}");
    assert!(response["response"]["status"]["message"].as_str().unwrap().contains("policy \"lb\""), "{response}");
}

#[test]
fn the_readers_agree_and_the_cache_keeps_no_entry_of_other_services() {
    let status = lb(json!([
        {"ip": "192.0.2.7", "ipMode": "Proxy", "ports": [{"port": 80, "protocol": "TCP", "error": "Pending"}]},
        {"hostname": "lb.example.test"},
    ]));
    let object = service("LoadBalancer", Some("example.com/lb"), Some(status.clone()));
    let bytes = serde_json::to_vec(&review(&object, &object)).unwrap();
    let Target::Service(s) = read(&bytes).unwrap().target else { panic!("not a Service target") };
    let lean: LeanService = serde_json::from_value(object.clone()).unwrap();
    assert_eq!(lean.shape, StatusShape::IngressList);
    let leaned = Services::leaned(lean).unwrap();
    assert_eq!(leaned.write, s.write, "the review and the cache read one Service alike");
    assert_eq!(s.write.class.as_deref(), Some("example.com/lb"));
    assert_eq!(s.write.addresses[0].ip_mode(), Some(PROXY));
    assert_eq!(s.write.addresses[1].ip_mode(), None);
    assert_eq!(s.write.addresses[0].to_string(), "192.0.2.7 [ipMode Proxy]");
    assert_eq!(leaned.resource_version.as_deref(), Some("7"));
    // Packed and unpacked, every field survives.
    let packed = crate::kind::packed::pack(&s.write.addresses, 0);
    assert_eq!(crate::kind::packed::unpack::<LoadBalancerIngress>(&packed), (s.write.addresses.clone(), 0));
    let odd = LoadBalancerIngress { address: Address::hostname("a.example"), ip_mode: Some("Other".into()) };
    let mut bytes = Vec::new();
    odd.pack(&mut bytes);
    assert_eq!(LoadBalancerIngress::unpack(&mut bytes.as_slice()), Some(odd));

    let cluster_ip: LeanService = serde_json::from_value(service("ClusterIP", None, Some(status))).unwrap();
    assert_eq!(cluster_ip.class, NOT_LOAD_BALANCER);
    assert!(cluster_ip.addresses.kept.is_empty(), "a Service that is not a load balancer holds no entries");
    let bad: LeanService = serde_json::from_value(service("LoadBalancer", Some(&"x".repeat(300)), None)).unwrap();
    assert_eq!(bad.class, bounded::INVALID_CLASS);
    assert_eq!(Services::trimmed(&Services::leaned(bad).unwrap().write), [Some("class"), None]);
    let none: LeanService = serde_json::from_value(service("LoadBalancer", None, None)).unwrap();
    assert_eq!((none.class.as_str(), none.shape), (NO_CLASS, StatusShape::NoStatus));
}

#[test]
fn entries_compare_by_the_ip_mode_kube_proxy_acts_on() {
    let entry = |ip: &str, mode: Option<&str>| LoadBalancerIngress {
        address: Address::parse(ip).unwrap(),
        ip_mode: mode.map(str::to_owned),
    };
    let addresses = [Address::parse("192.0.2.7").unwrap()];
    let canonical = Services::entries(&addresses).unwrap();
    assert!(Services::same(&[entry("192.0.2.7", Some(VIP))], &canonical));
    assert!(Services::same(&[entry("192.0.2.7", None), entry("192.0.2.7", Some(VIP))], &canonical));
    assert!(!Services::same(&[entry("192.0.2.7", Some(PROXY))], &canonical));
    assert!(!Services::same(&[], &canonical));
    let host = LoadBalancerIngress { address: Address::hostname("lb.example.test"), ip_mode: None };
    assert_eq!(host.ip_mode(), None, "a hostname entry has no ipMode to default");
    assert_eq!(
        Services::status(&canonical),
        json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.7", "ipMode": "VIP"}]}}),
        "a merge patch says the ipMode the API server would default"
    );
}
