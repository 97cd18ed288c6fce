use serde_json::json;

use super::ingress as ingress_cel;
use super::*;
use crate::kind::ingress::Ingresses;
use crate::{
    address::PortStatus,
    policy::{LabelSelector, OnUnresolved, Source},
};

/// The objects for one policy of kind `K`: the admission policy, then its binding, named as
/// the guard of the default Lease names its kind's first slot.
pub(crate) fn render<K: Admitted>(
    policy: &Policy,
    canonical: &[Address],
    governed: &Governed,
    api: ApiVersion,
) -> Result<Vec<Value>, RenderError> {
    render_named::<K>(policy, canonical, governed, api, &slot_name(DEFAULT_LEASE, K::KIND.info().label, 0))
}

fn policy(name: &str, mode: Mode) -> Policy {
    Policy {
        name: name.to_owned(),
        kind: crate::kind::Kind::Ingress,
        kind_inferred: false,
        scope: ClassScope { classes: vec!["nginx".into()], ..ClassScope::default() },
        namespace_selector: None,
        sources: vec![Source::Static(vec![Address::hostname("lb.example.com")])],
        mode,
        keep_ports: false,
        on_unresolved: OnUnresolved::Allow,
    }
}

fn canonical() -> Vec<Address> {
    vec![Address::ip("192.0.2.10".parse().unwrap()), Address::hostname("lb.example.com")]
}

fn classes(names: &[&str], without_class: bool) -> Governed {
    Governed::Classes { names: names.iter().map(|s| (*s).to_owned()).collect(), without_class }
}

