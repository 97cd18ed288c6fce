use serde_json::{Value, json};

use base64::Engine as _;

use super::*;
use crate::{
    address::{self, Address},
    audit::Finding,
    policy::{ClassScope, Mode, OnUnresolved, Policies, Policy, ServiceRef, Source},
    sources::{Sources, Unresolved},
};

const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

const FIXTURE: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ingress-status-update.apiserver-1.24.json"));

/// Sources answering from a fixed value, for the one Service the tests use.
struct Fixed(Result<Vec<Address>, Unresolved>);
impl Sources for Fixed {
    fn service(&self, _: &ServiceRef) -> Result<Vec<Address>, Unresolved> {
        self.0.clone()
    }
}

fn policy(mode: Mode, classes: &[&str], source: Source) -> Policies {
    Policies::new(vec![Policy {
        name: "p".into(),
        kind: crate::kind::Kind::Ingress,
        kind_inferred: false,
        scope: ClassScope {
            classes: classes.iter().map(std::string::ToString::to_string).collect(),
            ..Default::default()
        },
        namespace_selector: None,
        sources: vec![source],
        mode,
        keep_ports: false,
        on_unresolved: OnUnresolved::Allow,
    }])
    .unwrap()
}

fn static_policy(mode: Mode) -> Policies {
    policy(mode, &[], Source::Static(address::parse_static_list("192.0.2.10,lb.example.test").unwrap()))
}

fn canonical_json() -> Value {
    json!([{"ip": "192.0.2.10"}, {"hostname": "lb.example.test"}])
}

/// The fixture review with `status` replaced (`None` removes it) and optional edits.
fn review(status: Option<Value>, edit: impl FnOnce(&mut Value)) -> Value {
    let mut review: Value = serde_json::from_str(FIXTURE).unwrap();
    let object = &mut review["request"]["object"];
    match status {
        Some(status) => object["status"] = status,
        None => {
            object.as_object_mut().unwrap().remove("status");
        }
    }
    edit(&mut review);
    review
}

/// What the webhook decides about a review body, and its response.
struct Decision {
    outcome: &'static str,
    canonical: Vec<Address>,
    detail: Option<String>,
    finding: Option<Finding>,
}

fn run(review: &Value, policies: &Policies, sources: &dyn Sources) -> (Decision, Value) {
    let body = serde_json::to_vec(review).unwrap();
    let review = crate::review::read(&body).unwrap();
    let verdict = review.decide(policies, sources);
    let response: Value = serde_json::from_slice(&render(&review, &verdict)).unwrap();
    let decision = Decision {
        outcome: verdict.result(),
        canonical: match &verdict {
            Verdict::Mismatch { canonical, .. } => canonical.to_vec(),
            Verdict::Canonical { policy } => sources.canonical(policy).unwrap().into_owned(),
            _ => vec![],
        },
        detail: match &verdict {
            Verdict::Ignored(what) => Some(what.clone()),
            _ => None,
        },
        finding: Finding::take(review, verdict),
    };
    (decision, response)
}

fn decoded_patch(response: &Value) -> Option<json_patch::Patch> {
    let encoded = response["response"]["patch"].as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).unwrap();
    Some(serde_json::from_slice(&bytes).expect("patch must be an RFC 6902 array"))
}

const NO_SERVICE: Fixed =
    Fixed(Err(Unresolved::NotSynced(ServiceRef { namespace: String::new(), name: String::new() })));

