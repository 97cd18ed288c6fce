//! The watch tasks that follow the policies in force: one per publish source, and one for the
//! inventory's collections, started and stopped as a reload changes what the policies need.

use std::{collections::HashMap, sync::Arc};

use kube::Client;
use tokio::task::AbortHandle;

use crate::{
    policy::Policies,
    sources::{
        SourceCache,
        gateway::PublishGateway,
        owned::{Failures, Tasks},
        published::{News, Publish, Published},
        service::PublishService,
    },
};

/// The watch tasks of the publish sources of one kind, by source.
struct Watched<P: Publish> {
    tasks: HashMap<P::Ref, AbortHandle>,
    /// Where the kind's cache is in the [`SourceCache`].
    cache: fn(&SourceCache) -> &Published<P>,
}

impl<P: Publish> Watched<P> {
    /// Makes the watches exactly those of `refs`.
    fn sync(&mut self, owned: &mut Tasks, client: &Client, cache: &Arc<SourceCache>, refs: &[P::Ref]) {
        (self.cache)(cache).track(refs);
        for (r, task) in self.tasks.extract_if(|r, _| !refs.contains(r)) {
            P::log(&r, News::Stopped);
            task.abort();
        }
        for r in refs {
            if self.tasks.contains_key(r) {
                continue;
            }
            let (client, cache, pick, watched) = (client.clone(), cache.clone(), self.cache, r.clone());
            let task = async move {
                let failed = |watch| cache.watch_failed(watch);
                pick(&cache).watch(client, watched, failed).await;
            };
            let handle = owned.spawn(format!("watch of publish {} {r}", P::KIND), task);
            self.tasks.insert(r.clone(), handle);
        }
    }
}

/// The watch tasks of the policies in force.
pub(crate) struct ServiceWatches {
    client: Client,
    cache: Arc<SourceCache>,
    owned: Tasks,
    services: Watched<PublishService>,
    gateways: Watched<PublishGateway>,
    inventory: Option<AbortHandle>,
}

impl ServiceWatches {
    /// Starts watching what `policies` need (inside a tokio runtime); an unexpected end of a
    /// watch goes to `failures`.
    pub(crate) fn start(client: Client, cache: Arc<SourceCache>, policies: &Policies, failures: Failures) -> Self {
        let mut watches = ServiceWatches {
            client,
            cache,
            owned: Tasks::new(failures),
            services: Watched { tasks: HashMap::new(), cache: |cache| &cache.services },
            gateways: Watched { tasks: HashMap::new(), cache: |cache| &cache.gateways },
            inventory: None,
        };
        watches.sync_policies(policies);
        watches
    }

    /// Makes the watches exactly those `policies` need (the inventory's restarted when the
    /// needed cluster facts change).
    pub(crate) fn sync_policies(&mut self, policies: &Policies) {
        let (owned, client, cache) = (&mut self.owned, &self.client, &self.cache);
        self.services.sync(owned, client, cache, &PublishService::refs(policies));
        self.gateways.sync(owned, client, cache, &PublishGateway::refs(policies));
        if self.cache.track_inventory(policies) || self.inventory.is_none() {
            if let Some(old) = self.inventory.take() {
                old.abort();
            }
            let task = self.cache.clone().watch_inventory(self.client.clone());
            self.inventory = Some(self.owned.spawn("inventory watches".to_owned(), task));
        }
    }

    /// Waits for the next watch to end (never, while they run), logs it and reports it unless
    /// it was stopped. Cancel-safe.
    pub(crate) async fn ended(&mut self) {
        self.owned.ended().await;
    }
}
