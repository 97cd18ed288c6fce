//! Gateway API, end to end: the built binary against the real kube-apiserver + etcd of
//! `support`, with the released Gateway API CRDs (`sigs.k8s.io/gateway-api`, fetched through
//! the Go module proxy by `tests/gateway-api/fetch.sh`; never a hand-written schema) applied.
//! The bundle holds a ValidatingAdmissionPolicy, so these tests need an API server of 1.30 or
//! later: `.ci/run` runs them on v1.37 and v1.31.
//!
//! Isolation in the shared API server: each test has its own namespace, ingress class (named
//! after the namespace), Gateway and Lease, so parallel tests never touch each other's objects.

#[allow(dead_code)]
mod support;

use std::time::Duration;

use support::gateway::{self, create_gateway, create_gateway_class, gateway_status, stored_gateway_addresses};
use support::{TestEnv, eventually};

/// Generous bound for state that settles asynchronously on a loaded machine.
const SETTLE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn the_real_crds_serve_gateways_and_their_status() {
    let t = TestEnv::new("gw-crds").await;
    t.cluster.install_gateway_crds().await;
    create_gateway_class(&t.admin, &t.ns, "example.com/gateway-controller").await;
    let admin = gateway::gateways(&t.admin, &t.ns);
    let created = create_gateway(&admin, "edge", &t.ns).await;
    assert_eq!(created.data["status"]["conditions"][1]["type"], "Programmed", "the CRD's default status");
    let rogue = gateway::gateways(&t.cluster.rogue().await, &t.ns);
    let written = gateway::write_gateway_status(
        &rogue,
        "edge",
        gateway_status(&["192.0.2.7", "gw.example.test"], true, 1),
        false,
    )
    .await
    .expect("the rogue writer may write Gateway statuses");
    assert_eq!(stored_gateway_addresses(&written), ["192.0.2.7", "gw.example.test"]);
    // The CRD validates entries: an IPAddress that is no IP is refused by the API server.
    let refused =
        gateway::write_gateway_status(&rogue, "edge", gateway_status(&["IPAddress=not-an-ip"], true, 1), false).await;
    assert!(refused.is_err(), "the CRD refuses an IPAddress entry that is no IP: {refused:?}");
    let stored =
        eventually("the Gateway is readable", SETTLE, || async { admin.get("edge").await.map_err(|e| e.to_string()) })
            .await;
    assert_eq!(stored_gateway_addresses(&stored), ["192.0.2.7", "gw.example.test"]);
}
