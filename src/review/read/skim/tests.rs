use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::{prelude::*, strategy::ValueTree as _};
use serde_json::{Value, json};

use super::*;
use crate::review::read::{Review, ReviewError, convert, gateway, read_slow};

const FIXTURE: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ingress-status-update.apiserver-1.24.json"));

static FAST: AtomicUsize = AtomicUsize::new(0);

/// The fast reader's answer when it has one, and the serde_json reader's answer.
pub(super) fn both(body: &[u8]) -> (Option<Result<Review<'_>, String>>, Result<Review<'_>, String>) {
    let fast = review(body).map(|r| {
        match r {
            Skimmed::Ingress(r) => convert(r, Ok),
            Skimmed::Gateway(r) => gateway::convert(r, Ok),
        }
        .map_err(|e: ReviewError| e.to_string())
    });
    if fast.is_some() {
        FAST.fetch_add(1, Ordering::Relaxed);
    }
    (fast, read_slow(body).map_err(|e| e.to_string()))
}

/// The property: where the fast reader answers, serde_json answers the same.
pub(super) fn agree(body: &[u8]) -> Result<(), TestCaseError> {
    let (fast, slow) = both(body);
    if let Some(fast) = fast {
        prop_assert_eq!(fast, slow, "body: {}", String::from_utf8_lossy(body));
    }
    Ok(())
}

