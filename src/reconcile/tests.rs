use super::{Settings, judge::Judgement, kind::judge};
use crate::{
    address::{Address, parse_static_list},
    kind::{
        Governed,
        ingress::{Ingresses, LeanIngress, StatusWrite},
    },
    policy::Policies,
    policy::{ClassScope, Mode, OnUnresolved, Policy, ServiceRef, Source},
    sources::Sources,
    sources::Unresolved,
};

#[test]
fn lean_ingress_reads_only_what_decide_needs() {
    let json = serde_json::json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "42",
                     "annotations": {"kubernetes.io/ingress.class": "legacy", "big": "x".repeat(10_000)},
                     "managedFields": [{"manager": "kubectl"}]},
        "spec": {"rules": [{"host": "a.example"}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}, {"hostname": "lb.example"}]}}
    });
    let lean: LeanIngress = serde_json::from_value(json).unwrap();
    assert_eq!(lean.meta.name.as_deref(), Some("web"));
    assert_eq!(lean.meta.namespace.as_deref(), Some("shop"));
    assert_eq!(lean.meta.resource_version.as_deref(), Some("42"));
    assert!(lean.meta.annotations.is_none() && lean.meta.managed_fields.is_none());
    assert_eq!(lean.class.as_deref(), Some("legacy"), "the annotation when there is no ingressClassName");
    assert_eq!(lean.addresses, parse_static_list("192.0.2.1,lb.example").unwrap());

    let cases = [
        (serde_json::json!({"metadata": {"name": "a"}}), None, 0),
        (serde_json::json!({"metadata": {"name": "a", "annotations": null}, "spec": null, "status": null}), None, 0),
        (
            serde_json::json!({"spec": {"ingressClassName": "new"}, "metadata": {"annotations": {"kubernetes.io/ingress.class": "old"}}}),
            Some("new"),
            0,
        ),
        (serde_json::json!({"status": {"loadBalancer": {}}}), None, 0),
        (serde_json::json!({"status": {"loadBalancer": {"ingress": null}}}), None, 0),
    ];
    for (json, class, count) in cases {
        let lean: LeanIngress = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(lean.class.as_deref(), class, "{json}");
        assert_eq!(lean.addresses.len(), count, "{json}");
    }
}

struct Fixed(Result<Vec<Address>, Unresolved>);
impl Sources for Fixed {
    fn service(&self, _: &ServiceRef) -> Result<Vec<Address>, Unresolved> {
        self.0.clone()
    }
}

fn policies(mode: Mode) -> Policies {
    Policies::new(vec![Policy {
        name: "p".into(),
        kind: crate::kind::Kind::Ingress,
        kind_inferred: false,
        scope: ClassScope { classes: vec!["nginx".into()], ..Default::default() },
        namespace_selector: None,
        sources: vec![Source::Service(crate::policy::NamespacedName::service("ns/lb").unwrap())],
        mode,
        keep_ports: false,
        on_unresolved: OnUnresolved::Allow,
    }])
    .unwrap()
}

#[test]
fn judgements() {
    let lb = Fixed(Ok(parse_static_list("192.0.2.10").unwrap()));
    let missing = Fixed(Err(Unresolved::Missing(crate::policy::NamespacedName::service("ns/lb").unwrap())));
    let write = |class: Option<&str>, list: &str| StatusWrite {
        namespace: "a".into(),
        name: "b".into(),
        class: class.map(String::from),
        addresses: if list.is_empty() { Vec::new() } else { parse_static_list(list).unwrap() },
        omitted: 0,
    };
    let held = Fixed(Err(Unresolved::HeldByAnotherGuard("ns.isg".into())));
    let drift = |patch| Judgement::Drift { policy: "p".into(), patch };
    let cases = [
        ("canonical", Mode::Enforce, &lb, write(Some("nginx"), "192.0.2.10"), Judgement::Fine),
        ("stale, enforce", Mode::Enforce, &lb, write(Some("nginx"), "192.0.2.99"), drift(true)),
        ("empty, enforce", Mode::Enforce, &lb, write(Some("nginx"), ""), drift(true)),
        ("stale, deny", Mode::Deny, &lb, write(Some("nginx"), "192.0.2.99"), drift(true)),
        ("stale, audit: measured only", Mode::Audit, &lb, write(Some("nginx"), "192.0.2.99"), drift(false)),
        ("not governed", Mode::Enforce, &lb, write(Some("other"), "192.0.2.99"), Judgement::Fine),
        ("unresolved never patches", Mode::Enforce, &missing, write(Some("nginx"), "192.0.2.99"), Judgement::Fine),
        ("held by another guard: hands off", Mode::Enforce, &held, write(Some("nginx"), "192.0.2.99"), Judgement::Fine),
        ("held, not cleared either", Mode::Enforce, &held, write(Some("nginx"), ""), Judgement::Fine),
    ];
    for (name, mode, sources, write, want) in cases {
        assert_eq!(judge::<Ingresses>(&write, &policies(mode), sources), want, "case {name}");
    }
}

