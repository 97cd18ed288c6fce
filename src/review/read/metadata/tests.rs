use serde_json::{Value, json};

use super::*;

/// The metadata of `value` as a review carries it.
fn meta(text: &str) -> MetaIn<'_> {
    crate::strict::from_str(text).expect("metadata")
}

fn compare(written: &str, stored: &str) -> Option<(Vec<String>, usize, Value)> {
    let changed = Metadata::compare(Some(&meta(written)), &meta(stored)).expect("valid metadata")?;
    let mut ops = b"[".to_vec();
    changed.write_ops(&mut ops);
    ops.pop();
    ops.push(b']');
    Some((changed.named.clone(), changed.more, serde_json::from_slice(&ops).expect("the ops are JSON")))
}

/// Applies the ops to `written` and checks they give `stored`'s four fields back.
fn assert_restores(written: &str, stored: &str) {
    let (_, _, ops) = compare(written, stored).expect("a change");
    let mut object = json!({"metadata": serde_json::from_str::<Value>(written).unwrap()});
    json_patch::patch(&mut object, &serde_json::from_value::<json_patch::Patch>(ops).unwrap()).expect("applies");
    let stored: Value = serde_json::from_str(stored).unwrap();
    for field in ["annotations", "labels", "ownerReferences", "finalizers"] {
        let empty = |v: Option<&Value>| match v {
            None | Some(Value::Null) => Value::Null,
            Some(Value::Object(m)) if m.is_empty() => Value::Null,
            Some(Value::Array(a)) if a.is_empty() => Value::Null,
            Some(v) => v.clone(),
        };
        assert_eq!(empty(object["metadata"].get(field)), empty(stored.get(field)), "{field}: {object}");
    }
}

