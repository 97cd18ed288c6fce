use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::{core::v1::Service, networking::v1::Ingress};
use serde_json::json;

use super::{explain::explain, report::Entries, report::Report, report::State};
use crate::kind::ingress::Ingresses;
use crate::{
    address::parse_static_list,
    policy::{ClassScope, Mode, OnUnresolved},
};
use crate::{
    address::{Address, PortStatus},
    kind::ingress::{CLASS_ANNOTATION, ClassFrom, StatusShape, StatusWrite, Stored},
    policy::{Policies, Policy, ServiceRef, Source},
    sources::nodeip::{NodeAddrs, PodFacts},
    sources::service::ServiceError,
    sources::snapshot::{Facts, Fetched, Snapshot},
    sources::{Sources, Unresolved},
};

impl Report {
    /// Decides every stored Ingress, as the webhook would decide a write of its stored status.
    pub(crate) fn build(
        stored: &[crate::kind::ingress::StatusWrite],
        policies: &Policies,
        sources: &dyn Sources,
    ) -> Report {
        let mut report = Report::default();
        report.add::<crate::kind::ingress::Ingresses>(Some(stored), policies, sources);
        report
    }

    /// [`Report::add_read`] of objects without a last writer.
    pub(crate) fn add<K: crate::kind::Governed>(
        &mut self,
        stored: Option<&[crate::kind::Write<K::Entry>]>,
        policies: &Policies,
        sources: &dyn Sources,
    ) {
        let read = stored.map(|stored| stored.iter().map(|write| (write.clone(), None)).collect::<Vec<_>>());
        self.add_read::<K>(read.as_deref(), policies, sources);
    }
}

fn ingress(value: serde_json::Value) -> Ingress {
    serde_json::from_value(value).expect("test Ingress must deserialize")
}

fn list(text: &str) -> Vec<Address> {
    if text.is_empty() { Vec::new() } else { parse_static_list(text).unwrap() }
}

fn svc_ref() -> ServiceRef {
    crate::policy::ServiceRef::service("edge/lb").unwrap()
}

fn policy(name: &str, classes: &[&str], source: Source, mode: Mode) -> Policy {
    Policy {
        name: name.into(),
        kind: crate::kind::Kind::Ingress,
        kind_inferred: false,
        scope: ClassScope { classes: classes.iter().map(|c| (*c).to_owned()).collect(), ..Default::default() },
        namespace_selector: None,
        sources: vec![source],
        mode,
        keep_ports: false,
        on_unresolved: OnUnresolved::Allow,
    }
}

/// `nginx` Ingresses follow Service edge/lb (enforce); `static` ones a fixed list (audit).
fn policies() -> Policies {
    Policies::new(vec![
        policy("lb", &["nginx"], Source::Service(svc_ref()), Mode::Enforce),
        policy("fixed", &["static"], Source::Static(list("192.0.2.10")), Mode::Audit),
    ])
    .unwrap()
}

fn snapshot(fetched: Fetched) -> Snapshot {
    Snapshot(BTreeMap::from([(svc_ref(), fetched)]), Facts::default())
}

fn lb_service() -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": "lb", "namespace": "edge"},
        "spec": {"type": "LoadBalancer", "externalIPs": ["203.0.113.20"]},
        "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.10", "ports": [{"port": 80, "protocol": "TCP"}]}]}}
    }))
    .unwrap()
}

fn write(ns: &str, name: &str, class: Option<&str>, addresses: &str) -> StatusWrite {
    StatusWrite {
        namespace: ns.into(),
        name: name.into(),
        class: class.map(str::to_owned),
        addresses: list(addresses),
        omitted: 0,
    }
}

