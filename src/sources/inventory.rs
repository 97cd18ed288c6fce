//! Watch-fed caches of what class matching, namespace matching and the node-IP source need:
//! IngressClasses (controller, default flag), Namespace labels, controller Pods (one watch per
//! node-IP source: namespace plus label selector) and Node addresses. Each watch starts only
//! when a policy needs it, and each cache keeps only the few fields it needs.

use std::{
    collections::{BTreeMap, HashMap},
    fmt::Debug,
    sync::{Arc, RwLock},
};

use k8s_openapi::api::{
    core::v1::{Namespace, Node, Pod},
    networking::v1::IngressClass,
};
use kube::{Api, Client, Resource, ResourceExt, runtime::watcher};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::{
    address::Address,
    kind::ingress,
    policy::{PodsRef, Policies},
    sources::{
        follow::{self, Change, Projection},
        nodeip::{self, NodeAddrs, NodeIpError, PodFacts},
    },
};

/// Nodes per list page of the Node watch.
const NODE_PAGE_SIZE: u32 = 100;

/// What is kept of one IngressClass.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ClassFacts {
    controller: String,
    default: bool,
}

/// One watched collection, keyed by object name: unsynced until the first list completes.
#[derive(Debug)]
struct Store<V>(RwLock<Projection<String, V>>);

impl<V> Default for Store<V> {
    fn default() -> Self {
        Store(RwLock::default())
    }
}

impl<V: PartialEq> Store<V> {
    fn read<T>(&self, f: impl FnOnce(Option<&HashMap<String, V>>) -> T) -> T {
        f(self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).view())
    }

    fn synced(&self) -> bool {
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).synced()
    }

    /// Feeds the store from a watch until it ends (never, short of shutdown: errors are
    /// retried with backoff while the last known state stays in place).
    async fn follow<K>(
        &self,
        api: Api<K>,
        config: watcher::Config,
        what: &str,
        project: impl Fn(&K) -> V,
        changed: &watch::Sender<u64>,
    ) where
        K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
    {
        let project = |obj: K| Some((obj.name_any(), project(&obj)));
        follow::follow(api, config, project, &self.0, |change| {
            let news = match change {
                Ok(Change::Listing) => false,
                Ok(Change::Listed { .. }) => {
                    let objects = self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).len();
                    tracing::info!(watch = what, objects, "watch synced");
                    true
                }
                // Heartbeats and unrelated fields change objects all the time; only a change
                // of what is kept is news.
                Ok(Change::Applied { key, old }) => {
                    let held = self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner);
                    old.as_ref() != held.get(&key)
                }
                Ok(Change::Deleted { .. }) => true,
                Err(e) => {
                    tracing::warn!(watch = what, error = %e, "watch failed; retrying");
                    false
                }
            };
            if news {
                changed.send_modify(|g| *g += 1);
            }
        })
        .await;
    }
}

/// Every cache a policy set needs; the others stay empty and count as synced.
#[derive(Debug)]
pub(crate) struct Inventory {
    classes: Option<Store<ClassFacts>>,
    namespaces: Option<Store<BTreeMap<String, String>>>,
    /// One store per (namespace, selector) of a node-IP source.
    pods: HashMap<(String, String), Store<PodFacts>>,
    nodes: Option<Store<NodeAddrs>>,
    /// Bumped whenever what is kept changes, so a consumer (the reconciler) judges again.
    changed: Arc<watch::Sender<u64>>,
}

impl Inventory {
    pub(crate) fn new(policies: &Policies, changed: Arc<watch::Sender<u64>>) -> Arc<Self> {
        let pods: HashMap<_, _> = policies.pod_watches().into_iter().map(|key| (key, Store::default())).collect();
        let nodes = (!pods.is_empty()).then(Store::default);
        Arc::new(Inventory {
            classes: policies.need_ingress_classes().then(Store::default),
            namespaces: policies.need_namespaces().then(Store::default),
            pods,
            nodes,
            changed,
        })
    }

