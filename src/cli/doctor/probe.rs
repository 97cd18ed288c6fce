//! doctor's own probe Ingress for the dry-run write without `--probe`: of a governed class, named
//! after the guard's Lease (so the chart can grant on that one name), and deleted on every path,
//! a signal included ([`Leftover`]).

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::api::{
    admissionregistration::v1::{MutatingWebhook, MutatingWebhookConfiguration},
    core::v1::Namespace,
    networking::v1::{Ingress, IngressClass},
};
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams, Preconditions},
};
use serde_json::json;

use super::report::Finding;
use crate::{
    client::bounded,
    kind::Kind,
    policy::{Mode, Policies, Subject},
};

const CHECK: &str = "dry-run-write";
/// The label that marks doctor's probe, so a leftover of a killed run is known as doctor's.
pub(crate) const PROBE_LABEL: (&str, &str) = ("app.kubernetes.io/managed-by", "ingress-status-guard-doctor");
/// A host under `.invalid` (RFC 2606): no controller that routes it can send it real traffic.
const PROBE_HOST: &str = "probe.doctor.ingress-status-guard.invalid";
/// IngressClasses read to find one of a governed controller, at most (one page).
const MAX_CLASSES: u32 = 200;

/// The probe doctor created and has not deleted yet: `(namespace, name, uid)`.
pub(crate) type Leftover = Arc<Mutex<Option<(String, String, String)>>>;

/// The name of the probe of the guard whose Lease is `lease`.
pub(crate) fn name(lease: &str) -> Result<String, String> {
    let name = format!("{lease}-doctor-probe");
    if crate::names::is_dns1123_subdomain(&name) {
        Ok(name)
    } else {
        Err(format!("the probe's name {name:?} (the Lease's name and -doctor-probe) is not a valid object name"))
    }
}

/// Where configuration `configuration`'s `webhooks` send reviews; `None` when unreadable.
pub(crate) fn reaches(configuration: &str, webhooks: &[MutatingWebhook]) -> Option<crate::scope::Reaches> {
    let config = MutatingWebhookConfiguration {
        metadata: kube::api::ObjectMeta { name: Some(configuration.to_owned()), ..Default::default() },
        webhooks: Some(webhooks.to_vec()),
    };
    crate::scope::reaches_of(&config).ok()
}

/// A class the policies govern in `namespace` (labelled `labels`; `classes` maps each class
/// to its controller), and the mode of the first policy that matches, as the webhook picks.
fn governed(
    policies: &Policies,
    namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
    classes: &BTreeMap<String, Option<String>>,
) -> Option<(Option<String>, Mode)> {
    let mut candidates: Vec<Option<String>> = Vec::new();
    for policy in policies.of(Kind::Ingress) {
        let scope = &policy.scope;
        candidates.extend(scope.classes.iter().cloned().map(Some));
        let by_controller = classes.iter().filter(|(_, c)| c.as_ref().is_some_and(|c| scope.controllers.contains(c)));
        candidates.extend(by_controller.map(|(name, _)| Some(name.clone())));
        if scope.without_class || (scope.classes.is_empty() && scope.controllers.is_empty()) {
            candidates.push(None);
        }
    }
    candidates.into_iter().find_map(|class| {
        let subject = Subject {
            namespace,
            class: class.as_deref(),
            class_controller: class.as_ref().and_then(|c| classes.get(c).cloned().flatten()),
            default_classes: Vec::new(),
            namespace_labels: labels.cloned(),
        };
        let policy = policies.of(Kind::Ingress).find(|p| p.matches(&subject).is_some())?;
        Some((class, policy.mode))
    })
}

