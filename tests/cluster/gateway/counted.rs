//! The Gateway API watches count their failures in `watch_errors_total{watch}`: a guard whose
//! identity may read Ingresses but not Gateways or GatewayClasses, on the real CRDs.

use serde_json::json;

use super::support::{TestEnv, eventually};
use super::{SETTLE, guard_args};

/// Forbidden Gateway, GatewayClass and publish-Gateway watches are counted, each under its own
/// `watch`, while the guard stays ready (the reconciler's watch is not part of readiness, and the
/// source watches arrive by a reload, which never takes a serving guard out of its endpoints).
#[tokio::test]
async fn forbidden_gateway_watches_are_counted_by_watch() {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    use kube::api::{Api, PostParams};
    let t = TestEnv::new("gw-counted").await;
    t.cluster.install_gateway_crds().await;
    let ns = &t.ns;
    // Ingresses only: what the guard needs for an Ingress-side start-up, and nothing of the
    // Gateway API.
    let group = format!("isg-e2e:{ns}-no-gateways");
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": group},
        "rules": [
            {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses/status"], "verbs": ["patch"]}
        ]
    }))
    .unwrap();
    Api::<ClusterRole>::all(t.admin.clone()).create(&PostParams::default(), &role).await.expect("ClusterRole");
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": group},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": group},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(t.admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("ClusterRoleBinding");
    let kubeconfig = t.cluster.kubeconfig_for(&format!("{ns}-guard"), Some(&group));

    let first = format!("policies:\n  - {{name: gw, gatewayClasses: [{ns}], publishStatusAddress: 192.0.2.90}}\n");
    let args = guard_args(&t, &first);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let guard = super::support::Webhook::start(t.cluster, ns, &kubeconfig, &args).await;
    let errors = |watch: &str| guard.metric(&format!("ingress_status_guard_watch_errors_total{{watch=\"{watch}\"}}"));
    eventually(
        &format!("the reconciler's Gateway watch counts 403s (log: {})", guard.log_path().display()),
        SETTLE,
        || async {
            let n = errors("gateways");
            if n >= 1.0 { Ok(()) } else { Err(format!("gateways {n}")) }
        },
    )
    .await;
    assert_eq!(errors("ingresses"), 0.0, "the Ingress watch may list Ingresses");

    // A reload adds a GatewayClass watch (by controller) and a publish-Gateway watch.
    let config = args[0].strip_prefix("--config=").expect("guard_args starts with --config");
    let second = format!(
        "{first}  - {{name: ctl, gatewayControllers: [example.com/ctl-{ns}], publishStatusAddress: 192.0.2.91}}\n  - {{name: cut, ingressClasses: [{ns}], publishGateway: {ns}/edge}}\n"
    );
    let staged = format!("{config}.new");
    std::fs::write(&staged, second).unwrap();
    std::fs::rename(&staged, config).unwrap();
    eventually(
        &format!("the GatewayClass and publish-Gateway watches count 403s (log: {})", guard.log_path().display()),
        SETTLE,
        || async {
            let (classes, publish) = (errors("gatewayclasses"), errors("publish-gateway"));
            if classes >= 1.0 && publish >= 1.0 {
                Ok(())
            } else {
                Err(format!("gatewayclasses {classes}, publish-gateway {publish}"))
            }
        },
    )
    .await;
    assert_eq!(guard.readyz(), Some(200), "a reload never takes a serving guard out of its endpoints");
    assert_eq!(guard.metric("ingress_status_guard_ingress_watch_errors_total"), 0.0, "Ingress-only counter");
}
