//! The decision: given a status write (from an AdmissionReview or a stored Ingress), the
//! policies and the sources, what is canonical and what to do about it. Pure, and the one place
//! that decides: the webhook, the reconciler, `check` and `explain` all call [`decide`].

use crate::{
    address::{self, Address},
    config::{Mode, OnUnresolved, Policies, Policy},
    sources::{Sources, Unresolved},
};

/// A write of `status.loadBalancer.ingress`, or a stored one, as the decision sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatusWrite {
    pub namespace: String,
    pub name: String,
    /// `spec.ingressClassName`, else the `kubernetes.io/ingress.class` annotation.
    pub class: Option<String>,
    /// `status.loadBalancer.ingress` as written or stored (empty when absent).
    pub addresses: Vec<Address>,
}

/// What a policy does with a write that differs from the canonical addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Rewrite,
    Audit,
    Deny,
}

impl From<Mode> for Action {
    fn from(mode: Mode) -> Self {
        match mode {
            Mode::Enforce => Action::Rewrite,
            Mode::Audit => Action::Audit,
            Mode::Deny => Action::Deny,
        }
    }
}

impl Action {
    /// The `result` of the webhook's answer when it takes this action.
    pub fn result(self) -> &'static str {
        match self {
            Action::Rewrite => "patched",
            Action::Audit => "audited",
            Action::Deny => "denied",
        }
    }
}

/// Everything [`decide`] can conclude; each variant maps to one response shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict<'p> {
    /// Not an Ingress status UPDATE (the webhook is registered for more than it should be);
    /// says what the request was.
    Ignored(String),
    /// No policy governs the Ingress.
    NotGoverned,
    /// The written addresses are already canonical.
    Canonical { policy: &'p Policy },
    /// The written addresses differ from the canonical ones.
    Mismatch { policy: &'p Policy, action: Action, canonical: Vec<Address> },
    /// The policy's source has no addresses now; `deny` refuses the write until it has.
    Unresolved { policy: &'p Policy, deny: bool, reason: Unresolved },
}

impl Verdict<'_> {
    /// The label this verdict is counted under (`admission_requests_total{result}`).
    pub fn result(&self) -> &'static str {
        match self {
            Verdict::Ignored(_) => "ignored",
            Verdict::NotGoverned => "not_governed",
            Verdict::Canonical { .. } => "unchanged",
            Verdict::Mismatch { action, .. } => action.result(),
            Verdict::Unresolved { deny: false, .. } => "unresolved",
            Verdict::Unresolved { deny: true, .. } => "unresolved_denied",
        }
    }
}

/// Decides one status write.
pub fn decide<'p>(write: &StatusWrite, policies: &'p Policies, sources: &dyn Sources) -> Verdict<'p> {
    let Some(policy) = policies.governing(write.class.as_deref()) else {
        return Verdict::NotGoverned;
    };
    match sources.canonical(policy) {
        Err(reason) => Verdict::Unresolved { policy, deny: policy.on_unresolved == OnUnresolved::Deny, reason },
        Ok(canonical) if address::same_set(&write.addresses, &canonical) => Verdict::Canonical { policy },
        Ok(canonical) => Verdict::Mismatch { policy, action: policy.mode.into(), canonical },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ClassScope, ServiceRef, Source};

    struct Fixed(Result<Vec<Address>, Unresolved>);
    impl Sources for Fixed {
        fn service(&self, _: &ServiceRef) -> Result<Vec<Address>, Unresolved> {
            self.0.clone()
        }
    }

    fn policies(mode: Mode, on_unresolved: OnUnresolved, source: Source) -> Policies {
        Policies::new(vec![Policy {
            name: "p".into(),
            scope: ClassScope { classes: vec!["nginx".into()], without_class: false },
            source,
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
        }
    }

    #[test]
    fn verdicts() {
        let svc: ServiceRef = "ingress/lb".parse().unwrap();
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
                "static source ignores the cache",
                write(Some("nginx"), "10.0.0.1"),
                policies(Mode::Enforce, OnUnresolved::Allow, Source::Static(canonical.clone())),
                missing(),
                "patched",
            ),
        ];
        for (name, write, policies, sources, want) in cases {
            let verdict = decide(&write, &policies, &sources);
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
}
