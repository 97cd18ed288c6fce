//! Gateway status reviews, real-shaped and hostile. The reviews are the real API server's
//! fixture with its request turned into a Gateway status UPDATE: the envelope, its field order
//! and the oldObject are as the API server sends them.

use serde_json::{Value, json};

use crate::review::read::{Review, Target, read};

const FIXTURE: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ingress-status-update.apiserver-1.24.json"));

/// A Gateway as the API server stores it (CRD v1.6): the last-applied annotation, managedFields
/// of kubectl and of the controller's status writes, two listeners, and `status`.
fn gateway(status: &Value) -> Value {
    let condition = |kind: &str| json!({"type": kind, "status": "True", "reason": kind, "message": "Gateway is programmed", "observedGeneration": 1, "lastTransitionTime": "2026-11-29T20:53:58Z"});
    let spec = json!({"gatewayClassName": "eg", "listeners": [
        {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "Same"}}},
        {"name": "https", "port": 443, "protocol": "HTTPS", "hostname": "*.example.test", "tls": {"mode": "Terminate", "certificateRefs": [{"group": "", "kind": "Secret", "name": "wildcard"}]}, "allowedRoutes": {"namespaces": {"from": "All"}}},
    ]});
    let applied = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"annotations": {}, "name": "demo-gw", "namespace": "default"}, "spec": spec});
    let mut object = json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "demo-gw", "namespace": "default", "uid": "5c1e8f2a-8c1d-4d8e-9d64-2f7f1c9e8a11", "resourceVersion": "311", "generation": 1, "creationTimestamp": "2026-11-29T20:53:57Z",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": format!("{applied}\n")},
            "managedFields": [
                {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "gateway.networking.k8s.io/v1", "time": "2026-11-29T20:53:57Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:gatewayClassName": {}, "f:listeners": {}}}},
                {"manager": "envoy-gateway", "operation": "Update", "apiVersion": "gateway.networking.k8s.io/v1", "time": "2026-11-29T20:53:58Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:addresses": {}, "f:conditions": {}, "f:listeners": {}}}, "subresource": "status"},
            ]},
        "spec": spec,
    });
    if !status.is_null() {
        object["status"] = status.clone();
    }
    let listener = |name: &str| json!({"name": name, "attachedRoutes": 2, "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}], "conditions": [condition("Accepted"), condition("Programmed")]});
    if let Some(s) = object.get_mut("status").and_then(Value::as_object_mut) {
        s.entry("conditions").or_insert(json!([condition("Accepted"), condition("Programmed")]));
        s.entry("listeners").or_insert(json!([listener("http"), listener("https")]));
    }
    object
}

fn written() -> Value {
    json!({"addresses": [{"type": "IPAddress", "value": "192.0.2.254"}, {"type": "Hostname", "value": "lb.example.test"}]})
}

/// The fixture's text, its request turned into a Gateway status UPDATE whose object has
/// `status`: every member in the API server's order (the kind and subresource before the object).
pub(super) fn in_order(status: &Value) -> String {
    let text = FIXTURE.trim_end();
    let (object, old) = (text.find(",\"object\":").unwrap(), text.find(",\"oldObject\":").unwrap());
    let dry_run = text.find(",\"dryRun\":").unwrap();
    let old_status = json!({"addresses": [{"type": "IPAddress", "value": "192.0.2.10"}]});
    format!(
        "{}{}{}{}",
        &text[..object],
        format_args!(",\"object\":{}", gateway(status)),
        format_args!(",\"oldObject\":{}", gateway(&old_status)),
        &text[dry_run..],
    )
    .replace(
        "\"group\":\"networking.k8s.io\",\"version\":\"v1\",\"kind\":\"Ingress\"",
        "\"group\":\"gateway.networking.k8s.io\",\"version\":\"v1\",\"kind\":\"Gateway\"",
    )
    .replace(
        "\"group\":\"networking.k8s.io\",\"version\":\"v1\",\"resource\":\"ingresses\"",
        "\"group\":\"gateway.networking.k8s.io\",\"version\":\"v1\",\"resource\":\"gateways\"",
    )
    .replace("\"demo-ing\"", "\"demo-gw\"")
    .replace(&text[old..dry_run], "")
}

/// The same review as a JSON value (serialized, its keys sorted: the object before the
/// operation and the subresource, so the reader must come back to it).
fn fixture(status: &Value) -> Value {
    serde_json::from_str(&in_order(status)).unwrap()
}

fn gateway_target<'a>(review: &'a Review) -> &'a crate::kind::gateway::GatewayWrite {
    match &review.target {
        Target::Gateway(s) => &s.write,
        other => panic!("not a Gateway status review: {other:?}"),
    }
}

