//! End-to-end tests of issue 11 through a real kube-apiserver + etcd (see `support`): the
//! node-IP source over Node and Pod objects made here (Pod conditions set through the status
//! subresource, as a kubelet would), matching by IngressClass controller, the default
//! IngressClass, `namespaceSelector`, and a policy with several sources.
//!
//! A test binary of its own: it creates a default IngressClass, which the API server's
//! `DefaultIngressClass` admission applies to every class-less Ingress created afterwards, so
//! every other Ingress here names its class.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::IngressClass;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use support::{Class, FailurePolicy, TestEnv, Webhook, addresses, create_ingress, eventually, stored, write_status};

const ROGUE: &str = "198.51.100.99";

/// Creates Node `name` and sets its `status.addresses` (`(type, address)` pairs).
async fn create_node(admin: &kube::Client, name: &str, addrs: &[(&str, &str)]) {
    let nodes: Api<Node> = Api::all(admin.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name}})).expect("Node");
    nodes.create(&PostParams::default(), &node).await.unwrap_or_else(|e| panic!("create Node {name}: {e}"));
    let list: Vec<_> = addrs.iter().map(|(t, a)| json!({"type": t, "address": a})).collect();
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(json!({"status": {"addresses": list}})))
        .await
        .unwrap_or_else(|e| panic!("set addresses of Node {name}: {e}"));
}

/// Creates Pod `name` labelled `app=ctrl` on `node`, and sets its phase to Running with the
/// Ready condition `ready`, as the kubelet would.
async fn create_pod(admin: &kube::Client, ns: &str, name: &str, node: &str, ready: bool) {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "ctrl"}},
        "spec": {"nodeName": node, "automountServiceAccountToken": false,
                 "containers": [{"name": "c", "image": "registry.invalid/controller:1"}]}
    }))
    .expect("Pod");
    pods.create(&PostParams::default(), &pod).await.unwrap_or_else(|e| panic!("create Pod {name}: {e}"));
    set_ready(admin, ns, name, ready).await;
}

async fn set_ready(admin: &kube::Client, ns: &str, name: &str, ready: bool) {
    let status = if ready { "True" } else { "False" };
    Api::<Pod>::namespaced(admin.clone(), ns)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": status, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})),
        )
        .await
        .unwrap_or_else(|e| panic!("set status of Pod {name}: {e}"));
}

/// The namespace's `default` ServiceAccount, which Pod admission looks up (no controller
/// manager runs here to create it).
async fn default_service_account(admin: &kube::Client, ns: &str) {
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "default"}})).expect("SA");
    Api::<ServiceAccount>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &sa)
        .await
        .unwrap_or_else(|e| panic!("create ServiceAccount {ns}/default: {e}"));
}

/// Three nodes (external+internal, internal only, external for a pod that is not Ready) and a
/// Pod on each; node names carry the namespace, as Nodes are cluster-wide.
async fn controller_pods_on_nodes(t: &TestEnv) -> [String; 3] {
    default_service_account(&t.admin, &t.ns).await;
    let names = ["a", "b", "c"].map(|n| format!("{}-{n}", t.ns));
    create_node(&t.admin, &names[0], &[("ExternalIP", "203.0.113.1"), ("InternalIP", "10.1.0.1")]).await;
    create_node(&t.admin, &names[1], &[("InternalIP", "10.1.0.2"), ("Hostname", "node-b")]).await;
    create_node(&t.admin, &names[2], &[("ExternalIP", "203.0.113.3"), ("InternalIP", "10.1.0.3")]).await;
    create_pod(&t.admin, &t.ns, "ctrl-a", &names[0], true).await;
    create_pod(&t.admin, &t.ns, "ctrl-b", &names[1], true).await;
    create_pod(&t.admin, &t.ns, "ctrl-c", &names[2], false).await;
    names
}

/// Rogue writes to Ingress `name` end up stored as `want` (the caches follow asynchronously).
async fn rogue_write_becomes(t: &TestEnv, webhook: &Webhook, name: &str, want: &[&str]) {
    eventually(
        &format!(
            "a rogue write on {}/{name} is stored as {want:?} (webhook log: {})",
            t.ns,
            webhook.log_path().display()
        ),
        Duration::from_secs(30),
        || async {
            let got = addresses(&write_status(&t.rogue, name, &[ROGUE], false).await.map_err(|e| e.to_string())?);
            if got == want { Ok(()) } else { Err(format!("stored {got:?}")) }
        },
    )
    .await;
}

