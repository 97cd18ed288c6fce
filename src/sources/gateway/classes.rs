//! The GatewayClasses that `gatewayControllers` policies match by: one watch of every
//! GatewayClass, keeping each one's `spec.controllerName`, in the [`SourceCache`]. As for publish
//! Gateways, an API server without the Gateway API CRDs leaves it empty but read (so readiness
//! does not wait for CRDs that may never come), and the watch keeps retrying.

use std::sync::{Arc, RwLock, atomic::Ordering};

use kube::{Api, Client, ResourceExt, runtime::watcher};

use super::{RETRY_CAP, is_api_absent};
use crate::{
    kind::gateway::LeanGatewayClass,
    sources::{
        SourceCache,
        follow::{self, Change, Projection},
    },
};

/// The GatewayClass cache: each class's controller, once listed.
#[derive(Debug, Default)]
pub(crate) struct GatewayClasses {
    pub(super) held: RwLock<Projection<String, Option<String>>>,
    /// The last watch attempt found no Gateway API.
    pub(super) absent: std::sync::atomic::AtomicBool,
}

impl GatewayClasses {
    /// Whether the classes have been read (or the API server serves none).
    pub(crate) fn synced(&self) -> bool {
        self.absent.load(Ordering::Relaxed)
            || self.held.read().unwrap_or_else(std::sync::PoisonError::into_inner).synced()
    }

    /// Every GatewayClass with its `spec.controllerName`, once read (none without the CRDs).
    pub(crate) fn all(&self) -> Option<std::collections::BTreeMap<String, Option<String>>> {
        if self.absent.load(Ordering::Relaxed) {
            return Some(Default::default());
        }
        let held = self.held.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        held.view().map(|all| all.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
    }

    /// `spec.controllerName` of GatewayClass `class`, if it is known.
    pub(crate) fn controller(&self, class: &str) -> Option<String> {
        let held = self.held.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        held.view()?.get(class).cloned().flatten()
    }
}

impl SourceCache {
    /// Records whether the policies in force need the GatewayClasses (for readiness).
    pub(crate) fn need_gateway_classes(&self, needed: bool) {
        self.need_gateway_classes.store(needed, Ordering::Relaxed);
    }

    /// Watches every GatewayClass until the task is aborted, telling the reconciler and the
    /// webhook's matching when a controller changes.
    pub(crate) async fn watch_gateway_classes(self: Arc<Self>, client: Client) {
        let api: Api<LeanGatewayClass> = Api::all(client);
        let classes = &self.gateway_classes;
        let project = |class: LeanGatewayClass| Some((class.name_any(), class.controller));
        follow::follow_capped(api, watcher::Config::default(), RETRY_CAP, project, &classes.held, |change| {
            let news = match change {
                Ok(Change::Listing) => false,
                Ok(Change::Listed { first, .. }) => {
                    if classes.absent.swap(false, Ordering::Relaxed) || first {
                        tracing::info!(watch = "GatewayClasses", "watch synced");
                    }
                    true
                }
                Ok(Change::Applied { key, old }) => {
                    let held = classes.held.read().unwrap_or_else(std::sync::PoisonError::into_inner);
                    old.as_ref() != held.get(&key)
                }
                Ok(Change::Deleted { .. }) => true,
                Err(e) if is_api_absent(&e) => {
                    if !classes.absent.swap(true, Ordering::Relaxed) {
                        tracing::warn!(retry_every = ?RETRY_CAP, "the API server serves no GatewayClasses (the Gateway API CRDs are not installed): gatewayControllers policies match no Gateway until they appear");
                        true
                    } else {
                        false
                    }
                }
                Err(e) => {
                    self.watch_failed(crate::metrics::objects::GATEWAY_CLASSES);
                    tracing::warn!(watch = "GatewayClasses", error = %e, "watch failed; retrying");
                    false
                }
            };
            if news {
                self.generation.send_modify(|g| *g += 1);
            }
        })
        .await;
    }
}