#[test]
fn the_same_metadata_in_any_order_is_no_change() {
    let cases = [
        (r#"{}"#, r#"{}"#),
        (r#"{"uid":"a","name":"x"}"#, r#"{"uid":"b","resourceVersion":"7"}"#),
        (r#"{"annotations":{"a":"1","b":"2"}}"#, r#"{"annotations":{"b":"2","a":"1"}}"#),
        (r#"{"annotations":{}}"#, r#"{}"#),
        (r#"{"labels":null,"finalizers":[]}"#, r#"{"labels":{}}"#),
        (
            r#"{"ownerReferences":[{"kind":"A","name":"n","uid":"u"}]}"#,
            r#"{"ownerReferences":[{"uid":"u","name":"n","kind":"A"}]}"#,
        ),
        (r#"{"annotations":{"a":"\u0041"}}"#, r#"{"annotations":{"a":"A"}}"#),
    ];
    for (written, stored) in cases {
        assert_eq!(compare(written, stored), None, "{written} vs {stored}");
    }
}

#[test]
fn changed_keys_are_named_and_the_stored_fields_put_back() {
    let stored = r#"{"annotations":{"kubernetes.io/ingress.class":"guarded","keep":"1"},"labels":{"team":"a"}}"#;
    let cases: [(&str, &[&str]); 6] = [
        (
            r#"{"annotations":{"kubernetes.io/ingress.class":"zzz","keep":"1"},"labels":{"team":"a"}}"#,
            &["metadata.annotations[kubernetes.io/ingress.class]"],
        ),
        (
            r#"{"annotations":{"kubernetes.io/ingress.class":"guarded","keep":"1","external-dns.alpha.kubernetes.io/target":"192.0.2.99"},"labels":{"team":"a"}}"#,
            &["metadata.annotations[external-dns.alpha.kubernetes.io/target]"],
        ),
        (
            r#"{"annotations":{"keep":"1"},"labels":{"team":"a"}}"#,
            &["metadata.annotations[kubernetes.io/ingress.class]"],
        ),
        (r#"{"annotations":{"kubernetes.io/ingress.class":"guarded","keep":"1"}}"#, &["metadata.labels[team]"]),
        (
            r#"{"annotations":{"kubernetes.io/ingress.class":"guarded","keep":"1"},"labels":{"team":"a"},"finalizers":["example.test/block"]}"#,
            &["metadata.finalizers[example.test/block]"],
        ),
        (
            r#"{"annotations":{"kubernetes.io/ingress.class":"guarded","keep":"1"},"labels":{"team":"a"},"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"0"}]}"#,
            &["metadata.ownerReferences"],
        ),
    ];
    for (written, named) in cases {
        let (got, more, _) = compare(written, stored).expect("a change");
        assert_eq!((got.iter().map(String::as_str).collect::<Vec<_>>(), more), (named.to_vec(), 0), "{written}");
        assert_restores(written, stored);
    }
}

#[test]
fn ops_add_what_is_stored_and_remove_what_is_not() {
    let (_, _, ops) = compare(r#"{"labels":{"x":"1"},"finalizers":["f"]}"#, r#"{"annotations":{"a":"b"}}"#).unwrap();
    assert_eq!(
        ops,
        json!([
            {"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}},
            {"op": "remove", "path": "/metadata/labels"},
            {"op": "remove", "path": "/metadata/finalizers"},
        ])
    );
    assert_restores(r#"{"labels":{"x":"1"},"finalizers":["f"]}"#, r#"{"annotations":{"a":"b"}}"#);
}

#[test]
fn an_object_without_metadata_gets_one_before_the_fields() {
    let changed = Metadata::compare(None, &meta(r#"{"labels":{"a":"b"}}"#)).unwrap().expect("a change");
    let mut ops = b"[".to_vec();
    changed.write_ops(&mut ops);
    ops.pop();
    ops.push(b']');
    let mut object = json!({"status": {}});
    let patch: json_patch::Patch = serde_json::from_slice(&ops).unwrap();
    json_patch::patch(&mut object, &patch).expect("applies");
    assert_eq!(object["metadata"], json!({"labels": {"a": "b"}}));
}

#[test]
fn names_are_bounded_escaped_and_counted() {
    let many: serde_json::Map<String, Value> = (0..40).map(|i| (format!("k{i:02}"), json!("v"))).collect();
    let written = json!({"labels": many}).to_string();
    let (named, more, _) = compare(&written, "{}").unwrap();
    assert_eq!((named.len(), more), (MAX_NAMED, 40 - MAX_NAMED));
    let changed = Metadata::compare(Some(&meta(&written)), &meta("{}")).unwrap().unwrap();
    assert!(changed.to_string().ends_with(",+32 more"), "{changed}");

    let long = format!(r#"{{"annotations":{{"a\nINFO forged{}":"v"}}}}"#, "x".repeat(1000));
    let (named, _, _) = compare(&long, "{}").unwrap();
    assert!(named[0].starts_with("metadata.annotations[a\\nINFO forged") && named[0].len() < 300, "{named:?}");
}

#[test]
fn past_the_item_bound_a_field_is_compared_whole_and_named_alone() {
    let big = |extra: &str| {
        let mut labels: serde_json::Map<String, Value> =
            (0..MAX_ITEMS + 10).map(|i| (format!("k{i}"), json!("v"))).collect();
        if !extra.is_empty() {
            labels.insert(extra.to_owned(), json!("v"));
        }
        json!({ "labels": labels }).to_string()
    };
    assert_eq!(compare(&big(""), &big("")), None);
    let (named, _, _) = compare(&big("new"), &big("")).unwrap();
    assert_eq!(named, ["metadata.labels"]);
    assert_restores(&big("new"), &big(""));
}

#[test]
fn reordered_finalizers_are_a_change_of_the_field() {
    let (named, _, _) = compare(r#"{"finalizers":["a","b"]}"#, r#"{"finalizers":["b","a"]}"#).unwrap();
    assert_eq!(named, ["metadata.finalizers"]);
}

#[test]
fn a_field_of_the_wrong_type_is_an_error_naming_it() {
    let err = Metadata::compare(Some(&meta(r#"{"labels":["a"]}"#)), &meta("{}")).unwrap_err();
    assert!(err.to_string().starts_with("request.object.metadata.labels: invalid type: sequence"), "{err}");
    let err = Metadata::compare(Some(&meta("{}")), &meta(r#"{"finalizers":{"a":"b"}}"#)).unwrap_err();
    assert!(err.to_string().starts_with("request.oldObject.metadata.finalizers: invalid type: map"), "{err}");
}

#[test]
fn stored_values_past_the_restore_bound_are_not_restorable() {
    let huge = json!({"annotations": {"a": "x".repeat(MAX_RESTORE)}}).to_string();
    let changed = Metadata::compare(Some(&meta("{}")), &meta(&huge)).unwrap().unwrap();
    assert!(!changed.restorable());
    let small = Metadata::compare(Some(&meta("{}")), &meta(r#"{"annotations":{"a":"b"}}"#)).unwrap().unwrap();
    assert!(small.restorable());
}
