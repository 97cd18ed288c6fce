//! Watch-fed caches of what class matching, namespace matching and the node-IP source need:
//! each kind's classes, Namespace labels, controller Pods and Node addresses, each watched only
//! when a policy needs it. Without the Gateway API CRDs the GatewayClasses are empty but read
//! (readiness does not wait for CRDs that may never come), and retried [`RETRY_CAP`] apart.

use std::{
    collections::{BTreeMap, HashMap},
    fmt::Debug,
    sync::{
        Arc, RwLock,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::{Api, Client, Resource, ResourceExt, runtime::watcher};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::{
    address::Address,
    kind::{Class, Classes, Governed, Kind, with_kind},
    metrics::objects::{WATCHES, WatchErrors},
    policy::{PodsRef, Policies},
    sources::{
        follow::{self, Change, Projection, is_api_absent},
        gateway::RETRY_CAP,
        initialized::{Handle, Initialize},
        nodeip::{self, NodeAddrs, NodeIpError, PodFacts},
    },
};

/// Nodes per list page of the Node watch.
const NODE_PAGE_SIZE: u32 = 100;

/// One watched collection, keyed by object name: unsynced until the first list completes.
#[derive(Debug)]
struct Store<V> {
    held: RwLock<Projection<String, V>>,
    /// The last watch attempt found the kind not served (no CRDs): read as empty.
    absent: AtomicBool,
    unread: std::sync::Mutex<Option<Handle>>,
}

/// How one collection is watched.
struct Watch {
    what: &'static str,
    /// For a kind that may not be served (a CRD): the retry cap, and the warning while absent.
    absent: Option<(Duration, &'static str)>,
    /// The `watch_errors_total` label its failures count under, if counted.
    metric: Option<&'static str>,
}

impl Watch {
    const fn named(what: &'static str) -> Self {
        Watch { what, absent: None, metric: None }
    }
}

impl<V: PartialEq> Store<V> {
    fn new(init: &Initialize) -> Self {
        Store {
            held: RwLock::default(),
            absent: AtomicBool::new(false),
            unread: std::sync::Mutex::new(Some(init.handle())),
        }
    }

    fn read_once(&self) {
        self.unread.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
    }

    fn read<T>(&self, f: impl FnOnce(Option<&HashMap<String, V>>) -> T) -> T {
        if self.absent.load(Ordering::Relaxed) {
            return f(Some(&HashMap::new()));
        }
        f(self.held.read().unwrap_or_else(std::sync::PoisonError::into_inner).view())
    }

    /// Feeds the store from a watch until the task is aborted.
    async fn follow<K>(
        &self,
        api: Api<K>,
        config: watcher::Config,
        watch: Watch,
        project: impl Fn(&K) -> V,
        changed: &watch::Sender<u64>,
        errors: Option<&WatchErrors>,
    ) where
        K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
    {
        let Watch { what, absent, metric } = watch;
        let project = |obj: K| Some((obj.name_any(), project(&obj)));
        follow::follow(api, config, absent.map(|(cap, _)| cap), project, &self.held, |change| {
            let news = match change {
                Ok(Change::Listing) => false,
                Ok(Change::Listed { .. }) => {
                    self.absent.store(false, Ordering::Relaxed);
                    let objects = self.held.read().unwrap_or_else(std::sync::PoisonError::into_inner).len();
                    tracing::info!(watch = what, objects, "watch synced");
                    self.read_once();
                    true
                }
                // Heartbeats and unrelated fields change objects all the time; only a change
                // of what is kept is news.
                Ok(Change::Applied { key, old }) => {
                    let held = self.held.read().unwrap_or_else(std::sync::PoisonError::into_inner);
                    old.as_ref() != held.get(&key)
                }
                Ok(Change::Deleted { .. }) => true,
                Err(e) if absent.is_some() && is_api_absent(&e) => {
                    self.read_once();
                    let news = !self.absent.swap(true, Ordering::Relaxed);
                    if let Some((retry_every, warning)) = absent.filter(|_| news) {
                        tracing::warn!(retry_every = ?retry_every, "{warning}");
                    }
                    news
                }
                Err(e) => {
                    if let (Some(errors), Some(metric)) = (errors, metric) {
                        errors.inc(metric);
                    }
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
    /// By [`Kind::index`], when a policy of the kind matches by class.
    classes: [Option<Store<Class>>; Kind::ALL.len()],
    namespaces: Option<Store<BTreeMap<String, String>>>,
    /// One store per (namespace, selector) of a node-IP source.
    pods: HashMap<(String, String), Store<PodFacts>>,
    nodes: Option<Store<NodeAddrs>>,
    /// Bumped whenever what is kept changes.
    changed: Arc<watch::Sender<u64>>,
}

impl Inventory {
    /// The caches `policies` need, each holding a handle of `init` until its watch has read it.
    pub(crate) fn new(policies: &Policies, changed: Arc<watch::Sender<u64>>, init: &Initialize) -> Arc<Self> {
        let pods: HashMap<_, _> = policies.pod_watches().into_iter().map(|key| (key, Store::new(init))).collect();
        let nodes = (!pods.is_empty()).then(|| Store::new(init));
        Arc::new(Inventory {
            classes: Kind::ALL.map(|kind| policies.need_classes(kind).then(|| Store::new(init))),
            namespaces: policies.need_namespaces().then(|| Store::new(init)),
            pods,
            nodes,
            changed,
        })
    }

    /// Whether this inventory holds exactly what `policies` need.
    pub(crate) fn serves(&self, policies: &Policies) -> bool {
        let mut mine: Vec<_> = self.pods.keys().cloned().collect();
        mine.sort();
        Kind::ALL.iter().all(|&kind| self.classes[kind.index()].is_some() == policies.need_classes(kind))
            && self.namespaces.is_some() == policies.need_namespaces()
            && mine == policies.pod_watches()
    }

    /// Runs every needed watch until the task is aborted.
    pub(crate) async fn run(self: Arc<Self>, client: Client, errors: Option<&WatchErrors>) {
        let mut watches: Vec<futures::future::BoxFuture<'_, ()>> = Vec::new();
        let all = watcher::Config::default;
        for kind in Kind::ALL {
            let Some(store) = &self.classes[kind.index()] else { continue };
            let info = kind.info();
            let absent = info.classes_absent.map(|warning| (RETRY_CAP, warning));
            let metric = WATCHES.iter().copied().find(|&w| w == info.class_plural);
            let watch = Watch { what: info.classes, absent, metric };
            with_kind!(kind, K => {
                let api: Api<<K as Governed>::ClassObject> = Api::all(client.clone());
                watches.push(Box::pin(store.follow(api, all(), watch, <K as Governed>::class, &self.changed, errors)));
            });
        }
        if let Some(store) = &self.namespaces {
            let api: Api<Namespace> = Api::all(client.clone());
            let project = |n: &Namespace| n.labels().clone();
            let watch = Watch::named("Namespaces");
            watches.push(Box::pin(store.follow(api, all(), watch, project, &self.changed, errors)));
        }
        if let Some(store) = &self.nodes {
            let api: Api<Node> = Api::all(client.clone());
            // Node objects are large (images, conditions) and only their addresses are kept:
            // small list pages bound the transient peak of the initial list.
            let (config, watch) = (all().page_size(NODE_PAGE_SIZE), Watch::named("Nodes"));
            watches.push(Box::pin(store.follow(api, config, watch, NodeAddrs::of, &self.changed, errors)));
        }
        for ((namespace, selector), store) in &self.pods {
            let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
            let (config, watch) = (all().labels(selector), Watch::named("Pods"));
            watches.push(Box::pin(store.follow(api, config, watch, PodFacts::of, &self.changed, errors)));
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

    /// Every class of `kind` (none when not needed or without its CRDs), `None` until synced.
    pub(crate) fn classes(&self, kind: Kind) -> Option<Classes> {
        let Some(store) = &self.classes[kind.index()] else { return Some(Classes::new()) };
        store.read(|m| Some(m?.iter().map(|(name, class)| (name.clone(), class.clone())).collect()))
    }

    pub(crate) fn class_controller(&self, kind: Kind, class: &str) -> Option<String> {
        self.classes[kind.index()].as_ref()?.read(|m| m?.get(class)?.controller.clone())
    }

    pub(crate) fn default_classes(&self, kind: Kind) -> Vec<String> {
        let Some(store) = &self.classes[kind.index()] else { return Vec::new() };
        store.read(|m| {
            let mut names: Vec<String> =
                m.into_iter().flatten().filter(|(_, c)| c.default).map(|(n, _)| n.clone()).collect();
            names.sort();
            names
        })
    }

    pub(crate) fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.namespaces.as_ref()?.read(|m| m?.get(namespace).cloned())
    }
}
