//! A Gateway policy whose source is a publish Service: the Service's load balancer moves, and
//! the governed Gateway's `status.addresses` follows without a restart (no rogue write needed:
//! the reconciler re-judges on the Service's change).

use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use super::support::gateway::{self, create_gateway, create_gateway_class, gateway_status, write_gateway_status};
use super::support::{SENTINEL, TestEnv, eventually};
use super::{SETTLE, guard_args, start_guard};

async fn set_load_balancer(services: &Api<Service>, ingress: serde_json::Value) {
    let patch = Patch::Merge(json!({"status": {"loadBalancer": {"ingress": ingress}}}));
    services.patch_status("edge", &PatchParams::default(), &patch).await.expect("write the Service's status");
}

#[tokio::test]
async fn a_gateway_follows_its_publish_service_without_restart() {
    let t = TestEnv::new("gw-follow").await;
    t.cluster.install_gateway_crds().await;
    let ns = &t.ns;
    let services: Api<Service> = Api::namespaced(t.admin.clone(), ns);
    let service = serde_json::from_value(json!({
        "metadata": {"name": "edge"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 443}]}
    }))
    .expect("Service object");
    services.create(&PostParams::default(), &service).await.expect("create the publish Service");
    set_load_balancer(&services, json!([{"ip": "203.0.113.30"}])).await;

    create_gateway_class(&t.admin, ns, "example.com/gateway-controller").await;
    let admin = gateway::gateways(&t.admin, ns);
    create_gateway(&admin, "edge", ns).await;
    let rogue = gateway::gateways(&t.cluster.rogue().await, ns);
    write_gateway_status(&rogue, "edge", gateway_status(&[SENTINEL], true, 1), false).await.expect("rogue write");

    let policies = format!("policies:\n  - {{name: edge, gatewayClasses: [{ns}], publishService: {ns}/edge}}\n");
    let guard = start_guard(&t, &guard_args(&t, &policies)).await;
    let log = guard.log_path().display().to_string();
    let addresses = || async {
        let got = admin.get("edge").await.map_err(|e| e.to_string())?;
        Ok::<_, String>(gateway::stored_gateway_addresses(&got))
    };
    eventually(&format!("the Gateway gets the Service's address (log: {log})"), SETTLE, || async {
        let got = addresses().await?;
        if got == ["203.0.113.30"] { Ok(()) } else { Err(format!("stored {got:?}")) }
    })
    .await;

    // The load balancer moves to a hostname and a second IP: followed, nobody writes the Gateway.
    set_load_balancer(&services, json!([{"hostname": "edge.example.test"}, {"ip": "203.0.113.31"}])).await;
    eventually(&format!("the Gateway follows the Service's move (log: {log})"), SETTLE, || async {
        let got = addresses().await?;
        if got == ["203.0.113.31", "edge.example.test"] { Ok(()) } else { Err(format!("stored {got:?}")) }
    })
    .await;
    let patched = guard.metric("ingress_status_guard_reconcile_patches_total{policy=\"edge\",result=\"patched\"}");
    assert_eq!(patched, 2.0, "one heal of the rogue value, one for the Service's move");
}
