//! Namespaces entering the webhook's scope: their objects are listed, one Namespace at a time,
//! into the reconciler's cache ([`follow::list_namespace`]), so the API server lists that
//! Namespace alone. A list that fails falls back to a re-list of every object, which the watch
//! spaces out ([`follow::RELIST_EVERY`]).

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
};

use tokio::sync::Notify;

use super::{Reconciler, changed, kind};
use crate::{client::CallError, kind::Governed, sources::follow};

/// The Namespaces waiting for their list, each once however often it entered.
#[derive(Default)]
pub(super) struct Entering {
    names: Mutex<BTreeSet<String>>,
    added: Notify,
}

impl Entering {
    /// Queues the lists of `names` (called under the reconciler's lock: it only records them).
    pub(super) fn add(&self, names: Vec<String>) {
        self.lock().extend(names);
        self.added.notify_one();
    }

    fn next(&self) -> Option<String> {
        self.lock().pop_first()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        // A set of names: a panic cannot leave half of one.
        self.names.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl<K: Governed> Reconciler<K> {
    /// Lists each Namespace entering the scope, once the kind is watched at all.
    pub(super) async fn list_entering(self: Arc<Self>) {
        let mut policies = self.common.policies.subscribe();
        while !follow::wanted::<K>(&self.common.policies.load()) {
            changed(&mut policies).await;
        }
        loop {
            self.entering.added.notified().await;
            while let Some(namespace) = self.entering.next() {
                // It may have left again while it waited.
                if self.filter().in_scope(&namespace) {
                    self.list_namespace(&namespace).await;
                }
            }
        }
    }

    async fn list_namespace(&self, namespace: &str) {
        let admits = |ns: &str, class: Option<&str>| self.filter().admits(ns, class);
        let project = |obj| kind::project_kept::<K>(obj, &self.common.metrics, &self.interner, &admits);
        let hook = |change| self.on_change(change);
        match follow::list_namespace(&self.common.client, namespace, project, self, hook).await {
            Ok(adopted) => {
                tracing::debug!(kind = K::KIND.name(), namespace, adopted, "a Namespace entered the scope: listed");
            }
            Err(CallError::Api(kube::Error::Api(status))) if status.code == 404 => {}
            Err(e) => {
                tracing::warn!(
                    kind = K::KIND.name(),
                    namespace,
                    error = %e,
                    "cannot list the objects of a Namespace entering the scope: listing every object again"
                );
                self.relist.notify_one();
            }
        }
    }
}
