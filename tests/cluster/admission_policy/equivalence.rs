//! Equivalence with the webhook: for tables of status writes, what the API server stores or
//! refuses under the rendered admission policies is what the webhook (the production router,
//! in process, reading the same policy file) answers.

use axum::body::{Body, to_bytes};
use ingress_status_guard::{AppState, SourceCache, parse_file, webhook_router};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::{WAIT, addresses_of, render_and_apply};
use crate::support::{Class, SENTINEL, TestEnv, create_ingress, entries, eventually, stored, write_status};

/// Equivalence: for a table of status writes, what the API server stores under the rendered
/// MAP is what the webhook's patch (the production router, in process, same policy file) makes
/// of the object. The one difference, by design: a write of the canonical set in another order
/// or with duplicates is stored as written under the webhook and in canonical order under the
/// MAP, whose patch is unconditional; so the lists are compared in canonical order there.
#[tokio::test]
async fn the_mutating_policy_stores_what_the_webhook_would() {
    let t = TestEnv::new("map-equiv").await;
    let dir = t.cluster.scratch_dir("map-equiv");
    let policy_file = format!(
        "policies:\n  - name: {ns}\n    ingressClasses: [{ns}]\n    publishStatusAddress: \"192.0.2.10, lb.{ns}.example.com, 2001:db8::1\"\n",
        ns = t.ns
    );
    render_and_apply(&t, &dir, &policy_file);
    let policies = parse_file("equivalence", &policy_file).expect("policy file");
    let router = webhook_router(AppState::new(policies.clone(), SourceCache::new(&policies)), 1 << 20);
    create_ingress(&t.ingresses, "web", Class::Field(&t.ns)).await;
    let host = format!("lb.{}.example.com", t.ns);
    eventually("the MAP is in force", WAIT, || async {
        let got = addresses_of(write_status(&t.rogue, "web", &[SENTINEL], false).await.map_err(|e| e.to_string())?);
        if got.contains(&host) { Ok(()) } else { Err(format!("stored {got:?}")) }
    })
    .await;

    let long: Vec<String> =
        ["192.0.2.10", "2001:db8::1", &host].iter().cycle().take(300).map(|s| (*s).to_owned()).collect();
    let table: Vec<(&str, Vec<&str>, bool)> = vec![
        ("one wrong IP", vec![SENTINEL], true),
        ("none", vec![], true),
        ("canonical with a port", vec!["192.0.2.10:80", &host, "2001:db8::1"], true),
        ("a subset", vec!["192.0.2.10"], true),
        ("ip and hostname in one entry", vec!["192.0.2.10/lb.example.org"], true),
        ("canonical", vec!["192.0.2.10", "2001:db8::1", &host], true),
        ("canonical, reordered and repeated", vec![&host, "2001:db8::1", "192.0.2.10", "192.0.2.10"], false),
        ("canonical, repeated past the webhook's bound", long.iter().map(String::as_str).collect(), true),
    ];
    for (case, written, exact) in table {
        let before = t.ingresses.get("web").await.unwrap();
        let mut object = serde_json::to_value(&before).unwrap();
        object["status"] = json!({"loadBalancer": {"ingress": entries(&written)}});
        let by_webhook = webhook_result(&router, &before, object).await;
        write_status(&t.rogue, "web", &written, false).await.unwrap_or_else(|e| panic!("{case}: {e}"));
        let mut by_map = stored(&t.ingresses, "web").await;
        let mut by_webhook = by_webhook;
        if !exact {
            for list in [&mut by_map, &mut by_webhook] {
                list.sort();
                list.dedup();
            }
        }
        assert_eq!(by_map, by_webhook, "{case}: written {written:?}");
    }
}

/// What the webhook makes of `object` (an Ingress as written): its patch applied, in the short
/// form of `support::addresses`.
async fn webhook_result(
    router: &axum::Router,
    old: &k8s_openapi::api::networking::v1::Ingress,
    mut object: Value,
) -> Vec<String> {
    let response = webhook_answer(router, old, &object).await;
    assert_eq!(response["allowed"], true, "{response}");
    if let Some(patch) = response["patch"].as_str() {
        use base64::Engine as _;
        let patch = base64::engine::general_purpose::STANDARD.decode(patch).unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
        json_patch::patch(&mut object, &patch).expect("the webhook's patch applies");
    }
    addresses_of(serde_json::from_value(object).unwrap())
}

