//! A Gateway status review through the production path: read (as a Gateway's, found from the
//! request's group and kind), decide, render; the patch applied with the `json-patch` crate to the object as
//! sent, touching only `status.addresses`.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::{
    policy::{Policies, PolicySpec, parse_file},
    review::{Target, read, render},
    sources::Sources,
};

/// No cluster facts: static lists only.
struct NoCluster;
impl Sources for NoCluster {
    fn service(
        &self,
        svc: &crate::policy::ServiceRef,
    ) -> Result<Vec<crate::address::Address>, crate::sources::Unresolved> {
        Err(crate::sources::Unresolved::NotSynced(svc.clone()))
    }
}

fn policies(mode: &str, list: &str) -> Policies {
    let text = format!(
        "policies:\n  - {{name: gw, gatewayClasses: [eg], publishStatusAddress: '{list}', mode: {mode}}}\n  - {{name: ing, ingressClasses: [eg], publishStatusAddress: 198.51.100.1}}\n"
    );
    parse_file("p.yaml", &text).unwrap()
}

fn conditions() -> Value {
    json!([
        {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "ok", "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Programmed", "status": "True", "reason": "Programmed", "message": "ok", "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"},
    ])
}

fn listeners() -> Value {
    json!([{"name": "http", "attachedRoutes": 2, "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}], "conditions": []}])
}

/// A Gateway status UPDATE review as a v1 API server sends it, of class `class`.
fn review(class: &str, status: Option<Value>) -> Value {
    let mut object = json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "edge", "namespace": "infra", "uid": "7d0c5a0e-2b59-4c49-a2c6-0d7e1c1f5c1a", "generation": 1},
        "spec": {"gatewayClassName": class, "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
    });
    if let Some(status) = status {
        object["status"] = status;
    }
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "0a1b2c3d-0000-4000-8000-000000000001",
            "kind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": "Gateway"},
            "resource": {"group": "gateway.networking.k8s.io", "version": "v1", "resource": "gateways"},
            "subResource": "status",
            "requestKind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": "Gateway"},
            "name": "edge", "namespace": "infra", "operation": "UPDATE",
            "userInfo": {"username": "rogue-controller", "groups": ["system:authenticated"]},
            "object": object, "oldObject": null, "dryRun": false,
        }
    })
}

fn rogue_status() -> Value {
    json!({"addresses": [{"type": "IPAddress", "value": "192.0.2.254"}], "conditions": conditions(), "listeners": listeners()})
}

/// The response to `body` under `policies`.
fn answer(body: &Value, policies: &Policies) -> Value {
    let bytes = serde_json::to_vec(body).unwrap();
    let review = read(&bytes).expect("a Gateway review reads");
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
fn a_rogue_gateway_write_is_rewritten_touching_only_the_addresses() {
    let policies = policies("enforce", "192.0.2.10, gw.example.test");
    let canonical =
        json!([{"type": "IPAddress", "value": "192.0.2.10"}, {"type": "Hostname", "value": "gw.example.test"}]);
    for status in [Some(rogue_status()), None, Some(json!({"conditions": conditions(), "listeners": listeners()}))] {
        let body = review("eg", status.clone());
        let response = answer(&body, &policies);
        assert_eq!(response["response"]["allowed"], true);
        assert_eq!(
            response["response"]["warnings"][0],
            "status.addresses rewritten to [192.0.2.10,gw.example.test] by policy gw"
        );
        let object = patched(&body, &response);
        assert_eq!(object["status"]["addresses"], canonical, "{status:?}");
        let mut rest = object.clone();
        rest["status"].as_object_mut().unwrap().remove("addresses");
        let mut sent = body["request"]["object"].clone();
        if let Some(s) = sent.get_mut("status").and_then(Value::as_object_mut) {
            s.remove("addresses");
        } else {
            sent["status"] = json!({});
        }
        assert_eq!(rest, sent, "conditions, listeners and the rest exactly as sent");
        // Idempotent: the patched object needs no patch.
        let again = answer(&review("eg", Some(object["status"].clone())), &policies);
        assert!(again["response"]["patch"].is_null(), "{again}");
        assert_eq!(again["response"]["allowed"], true);
    }
    // Order is ignored: the same entries reversed are canonical.
    let reversed = json!({"addresses": [{"type": "Hostname", "value": "gw.example.test"}, {"value": "192.0.2.10"}], "conditions": conditions()});
    assert!(answer(&review("eg", Some(reversed)), &policies)["response"]["patch"].is_null());
}

#[test]
fn audit_deny_other_classes_and_too_many() {
    let body = review("eg", Some(rogue_status()));
    let audit = answer(&body, &policies("audit", "192.0.2.10"));
    assert_eq!((audit["response"]["allowed"].clone(), audit["response"]["patch"].clone()), (json!(true), Value::Null));
    assert_eq!(audit["response"]["warnings"][0], "status.addresses differs from [192.0.2.10] (policy gw, audit mode)");
    let deny = answer(&body, &policies("deny", "192.0.2.10"));
    assert_eq!(deny["response"]["allowed"], false);
    assert_eq!(
        deny["response"]["status"]["message"],
        "ingress-status-guard policy \"gw\" requires status.addresses [192.0.2.10], not [192.0.2.254]"
    );
    let other = answer(&review("other", Some(rogue_status())), &policies("enforce", "192.0.2.10"));
    assert_eq!((other["response"]["allowed"].clone(), other["response"]["patch"].clone()), (json!(true), Value::Null));
    assert!(other["response"]["warnings"].is_null(), "another class is not governed: {other}");
    let seventeen: Vec<String> = (1..=17).map(|i| format!("192.0.2.{i}")).collect();
    let too_many = answer(&body, &policies("enforce", &seventeen.join(",")));
    assert_eq!(
        (too_many["response"]["allowed"].clone(), too_many["response"]["patch"].clone()),
        (json!(true), Value::Null)
    );
    assert_eq!(
        too_many["response"]["auditAnnotations"]["unresolved"],
        "the canonical set has 17 entries, more than the 16 a Gateway's status.addresses holds (each IP and each hostname is one entry)"
    );
    let sixteen = answer(&body, &policies("enforce", &seventeen[..16].join(",")));
    assert!(sixteen["response"]["patch"].is_string(), "16 fit");
}

#[test]
fn a_gateway_review_is_read_within_the_bounds() {
    let many: Vec<Value> = (0..100_000)
        .map(|i| json!({"type": "IPAddress", "value": format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255)}))
        .collect();
    let body = serde_json::to_vec(&review("eg", Some(json!({"addresses": many, "conditions": conditions()})))).unwrap();
    let review = read(&body).unwrap();
    let Target::Gateway(crate::review::Status { write, .. }) = &review.target else { panic!("{:?}", review.target) };
    assert_eq!((write.addresses.len(), write.omitted), (16, 100_000 - 16));
    assert_eq!(write.class.as_deref(), Some("eg"));
    assert_eq!((write.namespace.as_str(), write.name.as_str()), ("infra", "edge"));
    let enforce = policies("enforce", "192.0.2.10");
    let verdict = review.decide(&enforce, &NoCluster);
    assert_eq!(verdict.result(), "patched", "more than the reader keeps is never canonical");
    let bad = serde_json::to_vec(&review_with_bad_entry()).unwrap();
    let err = read(&bad).unwrap_err().to_string();
    assert!(err.starts_with("request.object is not a valid Gateway: status.addresses[0].value"), "{err}");
    let ingress_spec = PolicySpec {
        gateway_classes: vec!["eg".into()],
        publish_status_address: Some("192.0.2.1".into()),
        ..PolicySpec::default()
    };
    assert_eq!(ingress_spec.into_policies().unwrap().of(crate::kind::Kind::Gateway).count(), 1);
}

