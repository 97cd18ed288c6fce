//! A trusted-writer policy through the production path: read, decide, render. A trusted
//! identity's write stands; anyone else's change is put back to `oldObject`'s status by the
//! patch (applied to the object as sent), refused naming the policy, or reported; a write that
//! leaves the status as stored passes untouched. For an Ingress and a Gateway alike.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::{
    policy::{Policies, parse_file},
    review::{read, render},
    sources::Sources,
};

/// No cluster at all: a trusted-writer policy reads none.
struct NoCluster;
impl Sources for NoCluster {
    fn service(
        &self,
        svc: &crate::policy::ServiceRef,
    ) -> Result<Vec<crate::address::Address>, crate::sources::Unresolved> {
        Err(crate::sources::Unresolved::NotSynced(svc.clone()))
    }
}

const TRUSTED: &str = "system:serviceaccount:traefik:traefik";

fn policies(mode: &str) -> Policies {
    let text = format!(
        "policies:\n  - {{name: edge, ingressClasses: [traefik], trustedWriters: ['{TRUSTED}'], mode: {mode}}}\n  - {{name: gw, kind: Gateway, gatewayClasses: [eg], trustedWriters: ['{TRUSTED}'], mode: {mode}}}\n"
    );
    parse_file("p.yaml", &text).unwrap()
}

/// The API server's Ingress status review (the fixture) by `user`, of class `traefik`, its
/// written and stored status lists `written` and `stored` (`None`: no `status` at all).
fn ingress_review(user: &str, written: Option<Value>, stored: Option<Value>) -> Value {
    let fixture =
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ingress-status-update.apiserver-1.24.json"));
    let mut review: Value = serde_json::from_str(fixture).unwrap();
    let request = &mut review["request"];
    request["userInfo"]["username"] = json!(user);
    for (at, list) in [("object", written), ("oldObject", stored)] {
        request[at]["spec"]["ingressClassName"] = json!("traefik");
        match list {
            Some(list) => request[at]["status"] = json!({"loadBalancer": {"ingress": list}}),
            None => {
                request[at].as_object_mut().unwrap().remove("status");
            }
        }
    }
    review
}

/// The answer to `review` under `policies`, and the object as the patch leaves it.
fn answer(review: &Value, policies: &Policies) -> (Value, Value) {
    let body = serde_json::to_vec(review).unwrap();
    let read = read(&body).unwrap();
    let verdict = read.decide(policies, &NoCluster);
    let response: Value = serde_json::from_slice(&render(&read, &verdict)).unwrap();
    let mut object = review["request"]["object"].clone();
    if let Some(patch) = response["response"]["patch"].as_str() {
        let patch = base64::engine::general_purpose::STANDARD.decode(patch).unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
        json_patch::patch(&mut object, &patch).expect("the patch applies to the object as sent");
    }
    (response["response"].clone(), object)
}

fn ips(list: &[&str]) -> Value {
    Value::Array(list.iter().map(|ip| json!({"ip": ip})).collect())
}

#[test]
fn a_trusted_writers_write_stands_as_written() {
    for mode in ["enforce", "deny", "audit"] {
        let review = ingress_review(TRUSTED, Some(ips(&["203.0.113.7"])), Some(ips(&["10.9.9.9"])));
        let (response, _) = answer(&review, &policies(mode));
        assert_eq!(response["allowed"], true, "{mode}: {response}");
        assert!(response.get("patch").is_none() && response.get("warnings").is_none(), "{mode}: {response}");
    }
}

#[test]
fn a_trusted_writers_metadata_stands_and_anothers_is_put_back() {
    let forged = |user: &str| {
        let mut review = ingress_review(user, Some(ips(&["203.0.113.7"])), Some(ips(&["203.0.113.7"])));
        review["request"]["object"]["metadata"]["annotations"] = json!({"pool.example/allocated-from": "pool-a"});
        review
    };
    for mode in ["enforce", "deny", "audit"] {
        let (response, object) = answer(&forged(TRUSTED), &policies(mode));
        assert_eq!(response["allowed"], true, "{mode}: {response}");
        assert!(response.get("patch").is_none() && response.get("warnings").is_none(), "{mode}: {response}");
        assert_eq!(object["metadata"]["annotations"]["pool.example/allocated-from"], "pool-a");
    }
    let (response, object) = answer(&forged("rogue-controller"), &policies("enforce"));
    assert_eq!(response["allowed"], true, "{response}");
    assert!(object["metadata"]["annotations"].get("pool.example/allocated-from").is_none(), "{response}");
    let (response, _) = answer(&forged("rogue-controller"), &policies("deny"));
    assert_eq!(response["allowed"], false, "{response}");
}