fn fixture() -> Value {
    serde_json::from_str(FIXTURE).unwrap()
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
fn reads_real_reviews_fast_and_the_same() {
    let written =
        json!([{"ip": "192.0.2.10"}, {"hostname": "lb.example.test", "ports": [{"port": 80, "protocol": "TCP"}]}]);
    let mut bodies = vec![FIXTURE.as_bytes().to_vec(), with_rules(4, &written), with_rules(300, &written)];
    // What the API server sends may end with a newline; pretty-printed input is read too.
    bodies.push(format!(" {FIXTURE}\r\n").into_bytes());
    for body in &bodies {
        let (fast, slow) = both(body);
        let slow = slow.expect("a valid review");
        assert_eq!(fast, Some(Ok(slow)), "{}", String::from_utf8_lossy(&body[..200]));
    }
    let pretty = serde_json::to_vec_pretty(&fixture()).unwrap();
    assert!(review(&pretty).is_none(), "newlines inside the document go to serde_json");
    assert!(read_slow(&pretty).is_ok());
}

/// Each edge case: what the fast reader must do (`Some(true)`: answer, `Some(false)`: leave
/// it to serde_json, `None`: either), and in every case agree with serde_json.
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
    let cases: Vec<(&str, String, Option<bool>)> = vec![
        ("escaped key", fx.replacen("\"uid\"", "\"u\\u0069d\"", 1), Some(false)),
        ("escaped unread key of a decoded object", fx.replacen("\"resource\"", "\"r\\u0065source\"", 1), Some(false)),
        ("escaped key of a skipped object", fx.replacen("\"manager\"", "\"m\\u0061nager\"", 1), Some(true)),
        ("duplicate uid", fx.replacen("\"uid\":", "\"uid\":\"x\",\"uid\":", 1), Some(false)),
        ("duplicate skipped key", fx.replacen("\"resource\":", "\"resource\":1,\"resource\":", 1), Some(true)),
        ("duplicate top-level kind", fx.replacen("{\"kind\":", "{\"kind\":1,\"kind\":", 1), Some(false)),
        (
            "duplicate class annotation",
            edited(&|v| {
                v["request"]["object"]["metadata"]["annotations"] = json!({"kubernetes.io/ingress.class": "a"});
            })
            .replace(
                "{\"kubernetes.io/ingress.class\":\"a\"}",
                "{\"kubernetes.io/ingress.class\":\"a\",\"kubernetes.io/ingress.class\":\"b\"}",
            ),
            Some(true),
        ),
        ("escaped uid value", fx.replacen("\"0f3cb218", "\"\\u0030f3cb218\\n", 1), Some(true)),
        ("lone surrogate in uid", fx.replacen("\"0f3cb218", "\"\\ud800", 1), None),
        ("lone surrogate skipped", fx.replacen("\"Update\"", "\"\\ud800\"", 1), Some(true)),
        ("bad escape skipped", fx.replacen("\"Update\"", "\"\\x\"", 1), None),
        ("bad hex skipped", fx.replacen("\"Update\"", "\"\\u12G4\"", 1), None),
        ("control character skipped", fx.replacen("\"Update\"", "\"Up\u{1}date\"", 1), None),
        ("null status", edited(&|v| v["request"]["object"]["status"] = Value::Null), Some(true)),
        ("null object", edited(&|v| v["request"]["object"] = Value::Null), Some(true)),
        ("null request", edited(&|v| v["request"] = Value::Null), Some(true)),
        ("null uid", edited(&|v| v["request"]["uid"] = Value::Null), None),
        ("null metadata", edited(&|v| v["request"]["object"]["metadata"] = Value::Null), None),
        ("null annotations", edited(&|v| v["request"]["object"]["metadata"]["annotations"] = Value::Null), Some(true)),
        ("null dryRun", edited(&|v| v["request"]["dryRun"] = Value::Null), Some(true)),
        ("dryRun true", edited(&|v| v["request"]["dryRun"] = json!(true)), Some(true)),
        ("dryRun number", edited(&|v| v["request"]["dryRun"] = json!(1)), None),
        ("uid number", edited(&|v| v["request"]["uid"] = json!(7)), None),
        ("kind as array", edited(&|v| v["request"]["kind"] = json!(["networking.k8s.io", "v1", "Ingress"])), None),
        ("object as array", edited(&|v| v["request"]["object"] = json!([1])), None),
        ("spec as array", edited(&|v| v["request"]["object"]["spec"] = json!([])), None),
        ("status as array", edited(&|v| v["request"]["object"]["status"] = json!([{}])), None),
        (
            "port as float",
            edited(&|v| {
                v["request"]["object"]["status"]["loadBalancer"]["ingress"] =
                    json!([{"ip": "1.2.3.4", "ports": [{"port": 80.0, "protocol": "TCP"}]}]);
            }),
            None,
        ),
        (
            "numbers skipped",
            edited(&|v| v["request"]["oldObject"]["status"] = json!("NUMBERS"))
                .replace("\"NUMBERS\"", "[0,-1,1.5e-7,12E+3,-0.0,1e400,123456789012345678901234567890]"),
            Some(true),
        ),
        ("leading zero skipped", fx.replacen("\"generation\":1", "\"generation\":01", 1), None),
        ("bare minus skipped", fx.replacen("\"generation\":1", "\"generation\":-", 1), None),
        ("trailing comma", fx.replacen("\"Update\"", "\"Update\",", 1), None),
        ("trailing data", format!("{fx} {{}}"), None),
        ("deep nesting skipped", deep(60), Some(true)),
        ("deeper nesting skipped", deep(100), Some(false)),
        ("very deep nesting skipped", deep(200_000), Some(false)),
        ("unbalanced", deep(100).replacen(']', "", 1), None),
        ("truncated", fx[..fx.len() / 2].to_owned(), None),
        ("empty object", "{}".to_owned(), Some(true)),
        ("array", "[]".to_owned(), Some(false)),
        ("wrong kind", fx.replacen("\"AdmissionReview\"", "\"Pod\"", 1), Some(true)),
        ("not an ingress", fx.replacen("\"kind\":\"Ingress\"", "\"kind\":\"Pod\"", 1), Some(true)),
        ("form feed", format!("\u{c}{fx}"), Some(false)),
        ("non-ASCII skipped value", fx.replacen("\"Update\"", "\"Up\u{e9}date \u{1f600}\"", 1), Some(true)),
        ("non-ASCII skipped key", fx.replacen("\"manager\"", "\"m\u{e4}nager\"", 1), Some(true)),
        (
            "escapes across blocks",
            fx.replacen("\"Update\"", &format!("\"{}\"", "ab\\\"\\\\\\u00e9".repeat(9)), 1),
            Some(true),
        ),
    ];
    for (name, body, want) in &cases {
        let (fast, slow) = both(body.as_bytes());
        if let Some(fast) = &fast {
            assert_eq!(fast, &slow, "case {name}");
        }
        if let Some(want) = want {
            assert_eq!(fast.is_some(), *want, "case {name}: fast answered {fast:?}, serde_json {slow:?}");
        }
    }
    // Invalid UTF-8: serde_json does not check skipped strings, but does check keys it decodes.
    let skipped = fx.replacen("\"Update\"", "\"Up\u{0}date\"", 1).into_bytes();
    let skipped: Vec<u8> = skipped.iter().map(|&b| if b == 0 { 0xff } else { b }).collect();
    let (fast, slow) = both(&skipped);
    assert!(slow.is_ok() && fast == Some(slow), "invalid UTF-8 in a skipped string");
    let key: Vec<u8> = fx
        .replacen("\"requestKind\"", "\"request\u{0}Kind\"", 1)
        .bytes()
        .map(|b| if b == 0 { 0xff } else { b })
        .collect();
    let (fast, slow) = both(&key);
    assert!(slow.is_err() && fast.is_none(), "invalid UTF-8 in a key of a decoded struct: {slow:?}");
}

