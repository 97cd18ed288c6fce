//! The reconciler's view of the scope, kept current by two watches: the guard's own
//! MutatingWebhookConfiguration (by name, so RBAC can name it), and the Namespaces its
//! selector selects (the API server filters them by that selector, exactly as it does at
//! admission). A change of either applies without restart. Fail closed: while the scope is
//! unknown (not read yet, forbidden, deleted, unusable, such as one with `matchConditions`,
//! Namespaces not listed), the reconciler patches nothing; admission does not depend on it.

use std::{
    collections::HashSet,
    sync::{Arc, RwLock},
};

use k8s_openapi::api::{admissionregistration::v1::MutatingWebhookConfiguration, core::v1::Namespace};
use kube::{Api, Client, ResourceExt, runtime::watcher};
use tokio::sync::watch;

use super::selector_of;
use crate::{
    metrics::Metrics,
    policy::LabelSelector,
    sources::follow::{Change, Projection, follow},
};

/// Whether the reconciler may act in one Namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Allow {
    Yes,
    /// Outside the webhook's scope: not the guard's, as at admission.
    No,
    /// The scope is unknown: no patch, until it is known.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Everywhere,
    Within(HashSet<String>),
    Unknown(String),
}

/// The scope the reconciler checks each Namespace against.
pub(crate) struct Scope {
    state: RwLock<State>,
    changed: watch::Sender<u64>,
    /// `reconcile_scope_known`, when followed.
    metrics: Option<Arc<Metrics>>,
}

impl Scope {
    /// No webhook scope (`--webhook-configuration=`, or `--admission=policy`): every Namespace,
    /// as far as the policies' own selectors go.
    pub(crate) fn everywhere() -> Arc<Scope> {
        Arc::new(Scope { state: RwLock::new(State::Everywhere), changed: watch::Sender::new(0), metrics: None })
    }

    /// The scope of configuration `name`, unknown until first read, and the watch that keeps
    /// it current (for its owner to run until it stops it).
    pub(crate) fn start(
        client: Client,
        name: String,
        metrics: Arc<Metrics>,
    ) -> (Arc<Scope>, impl std::future::Future<Output = ()> + Send + 'static) {
        let state = State::Unknown(format!("MutatingWebhookConfiguration {name} not read yet"));
        metrics.set_scope_known(false);
        let metrics = Some(metrics);
        let scope = Arc::new(Scope { state: RwLock::new(state), changed: watch::Sender::new(0), metrics });
        (scope.clone(), scope.run(client, name))
    }

    pub(crate) fn allows(&self, namespace: &str) -> Allow {
        match &*self.state.read().unwrap_or_else(std::sync::PoisonError::into_inner) {
            State::Everywhere => Allow::Yes,
            State::Within(names) if names.contains(namespace) => Allow::Yes,
            State::Within(_) => Allow::No,
            State::Unknown(_) => Allow::Unknown,
        }
    }

    /// The Namespaces the scope selects; `None` for every Namespace, or while the scope is
    /// unknown (what it selects then is not known either).
    pub(crate) fn namespaces(&self) -> Option<HashSet<String>> {
        match &*self.state.read().unwrap_or_else(std::sync::PoisonError::into_inner) {
            State::Within(names) => Some(names.clone()),
            State::Everywhere | State::Unknown(_) => None,
        }
    }

    /// Ticks whenever the scope changes: the reconciler judges every object again.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Sets the state, telling subscribers if it changed, and logging (once) a change between
    /// known and unknown, or of why it is unknown.
    fn set(&self, name: &str, new: State) {
        let mut state = self.state.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if *state == new {
            return;
        }
        match (&*state, &new) {
            (_, State::Unknown(why)) => {
                tracing::warn!(webhook_configuration = %name, reason = %why, "the reconciler's scope is unknown: it patches nothing until it can read it (admission keeps working); the scope is the MutatingWebhookConfiguration named by --webhook-configuration: pass the name of this guard's own (or --webhook-configuration= to scope by the policies' namespaceSelectors alone)");
            }
            (State::Unknown(_), State::Within(names)) => {
                tracing::info!(webhook_configuration = %name, namespaces = names.len(), "reconciler scope known: the Namespaces the webhook's namespaceSelector selects");
            }
            (State::Unknown(_), State::Everywhere) => {
                tracing::info!(webhook_configuration = %name, "reconciler scope known: every Namespace (the webhook has no namespaceSelector)");
            }
            _ => {}
        }
        if let Some(metrics) = &self.metrics {
            metrics.set_scope_known(!matches!(new, State::Unknown(_)));
        }
        *state = new;
        drop(state);
        self.changed.send_modify(|g| *g += 1);
    }