#[test]
fn patch_applies_to_every_status_shape_and_is_idempotent() {
    let cases: Vec<(&str, Option<Value>)> = vec![
        ("status absent", None),
        ("status null", Some(Value::Null)),
        ("status empty", Some(json!({}))),
        ("loadBalancer null", Some(json!({"loadBalancer": null}))),
        ("loadBalancer empty", Some(json!({"loadBalancer": {}}))),
        ("ingress null", Some(json!({"loadBalancer": {"ingress": null}}))),
        ("ingress empty", Some(json!({"loadBalancer": {"ingress": []}}))),
        ("wrong values", Some(json!({"loadBalancer": {"ingress": [{"ip": "10.7.7.7"}, {"hostname": "old.example"}]}}))),
        ("subset", Some(json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}))),
        (
            "right addresses with ports",
            Some(
                json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10", "ports": [{"port": 80, "protocol": "TCP"}]}, {"hostname": "lb.example.test"}]}}),
            ),
        ),
    ];
    let policies = static_policy(Mode::Enforce);
    for (name, status) in cases {
        let input = review(status, |_| {});
        let (decision, response) = run(&input, &policies, &NO_SERVICE);
        assert_eq!(decision.outcome, "patched", "case {name}");
        assert_eq!(response["response"]["patchType"], "JSONPatch", "case {name}");
        let patch = decoded_patch(&response).unwrap_or_else(|| panic!("case {name}: no patch"));
        for op in &patch.0 {
            let path = serde_json::to_value(op).unwrap()["path"].as_str().unwrap().to_owned();
            assert!(path.starts_with("/status"), "case {name}: patch touches {path}");
        }
        let mut object = input["request"]["object"].clone();
        let spec_before = object["spec"].clone();
        json_patch::patch(&mut object, &patch).unwrap_or_else(|e| panic!("case {name}: patch does not apply: {e}"));
        assert_eq!(object["status"]["loadBalancer"]["ingress"], canonical_json(), "case {name}");
        assert_eq!(object["spec"], spec_before, "case {name}");

        let mut again = input.clone();
        again["request"]["object"] = object;
        let (second, response) = run(&again, &policies, &NO_SERVICE);
        assert_eq!(second.outcome, "unchanged", "case {name}: second pass");
        assert!(response["response"].get("patch").is_none(), "case {name}: second pass patched");
    }
}

#[test]
fn canonical_writes_are_not_patched() {
    let policies = static_policy(Mode::Enforce);
    for (name, list) in [
        ("same order", json!([{"ip": "192.0.2.10"}, {"hostname": "lb.example.test"}])),
        ("other order", json!([{"hostname": "lb.example.test"}, {"ip": "192.0.2.10"}])),
        ("duplicated", json!([{"hostname": "lb.example.test"}, {"ip": "192.0.2.10"}, {"ip": "192.0.2.10"}])),
    ] {
        let (decision, response) =
            run(&review(Some(json!({"loadBalancer": {"ingress": list}})), |_| {}), &policies, &NO_SERVICE);
        assert_eq!(decision.outcome, "unchanged", "case {name}");
        assert_eq!(
            response["response"],
            json!({"uid": "0f3cb218-7947-4a5f-839c-6e300a5ae86a", "allowed": true}),
            "case {name}"
        );
    }
}

#[test]
fn strings_are_escaped_as_serde_json_escapes_them() {
    let mut text: String = (0u8..0x80).map(char::from).collect();
    text.push_str("é€😀\u{2028}");
    let mut out = Vec::new();
    string(&mut out, format_args!("{text}"));
    assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(&text).unwrap());
    let mut out = Vec::new();
    string(&mut out, format_args!("{:?} and {}", "a\"b", 7));
    assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(&format!("{:?} and {}", "a\"b", 7)).unwrap());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Quotes, backslashes and control characters at every offset from a 16-byte block.
    #[test]
    fn any_string_is_escaped_as_serde_json_escapes_it(
        chars in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::sample::select(vec!['"', '\\', '\n', '\u{1}', '\u{1f}', '\u{7f}', 'é', '😀']),
                proptest::char::range('a', 'z'),
            ],
            0..80,
        ),
    ) {
        let text: String = chars.into_iter().collect();
        let mut out = Vec::new();
        escape(&mut out, &text);
        let quoted = serde_json::to_string(&text).unwrap();
        proptest::prop_assert_eq!(String::from_utf8(out).unwrap(), &quoted[1..quoted.len() - 1]);
    }
}