#[test]
fn the_fixture_is_a_gateway_review_as_the_api_server_orders_it() {
    let text = in_order(&written());
    let at = |key: &str| text.find(key).unwrap_or_else(|| panic!("{key} missing"));
    assert!(at("\"subResource\":\"status\"") < at("\"object\":") && at("\"operation\":\"UPDATE\"") < at("\"object\":"));
    assert!(at("\"object\":") < at("\"oldObject\":") && at("\"oldObject\":") < at("\"dryRun\":"));
    assert!(!text.contains("Ingress") && !text.contains("ingresses"), "{text}");
    assert!(text.len() > 4000, "a typical review, not a toy: {} bytes", text.len());
}

#[test]
fn reads_gateway_reviews() {
    let many = |n: usize| json!({"addresses": (0..n).map(|i| json!({"type": "IPAddress", "value": format!("10.0.{}.{}", i / 256, i % 256)})).collect::<Vec<_>>()});
    let statuses = [
        written(),
        Value::Null,
        json!({}),
        json!({"addresses": null}),
        json!({"addresses": []}),
        json!({"addresses": [{"value": "192.0.2.1"}, {"type": "example.com/Kind", "value": "x"}, {}]}),
        json!({"addresses": [{"type": "Hostname", "value": "h".repeat(100_000)}]}),
        many(16),
        many(17),
        many(5000),
    ];
    for status in &statuses {
        // In the API server's order, and with sorted keys (the object before the fields that
        // say what it is): read the same.
        let (in_order, sorted) = (in_order(status).into_bytes(), serde_json::to_vec(&fixture(status)).unwrap());
        let first = read(&in_order).unwrap_or_else(|e| panic!("status {status:.80}: {e}"));
        assert_eq!(read(&sorted).ok().as_ref(), Some(&first), "status {status:.80}");
        {
            let write = gateway_target(&first);
            assert!(write.addresses.len() <= 16, "bounded");
            assert_eq!((write.class.as_deref(), write.name.as_str()), (Some("eg"), "demo-gw"));
        }
    }
    let long = in_order(&many(5000));
    let long = read(long.as_bytes()).unwrap();
    assert_eq!((gateway_target(&long).addresses.len(), gateway_target(&long).omitted), (16, 5000 - 16));
    let cut = in_order(&statuses[6]);
    let cut = read(cut.as_bytes()).unwrap();
    assert!(gateway_target(&cut).addresses[0].value.len() <= crate::kind::gateway::status::MAX_TEXT, "cut as read");
    let pretty = serde_json::to_vec_pretty(&fixture(&written())).unwrap();
    assert_eq!(read(&pretty).unwrap(), read(in_order(&written()).as_bytes()).unwrap(), "pretty-printed");
}

