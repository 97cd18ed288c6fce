//! Whether the guard's ServiceAccount may do what its mode needs, asked of the API server's own
//! authorizer (SubjectAccessReviews), rule by rule as the chart derives its RBAC.

use std::time::Duration;

use k8s_openapi::api::{
    admissionregistration::v1::MutatingWebhook,
    authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
};
use kube::{Api, api::PostParams};

use super::report::Finding;
use crate::{
    admission_policy,
    client::bounded,
    kind::Kind,
    policy::{Mode, Policies, Source},
};

const CHECK: &str = "permissions";
/// Reviews asked, at most: a long policy file must not make doctor flood the authorizer.
const MAX_REVIEWS: usize = 64;

/// One thing the guard does in the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Need {
    pub verb: &'static str,
    pub group: &'static str,
    /// `resource` or `resource/subresource`.
    pub resource: &'static str,
    /// `None`: every namespace (or a cluster-scoped resource).
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl Need {
    fn new(verb: &'static str, group: &'static str, resource: &'static str) -> Need {
        Need { verb, group, resource, namespace: None, name: None }
    }

    fn within(mut self, namespace: &str) -> Need {
        self.namespace = Some(namespace.to_owned());
        self
    }

    fn named(mut self, name: &str) -> Need {
        self.name = Some(name.to_owned());
        self
    }

    /// `list ingresses.networking.k8s.io in every namespace`, `get leases/x in isg`.
    fn shown(&self) -> String {
        let group = if self.group.is_empty() { String::new() } else { format!(".{}", self.group) };
        let (resource, sub) = self.resource.split_once('/').map_or((self.resource, ""), |(r, s)| (r, s));
        let name = self.name.as_ref().map_or_else(String::new, |n| format!("/{n}"));
        let sub = if sub.is_empty() { String::new() } else { format!(" (subresource {sub})") };
        let place = self.namespace.as_ref().map_or_else(String::new, |n| format!(" in {n}"));
        format!("{} {resource}{group}{name}{sub}{place}", self.verb)
    }
}

/// Where the guard runs and what it is called, for its grants.
#[derive(Debug, Clone)]
pub(crate) struct Guard<'a> {
    pub policy_mode: bool,
    pub lease_namespace: &'a str,
    pub lease: &'a str,
    pub webhook_configuration: &'a str,
    /// Webhook mode: the webhook configuration selects namespaces by label, so the guard
    /// watches the Namespaces it selects ([`scope_selects_namespaces`]).
    pub scope_selects_namespaces: bool,
}

/// Whether the guard watches Namespaces to follow `webhooks`' scope: only when one of them
/// selects by label (not for an empty selector, nor an unreadable configuration).
pub(crate) fn scope_selects_namespaces(configuration: &str, webhooks: &[MutatingWebhook]) -> bool {
    super::probe::reaches(configuration, webhooks).is_some_and(|reaches| {
        Kind::ALL.iter().any(|kind| reaches.of(*kind).selectors().is_some_and(|s| !s.is_empty()))
    })
}

