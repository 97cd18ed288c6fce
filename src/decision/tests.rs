use super::*;
use crate::{
    address,
    kind::ingress::StatusWrite,
    policy::{ClassScope, ServiceRef, Source},
};

struct Fixed(Result<Vec<Address>, Unresolved>);
impl Sources for Fixed {
    fn service(&self, _: &ServiceRef) -> Result<Vec<Address>, Unresolved> {
        self.0.clone()
    }
}

fn policies(mode: Mode, on_unresolved: OnUnresolved, source: Source) -> Policies {
    Policies::new(vec![Policy {
        name: "p".into(),
        kind: crate::kind::Kind::Ingress,
        kind_inferred: false,
        scope: ClassScope { classes: vec!["nginx".into()], ..Default::default() },
        namespace_selector: None,
        sources: vec![source],
        mode,
        keep_ports: false,
        on_unresolved,
    }])
    .unwrap()
}

fn write(class: Option<&str>, addresses: &str) -> StatusWrite {
    StatusWrite {
        namespace: "ns".into(),
        name: "ing".into(),
        class: class.map(str::to_owned),
        addresses: if addresses.is_empty() { vec![] } else { address::parse_static_list(addresses).unwrap() },
        omitted: 0,
    }
}

#[test]
fn verdicts() {
    let svc: ServiceRef = crate::policy::NamespacedName::service("ingress/lb").unwrap();
    let lb = || Fixed(Ok(address::parse_static_list("203.0.113.5,lb.example").unwrap()));
    let missing = || Fixed(Err(Unresolved::Missing(svc.clone())));
    let service = || Source::Service(svc.clone());
    let canonical = address::parse_static_list("203.0.113.5,lb.example").unwrap();
    let cases: Vec<(&str, StatusWrite, Policies, Fixed, &str)> = vec![
        (
            "other class",
            write(Some("traefik"), "10.0.0.1"),
            policies(Mode::Enforce, OnUnresolved::Allow, service()),
            lb(),
            "not_governed",
        ),
        (
            "class-less",
            write(None, "10.0.0.1"),
            policies(Mode::Enforce, OnUnresolved::Allow, service()),
            lb(),
            "not_governed",
        ),
        (
            "canonical, other order",
            write(Some("nginx"), "lb.example,203.0.113.5"),
            policies(Mode::Enforce, OnUnresolved::Allow, service()),
            lb(),
            "unchanged",
        ),
        (
            "rewrite",
            write(Some("nginx"), "10.0.0.1"),
            policies(Mode::Enforce, OnUnresolved::Allow, service()),
            lb(),
            "patched",
        ),
        (
            "empty write is a mismatch",
            write(Some("nginx"), ""),
            policies(Mode::Enforce, OnUnresolved::Allow, service()),
            lb(),
            "patched",
        ),
        (
            "audit",
            write(Some("nginx"), "10.0.0.1"),
            policies(Mode::Audit, OnUnresolved::Allow, service()),
            lb(),
            "audited",
        ),
        (
            "deny",
            write(Some("nginx"), "10.0.0.1"),
            policies(Mode::Deny, OnUnresolved::Allow, service()),
            lb(),
            "denied",
        ),
        (
            "unresolved, allow",
            write(Some("nginx"), "10.0.0.1"),
            policies(Mode::Enforce, OnUnresolved::Allow, service()),
            missing(),
            "unresolved",
        ),
        (
            "unresolved, deny",
            write(Some("nginx"), "10.0.0.1"),
            policies(Mode::Deny, OnUnresolved::Deny, service()),
            missing(),
            "unresolved_denied",
        ),
        (
            "unresolved even if canonical",
            write(Some("nginx"), "lb.example,203.0.113.5"),
            policies(Mode::Enforce, OnUnresolved::Allow, service()),
            missing(),
            "unresolved",
        ),
        (
            "canonical entries, then more than the reader keeps",
            StatusWrite { omitted: 1, ..write(Some("nginx"), "lb.example,203.0.113.5") },
            policies(Mode::Enforce, OnUnresolved::Allow, service()),
            lb(),
            "patched",
        ),
        (
            "static source ignores the cache",
            write(Some("nginx"), "10.0.0.1"),
            policies(Mode::Enforce, OnUnresolved::Allow, Source::Static(canonical.clone())),
            missing(),
            "patched",
        ),
    ];
    for (name, write, policies, sources, want) in cases {
        let verdict = decide::<crate::kind::ingress::Ingresses>(&write, &policies, &sources);
        assert_eq!(verdict.result(), want, "case {name}");
        match verdict {
            Verdict::Mismatch { canonical: got, policy, .. } => {
                assert_eq!(got, canonical, "case {name}");
                assert_eq!(policy.name, "p", "case {name}");
            }
            Verdict::Unresolved { reason, .. } => {
                assert_eq!(reason, Unresolved::Missing(svc.clone()), "case {name}");
            }
            _ => {}
        }
    }
}