/// The grammar of skipped containers, token by token: each broken one is left to serde_json
/// (which refuses it), each good one read fast.
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
        let body = with_old_object(text);
        let (fast, slow) = both(body.as_bytes());
        assert!(slow.is_err(), "serde_json reads broken {text}");
        assert!(fast.is_none(), "the fast reader read broken {text}: {fast:?}");
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
        let (fast, slow) = both(body.as_bytes());
        assert!(slow.is_ok(), "serde_json refuses {text}: {slow:?}");
        assert_eq!(fast, Some(slow), "{text}");
    }
}

/// A JSON value of any shape, shallow.
pub(super) fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::collection::vec(any::<char>(), 0..6).prop_map(|c| Value::String(c.into_iter().collect())),
        prop::sample::select(vec!["Ingress", "status", "UPDATE", "networking.k8s.io", "nginx", "10.0.0.1"])
            .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS.to_vec()), inner), 0..4)
                .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        ]
    })
}

const KEYS: &[&str] = &[
    "ip",
    "hostname",
    "ports",
    "port",
    "protocol",
    "error",
    "loadBalancer",
    "ingress",
    "username",
    "groups",
    "group",
    "kind",
    "uid",
    "x",
    "kubernetes.io/ingress.class",
    "spec",
    "ingressClassName",
    "gatewayClassName",
];

/// Where the generated values go in the fixture.
const PATHS: &[&[&str]] = &[
    &["apiVersion"],
    &["kind"],
    &["request"],
    &["request", "uid"],
    &["request", "kind"],
    &["request", "kind", "group"],
    &["request", "subResource"],
    &["request", "operation"],
    &["request", "name"],
    &["request", "userInfo"],
    &["request", "userInfo", "groups"],
    &["request", "dryRun"],
    &["request", "object"],
    &["request", "object", "metadata"],
    &["request", "object", "metadata", "uid"],
    &["request", "object", "metadata", "annotations"],
    &["request", "object", "metadata", "annotations", "kubernetes.io/ingress.class"],
    &["request", "object", "spec"],
    &["request", "object", "spec", "ingressClassName"],
    &["request", "object", "status"],
    &["request", "object", "status", "loadBalancer"],
    &["request", "object", "status", "loadBalancer", "ingress"],
    &["request", "oldObject"],
    &["request", "oldObject", "metadata"],
    &["request", "oldObject", "spec"],
    &["request", "oldObject", "spec", "ingressClassName"],
    &["request", "oldObject", "spec", "gatewayClassName"],
];

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

/// Byte edits that make JSON almost right: the tokens that matter, and a few bytes that
/// break strings and UTF-8.
const SPLICES: &[&str] = &[
    "\"",
    "\\",
    "\\\"",
    "\\u00",
    "\\ud83d",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    " ",
    "\n",
    "null",
    "true",
    "0",
    "-",
    "1e5",
    ".5",
    "\"uid\":\"x\",",
    "\"status\":null,",
    "\"kind\":\"Ingress\",",
    "\"ap\\u0069Version\":\"admission.k8s.io/v1\",",
];

pub(super) fn mutate(mut body: Vec<u8>, edits: &[(u8, f64, usize)]) -> Vec<u8> {
    for &(op, at, pick) in edits {
        let i = ((body.len() as f64) * at) as usize;
        let i = i.min(body.len());
        match op % 4 {
            0 => {
                let splice = SPLICES[pick % SPLICES.len()].as_bytes();
                body.splice(i..i, splice.iter().copied());
            }
            1 => {
                let end = (i + 1 + pick % 16).min(body.len());
                body.drain(i..end);
            }
            2 if i < body.len() => {
                body[i] = [0x00, 0x1f, 0x7f, 0x80, 0xc3, 0xff, b'"', b'\\', b'{', b'9'][pick % 10];
            }
            _ => {
                // Repeat a short run: duplicate keys and values.
                let end = (i + 1 + pick % 40).min(body.len());
                let run = body[i..end].to_vec();
                body.splice(i..i, run);
            }
        }
    }
    body
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Generated reviews: the fixture with members replaced by values of any shape, or removed.
    #[test]
    fn agrees_on_generated_reviews(
        edits in prop::collection::vec((prop::sample::select(PATHS.to_vec()), prop::option::weighted(0.8, any_json())), 0..4),
        compact in any::<bool>(),
    ) {
        let mut v = fixture();
        for (path, value) in edits {
            set(&mut v, path, value);
        }
        let body = if compact { serde_json::to_vec(&v).unwrap() } else { serde_json::to_vec_pretty(&v).unwrap() };
        agree(&body)?;
    }

    /// Mutated bytes of the real review (and of one with rules and the last-applied annotation).
    #[test]
    fn agrees_on_mutated_reviews(
        big in any::<bool>(),
        edits in prop::collection::vec((any::<u8>(), 0.0..1.0f64, any::<usize>()), 1..4),
    ) {
        let base = if big { with_rules(3, &json!([{"ip": "10.0.0.1"}])) } else { FIXTURE.as_bytes().to_vec() };
        agree(&mutate(base, &edits))?;
    }
}

