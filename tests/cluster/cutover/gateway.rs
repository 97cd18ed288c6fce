//! `cutover --to-publish-gateway`: Ingresses move from a Service to a Gateway's addresses and
//! back, against the real Gateway API CRDs; a Gateway that is not Programmed is a target the
//! plan refuses, naming it.

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::Api;
use serde_json::json;

use super::harness::*;
use super::support::gateway::{create_gateway, create_gateway_class, gateway_status, gateways, write_gateway_status};
use super::support::{Class, TestEnv, addresses, create_ingress};

/// The Gateway's address: what the Ingresses store after the move.
const GW: &str = "203.0.113.30";

/// 20 Ingresses move from Service A to Gateway `public` (the plan lists exactly them, exit 0
/// when all have moved), `--rollback` moves them back; Gateway `pending` (not Programmed)
/// exits 1 naming it and applies nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingresses_move_from_a_service_to_a_gateway_and_back() {
    let t = TestEnv::new("cutover-gateway").await;
    t.cluster.install_gateway_crds().await;
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    lb_service(&services, "controller-a", A).await;
    let class = format!("{}-class", t.ns);
    create_gateway_class(&t.admin, &class, "example.test/gateway-controller").await;
    let gws = gateways(&t.admin, &t.ns);
    for (name, programmed) in [("public", true), ("pending", false)] {
        let created = create_gateway(&gws, name, &class).await;
        let generation = created.metadata.generation.unwrap_or(1);
        write_gateway_status(&gws, name, gateway_status(&[GW], programmed, generation), false)
            .await
            .unwrap_or_else(|e| panic!("write Gateway {name} status: {e}"));
    }
    let (guard, _kubelet) = start_guard(&t, "controller-a", None).await;
    let names: Vec<String> = (0..20).map(|i| format!("shop-{i:02}")).collect();
    for name in &names {
        create_ingress(&t.ingresses, name, Class::Field(&t.ns)).await;
    }
    await_all(&t, &names, A, &guard).await;
    let kc = t.cluster.admin_kubeconfig();

    // Not Programmed: exit 1, the Gateway and its condition named, nothing applied.
    let pending = format!("--to-publish-gateway={}/pending", t.ns);
    let out = run(BINARY, &cutover_args(&t, kc, &[&pending]), None).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr
            .starts_with(&format!("error: the new source of policy edge is unresolved: Gateway {}/pending ", t.ns)),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("Programmed"), "the reason is named: {}", out.stderr);
    let cm = Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).get(CONFIG_MAP).await.unwrap();
    assert!(cm.data.unwrap()["config.yaml"].contains("controller-a"), "nothing applied");

    // The plan: exactly the 20, from A to the Gateway's address.
    let to_gw = format!("--to-publish-gateway={}/public", t.ns);
    let dry = run(BINARY, &cutover_args(&t, kc, &[&to_gw, "--dry-run", "-o", "json"]), None).await;
    assert_eq!(dry.code, Some(0), "{}", dry.stderr);
    let plan = &events(&dry.stdout)[0];
    let planned: Vec<&str> =
        plan["ingresses"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(planned, names.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        plan["ingresses"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["from"] == json!([{"ip": A}]) && m["to"] == json!([{"ip": GW}])),
        "{plan}"
    );
    assert_eq!(plan["toSource"], format!("gateway {}/public", t.ns));

    // Act and follow: exit 0 once all 20 store the Gateway's address.
    let moved = run(BINARY, &cutover_args(&t, kc, &[&to_gw, "--timeout=5m"]), None).await;
    assert_eq!(moved.code, Some(0), "{} (guard log: {})", moved.stderr, guard.log_path().display());
    assert!(moved.stdout.contains("20/20"), "{}", moved.stdout);
    await_all(&t, &names, GW, &guard).await;
    let cm = Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).get(CONFIG_MAP).await.unwrap();
    assert!(cm.data.unwrap()["config.yaml"].contains(&format!("publishGateway: {}/public", t.ns)));

    // Back to the Service.
    let back = run(BINARY, &cutover_args(&t, kc, &["--rollback", "--timeout=5m"]), None).await;
    assert_eq!(back.code, Some(0), "{} (guard log: {})", back.stderr, guard.log_path().display());
    await_all(&t, &names, A, &guard).await;
    for name in &names {
        assert_eq!(addresses(&t.ingresses.get(name).await.unwrap()), [A]);
    }
}