#[test]
fn cel_strings_escape_quotes_backslashes_controls_and_unicode() {
    for (text, literal) in [
        ("", r#""""#),
        ("plain-1.2", r#""plain-1.2""#),
        (r#"a"b"#, r#""a\"b""#),
        (r"a\b", r#""a\\b""#),
        (r#"\""#, r#""\\\"""#),
        ("line\nnext\r\t", r#""line\nnext\r\t""#),
        ("\u{0}\u{7f}\u{85}", r#""\u0000\u007F\u0085""#),
        ("café", r#""caf\u00E9""#),
        ("\u{2028}", r#""\u2028""#),
        ("🦀", r#""\U0001F980""#),
    ] {
        assert_eq!(cel::string(text), literal, "{text:?}");
        assert!(literal.is_ascii());
    }
    assert_eq!(cel::string_list(["a", "\"]"]), r#"["a", "\"]"]"#);
}

#[test]
fn the_canonical_list_is_a_typed_literal_with_ports_when_kept() {
    let with_ports = Address {
        ip: Some("2001:db8::1".into()),
        hostname: Some("lb.example.com".into()),
        ports: vec![PortStatus { port: 443, protocol: "TCP".into(), error: Some("Pending".into()) }],
    };
    assert_eq!(
        ingress_cel::load_balancer(&[Address::ip("192.0.2.10".parse().unwrap()), with_ports]),
        "Object.status.loadBalancer{ingress: [Object.status.loadBalancer.ingress{ip: \"192.0.2.10\"}, \
         Object.status.loadBalancer.ingress{ip: \"2001:db8::1\", hostname: \"lb.example.com\", ports: \
         [Object.status.loadBalancer.ingress.ports{port: 443, protocol: \"TCP\", error: \"Pending\"}]}]}"
    );
}

#[test]
fn class_conditions_read_the_field_then_the_annotation() {
    assert_eq!(
        ingress_cel::class_condition(&["a".into(), "b\"".into()], false),
        "has(oldObject.spec.ingressClassName) ? oldObject.spec.ingressClassName in [\"a\", \"b\\\"\"] : \
         (has(oldObject.metadata.annotations) && \"kubernetes.io/ingress.class\" in oldObject.metadata.annotations \
         ? oldObject.metadata.annotations[\"kubernetes.io/ingress.class\"] in [\"a\", \"b\\\"\"] : false)"
    );
    assert!(ingress_cel::class_condition(&[], true).ends_with(": true)"));
}

#[test]
fn class_rules_resolve_controllers_and_the_default_class_into_names() {
    let facts = Classes::from([
        ("edge".to_owned(), Class { controller: Some("k8s.io/ingress-nginx".into()), default: true }),
        ("other".to_owned(), Class { controller: Some("example.com/other".into()), default: false }),
        ("nginx".to_owned(), Class { controller: None, default: false }),
    ]);
    let scope = |classes: &[&str], controllers: &[&str], without_class| ClassScope {
        classes: classes.iter().map(|s| (*s).to_owned()).collect(),
        controllers: controllers.iter().map(|s| (*s).to_owned()).collect(),
        without_class,
    };
    assert_eq!(Governed::resolve(&scope(&[], &[], false), &facts), Governed::Everything);
    assert_eq!(Governed::resolve(&scope(&[], &[], true), &facts), Governed::Everything);
    // By controller: its classes, and class-less Ingresses because the default class is one.
    assert_eq!(Governed::resolve(&scope(&[], &["k8s.io/ingress-nginx"], false), &facts), classes(&["edge"], true));
    // A listed name that has no IngressClass still counts (the webhook matches names alone).
    assert_eq!(
        Governed::resolve(&scope(&["nginx", "gone"], &["example.com/other"], false), &facts),
        classes(&["gone", "nginx", "other"], false)
    );
    assert_eq!(Governed::resolve(&scope(&["other"], &[], true), &facts), classes(&["other"], true));
    // The default class by name governs class-less Ingresses.
    assert_eq!(Governed::resolve(&scope(&["edge"], &[], false), &Classes::new()), classes(&["edge"], false));
    assert_eq!(Governed::resolve(&scope(&["edge"], &[], false), &facts), classes(&["edge"], true));
    // A controller that no class has governs nothing (and says so: an empty list).
    assert_eq!(Governed::resolve(&scope(&[], &["none"], false), &facts), classes(&[], false));
}

#[test]
fn enforce_renders_a_mutating_policy_and_binding() {
    let objects =
        render::<Ingresses>(&policy("edge", Mode::Enforce), &canonical(), &classes(&["nginx"], false), ApiVersion::V1)
            .expect("renders");
    let [map, binding] = &objects[..] else { panic!("two objects: {objects:?}") };
    assert_eq!(map["apiVersion"], "admissionregistration.k8s.io/v1");
    assert_eq!(map["kind"], "MutatingAdmissionPolicy");
    assert_eq!(map["metadata"]["name"], "ingress-status-guard-ingress-0");
    assert_eq!(map["metadata"]["annotations"][POLICY_ANNOTATION], "edge", "the slot says whose policy it holds");
    assert_eq!(map["spec"]["failurePolicy"], "Fail");
    assert_eq!(map["spec"]["reinvocationPolicy"], "Never");
    assert_eq!(
        map["spec"]["matchConstraints"]["resourceRules"],
        json!([{"apiGroups": ["networking.k8s.io"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["ingresses/status"]}])
    );
    assert_eq!(map["spec"]["matchConditions"][0]["expression"], ingress_cel::class_condition(&["nginx".into()], false));
    let mutations = map["spec"]["mutations"].as_array().expect("mutations");
    assert_eq!(mutations.len(), 1);
    assert_eq!(mutations[0]["patchType"], "JSONPatch");
    assert_eq!(mutations[0]["jsonPatch"]["expression"], ingress_cel::patch(&canonical()));
    assert_eq!(binding["kind"], "MutatingAdmissionPolicyBinding");
    assert_eq!(binding["spec"], json!({"policyName": "ingress-status-guard-ingress-0"}));

    let beta = render::<Ingresses>(
        &policy("edge", Mode::Enforce),
        &canonical(),
        &classes(&["nginx"], false),
        ApiVersion::V1beta1,
    )
    .expect("renders");
    for (v1, beta) in objects.iter().zip(&beta) {
        assert_eq!(beta["apiVersion"], "admissionregistration.k8s.io/v1beta1");
        let (mut v1, mut beta) = (v1.clone(), beta.clone());
        v1["apiVersion"] = json!(null);
        beta["apiVersion"] = json!(null);
        assert_eq!(v1, beta, "only apiVersion differs");
    }
}

#[test]
fn a_policy_of_every_class_has_no_condition() {
    let objects =
        render::<Ingresses>(&policy("all", Mode::Enforce), &canonical(), &Governed::Everything, ApiVersion::V1)
            .expect("renders");
    assert_eq!(objects[0]["spec"]["matchConditions"], json!([]));
}

#[test]
fn the_namespace_selector_goes_to_the_binding() {
    let mut p = policy("edge", Mode::Enforce);
    p.namespace_selector = Some(LabelSelector::parse("team in (a,b),env=prod,!old,tier!=db,zone").unwrap());
    for mode in [Mode::Enforce, Mode::Deny] {
        p.mode = mode;
        let objects =
            render::<Ingresses>(&p, &canonical(), &classes(&["nginx"], false), ApiVersion::V1).expect("renders");
        let selector = &objects[1]["spec"]["matchResources"]["namespaceSelector"];
        let mut expressions = selector["matchExpressions"].as_array().expect("expressions").clone();
        expressions.sort_by_key(|e| e["key"].as_str().unwrap_or_default().to_owned());
        assert_eq!(
            expressions,
            [
                json!({"key": "env", "operator": "In", "values": ["prod"]}),
                json!({"key": "old", "operator": "DoesNotExist"}),
                json!({"key": "team", "operator": "In", "values": ["a", "b"]}),
                json!({"key": "tier", "operator": "NotIn", "values": ["db"]}),
                json!({"key": "zone", "operator": "Exists"}),
            ]
        );
        // The binding's selector matches what the policy's own selector matches.
        let back = LabelSelector::from_kube(serde_json::from_value(selector.clone()).unwrap()).unwrap();
        assert_eq!(back.to_kube(), p.namespace_selector.as_ref().unwrap().to_kube());
    }
    let objects =
        render::<Ingresses>(&policy("edge", Mode::Deny), &canonical(), &Governed::Everything, ApiVersion::V1).unwrap();
    assert!(objects[1]["spec"].get("matchResources").is_none());
}

#[test]
fn deny_and_audit_render_a_validating_policy_naming_the_canonical_value() {
    for (mode, actions) in [(Mode::Deny, json!(["Deny"])), (Mode::Audit, json!(["Warn", "Audit"]))] {
        let objects =
            render::<Ingresses>(&policy("edge", mode), &canonical(), &classes(&["nginx"], true), ApiVersion::V1beta1)
                .expect("renders");
        let [vap, binding] = &objects[..] else { panic!("two objects: {objects:?}") };
        // ValidatingAdmissionPolicy is GA since 1.30, served wherever a MAP is.
        assert_eq!(vap["apiVersion"], "admissionregistration.k8s.io/v1");
        assert_eq!(vap["kind"], "ValidatingAdmissionPolicy");
        assert!(vap["spec"].get("mutations").is_none());
        assert_eq!(vap["spec"]["failurePolicy"], "Fail");
        assert_eq!(vap["spec"]["variables"], json!([{"name": "written", "expression": ingress_cel::WRITTEN_KEYS}]));
        let validation = &vap["spec"]["validations"][0];
        assert_eq!(
            validation["message"],
            "ingress-status-guard policy \"edge\" requires status.loadBalancer.ingress [192.0.2.10,lb.example.com]"
        );
        assert_eq!(
            validation["expression"],
            "size(variables.written) <= 256 && variables.written.all(k, k in [\"192.0.2.10||0:\", \"|lb.example.com|0:\"]) && \
             [\"192.0.2.10||0:\", \"|lb.example.com|0:\"].all(k, k in variables.written)"
        );
        assert_eq!(binding["kind"], "ValidatingAdmissionPolicyBinding");
        assert_eq!(binding["spec"]["validationActions"], actions);
    }
}

#[test]
fn keys_tell_entries_apart_by_every_field() {
    let port = |port, protocol: &str, error: Option<&str>| PortStatus {
        port,
        protocol: protocol.into(),
        error: error.map(str::to_owned),
    };
    let entry = |ip: Option<&str>, hostname: Option<&str>, ports| Address {
        ip: ip.map(str::to_owned),
        hostname: hostname.map(str::to_owned),
        ports,
    };
    assert_eq!(ingress_cel::key(&entry(Some("2001:db8::1"), None, vec![])), "2001:db8::1||0:");
    assert_eq!(
        ingress_cel::key(&entry(
            Some("10.0.0.1"),
            Some("a.example"),
            vec![port(80, "TCP", None), port(443, "TCP", Some("E"))]
        )),
        "10.0.0.1|a.example|2:80/TCP/;443/TCP/E"
    );
    assert_ne!(ingress_cel::key(&entry(Some("a"), None, vec![])), ingress_cel::key(&entry(None, Some("a"), vec![])));
}

#[test]
fn nothing_is_rendered_for_no_addresses_or_an_ambiguous_one() {
    let p = policy("edge", Mode::Deny);
    assert_eq!(
        render::<Ingresses>(&p, &[], &Governed::Everything, ApiVersion::V1),
        Err(RenderError::Empty("edge".into()))
    );
    let odd = Address {
        ip: Some("192.0.2.1".into()),
        ports: vec![PortStatus { port: 80, protocol: "TCP".into(), error: Some("a;b".into()) }],
        ..Address::default()
    };
    assert!(matches!(
        render::<Ingresses>(&p, &[odd], &Governed::Everything, ApiVersion::V1),
        Err(RenderError::Separator { .. })
    ));
}

#[test]
fn names_are_the_lease_the_kind_and_a_slot_whatever_the_policies_are_called() {
    let file = "policies:\n\
        - {name: edge, ingressClasses: [a], publishStatusAddress: 192.0.2.1}\n\
        - {name: gateway-web, ingressClasses: [b], publishStatusAddress: 192.0.2.1}\n\
        - {name: web, kind: Gateway, gatewayClasses: [eg], publishStatusAddress: 192.0.2.1}\n\
        - {name: Not_A_Label, ingressClasses: [c], publishStatusAddress: 192.0.2.1}\n";
    let policies = crate::policy::parse_file("t", file).unwrap();
    let names = |lease: &str| object_names(&policies, lease).map(|n| n.into_iter().map(|(_, n)| n).collect::<Vec<_>>());
    // The Ingress policy gateway-web and the Gateway policy web cannot share objects, and a
    // policy name that is no DNS label names no object.
    assert_eq!(names("isg").unwrap(), ["isg-ingress-0", "isg-ingress-1", "isg-gateway-0", "isg-ingress-2"]);
    // Releases isg and isg-team, which per-policy names let collide (isg + team-web and
    // isg-team + web), name disjoint sets; every name is one the chart grants.
    let (isg, team) = (all_slot_names("isg"), all_slot_names("isg-team"));
    assert_eq!(isg.len(), crate::kind::Kind::ALL.len() * SLOTS);
    assert!(isg.iter().all(|n| !team.contains(n)), "{isg:?} {team:?}");
    assert!(names("isg").unwrap().iter().all(|n| isg.contains(n)));
    // A Lease of MAX_LEASE characters fits every slot of every kind; a longer one is refused.
    assert!(all_slot_names(&"l".repeat(MAX_LEASE)).iter().all(|n| crate::names::is_dns1123_label(n)));
    let e = names(&"l".repeat(MAX_LEASE + 1)).unwrap_err();
    assert!(matches!(&e, RenderError::Name { policy, .. } if policy == "edge"), "the first policy: {e}");
    assert!(e.to_string().contains(&format!("of at most {MAX_LEASE} such characters")), "{e}");
    assert!(names("team.a").is_err(), "a Lease name with a dot names no label");
    // More policies of a kind than slots: refused, naming the policy, the count and the names.
    let many: String = (0..=SLOTS)
        .map(|i| format!("- {{name: p{i}, ingressClasses: [c{i}], publishStatusAddress: 192.0.2.1}}\n"))
        .collect();
    let policies = crate::policy::parse_file("t", &format!("policies:\n{many}")).unwrap();
    let e = object_names(&policies, "isg").unwrap_err();
    assert_eq!(
        e.to_string(),
        "policy \"p16\": it is Ingress policy number 17 of the file, and admission policy mode keeps at most 16 policies of a kind (their objects are named <lease>-ingress-0 to <lease>-ingress-15); merge policies, or run another release for the rest"
    );
}

/// A kind's label is the middle of its objects' names: lowercase letters only, so that a name
/// read from the right gives back its Lease.
#[test]
fn kind_labels_hold_no_separator() {
    for kind in Kind::ALL {
        let label = kind.info().label;
        assert!(!label.is_empty() && label.bytes().all(|b| b.is_ascii_lowercase()), "{label:?}");
    }
}

#[test]
fn an_earlier_policy_keeps_what_it_governs_as_the_webhook_lets_it() {
    // `public` names class `edge`; `internal` governs by controller, whose class is `edge` too
    // (a run-time overlap the file check cannot see), and class-less Ingresses by the default
    // class, which `public` already takes with watchIngressWithoutClass.
    let text = "policies:\n\
        - {name: public, ingressClasses: [edge], watchIngressWithoutClass: true, publishStatusAddress: 192.0.2.1}\n\
        - {name: internal, controllerClasses: [example.com/c], publishStatusAddress: 192.0.2.2}\n\
        - {name: team, ingressClasses: [lan], namespaceSelector: team=a, publishStatusAddress: 192.0.2.3}\n";
    let policies = crate::policy::parse_file("p.yaml", text);
    let Ok(policies) = policies else { panic!("{policies:?}") };
    let facts = Classes::from([
        ("edge".to_owned(), Class { controller: Some("example.com/c".into()), default: true }),
        ("lan".to_owned(), Class { controller: Some("example.com/c".into()), default: false }),
    ]);
    assert_eq!(
        governed_in_order(&policies, Kind::Ingress, &facts),
        [classes(&["edge"], true), classes(&["lan"], false), classes(&[], false)],
        "`internal` governs `lan` in every Namespace, `team`'s too"
    );
    // After a policy with a selector, a later one stays whole.
    let text = "policies:\n\
        - {name: a, ingressClasses: [edge], namespaceSelector: team=a, publishStatusAddress: 192.0.2.1}\n\
        - {name: b, ingressClasses: [edge], namespaceSelector: team=b, publishStatusAddress: 192.0.2.2}\n";
    let policies = crate::policy::parse_file("p.yaml", text).expect("disjoint selectors");
    assert_eq!(
        governed_in_order(&policies, Kind::Ingress, &facts),
        [classes(&["edge"], true), classes(&["edge"], true)]
    );
}

/// Regression: each Gateway policy's class rules were resolved alone, so a later policy
/// kept what an earlier one governs and both admission policies ran on its Gateways, where the
/// webhook lets the first govern. Gateway policies now go through the Ingress policies' path.
#[test]
fn an_earlier_gateway_policy_keeps_what_it_governs() {
    let text = "policies:\n\
        - {name: by-ctl, gatewayControllers: [example.com/c], publishStatusAddress: 192.0.2.1}\n\
        - {name: by-name, gatewayClasses: [eg, other], publishStatusAddress: 192.0.2.2}\n";
    let policies = crate::policy::parse_file("p.yaml", text);
    let Ok(policies) = policies else { panic!("{policies:?}") };
    let facts = Classes::from([("eg".to_owned(), Class { controller: Some("example.com/c".into()), default: false })]);
    assert_eq!(
        governed_in_order(&policies, Kind::Gateway, &facts),
        [classes(&["eg"], false), classes(&["other"], false)],
        "`by-ctl` governs `eg`"
    );
    assert!(governed_in_order(&policies, Kind::Ingress, &facts).is_empty(), "no Ingress policy");
}
