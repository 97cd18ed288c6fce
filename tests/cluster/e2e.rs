//! End-to-end tests: the built `ingress-status-guard` binary, black box, registered as a
//! mutating webhook in a real kube-apiserver + etcd on 127.0.0.1 (see `support`).
//!
//! Every test makes its own namespace and its own MutatingWebhookConfiguration selecting only
//! that namespace, so tests run in parallel against the one shared API server. Status writes
//! are made by another identity (`rogue-controller`), as a competing controller would.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use support::{
    Class, FailurePolicy, ROGUE_USER, TestEnv, Webhook, addresses, create_ingress, events_about, eventually, stored,
    write_status,
};

/// The harness itself, without the webhook: the API server stores what another identity
/// writes to the status subresource, RBAC is enforced for that identity, and kubectl shows
/// the address.
#[tokio::test]
async fn harness_smoke_apiserver_stores_ingress_status() {
    let t = TestEnv::new("smoke").await;
    create_ingress(&t.ingresses, "web", Class::Field("guarded")).await;

    let written = write_status(&t.rogue, "web", &["198.51.100.1:80", "lb.example.com"], false)
        .await
        .expect("the rogue identity may patch ingresses/status");
    assert_eq!(addresses(&written), ["198.51.100.1:80", "lb.example.com"]);
    assert_eq!(stored(&t.ingresses, "web").await, ["198.51.100.1:80", "lb.example.com"]);

    // The rogue identity is not an administrator: RBAC refuses it the Ingress's spec.
    let denied = t
        .rogue
        .patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"ingressClassName": "other"}})))
        .await
        .expect_err("rogue-controller must not be allowed to patch the spec");
    assert!(matches!(&denied, kube::Error::Api(s) if s.code == 403), "expected 403 Forbidden, got {denied:?}");

    // The audit log records the status write, with no webhook involved.
    let audit = t.audited("web", 1).await;
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].user, ROGUE_USER);
    assert_eq!(audit[0].mutated, None, "{audit:?}");

    let get = t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["get", "ingress", "web", "-n", &t.ns, "--no-headers"]);
    assert!(get.success, "kubectl get failed: {}", get.stderr);
    assert!(get.stdout.contains("198.51.100.1,lb.example.com"), "kubectl shows the ADDRESS: {}", get.stdout);
}

const STATIC_CANONICAL: [&str; 2] = ["192.0.2.10", "lb.example.com"];

/// Case 1: static source. Another identity writes a wrong address (with a port) to a governed
/// Ingress; the stored status is the canonical one, and the API server records that the
/// webhook patched that write.
#[tokio::test]
async fn static_list_replaces_a_rogue_status_write() {
    let t = TestEnv::new("static").await;
    // The space checks that list items are trimmed.
    let webhook =
        t.start_webhook(&["--ingress-class=guarded", "--publish-status-address=192.0.2.10, lb.example.com"]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::Field("guarded"), &STATIC_CANONICAL).await;

    create_ingress(&t.ingresses, "web", Class::Field("guarded")).await;
    let answer = write_status(&t.rogue, "web", &["198.51.100.66:443"], false)
        .await
        .expect("the rogue write is allowed (and rewritten)");
    assert_eq!(addresses(&answer), STATIC_CANONICAL, "what the writer gets back");
    assert_eq!(stored(&t.ingresses, "web").await, STATIC_CANONICAL);

    let audit = t.audited("web", 1).await;
    let last = audit.last().expect("one audit event");
    assert_eq!(last.user, ROGUE_USER);
    assert_eq!(last.mutated, Some(true), "the webhook changed the write: {last:?}");
    assert!(last.patch.is_some(), "the webhook answered with a patch: {last:?}");

    // An Event on the Ingress names the writer.
    let event = t.await_event(&webhook, "web").await;
    let note = event.note.clone().unwrap_or_default();
    assert!(note.contains(ROGUE_USER), "the Event names the writer: {event:?}");
}