#[test]
fn stored_ingresses_are_read_as_the_webhook_reads_writes() {
    let cases: Vec<(&str, serde_json::Value, Option<&str>, ClassFrom, StatusShape, &str)> = vec![
        (
            "bare",
            json!({"metadata": {"name": "a", "namespace": "n"}}),
            None,
            ClassFrom::Neither,
            StatusShape::NoStatus,
            "",
        ),
        (
            "field",
            json!({"metadata": {"name": "a", "namespace": "n"}, "spec": {"ingressClassName": "nginx"}, "status": {}}),
            Some("nginx"),
            ClassFrom::Field,
            StatusShape::NoLoadBalancer,
            "",
        ),
        (
            "annotation",
            json!({"metadata": {"name": "a", "namespace": "n", "annotations": {CLASS_ANNOTATION: "old"}},
                   "status": {"loadBalancer": {}}}),
            Some("old"),
            ClassFrom::Annotation,
            StatusShape::NoIngressList,
            "",
        ),
        (
            "field wins over the annotation",
            json!({"metadata": {"name": "a", "namespace": "n", "annotations": {CLASS_ANNOTATION: "old"}},
                   "spec": {"ingressClassName": "new"},
                   "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}, {"hostname": "lb.example"}]}}}),
            Some("new"),
            ClassFrom::Field,
            StatusShape::IngressList,
            "10.0.0.1,lb.example",
        ),
    ];
    for (name, value, class, from, shape, addresses) in cases {
        let stored = Stored::of(&ingress(value));
        assert_eq!(stored.write, write("n", "a", class, addresses), "case {name}");
        assert_eq!((stored.class_from, stored.shape), (from, shape), "case {name}");
    }
    let with_ports = Stored::of(&ingress(json!({"metadata": {"name": "a"},
        "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1", "ports": [{"port": 443, "protocol": "TCP"}]}]}}})));
    assert_eq!(
        with_ports.write.addresses[0].ports,
        vec![PortStatus { port: 443, protocol: "TCP".into(), error: None }]
    );
}

#[test]
fn snapshot_answers_like_the_watch_cache() {
    let svc = svc_ref();
    let pending: Service = serde_json::from_value(json!({"spec": {"type": "LoadBalancer"}})).unwrap();
    let cases: Vec<(&str, Option<Fetched>, Result<Vec<Address>, Unresolved>)> = vec![
        // Ports are kept in the snapshot and dropped by the policy, as the cache does.
        ("found", Some(Fetched::of(Some(&lb_service()))), Ok(list("203.0.113.10,203.0.113.20"))),
        ("missing", Some(Fetched::of(None)), Err(Unresolved::Missing(svc.clone()))),
        ("pending", Some(Fetched::of(Some(&pending))), Err(Unresolved::Service(svc.clone(), ServiceError::Pending))),
        ("not read", None, Err(Unresolved::NotSynced(svc.clone()))),
    ];
    let policies = policies();
    let lb = policies.of(crate::kind::Kind::Ingress).next().unwrap();
    for (name, fetched, want) in cases {
        let snapshot = Snapshot(fetched.into_iter().map(|f| (svc.clone(), f)).collect(), Facts::default());
        assert_eq!(snapshot.canonical(lb).map(std::borrow::Cow::into_owned), want, "case {name}");
    }
}

#[test]
fn report_rows_states_and_exit_codes() {
    let found = || snapshot(Fetched::of(Some(&lb_service())));
    let canonical = "203.0.113.10,203.0.113.20";
    // (case, stored writes, sources, want (name, state) rows, want summary, want exit code)
    let cases: Vec<(&str, Vec<StatusWrite>, Snapshot, Vec<(&str, State)>, [usize; 5], u8)> = vec![
        ("nothing stored", vec![], found(), vec![], [0, 0, 0, 0, 0], 0),
        (
            "all canonical, other order, ungoverned ignored",
            vec![
                write("b", "web", Some("nginx"), "203.0.113.20,203.0.113.10"),
                write("a", "other", Some("traefik"), "10.9.9.9"),
                write("a", "none", None, ""),
            ],
            found(),
            vec![("web", State::Ok)],
            [1, 1, 0, 0, 2],
            0,
        ),
        (
            "drift in enforce and in audit mode, sorted by namespace then name",
            vec![
                write("b", "web", Some("nginx"), "10.0.0.1"),
                write("a", "z", Some("static"), ""),
                write("a", "y", Some("static"), "192.0.2.10"),
            ],
            found(),
            vec![("y", State::Ok), ("z", State::Drift), ("web", State::Drift)],
            [3, 1, 2, 0, 0],
            1,
        ),
        (
            "unresolved is not canonical",
            vec![write("a", "web", Some("nginx"), canonical)],
            snapshot(Fetched::Missing),
            vec![("web", State::Unresolved)],
            [1, 0, 0, 1, 0],
            1,
        ),
    ];
    for (name, stored, sources, want_rows, want_summary, want_exit) in cases {
        let report = Report::build(&stored, &policies(), &sources);
        let rows: Vec<(&str, State)> = report.ingresses.iter().map(|r| (r.name.as_str(), r.state)).collect();
        assert_eq!(rows, want_rows, "case {name}");
        let s = report.summary;
        assert_eq!([s.governed, s.ok, s.drift, s.unresolved, s.not_governed], want_summary, "case {name}");
        assert_eq!(report.exit_code(), want_exit, "case {name}");
        for row in &report.ingresses {
            match row.state {
                State::Ok | State::Drift if row.policy == "lb" => {
                    assert_eq!(row.canonical, Some(Entries::of(&list(canonical))), "case {name}");
                }
                State::Unresolved => assert_eq!(row.reason.as_deref(), Some("Service edge/lb not found")),
                _ => {}
            }
        }
    }
}

