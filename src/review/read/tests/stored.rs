//! Which object each field a status write is judged by comes from: a field the API server resets
//! after mutating admission from `oldObject`, the rest from `object`. Tables per kind, over the
//! real API server's fixture.

use serde_json::{Value, json};

use super::{gateway::in_order, set};
use crate::kind::Kind;
use crate::review::read::{Forged, Review, Target, read};

const FIXTURE: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ingress-status-update.apiserver-1.24.json"));

/// The class and forged field of a review.
fn class_of(body: &[u8]) -> (Option<String>, Option<Forged>) {
    let review = read(body).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(body)));
    let class = |review: &Review| match &review.target {
        Target::Ingress(s) => s.write.class.clone(),
        Target::Gateway(s) => s.write.class.clone(),
        other => panic!("not a status write: {other:?}"),
    };
    (class(&review), review.forged())
}

/// `Some(v)` sets the member (`null` is JSON null), `None` removes it.
type Member = Option<Value>;

fn s(text: &str) -> Member {
    Some(json!(text))
}

/// The Ingress fixture whose object has `field` and `annotation` as its class, and whose
/// oldObject (`None`: no oldObject) has `old_field` and `old_annotation`.
fn ingress(field: Member, annotation: Member, old: Option<(Member, Member)>) -> Value {
    let mut review: Value = serde_json::from_str(FIXTURE).unwrap();
    let class = |v: &mut Value, key: &str, field: Member, annotation: Member| {
        set(v, &["request", key, "spec", "ingressClassName"], field);
        set(v, &["request", key, "metadata", "annotations", "kubernetes.io/ingress.class"], annotation);
    };
    class(&mut review, "object", field, annotation);
    match old {
        Some((field, annotation)) => class(&mut review, "oldObject", field, annotation),
        None => set(&mut review, &["request", "oldObject"], None),
    }
    review
}

#[test]
fn ingress_class_field_from_the_stored_object_annotation_as_written() {
    const F: Forged = Forged(Kind::Ingress);
    let cases: Vec<(&str, Value, Option<&str>, Option<Forged>)> = vec![
        ("unchanged field", ingress(s("nginx"), None, Some((s("nginx"), None))), Some("nginx"), None),
        ("forged field", ingress(s("zzz"), None, Some((s("nginx"), None))), Some("nginx"), Some(F)),
        (
            "field forged over a stored annotation",
            ingress(s("zzz"), s("nginx"), Some((None, s("nginx")))),
            Some("nginx"),
            Some(F),
        ),
        ("field removed", ingress(None, None, Some((s("nginx"), None))), Some("nginx"), Some(F)),
        ("field set to null", ingress(Some(Value::Null), None, Some((s("nginx"), None))), Some("nginx"), Some(F)),
        ("forged into a governed class", ingress(s("nginx"), None, Some((s("other"), None))), Some("other"), Some(F)),
        (
            "the stored field wins over a written annotation",
            ingress(None, s("zzz"), Some((s("nginx"), None))),
            Some("nginx"),
            Some(F),
        ),
        // A governed write's metadata is put back to the stored one: the annotation is
        // oldObject's, and a changed one is a metadata finding, not a forged class field.
        ("annotation changed", ingress(None, s("zzz"), Some((None, s("nginx")))), Some("nginx"), None),
        ("annotation added", ingress(None, s("nginx"), Some((None, None))), None, None),
        ("annotation removed", ingress(None, None, Some((None, s("nginx")))), Some("nginx"), None),
        ("no oldObject: the object", ingress(s("zzz"), None, None), Some("zzz"), None),
    ];
    for (name, review, class, forged) in cases {
        let got = class_of(&serde_json::to_vec(&review).unwrap());
        assert_eq!(got, (class.map(str::to_owned), forged), "case {name}");
    }
    let mut null_old = ingress(s("zzz"), None, None);
    null_old["request"]["oldObject"] = Value::Null;
    assert_eq!(class_of(&serde_json::to_vec(&null_old).unwrap()), (Some("zzz".into()), None), "null oldObject");
}

#[test]
fn the_stored_object_is_read_wherever_it_stands() {
    // oldObject first in the request, before the fields that say what the object is.
    let mut review = ingress(s("zzz"), None, Some((s("nginx"), None)));
    let old = review["request"].as_object_mut().unwrap().remove("oldObject").unwrap();
    let request = serde_json::to_string(&review["request"]).unwrap();
    review["request"] = json!("REQUEST");
    let text = serde_json::to_string(&review).unwrap().replacen(
        "\"REQUEST\"",
        &format!("{{\"oldObject\":{old},{}", &request[1..]),
        1,
    );
    assert!(text.find("\"oldObject\"") < text.find("\"kind\":{"), "{text}");
    assert_eq!(class_of(text.as_bytes()), (Some("nginx".into()), Some(Forged(Kind::Ingress))));
}

/// The Gateway fixture (as the API server orders it) whose object has class `class` and whose
/// oldObject `old` (`None`: no oldObject).
fn gateway(class: Member, old: Option<Member>) -> Value {
    let status = json!({"addresses": [{"type": "IPAddress", "value": "10.6.6.6"}]});
    let mut review: Value = serde_json::from_str(&in_order(&status)).unwrap();
    set(&mut review, &["request", "object", "spec", "gatewayClassName"], class);
    match old {
        Some(old) => set(&mut review, &["request", "oldObject", "spec", "gatewayClassName"], old),
        None => set(&mut review, &["request", "oldObject"], None),
    }
    review
}

#[test]
fn gateway_class_from_the_stored_object() {
    const F: Forged = Forged(Kind::Gateway);
    let cases: Vec<(&str, Value, Option<&str>, Option<Forged>)> = vec![
        ("unchanged", gateway(s("eg"), Some(s("eg"))), Some("eg"), None),
        ("forged", gateway(s("zzz"), Some(s("eg"))), Some("eg"), Some(F)),
        ("forged into a governed class", gateway(s("eg"), Some(s("other"))), Some("other"), Some(F)),
        ("removed", gateway(None, Some(s("eg"))), Some("eg"), Some(F)),
        ("no oldObject: the object", gateway(s("zzz"), None), Some("zzz"), None),
    ];
    for (name, review, class, forged) in cases {
        let got = class_of(&serde_json::to_vec(&review).unwrap());
        assert_eq!(got, (class.map(str::to_owned), forged), "case {name}");
    }
    // The API server's order: the stored object after the written one.
    let text = in_order(&json!({"addresses": []}));
    let forged = text.replacen("\"gatewayClassName\":\"eg\"", "\"gatewayClassName\":\"zzz\"", 1);
    assert!(forged.find("\"zzz\"") < forged.find("\"oldObject\""));
    assert_eq!(class_of(forged.as_bytes()), (Some("eg".into()), Some(F)));
}

#[test]
fn a_malformed_stored_object_is_refused() {
    for old in [json!([]), json!({"spec": []}), json!({"spec": {"ingressClassName": 7}}), json!("x")] {
        let mut review = ingress(s("nginx"), None, None);
        review["request"]["oldObject"] = old.clone();
        let body = serde_json::to_vec(&review).unwrap();
        let got = read(&body);
        assert!(got.is_err(), "{old}: {got:?}");
    }
}
