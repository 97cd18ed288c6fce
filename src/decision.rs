//! The decision: given a status write (from an AdmissionReview or a stored Ingress), the
//! policies and the sources, what is canonical and what to do about it. Pure, and the one place
//! that decides: the webhook, the reconciler, `check` and `explain` all call [`decide`].

use std::borrow::Cow;

use crate::{
    address::{self, Address},
    policy::{Mode, OnUnresolved, Policies, Policy, Subject},
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
    /// `canonical` is borrowed from the policy when its static list is the answer.
    Mismatch { policy: &'p Policy, action: Action, canonical: Cow<'p, [Address]> },
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

/// What matching needs to know about `write`'s Ingress, read from `sources` only when some
/// policy needs it.
pub(crate) fn subject<'w>(write: &'w StatusWrite, policies: &Policies, sources: &dyn Sources) -> Subject<'w> {
    let classes = policies.need_ingress_classes();
    let default_classes = if classes && write.class.is_none() {
        let names = sources.default_ingress_classes();
        names
            .into_iter()
            .map(|name| {
                let controller = sources.ingress_class_controller(&name);
                (name, controller)
            })
            .collect()
    } else {
        Vec::new()
    };
    Subject {
        namespace: &write.namespace,
        class: write.class.as_deref(),
        class_controller: write.class.as_deref().filter(|_| classes).and_then(|c| sources.ingress_class_controller(c)),
        default_classes,
        namespace_labels: if policies.need_namespaces() { sources.namespace_labels(&write.namespace) } else { None },
    }
}

/// The first two policies that both match `write`, when more than one does: a run-time overlap
/// (the first governs), which the caller counts and logs.
pub(crate) fn overlap<'p>(
    write: &StatusWrite,
    policies: &'p Policies,
    sources: &dyn Sources,
) -> Option<(&'p Policy, &'p Policy)> {
    let subject = subject(write, policies, sources);
    match policies.matching(&subject)[..] {
        [first, second, ..] => Some((first, second)),
        _ => None,
    }
}

/// Decides one status write.
pub fn decide<'p>(write: &StatusWrite, policies: &'p Policies, sources: &dyn Sources) -> Verdict<'p> {
    let Some(policy) = policies.governing(&subject(write, policies, sources)) else {
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
    use crate::policy::{ClassScope, ServiceRef, Source};

    struct Fixed(Result<Vec<Address>, Unresolved>);
    impl Sources for Fixed {
        fn service(&self, _: &ServiceRef) -> Result<Vec<Address>, Unresolved> {
            self.0.clone()
        }
    }

    fn policies(mode: Mode, on_unresolved: OnUnresolved, source: Source) -> Policies {
        Policies::new(vec![Policy {
            name: "p".into(),
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

#[cfg(test)]
mod matching_and_union {
    use std::collections::{BTreeMap, HashMap};

    use super::*;
    use crate::policy::{PolicySpec, ServiceRef};

    /// A cluster as the caches would hold it.
    #[derive(Default)]
    struct Cluster {
        services: HashMap<String, Vec<Address>>,
        classes: HashMap<String, (String, bool)>,
        namespaces: HashMap<String, BTreeMap<String, String>>,
    }

    impl Sources for Cluster {
        fn service(&self, svc: &ServiceRef) -> Result<Vec<Address>, Unresolved> {
            self.services.get(&svc.to_string()).cloned().ok_or_else(|| Unresolved::Missing(svc.clone()))
        }
        fn ingress_class_controller(&self, class: &str) -> Option<String> {
            self.classes.get(class).map(|(c, _)| c.clone())
        }
        fn default_ingress_classes(&self) -> Vec<String> {
            self.classes.iter().filter(|(_, (_, d))| *d).map(|(n, _)| n.clone()).collect()
        }
        fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
            self.namespaces.get(namespace).cloned()
        }
    }

    fn cluster() -> Cluster {
        let mut c = Cluster::default();
        c.services.insert("ing/blue".into(), address::parse_static_list("203.0.113.1").unwrap());
        c.services.insert("ing/green".into(), address::parse_static_list("203.0.113.2,203.0.113.1").unwrap());
        c.classes.insert("public".into(), ("k8s.io/ingress-nginx".into(), true));
        c.classes.insert("traefik".into(), ("traefik.io/ingress-controller".into(), false));
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
            (
                "blue and green",
                "[{publishService: ing/blue}, {publishService: ing/green}]",
                "p: 203.0.113.1,203.0.113.2",
            ),
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
            assert_eq!(shown(&decide(&write("ns", Some("x")), &p, &cluster())), want, "case {name}");
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
            assert_eq!(shown(&decide(&w, &p, &cluster())), want, "case {name}");
        }
        let names = |o: Option<(&Policy, &Policy)>| o.map(|(a, b)| (a.name.clone(), b.name.clone()));
        assert_eq!(
            names(overlap(&write("team-a", Some("public")), &p, &cluster())),
            Some(("nginx".into(), "legacy".into())),
            "class name on one, its controller on the other: a run-time overlap"
        );
        assert_eq!(names(overlap(&write("plain", Some("public")), &p, &cluster())), None);
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
        assert_eq!(shown(&decide(&write("plain", None), &p, &cluster())), "default: 192.0.2.9");
    }
}
