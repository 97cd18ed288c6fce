//! MetalLB's controller as the trusted writer of a LoadBalancer Service: MetalLB v0.15.2
//! (`tests/metallb/build.sh`), its CRDs and RBAC from the same module, run outside the cluster
//! against a control plane of the test's own, allocates the one address of an `IPAddressPool`
//! to a Service without `loadBalancerClass` and writes it; a Service policy trusting MetalLB's
//! identity lets the address stand, with the annotation MetalLB sets in the same status update
//! (the pool's name), reports nothing of it, and puts a second identity's write back to
//! MetalLB's.
//!
//! A private control plane: MetalLB without `--lb-class` takes every LoadBalancer Service
//! without a class, cluster-wide, which would include other tests' Services on the shared one.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::service::{create_service, ingress_of, register_services, stored_ips, two_controllers, write_status};
use crate::support::cluster::{NAMESPACE_LABEL, free_port};
use crate::support::process;
use crate::support::{TestEnv, eventually};

/// How long a step that settles by itself may take on a loaded machine (a failure message,
/// never a measured bound).
const SETTLE: Duration = Duration::from_secs(120);
/// The pool's only address.
const POOL_IP: &str = "192.0.2.80";
/// The annotation MetalLB's controller sets in its status update: the pool it allocated from.
const POOL_ANNOTATION: &str = "metallb.io/ip-allocated-from-pool";
/// What the second identity writes.
const OTHER_IP: &str = "198.51.100.20";

/// Runs `tests/metallb/build.sh` (or takes `ISG_METALLB`) and returns the controller binary;
/// MetalLB's CRDs and RBAC are beside it.
fn binary() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/metallb/build.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = stdout.lines().last().unwrap_or("").trim();
    assert!(out.status.success() && !path.is_empty(), "{} failed ({})", script.display(), out.status);
    PathBuf::from(path)
}

/// `kubectl` as the administrator; panics with its output on failure.
fn kubectl(t: &TestEnv, args: &[&str]) -> String {
    let out = t.cluster.kubectl(t.cluster.admin_kubeconfig(), args);
    assert!(out.success, "kubectl {args:?}: {}{}", out.stdout, out.stderr);
    out.stdout
}

/// MetalLB's own controller RBAC (`config/rbac/role.yaml` of the module: the ClusterRole
/// `metallb-system:controller` and the Role `controller`), bound to ServiceAccount `metallb` of
/// the test's namespace, the identity MetalLB runs as.
async fn metallb_rbac(t: &TestEnv, home: &Path) {
    let file = home.join("rbac/role.yaml");
    // One JSON document per object, one after the other.
    let out = kubectl(t, &["create", "--dry-run=client", "-o", "json", "-f", &file.display().to_string()]);
    let items: Vec<Value> = serde_json::Deserializer::from_str(&out)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .expect("kubectl's JSON");
    let item = |kind: &str, name: &str| {
        items
            .iter()
            .find(|i| i["kind"] == kind && i["metadata"]["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{kind} {name} in {}", file.display()))
    };
    let pp = PostParams::default();
    let mut cluster_role: ClusterRole =
        serde_json::from_value(item("ClusterRole", "metallb-system:controller")).expect("a ClusterRole");
    let cluster_role_name = cluster_role.metadata.name.clone().unwrap();
    cluster_role.metadata.labels = None;
    Api::<ClusterRole>::all(t.admin.clone()).create(&pp, &cluster_role).await.expect("MetalLB's ClusterRole");
    let mut role: Role = serde_json::from_value(item("Role", "controller")).expect("a Role");
    // kubectl fills in its default namespace.
    role.metadata.namespace = None;
    Api::<Role>::namespaced(t.admin.clone(), &t.ns).create(&pp, &role).await.expect("MetalLB's Role");
    let subjects = json!([{"kind": "ServiceAccount", "name": "metallb", "namespace": t.ns}]);
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": format!("{}-metallb", t.ns)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role_name},
        "subjects": subjects,
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(t.admin.clone()).create(&pp, &binding).await.expect("ClusterRoleBinding");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "metallb-controller"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "controller"},
        "subjects": subjects,
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(t.admin.clone(), &t.ns).create(&pp, &binding).await.expect("RoleBinding");
}

/// MetalLB's CRDs, served; then an `IPAddressPool` of `POOL_IP` alone in the test's namespace
/// (the namespace MetalLB reads its configuration from).
async fn pool(t: &TestEnv, home: &Path) {
    kubectl(t, &["apply", "--server-side", "--field-manager=isg-e2e", "-f", &home.join("crds").display().to_string()]);
    let file = t.cluster.scratch_dir(&format!("metallb-{}", t.ns)).join("pool.yaml");
    let pool = json!({
        "apiVersion": "metallb.io/v1beta1",
        "kind": "IPAddressPool",
        "metadata": {"name": "only", "namespace": t.ns},
        "spec": {"addresses": [format!("{POOL_IP}/32")]},
    });
    std::fs::write(&file, pool.to_string()).expect("write the pool");
    // The CRD is served a moment after it is created.
    eventually("the IPAddressPool is created", SETTLE, || async {
        let out = t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["apply", "-f", &file.display().to_string()]);
        if out.success { Ok(()) } else { Err(format!("{}{}", out.stdout, out.stderr)) }
    })
    .await;
}

