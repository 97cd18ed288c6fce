//! The metrics that count both governed kinds: drift, watch errors, forged fields and how each
//! watch lists. The older Ingress-only names (`drift_ingresses`, `ingress_watch_errors`) stay
//! beside them, so that a name never counts what it does not say.

use prometheus_client::{
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

use super::{Escaped, label_sets, register, registered};
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

label_sets! {
    KindPolicyLabels { policy: Escaped, kind: &'static str }
    ForgedLabels { field: &'static str, result: &'static str }
    WatchLabel { watch: &'static str }
}

/// `watch_errors_total{watch}`, shared: the source cache's watches start before the
/// reconciler's, and count into the same family.
#[derive(Debug, Clone, Default)]
pub(crate) struct WatchErrors(Family<WatchLabel, Counter>);

impl WatchErrors {
    /// Counts one failure of `watch`, one of [`WATCHES`].
    pub(crate) fn inc(&self, watch: &'static str) {
        self.0.get_or_create(&WatchLabel { watch }).inc();
    }
}

/// `drift_objects{policy,kind}`, `watch_errors_total{watch}` and `watch_streaming_lists{watch}`.
#[derive(Debug)]
pub(super) struct Objects {
    drift: Family<KindPolicyLabels, Gauge>,
    forged: Family<ForgedLabels, Counter>,
    forged_metadata: Family<ForgedLabels, Counter>,
    pub(super) watch_errors: WatchErrors,
    streaming: Family<WatchLabel, Gauge>,
}

impl Objects {
    pub(super) fn register(registry: &mut Registry) -> Objects {
        register! { registry;
            drift: Family<KindPolicyLabels, Gauge> = "drift_objects",
                "Governed objects whose stored status differs from the canonical addresses now, by policy and kind (ingress: status.loadBalancer.ingress, gateway: status.addresses)";
        }
        let watch_errors = WatchErrors::default();
        registry.register(
            "watch_errors",
            "Errors of the guard's watches, by watch (ingresses, gateways, gatewayclasses, publish-gateway; API server unreachable, forbidden, ...); each retried with backoff",
            watch_errors.0.clone(),
        );
        // Every watch's series from the start, so a rate() has a zero to start from.
        for watch in WATCHES {
            let _ = watch_errors.0.get_or_create(&WatchLabel { watch });
        }
        register! { registry;
            forged: Family<ForgedLabels, Counter> = "forged_spec_writes",
                "Status writes that also changed a field the API server resets from the stored object (field: spec.ingressClassName, spec.gatewayClassName), by the result of the review (judged under the stored value; dry_run for dry runs)";
            forged_metadata: Family<ForgedLabels, Counter> = "forged_metadata_writes",
                "Status writes that also changed metadata a status write stores as written (field: metadata.annotations, metadata.labels, metadata.ownerReferences, metadata.finalizers), one per field, by the result of the review (patched: put back, denied, audited, not_governed: stored as written; dry_run for dry runs)";
            streaming: Family<WatchLabel, Gauge> = "watch_streaming_lists",
                "Whether the reconciler's watch of a governed kind (watch: ingresses, gateways) gets its state by streaming lists (1: WatchList) or in list pages (0: the API server does not serve streaming lists); no series before the watch starts";
        }
        Objects { drift, watch_errors, forged, forged_metadata, streaming }
    }

    pub(super) fn set_streaming(&self, watch: &'static str, streaming: bool) {
        self.streaming.get_or_create(&WatchLabel { watch }).set(i64::from(streaming));
    }

    pub(super) fn forged(&self, field: &'static str, result: &'static str) {
        self.forged.get_or_create(&ForgedLabels { field, result }).inc();
    }

    pub(super) fn forged_metadata(&self, field: &'static str, result: &'static str) {
        self.forged_metadata.get_or_create(&ForgedLabels { field, result }).inc();
    }

    pub(super) fn set_drift(&self, kind: &'static str, policy: &str, count: i64) {
        self.drift.get_or_create(&KindPolicyLabels { policy: Escaped::new(policy), kind }).set(count);
    }

    pub(super) fn remove_drift(&self, kind: &'static str, policy: &str) {
        self.drift.remove(&KindPolicyLabels { policy: Escaped::new(policy), kind });
    }
}
