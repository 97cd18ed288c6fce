//! A bounded, structure-aware fuzz run of the review reader (`review::read`) on stable Rust: reviews
//! with any member replaced by arbitrary JSON, plus byte mutations of the real fixture. The
//! reader must answer every input with a review or an error that names no internal type, and
//! never panic. `cargo test` runs a short pass (ISG_FUZZ_CASES, default 2,000 per strategy);
//! `fuzz/run.sh` runs a long one and reports inputs tried and time. A crash found here becomes
//! a case in `regressions` below.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Instant,
};

use ingress_status_guard::read_review;
use proptest::{prelude::*, test_runner::TestRunner};
use serde_json::Value;

use crate::fixture::{FIXTURE, Review};

fn cases() -> u32 {
    std::env::var("ISG_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000)
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "\\PC{0,16}".prop_map(Value::String),
        Just(Value::String("10.9.9.9".into())),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("ip".to_owned()),
                    Just("hostname".to_owned()),
                    Just("ingress".to_owned()),
                    "[a-zA-Z]{1,8}"
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every JSON pointer of the fixture, so that any member can be replaced.
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match value {
        Value::Object(map) => map.iter().for_each(|(k, v)| pointers(v, format!("{at}/{k}"), out)),
        Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| pointers(v, format!("{at}/{i}"), out)),
        _ => {}
    }
}

fn check(input: &[u8]) -> Result<(), TestCaseError> {
    match read_review(input) {
        Ok(_) => Ok(()),
        Err(e) => {
            let message = e.to_string();
            prop_assert!(!message.is_empty());
            prop_assert!(!message.contains("struct "), "{}", message);
            Ok(())
        }
    }
}

fn run<S: Strategy>(name: &str, strategy: S, input: impl Fn(S::Value) -> Vec<u8>) {
    let config = ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() };
    let tried = AtomicU64::new(0);
    let started = Instant::now();
    let result = TestRunner::new(config).run(&strategy, |value| {
        tried.fetch_add(1, Ordering::Relaxed);
        check(&input(value))
    });
    println!("fuzz {name}: {} inputs in {:.1} s", tried.load(Ordering::Relaxed), started.elapsed().as_secs_f64());
    if let Err(e) = result {
        panic!("fuzz {name}: {e}");
    }
}

#[test]
fn reviews_with_a_member_replaced() {
    let fixture = Review::fixture().into_value();
    let mut paths = Vec::new();
    pointers(&fixture, String::new(), &mut paths);
    let count = paths.len();
    run("member replaced", (0..count, json()), |(at, replacement)| {
        let mut review = fixture.clone();
        match review.pointer_mut(&paths[at]) {
            Some(slot) => *slot = replacement,
            None => review = replacement,
        }
        serde_json::to_vec(&review).unwrap()
    });
}

#[test]
fn byte_mutations_of_the_fixture() {
    let bytes = FIXTURE.as_bytes().to_vec();
    let len = bytes.len();
    let edits = proptest::collection::vec((0..len, any::<u8>(), 0u8..3), 1..8);
    run("byte mutations", (edits, 0..=len), |(edits, cut)| {
        let mut input = bytes.clone();
        for (at, byte, kind) in edits {
            let at = at.min(input.len().saturating_sub(1));
            match kind {
                0 if !input.is_empty() => input[at] = byte,
                1 => input.insert(at, byte),
                _ if !input.is_empty() => drop(input.remove(at)),
                _ => {}
            }
        }
        input.truncate(cut.max(1));
        input
    });
}

/// Forged-spec reviews, Ingress and Gateway: the class fields of `object` and of
/// `oldObject` (which the reader now reads) each absent, a class, or any JSON, and the
/// readers' rule that the stored one wins. The reader must answer each without a panic.
#[test]
fn forged_spec_reviews() {
    let fixture = Review::fixture().into_value();
    let class = prop_oneof![
        Just(None),
        Just(Some(Value::String("nginx".into()))),
        Just(Some(Value::String("zzz".into()))),
        json().prop_map(Some)
    ];
    let spec = prop_oneof![Just(None), json().prop_map(Some)];
    let strategy = (any::<bool>(), class.clone(), class, spec, any::<bool>());
    run("forged spec", strategy, |(gateway, written, stored, old_spec, no_old)| {
        let mut review = fixture.clone();
        let request = &mut review["request"];
        if gateway {
            request["kind"] =
                serde_json::json!({"group": "gateway.networking.k8s.io", "version": "v1", "kind": "Gateway"});
        }
        let field = if gateway { "gatewayClassName" } else { "ingressClassName" };
        for (key, class) in [("object", written), ("oldObject", stored)] {
            if let Some(class) = class {
                request[key]["spec"][field] = class;
            }
        }
        if let Some(spec) = old_spec {
            request["oldObject"]["spec"] = spec;
        }
        if no_old {
            request.as_object_mut().unwrap().remove("oldObject");
        }
        serde_json::to_vec(&review).unwrap()
    });
}

/// Metadata-forging reviews: each of the four metadata fields a status write may change, in
/// `object` and in `oldObject`, absent, a plausible value or any JSON, with `oldObject`'s
/// metadata itself sometimes replaced; the reader compares them and must answer each without
/// a panic.
#[test]
fn forged_metadata_reviews() {
    let fixture = Review::fixture().into_value();
    let field = prop_oneof![
        Just(None),
        Just(Some(serde_json::json!({"kubernetes.io/ingress.class": "zzz", "a": "b"}))),
        Just(Some(serde_json::json!(["example.test/block"]))),
        json().prop_map(Some)
    ];
    let fields = proptest::collection::vec((0usize..4, any::<bool>(), field), 0..6);
    let strategy = (fields, proptest::option::of(json()));
    run("forged metadata", strategy, |(edits, old_metadata)| {
        let mut review = fixture.clone();
        let request = &mut review["request"];
        for (at, old, value) in edits {
            let name = ["annotations", "labels", "ownerReferences", "finalizers"][at];
            let key = if old { "oldObject" } else { "object" };
            match value {
                Some(value) => request[key]["metadata"][name] = value,
                None => drop(request[key]["metadata"].as_object_mut().and_then(|m| m.remove(name))),
            }
        }
        if let Some(metadata) = old_metadata {
            request["oldObject"]["metadata"] = metadata;
        }
        serde_json::to_vec(&review).unwrap()
    });
}

/// Inputs issue 12 named (arrays where objects belong), deep nesting and invalid UTF-8, kept as
/// plain cases; a crash the fuzz passes find goes here too. None has crashed the reader so far.
#[test]
fn regressions() {
    for input in [
        &br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":[]}"#[..],
        br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u","object":[]}}"#,
        br"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
        b"\xff\xfe{}",
        br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u","kind":{"group":"networking.k8s.io","kind":"Ingress"},"subResource":"status","operation":"UPDATE","oldObject":{"spec":{"ingressClassName":"nginx"}},"object":{"spec":{"ingressClassName":"zzz"}}}}"#,
        br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u","kind":{"group":"gateway.networking.k8s.io","kind":"Gateway"},"subResource":"status","operation":"UPDATE","object":{"spec":{"gatewayClassName":"zzz"}},"oldObject":{"spec":{"gatewayClassName":["eg"]}}}}"#,
        br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u","oldObject":[],"object":{}}}"#,
    ] {
        check(input).unwrap();
    }
}