fn review_with_bad_entry() -> Value {
    review("eg", Some(json!({"addresses": [{"type": "IPAddress", "value": 7}]})))
}

#[test]
fn a_rogue_gateway_write_is_a_finding_whose_event_regards_the_gateway() {
    let body = serde_json::to_vec(&review("eg", Some(rogue_status()))).unwrap();
    let review = read(&body).unwrap();
    let enforce = policies("enforce", "192.0.2.10, gw.example.test");
    let verdict = review.decide(&enforce, &NoCluster);
    let finding = crate::audit::Finding::take(review, verdict).expect("a mismatch is a finding");
    assert_eq!(finding.kind, crate::kind::Kind::Gateway);
    assert_eq!((finding.namespace.as_str(), finding.name.as_str()), ("infra", "edge"));
    assert_eq!(finding.object_uid.as_deref(), Some("7d0c5a0e-2b59-4c49-a2c6-0d7e1c1f5c1a"));
    assert_eq!(
        finding.note(),
        "rogue-controller wrote status.addresses [192.0.2.254]; policy gw requires [192.0.2.10,gw.example.test]; rewritten"
    );
    let (event, regarding) = crate::audit::events::to_event(&finding);
    assert_eq!(
        (regarding.api_version.as_deref(), regarding.kind.as_deref(), regarding.name.as_deref()),
        (Some("gateway.networking.k8s.io/v1"), Some("Gateway"), Some("edge"))
    );
    assert_eq!(regarding.uid, finding.object_uid);
    assert_eq!(event.secondary.and_then(|w| w.name).as_deref(), Some("rogue-controller"));
    // A type an Ingress has no field for is shown as `type=value`, and a list past the bound
    // is counted: a finding about a Gateway is as bounded as one about an Ingress.
    let odd: Vec<Value> = (0..40).map(|i| json!({"type": "example.com/Kind", "value": format!("v{i}")})).collect();
    let body = serde_json::to_vec(&review_of("eg", json!({"addresses": odd}))).unwrap();
    let review = read(&body).unwrap();
    let finding = crate::audit::Finding::take(review.clone(), review.decide(&enforce, &NoCluster)).unwrap();
    assert_eq!(finding.attempted.total, 40);
    assert!(finding.attempted.to_string().starts_with("40 entries: example.com/Kind=v0,"), "{}", finding.attempted);
    // Not governed, no finding.
    let other = serde_json::to_vec(&review_of("other", rogue_status())).unwrap();
    let other = read(&other).unwrap();
    assert!(crate::audit::Finding::take(other.clone(), other.decide(&enforce, &NoCluster)).is_none());
}

fn review_of(class: &str, status: Value) -> Value {
    review(class, Some(status))
}