/// The webhook's `response` to a write of `object` over `old`.
async fn webhook_answer(
    router: &axum::Router,
    old: &k8s_openapi::api::networking::v1::Ingress,
    object: &Value,
) -> Value {
    let mut review: Value =
        serde_json::from_str(include_str!("../../fixtures/ingress-status-update.apiserver-1.24.json")).unwrap();
    let request = &mut review["request"];
    request["name"] = json!(old.metadata.name);
    request["namespace"] = json!(old.metadata.namespace);
    request["object"] = object.clone();
    request["oldObject"] = serde_json::to_value(old).unwrap();
    let response = router
        .clone()
        .oneshot(
            axum::http::Request::post("/mutate")
                .header("content-type", "application/json")
                .body(Body::from(review.to_string()))
                .unwrap(),
        )
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&to_bytes(response.into_body(), usize::MAX).await.unwrap()).unwrap();
    body["response"].clone()
}

/// Equivalence of `deny`: for a table of status writes, the rendered ValidatingAdmissionPolicy
/// refuses exactly the writes the webhook refuses (the production router, in process, same
/// policy file), and the message names the same canonical value.
#[tokio::test]
async fn the_validating_policy_refuses_what_the_webhook_refuses() {
    let t = TestEnv::new("vap-equiv").await;
    let dir = t.cluster.scratch_dir("vap-equiv");
    let policy_file = format!(
        "policies:\n  - name: {ns}\n    ingressClasses: [{ns}]\n    publishStatusAddress: \"192.0.2.10, lb.{ns}.example.com\"\n    mode: deny\n",
        ns = t.ns
    );
    render_and_apply(&t, &dir, &policy_file);
    let policies = parse_file("equivalence", &policy_file).expect("policy file");
    let router = webhook_router(AppState::new(policies.clone(), SourceCache::new(&policies)), 1 << 20);
    create_ingress(&t.ingresses, "web", Class::Field(&t.ns)).await;
    eventually("the VAP is in force", WAIT, || async {
        match write_status(&t.rogue, "web", &[SENTINEL], false).await {
            Err(kube::Error::Api(_)) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let host = format!("lb.{}.example.com", t.ns);
    let both = format!("192.0.2.10/{host}");
    let table: Vec<(&str, Vec<&str>)> = vec![
        ("one wrong IP", vec![SENTINEL]),
        ("none", vec![]),
        ("canonical", vec!["192.0.2.10", &host]),
        ("canonical, reordered and repeated", vec![&host, "192.0.2.10", &host]),
        ("canonical with a port", vec!["192.0.2.10:80", &host]),
        ("ip and hostname in one entry", vec![&both]),
        ("a subset", vec!["192.0.2.10"]),
        ("a superset", vec!["192.0.2.10", &host, "192.0.2.11"]),
    ];
    for (case, written) in table {
        let before = t.ingresses.get("web").await.unwrap();
        let mut object = serde_json::to_value(&before).unwrap();
        object["status"] = json!({"loadBalancer": {"ingress": entries(&written)}});
        let answer = webhook_answer(&router, &before, &object).await;
        let by_webhook = answer["allowed"] == true;
        let by_vap = write_status(&t.rogue, "web", &written, false).await;
        assert_eq!(by_vap.is_ok(), by_webhook, "{case}: written {written:?}: webhook {answer}, API server {by_vap:?}");
        if let Err(kube::Error::Api(status)) = &by_vap {
            let message = answer["status"]["message"].as_str().expect("the webhook's refusal has a message");
            let canonical = message.split(", not [").next().unwrap_or_default();
            assert!(status.message.contains(canonical), "{case}: {} vs {message}", status.message);
            assert_eq!((status.code, answer["status"]["code"].as_u64()), (403, Some(403)), "{case}");
        }
    }
}
