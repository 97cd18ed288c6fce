//! The production router, driven in-process: every kind of bad input gets a precise status and a
//! JSON error body; a good review gets the AdmissionReview response.

use axum::{
    body::{Body, to_bytes},
    http::{Request, StatusCode, header},
};
use ingress_status_guard::{AppState, PolicySpec, SourceCache, admin_router, webhook_router};
use serde_json::Value;
use tower::ServiceExt;

use crate::fixture::{FIXTURE, Review};

const LIMIT: usize = 64 * 1024;

fn router() -> axum::Router {
    let policies =
        PolicySpec { publish_status_address: Some("192.0.2.10".into()), ..Default::default() }.into_policies().unwrap();
    let cache = SourceCache::new(&policies);
    webhook_router(AppState::new(policies, cache), LIMIT)
}

async fn send(request: Request<Body>) -> (StatusCode, Option<String>, Value) {
    let response = router().oneshot(request).await.unwrap();
    let status = response.status();
    let content_type = response.headers().get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap().to_owned());
    let body = to_bytes(response.into_body(), usize::MAX).await.unwrap();
    let json = serde_json::from_slice(&body).unwrap_or_else(|_| panic!("body is not JSON: {body:?}"));
    (status, content_type, json)
}

fn post(content_type: Option<&str>, body: impl Into<Body>) -> Request<Body> {
    let mut builder = Request::post("/mutate");
    if let Some(ct) = content_type {
        builder = builder.header(header::CONTENT_TYPE, ct);
    }
    builder.body(body.into()).unwrap()
}

#[tokio::test]
async fn good_review_is_answered() {
    let (status, content_type, json) = send(post(Some("application/json"), FIXTURE)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type.as_deref(), Some("application/json"));
    assert_eq!(json["response"]["uid"], "0f3cb218-7947-4a5f-839c-6e300a5ae86a");
    assert_eq!(json["response"]["patchType"], "JSONPatch");
}