/// Case 1: node IPs of the nodes that run Running and Ready controller Pods: all ExternalIPs,
/// or the InternalIPs of a node without one; a Pod that is not Ready does not count. A Pod that
/// becomes Ready on a new node adds its node's address without a restart.
#[tokio::test]
async fn node_ip_source_follows_ready_pods_and_their_nodes() {
    let t = TestEnv::new("nodeip").await;
    controller_pods_on_nodes(&t).await;
    let ns_flag = format!("--publish-pods-namespace={}", t.ns);
    let webhook = t.start_webhook(&[&ns_flag, "--publish-pods-selector=app=ctrl"]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::Field("any"), &["10.1.0.2", "203.0.113.1"]).await;

    let fourth = format!("{}-d", t.ns);
    create_node(&t.admin, &fourth, &[("ExternalIP", "203.0.113.4")]).await;
    create_pod(&t.admin, &t.ns, "ctrl-d", &fourth, true).await;
    create_ingress(&t.ingresses, "web", Class::Field("any")).await;
    rogue_write_becomes(&t, &webhook, "web", &["10.1.0.2", "203.0.113.1", "203.0.113.4"]).await;

    // The Pod that was not Ready becomes Ready: its node's ExternalIP joins.
    set_ready(&t.admin, &t.ns, "ctrl-c", true).await;
    rogue_write_becomes(&t, &webhook, "web", &["10.1.0.2", "203.0.113.1", "203.0.113.3", "203.0.113.4"]).await;
}

/// Case 2: `--report-node-internal-ip-address` publishes InternalIPs even where a node has an
/// ExternalIP.
#[tokio::test]
async fn report_node_internal_ip_address() {
    let t = TestEnv::new("nodeinternal").await;
    controller_pods_on_nodes(&t).await;
    let ns_flag = format!("--publish-pods-namespace={}", t.ns);
    let webhook = t
        .start_webhook(&[&ns_flag, "--publish-pods-selector=app in (ctrl)", "--report-node-internal-ip-address"])
        .await;
    t.register(&webhook, FailurePolicy::Fail, Class::Field("any"), &["10.1.0.1", "10.1.0.2"]).await;
}

async fn create_ingress_class(admin: &kube::Client, name: &str, controller: &str, default: bool) {
    let mut class = json!({"metadata": {"name": name}, "spec": {"controller": controller}});
    if default {
        class["metadata"]["annotations"] = json!({"ingressclass.kubernetes.io/is-default-class": "true"});
    }
    let class: IngressClass = serde_json::from_value(class).expect("IngressClass");
    Api::<IngressClass>::all(admin.clone())
        .create(&PostParams::default(), &class)
        .await
        .unwrap_or_else(|e| panic!("create IngressClass {name}: {e}"));
}

/// A rogue write on Ingress `name` in `ns` is stored as written, and the API server's audit log
/// shows the webhook was called and changed nothing: not governed, not merely unregistered.
async fn stays_ungoverned(t: &TestEnv, webhook: &Webhook, ns: &str, name: &str) {
    let rogue: Api<k8s_openapi::api::networking::v1::Ingress> = Api::namespaced(t.cluster.rogue().await, ns);
    eventually(
        &format!("the webhook is called for {ns}/{name} and leaves it (webhook log: {})", webhook.log_path().display()),
        Duration::from_secs(30),
        || async {
            let got = addresses(&write_status(&rogue, name, &[ROGUE], false).await.map_err(|e| e.to_string())?);
            if got != [ROGUE] {
                return Err(format!("stored {got:?}"));
            }
            let audit = t.cluster.ingress_status_audit(ns, name);
            let called = audit.iter().any(|e| {
                e["annotations"].as_object().is_some_and(|a| {
                    a.iter().any(|(k, v)| {
                        k.starts_with("mutation.webhook") && v.as_str().is_some_and(|v| v.contains("\"mutated\":false"))
                    })
                })
            });
            if called { Ok(()) } else { Err("the webhook was not called yet".into()) }
        },
    )
    .await;
}

/// Case 3: `--controller-class` governs an Ingress whose IngressClass names the controller,
/// and leaves one whose class names another controller.
#[tokio::test]
async fn controller_class_governs_by_the_ingress_class_controller() {
    let t = TestEnv::new("ctrlclass").await;
    let (ours, theirs) = (format!("{}-ours", t.ns), format!("{}-theirs", t.ns));
    let controller = format!("example.com/{}", t.ns);
    create_ingress_class(&t.admin, &ours, &controller, false).await;
    create_ingress_class(&t.admin, &theirs, "example.com/someone-else", false).await;
    let flag = format!("--controller-class={controller}");
    let webhook = t.start_webhook(&[&flag, "--publish-status-address=192.0.2.10"]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::Field(&ours), &["192.0.2.10"]).await;
    // The legacy annotation names the class too.
    t.await_governed(&webhook, "annotated", Class::Annotation(&ours), &["192.0.2.10"]).await;

    create_ingress(&t.ingresses, "other", Class::Field(&theirs)).await;
    stays_ungoverned(&t, &webhook, &t.ns, "other").await;
}

