//! The watch tasks that follow the policies in force: one per publish Service and Gateway, and one for the
//! inventory's collections, started and stopped as a reload changes what the policies need.

use std::{collections::HashMap, sync::Arc};

use kube::Client;
use tokio::task::AbortHandle;

use crate::{
    policy::{GatewayRef, Policies, ServiceRef},
    sources::SourceCache,
};

/// One watch task per publish Service of the policies in force.
pub(crate) struct ServiceWatches {
    client: Client,
    cache: Arc<SourceCache>,
    tasks: HashMap<ServiceRef, AbortHandle>,
    /// One watch task per publish Gateway.
    gateways: HashMap<GatewayRef, AbortHandle>,
    /// The GatewayClass watch, while a Gateway policy matches by controller.
    gateway_classes: Option<AbortHandle>,
    /// The watches of the cache's inventory (IngressClasses, Namespaces, Pods, Nodes).
    inventory: Option<AbortHandle>,
}

impl ServiceWatches {
    /// Starts watching what `policies` need. Must be called inside a tokio runtime.
    pub(crate) fn start(client: Client, cache: Arc<SourceCache>, policies: &Policies) -> Self {
        let mut watches = ServiceWatches {
            client,
            cache,
            tasks: HashMap::new(),
            gateways: HashMap::new(),
            gateway_classes: None,
            inventory: None,
        };
        watches.sync_policies(policies);
        watches
    }

    /// Makes the watches exactly those `policies` need: their publish Services, and the
    /// inventory's watches (restarted when the needed cluster facts change).
    pub(crate) fn sync_policies(&mut self, policies: &Policies) {
        self.sync(&policies.services());
        self.sync_gateways(&policies.gateways());
        let need_classes = policies.need_gateway_classes();
        self.cache.need_gateway_classes(need_classes);
        match (&self.gateway_classes, need_classes) {
            (None, true) => {
                let task = tokio::spawn(self.cache.clone().watch_gateway_classes(self.client.clone()));
                self.gateway_classes = Some(task.abort_handle());
            }
            (Some(task), false) => {
                task.abort();
                self.gateway_classes = None;
            }
            _ => {}
        }
        if self.cache.track_inventory(policies) || self.inventory.is_none() {
            if let Some(old) = self.inventory.take() {
                old.abort();
            }
            let task = tokio::spawn(self.cache.clone().watch_inventory(self.client.clone()));
            self.inventory = Some(task.abort_handle());
        }
    }

    /// Makes the set of watches exactly `services`.
    pub(crate) fn sync(&mut self, services: &[ServiceRef]) {
        self.cache.track(services);
        self.tasks.retain(|svc, task| {
            let keep = services.contains(svc);
            if !keep {
                tracing::info!(service = %svc, "stopped watching publish Service (no policy uses it)");
                task.abort();
            }
            keep
        });
        for svc in services {
            if !self.tasks.contains_key(svc) {
                let task = tokio::spawn(self.cache.clone().watch_service(self.client.clone(), svc.clone()));
                self.tasks.insert(svc.clone(), task.abort_handle());
            }
        }
    }
}

impl ServiceWatches {
    /// Makes the set of Gateway watches exactly `gateways`.
    fn sync_gateways(&mut self, gateways: &[GatewayRef]) {
        self.cache.track_gateways(gateways);
        self.gateways.retain(|gw, task| {
            let keep = gateways.contains(gw);
            if !keep {
                tracing::info!(gateway = %gw, "stopped watching publish Gateway (no policy uses it)");
                task.abort();
            }
            keep
        });
        for gw in gateways {
            if !self.gateways.contains_key(gw) {
                let task = tokio::spawn(self.cache.clone().watch_gateway(self.client.clone(), gw.clone()));
                self.gateways.insert(gw.clone(), task.abort_handle());
            }
        }
    }
}

impl Drop for ServiceWatches {
    fn drop(&mut self) {
        if let Some(task) = &self.gateway_classes {
            task.abort();
        }
        for task in self.gateways.values() {
            task.abort();
        }
        if let Some(task) = &self.inventory {
            task.abort();
        }
        for task in self.tasks.values() {
            task.abort();
        }
    }
}