/// Case 2: publish Service of type LoadBalancer. Its `status.loadBalancer` (written through
/// `services/status`, as a cloud controller would) and its externalIPs give the canonical
/// status; when the Service's address changes, later writes follow without a restart.
#[tokio::test]
async fn publish_load_balancer_service_follows_the_service() {
    let t = TestEnv::new("lb").await;
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    create_service(
        &services,
        json!({
            "metadata": {"name": "edge"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}],
                     "externalIPs": ["203.0.113.20", "203.0.113.10"]}
        }),
    )
    .await;
    set_service_load_balancer(&services, "edge", json!([{"ip": "203.0.113.10"}])).await;

    let publish = format!("--publish-service={}/edge", t.ns);
    let webhook = t.start_webhook(&[&publish]).await;
    // No --ingress-class: every Ingress is governed, class-less ones included.
    // 203.0.113.10 is both in the status and an externalIP: kept once.
    let first = ["203.0.113.10", "203.0.113.20"];
    t.register(&webhook, FailurePolicy::Fail, Class::None, &first).await;

    create_ingress(&t.ingresses, "web", Class::Field("any-class")).await;
    write_status(&t.rogue, "web", &["198.51.100.1"], false).await.expect("rogue write");
    assert_eq!(stored(&t.ingresses, "web").await, first);

    // The load balancer moves: a hostname entry, and an entry with both ip and hostname.
    set_service_load_balancer(
        &services,
        "edge",
        json!([{"hostname": "edge.example.com"},
               {"ip": "203.0.113.11", "hostname": "edge-b.example.com"}]),
    )
    .await;
    // Sorted by hostname then IP: IP-only entries (the externalIPs) first.
    let second = ["203.0.113.10", "203.0.113.20", "203.0.113.11/edge-b.example.com", "edge.example.com"];
    eventually(
        &format!("a rogue write ends with the Service's new addresses (webhook log: {})", webhook.log_path().display()),
        Duration::from_secs(20),
        || async {
            let answer = write_status(&t.rogue, "web", &["198.51.100.1"], false).await.map_err(|e| e.to_string())?;
            let got = addresses(&answer);
            if got == second { Ok(()) } else { Err(format!("stored {got:?}")) }
        },
    )
    .await;
    assert_eq!(stored(&t.ingresses, "web").await, second);
}

/// Case 3a: publish Service of type ClusterIP, dual-stack: one IP entry per `spec.clusterIPs`.
#[tokio::test]
async fn publish_cluster_ip_service_gives_its_cluster_ips() {
    let t = TestEnv::new("clusterip").await;
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    let svc = create_service(
        &services,
        json!({
            "metadata": {"name": "internal"},
            "spec": {"type": "ClusterIP", "ipFamilyPolicy": "RequireDualStack",
                     "ports": [{"port": 80}]}
        }),
    )
    .await;
    let mut cluster_ips = svc.spec.and_then(|s| s.cluster_ips).unwrap_or_default();
    assert_eq!(cluster_ips.len(), 2, "a dual-stack Service: {cluster_ips:?}");
    cluster_ips.sort();
    let canonical: Vec<&str> = cluster_ips.iter().map(String::as_str).collect();

    let publish = format!("--publish-service={}/internal", t.ns);
    let webhook = t.start_webhook(&[&publish]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::None, &canonical).await;

    create_ingress(&t.ingresses, "web", Class::Field("any-class")).await;
    write_status(&t.rogue, "web", &["198.51.100.1", "wrong.example.com"], false).await.expect("rogue write");
    assert_eq!(stored(&t.ingresses, "web").await, canonical);
}

/// Case 3b: publish Service of type NodePort: its externalIPs when it has some, else its
/// cluster IP; a spec change of the Service is followed without a restart.
#[tokio::test]
async fn publish_node_port_service_gives_external_ips_else_cluster_ip() {
    let t = TestEnv::new("nodeport").await;
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    let svc = create_service(
        &services,
        json!({
            "metadata": {"name": "nodes"},
            "spec": {"type": "NodePort", "ports": [{"port": 80}],
                     "externalIPs": ["198.51.100.7", "198.51.100.3"]}
        }),
    )
    .await;
    let cluster_ip = svc.spec.and_then(|s| s.cluster_ip).expect("a ClusterIP");

    let publish = format!("--publish-service={}/nodes", t.ns);
    let webhook = t.start_webhook(&[&publish]).await;
    let canonical = ["198.51.100.3", "198.51.100.7"];
    t.register(&webhook, FailurePolicy::Fail, Class::None, &canonical).await;

    create_ingress(&t.ingresses, "web", Class::None).await;
    write_status(&t.rogue, "web", &["198.51.100.1"], false).await.expect("rogue write");
    assert_eq!(stored(&t.ingresses, "web").await, canonical);

    // Without externalIPs a NodePort Service publishes its cluster IP.
    services
        .patch("nodes", &PatchParams::default(), &Patch::Merge(json!({"spec": {"externalIPs": null}})))
        .await
        .expect("drop the externalIPs");
    t.await_governed(&webhook, "later", Class::None, &[&cluster_ip]).await;
}

