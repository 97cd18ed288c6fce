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

#[test]
fn trusted_writers_judge_by_who_wrote_and_what_is_stored() {
    let writers = crate::policy::TrustedWriters::new(vec!["system:serviceaccount:lb:ctl".into()]).unwrap();
    let trusted = |mode| policies(mode, OnUnresolved::Allow, Source::Trusted(writers.clone()));
    // A source that would panic the test if read: no trusted-writer verdict reads one.
    let sources = Fixed(Err(Unresolved::Trusted));
    let stored = |list: &'static str| move || Ok(write(Some("nginx"), list));
    let unreadable = || Err("status: expected an object".to_owned());
    type Stored = Box<dyn Fn() -> Result<StatusWrite, String>>;
    let cases: Vec<(&str, &str, Mode, Stored, &str, &str)> = vec![
        (
            "trusted, changed",
            "system:serviceaccount:lb:ctl",
            Mode::Deny,
            Box::new(stored("10.0.0.1")),
            "10.0.0.2",
            "trusted",
        ),
        ("other, changed, enforce", "bob", Mode::Enforce, Box::new(stored("10.0.0.1")), "10.0.0.2", "patched"),
        ("other, changed, deny", "bob", Mode::Deny, Box::new(stored("10.0.0.1")), "10.0.0.2", "denied"),
        ("other, changed, audit", "bob", Mode::Audit, Box::new(stored("10.0.0.1")), "10.0.0.2", "audited"),
        ("other, cleared", "bob", Mode::Enforce, Box::new(stored("10.0.0.1")), "", "patched"),
        (
            "other, unchanged",
            "bob",
            Mode::Deny,
            Box::new(stored("10.0.0.1,lb.example")),
            "10.0.0.1,lb.example",
            "unchanged",
        ),
        ("other, nothing stored or written", "bob", Mode::Deny, Box::new(stored("")), "", "unchanged"),
        ("other, unreadable stored status", "bob", Mode::Deny, Box::new(unreadable), "10.0.0.2", "unresolved_denied"),
        ("other, unreadable, enforce", "bob", Mode::Enforce, Box::new(unreadable), "10.0.0.2", "unresolved"),
        (
            "a prefix of a trusted name",
            "system:serviceaccount:lb:c",
            Mode::Deny,
            Box::new(stored("10.0.0.1")),
            "10.0.0.2",
            "denied",
        ),
    ];
    for (name, username, mode, stored, written, want) in cases {
        let policies = trusted(mode);
        let author = Author { username, stored: &*stored };
        let verdict = decide_by::<crate::kind::ingress::Ingresses>(
            &write(Some("nginx"), written),
            Some(&author),
            &policies,
            &sources,
        );
        assert_eq!(verdict.result(), want, "case {name}");
        if let Verdict::Mismatch { canonical, .. } = verdict {
            assert_eq!(
                canonical.into_owned(),
                stored().unwrap().addresses,
                "case {name}: the stored list is the answer"
            );
        }
    }
    // A stored object has no writer: it stands (the reconciler heals nothing, `check` says so).
    let policies = trusted(Mode::Enforce);
    let verdict = decide::<crate::kind::ingress::Ingresses>(&write(Some("nginx"), "10.0.0.9"), &policies, &sources);
    assert_eq!(verdict.result(), "trusted");
    // Another class is not governed, whoever writes.
    let author = Author { username: "bob", stored: &stored("10.0.0.1") };
    let verdict = decide_by::<crate::kind::ingress::Ingresses>(
        &write(Some("other"), "1.1.1.1"),
        Some(&author),
        &policies,
        &sources,
    );
    assert_eq!(verdict, Verdict::NotGoverned);
}

#[test]
fn a_stored_list_longer_than_the_reader_keeps_is_refused_not_cut() {
    let writers = crate::policy::TrustedWriters::new(vec!["ctl".into()]).unwrap();
    let policies = policies(Mode::Enforce, OnUnresolved::Allow, Source::Trusted(writers));
    let long = || Ok(StatusWrite { omitted: 3, ..write(Some("nginx"), "10.0.0.1") });
    let author = Author { username: "bob", stored: &long };
    let verdict = decide_by::<crate::kind::ingress::Ingresses>(
        &write(Some("nginx"), "10.0.0.2"),
        Some(&author),
        &policies,
        &Fixed(Err(Unresolved::Trusted)),
    );
    assert!(matches!(verdict, Verdict::Mismatch { action: Action::Deny, .. }), "{verdict:?}");
}
