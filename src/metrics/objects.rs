//! The watches whose failures `watch_errors_total{watch}` counts, and the family they count
//! into ([`WatchErrors`]).

use prometheus_client::{
    metrics::{counter::Counter, family::Family},
    registry::Registry,
};

use super::WatchLabel;
use crate::kind::Kind;

/// The watches whose failures are counted, as the `watch` label names them.
pub(crate) const WATCHES: [&str; 4] = [INGRESSES, GATEWAYS, GATEWAY_CLASSES, PUBLISH_GATEWAY];
/// The reconciler's watch of Ingresses.
pub(crate) const INGRESSES: &str = Kind::Ingress.info().plural;
/// The reconciler's watch of Gateways.
pub(crate) const GATEWAYS: &str = Kind::Gateway.info().plural;
/// The watch of GatewayClasses (Gateway policies matching by controller).
pub(crate) const GATEWAY_CLASSES: &str = Kind::Gateway.info().class_plural;
/// A `publishGateway` source's watch of its Gateway.
pub(crate) const PUBLISH_GATEWAY: &str = "publish-gateway";

/// `watch_errors_total{watch}`, shared: the source cache's watches start before the
/// reconciler's, and count into the same family.
#[derive(Debug, Clone, Default)]
pub(crate) struct WatchErrors(Family<WatchLabel, Counter>);

impl WatchErrors {
    /// The family, registered with every watch's series from the start, so a rate() has a zero
    /// to start from.
    pub(super) fn register(registry: &mut Registry) -> Self {
        let errors = WatchErrors::default();
        registry.register(
            "watch_errors",
            "Errors of the guard's watches, by watch (ingresses, gateways, gatewayclasses, publish-gateway; API server unreachable, forbidden, ...); each retried with backoff",
            errors.0.clone(),
        );
        for watch in WATCHES {
            let _ = errors.0.get_or_create(&WatchLabel { watch });
        }
        errors
    }

    /// Counts one failure of `watch`, one of [`WATCHES`].
    pub(crate) fn inc(&self, watch: &'static str) {
        self.0.get_or_create(&WatchLabel { watch }).inc();
    }
}