#[tokio::test]
async fn metallb_is_the_trusted_writer_of_a_load_balancer_service() {
    let t = TestEnv::private("metallb").await;
    let ns = &t.ns;
    let admin: Api<Service> = Api::namespaced(t.admin.clone(), ns);
    let binary = tokio::task::spawn_blocking(binary).await.expect("the build's thread");
    let home = binary.parent().expect("the binary's directory").to_path_buf();
    // MetalLB runs as the first of the two controllers; the second is the rogue writer.
    let (_, kube_vip, metallb_user, second) = two_controllers(&t).await;
    metallb_rbac(&t, &home).await;
    pool(&t, &home).await;

    let file = t.cluster.scratch_dir(&format!("config-{ns}")).join("config.yaml");
    std::fs::write(
        &file,
        format!(
            "policies:\n  - {{name: metallb, kind: Service, loadBalancerClasses: [''], namespaceSelector: '{NAMESPACE_LABEL}={ns}', mode: enforce, trustedWriters: ['{metallb_user}']}}\n"
        ),
    )
    .unwrap();
    let webhook = t.start_webhook(&[&format!("--config={}", file.display())]).await;
    register_services(&t, &webhook).await;
    let log = webhook.log_path().display().to_string();

    // Until the API server calls the webhook, the second identity's writes land; once it does,
    // they are put back to the stored (empty) status. A Service of its own, gone before MetalLB
    // starts (the pool has one address).
    create_service(&admin, "probe", "LoadBalancer", None).await;
    eventually(&format!("the webhook governs Service writes (log: {log})"), SETTLE, || async {
        write_status(&kube_vip, "probe", ingress_of(&["198.51.100.1"]), json!({})).await.map_err(|e| e.to_string())?;
        let got = write_status(&kube_vip, "probe", ingress_of(&["198.51.100.2"]), json!({}))
            .await
            .map_err(|e| e.to_string())?;
        if stored_ips(&got) != ["198.51.100.2"] { Ok(()) } else { Err(format!("stored {:?}", stored_ips(&got))) }
    })
    .await;
    admin.delete("probe", &DeleteParams::default()).await.expect("delete the probe Service");
    create_service(&admin, "lb", "LoadBalancer", None).await;

    // MetalLB's controller, with a client certificate of its identity; webhooks off (its own
    // validating webhook needs a Service in the cluster to reach it).
    let dir = t.cluster.scratch_dir(&format!("metallb-run-{ns}"));
    let mut command = Command::new(&binary);
    command
        .arg(format!("--kubeconfig={}", t.cluster.kubeconfig_for(&metallb_user, None).display()))
        .arg(format!("--namespace={ns}"))
        .arg("--webhook-mode=disabled")
        .arg(format!("--port={}", free_port()))
        .arg("--log-level=debug")
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT");
    let mlog = dir.join("metallb.log");
    let _ = std::fs::write(&mlog, format!("$ {command:?}\n"));
    let mut metallb = process::spawn("metallb", command, &mlog).unwrap_or_else(|e| panic!("start metallb: {e}"));

    // MetalLB allocates the pool's address and writes it; the guard lets it stand.
    let stored = eventually(&format!("MetalLB writes {POOL_IP} (its log: {})", mlog.display()), SETTLE, || async {
        let got = admin.get("lb").await.map_err(|e| e.to_string())?;
        if stored_ips(&got) == [POOL_IP] { Ok(got) } else { Err(format!("stored {:?}", stored_ips(&got))) }
    })
    .await;
    let writers: Vec<&str> = stored
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.subresource.as_deref() == Some("status"))
        .filter_map(|m| m.manager.as_deref())
        .collect();
    assert!(
        !writers.is_empty() && !writers.contains(&"isg-e2e-lb-controller"),
        "MetalLB wrote the status: {writers:?}"
    );
    // MetalLB's status update also sets the annotation naming the pool: a trusted writer's
    // write stands as written, metadata included, and is no finding.
    let annotations = stored.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.get(POOL_ANNOTATION).map(String::as_str), Some("only"), "{annotations:?}");
    let trusted_label = format!("writer=\"{metallb_user}\"");
    assert!(!webhook.metrics().lines().any(|l| l.contains(&trusted_label)), "{}", webhook.metrics());
    let writer = format!("\"writer\":\"{metallb_user}\"");
    assert!(!webhook.log().lines().any(|l| l.contains(&writer)), "MetalLB reported (log: {log})");

    // The second identity's writes are put back to MetalLB's, as they are made.
    for round in 0..3 {
        let got = write_status(&kube_vip, "lb", ingress_of(&[OTHER_IP]), json!({})).await.expect("the second's write");
        assert_eq!(stored_ips(&got), [POOL_IP], "round {round}: the second's write is put back (log: {log})");
    }
    let patched =
        format!("ingress_status_guard_rogue_writes_total{{policy=\"metallb\",writer=\"{second}\",action=\"patched\"}}");
    assert!(webhook.metric(&patched) >= 3.0, "every put-back counted, by the writer's name (log: {log})");
    assert_eq!(stored_ips(&admin.get("lb").await.unwrap()), [POOL_IP]);
    assert!(metallb.exited().is_none(), "MetalLB exited\n{}", metallb.log_tail(40));
    assert!(webhook.forbidden_lines().is_empty(), "{:?}", webhook.forbidden_lines());
    metallb.kill();
}