/// Case 4: the default IngressClass governs a class-less Ingress when its controller is the
/// policy's.
#[tokio::test]
async fn default_ingress_class_governs_class_less_ingresses() {
    let t = TestEnv::private("defaultclass").await;
    // Created before the default class exists, so the API server leaves it class-less.
    create_ingress(&t.ingresses, "web", Class::None).await;
    let class = format!("{}-default", t.ns);
    let controller = format!("example.com/{}", t.ns);
    create_ingress_class(&t.admin, &class, &controller, true).await;
    let flag = format!("--controller-class={controller}");
    let webhook = t.start_webhook(&[&flag, "--publish-status-address=192.0.2.20"]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::Field(&class), &["192.0.2.20"]).await;

    let ingress = t.ingresses.get("web").await.expect("get web");
    assert_eq!(ingress.spec.and_then(|s| s.ingress_class_name), None, "the Ingress is class-less");
    rogue_write_becomes(&t, &webhook, "web", &["192.0.2.20"]).await;
}

/// Writes a policy file for one test and returns its `--config` flag.
fn config_flag(t: &TestEnv, yaml: &str) -> String {
    let path = t.cluster.scratch_dir(&format!("config-{}", t.ns)).join("policies.yaml");
    std::fs::write(&path, yaml).expect("write policy file");
    format!("--config={}", path.display())
}

async fn label_namespace(admin: &kube::Client, ns: &str, labels: serde_json::Value) {
    Api::<Namespace>::all(admin.clone())
        .patch(ns, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": labels}})))
        .await
        .unwrap_or_else(|e| panic!("label namespace {ns}: {e}"));
}

/// Case 5: `namespaceSelector` governs a labelled namespace and not an unlabelled one;
/// relabelling moves a namespace in and out without a restart.
#[tokio::test]
async fn namespace_selector_follows_namespace_labels() {
    let t = TestEnv::new("nssel").await;
    label_namespace(&t.admin, &t.ns, json!({"isg-team": "blue"})).await;
    let other = t.cluster.namespace(&t.admin, "nssel-other").await;
    let flag = config_flag(
        &t,
        "policies:\n  - name: blue\n    namespaceSelector: isg-team=blue\n    publishStatusAddress: 192.0.2.30\n",
    );
    let webhook = t.start_webhook(&[&flag]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::Field("any"), &["192.0.2.30"]).await;
    webhook.register(&t.admin, &other, FailurePolicy::Fail).await;

    let other_ingresses = Api::namespaced(t.admin.clone(), &other);
    create_ingress(&other_ingresses, "web", Class::Field("any")).await;
    stays_ungoverned(&t, &webhook, &other, "web").await;

    // The team moves: its namespace is now governed, the first one no longer.
    label_namespace(&t.admin, &other, json!({"isg-team": "blue"})).await;
    label_namespace(&t.admin, &t.ns, json!({"isg-team": null})).await;
    let rogue_other: Api<k8s_openapi::api::networking::v1::Ingress> = Api::namespaced(t.cluster.rogue().await, &other);
    eventually(
        &format!("a rogue write in relabelled {other} is rewritten (webhook log: {})", webhook.log_path().display()),
        Duration::from_secs(30),
        || async {
            let got = addresses(&write_status(&rogue_other, "web", &[ROGUE], false).await.map_err(|e| e.to_string())?);
            if got == ["192.0.2.30"] { Ok(()) } else { Err(format!("stored {got:?}")) }
        },
    )
    .await;
    eventually("the unlabelled namespace is left alone", Duration::from_secs(30), || async {
        let got = addresses(&write_status(&t.rogue, "probe", &[ROGUE], false).await.map_err(|e| e.to_string())?);
        if got == [ROGUE] { Ok(()) } else { Err(format!("stored {got:?}")) }
    })
    .await;
}

/// Case 6: one policy with a Service and a static list publishes their union; when the
/// Service goes away, the static part is still published.
#[tokio::test]
async fn union_of_a_service_and_a_static_list() {
    let t = TestEnv::new("union").await;
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "edge"},
        "spec": {"type": "NodePort", "externalIPs": ["203.0.113.60"], "ports": [{"port": 80}]}
    }))
    .expect("Service");
    services.create(&PostParams::default(), &svc).await.expect("create Service edge");
    let yaml = format!(
        "policies:\n  - name: union\n    ingressClasses: [guarded]\n    watchIngressWithoutClass: true\n    sources:\n      - publishService: {}/edge\n      - publishStatusAddress: lb.example.com, 192.0.2.40\n",
        t.ns
    );
    let webhook = t.start_webhook(&[&config_flag(&t, &yaml)]).await;
    t.register(
        &webhook,
        FailurePolicy::Fail,
        Class::Field("guarded"),
        &["192.0.2.40", "203.0.113.60", "lb.example.com"],
    )
    .await;

    services.delete("edge", &Default::default()).await.expect("delete Service edge");
    create_ingress(&t.ingresses, "web", Class::Field("guarded")).await;
    rogue_write_becomes(&t, &webhook, "web", &["192.0.2.40", "lb.example.com"]).await;
    assert_eq!(stored(&t.ingresses, "web").await, ["192.0.2.40", "lb.example.com"]);
    let log = webhook.log();
    assert!(
        log.contains("some sources of the policy are unresolved"),
        "a warning names the partial resolution:\n{log}"
    );
}

