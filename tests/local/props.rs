//! Property test of the review → patch → re-review loop (issue 12): whatever shape the written
//! status has, applying the webhook's patch (with the `json-patch` crate, as the API server
//! applies it) yields an object whose review needs no patch.

use axum::{
    body::{Body, to_bytes},
    http::Request,
};
use base64::Engine as _;
use ingress_status_guard::{AppState, PolicySpec, SourceCache, webhook_router};
use proptest::prelude::*;
use serde_json::{Value, json};
use tower::ServiceExt as _;

use crate::fixture::Review;

fn address() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(|b| json!({"ip": std::net::IpAddr::from(b).to_string()})),
        "[a-z]{1,8}\\.example\\.test".prop_map(|h| json!({"hostname": h})),
        Just(json!({"ip": "192.0.2.10"})),
        Just(json!({"hostname": "lb.example.test"})),
        Just(json!({"ip": "192.0.2.10", "ports": [{"port": 443, "protocol": "TCP"}]})),
    ]
}

/// Every shape `status` can have on the wire, with unknown members kept beside ours.
fn status() -> impl Strategy<Value = Option<Value>> {
    let list = proptest::collection::vec(address(), 0..5).prop_map(Value::Array);
    prop_oneof![
        Just(None),
        Just(Some(Value::Null)),
        Just(Some(json!({}))),
        Just(Some(json!({"loadBalancer": null}))),
        Just(Some(json!({"loadBalancer": {}, "conditions": []}))),
        Just(Some(json!({"loadBalancer": {"ingress": null}}))),
        list.prop_map(|l| Some(json!({"loadBalancer": {"ingress": l, "other": 1}}))),
    ]
}

async fn answer(router: &axum::Router, body: Vec<u8>) -> Value {
    let request = Request::post("/mutate").header("content-type", "application/json").body(Body::from(body)).unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    serde_json::from_slice(&to_bytes(response.into_body(), usize::MAX).await.unwrap()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn patched_objects_need_no_patch(status in status(), keep_ports in any::<bool>()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let policy = PolicySpec {
            publish_status_address: Some("lb.example.test,192.0.2.10".into()),
            keep_ports,
            ..Default::default()
        };
        let policies = policy.into_policies().unwrap();
        let router = webhook_router(AppState::new(policies.clone(), SourceCache::new(&policies)), 1 << 20);

        let mut object = Review::fixture().ingress().clone();
        match &status {
            None => drop(object.as_object_mut().unwrap().remove("status")),
            Some(s) => object["status"] = s.clone(),
        }
        let first = runtime.block_on(answer(&router, Review::fixture().object(object.clone()).to_vec()));
        prop_assert_eq!(&first["response"]["allowed"], &json!(true));
        if let Some(patch) = first["response"]["patch"].as_str() {
            let ops: json_patch::Patch =
                serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(patch).unwrap()).unwrap();
            json_patch::patch(&mut object, &ops).unwrap();
        }
        let second = runtime.block_on(answer(&router, Review::fixture().object(object.clone()).to_vec()));
        prop_assert!(second["response"].get("patch").is_none(), "second answer {} after {}", second, first);
        prop_assert!(second["response"].get("warnings").is_none(), "{}", second);
    }
}