    /// Whether this inventory holds exactly what `policies` need.
    pub(crate) fn serves(&self, policies: &Policies) -> bool {
        let mut mine: Vec<_> = self.pods.keys().cloned().collect();
        mine.sort();
        self.classes.is_some() == policies.need_ingress_classes()
            && self.namespaces.is_some() == policies.need_namespaces()
            && mine == policies.pod_watches()
    }

    pub(crate) fn synced(&self) -> bool {
        self.classes.as_ref().is_none_or(Store::synced)
            && self.namespaces.as_ref().is_none_or(Store::synced)
            && self.nodes.as_ref().is_none_or(Store::synced)
            && self.pods.values().all(Store::synced)
    }

    /// Runs every needed watch until the task is aborted.
    pub(crate) async fn run(self: Arc<Self>, client: Client) {
        let mut watches: Vec<futures::future::BoxFuture<'_, ()>> = Vec::new();
        if let Some(store) = &self.classes {
            let api: Api<IngressClass> = Api::all(client.clone());
            watches.push(Box::pin(store.follow(
                api,
                watcher::Config::default(),
                "IngressClasses",
                |c: &IngressClass| ClassFacts {
                    controller: c.spec.as_ref().and_then(|s| s.controller.clone()).unwrap_or_default(),
                    default: ingress::is_default_class(c),
                },
                &self.changed,
            )));
        }
        if let Some(store) = &self.namespaces {
            let api: Api<Namespace> = Api::all(client.clone());
            watches.push(Box::pin(store.follow(
                api,
                watcher::Config::default(),
                "Namespaces",
                |n: &Namespace| n.labels().clone(),
                &self.changed,
            )));
        }
        if let Some(store) = &self.nodes {
            let api: Api<Node> = Api::all(client.clone());
            // Node objects are large (images, conditions) and only their addresses are kept:
            // small list pages bound the transient peak of the initial list.
            let config = watcher::Config::default().page_size(NODE_PAGE_SIZE);
            watches.push(Box::pin(store.follow(api, config, "Nodes", NodeAddrs::of, &self.changed)));
        }
        for ((namespace, selector), store) in &self.pods {
            let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
            let config = watcher::Config::default().labels(selector);
            watches.push(Box::pin(store.follow(api, config, "Pods", PodFacts::of, &self.changed)));
        }
        if watches.is_empty() {
            return futures::future::pending().await;
        }
        futures::future::join_all(watches).await;
    }

    /// The node-IP source's addresses; `None` until its Pod and Node watches have synced.
    pub(crate) fn pods(&self, pods: &PodsRef) -> Option<Result<Vec<Address>, NodeIpError>> {
        let store = self.pods.get(&pods.watch_key())?;
        let nodes = self.nodes.as_ref()?;
        store.read(|facts| nodes.read(|nodes| Some(nodeip::addresses(facts?.values(), nodes?, pods.internal_ip))))
    }

    pub(crate) fn ingress_class_controller(&self, class: &str) -> Option<String> {
        self.classes.as_ref()?.read(|m| m?.get(class).map(|c| c.controller.clone()))
    }

    pub(crate) fn default_ingress_classes(&self) -> Vec<String> {
        let Some(store) = &self.classes else { return Vec::new() };
        store.read(|m| {
            let mut names: Vec<String> =
                m.into_iter().flatten().filter(|(_, c)| c.default).map(|(n, _)| n.clone()).collect();
            names.sort();
            names
        })
    }

    /// Every IngressClass as `(name, controller, default)`, sorted by name: empty when no
    /// policy needs them (nothing is watched), `None` until their watch has synced.
    pub(crate) fn ingress_classes(&self) -> Option<Vec<(String, String, bool)>> {
        let Some(store) = &self.classes else { return Some(Vec::new()) };
        store.read(|m| {
            let mut all: Vec<_> = m?.iter().map(|(n, c)| (n.clone(), c.controller.clone(), c.default)).collect();
            all.sort();
            Some(all)
        })
    }

    pub(crate) fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.namespaces.as_ref()?.read(|m| m?.get(namespace).cloned())
    }
}