/// The `ports` of an Ingress's first status entry, as `(port, protocol, error)`.
fn ports_of(ingress: &k8s_openapi::api::networking::v1::Ingress) -> Vec<(i32, String, Option<String>)> {
    let entries = ingress.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|lb| lb.ingress.clone());
    let first = entries.unwrap_or_default().into_iter().next().unwrap_or_default();
    first.ports.unwrap_or_default().into_iter().map(|p| (p.port, p.protocol, p.error)).collect()
}

/// Issue 11 section 4: with `--keep-ports`, the load balancer's `ports` (port, protocol and
/// error) are stored exactly as the Service has them, a write that differs only in a port's
/// error is rewritten, and the stored canonical value passes through unchanged.
#[tokio::test]
async fn kept_ports_are_stored_and_compared_exactly() {
    let t = TestEnv::new("ports").await;
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "edge"},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "https", "port": 443}, {"name": "http", "port": 80}]}
    }))
    .expect("Service");
    services.create(&PostParams::default(), &svc).await.expect("create Service edge");
    // Two TCP ports, not TCP and UDP: mixed protocols on a LoadBalancer Service need 1.24+
    // (MixedProtocolLBService), and this test also runs on 1.23.
    let lb = json!({"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.80", "ports": [
        {"port": 443, "protocol": "TCP"},
        {"port": 80, "protocol": "TCP", "error": "Pending"}]}]}}});
    services.patch_status("edge", &PatchParams::default(), &Patch::Merge(&lb)).await.expect("set the load balancer");
    let flag = format!("--publish-service={}/edge", t.ns);
    let webhook = t.start_webhook(&[&flag, "--keep-ports"]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::Field("any"), &["203.0.113.80:443:80"]).await;

    let want = vec![(443, "TCP".to_owned(), None), (80, "TCP".to_owned(), Some("Pending".to_owned()))];
    assert_eq!(ports_of(&t.ingresses.get("probe").await.expect("get probe")), want, "stored exactly");

    // Same address and ports, another error: not canonical, rewritten.
    let params = PatchParams { field_manager: Some(support::ROGUE_USER.into()), ..PatchParams::default() };
    let almost = json!({"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.80", "ports": [
        {"port": 443, "protocol": "TCP"}, {"port": 80, "protocol": "TCP", "error": "Timeout"}]}]}}});
    let answer = t.rogue.patch_status("probe", &params, &Patch::Merge(&almost)).await.expect("rogue write");
    assert_eq!(ports_of(&answer), want, "a different error is rewritten");

    // The canonical value itself gets no patch: the API server records the webhook's call
    // with mutated=false, so there is nothing for a reconciler to loop on.
    let canonical = json!({"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.80", "ports": [
        {"port": 443, "protocol": "TCP"}, {"port": 80, "protocol": "TCP", "error": "Pending"}]}]}}});
    let before = t.cluster.ingress_status_audit(&t.ns, "probe").len();
    t.rogue.patch_status("probe", &params, &Patch::Merge(&canonical)).await.expect("canonical write");
    let audit = t.audited("probe", before + 1).await;
    let last = audit.last().expect("the canonical write is audited");
    assert_eq!(last.mutated, Some(false), "{last:?}");
    assert!(last.patch.is_none(), "no patch for the canonical value: {last:?}");
}
