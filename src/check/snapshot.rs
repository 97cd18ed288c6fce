//! What check and explain know: each stored Ingress as the decision reads it, and a
//! snapshot of the sources it names, served to the decision through [`Sources`].

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::{core::v1::Service, networking::v1::Ingress};

use super::CLASS_ANNOTATION;
use crate::{
    address::{Address, PortStatus},
    decision::StatusWrite,
    policy::{PodsRef, ServiceRef},
    review::StatusShape,
    sources::nodeip::{self, NodeAddrs, PodFacts},
    sources::service::{self, ServiceError},
    sources::{Sources, Unresolved},
};

/// Where an Ingress's class was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClassFrom {
    Field,
    Annotation,
    Neither,
}

/// A stored Ingress as the decision sees it, plus what `explain` shows about how it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    pub write: StatusWrite,
    pub class_from: ClassFrom,
    pub object_uid: Option<String>,
    pub shape: StatusShape,
}

impl Stored {
    /// Reads an Ingress as the webhook reads a status write of it: the class from
    /// `spec.ingressClassName`, else the legacy annotation.
    pub(crate) fn of(ingress: &Ingress) -> Stored {
        let field = ingress.spec.as_ref().and_then(|s| s.ingress_class_name.clone());
        let annotation = ingress.metadata.annotations.as_ref().and_then(|a| a.get(CLASS_ANNOTATION)).cloned();
        let class_from = match (&field, &annotation) {
            (Some(_), _) => ClassFrom::Field,
            (None, Some(_)) => ClassFrom::Annotation,
            (None, None) => ClassFrom::Neither,
        };
        let lb = ingress.status.as_ref().map(|s| s.load_balancer.as_ref());
        let shape = match lb {
            None => StatusShape::NoStatus,
            Some(None) => StatusShape::NoLoadBalancer,
            Some(Some(lb)) if lb.ingress.is_none() => StatusShape::NoIngressList,
            Some(Some(_)) => StatusShape::IngressList,
        };
        let addresses = lb
            .flatten()
            .and_then(|lb| lb.ingress.as_ref())
            .map(|entries| {
                entries
                    .iter()
                    .map(|e| Address {
                        ip: e.ip.clone(),
                        hostname: e.hostname.clone(),
                        ports: e
                            .ports
                            .iter()
                            .flatten()
                            .map(|p| PortStatus { port: p.port, protocol: p.protocol.clone(), error: p.error.clone() })
                            .collect(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Stored {
            write: StatusWrite {
                namespace: ingress.metadata.namespace.clone().unwrap_or_default(),
                name: ingress.metadata.name.clone().unwrap_or_default(),
                class: field.or(annotation),
                addresses,
            },
            class_from,
            object_uid: ingress.metadata.uid.clone(),
            shape,
        }
    }
}

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