#[test]
fn qps_is_bounded() {
    assert!(Settings::new(20.0).is_ok());
    for bad in [0.0, -1.0, f64::NAN, 1e6] {
        assert!(Settings::new(bad).unwrap_err().to_string().starts_with("--reconcile-qps"), "{bad}");
    }
}

/// A Service source answering `service`, beside the static list of the policy.
struct Union {
    service: Result<Vec<Address>, Unresolved>,
    synced: bool,
}
impl Sources for Union {
    fn service(&self, _: &ServiceRef) -> Result<Vec<Address>, Unresolved> {
        self.service.clone()
    }
    fn synced(&self) -> bool {
        self.synced
    }
}

#[test]
fn partial_knowledge_grows_a_status_but_never_shrinks_it() {
    let policies = Policies::new(vec![Policy {
        name: "p".into(),
        kind: crate::kind::Kind::Ingress,
        kind_inferred: false,
        scope: ClassScope { classes: vec!["nginx".into()], ..Default::default() },
        namespace_selector: None,
        sources: vec![
            Source::Service(crate::policy::NamespacedName::service("ns/lb").unwrap()),
            Source::Static(parse_static_list("192.0.2.1").unwrap()),
        ],
        mode: Mode::Enforce,
        keep_ports: false,
        on_unresolved: OnUnresolved::Allow,
    }])
    .unwrap();
    let svc = || crate::policy::NamespacedName::service("ns/lb").unwrap();
    let lb = || Ok(parse_static_list("203.0.113.10").unwrap());
    let write = |list: &str| StatusWrite {
        namespace: "a".into(),
        name: "b".into(),
        class: Some("nginx".into()),
        addresses: if list.is_empty() { Vec::new() } else { parse_static_list(list).unwrap() },
        omitted: 0,
    };
    let drift = |patch| Judgement::Drift { policy: "p".into(), patch };
    let cases = [
        (
            "all resolved: shrink",
            Union { service: lb(), synced: true },
            "192.0.2.1,203.0.113.10,198.51.100.9",
            drift(true),
        ),
        ("service missing: grow", Union { service: Err(Unresolved::Missing(svc())), synced: true }, "", drift(true)),
        (
            "service missing: shrink waits",
            Union { service: Err(Unresolved::Missing(svc())), synced: true },
            "192.0.2.1,203.0.113.10",
            drift(false),
        ),
        (
            "service not synced: nothing at all",
            Union { service: Err(Unresolved::NotSynced(svc())), synced: true },
            "",
            drift(false),
        ),
        ("cluster facts not synced: nothing at all", Union { service: lb(), synced: false }, "", drift(false)),
        ("canonical", Union { service: lb(), synced: true }, "192.0.2.1,203.0.113.10", Judgement::Fine),
    ];
    for (name, sources, stored, want) in cases {
        assert_eq!(judge::<Ingresses>(&write(stored), &policies, &sources), want, "case {name}");
    }
}

#[test]
fn the_trimmed_fields_are_recognised() {
    let json = serde_json::json!({
        "metadata": {"name": "web", "namespace": "shop",
                     "annotations": {"kubernetes.io/ingress.class": "x".repeat(200 * 1024)}},
        "status": {"loadBalancer": {"ingress": (0..300).map(|i| serde_json::json!({"ip": format!("10.0.{}.{}", i / 256, i % 256)})).collect::<Vec<_>>()}}
    });
    let lean: LeanIngress = serde_json::from_value(json).unwrap();
    let (write, _) = lean.into_write().unwrap();
    assert_eq!(Ingresses::trimmed(&write), [Some("class"), Some("addresses")]);
    assert_eq!(write.addresses.len(), crate::address::MAX_ENTRIES);
    assert_eq!(write.omitted, 300 - crate::address::MAX_ENTRIES);
    let plain = serde_json::json!({"metadata": {"name": "web", "namespace": "shop"}});
    let lean: LeanIngress = serde_json::from_value(plain).unwrap();
    assert_eq!(Ingresses::trimmed(&lean.into_write().unwrap().0), [None, None]);
}