#[test]
fn table_and_json_output() {
    let stored = vec![
        write("team-a", "web", Some("nginx"), "10.0.0.1"),
        write("team-a", "api", Some("nginx"), "203.0.113.10,203.0.113.20"),
        write("team-b", "shop", Some("static"), ""),
    ];
    let report = Report::build(&stored, &policies(), &snapshot(Fetched::of(Some(&lb_service()))));
    assert_eq!(
        report.table(),
        "\
INGRESS      POLICY  SOURCE               STORED                     CANONICAL                  STATE
team-a/api   lb      service edge/lb      203.0.113.10,203.0.113.20  203.0.113.10,203.0.113.20  OK
team-a/web   lb      service edge/lb      10.0.0.1                   203.0.113.10,203.0.113.20  DRIFT
team-b/shop  fixed   static [192.0.2.10]  <none>                     192.0.2.10                 DRIFT
governed Ingresses: 3 (1 OK, 2 DRIFT, 0 UNRESOLVED); not governed: 0
"
    );
    let json: serde_json::Value = serde_json::from_str(&report.json()).unwrap();
    assert_eq!(json["summary"], json!({"governed": 3, "ok": 1, "drift": 2, "unresolved": 0, "notGoverned": 0}));
    assert_eq!(
        json["ingresses"][1],
        json!({"kind": "ingress", "namespace": "team-a", "name": "web", "class": "nginx", "policy": "lb", "mode": "enforce",
               "source": "service edge/lb", "stored": [{"ip": "10.0.0.1"}],
               "canonical": [{"ip": "203.0.113.10"}, {"ip": "203.0.113.20"}], "state": "DRIFT"})
    );

    let unresolved = Report::build(&stored[..1], &policies(), &snapshot(Fetched::Missing));
    let table = unresolved.table();
    let columns: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(columns[5..], ["?", "UNRESOLVED", "(Service", "edge/lb", "not", "found)"], "{table}");
    let json: serde_json::Value = serde_json::from_str(&unresolved.json()).unwrap();
    assert_eq!(json["ingresses"][0]["canonical"], serde_json::Value::Null);

    assert_eq!(
        Report::build(&[], &policies(), &Snapshot::default()).table(),
        "governed Ingresses: 0 (0 OK, 0 DRIFT, 0 UNRESOLVED); not governed: 0\n"
    );
}

