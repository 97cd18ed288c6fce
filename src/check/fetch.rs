//! The I/O of `check` and `explain`: one-shot, paged, time-bounded reads of Ingresses, their
//! sources and the cluster facts class and namespace matching need.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::api::{core::v1::Service, networking::v1::Ingress};
use kube::{Api, Client, api::ListParams};

use super::{CheckError, PAGE_SIZE, snapshot::Facts, snapshot::Fetched, snapshot::GatewayFetched, snapshot::Snapshot};
use crate::{
    kind::gateway::{GatewayWrite, LeanGateway, LeanGatewayClass},
    kind::ingress::{self, StatusWrite, Stored},
    policy::Policies,
    sources::nodeip::{NodeAddrs, PodFacts},
};

pub(crate) async fn bounded<T>(
    what: impl Fn() -> String,
    timeout: Duration,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, CheckError> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(CheckError::Api { what: what(), detail: describe(&e) }),
        Err(_) => Err(CheckError::Timeout { what: what(), timeout }),
    }
}

/// A kube error in one line: the API server's own message, or the causes down to the socket
/// ("client error (Connect)" alone does not say that the connection was refused).
pub(crate) fn describe(e: &kube::Error) -> String {
    if let kube::Error::Api(status) = e {
        return format!("{} (HTTP {} {})", status.message, status.code, status.reason);
    }
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    text
}

/// Lists every object of `api` page by page (`params` sets the page size), keeping only what
/// `keep` makes of each, so at most one page of whole objects is held at a time.
pub(crate) async fn list_all<K, T>(
    api: &Api<K>,
    mut params: ListParams,
    what: &str,
    timeout: Duration,
    mut keep: impl FnMut(K) -> T,
) -> Result<Vec<T>, CheckError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let mut kept = Vec::new();
    loop {
        let page = bounded(|| format!("list {what}"), timeout, api.list(&params)).await?;
        kept.extend(page.items.into_iter().map(&mut keep));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(kept),
        }
    }
}

/// Reads every publish Service and Gateway the policies name, once, and the IngressClasses, Namespaces,
/// controller Pods and Nodes that some policy needs.
pub(crate) async fn snapshot(client: &Client, policies: &Policies, timeout: Duration) -> Result<Snapshot, CheckError> {
    use k8s_openapi::api::{
        core::v1::{Namespace, Node, Pod},
        networking::v1::IngressClass,
    };
    use kube::ResourceExt as _;

    let mut fetched = BTreeMap::new();
    for svc in policies.services() {
        let api: Api<Service> = Api::namespaced(client.clone(), &svc.namespace);
        let found = bounded(|| format!("get publish Service {svc}"), timeout, api.get_opt(&svc.name)).await?;
        fetched.insert(svc, Fetched::of(found.as_ref()));
    }
    let mut facts = Facts::default();
    for gw in policies.gateways() {
        facts.gateways.insert(gw.clone(), gateway(client, &gw, timeout).await?);
    }
    let pages = ListParams::default().limit(PAGE_SIZE);
    if policies.need_ingress_classes() {
        let api: Api<IngressClass> = Api::all(client.clone());
        let classes = list_all(&api, pages.clone(), "IngressClasses", timeout, |class| {
            let controller = class.spec.as_ref().and_then(|s| s.controller.clone()).unwrap_or_default();
            let default = ingress::is_default_class(&class);
            (class.name_any(), (controller, default))
        });
        facts.classes.extend(classes.await?);
    }
    if policies.need_namespaces() {
        let api: Api<Namespace> = Api::all(client.clone());
        let namespaces =
            list_all(&api, pages.clone(), "Namespaces", timeout, |ns| (ns.name_any(), ns.labels().clone()));
        facts.namespaces.extend(namespaces.await?);
    }
    let watches = policies.pod_watches();
    for (namespace, selector) in &watches {
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let what = format!("Pods in {namespace} matching {selector}");
        let pods = list_all(&api, pages.clone().labels(selector), &what, timeout, |pod| PodFacts::of(&pod)).await?;
        facts.pods.insert((namespace.clone(), selector.clone()), pods);
    }
    if !watches.is_empty() {
        let api: Api<Node> = Api::all(client.clone());
        // Only addresses are kept; small pages bound what one page of Nodes holds.
        let nodes = list_all(&api, ListParams::default().limit(100), "Nodes", timeout, |node| {
            (node.name_any(), NodeAddrs::of(&node))
        });
        facts.nodes.extend(nodes.await?);
    }
    Ok(Snapshot(fetched, facts))
}

