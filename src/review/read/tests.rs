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

/// The fixture as a JSON value, to edit.
fn fixture() -> Value {
    serde_json::from_str(FIXTURE).unwrap()
}

/// Sets (or with `None`, removes) the member at `path`, creating objects on the way.
pub(super) fn set(root: &mut Value, path: &[&str], value: Option<Value>) {
    let (last, parents) = path.split_last().unwrap();
    let mut at = root;
    for key in parents {
        if !at.is_object() {
            *at = json!({});
        }
        at = at.as_object_mut().unwrap().entry(*key).or_insert(json!({}));
    }
    if !at.is_object() {
        *at = json!({});
    }
    let map = at.as_object_mut().unwrap();
    match value {
        Some(v) => drop(map.insert((*last).to_owned(), v)),
        None => drop(map.remove(*last)),
    }
}

/// The fixture with the `last-applied` annotation and `rules` in both objects, as the
/// benchmarks build it.
fn with_rules(rules: usize, written: &Value) -> Vec<u8> {
    let mut review = fixture();
    let rules: Vec<Value> = (0..rules)
        .map(|i| {
            json!({"host": format!("app-{i}.example.test"), "http": {"paths": [{"path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": format!("app-{i}"), "port": {"number": 80}}}}]}})
        })
        .collect();
    for key in ["object", "oldObject"] {
        let object = &mut review["request"][key];
        object["spec"] = json!({"ingressClassName": "nginx", "rules": rules});
        let applied = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "spec": object["spec"]});
        object["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
            Value::String(format!("{applied}\n"));
    }
    review["request"]["object"]["status"]["loadBalancer"]["ingress"] = written.clone();
    serde_json::to_vec(&review).unwrap()
}

#[test]
fn reads_real_reviews_compact_or_not() {
    let written =
        json!([{"ip": "192.0.2.10"}, {"hostname": "lb.example.test", "ports": [{"port": 80, "protocol": "TCP"}]}]);
    for body in [with_rules(4, &written), with_rules(300, &written)] {
        let Target::Ingress(Status { write, .. }) = read(&body).expect("a valid review").target else { panic!() };
        assert_eq!((write.class.as_deref(), write.addresses.len()), (Some("nginx"), 2));
    }
    // What the API server sends may end with a newline; pretty-printed input reads the same.
    let compact = read(FIXTURE.as_bytes()).unwrap();
    let padded = format!(" {FIXTURE}\r\n");
    assert_eq!(read(padded.as_bytes()).unwrap(), compact);
    let pretty = serde_json::to_vec_pretty(&fixture()).unwrap();
    assert_eq!(read(&pretty).unwrap(), compact);
}

/// Ingress status UPDATEs come as `networking.k8s.io` or, from API servers before 1.22,
/// `extensions`; other groups and kinds are not governed writes.
#[test]
fn finds_the_kind_from_the_group_and_kind() {
    let with_kind = |group: &str, kind: &str| {
        let mut v = fixture();
        v["request"]["kind"] = json!({"group": group, "version": "v1beta1", "kind": kind});
        serde_json::to_vec(&v).unwrap()
    };
    for (group, kind, governed) in [
        ("networking.k8s.io", "Ingress", true),
        ("extensions", "Ingress", true),
        ("example.test", "Ingress", false),
        ("networking.k8s.io", "IngressClass", false),
        ("extensions", "Gateway", false),
        ("", "Ingress", false),
    ] {
        let body = with_kind(group, kind);
        let target = read(&body).unwrap().target;
        assert_eq!(matches!(target, Target::Ingress(_)), governed, "{group}/{kind}: {target:?}");
        if !governed {
            assert!(matches!(target, Target::Other(_)), "{group}/{kind}: {target:?}");
        }
    }
}