    async fn run(self: Arc<Self>, client: Client, name: String) {
        let (selector_tx, selector_rx) =
            watch::channel(Err(format!("MutatingWebhookConfiguration {name} not read yet")));
        let held = RwLock::new(Projection::<(), Result<LabelSelector, String>>::default());
        let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let project = |c: MutatingWebhookConfiguration| Some(((), selector_of(&c).map_err(|e| e.to_string())));
        let mut failing = false;
        let hook = |change: Result<Change<(), _>, watcher::Error>| {
            let held = held.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            let read = match change {
                Ok(Change::Listing) => return,
                Ok(_) => {
                    failing = false;
                    match held.get(&()) {
                        Some(selector) => selector.clone(),
                        None => Err(format!("MutatingWebhookConfiguration {name} does not exist")),
                    }
                }
                Err(e) if held.synced() => {
                    // The watch resumes where it failed: the last known scope stands meanwhile,
                    // as every cache of the guard keeps its last known state.
                    if !std::mem::replace(&mut failing, true) {
                        tracing::warn!(webhook_configuration = %name, error = %e, "watch of the webhook configuration failed; retrying, the last known scope stands");
                    }
                    return;
                }
                Err(e) => Err(format!("cannot read MutatingWebhookConfiguration {name}: {e}")),
            };
            drop(held);
            selector_tx.send_if_modified(|current| {
                let changed = *current != read;
                *current = read;
                changed
            });
        };
        let configuration = follow(api, config, None, project, &held, hook);
        tokio::join!(configuration, self.follow_namespaces(client, &name, selector_rx));
    }

    /// Keeps the state current with the selector `selector` says, watching the Namespaces it
    /// selects (restarted when it changes).
    async fn follow_namespaces(
        &self,
        client: Client,
        name: &str,
        mut selector: watch::Receiver<Result<LabelSelector, String>>,
    ) {
        loop {
            let current = selector.borrow_and_update().clone();
            match current {
                Err(why) => self.set(name, State::Unknown(why)),
                Ok(s) if s.is_empty() => self.set(name, State::Everywhere),
                Ok(s) => {
                    self.set(name, State::Unknown(format!("listing the Namespaces selected by {s}")));
                    let held = RwLock::new(Projection::<String, ()>::default());
                    let api: Api<Namespace> = Api::all(client.clone());
                    let config = watcher::Config::default().labels(&s.to_string());
                    let hook = |change: Result<Change<String, ()>, watcher::Error>| match change {
                        Ok(Change::Listing) => {}
                        Ok(_) => {
                            let held = held.read().unwrap_or_else(std::sync::PoisonError::into_inner);
                            if let Some(names) = held.view() {
                                self.set(name, State::Within(names.keys().cloned().collect()));
                            }
                        }
                        // As for the configuration: once listed, the last known set stands.
                        Err(e) if held.read().unwrap_or_else(std::sync::PoisonError::into_inner).synced() => {
                            tracing::debug!(error = %e, "Namespace watch of the reconciler's scope failed; retrying");
                        }
                        Err(e) => {
                            self.set(name, State::Unknown(format!("cannot list the Namespaces selected by {s}: {e}")));
                        }
                    };
                    let namespaces = follow(api, config, None, |n: Namespace| Some((n.name_any(), ())), &held, hook);
                    tokio::select! {
                        () = namespaces => {}
                        changed = selector.changed() => if changed.is_err() { return },
                    }
                    continue;
                }
            }
            if selector.changed().await.is_err() {
                return;
            }
        }
    }
}