#[test]
fn explanations() {
    let found = || snapshot(Fetched::of(Some(&lb_service())));
    let stored = |value: serde_json::Value| Stored::of(&ingress(value));
    let drifted = json!({"metadata": {"name": "web", "namespace": "team-a"}, "spec": {"ingressClassName": "nginx"},
                         "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}});
    // (case, Ingress, sources, exit code, lines that must appear)
    let cases: Vec<(&str, serde_json::Value, Snapshot, u8, Vec<&str>)> = vec![
        (
            "drift",
            drifted.clone(),
            found(),
            1,
            vec![
                "Ingress:   team-a/web",
                "Class:     \"nginx\" (from spec.ingressClassName)",
                "Policy:    \"lb\" (mode enforce; governs classes nginx and class-less Ingresses only when the default IngressClass is one of them)",
                "Source:    service edge/lb",
                "Resolved:  203.0.113.10,203.0.113.20 (LoadBalancer Service: status ip, externalIPs appended; ports dropped)",
                "Stored:    10.0.0.1",
                "Canonical: 203.0.113.10,203.0.113.20",
                "State:     DRIFT",
                "Webhook:   a write of the stored value: rewrite it (patched) with JSON patch [{\"op\":\"replace\",\"path\":\"/status/loadBalancer/ingress\",\"value\":[{\"ip\":\"203.0.113.10\"},{\"ip\":\"203.0.113.20\"}]}]; warning \"status.loadBalancer.ingress rewritten to [203.0.113.10,203.0.113.20] by policy lb\"",
            ],
        ),
        (
            "canonical, no status list yet is not canonical",
            json!({"metadata": {"name": "web", "namespace": "team-a"}, "spec": {"ingressClassName": "nginx"},
                   "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.20"}, {"ip": "203.0.113.10"}]}}}),
            found(),
            0,
            vec!["State:     OK", "Webhook:   a write of the stored value: allow it unchanged (unchanged)"],
        ),
        (
            "audit mode",
            json!({"metadata": {"name": "shop", "namespace": "b", "annotations": {CLASS_ANNOTATION: "static"}}}),
            found(),
            1,
            vec![
                "Class:     \"static\" (from annotation kubernetes.io/ingress.class)",
                "Resolved:  192.0.2.10 (static list of the policy; ports dropped)",
                "Stored:    <none>",
                "Webhook:   a write of the stored value: allow it unchanged (audited); warning \"status.loadBalancer.ingress differs from [192.0.2.10] (policy fixed, audit mode)\"",
            ],
        ),
        (
            "unresolved",
            drifted.clone(),
            snapshot(Fetched::Missing),
            1,
            vec![
                "Resolved:  unresolved: Service edge/lb not found (Service not found)",
                "Canonical: unknown (source unresolved)",
                "State:     UNRESOLVED",
                "Webhook:   a write of the stored value: allow it unchanged (unresolved); warning \"canonical address unknown (Service edge/lb not found); status left as written\"",
            ],
        ),
        (
            "not governed",
            json!({"metadata": {"name": "x", "namespace": "n"}}),
            found(),
            0,
            vec![
                "Class:     none (neither spec.ingressClassName nor annotation kubernetes.io/ingress.class is set)",
                "Policy:    none: policy \"lb\" governs classes nginx and class-less Ingresses only when the default IngressClass is one of them; policy \"fixed\" governs classes static and class-less Ingresses only when the default IngressClass is one of them",
                "Stored:    <none>",
                "Webhook:   a write of the stored value: allow it unchanged (not_governed)",
            ],
        ),
    ];
    for (name, value, sources, exit_code, want) in cases {
        let explanation = explain::<Ingresses>(&stored(value), None, &policies(), &sources);
        let text = explanation.text();
        assert_eq!(explanation.exit_code, exit_code, "case {name}:\n{text}");
        for line in want {
            assert!(text.lines().any(|l| l == line), "case {name}: no line {line:?} in\n{text}");
        }
    }

    let deny = Policies::new(vec![policy("strict", &["nginx"], Source::Service(svc_ref()), Mode::Deny)]).unwrap();
    let text = explain::<Ingresses>(&stored(drifted), None, &deny, &found()).text();
    assert!(
        text.contains("Webhook:   a write of the stored value: refuse it (denied): ingress-status-guard policy \"strict\" requires status.loadBalancer.ingress [203.0.113.10,203.0.113.20], not [10.0.0.1]"),
        "{text}"
    );
}

#[test]
fn a_hostile_class_annotation_is_quoted_and_cut() {
    let class = format!("evil\n\u{1b}[31m{}", "x".repeat(500));
    let stored = Stored::of(&ingress(
        json!({"metadata": {"name": "a", "namespace": "n", "annotations": {CLASS_ANNOTATION: class}}}),
    ));
    let text = explain::<Ingresses>(&stored, None, &policies(), &Snapshot::default()).text();
    let line = text.lines().find(|l| l.starts_with("Class:")).unwrap();
    assert!(line.contains("\"evil\\n\\u{1b}[31m"), "{line}");
    assert!(line.ends_with("not a class name, so no class)"), "{line}");
    assert!(line.chars().count() < 200, "{line}");
    // Ingress, Class, Policy, Stored, State (NOT GOVERNED) and Webhook.
    assert_eq!(text.lines().count(), 6, "one line per label, none injected:\n{text}");
}