/// Odd and hostile bodies (escapes, duplicates, nulls, values of the wrong type, bad numbers,
/// deep nesting, bytes JSON forbids): each read or refused as serde_json reads it.
#[test]
fn edge_cases() {
    let edited = |edit: &dyn Fn(&mut Value)| {
        let mut v = fixture();
        edit(&mut v);
        serde_json::to_string(&v).unwrap()
    };
    let fx = FIXTURE.trim_end();
    let deep = |n: usize| {
        edited(&|v| v["request"]["oldObject"]["status"] = json!("DEEP"))
            .replace("\"DEEP\"", &format!("{}{}", "[".repeat(n), "]".repeat(n)))
    };
    // Whether the body reads.
    let cases: Vec<(&str, String, bool)> = vec![
        ("escaped key", fx.replacen("\"uid\"", "\"u\\u0069d\"", 1), true),
        ("escaped unread key of a decoded object", fx.replacen("\"resource\"", "\"r\\u0065source\"", 1), true),
        ("escaped key of a skipped object", fx.replacen("\"manager\"", "\"m\\u0061nager\"", 1), true),
        ("duplicate uid", fx.replacen("\"uid\":", "\"uid\":\"x\",\"uid\":", 1), false),
        ("duplicate skipped key", fx.replacen("\"resource\":", "\"resource\":1,\"resource\":", 1), true),
        ("duplicate top-level kind", fx.replacen("{\"kind\":", "{\"kind\":1,\"kind\":", 1), false),
        (
            "duplicate class annotation",
            edited(&|v| {
                v["request"]["object"]["metadata"]["annotations"] = json!({"kubernetes.io/ingress.class": "a"});
            })
            .replace(
                "{\"kubernetes.io/ingress.class\":\"a\"}",
                "{\"kubernetes.io/ingress.class\":\"a\",\"kubernetes.io/ingress.class\":\"b\"}",
            ),
            true,
        ),
        ("escaped uid value", fx.replacen("\"0f3cb218", "\"\\u0030f3cb218\\n", 1), true),
        ("lone surrogate in uid", fx.replacen("\"0f3cb218", "\"\\ud800", 1), false),
        ("lone surrogate skipped", fx.replacen("\"Update\"", "\"\\ud800\"", 1), true),
        ("bad escape skipped", fx.replacen("\"Update\"", "\"\\x\"", 1), false),
        ("bad hex skipped", fx.replacen("\"Update\"", "\"\\u12G4\"", 1), false),
        ("control character skipped", fx.replacen("\"Update\"", "\"Up\u{1}date\"", 1), false),
        ("null status", edited(&|v| v["request"]["object"]["status"] = Value::Null), true),
        ("null object", edited(&|v| v["request"]["object"] = Value::Null), false),
        ("null request", edited(&|v| v["request"] = Value::Null), false),
        ("null uid", edited(&|v| v["request"]["uid"] = Value::Null), false),
        ("null metadata", edited(&|v| v["request"]["object"]["metadata"] = Value::Null), true),
        ("null annotations", edited(&|v| v["request"]["object"]["metadata"]["annotations"] = Value::Null), true),
        ("null dryRun", edited(&|v| v["request"]["dryRun"] = Value::Null), true),
        ("dryRun true", edited(&|v| v["request"]["dryRun"] = json!(true)), true),
        ("dryRun number", edited(&|v| v["request"]["dryRun"] = json!(1)), false),
        ("uid number", edited(&|v| v["request"]["uid"] = json!(7)), false),
        ("kind as array", edited(&|v| v["request"]["kind"] = json!(["networking.k8s.io", "v1", "Ingress"])), false),
        ("object as array", edited(&|v| v["request"]["object"] = json!([1])), false),
        ("spec as array", edited(&|v| v["request"]["object"]["spec"] = json!([])), false),
        ("status as array", edited(&|v| v["request"]["object"]["status"] = json!([{}])), false),
        (
            "port as float",
            edited(&|v| {
                v["request"]["object"]["status"]["loadBalancer"]["ingress"] =
                    json!([{"ip": "1.2.3.4", "ports": [{"port": 80.0, "protocol": "TCP"}]}]);
            }),
            false,
        ),
        (
            "numbers skipped",
            edited(&|v| v["request"]["oldObject"]["status"] = json!("NUMBERS"))
                .replace("\"NUMBERS\"", "[0,-1,1.5e-7,12E+3,-0.0,1e400,123456789012345678901234567890]"),
            true,
        ),
        ("leading zero skipped", fx.replacen("\"generation\":1", "\"generation\":01", 1), false),
        ("bare minus skipped", fx.replacen("\"generation\":1", "\"generation\":-", 1), false),
        ("trailing comma", fx.replacen("\"Update\"", "\"Update\",", 1), false),
        ("trailing data", format!("{fx} {{}}"), false),
        ("deep nesting skipped", deep(60), true),
        ("deeper nesting skipped", deep(100), true),
        // serde_json skips a value with a stack of its own, not by recursion.
        ("very deep nesting skipped", deep(200_000), true),
        // The first `]` is inside the last-applied annotation's text: a changed annotation.
        ("a bracket less in a string", deep(100).replacen(']', "", 1), true),
        ("unbalanced", deep(100).replacen("]]", "]", 1), false),
        ("truncated", fx[..fx.len() / 2].to_owned(), false),
        ("empty object", "{}".to_owned(), false),
        ("array", "[]".to_owned(), false),
        ("wrong kind", fx.replacen("\"AdmissionReview\"", "\"Pod\"", 1), false),
        ("not an ingress", fx.replacen("\"kind\":\"Ingress\"", "\"kind\":\"Pod\"", 1), true),
        ("form feed", format!("\u{c}{fx}"), false),
        ("non-ASCII skipped value", fx.replacen("\"Update\"", "\"Up\u{e9}date \u{1f600}\"", 1), true),
        ("non-ASCII skipped key", fx.replacen("\"manager\"", "\"m\u{e4}nager\"", 1), true),
        (
            "escapes across blocks",
            fx.replacen("\"Update\"", &format!("\"{}\"", "ab\\\"\\\\\\u00e9".repeat(9)), 1),
            true,
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .filter_map(|(name, body, reads)| {
            let got = read(body.as_bytes());
            (got.is_ok() != *reads).then(|| format!("{name}: {got:?}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
    // Invalid UTF-8: serde_json does not check skipped strings, but does check keys it decodes.
    let skipped = fx.replacen("\"Update\"", "\"Up\u{0}date\"", 1).into_bytes();
    let skipped: Vec<u8> = skipped.iter().map(|&b| if b == 0 { 0xff } else { b }).collect();
    assert!(read(&skipped).is_ok(), "invalid UTF-8 in a skipped string");
    let key: Vec<u8> = fx
        .replacen("\"requestKind\"", "\"request\u{0}Kind\"", 1)
        .bytes()
        .map(|b| if b == 0 { 0xff } else { b })
        .collect();
    assert!(read(&key).is_err(), "invalid UTF-8 in a key of a decoded struct");
}

/// The grammar of skipped containers, token by token: each broken one is refused, each good one
/// read.
#[test]
fn skipped_containers_follow_the_grammar() {
    let with_old_object = |text: &str| {
        let mut v = fixture();
        v["request"]["oldObject"]["status"] = json!("PLACEHOLDER");
        serde_json::to_string(&v).unwrap().replacen("\"PLACEHOLDER\"", text, 1)
    };
    let broken = [
        "{,\"a\":1}",
        "[,1]",
        "[1,]",
        "{\"a\":1,}",
        "{\"a\" 1}",
        "{\"a\":}",
        "{1:2}",
        "[1 2]",
        "{\"a\":1 \"b\":2}",
        "[}",
        "{]",
        "[1}",
        "{\"a\":[1}]}",
        "{\"a\"::1}",
        "{:}",
        "[[]]]",
        "[tru]",
        "[nulll]",
        "[01]",
        "[1.]",
        "[\"a\" \"b\"]",
        "[-]",
        "{\"a\":1}}",
        "[\"a\":1]",
        "{\"a\",1}",
        "[1,,2]",
        "[true false]",
        "[\"\\q\"]",
        "[\"\\u12\"]",
        "[1\"a\"]",
        "[\"a\"1]",
        "[{}{}]",
        "[x]",
        "{\"a\":1",
        "[[[",
        "[\"open]",
        "[\\\"a\"]",
    ];
    for text in broken {
        assert!(read(with_old_object(text).as_bytes()).is_err(), "read broken {text}");
    }
    let good = [
        "{ \"a\" : [ 1 , { } , [ ] , \"x\" ] , \"b\" : null }",
        "[]",
        "{}",
        "[[[]]]",
        "[[],{}]",
        "[-0.5e+3,true,false,null,\"\\u00e9\\\"\\\\\"]",
        "{\"\":{\"\":[\"\"]}}",
        "[0,-0,1E5,2e-3]",
        "[\"}]\",\"{[\",\":,\"]",
        "{\"a\\\"}\":\"b\\\\\"}",
    ];
    for text in good {
        let body = with_old_object(text);
        let got = read(body.as_bytes());
        assert!(got.is_ok(), "refused {text}: {got:?}");
    }
}

/// Reviews that forge metadata through the status subresource, as the API server sends them:
/// each is read, and the change found.
#[test]
fn metadata_forging_reviews_are_found() {
    let edits: [(&str, Value); 7] = [
        ("class annotation", json!({"annotations": {"kubernetes.io/ingress.class": "zzz"}})),
        ("dns target", json!({"annotations": {"external-dns.alpha.kubernetes.io/target": "192.0.2.99"}})),
        ("labels", json!({"labels": {"app": "hijacked", "esc\"aped\n": "v"}})),
        ("owner", json!({"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "0"}]})),
        ("finalizer", json!({"finalizers": ["example.test/block"]})),
        ("null uid", json!({"uid": null, "labels": {"a": "b"}})),
        ("non-ASCII key", json!({"annotations": {"caf\u{e9}.example.test/x": "\u{1f600}"}})),
    ];
    for (name, edit) in edits {
        let mut review = fixture();
        for (key, value) in edit.as_object().unwrap() {
            review["request"]["object"]["metadata"][key] = value.clone();
        }
        let body = serde_json::to_vec(&review).unwrap();
        let review = read(&body).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(review.forged_metadata().is_some(), "{name}: the change is found");
    }
}

mod gateway;
mod stored;

/// Every reader of an Ingress's class follows one rule (a class that is not a class name is
/// no class): the review, the reconciler's lean cache and `check`'s stored Ingress agree, so a
/// class the webhook enforces is one the reconciler heals.
#[test]
fn every_reader_reads_a_class_by_one_rule() {
    use k8s_openapi::api::networking::v1::Ingress;

    use crate::kind::ingress::{LeanIngress, Stored};
    let long = "a".repeat(254);
    for (annotation, field) in [
        ("nginx", None),
        ("Nginx", None),
        ("nginx ", None),
        (long.as_str(), None),
        ("x", Some("Nginx")),
        ("x", Some("ok")),
    ] {
        let mut review = fixture();
        for key in ["object", "oldObject"] {
            review["request"][key]["metadata"]["annotations"] = json!({CLASS_ANNOTATION: annotation});
            if let Some(field) = field {
                review["request"][key]["spec"]["ingressClassName"] = json!(field);
            }
        }
        let Target::Ingress(Status { write, .. }) = read(&serde_json::to_vec(&review).unwrap()).unwrap().target else {
            panic!()
        };
        let object = review["request"]["oldObject"].clone();
        let lean: LeanIngress = serde_json::from_value(object.clone()).unwrap();
        let stored = Stored::of(&serde_json::from_value::<Ingress>(object).unwrap());
        let case = format!("annotation {annotation:.20}, field {field:?}");
        assert_eq!(write.class, lean.class, "review and reconciler, {case}");
        assert_eq!(stored.write.class, lean.class, "check and reconciler, {case}");
    }
}