/// Case 4: an Ingress of another class and a class-less Ingress (no
/// `--watch-ingress-without-class`) keep whatever is written; an Ingress naming the governed
/// class through the legacy annotation is governed.
#[tokio::test]
async fn other_class_and_class_less_ingresses_are_untouched() {
    let t = TestEnv::new("classes").await;
    let webhook = t.start_webhook(&["--ingress-class=guarded", "--publish-status-address=192.0.2.10"]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::Field("guarded"), &["192.0.2.10"]).await;

    for (name, class) in [
        ("other-class", Class::Field("other")),
        ("other-annotation", Class::Annotation("other")),
        ("no-class", Class::None),
    ] {
        create_ingress(&t.ingresses, name, class).await;
        write_status(&t.rogue, name, &["198.51.100.9", "other.example.com"], false)
            .await
            .unwrap_or_else(|e| panic!("rogue write on {name}: {e}"));
        assert_eq!(
            stored(&t.ingresses, name).await,
            ["198.51.100.9", "other.example.com"],
            "Ingress {name} ({class:?}) is not governed"
        );
        let audit = t.audited(name, 1).await;
        assert!(audit[0].patch.is_none(), "no patch for Ingress {name}: {audit:?}");
    }

    t.await_governed(&webhook, "legacy-annotation", Class::Annotation("guarded"), &["192.0.2.10"]).await;
}

/// Case 4, continued: with `--watch-ingress-without-class`, class-less Ingresses are governed
/// too, and other classes still are not.
#[tokio::test]
async fn class_less_ingresses_are_governed_with_watch_ingress_without_class() {
    let t = TestEnv::new("classless").await;
    let webhook = t
        .start_webhook(&[
            "--ingress-class=guarded",
            "--watch-ingress-without-class",
            "--publish-status-address=192.0.2.10",
        ])
        .await;
    t.register(&webhook, FailurePolicy::Fail, Class::None, &["192.0.2.10"]).await;

    create_ingress(&t.ingresses, "other-class", Class::Field("other")).await;
    write_status(&t.rogue, "other-class", &["198.51.100.9"], false).await.expect("rogue write");
    assert_eq!(stored(&t.ingresses, "other-class").await, ["198.51.100.9"]);
}

/// Case 5: a write that is already canonical is stored as written, and the webhook answered
/// without a patch: the API server's audit record of the call has `mutated: false` and no
/// patch annotation (an identity patch would be recorded there).
#[tokio::test]
async fn canonical_write_is_stored_as_is_without_a_patch() {
    let t = TestEnv::new("canonical").await;
    let webhook = t.start_webhook(&["--publish-status-address=192.0.2.10,lb.example.com"]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::None, &STATIC_CANONICAL).await;

    create_ingress(&t.ingresses, "web", Class::None).await;
    let before = t.ingresses.get("web").await.expect("get web");
    let answer = write_status(&t.rogue, "web", &STATIC_CANONICAL, false).await.expect("canonical write");
    assert_eq!(addresses(&answer), STATIC_CANONICAL);
    assert_ne!(answer.metadata.resource_version, before.metadata.resource_version, "the write was stored");
    assert_eq!(stored(&t.ingresses, "web").await, STATIC_CANONICAL);

    let audit = t.audited("web", 1).await;
    let verdict = &audit[0];
    assert_eq!(verdict.code, 200, "{verdict:?}");
    assert_eq!(verdict.mutated, Some(false), "the webhook was called: {verdict:?}");
    assert!(verdict.patch.is_none(), "the webhook sent no patch: {verdict:?}");
}

/// Case 6: a server-side dry-run status patch returns the canonical value and stores nothing.
#[tokio::test]
async fn dry_run_returns_the_canonical_status_and_stores_nothing() {
    let t = TestEnv::new("dryrun").await;
    let webhook = t.start_webhook(&["--publish-status-address=192.0.2.10,lb.example.com"]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::None, &STATIC_CANONICAL).await;

    let created = create_ingress(&t.ingresses, "web", Class::None).await;
    let answer = write_status(&t.rogue, "web", &["198.51.100.1"], true)
        .await
        .expect("dry-run write (the webhook is registered with sideEffects NoneOnDryRun)");
    assert_eq!(addresses(&answer), STATIC_CANONICAL, "the dry-run answer");

    let after = t.ingresses.get("web").await.expect("get web");
    assert_eq!(addresses(&after), Vec::<String>::new(), "nothing stored by the dry run");
    assert_eq!(after.metadata.resource_version, created.metadata.resource_version);

    // No side effect either: no Event about the dry run. Events are published in order, so
    // once the Event about a later real write exists, one about the dry run would too.
    create_ingress(&t.ingresses, "witness", Class::None).await;
    write_status(&t.rogue, "witness", &["198.51.100.1"], false).await.expect("real write");
    t.await_event(&webhook, "witness").await;
    let events = events_about(&t.admin, &t.ns, "web").await;
    assert!(events.is_empty(), "the dry run wrote Events: {events:?}");
}