/// Creates the probe `name` in `namespace`; the Ingress as stored and the governing mode.
pub(crate) async fn create(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    policies: &Policies,
    reach: Option<&crate::scope::Reach>,
    timeout: Duration,
    leftover: &Leftover,
) -> Result<(Ingress, Mode), Finding> {
    let skip = |found: String, todo: &str| Err(Finding::skip(CHECK, found, todo));
    let namespaces = Api::<Namespace>::all(client.clone());
    // Unreadable labels: then the policies' and the webhook's selectors cannot be judged here.
    let labels = match bounded(|| format!("get Namespace {namespace}"), timeout, namespaces.get_opt(namespace)).await {
        Ok(Some(ns)) => Some(ns.metadata.labels.unwrap_or_default()),
        Ok(None) => {
            return skip(
                format!("the probe's namespace {namespace} (--probe-namespace) does not exist"),
                "pass --probe-namespace with an existing namespace the webhook reviews, or --probe NAMESPACE/NAME",
            );
        }
        Err(_) => None,
    };
    if let (Some(reach), Some(labels)) = (reach, labels.as_ref())
        && !reach.matches(labels)
    {
        return skip(
            format!(
                "the probe's namespace {namespace} is outside the webhook's namespaceSelector: the API server would not call the guard there, so a write there proves nothing"
            ),
            "pass --probe-namespace with a namespace the webhook selects (chart: doctor.probeNamespace), or --probe NAMESPACE/NAME",
        );
    }
    let (api, params) = (Api::<IngressClass>::all(client.clone()), ListParams::default().limit(MAX_CLASSES));
    // Unreadable: classes named by the policies still do.
    let listed = bounded(|| "list IngressClasses".into(), timeout, api.list(&params)).await.map(|l| l.items);
    let classes: BTreeMap<String, Option<String>> = (listed.unwrap_or_default().into_iter())
        .filter_map(|c| Some((c.metadata.name?, c.spec.and_then(|s| s.controller))))
        .collect();
    let Some((class, mode)) = governed(policies, namespace, labels.as_ref(), &classes) else {
        return skip(
            format!(
                "no policy governs an Ingress in {namespace} by any class doctor can name (their namespaceSelectors, or controllerClasses with no IngressClass)"
            ),
            "pass --probe-namespace with a namespace a policy governs, or --probe NAMESPACE/NAME",
        );
    };
    let ingress: Ingress = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {PROBE_LABEL.0: PROBE_LABEL.1},
            "annotations": {"ingress-status-guard/doctor": "the probe of `ingress-status-guard doctor`: it deletes it when it ends"},
        },
        "spec": {
            "ingressClassName": class,
            "rules": [{"host": PROBE_HOST, "http": {"paths": [{"path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": name, "port": {"number": 80}}}}]}}],
        },
    }))
    .map_err(|e| Finding::fail(CHECK, e.to_string(), ""))?;
    let api = Api::<Ingress>::namespaced(client.clone(), namespace);
    let params = PostParams { field_manager: Some(super::write::FIELD_MANAGER.into()), ..PostParams::default() };
    let create =
        || bounded(|| format!("create the probe Ingress {namespace}/{name}"), timeout, api.create(&params, &ingress));
    let created = match create().await {
        Ok(created) => created,
        // A leftover of a run killed before it could delete it: doctor's (its label), replaced.
        Err(e) if e.code() == Some(409) => {
            let old = bounded(|| format!("get Ingress {namespace}/{name}"), timeout, api.get_opt(name)).await;
            let ours = old.ok().flatten().filter(|i| {
                i.metadata.labels.as_ref().and_then(|l| l.get(PROBE_LABEL.0)).map(String::as_str) == Some(PROBE_LABEL.1)
            });
            let Some(old) = ours else {
                return Err(Finding::fail(
                    CHECK,
                    format!("an Ingress {namespace}/{name} exists and is not doctor's probe"),
                    "rename it, or pass --probe NAMESPACE/NAME to write to an Ingress of yours",
                ));
            };
            if let Some(e) = delete(client, namespace, name, old.metadata.uid, timeout).await {
                return Err(Finding::fail(CHECK, e, "delete the leftover probe by hand"));
            }
            create().await.map_err(|e| cannot_create(namespace, &e.to_string()))?
        }
        Err(e) => return Err(cannot_create(namespace, &e.to_string())),
    };
    let uid = created.metadata.uid.clone().unwrap_or_default();
    if let Ok(mut held) = leftover.lock() {
        *held = Some((namespace.to_owned(), name.to_owned(), uid));
    }
    Ok((created, mode))
}

fn cannot_create(namespace: &str, e: &str) -> Finding {
    Finding::fail(
        CHECK,
        format!("cannot create the probe Ingress in {namespace}: {e}"),
        "give doctor create on ingresses in its namespace, and get, delete and patch of ingresses/status on its probe's name (the chart's doctor Role), or pass --probe NAMESPACE/NAME",
    )
}

/// Deletes the probe `namespace/name` of `uid`: gone already is done.
pub(crate) async fn delete(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    uid: Option<String>,
    timeout: Duration,
) -> Option<String> {
    let api = Api::<Ingress>::namespaced(client.clone(), namespace);
    let params =
        DeleteParams { preconditions: Some(Preconditions { uid, resource_version: None }), ..DeleteParams::default() };
    match bounded(|| format!("delete the probe Ingress {namespace}/{name}"), timeout, api.delete(name, &params)).await {
        Ok(_) => None,
        Err(e) if e.code() == Some(404) => None,
        Err(e) => Some(format!("cannot delete the probe Ingress {namespace}/{name}: {e}")),
    }
}

/// Deletes what `leftover` holds, once.
pub(crate) async fn clean(client: &kube::Client, leftover: &Leftover, timeout: Duration) -> Option<String> {
    let held = leftover.lock().ok().and_then(|mut held| held.take());
    let (namespace, name, uid) = held?;
    delete(client, &namespace, &name, Some(uid), timeout).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::parse_file;

    #[test]
    fn the_probe_gets_a_class_the_first_matching_policy_governs() {
        let file = "policies:\n\
            - {name: a, ingressClasses: [a], publishStatusAddress: 192.0.2.1, namespaceSelector: 'team=a'}\n\
            - {name: b, controllerClasses: [example.com/b], publishStatusAddress: 192.0.2.2, mode: deny}\n";
        let policies = parse_file("p.yaml", file).unwrap();
        let team_a = BTreeMap::from([("team".to_owned(), "a".to_owned())]);
        let no_classes = BTreeMap::new();
        assert_eq!(governed(&policies, "x", Some(&team_a), &no_classes), Some((Some("a".into()), Mode::Enforce)));
        // Outside a's selector, and no IngressClass of b's controller: nothing to name.
        assert_eq!(governed(&policies, "x", Some(&BTreeMap::new()), &no_classes), None);
        let classes = BTreeMap::from([("bee".to_owned(), Some("example.com/b".to_owned()))]);
        assert_eq!(governed(&policies, "x", None, &classes), Some((Some("bee".into()), Mode::Deny)));
        assert!(name("g").unwrap() == "g-doctor-probe");
        assert!(name(&"x".repeat(250)).is_err());
    }
}