/// Hostile and odd Gateway reviews: read, or refused with an error that names the field.
#[test]
fn gateway_edge_cases() {
    let edited = |edit: &dyn Fn(&mut Value)| {
        let mut v = fixture(&written());
        edit(&mut v);
        serde_json::to_string(&v).unwrap()
    };
    let text = in_order(&written());
    let cases: Vec<(&str, String, Option<&str>)> = vec![
        (
            "value as number",
            edited(&|v| v["request"]["object"]["status"]["addresses"][0]["value"] = json!(7)),
            Some("request.object is not a valid Gateway: status.addresses[0].value: invalid type: integer `7`"),
        ),
        (
            "entry as array",
            edited(&|v| v["request"]["object"]["status"]["addresses"] = json!([["IPAddress", "10.0.0.1"]])),
            Some("request.object is not a valid Gateway: status.addresses[0]: invalid type: sequence"),
        ),
        (
            "addresses as object",
            edited(&|v| v["request"]["object"]["status"]["addresses"] = json!({"type": "IPAddress"})),
            Some("request.object is not a valid Gateway: status.addresses: invalid type: map"),
        ),
        (
            "status as array",
            edited(&|v| v["request"]["object"]["status"] = json!([{}])),
            Some(
                "request.object is not a valid Gateway: status: invalid type: sequence, expected a GatewayStatus object",
            ),
        ),
        (
            "spec as array",
            edited(&|v| v["request"]["object"]["spec"] = json!([])),
            Some("request.object is not a valid Gateway: spec: invalid type: sequence, expected a GatewaySpec object"),
        ),
        (
            "class as number",
            edited(&|v| v["request"]["object"]["spec"]["gatewayClassName"] = json!(7)),
            Some("request.object is not a valid Gateway: spec.gatewayClassName: invalid type: integer `7`"),
        ),
        (
            "object as array",
            edited(&|v| v["request"]["object"] = json!([1])),
            Some("request.object is not a valid Gateway: invalid type: sequence, expected a Kubernetes object"),
        ),
        (
            "no object",
            edited(&|v| drop(v["request"].as_object_mut().unwrap().remove("object"))),
            Some("request.object is required for a Gateway status UPDATE"),
        ),
        (
            "null object",
            edited(&|v| v["request"]["object"] = Value::Null),
            Some("request.object is required for a Gateway status UPDATE"),
        ),
        ("null metadata", edited(&|v| v["request"]["object"]["metadata"] = Value::Null), None),
        ("null status", edited(&|v| v["request"]["object"]["status"] = Value::Null), None),
        ("null class", edited(&|v| v["request"]["object"]["spec"]["gatewayClassName"] = Value::Null), None),
        ("invalid class", edited(&|v| v["request"]["object"]["spec"]["gatewayClassName"] = json!("Not A Class")), None),
        (
            "conditions of any shape",
            edited(&|v| v["request"]["object"]["status"]["conditions"] = json!({"x": [1, "a", null]})),
            None,
        ),
        ("annotations of any shape", edited(&|v| v["request"]["object"]["metadata"]["annotations"] = json!(7)), None),
        (
            "Ingress class annotation ignored",
            edited(&|v| v["request"]["object"]["metadata"]["annotations"] = json!({"kubernetes.io/ingress.class": 7})),
            None,
        ),
        (
            "duplicate addresses",
            text.replacen("\"addresses\":", "\"addresses\":null,\"addresses\":", 1),
            Some("request.object is not a valid Gateway: status: duplicate field `addresses`"),
        ),
        ("duplicate skipped listeners", text.replacen("\"listeners\":", "\"listeners\":1,\"listeners\":", 1), None),
        ("escaped key in the status", text.replacen("\"addresses\":", "\"addr\\u0065sses\":", 1), None),
        (
            "uid over its bound",
            edited(&|v| v["request"]["oldObject"]["metadata"]["uid"] = json!("u".repeat(129))),
            None,
        ),
        (
            "request uid over its bound",
            edited(&|v| v["request"]["uid"] = json!("u".repeat(129))),
            Some("request.uid is 129 bytes"),
        ),
        ("a Gateway CREATE", text.replacen("\"operation\":\"UPDATE\"", "\"operation\":\"CREATE\"", 1), None),
        ("a Gateway without the subresource", text.replacen("\"subResource\":\"status\",", "", 1), None),
        (
            "v1beta1",
            text.replace("\"version\":\"v1\",\"kind\":\"Gateway\"", "\"version\":\"v1beta1\",\"kind\":\"Gateway\""),
            None,
        ),
        (
            "kind after the object",
            {
                let mut v = fixture(&written());
                v["request"]["zkind"] = v["request"]["kind"].take();
                serde_json::to_string(&v).unwrap().replace("\"kind\":null,", "").replace("\"zkind\":", "\"kind\":")
            },
            None,
        ),
    ];
    for (name, body, message) in &cases {
        let got = read(body.as_bytes()).map_err(|e| e.to_string());
        match message {
            Some(message) => {
                let error = got.as_ref().err().unwrap_or_else(|| panic!("case {name}: read {got:?}"));
                assert!(error.starts_with(message), "case {name}: {error}");
            }
            None => assert!(got.is_ok(), "case {name}: {got:?}"),
        }
    }
    // Not a status UPDATE: nothing is judged.
    let read = |case: &str| {
        let body = &cases.iter().find(|c| c.0 == case).unwrap().1;
        read(body.as_bytes()).unwrap().target
    };
    assert!(matches!(read("a Gateway CREATE"), Target::Other(_)));
    assert!(matches!(read("v1beta1"), Target::Gateway(_)));
    assert!(matches!(read("kind after the object"), Target::Gateway(_)));
    assert!(matches!(read("uid over its bound"), Target::OutOfBounds(_)));
}