/// Case 7: the webhook is down. With `failurePolicy: Fail` the API server refuses the status
/// write, naming the webhook; with `failurePolicy: Ignore` the write passes unchanged and the
/// API server records that it failed open.
#[tokio::test]
async fn webhook_down_fail_refuses_and_ignore_passes() {
    let t = TestEnv::new("down-fail").await;
    let ignoring = TestEnv::new("down-ignore").await;
    let mut webhook = t.start_webhook(&["--publish-status-address=192.0.2.10"]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::None, &["192.0.2.10"]).await;
    ignoring.register(&webhook, FailurePolicy::Ignore, Class::None, &["192.0.2.10"]).await;
    create_ingress(&t.ingresses, "web", Class::None).await;
    create_ingress(&ignoring.ingresses, "web", Class::None).await;

    webhook.stop();

    // failurePolicy: Fail
    let refused = write_status(&t.rogue, "web", &["198.51.100.1"], false)
        .await
        .expect_err("with failurePolicy Fail a write must be refused while the webhook is down");
    let message = refused.to_string();
    assert!(
        message.contains("failed calling webhook")
            && message.contains(&format!("{}.e2e.ingress-status-guard.test", t.ns)),
        "a clear error naming the webhook: {message}"
    );
    assert_eq!(stored(&t.ingresses, "web").await, Vec::<String>::new());

    // failurePolicy: Ignore
    let passed = write_status(&ignoring.rogue, "web", &["198.51.100.1"], false)
        .await
        .expect("with failurePolicy Ignore the write passes while the webhook is down");
    assert_eq!(addresses(&passed), ["198.51.100.1"]);
    assert_eq!(stored(&ignoring.ingresses, "web").await, ["198.51.100.1"]);
    let audit = ignoring.audited("web", 1).await;
    assert!(audit[0].failed_open, "recorded as failed open: {audit:?}");
}

/// Case 8: the webhook runs as a least-privilege identity: only list/watch on Services in the
/// publish Service's namespace, list/watch on Ingresses (Events are written only about the
/// Ingresses it has seen), and create/patch on Events.
#[tokio::test]
async fn works_with_a_least_privilege_identity() {
    let t = TestEnv::new("leastpriv").await;
    let system_ns = t.cluster.namespace(&t.admin, "isg-system").await;
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &system_ns);
    create_service(
        &services,
        json!({
            "metadata": {"name": "ingress-nginx-controller"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 443}]}
        }),
    )
    .await;
    set_service_load_balancer(&services, "ingress-nginx-controller", json!([{"ip": "203.0.113.50"}])).await;

    // The identity of a ServiceAccount, presented as a client certificate.
    let sa = "ingress-status-guard";
    let user = format!("system:serviceaccount:{system_ns}:{sa}");
    let subject = json!([{"kind": "ServiceAccount", "name": sa, "namespace": system_ns}]);
    grant(
        &t.admin,
        Some(&system_ns),
        &format!("{}-services", t.ns),
        json!([{"apiGroups": [""], "resources": ["services"], "verbs": ["list", "watch"]}]),
        subject.clone(),
    )
    .await;
    grant(
        &t.admin,
        None,
        &format!("{}-events", t.ns),
        json!([{"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
               {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["list", "watch"]}]),
        subject,
    )
    .await;
    let kubeconfig = t.cluster.kubeconfig_for(&user, None);

    // The identity really is that narrow.
    let narrow = support::cluster::client_from(&kubeconfig).await;
    let denied = Api::<Service>::namespaced(narrow.clone(), &t.ns)
        .list(&Default::default())
        .await
        .expect_err("no access to Services outside the publish Service's namespace");
    assert!(matches!(&denied, kube::Error::Api(s) if s.code == 403), "{denied:?}");
    let denied = Api::<Service>::namespaced(narrow, &system_ns)
        .get("ingress-nginx-controller")
        .await
        .expect_err("no get on Services");
    assert!(matches!(&denied, kube::Error::Api(s) if s.code == 403), "{denied:?}");

    let publish = format!("--publish-service={system_ns}/ingress-nginx-controller");
    let webhook = Webhook::start(t.cluster, &t.ns, &kubeconfig, &[&publish]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::None, &["203.0.113.50"]).await;

    create_ingress(&t.ingresses, "web", Class::Field("nginx")).await;
    write_status(&t.rogue, "web", &["198.51.100.1"], false).await.expect("rogue write");
    assert_eq!(stored(&t.ingresses, "web").await, ["203.0.113.50"]);
    // Its Events get written with the narrow identity.
    let event = t.await_event(&webhook, "web").await;
    assert_eq!(event.reporting_controller.as_deref(), Some("ingress-status-guard"), "{event:?}");
    // The log is the one this webhook wrote (the finding behind the Event is in it), so the
    // absence below means something.
    let log = webhook.log();
    assert!(log.contains("rogue status write") && log.contains("publish Service resolved"), "{log}");
    let forbidden = webhook.forbidden_lines();
    assert!(forbidden.is_empty(), "the webhook needed more rights: {forbidden:#?}\n{log}");
}

