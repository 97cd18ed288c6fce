//! The checks of the webhook path: the configuration's rules, its caBundle against the
//! certificate the webhook presents, and its Service's ready endpoints.

use std::time::Duration;

use k8s_openapi::api::{
    admissionregistration::v1::{MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations},
    core::v1::Service,
    discovery::v1::EndpointSlice,
};
use kube::{Api, api::ListParams};

use super::presented::{self, Presented};
use super::report::Finding;
use crate::{
    client::{RequestError, bounded},
    kind::Kind,
    policy::Policies,
};

/// Webhooks of one configuration looked at, at most.
const MAX_WEBHOOKS: usize = 16;
/// EndpointSlices of one Service read, at most (one page).
const MAX_SLICES: u32 = 100;

/// Where the API server sends a webhook's reviews.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// `clientConfig.url`: host and port.
    Url { host: String, port: u16 },
    /// `clientConfig.service`.
    Service { namespace: String, name: String, port: u16 },
}

impl Target {
    fn of(webhook: &MutatingWebhook) -> Result<Target, String> {
        let config = &webhook.client_config;
        if let Some(service) = &config.service {
            let port = service.port.unwrap_or(443);
            let port = u16::try_from(port).map_err(|_| format!("service port {port} is out of range"))?;
            return Ok(Target::Service { namespace: service.namespace.clone(), name: service.name.clone(), port });
        }
        let url = config.url.as_deref().ok_or("it has neither clientConfig.service nor clientConfig.url")?;
        host_port(url).ok_or_else(|| format!("clientConfig.url {url:?} is not https://HOST[:PORT]/PATH"))
    }
}

/// The host and port of an `https://` URL (`[v6]` brackets removed; port default 443).
fn host_port(url: &str) -> Option<Target> {
    let rest = url.strip_prefix("https://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6.split_once(']')?;
            (host, after.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port = port.map_or(Some(443), |p| p.parse().ok())?;
    (!host.is_empty()).then(|| Target::Url { host: host.to_owned(), port })
}

/// Whether `rule` sends UPDATEs of `kind`'s status subresource.
fn covers(rule: &RuleWithOperations, kind: Kind) -> bool {
    let any = |list: &Option<Vec<String>>, want: &str| list.iter().flatten().any(|v| v == "*" || v == want);
    let status = format!("{}/status", kind.plural());
    let resource = |v: &String| v == "*/*" || *v == status || *v == format!("{}/*", kind.plural()) || v == "*/status";
    any(&rule.api_groups, kind.group())
        && any(&rule.api_versions, kind.version())
        && any(&rule.operations, "UPDATE")
        && rule.resources.iter().flatten().any(resource)
}

/// Whether configuration `name` reviews every governed kind's status writes; its webhooks that do.
pub(crate) async fn configuration(
    client: &kube::Client,
    name: &str,
    policies: &Policies,
    timeout: Duration,
) -> (Finding, Vec<MutatingWebhook>) {
    const CHECK: &str = "configuration";
    let api = Api::<MutatingWebhookConfiguration>::all(client.clone());
    let found = match bounded(|| format!("get MutatingWebhookConfiguration {name}"), timeout, api.get_opt(name)).await {
        Ok(Some(found)) => found,
        Ok(None) => {
            let todo = "install the chart (webhook mode), or pass --webhook-configuration with the name of the guard's (`kubectl get mutatingwebhookconfigurations`)";
            return (Finding::fail(CHECK, format!("MutatingWebhookConfiguration {name} not found"), todo), vec![]);
        }
        Err(e) => return (Finding::fail(CHECK, e.to_string(), "give doctor an identity that may get it"), vec![]),
    };
    let webhooks: Vec<MutatingWebhook> = found.webhooks.into_iter().flatten().take(MAX_WEBHOOKS).collect();
    let kinds: Vec<Kind> = Kind::ALL.into_iter().filter(|k| policies.of(*k).next().is_some()).collect();
    let missing: Vec<String> = kinds
        .iter()
        .filter(|kind| !webhooks.iter().any(|w| w.rules.iter().flatten().any(|r| covers(r, **kind))))
        .map(|kind| format!("UPDATE {}/status ({}/{})", kind.plural(), kind.group(), kind.version()))
        .collect();
    let reviewing: Vec<MutatingWebhook> = webhooks
        .into_iter()
        .filter(|w| w.rules.iter().flatten().any(|r| kinds.iter().any(|k| covers(r, *k))))
        .collect();
    if !missing.is_empty() {
        let found = format!(
            "no webhook of {name} has a rule for {}: the API server never calls the guard for those writes",
            missing.join(", ")
        );
        let todo = "add the rule to the configuration (the chart renders one per governed kind: helm upgrade), or remove the policy";
        return (Finding::fail(CHECK, found, todo), reviewing);
    }
    let names: Vec<&str> = reviewing.iter().map(|w| w.name.as_str()).collect();
    let kinds: Vec<&str> = kinds.iter().map(|k| k.plural()).collect();
    let found = format!("{name}: webhook {} reviews the status writes of {}", names.join(", "), kinds.join(", "));
    (Finding::pass(CHECK, found), reviewing)
}

/// Whether the caBundle of `webhook` verifies the certificate its address presents.
pub(crate) async fn ca_bundle(webhook: &MutatingWebhook, timeout: Duration) -> Finding {
    const CHECK: &str = "ca-bundle";
    let target = match Target::of(webhook) {
        Ok(target) => target,
        Err(e) => return Finding::fail(CHECK, format!("webhook {}: {e}", webhook.name), "fix its clientConfig"),
    };
    let Some(bundle) = webhook.client_config.ca_bundle.as_ref().map(|b| b.0.clone()).filter(|b| !b.is_empty()) else {
        let todo = "set the caBundle: `certs bootstrap` or cert-manager's CA injector writes it (docs/deploy.md)";
        return Finding::fail(CHECK, format!("webhook {} has no caBundle", webhook.name), todo);
    };
    let (host, port) = match &target {
        Target::Url { host, port } => (host.clone(), *port),
        Target::Service { namespace, name, port } => (format!("{name}.{namespace}.svc"), *port),
    };
    let dial = (host.clone(), port);
    let probe = tokio::task::spawn_blocking(move || presented::probe(&bundle, &dial.0, dial.1, timeout));
    let outcome = match tokio::time::timeout(timeout * 3, probe).await {
        Ok(Ok(outcome)) => outcome,
        _ => Presented::Unreachable(format!("no TLS answer from {host}:{port} within {:?}", timeout * 3)),
    };
    match (outcome, &target) {
        (Presented::Verified, _) => {
            Finding::pass(CHECK, format!("the caBundle verifies the certificate {host}:{port} presents"))
        }
        (Presented::Rejected(why) | Presented::BadBundle(why), _) => Finding::fail(
            CHECK,
            format!("webhook {}: {why}", webhook.name),
            "the API server refuses this certificate and the write goes unreviewed: re-run `certs bootstrap`, or check cert-manager's CA injection (`cert-manager.io/inject-ca-from`)",
        ),
        (Presented::Unreachable(why), Target::Service { .. }) => Finding::skip(
            CHECK,
            format!("{why} (a Service's name resolves inside the cluster only)"),
            "run doctor in the cluster to check the certificate (the chart's doctor Job does); the dry-run write below still proves the path",
        ),
        (Presented::Unreachable(why), Target::Url { .. }) => Finding::fail(
            CHECK,
            why,
            "the API server dials this URL: check that the webhook listens there and that this machine reaches it",
        ),
    }
}

/// Whether the Service of `webhook` has ready endpoints (a `url` webhook has no Service).
pub(crate) async fn endpoints(client: &kube::Client, webhook: &MutatingWebhook, timeout: Duration) -> Finding {
    const CHECK: &str = "endpoints";
    let Ok(Target::Service { namespace, name, .. }) = Target::of(webhook) else {
        return Finding::skip(CHECK, format!("webhook {} is called by URL, not through a Service", webhook.name), "");
    };
    let services = Api::<Service>::namespaced(client.clone(), &namespace);
    match bounded(|| format!("get Service {namespace}/{name}"), timeout, services.get_opt(&name)).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            return Finding::fail(
                CHECK,
                format!("Service {namespace}/{name} of webhook {} not found", webhook.name),
                "install the chart again, or fix clientConfig.service",
            );
        }
        Err(e) => return unreadable(CHECK, e),
    }
    let slices = Api::<EndpointSlice>::namespaced(client.clone(), &namespace);
    let params = ListParams::default().labels(&format!("kubernetes.io/service-name={name}")).limit(MAX_SLICES);
    let what = || format!("list EndpointSlices of {namespace}/{name}");
    let listed = match bounded(what, timeout, slices.list(&params)).await {
        Ok(listed) => listed,
        Err(e) => return unreadable(CHECK, e),
    };
    let ready = listed
        .items
        .iter()
        .flat_map(|s| &s.endpoints)
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
        .count();
    if ready == 0 {
        return Finding::fail(
            CHECK,
            format!("Service {namespace}/{name} has no ready endpoints: the API server has no Pod to call"),
            format!(
                "`kubectl -n {namespace} get deploy,pods`: is the guard scaled to 0, or are its Pods not Ready? Does the Service's selector match them?"
            ),
        );
    }
    Finding::pass(CHECK, format!("Service {namespace}/{name} has {ready} ready endpoint(s)"))
}