/// What the guard does with `policies` in its mode: the chart's RBAC, rule by rule.
pub(crate) fn needs(policies: &Policies, guard: &Guard<'_>) -> Vec<Need> {
    const NET: &str = "networking.k8s.io";
    const GW: &str = "gateway.networking.k8s.io";
    let mut out = vec![
        Need::new("list", NET, "ingresses"),
        Need::new("watch", NET, "ingresses"),
        Need::new("patch", NET, "ingresses/status"),
        Need::new("list", NET, "ingressclasses"),
        Need::new("watch", NET, "ingressclasses"),
        Need::new("get", "coordination.k8s.io", "leases").within(guard.lease_namespace).named(guard.lease),
        Need::new("patch", "coordination.k8s.io", "leases").within(guard.lease_namespace).named(guard.lease),
    ];
    if guard.policy_mode {
        for resource in [
            "mutatingadmissionpolicies",
            "mutatingadmissionpolicybindings",
            "validatingadmissionpolicies",
            "validatingadmissionpolicybindings",
        ] {
            out.push(Need::new("create", "admissionregistration.k8s.io", resource));
            out.push(Need::new("list", "admissionregistration.k8s.io", resource));
        }
        for policy in policies.iter() {
            let Ok(name) = admission_policy::object_name_in(guard.lease, policies, policy) else { continue };
            let (object, binding) = match policy.mode {
                Mode::Enforce => ("mutatingadmissionpolicies", "mutatingadmissionpolicybindings"),
                Mode::Audit | Mode::Deny => ("validatingadmissionpolicies", "validatingadmissionpolicybindings"),
            };
            for verb in ["get", "update", "delete"] {
                out.push(Need::new(verb, "admissionregistration.k8s.io", object).named(&name));
                out.push(Need::new(verb, "admissionregistration.k8s.io", binding).named(&name));
            }
        }
    } else {
        let config = guard.webhook_configuration;
        out.push(Need::new("create", "events.k8s.io", "events"));
        out.push(Need::new("watch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations").named(config));
        if guard.scope_selects_namespaces {
            out.push(Need::new("list", "", "namespaces"));
            out.push(Need::new("watch", "", "namespaces"));
        }
    }
    if policies.of(Kind::Gateway).next().is_some() {
        out.push(Need::new("list", GW, "gateways"));
        out.push(Need::new("patch", GW, "gateways/status"));
    }
    if policies.of(Kind::Service).next().is_some() {
        out.push(Need::new("list", "", "services"));
        out.push(Need::new("watch", "", "services"));
        out.push(Need::new("patch", "", "services/status"));
    }
    let mut nodes = false;
    for source in policies.iter().flat_map(|p| &p.sources) {
        match source {
            Source::Static(_) | Source::Trusted(_) => {}
            Source::Service(svc) => {
                out.push(Need::new("watch", "", "services").within(&svc.namespace).named(&svc.name));
            }
            Source::Pods(pods) => {
                out.push(Need::new("watch", "", "pods").within(&pods.namespace));
                nodes = true;
            }
            Source::Gateway(gw) => out.push(Need::new("watch", GW, "gateways").within(&gw.namespace).named(&gw.name)),
        }
    }
    if nodes {
        out.push(Need::new("watch", "", "nodes"));
    }
    if policies.iter().any(|p| p.namespace_selector.is_some()) {
        out.push(Need::new("watch", "", "namespaces"));
    }
    out.dedup();
    out
}

/// `NAMESPACE/NAME` of a ServiceAccount, as its username and groups.
fn subject(service_account: &(String, String)) -> (String, Vec<String>) {
    let (namespace, name) = service_account;
    let user = format!("system:serviceaccount:{namespace}:{name}");
    let groups = ["system:serviceaccounts".to_owned(), format!("system:serviceaccounts:{namespace}")];
    (user, [&groups[..], &["system:authenticated".to_owned()]].concat())
}