#[tokio::test]
async fn content_type_with_parameters_is_accepted() {
    let (status, _, _) = send(post(Some("application/json; charset=utf-8"), FIXTURE)).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn bad_inputs_get_precise_errors() {
    let oversized = format!("{{\"pad\": \"{}\"}}", "x".repeat(LIMIT));
    let cases: Vec<(&str, Request<Body>, StatusCode, &str)> = vec![
        ("GET", Request::get("/mutate").body(Body::empty()).unwrap(), StatusCode::METHOD_NOT_ALLOWED, "use POST"),
        ("PUT", Request::put("/mutate").body(Body::from(FIXTURE)).unwrap(), StatusCode::METHOD_NOT_ALLOWED, "use POST"),
        (
            "no content type",
            post(None, FIXTURE),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "content-type must be application/json",
        ),
        (
            "yaml",
            post(Some("application/yaml"), FIXTURE),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "got \"application/yaml\"",
        ),
        ("empty", post(Some("application/json"), ""), StatusCode::BAD_REQUEST, "empty body"),
        (
            "malformed",
            post(Some("application/json"), "{\"kind\":"),
            StatusCode::BAD_REQUEST,
            "body is not a valid AdmissionReview",
        ),
        (
            "no request",
            post(Some("application/json"), r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#),
            StatusCode::BAD_REQUEST,
            "AdmissionReview has no request",
        ),
        ("too large", post(Some("application/json"), oversized), StatusCode::PAYLOAD_TOO_LARGE, "--max-body-bytes"),
        ("other path", Request::post("/validate").body(Body::empty()).unwrap(), StatusCode::NOT_FOUND, "/mutate"),
    ];
    for (name, request, want_status, want_message) in cases {
        let (status, content_type, json) = send(request).await;
        assert_eq!(status, want_status, "case {name}");
        assert_eq!(content_type.as_deref(), Some("application/json"), "case {name}");
        let message = json["error"].as_str().unwrap_or_else(|| panic!("case {name}: no error field in {json}"));
        assert!(message.contains(want_message), "case {name}: {message}");
    }
}

#[tokio::test]
async fn admin_probes() {
    let get = |path: &str| Request::get(path).body(Body::empty()).unwrap();
    let flags = |service: Option<&str>, list: Option<&str>| PolicySpec {
        publish_service: service.map(String::from),
        publish_status_address: list.map(String::from),
        ..Default::default()
    };
    let state = |policy: PolicySpec| {
        let policies = policy.into_policies().unwrap();
        AppState::new(policies.clone(), SourceCache::new(&policies))
    };

    let static_source = state(flags(None, Some("192.0.2.10")));
    let live = admin_router(static_source.clone()).oneshot(get("/livez")).await.unwrap();
    assert_eq!(live.status(), StatusCode::OK);
    let ready = admin_router(static_source.clone()).oneshot(get("/readyz")).await.unwrap();
    assert_eq!(ready.status(), StatusCode::OK, "a static source needs no sync");
    let text = |router: axum::Router| async move {
        let response = router.oneshot(get("/metrics")).await.unwrap();
        String::from_utf8(to_bytes(response.into_body(), usize::MAX).await.unwrap().to_vec()).unwrap()
    };
    assert!(text(admin_router(static_source.clone())).await.contains("\ningress_status_guard_ready 1\n"));

    // A publish Service whose cache is never fed (no watch runs here): live, but not ready.
    let service_source = state(flags(Some("ingress/lb"), None));
    let live = admin_router(service_source.clone()).oneshot(get("/livez")).await.unwrap();
    assert_eq!(live.status(), StatusCode::OK);
    let ready = admin_router(service_source.clone()).oneshot(get("/readyz")).await.unwrap();
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    // The gauge says what /readyz says, at each scrape.
    assert!(text(admin_router(service_source)).await.contains("\ningress_status_guard_ready 0\n"));
}

#[tokio::test]
async fn findings_reach_the_response_and_the_metrics() {
    let policy = PolicySpec { publish_status_address: Some("192.0.2.10".into()), ..Default::default() };
    let policies = policy.into_policies().unwrap();
    let state = AppState::new(policies.clone(), SourceCache::new(&policies));
    let webhook = webhook_router(state.clone(), LIMIT);
    let metrics = || async {
        let response =
            admin_router(state.clone()).oneshot(Request::get("/metrics").body(Body::empty()).unwrap()).await.unwrap();
        String::from_utf8(to_bytes(response.into_body(), usize::MAX).await.unwrap().to_vec()).unwrap()
    };
    // Every result is counted from the start (the handler's counters are resolved up front).
    assert!(metrics().await.contains("ingress_status_guard_admission_requests_total{result=\"patched\"} 0"));

    for _ in 0..2 {
        let response = webhook.clone().oneshot(post(Some("application/json"), FIXTURE)).await.unwrap();
        let json: Value = serde_json::from_slice(&to_bytes(response.into_body(), usize::MAX).await.unwrap()).unwrap();
        assert_eq!(
            json["response"]["warnings"],
            serde_json::json!(["status.loadBalancer.ingress rewritten to [192.0.2.10] by policy default"])
        );
        assert_eq!(
            json["response"]["auditAnnotations"],
            serde_json::json!({"policy": "default", "attempted": "10.7.7.7", "canonical": "192.0.2.10", "action": "patched"})
        );
    }
    webhook.clone().oneshot(post(Some("application/json"), "{")).await.unwrap();

    let text = metrics().await;
    for line in [
        "ingress_status_guard_admission_requests_total{result=\"patched\"} 2",
        "ingress_status_guard_admission_requests_total{result=\"error\"} 1",
        "ingress_status_guard_rogue_writes_total{policy=\"default\",writer=\"kubernetes-admin\",action=\"patched\"} 2",
        "ingress_status_guard_admission_duration_seconds_count 3",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

/// Issue 12: a body the webhook would have to decode is refused, and arrays where the schema has
/// objects are errors that name the field, not readings, and no error names an internal type.
#[tokio::test]
async fn encodings_and_arrays_are_refused() {
    let json = |s: &str| post(Some("application/json"), s.to_owned());
    let mut gzip = json(FIXTURE);
    gzip.headers_mut().insert(header::CONTENT_ENCODING, "gzip".parse().unwrap());
    let (status, _, body) = send(gzip).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{body}");
    assert!(body["error"].as_str().unwrap().contains("content-encoding \"gzip\""), "{body}");
    let mut identity = json(FIXTURE);
    identity.headers_mut().insert(header::CONTENT_ENCODING, "identity".parse().unwrap());
    assert_eq!(send(identity).await.0, StatusCode::OK);

    let edited = |path: &[&str], value: Value| Review::fixture().set(path, value).to_json();
    let cases = [
        (
            "status: []",
            edited(&["request", "object", "status"], serde_json::json!([])),
            "status: invalid type: sequence, expected an IngressStatus object",
        ),
        (
            "address as array",
            edited(&["request", "object", "status", "loadBalancer", "ingress"], serde_json::json!([["10.9.9.9"]])),
            "status.loadBalancer.ingress[0]: invalid type: sequence, expected an IngressLoadBalancerIngress object",
        ),
        (
            "loadBalancer: []",
            edited(&["request", "object", "status", "loadBalancer"], serde_json::json!([])),
            "status.loadBalancer: invalid type: sequence",
        ),
        (
            "object: []",
            edited(&["request", "object"], serde_json::json!([])),
            "request.object is not a valid Ingress: invalid type: sequence, expected a Kubernetes object",
        ),
        (
            "request: []",
            edited(&["request"], serde_json::json!(["uid"])),
            "request: invalid type: sequence, expected an AdmissionRequest object",
        ),
        (
            "userInfo: []",
            edited(&["request", "userInfo"], serde_json::json!(["u"])),
            "request.userInfo: invalid type: sequence, expected a UserInfo object",
        ),
        (
            "request: 7",
            edited(&["request"], serde_json::json!(7)),
            "request: invalid type: integer `7`, expected an AdmissionRequest object",
        ),
    ];
    for (name, body, want) in cases {
        let (status, _, response) = send(json(&body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "case {name}: {response}");
        let message = response["error"].as_str().unwrap();
        assert!(message.contains(want), "case {name}: {message}");
        assert!(!message.contains("struct "), "case {name}: {message}");
    }
}