fn unreadable(check: &'static str, e: RequestError) -> Finding {
    Finding::fail(check, e.to_string(), "give doctor an identity that may read it (the chart's doctor Role)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_their_host_and_port() {
        let url = |host: &str, port| Some(Target::Url { host: host.into(), port });
        assert_eq!(host_port("https://127.0.0.1:8443/mutate"), url("127.0.0.1", 8443));
        assert_eq!(host_port("https://guard.example.com/mutate"), url("guard.example.com", 443));
        assert_eq!(host_port("https://[::1]:9443/mutate?x"), url("::1", 9443));
        for bad in ["http://a/mutate", "https:///x", "https://a:port/x", "https://a:70000/"] {
            assert_eq!(host_port(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_rule_covers_a_kinds_status_updates_or_wildcards() {
        let rule = |groups: &[&str], resources: &[&str], ops: &[&str]| RuleWithOperations {
            api_groups: Some(groups.iter().map(|s| (*s).to_owned()).collect()),
            api_versions: Some(vec!["v1".into()]),
            operations: Some(ops.iter().map(|s| (*s).to_owned()).collect()),
            resources: Some(resources.iter().map(|s| (*s).to_owned()).collect()),
            scope: None,
        };
        assert!(covers(&rule(&["networking.k8s.io"], &["ingresses/status"], &["UPDATE"]), Kind::Ingress));
        assert!(covers(&rule(&["*"], &["*/*"], &["*"]), Kind::Ingress));
        assert!(covers(&rule(&["gateway.networking.k8s.io"], &["gateways/status"], &["UPDATE"]), Kind::Gateway));
        assert!(!covers(&rule(&["networking.k8s.io"], &["ingresses"], &["UPDATE"]), Kind::Ingress));
        assert!(!covers(&rule(&["networking.k8s.io"], &["ingresses/status"], &["CREATE"]), Kind::Ingress));
        assert!(!covers(&rule(&["networking.k8s.io"], &["ingresses/status"], &["UPDATE"]), Kind::Gateway));
    }
}