/// Asks the API server whether `service_account` may do each of `needs`.
pub(crate) async fn permissions(
    client: &kube::Client,
    service_account: &(String, String),
    needs: &[Need],
    timeout: Duration,
) -> Finding {
    let (user, groups) = subject(service_account);
    let api = Api::<SubjectAccessReview>::all(client.clone());
    let mut denied = Vec::new();
    for need in needs.iter().take(MAX_REVIEWS) {
        let (resource, subresource) =
            need.resource.split_once('/').map_or((need.resource, None), |(r, s)| (r, Some(s)));
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.clone()),
                groups: Some(groups.clone()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(need.verb.to_owned()),
                    group: Some(need.group.to_owned()),
                    resource: Some(resource.to_owned()),
                    subresource: subresource.map(str::to_owned),
                    namespace: need.namespace.clone(),
                    name: need.name.clone(),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let what = || format!("create a SubjectAccessReview ({})", need.shown());
        let asked = bounded(what, timeout, api.create(&PostParams::default(), &review)).await;
        match asked {
            Ok(answer) if answer.status.as_ref().is_some_and(|s| s.allowed) => {}
            Ok(_) => denied.push(need.shown()),
            Err(e) => {
                let todo = "give doctor create on subjectaccessreviews.authorization.k8s.io (the chart's doctor ClusterRole), or leave out --service-account";
                return Finding::fail(CHECK, e.to_string(), todo);
            }
        }
    }
    let (namespace, name) = service_account;
    if denied.is_empty() {
        return Finding::pass(
            CHECK,
            format!(
                "ServiceAccount {namespace}/{name} may do the {} things its mode needs",
                needs.len().min(MAX_REVIEWS)
            ),
        );
    }
    Finding::fail(
        CHECK,
        format!("ServiceAccount {namespace}/{name} may not: {}", denied.join("; ")),
        "grant them (the chart's RBAC does: helm upgrade; docs/deploy.md lists each rule), or pass the guard's own ServiceAccount with --service-account",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::parse_file;

    fn guard(policy_mode: bool) -> Guard<'static> {
        Guard {
            policy_mode,
            lease_namespace: "isg",
            lease: "g",
            webhook_configuration: "g",
            scope_selects_namespaces: false,
        }
    }

    #[test]
    fn each_mode_and_source_needs_its_grants() {
        let file = "policies:\n- {name: a, ingressClasses: [a], publishService: edge/lb}\n- {name: b, ingressClasses: [b], publishPods: {namespace: ctl, selector: app=x}, namespaceSelector: 'team=x'}\n";
        let policies = parse_file("p.yaml", file).unwrap();
        let webhook: Vec<String> = needs(&policies, &guard(false)).iter().map(Need::shown).collect();
        for want in [
            "patch ingresses.networking.k8s.io (subresource status)",
            "get leases.coordination.k8s.io/g in isg",
            "watch services/lb in edge",
            "watch pods in ctl",
            "watch nodes",
            "watch namespaces",
            "create events.events.k8s.io",
            "watch mutatingwebhookconfigurations.admissionregistration.k8s.io/g",
        ] {
            assert!(webhook.contains(&want.to_owned()), "{want}: {webhook:?}");
        }
        let policy: Vec<String> = needs(&policies, &guard(true)).iter().map(Need::shown).collect();
        assert!(
            policy.contains(&"update mutatingadmissionpolicies.admissionregistration.k8s.io/g-ingress-0".to_owned())
        );
        assert!(!policy.iter().any(|n| n.contains("events")), "{policy:?}");
        assert!(!webhook.iter().any(|n| n == "list services"), "no Service policy, no list of every Service");
        let services = parse_file(
            "p.yaml",
            "policies:\n- {name: lb, kind: Service, loadBalancerClasses: [''], publishService: edge/lb}\n",
        )
        .unwrap();
        let shown: Vec<String> = needs(&services, &guard(false)).iter().map(Need::shown).collect();
        for want in ["list services", "watch services", "patch services (subresource status)"] {
            assert!(shown.contains(&want.to_owned()), "{want}: {shown:?}");
        }
    }

    /// Namespaces are a need only where the guard reads them: a policy's selector, or a webhook
    /// configuration that selects by label; never for an empty selector.
    #[test]
    fn namespaces_are_needed_only_for_a_selector() {
        let policies =
            parse_file("p.yaml", "policies:\n- {name: a, ingressClasses: [a], publishStatusAddress: 192.0.2.1}\n")
                .unwrap();
        let shown = |guard: &Guard<'_>| -> Vec<String> { needs(&policies, guard).iter().map(Need::shown).collect() };
        assert!(!shown(&guard(false)).iter().any(|n| n.contains("namespaces")), "{:?}", shown(&guard(false)));
        let selecting = Guard { scope_selects_namespaces: true, ..guard(false) };
        for want in ["list namespaces", "watch namespaces"] {
            assert!(shown(&selecting).contains(&want.to_owned()), "{want}: {:?}", shown(&selecting));
        }
        let webhook = |selector: serde_json::Value| -> MutatingWebhook {
            serde_json::from_value(serde_json::json!({
                "name": "status.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "clientConfig": {"url": "https://127.0.0.1/mutate"}, "namespaceSelector": selector,
                "rules": [{"apiGroups": ["networking.k8s.io"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["ingresses/status"]}],
            }))
            .unwrap()
        };
        assert!(!scope_selects_namespaces("g", &[webhook(serde_json::json!({}))]));
        assert!(!scope_selects_namespaces("g", &[]));
        assert!(scope_selects_namespaces("g", &[webhook(serde_json::json!({"matchLabels": {"team": "edge"}}))]));
    }

    #[test]
    fn a_service_account_is_its_user_and_groups() {
        let (user, groups) = subject(&("isg".into(), "guard".into()));
        assert_eq!(user, "system:serviceaccount:isg:guard");
        assert!(groups.contains(&"system:serviceaccounts:isg".to_owned()));
    }
}
