//! What the guard in `--admission=policy` renders from its caches, each source kind and mode
//! through a real kube-apiserver: the node-IP source grows with a Pod turning Ready on a new
//! node; controller and default classes follow the IngressClasses (in a control plane of their
//! own: a default IngressClass changes every class-less Ingress created after it); `audit`
//! renders no mutation and `deny` refuses with the canonical value.

use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use super::guard::{LEASE, get_object, rewritten_to, start_guard};
use super::{WAIT, addresses_of, lease_of};
use crate::support::{Class, Cluster, SENTINEL, TestEnv, Webhook, create_ingress, eventually, stored, write_status};

async fn create_node(admin: &kube::Client, name: &str, external_ip: &str) {
    let nodes: Api<Node> = Api::all(admin.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.expect("create Node");
    let status = json!({"status": {"addresses": [{"type": "ExternalIP", "address": external_ip}]}});
    nodes.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.expect("Node addresses");
}

/// A controller Pod on `node`, Running, Ready as `ready` (set as a kubelet would).
async fn controller_pod(admin: &kube::Client, ns: &str, name: &str, node: &str, ready: bool) {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), ns);
    if pods.get_opt(name).await.unwrap().is_none() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": "ctrl"}},
            "spec": {"nodeName": node, "automountServiceAccountToken": false,
                     "containers": [{"name": "c", "image": "registry.invalid/controller:1"}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.expect("create Pod");
    }
    let ready = if ready { "True" } else { "False" };
    let status = json!({"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": ready, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.expect("Pod status");
}

/// The node-IP source: the MAP carries the ExternalIPs of the nodes of Ready controller Pods,
/// and a Pod turning Ready on a new node grows it.
#[tokio::test]
async fn a_pod_turning_ready_on_a_new_node_grows_the_rendered_value() {
    let t = TestEnv::new("mapn").await;
    let dir = t.cluster.scratch_dir(&format!("mapn-{}", t.ns));
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap();
    Api::<ServiceAccount>::namespaced(t.admin.clone(), &t.ns).create(&PostParams::default(), &sa).await.unwrap();
    let (a, b) = (format!("{}-a", t.ns), format!("{}-b", t.ns));
    create_node(&t.admin, &a, "203.0.113.41").await;
    create_node(&t.admin, &b, "203.0.113.42").await;
    controller_pod(&t.admin, &t.ns, "ctrl-a", &a, true).await;
    controller_pod(&t.admin, &t.ns, "ctrl-b", &b, false).await;
    let cfg = dir.join("policies.yaml");
    std::fs::write(
        &cfg,
        format!(
            "policies:\n  - name: {ns}\n    ingressClasses: [{ns}]\n    publishPods: {{namespace: {ns}, selector: app=ctrl}}\n",
            ns = t.ns
        ),
    )
    .unwrap();
    let guard = start_guard(&t, &cfg).await;
    create_ingress(&t.ingresses, "web", Class::Field(&t.ns)).await;
    rewritten_to(&t.rogue, "web", &["203.0.113.41"], &guard.log_path()).await;
    controller_pod(&t.admin, &t.ns, "ctrl-b", &b, true).await;
    rewritten_to(&t.rogue, "web", &["203.0.113.41", "203.0.113.42"], &guard.log_path()).await;
}

/// `audit` becomes a ValidatingAdmissionPolicy with the Warn and Audit actions: no
/// MutatingAdmissionPolicy, the write stored as written; `deny` refuses it, naming the value.
#[tokio::test]
async fn audit_renders_no_mutation_and_deny_refuses() {
    let t = TestEnv::new("mapm").await;
    let dir = t.cluster.scratch_dir(&format!("mapm-{}", t.ns));
    let (audited, denied) = (format!("{}-audit", t.ns), format!("{}-deny", t.ns));
    let cfg = dir.join("policies.yaml");
    std::fs::write(
        &cfg,
        format!(
            "policies:\n  - name: {audited}\n    ingressClasses: [{audited}]\n    publishStatusAddress: 192.0.2.51\n    mode: audit\n\
             \x20 - name: {denied}\n    ingressClasses: [{denied}]\n    publishStatusAddress: 192.0.2.52\n    mode: deny\n"
        ),
    )
    .unwrap();
    let guard = start_guard(&t, &cfg).await;
    create_ingress(&t.ingresses, "audited", Class::Field(&audited)).await;
    create_ingress(&t.ingresses, "denied", Class::Field(&denied)).await;
    let message = eventually("the deny policy refuses", WAIT, || async {
        match write_status(&t.rogue, "denied", &[SENTINEL], false).await {
            Err(kube::Error::Api(status)) => Ok(status.message),
            other => Err(format!("not refused: {other:?}; {}", guard.log_tail())),
        }
    })
    .await;
    assert!(
        message.contains(&format!("policy \"{denied}\" requires status.loadBalancer.ingress [192.0.2.52]")),
        "{message}"
    );
    // The audit policy is the file's first: slot 0.
    let name = format!("{}-ingress-0", lease_of(&t.ns));
    let policy = get_object(&t, "validatingadmissionpolicy", &name).expect("the audit policy's VAP");
    assert_eq!(policy["metadata"]["annotations"]["ingress-status-guard/policy"], audited.as_str());
    assert!(get_object(&t, "mutatingadmissionpolicy", &name).is_none(), "audit mutates nothing");
    let binding = get_object(&t, "validatingadmissionpolicybinding", &name).unwrap();
    assert_eq!(binding["spec"]["validationActions"], json!(["Warn", "Audit"]));
    write_status(&t.rogue, "audited", &[SENTINEL], false).await.expect("audit allows");
    assert_eq!(stored(&t.ingresses, "audited").await, [SENTINEL], "stored as written");
}

async fn create_class(admin: &kube::Client, name: &str, controller: &str) {
    let class: IngressClass =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"controller": controller}})).unwrap();
    Api::<IngressClass>::all(admin.clone()).create(&PostParams::default(), &class).await.expect("IngressClass");
}