/// Case 9: after a rogue `kubectl patch --subresource=status`, `kubectl get ingress` shows the
/// canonical ADDRESS.
#[tokio::test]
async fn kubectl_shows_the_canonical_address_after_a_rogue_kubectl_patch() {
    let t = TestEnv::new("kubectl").await;
    let webhook = t.start_webhook(&["--publish-status-address=192.0.2.10,lb.example.com"]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::None, &STATIC_CANONICAL).await;
    create_ingress(&t.ingresses, "web", Class::Field("nginx")).await;

    let rogue = t.cluster.kubeconfig_for(ROGUE_USER, Some(support::cluster::STATUS_WRITERS));
    let patch = t.cluster.kubectl(
        &rogue,
        &[
            "patch",
            "ingress",
            "web",
            "-n",
            &t.ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"loadBalancer":{"ingress":[{"ip":"198.51.100.99"}]}}}"#,
        ],
    );
    assert!(patch.success, "kubectl patch: {}{}", patch.stdout, patch.stderr);

    let get = t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["get", "ingress", "web", "-n", &t.ns]);
    assert!(get.success, "kubectl get: {}", get.stderr);
    let mut lines = get.stdout.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split_whitespace().collect();
    let row: Vec<&str> = lines.next().unwrap_or_default().split_whitespace().collect();
    let column =
        header.iter().position(|h| *h == "ADDRESS").unwrap_or_else(|| panic!("no ADDRESS column: {}", get.stdout));
    assert_eq!(row.get(column).copied(), Some("192.0.2.10,lb.example.com"), "kubectl get ingress:\n{}", get.stdout);
}

async fn create_service(api: &Api<Service>, service: serde_json::Value) -> Service {
    let service: Service = serde_json::from_value(service).expect("Service object");
    api.create(&PostParams::default(), &service).await.unwrap_or_else(|e| panic!("create Service: {e}"))
}

/// Writes `status.loadBalancer.ingress` of a Service, as a cloud controller would.
async fn set_service_load_balancer(api: &Api<Service>, name: &str, ingress: serde_json::Value) {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": ingress}}})),
    )
    .await
    .unwrap_or_else(|e| panic!("write the status of Service {name}: {e}"));
}

/// Creates a Role (in `namespace`) or ClusterRole (without) with `rules`, bound to `subjects`.
async fn grant(
    admin: &kube::Client,
    namespace: Option<&str>,
    name: &str,
    rules: serde_json::Value,
    subjects: serde_json::Value,
) {
    let pp = PostParams::default();
    let (role_kind, result) = match namespace {
        Some(ns) => {
            let role: Role = serde_json::from_value(json!({"metadata": {"name": name}, "rules": rules})).expect("Role");
            let binding: RoleBinding = serde_json::from_value(json!({
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": subjects,
            }))
            .expect("RoleBinding");
            let r = Api::<Role>::namespaced(admin.clone(), ns).create(&pp, &role).await;
            let b = Api::<RoleBinding>::namespaced(admin.clone(), ns).create(&pp, &binding).await;
            ("Role", r.and(b.map(|_| ())))
        }
        None => {
            let role: ClusterRole =
                serde_json::from_value(json!({"metadata": {"name": name}, "rules": rules})).expect("ClusterRole");
            let binding: ClusterRoleBinding = serde_json::from_value(json!({
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": name},
                "subjects": subjects,
            }))
            .expect("ClusterRoleBinding");
            let r = Api::<ClusterRole>::all(admin.clone()).create(&pp, &role).await;
            let b = Api::<ClusterRoleBinding>::all(admin.clone()).create(&pp, &binding).await;
            ("ClusterRole", r.map(|_| ()).and(b.map(|_| ())))
        }
    };
    result.unwrap_or_else(|e| panic!("grant {role_kind} {name}: {e}"));
}

// Issue 4: the audit signals, seen where operators look.