proptest! {
    #[test]
    fn finds_the_first_quote_or_backslash(
        bytes in prop::collection::vec(prop_oneof![Just(b'"'), Just(b'\\'), Just(b'a'), any::<u8>()], 0..200),
        from in 0..200usize,
    ) {
        let from = from.min(bytes.len());
        let naive = bytes[from..].iter().position(|&c| c == b'"' || c == b'\\').map(|k| from + k);
        prop_assert_eq!(quote_or_backslash(&bytes, from), naive);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Skipped strings made of quotes, backslashes, escapes good and bad, and plain and
    /// non-ASCII text, starting at every offset from a block boundary: the block skipper
    /// reads every string serde_json accepts, and ends or fails where it does.
    #[test]
    fn skips_strings_as_serde_json_does(
        pieces in prop::collection::vec(prop::sample::select(vec![
            "a", "abcdefghijklmno", "\\\"", "\\\\", "\\", "\"", "\\u00e9", "\\uD83D\\uDE00", "\\u12G4",
            "\\n", "\\x", "\\/", "\u{e9}", "\\u", "\\u0",
        ]), 0..48),
        pad in 0..16usize,
    ) {
        let text = format!("\"{}{}\"", "p".repeat(pad), pieces.concat());
        let body = FIXTURE.trim_end().replacen("\"Update\"", &text, 1);
        let (fast, slow) = both(body.as_bytes());
        if slow.is_ok() {
            prop_assert_eq!(fast, Some(slow), "string {}", text);
        } else if let Some(fast) = fast {
            prop_assert_eq!(fast, slow, "string {}", text);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Skipped containers (`oldObject.status`): JSON of any shape, usually longer than a block, with
    /// spaces after some brackets, colons and commas, and sometimes one byte edit. Where
    /// serde_json reads the review, the block walker does too, and the same.
    #[test]
    fn skips_containers_as_serde_json_does(
        values in prop::collection::vec(any_json(), 1..12),
        spaced in any::<u64>(),
        edit in prop::option::weighted(0.5, (any::<u8>(), 0.0..1.0f64, any::<usize>())),
    ) {
        let compact = serde_json::to_string(&Value::Array(values)).unwrap();
        let mut text = Vec::new();
        for (n, &c) in compact.as_bytes().iter().enumerate() {
            text.push(c);
            if matches!(c, b',' | b':' | b'[' | b'{') && spaced >> (n % 64) & 1 == 1 {
                text.push(b' ');
            }
        }
        let text = match edit {
            Some(edit) => mutate(text, &[edit]),
            None => text,
        };
        let mut v = fixture();
        v["request"]["oldObject"]["status"] = json!("PLACEHOLDER");
        let mut body = serde_json::to_vec(&v).unwrap();
        let at = body.windows(13).position(|w| w == b"\"PLACEHOLDER\"").unwrap();
        body.splice(at..at + 13, text);
        let (fast, slow) = both(&body);
        if slow.is_ok() && !body.iter().any(|&c| c < 0x20) {
            prop_assert_eq!(fast, Some(slow), "oldObject {}", String::from_utf8_lossy(&body[at..]));
        } else if let Some(fast) = fast {
            prop_assert_eq!(fast, slow, "oldObject {}", String::from_utf8_lossy(&body[at..]));
        }
    }
}

#[test]
fn properties_exercise_the_fast_reader() {
    // The proptests above pass trivially if the fast reader never answers; run a fixed sample
    // and require that it answers for a good share of the mutated bodies.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = prop::collection::vec((any::<u8>(), 0.0..1.0f64, any::<usize>()), 1..3);
    let (mut answered, n) = (0, 2000);
    for _ in 0..n {
        let edits = strategy.new_tree(&mut runner).unwrap().current();
        let body = mutate(FIXTURE.as_bytes().to_vec(), &edits);
        let (fast, slow) = both(&body);
        if let Some(fast) = fast {
            answered += 1;
            assert_eq!(fast, slow, "{}", String::from_utf8_lossy(&body));
        }
    }
    assert!(answered > n / 5, "the fast reader answered only {answered} of {n} mutated bodies");
}

/// Reviews that forge metadata through the status subresource, as the API server sends them:
/// the fast reader reads each, the same as serde_json, and both find the change.
#[test]
fn metadata_forging_reviews_are_read_fast_and_the_same() {
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
        let (fast, slow) = both(&body);
        let slow = slow.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(slow.forged_metadata().is_some(), "{name}: the change is found");
        assert_eq!(fast, Some(Ok(slow)), "{name}");
    }
}