/// Reads one publish Gateway with a one-item list field-selected by its name (what the
/// chart's Role allows): an empty list is a missing Gateway, a 404 an API server that serves no
/// Gateways (the Gateway API CRDs are not installed).
async fn gateway(
    client: &Client,
    gw: &crate::policy::GatewayRef,
    timeout: Duration,
) -> Result<GatewayFetched, CheckError> {
    let api: Api<LeanGateway> = Api::namespaced(client.clone(), &gw.namespace);
    let params = ListParams::default().fields(&format!("metadata.name={}", gw.name)).limit(1);
    let what = || format!("get publish Gateway {gw}");
    match tokio::time::timeout(timeout, api.list(&params)).await {
        Ok(Ok(list)) => Ok(list
            .items
            .into_iter()
            .next()
            .map_or(GatewayFetched::Missing, |g| GatewayFetched::Found(crate::sources::gateway::addresses(&g)))),
        Ok(Err(kube::Error::Api(status))) if status.code == 404 => Ok(GatewayFetched::ApiAbsent),
        Ok(Err(e)) => Err(CheckError::Api { what: what(), detail: describe(&e) }),
        Err(_) => Err(CheckError::Timeout { what: what(), timeout }),
    }
}

/// Lists Ingresses page by page, keeping only what the decision reads.
pub(super) async fn stored_ingresses(
    client: &Client,
    namespace: Option<&str>,
    timeout: Duration,
) -> Result<Vec<StatusWrite>, CheckError> {
    let api: Api<Ingress> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    list_all(&api, ListParams::default().limit(PAGE_SIZE), "Ingresses", timeout, |ingress| Stored::of(&ingress).write)
        .await
}

/// As [`list_all`], but `None` when the API server serves no such resource (a 404: its CRD is
/// not installed), which for the Gateway API is a state to report, not an error.
async fn list_served<K, T>(
    api: &Api<K>,
    mut params: ListParams,
    what: &str,
    timeout: Duration,
    mut keep: impl FnMut(K) -> T,
) -> Result<Option<Vec<T>>, CheckError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let mut kept = Vec::new();
    loop {
        let page = match tokio::time::timeout(timeout, api.list(&params)).await {
            Ok(Ok(page)) => page,
            Ok(Err(kube::Error::Api(status))) if status.code == 404 => return Ok(None),
            Ok(Err(e)) => return Err(CheckError::Api { what: format!("list {what}"), detail: describe(&e) }),
            Err(_) => return Err(CheckError::Timeout { what: format!("list {what}"), timeout }),
        };
        kept.extend(page.items.into_iter().map(&mut keep));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(Some(kept)),
        }
    }
}

/// Lists Gateways page by page, keeping what the Gateway decision reads (each already bounded
/// by the lean reader); `None` when the API server serves no Gateways.
pub(super) async fn stored_gateways(
    client: &Client,
    namespace: Option<&str>,
    timeout: Duration,
) -> Result<Option<Vec<GatewayWrite>>, CheckError> {
    let api: Api<LeanGateway> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    list_served(&api, ListParams::default().limit(PAGE_SIZE), "Gateways", timeout, super::explain_gateway::write_of)
        .await
}

/// Every GatewayClass's controller, for Gateway policies that match by `gatewayControllers`
/// (none when the API server serves no GatewayClasses).
pub(super) async fn gateway_classes(
    client: &Client,
    timeout: Duration,
) -> Result<Vec<(String, Option<String>)>, CheckError> {
    use kube::ResourceExt as _;
    let api: Api<LeanGatewayClass> = Api::all(client.clone());
    let classes = list_served(&api, ListParams::default().limit(PAGE_SIZE), "GatewayClasses", timeout, |class| {
        (class.name_any(), class.controller)
    });
    Ok(classes.await?.unwrap_or_default())
}