/// `kubectl patch ingress NAME --subresource=status` as the rogue identity; returns kubectl's
/// output (warnings are on stderr).
fn rogue_kubectl_patch(t: &TestEnv, name: &str, ip: &str) -> support::cluster::KubectlOutput {
    let rogue = t.cluster.kubeconfig_for(ROGUE_USER, Some(support::cluster::STATUS_WRITERS));
    let patch = format!(r#"{{"status":{{"loadBalancer":{{"ingress":[{{"ip":"{ip}"}}]}}}}}}"#);
    t.cluster
        .kubectl(&rogue, &["patch", "ingress", name, "-n", &t.ns, "--subresource=status", "--type=merge", "-p", &patch])
}

const ROGUE_PATCHED: &str =
    "ingress_status_guard_rogue_writes_total{policy=\"default\",writer=\"rogue-controller\",action=\"patched\"}";

/// A rogue write is reported to the writer (warning), the API server's audit log (annotations),
/// `kubectl describe` (one Event, counted up on repeats), and the metrics.
#[tokio::test]
async fn rogue_writes_are_reported_everywhere_operators_look() {
    let t = TestEnv::new("audit-signals").await;
    let webhook = t.start_webhook(&["--publish-status-address=192.0.2.10,lb.example.com"]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::None, &STATIC_CANONICAL).await;
    create_ingress(&t.ingresses, "web", Class::Field("nginx")).await;
    let before = webhook.metric(ROGUE_PATCHED);

    let first = rogue_kubectl_patch(&t, "web", "198.51.100.99");
    assert!(first.success, "kubectl patch: {}", first.stderr);
    assert!(
        first.stderr.contains(
            "Warning: status.loadBalancer.ingress rewritten to [192.0.2.10,lb.example.com] by policy default"
        ),
        "the writer is warned: {}",
        first.stderr
    );
    assert_eq!(stored(&t.ingresses, "web").await, STATIC_CANONICAL);
    assert_eq!(webhook.metric(ROGUE_PATCHED), before + 1.0, "{}", webhook.metrics());

    // The API server's audit log carries our annotations, prefixed by the webhook's name.
    // (kubectl also GETs the status subresource first; only the PATCH was reviewed.)
    t.audited("web", 1).await;
    let events: Vec<_> =
        t.cluster.ingress_status_audit(&t.ns, "web").into_iter().filter(|e| e["verb"] == "patch").collect();
    assert_eq!(events.len(), 1, "{events:?}");
    let annotations = events[0]["annotations"].as_object().cloned().unwrap_or_default();
    let annotation = |key: &str| {
        annotations
            .iter()
            .find(|(k, _)| k.ends_with(&format!(".e2e.ingress-status-guard.test/{key}")))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(annotation("attempted"), Some(json!("198.51.100.99")), "{annotations:?}");
    assert_eq!(annotation("canonical"), Some(json!("192.0.2.10,lb.example.com")), "{annotations:?}");
    assert_eq!(annotation("policy"), Some(json!("default")), "{annotations:?}");
    assert_eq!(annotation("action"), Some(json!("patched")), "{annotations:?}");

    let event = t.await_event(&webhook, "web").await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.reason.as_deref(), Some("RogueStatusWrite"));
    assert_eq!(event.reporting_controller.as_deref(), Some("ingress-status-guard"));
    assert_eq!(
        event.note.as_deref(),
        Some(
            "rogue-controller wrote status.loadBalancer.ingress [198.51.100.99]; policy default requires [192.0.2.10,lb.example.com]; rewritten"
        )
    );
    let related = event.related.clone().expect("the writer is the related object");
    assert_eq!((related.kind.as_deref(), related.name.as_deref()), (Some("User"), Some(ROGUE_USER)));

    // The same writer again: the one Event is counted up, not duplicated.
    let second = rogue_kubectl_patch(&t, "web", "198.51.100.98");
    assert!(second.success, "kubectl patch: {}", second.stderr);
    let counted = eventually("the Event's series counts the second write", Duration::from_secs(15), || async {
        let events = events_about(&t.admin, &t.ns, "web").await;
        match events.as_slice() {
            [one] if one.series.as_ref().is_some_and(|s| s.count >= 2) => Ok(one.clone()),
            other => Err(format!("{} Events: {other:?}", other.len())),
        }
    })
    .await;
    assert_eq!(counted.metadata.name, event.metadata.name);
    assert_eq!(webhook.metric(ROGUE_PATCHED), before + 2.0);
    let log = webhook.log();
    let finding = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["message"] == "rogue status write" && l["ingress_name"] == "web")
        .unwrap_or_else(|| panic!("a structured finding in the log:\n{}", webhook.log_tail()));
    assert_eq!(finding["level"], "WARN");
    assert_eq!(finding["writer"], ROGUE_USER);
    assert_eq!(finding["attempted"], "198.51.100.99");
    assert_eq!(finding["action"], "patched");
}

