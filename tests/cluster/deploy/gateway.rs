//! The Gateway API components of `manifests/components/` (`publish-gateway`, `gateway-policies`)
//! on the real API server with the released CRDs: their RBAC is all the webhook needs.

use kube::{
    Api,
    api::{DynamicObject, Patch, PatchParams},
};
use serde::Deserialize as _;
use serde_json::{Value, json};

use super::support::gateway::{
    self, create_gateway, create_gateway_class, gateway_status, register_gateway_webhook, stored_gateway_addresses,
    write_gateway_status,
};
use super::support::{self, Class, FailurePolicy, TestEnv, Webhook, create_ingress};
use super::{WEBHOOK_SA, apply, find, kubectl, prerequisites, relative};

/// An overlay of the self-signed overlay with both Gateway components, as their comments say to
/// add them: the webhook rule for `gateways/status` is there; with exactly the rendered RBAC, the
/// built binary, running as the manifests' ServiceAccount with a `publishGateway` policy and a
/// `gatewayControllers` policy, gets ready (its Gateway and GatewayClass watches read), moves an
/// Ingress to the Gateway's address, rewrites a rogue Gateway status write, and may do what its
/// reconciler does for Gateways (list and watch them, patch their status), with no forbidden
/// error in its log.
#[tokio::test]
async fn the_gateway_components_rbac_is_all_the_webhook_needs() {
    let t = TestEnv::new("deploy-gw").await;
    prerequisites(t.cluster).await;
    t.cluster.install_gateway_crds().await;
    let ns = &t.ns;
    let dir = t.cluster.scratch_dir("deploy-gateway-components");
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests");
    let up = relative(&base, &dir);
    let kustomization = format!(
        "resources: [{up}/overlays/self-signed]\ncomponents: [{up}/components/publish-gateway, {up}/components/gateway-policies]\n"
    );
    std::fs::write(dir.join("kustomization.yaml"), kustomization).unwrap();
    let out = kubectl(&["kustomize", &dir.display().to_string()]);
    assert!(out.success, "kubectl kustomize: {}", out.stderr);
    let docs: Vec<Value> = serde_norway::Deserializer::from_str(&out.stdout)
        .map(|doc| Value::deserialize(doc).unwrap())
        .filter(|v| !v.is_null())
        .collect();
    let mwc = find(&docs, "MutatingWebhookConfiguration", "ingress-status-guard");
    let rules = mwc["webhooks"][0]["rules"].as_array().unwrap();
    assert!(rules.iter().any(|r| r["resources"] == json!(["gateways/status"])), "{rules:?}");

    // The Gateway's namespace (the component's Role sits in it), then exactly the webhook's RBAC.
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gateway"}});
    let rbac: Vec<Value> = docs
        .iter()
        .filter(|d| {
            d["metadata"]["labels"]["app.kubernetes.io/component"] == "webhook"
                && ["ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"]
                    .contains(&d["kind"].as_str().unwrap())
        })
        .cloned()
        .collect();
    apply(t.cluster, &[namespace]);
    apply(t.cluster, &rbac);

    // The component's Gateway, Programmed with an address; a class whose controller a Gateway
    // policy names, and a Gateway of it in this test's namespace.
    let controller = format!("example.com/ctl-{ns}");
    create_gateway_class(&t.admin, &format!("{ns}-public"), "example.com/gateway-controller").await;
    create_gateway_class(&t.admin, ns, &controller).await;
    let public = gateway::gateways(&t.admin, "gateway");
    create_gateway(&public, "public", &format!("{ns}-public")).await;
    write_gateway_status(&public, "public", gateway_status(&["192.0.2.100"], true, 1), false).await.unwrap();
    let edge = gateway::gateways(&t.admin, ns);
    create_gateway(&edge, "edge", ns).await;

    // The components' policy file, with this test's class (other tests of this binary govern
    // class nginx) and a Gateway policy added.
    let config = find(&docs, "ConfigMap", "ingress-status-guard-config")["data"]["config.yaml"].as_str().unwrap();
    assert!(config.contains("publishGateway: gateway/public"), "{config}");
    let config = format!(
        "{}  - {{name: gateways, gatewayControllers: [{controller}], publishStatusAddress: 192.0.2.101}}\n",
        config.replace("ingressClasses: [nginx]", &format!("ingressClasses: [{ns}]"))
    );
    let config_file = t.cluster.scratch_dir("deploy-gateway-config").join("config.yaml");
    std::fs::write(&config_file, config).unwrap();
    let config_arg = format!("--config={}", config_file.display());
    let kubeconfig = t.cluster.kubeconfig_for(WEBHOOK_SA, Some("system:serviceaccounts"));
    // Ready only once the publish Gateway and the GatewayClasses are read.
    let webhook = Webhook::start(t.cluster, ns, &kubeconfig, &[&config_arg]).await;
    let (status, body) = webhook.readyz_text().expect("/readyz answers");
    assert_eq!((status, body.as_str()), (200, "ok\n"), "nothing inactive");

    // The Ingress policy follows the Gateway: a rogue write is rewritten to its address.
    create_ingress(&t.ingresses, "web", Class::Field(ns)).await;
    t.register(&webhook, FailurePolicy::Fail, Class::Field(ns), &["192.0.2.100"]).await;

    // The Gateway policy is active: a rogue Gateway status write is rewritten.
    register_gateway_webhook(&t.admin, ns, &webhook.url(), webhook.ca_pem()).await;
    let rogue = gateway::gateways(&t.cluster.rogue().await, ns);
    support::eventually("a rogue Gateway status write is rewritten", std::time::Duration::from_secs(30), || async {
        let written = write_gateway_status(&rogue, "edge", gateway_status(&["198.51.100.9"], true, 1), false)
            .await
            .map_err(|e| e.to_string())?;
        let got = stored_gateway_addresses(&written);
        if got == ["192.0.2.101"] { Ok(()) } else { Err(format!("stored {got:?}")) }
    })
    .await;

    // What the reconciler does for Gateway policies, as that identity: list and watch every
    // Gateway, patch a Gateway's status (a server-side dry run: allowed, nothing stored).
    let narrow = support::cluster::client_from(&kubeconfig).await;
    let as_webhook: Api<DynamicObject> = Api::all_with(narrow.clone(), &gateway::gateway_resource());
    as_webhook.list(&Default::default()).await.expect("the reconciler lists Gateways");
    let watch = kube::api::WatchParams::default().timeout(1);
    drop(as_webhook.watch(&watch, "0").await.expect("the reconciler watches Gateways"));
    let in_ns: Api<DynamicObject> = Api::namespaced_with(narrow, ns, &gateway::gateway_resource());
    let status = json!({"status": {"addresses": [{"type": "IPAddress", "value": "192.0.2.101"}]}});
    let dry = PatchParams { dry_run: true, field_manager: Some("ingress-status-guard".into()), ..Default::default() };
    in_ns.patch_status("edge", &dry, &Patch::Merge(&status)).await.expect("the reconciler patches Gateway statuses");

    let log = webhook.log();
    assert!(log.contains("publish Gateway resolved"), "{log}");
    let forbidden = webhook.forbidden_lines();
    assert!(forbidden.is_empty(), "forbidden in the webhook's log: {forbidden:#?}\n{log}");
}