#[test]
fn another_writers_change_is_put_back_refused_or_reported() {
    let stored =
        json!([{"ip": "10.9.9.9", "ports": [{"port": 443, "protocol": "TCP"}]}, {"hostname": "lb.example.test"}]);
    // Every shape of the written object: the stored list goes back in place whole, ports and order as stored.
    for written in [Some(ips(&["192.0.2.254"])), Some(json!([])), None] {
        let review = ingress_review("rogue-controller", written.clone(), Some(stored.clone()));
        let (response, object) = answer(&review, &policies("enforce"));
        assert_eq!(response["allowed"], true, "{response}");
        assert_eq!(object["status"]["loadBalancer"]["ingress"], stored, "{written:?}: {response}");
        let warning = response["warnings"][0].as_str().unwrap();
        assert!(warning.starts_with("status.loadBalancer.ingress put back to the stored ["), "{warning}");
        assert_eq!(response["auditAnnotations"]["policy"], "edge");
        // Idempotent: the webhook passes its own output.
        let mut again = review.clone();
        again["request"]["object"] = object;
        let (response, _) = answer(&again, &policies("enforce"));
        assert!(response.get("patch").is_none(), "{response}");
    }
    // A write that adds a list where none is stored has it removed (an empty list is none).
    let review = ingress_review("rogue-controller", Some(ips(&["192.0.2.254"])), None);
    let (_, object) = answer(&review, &policies("enforce"));
    assert_eq!(object["status"]["loadBalancer"]["ingress"], json!([]));

    let review = ingress_review("rogue-controller", Some(ips(&["192.0.2.254"])), Some(stored.clone()));
    let (response, _) = answer(&review, &policies("deny"));
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("ingress-status-guard policy \"edge\" keeps the stored status.loadBalancer.ingress [")
            && message.ends_with(
                "not [192.0.2.254]: only its trusted writers may change it, and \"rogue-controller\" is not one"
            ),
        "{message}"
    );
    let (response, object) = answer(&review, &policies("audit"));
    assert_eq!(response["allowed"], true);
    assert!(response.get("patch").is_none());
    assert_eq!(object["status"]["loadBalancer"]["ingress"], ips(&["192.0.2.254"]), "landed as written");
    assert_eq!(response["auditAnnotations"]["action"], "audited");
    assert_eq!(response["auditAnnotations"]["attempted"], "192.0.2.254");
}

#[test]
fn another_writers_write_that_changes_nothing_passes_untouched() {
    let stored = json!([{"ip": "10.9.9.9"}, {"hostname": "lb.example.test"}]);
    for mode in ["enforce", "deny", "audit"] {
        let review = ingress_review("rogue-controller", Some(stored.clone()), Some(stored.clone()));
        let (response, _) = answer(&review, &policies(mode));
        assert_eq!(response["allowed"], true, "{mode}: {response}");
        assert!(response.get("patch").is_none() && response.get("warnings").is_none(), "{mode}: {response}");
        let review = ingress_review("rogue-controller", None, None);
        let (response, _) = answer(&review, &policies(mode));
        assert_eq!(response["allowed"], true, "{mode}: {response}");
    }
    // In another order it is another list, as the API server would store it.
    let review = ingress_review("rogue-controller", Some(json!([stored[1], stored[0]])), Some(stored));
    let (response, _) = answer(&review, &policies("deny"));
    assert_eq!(response["allowed"], false);
}

#[test]
fn a_username_cut_by_the_reader_is_never_trusted() {
    // The reader keeps a prefix of a long username; a trusted identity is never that long.
    let long = format!("{TRUSTED}{}", "x".repeat(600));
    let review = ingress_review(&long, Some(ips(&["192.0.2.254"])), Some(ips(&["10.9.9.9"])));
    let (response, _) = answer(&review, &policies("deny"));
    assert_eq!(response["allowed"], false, "{response}");
}

#[test]
fn a_gateway_write_is_put_back_entry_for_entry() {
    let stored = json!([{"type": "IPAddress", "value": "10.9.9.9"}, {"type": "example.test/vip", "value": "vip-1"}]);
    let object = |addresses: Value| {
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "edge", "namespace": "infra", "uid": "7d0c5a0e-2b59-4c49-a2c6-0d7e1c1f5c1a"},
            "spec": {"gatewayClassName": "eg", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
            "status": {"addresses": addresses, "conditions": []},
        })
    };
    let review = |user: &str| {
        json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "0a1b2c3d-0000-4000-8000-000000000001",
                "kind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": "Gateway"},
                "subResource": "status", "operation": "UPDATE", "namespace": "infra", "name": "edge",
                "userInfo": {"username": user},
                "object": object(json!([{"type": "IPAddress", "value": "192.0.2.254"}])),
                "oldObject": object(stored.clone()),
            },
        })
    };
    let (response, written) = answer(&review("rogue-controller"), &policies("enforce"));
    assert_eq!(written["status"]["addresses"], stored, "{response}");
    assert_eq!(written["status"]["conditions"], json!([]), "only the field is touched");
    let (response, _) = answer(&review(TRUSTED), &policies("enforce"));
    assert!(response.get("patch").is_none(), "{response}");
}