/// An Event whose series cannot be counted up (here an admission policy refuses every update
/// of an Event in the namespace; a 403 or a conflict in a real cluster) is forgotten: the next
/// write of the same writer makes a new Event instead of retrying the failing patch until the
/// series' TTL (6 minutes) ends, with no Event about the object meanwhile.
#[tokio::test]
async fn an_event_series_that_cannot_be_counted_up_starts_anew() {
    let t = TestEnv::new("series-refused").await;
    let webhook = t.start_webhook(&["--publish-status-address=192.0.2.10,lb.example.com"]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::None, &STATIC_CANONICAL).await;
    create_ingress(&t.ingresses, "web", Class::Field("nginx")).await;
    assert!(rogue_kubectl_patch(&t, "web", "198.51.100.99").success);
    let first = t.await_event(&webhook, "web").await;

    let name = format!("refuse-event-updates-{}", t.ns);
    let manifest = std::env::temp_dir().join(format!("{name}.json"));
    let policy = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": name},
         "spec": {"failurePolicy": "Fail",
                  "matchConstraints": {"resourceRules": [{"apiGroups": ["", "events.k8s.io"], "apiVersions": ["*"],
                                                          "operations": ["UPDATE"], "resources": ["events"]}]},
                  "validations": [{"expression": "false", "message": "this test refuses updates of Events"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": name},
         "spec": {"policyName": name, "validationActions": ["Deny"],
                  "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": t.ns}}}}}
    ]});
    std::fs::write(&manifest, policy.to_string()).unwrap();
    let admin = t.cluster.admin_kubeconfig();
    let applied = t.cluster.kubectl(admin, &["apply", "-f", &manifest.display().to_string()]);
    assert!(applied.success, "{}{}", applied.stdout, applied.stderr);
    // The policy is in force once an update of the first Event is refused.
    eventually("updates of Events are refused", Duration::from_secs(30), || async {
        let out = t.cluster.kubectl(
            admin,
            &[
                "label",
                "events.events.k8s.io",
                "-n",
                &t.ns,
                first.metadata.name.as_deref().unwrap_or_default(),
                "--overwrite",
                "probe=1",
            ],
        );
        if out.stderr.contains("this test refuses updates of Events") {
            Ok(())
        } else {
            Err(format!("{}{}", out.stdout, out.stderr))
        }
    })
    .await;

    // The second write's Event would count the series up: refused, so it is forgotten.
    assert!(rogue_kubectl_patch(&t, "web", "198.51.100.98").success);
    eventually("the refused series patch is counted as an error", Duration::from_secs(15), || async {
        let errors = webhook.metric("ingress_status_guard_kubernetes_events_total{result=\"failed\"}");
        if errors >= 1.0 { Ok(()) } else { Err(webhook.metrics()) }
    })
    .await;
    // The third write makes a new Event, which creating still may.
    assert!(rogue_kubectl_patch(&t, "web", "198.51.100.97").success);
    eventually("a new Event about the Ingress", Duration::from_secs(15), || async {
        let events = events_about(&t.admin, &t.ns, "web").await;
        match events.as_slice() {
            [_, _] => Ok(()),
            other => {
                Err(format!("{} Events: {:?}", other.len(), other.iter().map(|e| &e.metadata.name).collect::<Vec<_>>()))
            }
        }
    })
    .await;
    let deleted = t.cluster.kubectl(admin, &["delete", "-f", &manifest.display().to_string()]);
    assert!(deleted.success, "{}", deleted.stderr);
    let _ = std::fs::remove_file(manifest);
}