async fn set_default(admin: &kube::Client, name: &str, default: bool) {
    let value = if default { json!("true") } else { json!(null) };
    let patch = json!({"metadata": {"annotations": {"ingressclass.kubernetes.io/is-default-class": value}}});
    Api::<IngressClass>::all(admin.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("relabel the IngressClass");
}

/// Writes to `name` until one is stored as written (the class-less Ingress not governed).
async fn stored_as_written(ingresses: &Api<Ingress>, name: &str, guard: &Webhook) {
    eventually(&format!("{name} is not governed"), WAIT, || async {
        let got = addresses_of(write_status(ingresses, name, &[SENTINEL], false).await.map_err(|e| e.to_string())?);
        if got == [SENTINEL] { Ok(()) } else { Err(format!("stored {got:?}; {}", guard.log_tail())) }
    })
    .await;
}

/// A controller-class policy: the rendered class condition follows the IngressClasses. A
/// class-less Ingress is governed while the default class is one of the controller's, and no
/// longer once the default is relabelled; a class of the controller created later is governed.
#[tokio::test]
async fn controller_and_default_classes_follow_the_cluster() {
    let cluster = Cluster::fresh().await;
    let admin = cluster.admin().await;
    let ns = cluster.namespace(&admin, "mapc").await;
    let ingresses: Api<Ingress> = Api::namespaced(admin.clone(), &ns);
    let controller = "example.com/isg-policy-mode";
    create_class(&admin, "main", controller).await;
    create_class(&admin, "foreign", "example.com/someone-else").await;
    // Created before any class is the default: the DefaultIngressClass admission would give
    // a class-less Ingress created later the default's name.
    create_ingress(&ingresses, "classless", Class::None).await;
    create_ingress(&ingresses, "main", Class::Field("main")).await;
    create_ingress(&ingresses, "foreign", Class::Field("foreign")).await;
    create_ingress(&ingresses, "late", Class::Field("late")).await;

    let dir = cluster.scratch_dir("mapc");
    let cfg = dir.join("policies.yaml");
    std::fs::write(
        &cfg,
        format!(
            "policies:\n  - name: ctl\n    controllerClasses: [{controller}]\n    publishStatusAddress: 192.0.2.61\n"
        ),
    )
    .unwrap();
    let (config, lease_ns) = (format!("--config={}", cfg.display()), format!("--leader-election-namespace={ns}"));
    let mut args = vec!["--admission=policy", &config, &lease_ns];
    args.extend(LEASE);
    let guard = Webhook::start(&cluster, "mapc", cluster.admin_kubeconfig(), &args).await;
    rewritten_to(&ingresses, "main", &["192.0.2.61"], &guard.log_path()).await;
    stored_as_written(&ingresses, "foreign", &guard).await;
    stored_as_written(&ingresses, "classless", &guard).await;

    set_default(&admin, "main", true).await;
    rewritten_to(&ingresses, "classless", &["192.0.2.61"], &guard.log_path()).await;
    set_default(&admin, "main", false).await;
    stored_as_written(&ingresses, "classless", &guard).await;
    // The default Lease's first Ingress slot: the control plane is this test's own.
    let out = cluster.kubectl(
        cluster.admin_kubeconfig(),
        &[
            "get",
            "mutatingadmissionpolicy",
            "ingress-status-guard-ingress-0",
            "-o",
            "jsonpath={.spec.matchConditions[0].expression}",
        ],
    );
    assert!(out.stdout.contains("[\"main\"]") && out.stdout.ends_with(": false)"), "{}", out.stdout);

    create_class(&admin, "late", controller).await;
    rewritten_to(&ingresses, "late", &["192.0.2.61"], &guard.log_path()).await;
    stored_as_written(&ingresses, "foreign", &guard).await;
}
