//! The policies in force, swapped atomically on a reload, so a reader sees the old set or the new
//! one, never a mix; subscribers (the reconciler) are told.

use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::sync::watch;

use crate::policy::Policies;

/// The current policies; cheap to read from any thread.
pub(crate) struct PolicyStore {
    current: ArcSwap<Policies>,
    generation: watch::Sender<u64>,
}

impl PolicyStore {
    pub(crate) fn new(policies: Policies) -> Arc<Self> {
        Arc::new(PolicyStore { current: ArcSwap::from_pointee(policies), generation: watch::Sender::new(0) })
    }

    /// The policies in force now. Hold the result for one decision, not longer.
    pub(crate) fn load(&self) -> Arc<Policies> {
        self.current.load_full()
    }

    /// Changes whenever the policies are replaced.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    pub(crate) fn replace(&self, policies: Policies) {
        self.current.store(Arc::new(policies));
        self.generation.send_modify(|g| *g += 1);
    }
}
