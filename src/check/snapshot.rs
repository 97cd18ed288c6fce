//! What check and explain know of the sources: a snapshot of those the policies name (publish
//! Services and Gateways, cluster facts), served
//! to the decision through [`Sources`] (each stored Ingress is read by [`crate::kind::ingress`]).

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Service;

use crate::{
    address::Address,
    policy::{GatewayRef, PodsRef, ServiceRef},
    sources::gateway::GatewayError,
    sources::nodeip::{self, NodeAddrs, PodFacts},
    sources::service::{self, ServiceError},
    sources::{Sources, Unresolved},
};

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

/// The publish Services of the policies, and the cluster facts their matching and node-IP
/// sources need, read once: the [`Sources`] `check` and `explain` decide with, in place of the
/// webhook's watch-fed caches.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot(pub BTreeMap<ServiceRef, Fetched>, pub Facts);

/// What is kept of the IngressClasses, Namespaces, controller Pods and Nodes read for the
/// policies (only those some policy needs are read).
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    /// name -> (controller, is the default class)
    pub classes: BTreeMap<String, (String, bool)>,
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// (namespace, selector) of each node-IP source -> its Pods
    pub pods: BTreeMap<(String, String), Vec<PodFacts>>,
    pub nodes: HashMap<String, NodeAddrs>,
    /// Each publish Gateway.
    pub gateways: BTreeMap<GatewayRef, GatewayFetched>,
    /// GatewayClass name -> controllerName, for `explain gateway/...` under gatewayControllers.
    pub gateway_classes: BTreeMap<String, Option<String>>,
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

    fn gateway_class_controller(&self, class: &str) -> Option<String> {
        self.1.gateway_classes.get(class).cloned().flatten()
    }

    fn pods(&self, pods: &PodsRef) -> Result<Vec<Address>, Unresolved> {
        let list = self.1.pods.get(&pods.watch_key()).ok_or_else(|| Unresolved::PodsNotSynced(pods.to_string()))?;
        nodeip::addresses(list, &self.1.nodes, pods.internal_ip).map_err(|e| Unresolved::Pods(pods.to_string(), e))
    }

    fn ingress_class_controller(&self, class: &str) -> Option<String> {
        self.1.classes.get(class).map(|(controller, _)| controller.clone())
    }

    fn default_ingress_classes(&self) -> Vec<String> {
        self.1.classes.iter().filter(|(_, (_, default))| *default).map(|(name, _)| name.clone()).collect()
    }

    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.1.namespaces.get(namespace).cloned()
    }
}
