use serde_json::{Value, json};

use super::*;
use crate::kind::ingress::{CLASS_ANNOTATION, StatusShape};

const FIXTURE: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ingress-status-update.apiserver-1.24.json"));

#[test]
fn malformed_reviews_say_what_is_wrong() {
    let fixture: Value = serde_json::from_str(FIXTURE).unwrap();
    let edited = |edit: &dyn Fn(&mut Value)| {
        let mut v = fixture.clone();
        edit(&mut v);
        serde_json::to_vec(&v).unwrap()
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("not json", b"{".to_vec(), "body is not a valid AdmissionReview: EOF while parsing"),
        ("array", b"[]".to_vec(), "body is not a valid AdmissionReview: expected a JSON object"),
        ("wrong kind", edited(&|v| v["kind"] = json!("Pod")), "kind must be \"AdmissionReview\", got \"Pod\""),
        ("wrong version", edited(&|v| v["apiVersion"] = json!("v1")), "apiVersion must be"),
        (
            "no request",
            edited(&|v| drop(v.as_object_mut().unwrap().remove("request"))),
            "AdmissionReview has no request",
        ),
        (
            "no uid",
            edited(&|v| drop(v["request"].as_object_mut().unwrap().remove("uid"))),
            "body is not a valid AdmissionReview: request: missing field `uid`",
        ),
        (
            "no object",
            edited(&|v| drop(v["request"].as_object_mut().unwrap().remove("object"))),
            "request.object is required",
        ),
        (
            "bad status",
            edited(&|v| v["request"]["object"]["status"] = json!({"loadBalancer": {"ingress": [{"ip": 7}]}})),
            "request.object is not a valid Ingress: status.loadBalancer.ingress[0].ip: invalid type: integer `7`",
        ),
    ];
    for (name, body, want) in cases {
        let err = read(&body).unwrap_err().to_string();
        assert!(err.starts_with(want), "case {name}: {err}");
    }
}

#[test]
fn reads_what_the_decision_needs() {
    let review = read(FIXTURE.as_bytes()).unwrap();
    assert_eq!(review.api_version, ApiVersion::V1);
    assert_eq!(review.uid, "0f3cb218-7947-4a5f-839c-6e300a5ae86a");
    assert!(!review.dry_run);
    let Target::Ingress(Status { write, object_uid, shape, .. }) = &review.target else { panic!("{review:?}") };
    assert_eq!((write.namespace.as_str(), write.name.as_str()), ("default", "demo-ing"));
    assert_eq!(write.addresses, crate::address::parse_static_list("10.7.7.7").unwrap());
    assert_eq!(object_uid.as_deref(), Some("8d85ab45-0193-4e14-b7ab-45d58c9dc450"));
    assert_eq!(*shape, StatusShape::IngressList);
    let mut with_class: Value = serde_json::from_str(FIXTURE).unwrap();
    // The stored annotation: a status write's metadata is judged as stored.
    for key in ["object", "oldObject"] {
        with_class["request"][key]["metadata"]["annotations"] = json!({CLASS_ANNOTATION: "legacy"});
    }
    let Target::Ingress(Status { write, .. }) = read(&serde_json::to_vec(&with_class).unwrap()).unwrap().target else {
        panic!()
    };
    assert_eq!(write.class.as_deref(), Some("legacy"));
    // As stored: a status write keeps the stored spec, so the field is in both objects.
    for key in ["object", "oldObject"] {
        with_class["request"][key]["spec"]["ingressClassName"] = json!("field");
    }
    let Target::Ingress(Status { write, .. }) = read(&serde_json::to_vec(&with_class).unwrap()).unwrap().target else {
        panic!()
    };
    assert_eq!(write.class.as_deref(), Some("field"), "spec.ingressClassName wins over the annotation");
}