#[test]
fn golden_wire_format() {
    let (_, response) = run(&serde_json::from_str(FIXTURE).unwrap(), &static_policy(Mode::Enforce), &NO_SERVICE);
    assert_eq!(
        response,
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {
                "uid": "0f3cb218-7947-4a5f-839c-6e300a5ae86a",
                "allowed": true,
                "patchType": "JSONPatch",
                // base64 of [{"op":"replace","path":"/status/loadBalancer/ingress","value":[{"ip":"192.0.2.10"},{"hostname":"lb.example.test"}]}]
                "patch": "W3sib3AiOiJyZXBsYWNlIiwicGF0aCI6Ii9zdGF0dXMvbG9hZEJhbGFuY2VyL2luZ3Jlc3MiLCJ2YWx1ZSI6W3siaXAiOiIxOTIuMC4yLjEwIn0seyJob3N0bmFtZSI6ImxiLmV4YW1wbGUudGVzdCJ9XX1d",
                "warnings": ["status.loadBalancer.ingress rewritten to [192.0.2.10,lb.example.test] by policy p"],
                "auditAnnotations": {"action": "patched", "attempted": "10.7.7.7", "canonical": "192.0.2.10,lb.example.test", "policy": "p"}
            }
        })
    );
}

#[test]
fn v1beta1_reviews_are_answered_in_v1beta1() {
    let input = review(None, |r| r["apiVersion"] = json!("admission.k8s.io/v1beta1"));
    let (_, response) = run(&input, &static_policy(Mode::Enforce), &NO_SERVICE);
    assert_eq!(response["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(response["response"]["uid"], "0f3cb218-7947-4a5f-839c-6e300a5ae86a");
}

#[test]
fn class_scoping() {
    let policies = policy(Mode::Enforce, &["nginx"], Source::Static(address::parse_static_list("192.0.2.10").unwrap()));
    let with = |class: Option<&str>, annotation: Option<&str>| {
        review(None, |r| {
            // As stored: the class in both objects (a status write keeps the stored spec).
            for key in ["object", "oldObject"] {
                let object = &mut r["request"][key];
                if let Some(class) = class {
                    object["spec"]["ingressClassName"] = json!(class);
                }
                if let Some(a) = annotation {
                    object["metadata"]["annotations"][CLASS_ANNOTATION] = json!(a);
                }
            }
        })
    };
    let cases = [
        ("class field", with(Some("nginx"), None), "patched"),
        ("class annotation", with(None, Some("nginx")), "patched"),
        ("other class", with(Some("traefik"), None), "not_governed"),
        ("other class annotation", with(None, Some("traefik")), "not_governed"),
        ("class-less", with(None, None), "not_governed"),
    ];
    for (name, input, want) in cases {
        let (decision, response) = run(&input, &policies, &NO_SERVICE);
        assert_eq!(decision.outcome, want, "case {name}");
        if want == "not_governed" {
            assert_eq!(response["response"], json!({"uid": "0f3cb218-7947-4a5f-839c-6e300a5ae86a", "allowed": true}));
        }
    }
}

#[test]
fn modes() {
    let input: Value = serde_json::from_str(FIXTURE).unwrap();
    let (decision, response) = run(&input, &static_policy(Mode::Audit), &NO_SERVICE);
    assert_eq!(decision.outcome, "audited");
    assert_eq!(response["response"]["allowed"], true);
    assert!(response["response"].get("patch").is_none());
    assert_eq!(response["response"]["auditAnnotations"]["action"], "audited");
    assert!(response["response"]["warnings"][0].as_str().unwrap().contains("audit mode"));

    let (decision, response) = run(&input, &static_policy(Mode::Deny), &NO_SERVICE);
    assert_eq!(decision.outcome, "denied");
    assert_eq!(response["response"]["allowed"], false);
    assert!(response["response"].get("patch").is_none());
    assert_eq!(response["response"]["status"]["code"], 403);
    let message = response["response"]["status"]["message"].as_str().unwrap();
    assert_eq!(
        message,
        "ingress-status-guard policy \"p\" requires status.loadBalancer.ingress [192.0.2.10,lb.example.test], not [10.7.7.7]"
    );
}

#[test]
fn service_source_and_unresolved() {
    let svc: ServiceRef = crate::policy::NamespacedName::service("ingress/lb").unwrap();
    let mut policies = policy(Mode::Enforce, &[], Source::Service(svc.clone()));
    let input: Value = serde_json::from_str(FIXTURE).unwrap();

    let resolved = Fixed(Ok(address::parse_static_list("203.0.113.5").unwrap()));
    let (decision, response) = run(&input, &policies, &resolved);
    assert_eq!(decision.outcome, "patched");
    assert_eq!(decision.canonical, address::parse_static_list("203.0.113.5").unwrap());
    assert!(decoded_patch(&response).is_some());

    let missing = Fixed(Err(Unresolved::Missing(svc.clone())));
    let (decision, response) = run(&input, &policies, &missing);
    assert_eq!(decision.outcome, "unresolved");
    assert_eq!(response["response"]["allowed"], true);
    assert!(response["response"].get("patch").is_none());
    assert_eq!(
        response["response"]["warnings"][0],
        "canonical address unknown (Service ingress/lb not found); status left as written"
    );
    assert_eq!(response["response"]["auditAnnotations"]["action"], "unresolved");

    policies = Policies::new(
        policies
            .of(crate::kind::Kind::Ingress)
            .cloned()
            .map(|p| Policy { on_unresolved: OnUnresolved::Deny, ..p })
            .collect(),
    )
    .unwrap();
    let (decision, response) = run(&input, &policies, &missing);
    // Counted apart from a mismatch denied by a deny-mode policy.
    assert_eq!(decision.outcome, "unresolved_denied");
    assert_eq!(response["response"]["allowed"], false);
    assert_eq!(response["response"]["auditAnnotations"]["action"], "unresolved_denied");
    assert!(response["response"]["status"]["message"].as_str().unwrap().contains("Service ingress/lb not found"));
}

#[test]
fn ports_kept_by_policy() {
    let svc: ServiceRef = crate::policy::NamespacedName::service("ingress/lb").unwrap();
    let with_port = Address {
        ports: vec![address::PortStatus { port: 443, protocol: "TCP".into(), error: None }],
        ..Address::parse("203.0.113.5").unwrap()
    };
    let sources = Fixed(Ok(vec![with_port.clone()]));
    let input: Value = serde_json::from_str(FIXTURE).unwrap();
    let dropping = policy(Mode::Enforce, &[], Source::Service(svc.clone()));
    assert_eq!(run(&input, &dropping, &sources).0.canonical, vec![Address::parse("203.0.113.5").unwrap()]);
    let keeping = Policies::new(
        dropping.of(crate::kind::Kind::Ingress).cloned().map(|p| Policy { keep_ports: true, ..p }).collect(),
    )
    .unwrap();
    assert_eq!(run(&input, &keeping, &sources).0.canonical, vec![with_port]);
}

#[test]
fn requests_that_are_not_ingress_status_updates_pass() {
    let cases: Vec<(&str, Box<dyn Fn(&mut Value)>)> = vec![
        ("create", Box::new(|r: &mut Value| r["request"]["operation"] = json!("CREATE"))),
        (
            "main resource",
            Box::new(|r: &mut Value| {
                r["request"].as_object_mut().unwrap().remove("subResource").map(drop).unwrap_or(());
            }),
        ),
        (
            "pod status",
            Box::new(|r: &mut Value| {
                r["request"]["kind"] = json!({"group": "", "version": "v1", "kind": "Pod"});
            }),
        ),
    ];
    for (name, edit) in cases {
        let input = review(None, edit);
        let (decision, response) = run(&input, &static_policy(Mode::Enforce), &NO_SERVICE);
        assert_eq!(decision.outcome, "ignored", "case {name}");
        assert!(decision.detail.as_deref().unwrap().contains("not an Ingress status UPDATE"), "case {name}");
        assert_eq!(
            response["response"],
            json!({"uid": "0f3cb218-7947-4a5f-839c-6e300a5ae86a", "allowed": true}),
            "case {name}"
        );
    }
}

#[test]
fn warnings_fit_kubectl() {
    let many: Vec<String> = (1..=40).map(|i| format!("192.0.2.{i}")).collect();
    let policies = policy(Mode::Enforce, &[], Source::Static(address::parse_static_list(&many.join(",")).unwrap()));
    let (_, response) = run(&serde_json::from_str(FIXTURE).unwrap(), &policies, &NO_SERVICE);
    let warning = response["response"]["warnings"][0].as_str().unwrap();
    assert_eq!(warning.chars().count(), MAX_WARNING);
    assert!(warning.ends_with('…') && !warning.starts_with("Warning:"));
}

#[test]
fn findings_classify_writes() {
    let rogue = |edit: &dyn Fn(&mut Value)| {
        review(Some(json!({"loadBalancer": {"ingress": [{"ip": "10.9.9.9"}]}})), |r| {
            r["request"]["userInfo"] = json!({"username": "system:serviceaccount:kube-system:old-controller", "groups": ["system:serviceaccounts"]});
            edit(r);
        })
    };
    let canonical = review(Some(json!({"loadBalancer": {"ingress": canonical_json()}})), |_| {});
    let other_class = rogue(&|r| {
        for key in ["object", "oldObject"] {
            r["request"][key]["spec"]["ingressClassName"] = json!("traefik");
        }
    });
    let dry_run = rogue(&|r| r["request"]["dryRun"] = json!(true));
    let nginx_only =
        policy(Mode::Enforce, &["nginx"], Source::Static(address::parse_static_list("192.0.2.10").unwrap()));
    let cases: Vec<(&str, Value, Policies, Option<(Action, bool)>)> = vec![
        ("matching write", canonical, static_policy(Mode::Enforce), None),
        ("not governed", other_class, nginx_only, None),
        ("mismatch, enforce", rogue(&|_| {}), static_policy(Mode::Enforce), Some((Action::Rewrite, false))),
        ("mismatch, audit", rogue(&|_| {}), static_policy(Mode::Audit), Some((Action::Audit, false))),
        ("mismatch, deny", rogue(&|_| {}), static_policy(Mode::Deny), Some((Action::Deny, false))),
        ("mismatch, dry run", dry_run, static_policy(Mode::Enforce), Some((Action::Rewrite, true))),
    ];
    for (name, input, policies, want) in cases {
        let (decision, _) = run(&input, &policies, &NO_SERVICE);
        let got = decision.finding.as_ref().map(|f| (f.action, f.dry_run));
        assert_eq!(got, want, "case {name}");
        if let Some(f) = decision.finding {
            assert_eq!(f.uid, "0f3cb218-7947-4a5f-839c-6e300a5ae86a", "case {name}");
            assert_eq!(f.object_uid.as_deref(), Some("8d85ab45-0193-4e14-b7ab-45d58c9dc450"), "case {name}");
            assert_eq!(
                (f.namespace.as_str(), f.name.as_str(), f.policy.as_str()),
                ("default", "demo-ing", "p"),
                "case {name}"
            );
            assert_eq!(f.writer.username, "system:serviceaccount:kube-system:old-controller", "case {name}");
            assert_eq!(f.writer.groups, ["system:serviceaccounts"], "case {name}");
            assert_eq!(f.writer.service_account, Some(("kube-system".into(), "old-controller".into())), "case {name}");
            assert_eq!(f.attempted, address::parse_static_list("10.9.9.9").unwrap(), "case {name}");
            assert_eq!(f.canonical, address::parse_static_list("192.0.2.10,lb.example.test").unwrap(), "case {name}");
        }
    }
}

#[test]
fn lists_past_the_reader_bound_are_answered_by_count() {
    let many: Vec<Value> = (0..300).map(|i| json!({"ip": format!("10.1.{}.{}", i / 256, i % 256)})).collect();
    let input = review(Some(json!({"loadBalancer": {"ingress": many}})), |_| {});
    for (mode, outcome) in [(Mode::Deny, "denied"), (Mode::Audit, "audited"), (Mode::Enforce, "patched")] {
        let (decision, response) = run(&input, &static_policy(mode), &NO_SERVICE);
        assert_eq!(decision.outcome, outcome);
        let attempted = response["response"]["auditAnnotations"]["attempted"].as_str().unwrap();
        assert!(attempted.starts_with("300 entries: 10.1.0.0,10.1.0.1,") && attempted.ends_with("…(+280 more)"));
        if mode == Mode::Deny {
            let message = response["response"]["status"]["message"].as_str().unwrap();
            assert!(message.ends_with(&format!("not [{attempted}]")) && message.len() < 2048, "{message}");
        }
        let finding = decision.finding.unwrap();
        assert_eq!(finding.attempted.total, 300);
        assert!(finding.note().contains("[300 entries: 10.1.0.0,"), "{}", finding.note());
    }
}

#[test]
fn out_of_bounds_reviews_are_allowed_with_a_warning_and_no_finding() {
    let input = review(Some(json!({"loadBalancer": {"ingress": [{"ip": "10.9.9.9"}]}})), |r| {
        r["request"]["namespace"] = json!("Not_A_Label");
    });
    let (decision, response) = run(&input, &static_policy(Mode::Deny), &NO_SERVICE);
    assert!(decision.finding.is_none());
    assert_eq!(
        response["response"],
        json!({
            "uid": "0f3cb218-7947-4a5f-839c-6e300a5ae86a",
            "allowed": true,
            "warnings": ["ingress-status-guard: request.namespace is not a DNS-1123 label (at most 63 bytes); status left as written"],
        })
    );
}

/// A status write that forges the class is judged under the stored class, and the
/// forged field is named in the audit annotations (in key order) and the finding, whatever the
/// verdict.
#[test]
fn a_forged_class_is_judged_stored_and_named() {
    let forged = |stored: &str, written: &str, status: Value| {
        review(Some(status), |r| {
            r["request"]["oldObject"]["spec"]["ingressClassName"] = json!(stored);
            r["request"]["object"]["spec"]["ingressClassName"] = json!(written);
        })
    };
    let rogue = json!({"loadBalancer": {"ingress": [{"ip": "10.6.6.6"}]}});
    let canonical = json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}});
    let nginx = policy(Mode::Enforce, &["nginx"], Source::Static(address::parse_static_list("192.0.2.10").unwrap()));
    let cases = [
        ("forged out of the policy", forged("nginx", "zzz", rogue.clone()), "patched"),
        ("forged into the policy", forged("other", "nginx", rogue.clone()), "not_governed"),
        ("canonical, forged", forged("nginx", "zzz", canonical), "unchanged"),
    ];
    for (name, input, outcome) in cases {
        let (decision, response) = run(&input, &nginx, &NO_SERVICE);
        assert_eq!(decision.outcome, outcome, "case {name}");
        let annotations = &response["response"]["auditAnnotations"];
        assert_eq!(annotations["forged_spec"], "spec.ingressClassName", "case {name}: {response}");
        let keys: Vec<&String> = annotations.as_object().unwrap().keys().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted, "case {name}: keys in order");
        assert_eq!(decision.finding.map(|f| f.forged), (outcome == "patched").then_some(Some("spec.ingressClassName")));
    }
    let (_, response) = run(&forged("nginx", "nginx", rogue), &nginx, &NO_SERVICE);
    assert_eq!(response["response"]["auditAnnotations"].get("forged_spec"), None, "not forged");
    let for_deny = forged("nginx", "zzz", json!({"loadBalancer": {"ingress": [{"ip": "10.6.6.6"}]}}));
    let deny = policy(Mode::Deny, &["nginx"], Source::Static(address::parse_static_list("192.0.2.10").unwrap()));
    let (decision, response) = run(&for_deny, &deny, &NO_SERVICE);
    assert_eq!((decision.outcome, response["response"]["allowed"].as_bool()), ("denied", Some(false)));
    let note = decision.finding.unwrap().note();
    assert!(note.starts_with("forged_spec spec.ingressClassName (the API server keeps the stored value): "), "{note}");
}