/// `--mode=deny`: the rogue write is refused with the canonical value in the message, nothing
/// is stored, and it is still reported.
#[tokio::test]
async fn deny_mode_refuses_the_write_and_names_the_canonical_value() {
    let t = TestEnv::new("deny").await;
    let webhook = t.start_webhook(&["--publish-status-address=192.0.2.10", "--mode=deny"]).await;
    webhook.register(&t.admin, &t.ns, FailurePolicy::Fail).await;
    create_ingress(&t.ingresses, "web", Class::Field("nginx")).await;

    let message = eventually("the webhook denies a rogue write", Duration::from_secs(30), || async {
        match write_status(&t.rogue, "web", &["198.51.100.7"], false).await {
            Err(kube::Error::Api(status)) => Ok(status.message),
            Ok(stored) => Err(format!("stored {:?}", addresses(&stored))),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    assert!(
        message.contains("denied the request: ingress-status-guard policy \"default\" requires status.loadBalancer.ingress [192.0.2.10], not [198.51.100.7]"),
        "{message}"
    );
    assert!(stored(&t.ingresses, "web").await.is_empty(), "nothing stored");
    let event = t.await_event(&webhook, "web").await;
    assert!(event.note.unwrap_or_default().ends_with("; denied"));
}

/// `--mode=audit`: the rogue value is stored as written, and the write is still reported.
#[tokio::test]
async fn audit_mode_stores_the_rogue_value_and_reports_it() {
    let t = TestEnv::new("audit-mode").await;
    let webhook = t.start_webhook(&["--publish-status-address=192.0.2.10", "--mode=audit"]).await;
    webhook.register(&t.admin, &t.ns, FailurePolicy::Fail).await;
    create_ingress(&t.ingresses, "web", Class::Field("nginx")).await;

    let mut n = 0;
    let warned = eventually("the webhook reviews a rogue write", Duration::from_secs(30), || {
        n += 1;
        let out = rogue_kubectl_patch(&t, "web", &format!("198.51.100.{n}"));
        async move {
            match out.stderr.lines().find(|l| l.contains("audit mode")) {
                Some(line) if out.success => Ok((n, line.to_owned())),
                _ => Err(format!("{}{}", out.stdout, out.stderr)),
            }
        }
    })
    .await;
    assert_eq!(warned.1, "Warning: status.loadBalancer.ingress differs from [192.0.2.10] (policy default, audit mode)");
    assert_eq!(stored(&t.ingresses, "web").await, [format!("198.51.100.{}", warned.0)], "audit mode stores the write");
    let event = t.await_event(&webhook, "web").await;
    assert!(event.note.unwrap_or_default().ends_with("; allowed (audit mode)"));
    let audited =
        "ingress_status_guard_rogue_writes_total{policy=\"default\",writer=\"rogue-controller\",action=\"audited\"}";
    assert!(webhook.metric(audited) >= 1.0, "{}", webhook.metrics());
}

/// Issue 12: locked down with `--client-ca`, the webhook still answers the API server, which
/// presents the client certificate its AdmissionConfiguration names (as docs/deploy.md shows),
/// and refuses a caller without one. Issue 20: with `--client-san` naming that certificate's CN
/// too, since a CA may sign more than the API server's certificate.
#[tokio::test]
async fn client_ca_admits_the_api_server_and_refuses_other_callers() {
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let t = TestEnv::new("mtls").await;
    let client_ca = format!("--client-ca={}", t.cluster.webhook_client_ca().display());
    let webhook = t
        .start_webhook(&[
            "--ingress-class=guarded",
            "--publish-status-address=192.0.2.10,lb.example.com",
            &client_ca,
            "--client-san=kube-apiserver-webhook-client",
        ])
        .await;
    t.register(&webhook, FailurePolicy::Fail, Class::Field("guarded"), &STATIC_CANONICAL).await;
    create_ingress(&t.ingresses, "web", Class::Field("guarded")).await;
    let answer = write_status(&t.rogue, "web", &["198.51.100.66"], false).await.expect("rewritten, not refused");
    assert_eq!(addresses(&answer), STATIC_CANONICAL);
    assert!(!webhook.log().contains("accepts any caller"), "no open-port warning with mTLS");

    // A caller that trusts the webhook but has no client certificate gets no answer.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(webhook.ca_pem().as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    let addr = webhook.url().trim_start_matches("https://").trim_end_matches("/mutate").to_owned();
    let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let refused = async {
        let mut tls = connector.connect(rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap(), tcp).await?;
        tls.write_all(
            b"POST /mutate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}",
        )
        .await?;
        let mut response = Vec::new();
        tls.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(response)
    };
    match tokio::time::timeout(Duration::from_secs(20), refused).await.expect("refused within the bound") {
        Err(e) => assert!(e.to_string().to_lowercase().contains("certificate"), "{e}"),
        Ok(response) => panic!("answered without a client certificate: {}", String::from_utf8_lossy(&response)),
    }
}

/// Issue 20: `--client-san` refuses a client certificate the client CA signed but that names
/// someone else: here the API server's own (CN `kube-apiserver-webhook-client`), so its call
/// fails, with `failurePolicy: Fail` the write with it, and the webhook says why.
#[tokio::test]
async fn client_san_refuses_a_verified_client_certificate_without_the_name() {
    let t = TestEnv::new("mtls-san").await;
    let client_ca = format!("--client-ca={}", t.cluster.webhook_client_ca().display());
    let webhook = t
        .start_webhook(&[
            "--ingress-class=guarded",
            "--publish-status-address=192.0.2.10",
            &client_ca,
            "--client-san=kube-apiserver-proxy-client",
        ])
        .await;
    webhook.register(&t.admin, &t.ns, FailurePolicy::Fail).await;
    create_ingress(&t.ingresses, "web", Class::Field("guarded")).await;
    // Until the API server sees the registration, writes pass without a call.
    let refused = eventually("the API server's call is refused", Duration::from_secs(30), || async {
        match write_status(&t.rogue, "web", &["198.51.100.67"], false).await {
            Err(kube::Error::Api(status)) if status.message.contains("failed calling webhook") => Ok(status.message),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(refused.contains("ingress-status-guard"), "{refused}");
    let log = webhook.log();
    let line = log
        .lines()
        .find(|l| l.contains("refused a client certificate signed by --client-ca"))
        .unwrap_or_else(|| panic!("no refusal in the webhook's log:\n{log}"));
    assert!(
        line.contains("kube-apiserver-webhook-client") && line.contains("kube-apiserver-proxy-client"),
        "the line names what was presented and what is required: {line}"
    );
    assert!(!log.contains("rogue status write"), "no review was read:\n{log}");
}