/// The snapshot answers class, default-class, namespace and node-IP questions from what it
/// listed, so `check` judges those policies as the webhook does.
#[test]
fn snapshot_facts_drive_matching_and_node_ips() {
    let yaml = r"
policies:
  - name: bare-metal
    controllerClasses: [k8s.io/ingress-nginx]
    namespaceSelector: team=a
    publishPods: {namespace: ing, selector: app=c}
";
    let policies = crate::policy::parse_file("p.yaml", yaml).unwrap();
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({"spec": {"nodeName": "n1"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}))
    .unwrap();
    let node: k8s_openapi::api::core::v1::Node =
        serde_json::from_value(json!({"status": {"addresses": [{"type": "ExternalIP", "address": "203.0.113.9"}]}}))
            .unwrap();
    let facts = Facts {
        classes: [
            BTreeMap::from([(
                "public".to_owned(),
                crate::kind::Class { controller: Some("k8s.io/ingress-nginx".to_owned()), default: true },
            )]),
            BTreeMap::new(),
            BTreeMap::new(),
        ],
        namespaces: BTreeMap::from([
            ("team-a".to_owned(), BTreeMap::from([("team".to_owned(), "a".to_owned())])),
            ("plain".to_owned(), BTreeMap::new()),
        ]),
        pods: BTreeMap::from([(("ing".to_owned(), "app=c".to_owned()), vec![PodFacts::of(&pod)])]),
        nodes: HashMap::from([("n1".to_owned(), NodeAddrs::of(&node))]),
        gateways: BTreeMap::new(),
    };
    let snapshot = Snapshot(BTreeMap::new(), facts);
    let write = |ns: &str, class: Option<&str>| StatusWrite {
        namespace: ns.into(),
        name: "web".into(),
        class: class.map(str::to_owned),
        addresses: list("203.0.113.9"),
        omitted: 0,
    };
    let writes = [write("team-a", Some("public")), write("team-a", None), write("plain", Some("public"))];
    let report = Report::build(&writes, &policies, &snapshot);
    let table = report.table();
    assert_eq!(report.exit_code(), 0, "{table}");
    assert!(
        table.contains("governed Ingresses: 2 (2 OK, 0 DRIFT, 0 UNRESOLVED); not governed: 1"),
        "the class and the default class are governed, plain is not:\n{table}"
    );
}

/// `explain` of a missing object says so in its kind's words, whatever the kind.
#[test]
fn a_missing_object_is_named_by_its_kind() {
    let missing = |kind| super::CheckError::NotFound { kind, namespace: "ns".into(), name: "x".into() }.to_string();
    assert_eq!(missing(super::Kind::Ingress), "Ingress ns/x not found");
    assert_eq!(missing(super::Kind::Gateway), "Gateway ns/x not found (or the API server serves no Gateways)");
}

mod gateway;
mod service;

#[test]
fn the_last_status_writer_is_the_latest_status_manager_that_owns_status() {
    let meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta = serde_json::from_value(serde_json::json!({
        "managedFields": [
            {"manager": "kubectl", "operation": "Update", "time": "2026-12-06T20:00:03Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}},
            {"manager": "traefik", "operation": "Update", "subresource": "status", "time": "2026-12-06T20:00:02Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:loadBalancer": {}}}},
            {"manager": "nginx-ingress-controller", "operation": "Update", "subresource": "status", "time": "2026-12-06T20:00:01Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}},
            {"manager": "labeller", "operation": "Apply", "subresource": "status", "time": "2026-12-06T20:00:04Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}
        ]
    }))
    .unwrap();
    let writer = crate::check::report::last_status_writer(&meta).expect("a status writer");
    assert_eq!(writer.short(), "last written by field manager \"traefik\" (Update at 2026-12-06T20:00:02Z)");
    assert!(writer.to_string().ends_with("not the user"), "{writer}");
    assert_eq!(crate::check::report::last_status_writer(&Default::default()), None);
}
