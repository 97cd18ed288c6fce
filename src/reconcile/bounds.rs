//! The patch bounds every kind of the reconciler shares: one rate (`--reconcile-qps`) and one
//! concurrency, so governing Gateways too does not raise what the API server receives.

use std::{sync::Arc, time::Duration};

use tokio::sync::Semaphore;

use super::Settings;

pub(crate) struct Bounds {
    /// Patches in flight.
    pub(super) slots: Arc<Semaphore>,
    /// One tick per patch.
    pub(super) limiter: tokio::sync::Mutex<tokio::time::Interval>,
}

impl Bounds {
    pub(crate) fn new(settings: Settings) -> Self {
        let mut limiter = tokio::time::interval(Duration::from_secs_f64(1.0 / settings.qps));
        limiter.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Bounds { slots: Arc::new(Semaphore::new(settings.concurrency)), limiter: tokio::sync::Mutex::new(limiter) }
    }
}
