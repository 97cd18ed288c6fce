//! The walkthrough of docs/migration.md's "Ingress → Gateway API" section, against the real
//! API server and CRDs; its printed transcript is the guide's output.

use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use serde_json::json;

use super::support;
use super::support::gateway::{self, create_gateway, create_gateway_class, gateway_status};
use super::support::{Class, FailurePolicy, TestEnv, Webhook, create_ingress, eventually, stored};
use super::{SETTLE, run_cli};

/// The walkthrough of docs/migration.md, "Ingress → Gateway API": Ingresses pinned to the old
/// controller's Service, a Gateway of the new implementation, `check` against the cutover
/// policy before it is loaded (what will move), the one-line reload to `publishGateway`, every
/// Ingress moved by the reconciler, `check` after, and the reload back. The transcript printed
/// (`--nocapture`) is the guide's output.
#[tokio::test]
async fn migration_cutover_from_an_ingress_controller_to_a_gateway_and_back() {
    use k8s_openapi::api::core::v1::{Namespace, Service};
    use kube::api::{Patch, PatchParams, PostParams};
    let t = TestEnv::private("gw-migration-guard").await;
    t.cluster.install_gateway_crds().await;
    let (cluster, admin) = (t.cluster, t.admin.clone());
    let kubeconfig = cluster.admin_kubeconfig();
    let transcript = std::cell::RefCell::new(String::new());
    let kubectl = |args: &[&str], as_user: &std::path::Path| {
        let out = cluster.kubectl(as_user, args);
        assert!(out.success, "kubectl {args:?}: {}", out.stderr);
        transcript.borrow_mut().push_str(&format!("$ kubectl {}\n{}{}\n", args.join(" "), out.stderr, out.stdout));
    };
    let check = |args: &[&str]| {
        let (code, text) = run_cli(args);
        transcript.borrow_mut().push_str(&format!(
            "$ ingress-status-guard {}\n{text}$ echo $?\n{}\n\n",
            args.join(" "),
            code.unwrap_or(-1)
        ));
        code
    };
    // Fixed names, as in the guide, in a control plane of its own: the deploy and cutover
    // guide tests use some of them.
    for (ns, label) in [("ingress-nginx", "gw-migration-a"), ("gateway", "gw-migration-gw"), ("shop", "gw-migration")] {
        let namespace: Namespace = serde_json::from_value(
            json!({"metadata": {"name": ns, "labels": {support::cluster::NAMESPACE_LABEL: label}}}),
        )
        .unwrap();
        Api::<Namespace>::all(admin.clone()).create(&PostParams::default(), &namespace).await.unwrap();
    }
    let services: Api<Service> = Api::namespaced(admin.clone(), "ingress-nginx");
    let service: Service = serde_json::from_value(json!({"metadata": {"name": "ingress-nginx-controller"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}})).unwrap();
    services.create(&PostParams::default(), &service).await.unwrap();
    let lb = json!({"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}]}}});
    services.patch_status("ingress-nginx-controller", &PatchParams::default(), &Patch::Merge(&lb)).await.unwrap();
    let shop: Api<Ingress> = Api::namespaced(admin.clone(), "shop");
    let nginx = cluster
        .kubeconfig_for("system:serviceaccount:ingress-nginx:ingress-nginx", Some(support::cluster::STATUS_WRITERS));
    for name in ["web", "api"] {
        create_ingress(&shop, name, Class::Field("nginx")).await;
        let patch = r#"{"status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.10"}]}}}"#;
        let out = cluster.kubectl(
            &nginx,
            &["patch", "ingress", name, "-n", "shop", "--subresource=status", "--type=merge", "-p", patch],
        );
        assert!(out.success, "{}", out.stderr);
    }

    // The new implementation: a GatewayClass, a Gateway, and the status its controller writes.
    create_gateway_class(&admin, "eg", "gateway.envoyproxy.io/gatewayclass-controller").await;
    create_gateway(&gateway::gateways(&admin, "gateway"), "public", "eg").await;
    let envoy = cluster.kubeconfig_for(
        "system:serviceaccount:envoy-gateway-system:envoy-gateway",
        Some(support::cluster::STATUS_WRITERS),
    );
    let status = json!({"status": gateway_status(&["203.0.113.30"], true, 1)}).to_string();
    let out = cluster.kubectl(
        &envoy,
        &["patch", "gateway", "public", "-n", "gateway", "--subresource=status", "--type=merge", "-p", &status],
    );
    assert!(out.success, "{}", out.stderr);

    // Pinned to the old controller's Service.
    let policy =
        |source: &str| format!("policies:\n  - name: ingress-nginx\n    ingressClasses: [nginx]\n    {source}\n");
    let old = policy("publishService: ingress-nginx/ingress-nginx-controller");
    let new = policy("publishGateway: gateway/public");
    let dir = cluster.scratch_dir("gw-migration");
    let (config, cutover) = (dir.join("config.yaml"), dir.join("cutover.yaml"));
    let write_config = |text: &str| {
        // As the kubelet swaps a ConfigMap volume: a new file renamed over the old one.
        let tmp = dir.join(".config.yaml.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &config).unwrap();
    };
    write_config(&old);
    std::fs::write(&cutover, &new).unwrap();
    let config_flag = format!("--config={}", config.display());
    let lease = format!("--leader-election-namespace={}", t.ns);
    let args = [
        config_flag.as_str(),
        "--reconcile=true",
        &lease,
        "--leader-election-lease-duration=4s",
        "--leader-election-renew-deadline=3s",
        "--leader-election-retry-period=1s",
    ];
    let webhook = Webhook::start(cluster, "gw-migration", kubeconfig, &args).await;
    webhook.register(&admin, "gw-migration", FailurePolicy::Ignore).await;
    let kubeconfig_flag = format!("--kubeconfig={}", kubeconfig.display());
    let cutover_flag = format!("--config={}", cutover.display());
    kubectl(&["get", "gateway", "-n", "gateway"], kubeconfig);
    kubectl(&["get", "ingress", "-n", "shop"], kubeconfig);
    assert_eq!(check(&["check", &kubeconfig_flag, &config_flag]), Some(0));
    // Before the cutover: what the Gateway policy would change.
    assert_eq!(
        check(&["check", &kubeconfig_flag, &cutover_flag]),
        Some(1),
        "the cutover policy sees drift before it is loaded"
    );

    // The cutover: one line of the policy file.
    write_config(&new);
    let all_at = |want: &'static str| {
        let shop = shop.clone();
        move || {
            let shop = shop.clone();
            async move {
                for name in ["web", "api"] {
                    let got = stored(&shop, name).await;
                    if got != [want] {
                        return Err(format!("shop/{name} stores {got:?}"));
                    }
                }
                Ok(())
            }
        }
    };
    eventually(
        &format!("every Ingress moves to the Gateway (log: {})", webhook.log_path().display()),
        SETTLE,
        all_at("203.0.113.30"),
    )
    .await;
    kubectl(&["get", "ingress", "-n", "shop"], kubeconfig);
    assert_eq!(check(&["check", &kubeconfig_flag, &config_flag]), Some(0));
    // The old controller keeps writing its address: rewritten to the Gateway's.
    let patch = r#"{"status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.10"}]}}}"#;
    let out = cluster.kubectl(
        &nginx,
        &["patch", "ingress", "api", "-n", "shop", "--subresource=status", "--type=merge", "-p", patch],
    );
    transcript.borrow_mut().push_str(&format!(
        "$ kubectl patch ingress api -n shop --subresource=status --type=merge -p {patch}\n{}{}\n",
        out.stderr, out.stdout
    ));
    assert_eq!(stored(&shop, "api").await, ["203.0.113.30"]);

    // Rollback: the same line back.
    write_config(&old);
    eventually("every Ingress moves back", SETTLE, all_at("203.0.113.10")).await;
    kubectl(&["get", "ingress", "-n", "shop"], kubeconfig);
    let log: Vec<String> = webhook
        .log()
        .lines()
        .filter(|l| {
            l.contains("reconciled stored status")
                || l.contains("policy reloaded")
                || l.contains("publish Gateway resolved")
        })
        .map(str::to_owned)
        .collect();
    println!("--- transcript ---\n{}--- log ---\n{}", transcript.borrow(), log.join("\n"));
}
