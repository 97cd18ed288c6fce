use std::collections::{BTreeMap, HashMap};

use super::*;
use crate::{
    address,
    kind::ingress::StatusWrite,
    policy::{PolicySpec, ServiceRef},
};

/// A cluster as the caches would hold it.
#[derive(Default)]
struct Cluster {
    services: HashMap<String, Vec<Address>>,
    /// The IngressClasses.
    classes: crate::kind::Classes,
    namespaces: HashMap<String, BTreeMap<String, String>>,
}

impl Sources for Cluster {
    fn service(&self, svc: &ServiceRef) -> Result<Vec<Address>, Unresolved> {
        self.services.get(&svc.to_string()).cloned().ok_or_else(|| Unresolved::Missing(svc.clone()))
    }
    fn classes(&self, kind: crate::kind::Kind) -> Option<crate::kind::Classes> {
        Some(if kind == crate::kind::Kind::Ingress { self.classes.clone() } else { Default::default() })
    }
    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.namespaces.get(namespace).cloned()
    }
}

fn cluster() -> Cluster {
    let mut c = Cluster::default();
    c.services.insert("ing/blue".into(), address::parse_static_list("203.0.113.1").unwrap());
    c.services.insert("ing/green".into(), address::parse_static_list("203.0.113.2,203.0.113.1").unwrap());
    let class = |controller: &str, default| crate::kind::Class { controller: Some(controller.into()), default };
    c.classes.insert("public".into(), class("k8s.io/ingress-nginx", true));
    c.classes.insert("traefik".into(), class("traefik.io/ingress-controller", false));
    c.namespaces.insert("team-a".into(), BTreeMap::from([("team".into(), "a".into())]));
    c.namespaces.insert("plain".into(), BTreeMap::new());
    c
}

fn policies(yaml: &str) -> Policies {
    crate::policy::parse_file("p.yaml", yaml).unwrap()
}

fn write(namespace: &str, class: Option<&str>) -> StatusWrite {
    StatusWrite {
        namespace: namespace.into(),
        name: "ing".into(),
        class: class.map(str::to_owned),
        ..Default::default()
    }
}

fn shown(v: &Verdict<'_>) -> String {
    match v {
        Verdict::Mismatch { policy, canonical, .. } => {
            format!("{}: {}", policy.name, address::Addresses(canonical))
        }
        Verdict::Unresolved { policy, reason, .. } => format!("{}: unresolved: {reason}", policy.name),
        other => other.result().to_owned(),
    }
}

#[test]
fn union_of_sources() {
    let cases = [
        ("blue and green", "[{publishService: ing/blue}, {publishService: ing/green}]", "p: 203.0.113.1,203.0.113.2"),
        (
            "service and static",
            "[{publishService: ing/blue}, {publishStatusAddress: lb.example.com}]",
            "p: 203.0.113.1,lb.example.com",
        ),
        (
            "one missing: the others are used",
            "[{publishService: ing/gone}, {publishService: ing/green}]",
            "p: 203.0.113.1,203.0.113.2",
        ),
        (
            "every source missing",
            "[{publishService: ing/gone}, {publishService: ing/lost}]",
            "p: unresolved: every source is unresolved: Service ing/gone not found; Service ing/lost not found",
        ),
        ("one source, missing", "[{publishService: ing/gone}]", "p: unresolved: Service ing/gone not found"),
        (
            "pods never watched here",
            "[{publishPods: {namespace: ing, selector: app=x}}, {publishStatusAddress: 192.0.2.1}]",
            "p: 192.0.2.1",
        ),
    ];
    for (name, sources, want) in cases {
        let p = policies(&format!("policies: [{{name: p, sources: {sources}}}]"));
        assert_eq!(
            shown(&decide::<crate::kind::ingress::Ingresses>(&write("ns", Some("x")), &p, &cluster())),
            want,
            "case {name}"
        );
    }
}

#[test]
fn matching_by_controller_default_class_and_namespace() {
    let yaml = r"
policies:
  - name: nginx
    controllerClasses: [k8s.io/ingress-nginx]
    namespaceSelector: team=a
    publishStatusAddress: 192.0.2.1
  - name: nginx-rest
    controllerClasses: [k8s.io/ingress-nginx]
    namespaceSelector: team!=a
    publishStatusAddress: 192.0.2.2
  - name: legacy
    ingressClasses: [public]
    namespaceSelector: team=a
    publishStatusAddress: 192.0.2.3
";
    let p = policies(yaml);
    let cases = [
        ("controller, selected namespace", write("team-a", Some("public")), "nginx: 192.0.2.1"),
        ("controller, other namespace", write("plain", Some("public")), "nginx-rest: 192.0.2.2"),
        ("default class, class-less", write("team-a", None), "nginx: 192.0.2.1"),
        ("another controller's class", write("team-a", Some("traefik")), "not_governed"),
        ("unknown class", write("team-a", Some("nope")), "not_governed"),
        ("unknown namespace", write("gone", Some("public")), "not_governed"),
    ];
    for (name, w, want) in cases {
        assert_eq!(shown(&decide::<crate::kind::ingress::Ingresses>(&w, &p, &cluster())), want, "case {name}");
    }
    let names = |o: Option<(&Policy, &Policy)>| o.map(|(a, b)| (a.name.clone(), b.name.clone()));
    assert_eq!(
        names(overlap::<crate::kind::ingress::Ingresses>(&write("team-a", Some("public")), &p, &cluster())),
        Some(("nginx".into(), "legacy".into())),
        "class name on one, its controller on the other: a run-time overlap"
    );
    assert_eq!(
        names(overlap::<crate::kind::ingress::Ingresses>(&write("plain", Some("public")), &p, &cluster())),
        None
    );
}

#[test]
fn flags_build_the_same_policies() {
    let spec = PolicySpec {
        name: "default".into(),
        controller_classes: vec!["k8s.io/ingress-nginx".into()],
        publish_status_address: Some("192.0.2.9".into()),
        ..Default::default()
    };
    let p = Policies::new(vec![spec.build().unwrap()]).unwrap();
    assert_eq!(
        shown(&decide::<crate::kind::ingress::Ingresses>(&write("plain", None), &p, &cluster())),
        "default: 192.0.2.9"
    );
}
