//! The [`Sources`] of the one-shot commands (`check`, `explain`, `cutover`): the publish
//! sources and cluster facts the policies need, read once ([`read`]: paged, each request within
//! the deadline), in place of `serve`'s watch-fed caches.

use std::{
    collections::{BTreeMap, HashMap},
    time::Duration,
};

use k8s_openapi::api::core::v1::Service;
use kube::{Api, Client, api::ListParams};

use crate::{
    address::Address,
    client::{RequestError, bounded, list_all, list_served},
    kind::{Classes, Governed, Kind, with_kind},
    policy::{GatewayRef, PodsRef, Policies, ServiceRef},
    sources::gateway::GatewayError,
    sources::nodeip::{self, NodeAddrs, PodFacts},
    sources::service::{self, ServiceError},
    sources::{Sources, Unresolved},
};

/// Objects per list request: bounds what one page holds in memory.
const PAGE_SIZE: u32 = 500;

/// A publish Service as one GET found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fetched {
    Missing,
    /// Its addresses (ports kept, as the watch cache holds them) and the rule that gave them.
    Found {
        addresses: Result<Vec<Address>, ServiceError>,
        rule: String,
    },
}

impl Fetched {
    pub(crate) fn of(svc: Option<&Service>) -> Fetched {
        match svc {
            None => Fetched::Missing,
            Some(svc) => Fetched::Found { addresses: service::addresses(svc, true), rule: service::rule(svc) },
        }
    }
}

/// A publish Gateway as one read found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GatewayFetched {
    /// The API server serves no Gateways (the Gateway API CRDs are not installed).
    ApiAbsent,
    Missing,
    Found(Result<Vec<Address>, GatewayError>),
}

/// The publish Services of the policies, and the cluster facts they need, read once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot(pub BTreeMap<ServiceRef, Fetched>, pub Facts);

/// The cluster facts read for the policies (only those some policy needs).
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    /// By [`Kind::index`].
    pub classes: [Classes; Kind::ALL.len()],
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// (namespace, selector) of each node-IP source -> its Pods
    pub pods: BTreeMap<(String, String), Vec<PodFacts>>,
    pub nodes: HashMap<String, NodeAddrs>,
    pub gateways: BTreeMap<GatewayRef, GatewayFetched>,
}

impl Sources for Snapshot {
    fn service(&self, svc: &ServiceRef) -> Result<Vec<Address>, Unresolved> {
        match self.0.get(svc) {
            Some(Fetched::Found { addresses: Ok(list), .. }) => Ok(list.clone()),
            Some(Fetched::Found { addresses: Err(e), .. }) => Err(Unresolved::Service(svc.clone(), e.clone())),
            Some(Fetched::Missing) => Err(Unresolved::Missing(svc.clone())),
            None => Err(Unresolved::NotSynced(svc.clone())),
        }
    }

    fn gateway(&self, gw: &GatewayRef) -> Result<Vec<Address>, Unresolved> {
        match self.1.gateways.get(gw) {
            Some(GatewayFetched::Found(Ok(list))) => Ok(list.clone()),
            Some(GatewayFetched::Found(Err(e))) => Err(Unresolved::Gateway(gw.clone(), Box::new(e.clone()))),
            Some(GatewayFetched::Missing) => Err(Unresolved::GatewayMissing(gw.clone())),
            Some(GatewayFetched::ApiAbsent) => Err(Unresolved::GatewayApiAbsent(gw.clone())),
            None => Err(Unresolved::GatewayNotSynced(gw.clone())),
        }
    }

    fn classes(&self, kind: Kind) -> Option<Classes> {
        Some(self.1.classes[kind.index()].clone())
    }

    fn pods(&self, pods: &PodsRef) -> Result<Vec<Address>, Unresolved> {
        let list = self.1.pods.get(&pods.watch_key()).ok_or_else(|| Unresolved::PodsNotSynced(pods.to_string()))?;
        nodeip::addresses(list, &self.1.nodes, pods.internal_ip).map_err(|e| Unresolved::Pods(pods.to_string(), e))
    }

    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.1.namespaces.get(namespace).cloned()
    }
}

/// Reads every publish source the policies name, and the cluster facts some policy needs.
pub(crate) async fn read(client: &Client, policies: &Policies, timeout: Duration) -> Result<Snapshot, RequestError> {
    use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
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
    for kind in Kind::ALL.into_iter().filter(|&kind| policies.need_classes(kind)) {
        // Classes a cluster does not serve (no CRDs) match nothing, as in `serve`.
        let classes = with_kind!(kind, K => {
            let api: Api<<K as Governed>::ClassObject> = Api::all(client.clone());
            let keep = |class: <K as Governed>::ClassObject| (class.name_any(), K::class(&class));
            list_served(&api, pages.clone(), kind.info().classes, timeout, keep).await?
        });
        facts.classes[kind.index()].extend(classes.into_iter().flatten());
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
async fn gateway(client: &Client, gw: &GatewayRef, timeout: Duration) -> Result<GatewayFetched, RequestError> {
    let api: Api<crate::kind::gateway::LeanGateway> = Api::namespaced(client.clone(), &gw.namespace);
    let params = ListParams::default().fields(&format!("metadata.name={}", gw.name)).limit(1);
    match bounded(|| format!("get publish Gateway {gw}"), timeout, api.list(&params)).await {
        Ok(list) => {
            let found = list.items.first().map(|g| GatewayFetched::Found(super::gateway::addresses(g)));
            Ok(found.unwrap_or(GatewayFetched::Missing))
        }
        Err(e) if e.code() == Some(404) => Ok(GatewayFetched::ApiAbsent),
        Err(e) => Err(e),
    }
}
