//! The reconciler and policy hot reload, end to end: the built binary against the real
//! kube-apiserver + etcd of `support`, checked through what the API server stores and its
//! audit log.
//!
//! Isolation in the shared API server: each test governs only its own ingress class (named
//! after its namespace) and holds its own Lease (in its namespace), so the reconcilers of
//! parallel tests never touch each other's Ingresses. Waits are bounded ("until the state is
//! reached, or fail after N s"); the issue's 10 s bounds are those N.

use crate::support;

use std::{path::Path, time::Duration};

use k8s_openapi::api::{core::v1::Service, events::v1::Event};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

use support::{
    Class, FailurePolicy, SENTINEL, TestEnv, Webhook, addresses, create_ingress, eventually, stored, write_status,
};

/// How long the issue allows for stored statuses to become canonical.
const HEAL: Duration = Duration::from_secs(10);
/// Lease timing for tests (client-go's flags, shortened).
const LEASE_DURATION: Duration = Duration::from_secs(4);
use support::guard::LEASE_FLAGS;

/// `--reconcile=true`, this test's Lease, and `extra`.
fn reconciler_args(t: &TestEnv, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["--reconcile=true".to_owned(), format!("--leader-election-namespace={}", t.ns)];
    args.extend(LEASE_FLAGS.iter().map(ToString::to_string));
    args.extend(extra.iter().map(ToString::to_string));
    args
}

async fn start(t: &TestEnv, kubeconfig: &Path, args: &[String], env: &[(&str, &str)]) -> Webhook {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Webhook::start_with_env(t.cluster, &t.ns, kubeconfig, &args, env).await
}

/// A LoadBalancer Service whose status publishes `ip`.
async fn lb_service(api: &Api<Service>, name: &str, ip: &str) {
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}
    }))
    .unwrap();
    api.create(&PostParams::default(), &service).await.unwrap_or_else(|e| panic!("create Service {name}: {e}"));
    set_lb(api, name, ip).await;
}

async fn set_lb(api: &Api<Service>, name: &str, ip: &str) {
    let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("write the status of Service {name}: {e}"));
}

/// Creates Ingress `name` of `class` and writes `status` to it as the rogue identity.
async fn stale_ingress(t: &TestEnv, api_ns: &str, name: &str, class: Class<'_>, status: &[&str]) {
    let admin: Api<k8s_openapi::api::networking::v1::Ingress> = Api::namespaced(t.admin.clone(), api_ns);
    let rogue = Api::namespaced(t.cluster.rogue().await, api_ns);
    create_ingress(&admin, name, class).await;
    if !status.is_empty() {
        let written = write_status(&rogue, name, status, false).await.expect("rogue write");
        assert_eq!(addresses(&written), status, "no webhook yet: stored as written");
    }
}

/// Waits until every Ingress of `names` in `ns` stores `want`.
async fn await_all(t: &TestEnv, ns: &str, names: &[&str], want: &[&str], webhook: &Webhook, timeout: Duration) {
    let api: Api<k8s_openapi::api::networking::v1::Ingress> = Api::namespaced(t.admin.clone(), ns);
    eventually(
        &format!("Ingresses {ns}/{names:?} store {want:?} (webhook log: {})", webhook.log_path().display()),
        timeout,
        || async {
            let mut off = Vec::new();
            for name in names {
                let got = addresses(&api.get(name).await.map_err(|e| e.to_string())?);
                if got != want {
                    off.push(format!("{name}: {got:?}"));
                }
            }
            if off.is_empty() { Ok(()) } else { Err(off.join(", ")) }
        },
    )
    .await;
}

/// The reconciler's status patches of one Ingress in the audit log, as (user, audit event).
fn reconciler_patches(t: &TestEnv, ns: &str, name: &str) -> Vec<(String, Value)> {
    t.cluster
        .ingress_status_audit(ns, name)
        .into_iter()
        .filter(|e| {
            e["verb"] == "patch" && e["requestURI"].as_str().unwrap_or("").contains("fieldManager=ingress-status-guard")
        })
        .map(|e| (e["user"]["username"].as_str().unwrap_or("").to_owned(), e))
        .collect()
}

async fn await_leader(webhook: &Webhook) {
    eventually(
        &format!("the replica leads (webhook log: {})", webhook.log_path().display()),
        Duration::from_secs(20),
        || async {
            let leader = webhook.metric("ingress_status_guard_leader");
            if leader == 1.0 { Ok(()) } else { Err(format!("leader {leader}")) }
        },
    )
    .await;
}

/// Test 1: statuses written before `serve` starts (no webhook registered) are canonical soon
/// after start-up, with one patch each; ungoverned and already canonical Ingresses are not
/// written at all.
#[tokio::test]
async fn stale_statuses_are_healed_at_start_up_and_nothing_else_is_written() {
    let t = TestEnv::new("rec-start").await;
    let class = t.ns.clone();
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    lb_service(&services, "edge", "203.0.113.10").await;
    stale_ingress(&t, &t.ns, "stale", Class::Field(&class), &["198.51.100.1"]).await;
    stale_ingress(&t, &t.ns, "legacy", Class::Annotation(&class), &["198.51.100.2", "old.example.com"]).await;
    stale_ingress(&t, &t.ns, "empty", Class::Field(&class), &[]).await;
    stale_ingress(&t, &t.ns, "canonical", Class::Field(&class), &["203.0.113.10"]).await;
    stale_ingress(&t, &t.ns, "other", Class::Field("someone-else"), &["198.51.100.3"]).await;
    let other_before = t.ingresses.get("other").await.unwrap().metadata.resource_version;

    let args = reconciler_args(&t, &[&format!("--publish-service={}/edge", t.ns), &format!("--ingress-class={class}")]);
    let webhook = start(&t, t.cluster.admin_kubeconfig(), &args, &[]).await;
    await_all(&t, &t.ns, &["stale", "legacy", "empty", "canonical"], &["203.0.113.10"], &webhook, HEAL).await;

    let other_after = t.ingresses.get("other").await.unwrap();
    assert_eq!(addresses(&other_after), ["198.51.100.3"], "ungoverned Ingress untouched");
    assert_eq!(other_after.metadata.resource_version, other_before, "ungoverned Ingress not written at all");
    eventually("one reconciler patch per drifted Ingress in the audit log", HEAL, || async {
        let counts: Vec<usize> =
            ["stale", "legacy", "empty"].iter().map(|n| reconciler_patches(&t, &t.ns, n).len()).collect();
        if counts == [1, 1, 1] { Ok(()) } else { Err(format!("{counts:?}")) }
    })
    .await;
    assert!(reconciler_patches(&t, &t.ns, "canonical").is_empty(), "a canonical Ingress is not patched");
    assert!(reconciler_patches(&t, &t.ns, "other").is_empty(), "an ungoverned Ingress is not patched");
    assert_eq!(
        webhook.metric("ingress_status_guard_reconcile_patches_total{policy=\"default\",result=\"patched\"}"),
        3.0
    );
    assert_eq!(webhook.metric("ingress_status_guard_drift_ingresses{policy=\"default\"}"), 0.0);
    let log = webhook.log();
    let line = log
        .lines()
        .find(|l| l.contains("reconciled stored status") && l.contains(&format!("{}/stale", t.ns)))
        .unwrap_or_else(|| panic!("an INFO line per patch:\n{log}"));
    assert!(line.contains("\"from\":\"198.51.100.1\"") && line.contains("\"to\":\"203.0.113.10\""), "{line}");
    assert!(line.contains("\"policy\":\"default\"") && line.contains("\"level\":\"INFO\""), "{line}");
}

/// Test 2: the publish Service's load balancer moves; governed Ingresses in two namespaces
/// follow with no other writer, and the reconciler's patches pass the webhook as no-ops.
#[tokio::test]
async fn a_load_balancer_change_is_followed_in_every_namespace() {
    let t = TestEnv::new("rec-lb").await;
    let other_ns = t.cluster.namespace(&t.admin, "rec-lb-b").await;
    let class = t.ns.clone();
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    lb_service(&services, "edge", "203.0.113.20").await;
    for ns in [&t.ns, &other_ns] {
        for name in ["a", "b"] {
            stale_ingress(&t, ns, name, Class::Field(&class), &["198.51.100.1"]).await;
        }
    }
    let args = reconciler_args(&t, &[&format!("--publish-service={}/edge", t.ns), &format!("--ingress-class={class}")]);
    let webhook = start(&t, t.cluster.admin_kubeconfig(), &args, &[]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::Field(&class), &["203.0.113.20"]).await;
    for ns in [&t.ns, &other_ns] {
        await_all(&t, ns, &["a", "b"], &["203.0.113.20"], &webhook, HEAL).await;
    }

    set_lb(&services, "edge", "203.0.113.21").await;
    for ns in [&t.ns, &other_ns] {
        await_all(&t, ns, &["a", "b"], &["203.0.113.21"], &webhook, HEAL).await;
    }
    await_all(&t, &t.ns, &["probe"], &["203.0.113.21"], &webhook, HEAL).await;

    // In the webhook's namespace the reconciler's patches went through the webhook, which
    // found them canonical: called, nothing mutated, no patch.
    let through_webhook = eventually("the reconciler's patches of a in the audit log", HEAL, || async {
        let patches = reconciler_patches(&t, &t.ns, "a");
        if patches.len() >= 2 { Ok(patches) } else { Err(format!("{} patches", patches.len())) }
    })
    .await;
    // The start-up heal may race the webhook's registration; every later patch went through it.
    for (_, event) in through_webhook.iter().skip(1) {
        let mutation = event["annotations"]
            .as_object()
            .and_then(|a| a.iter().find(|(k, _)| k.starts_with("mutation.webhook.admission.k8s.io/")))
            .map(|(_, v)| v.as_str().unwrap_or_default().to_owned());
        let Some(mutation) = mutation else { panic!("the webhook was called for {event}") };
        assert!(mutation.contains("\"mutated\":false"), "the webhook changed nothing: {mutation}");
    }
}

/// Test 3: with the webhook deregistered (`failurePolicy: Ignore` no longer matters), a rogue
/// write is stored as written, and then healed.
#[tokio::test]
async fn a_rogue_write_while_the_webhook_is_deregistered_is_healed() {
    let t = TestEnv::new("rec-rogue").await;
    let class = t.ns.clone();
    let args = reconciler_args(&t, &["--publish-status-address=192.0.2.10", &format!("--ingress-class={class}")]);
    let webhook = start(&t, t.cluster.admin_kubeconfig(), &args, &[]).await;
    t.register(&webhook, FailurePolicy::Ignore, Class::Field(&class), &["192.0.2.10"]).await;

    Api::<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>::all(t.admin.clone())
        .delete(&format!("isg-e2e-{}", t.ns), &DeleteParams::default())
        .await
        .expect("deregister the webhook");
    eventually(
        "a rogue write is stored as written (the webhook is no longer called)",
        Duration::from_secs(30),
        || async {
            let written = write_status(&t.rogue, "probe", &[SENTINEL], false).await.map_err(|e| e.to_string())?;
            let written = addresses(&written);
            if written == [SENTINEL] { Ok(()) } else { Err(format!("stored {written:?}")) }
        },
    )
    .await;
    await_all(&t, &t.ns, &["probe"], &["192.0.2.10"], &webhook, HEAL).await;
}

/// Test 4: an audit policy is measured, never patched: the drift gauge counts the
/// off-canonical Ingresses and nothing is written.
#[tokio::test]
async fn an_audit_policy_is_measured_and_never_patched() {
    let t = TestEnv::new("rec-audit").await;
    let class = t.ns.clone();
    for name in ["a", "b", "c"] {
        stale_ingress(&t, &t.ns, name, Class::Field(&class), &["198.51.100.1"]).await;
    }
    stale_ingress(&t, &t.ns, "fine", Class::Field(&class), &["192.0.2.10"]).await;
    let args = reconciler_args(
        &t,
        &["--publish-status-address=192.0.2.10", &format!("--ingress-class={class}"), "--mode=audit"],
    );
    let webhook = start(&t, t.cluster.admin_kubeconfig(), &args, &[]).await;
    await_leader(&webhook).await;
    eventually("the drift gauge counts the three stale Ingresses", HEAL, || async {
        let drift = webhook.metric("ingress_status_guard_drift_ingresses{policy=\"default\"}");
        if drift == 3.0 { Ok(()) } else { Err(format!("drift {drift}")) }
    })
    .await;
    // A later change is measured too: one more stale, one healed by hand.
    write_status(&t.rogue, "fine", &["198.51.100.9"], false).await.unwrap();
    write_status(&t.rogue, "a", &["192.0.2.10"], false).await.unwrap();
    stale_ingress(&t, &t.ns, "d", Class::Field(&class), &["198.51.100.1"]).await;
    eventually("the drift gauge follows", HEAL, || async {
        let drift = webhook.metric("ingress_status_guard_drift_ingresses{policy=\"default\"}");
        if drift == 4.0 { Ok(()) } else { Err(format!("drift {drift}")) }
    })
    .await;
    for name in ["b", "c", "d", "fine"] {
        assert!(reconciler_patches(&t, &t.ns, name).is_empty(), "{name} was patched");
        assert_ne!(stored(&t.ingresses, name).await, ["192.0.2.10"], "{name} was changed");
    }
    assert_eq!(
        webhook.metric("ingress_status_guard_reconcile_patches_total{policy=\"default\",result=\"patched\"}"),
        0.0
    );
}

/// Test 5: two replicas; only the leader patches. Stopped, it hands over its Lease and the
/// other replica takes over; killed, its Lease expires and a third replica takes over.
#[tokio::test]
async fn only_the_leader_patches_and_the_other_replica_takes_over() {
    let t = TestEnv::new("rec-leader").await;
    let class = t.ns.clone();
    let users = ["isg-replica-a", "isg-replica-b"];
    let args = reconciler_args(&t, &["--publish-status-address=192.0.2.10", &format!("--ingress-class={class}")]);
    let mut replicas = Vec::new();
    for user in users {
        let kubeconfig = t.cluster.kubeconfig_for(user, Some("system:masters"));
        replicas.push(start(&t, &kubeconfig, &args, &[("POD_NAME", user)]).await);
    }
    let leader = eventually("exactly one replica leads", Duration::from_secs(20), || async {
        let leading: Vec<usize> =
            (0..2).filter(|&i| replicas[i].metric("ingress_status_guard_leader") == 1.0).collect();
        if leading.len() == 1 { Ok(leading[0]) } else { Err(format!("leading: {leading:?}")) }
    })
    .await;
    let follower = 1 - leader;

    for name in ["a", "b", "c"] {
        stale_ingress(&t, &t.ns, name, Class::Field(&class), &["198.51.100.1"]).await;
    }
    await_all(&t, &t.ns, &["a", "b", "c"], &["192.0.2.10"], &replicas[leader], HEAL).await;
    // (The reconciler may also have patched an Ingress between its creation and the rogue
    // write, so the count is not checked here: test 1 does.)
    for name in ["a", "b", "c"] {
        // The API server writes the audit record after the response, so a GET can see the
        // healed status a moment before the record of the patch is in the log.
        let patchers: Vec<String> = eventually(&format!("{name}: the patch in the audit log"), HEAL, || async {
            let patchers: Vec<String> = reconciler_patches(&t, &t.ns, name).into_iter().map(|(u, _)| u).collect();
            if patchers.is_empty() { Err("no patch recorded yet".to_owned()) } else { Ok(patchers) }
        })
        .await;
        assert!(patchers.iter().all(|u| u == users[leader]), "{name}: only the leader patched: {patchers:?}");
    }
    // Both replicas measure.
    for replica in &replicas {
        assert_eq!(replica.metric("ingress_status_guard_drift_ingresses{policy=\"default\"}"), 0.0);
    }
    assert_eq!(replicas[follower].metric("ingress_status_guard_leader"), 0.0);

    // Graceful stop: the Lease is released and the other replica takes over.
    let status = replicas[leader].terminate(Duration::from_secs(20));
    assert!(status.is_some_and(|s| s.success()), "the leader exits cleanly:\n{}", replicas[leader].log_tail());
    assert!(replicas[leader].log().contains("released the leader Lease"), "{}", replicas[leader].log_tail());
    await_leader_within(&replicas[follower], LEASE_DURATION + Duration::from_secs(5)).await;

    stale_ingress(&t, &t.ns, "later", Class::Field(&class), &["198.51.100.2"]).await;
    await_all(&t, &t.ns, &["later"], &["192.0.2.10"], &replicas[follower], HEAL).await;
    let patchers: Vec<String> = reconciler_patches(&t, &t.ns, "later").into_iter().map(|(u, _)| u).collect();
    assert!(
        !patchers.is_empty() && patchers.iter().all(|u| u == users[follower]),
        "the new leader patched: {patchers:?}"
    );

    // A leader that dies without releasing (SIGKILL): a third replica takes over once the
    // Lease expires.
    let third = t.cluster.kubeconfig_for("isg-replica-c", Some("system:masters"));
    let replica_c = start(&t, &third, &args, &[("POD_NAME", "isg-replica-c")]).await;
    assert_eq!(replica_c.metric("ingress_status_guard_leader"), 0.0, "the Lease is held");
    replicas[follower].stop();
    await_leader_within(&replica_c, LEASE_DURATION + Duration::from_secs(5)).await;
    stale_ingress(&t, &t.ns, "last", Class::Field(&class), &["198.51.100.3"]).await;
    await_all(&t, &t.ns, &["last"], &["192.0.2.10"], &replica_c, HEAL).await;
}

async fn await_leader_within(webhook: &Webhook, timeout: Duration) {
    eventually(
        &format!("the other replica leads (webhook log: {})", webhook.log_path().display()),
        timeout,
        || async {
            let leader = webhook.metric("ingress_status_guard_leader");
            if leader == 1.0 { Ok(()) } else { Err(format!("leader {leader}")) }
        },
    )
    .await;
}

/// Lays out `dir` as the kubelet lays out a ConfigMap volume, with `config.yaml` holding
/// `text`: `config.yaml -> ..data/config.yaml`, `..data -> ..<version>`. Later calls swap the
/// `..data` symlink, as the kubelet does on a ConfigMap update.
fn write_config_volume(dir: &Path, version: u32, text: &str) {
    let target = dir.join(format!("..v{version}"));
    std::fs::create_dir_all(&target).unwrap();
    std::fs::write(target.join("config.yaml"), text).unwrap();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(format!("..v{version}"), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    let link = dir.join("config.yaml");
    if std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink("..data/config.yaml", &link).unwrap();
    }
}

fn policy_file(class: &str, service: &str) -> String {
    format!("policies:\n  - name: edge\n    ingressClasses: [{class}]\n    publishService: {service}\n")
}

/// Test 6: a config reload switches the source from Service A to Service B and every Ingress
/// follows; a broken file keeps the old policy and is reported in the log, the metric and an
/// Event on the webhook's Pod.
#[tokio::test]
async fn a_config_reload_moves_every_ingress_and_a_broken_file_is_refused() {
    let t = TestEnv::new("rec-reload").await;
    let class = t.ns.clone();
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    lb_service(&services, "controller-a", "203.0.113.1").await;
    lb_service(&services, "controller-b", "203.0.113.2").await;
    for name in ["x", "y"] {
        stale_ingress(&t, &t.ns, name, Class::Field(&class), &["198.51.100.1"]).await;
    }
    let dir = t.cluster.scratch_dir(&format!("config-{}", t.ns));
    write_config_volume(&dir, 1, &policy_file(&class, &format!("{}/controller-a", t.ns)));
    let config = format!("--config={}", dir.join("config.yaml").display());
    let pod = "isg-under-test";
    let webhook = start(
        &t,
        t.cluster.admin_kubeconfig(),
        &reconciler_args(&t, &[&config]),
        &[("POD_NAME", pod), ("POD_NAMESPACE", &t.ns)],
    )
    .await;
    await_all(&t, &t.ns, &["x", "y"], &["203.0.113.1"], &webhook, HEAL).await;

    write_config_volume(&dir, 2, &policy_file(&class, &format!("{}/controller-b", t.ns)));
    // The poll backstop is 10 s; the directory watch sees the swap at once.
    await_all(&t, &t.ns, &["x", "y"], &["203.0.113.2"], &webhook, HEAL).await;
    assert_eq!(webhook.metric("ingress_status_guard_config_reloads_total{result=\"success\"}"), 1.0);

    // A broken file: refused, reported, the old policy stays.
    write_config_volume(
        &dir,
        3,
        &format!("policies:\n  - name: edge\n    ingressClasses: [{class}]\n    publishService: not-a-reference\n"),
    );
    eventually("the refusal is counted", HEAL, || async {
        let failed = webhook.metric("ingress_status_guard_config_reloads_total{result=\"failed\"}");
        if failed == 1.0 { Ok(()) } else { Err(format!("failed {failed}")) }
    })
    .await;
    let log = webhook.log();
    let error =
        log.lines().find(|l| l.contains("\"level\":\"ERROR\"")).unwrap_or_else(|| panic!("an ERROR line:\n{log}"));
    assert!(error.contains("policies[0].publishService"), "the ERROR line names the field: {error}");
    let event = eventually("a Warning Event on the webhook's Pod", HEAL, || async {
        let events = Api::<Event>::namespaced(t.admin.clone(), &t.ns)
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        events
            .items
            .into_iter()
            .find(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod))
            .ok_or_else(|| "no Event yet".to_owned())
    })
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.reason.as_deref(), Some("PolicyConfigRefused"));
    assert!(event.note.as_deref().unwrap_or("").contains("policies[0].publishService"), "{event:?}");

    // Still in force: a rogue write is healed to B.
    write_status(&t.rogue, "x", &["198.51.100.7"], false).await.unwrap();
    await_all(&t, &t.ns, &["x", "y"], &["203.0.113.2"], &webhook, HEAL).await;
    assert_eq!(webhook.metric("ingress_status_guard_config_reloads_total{result=\"failed\"}"), 1.0, "reported once");
}

/// Test 8: an unresolved source (Service missing, then load balancer pending) never clears or
/// rewrites a status; once it resolves, the statuses follow.
#[tokio::test]
async fn an_unresolved_source_never_clears_a_status() {
    let t = TestEnv::new("rec-unresolved").await;
    let class = t.ns.clone();
    stale_ingress(&t, &t.ns, "kept", Class::Field(&class), &["198.51.100.1", "old.example.com"]).await;
    stale_ingress(&t, &t.ns, "empty", Class::Field(&class), &[]).await;
    let args = reconciler_args(&t, &[&format!("--publish-service={}/edge", t.ns), &format!("--ingress-class={class}")]);
    let webhook = start(&t, t.cluster.admin_kubeconfig(), &args, &[]).await;
    await_leader(&webhook).await;
    eventually("the Ingress cache synced", HEAL, || async {
        if webhook.log().contains("Ingress cache synced") { Ok(()) } else { Err("not yet".into()) }
    })
    .await;

    // Missing, then pending (a LoadBalancer Service without an address).
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "edge"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}
    }))
    .unwrap();
    services.create(&PostParams::default(), &service).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(stored(&t.ingresses, "kept").await, ["198.51.100.1", "old.example.com"]);
    assert!(stored(&t.ingresses, "empty").await.is_empty());
    assert!(reconciler_patches(&t, &t.ns, "kept").is_empty() && reconciler_patches(&t, &t.ns, "empty").is_empty());
    assert_eq!(webhook.metric("ingress_status_guard_drift_ingresses{policy=\"default\"}"), 0.0, "unknown is not drift");

    // Resolved: now they follow (so the reconciler was running all along).
    set_lb(&services, "edge", "203.0.113.30").await;
    await_all(&t, &t.ns, &["kept", "empty"], &["203.0.113.30"], &webhook, HEAL).await;
}

/// Section 4 of issue 10, as docs/migration.md tells it: Ingresses served by controller A
/// (ingress-nginx) and B (Traefik) at once; the policy pins the ADDRESS to A, B's status writes
/// are rewritten, one ConfigMap change moves every Ingress to B, and the same step in reverse
/// rolls back. The commands are the guide's; their output is written to
/// `target/tmp/e2e/run-*/migration-transcript.md`, which is where the guide's output comes from.
#[tokio::test]
async fn migration_cutover_from_controller_a_to_b_and_back() {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    // Fixed names, as in the guide, in a control plane of its own: the deploy and cutover
    // guide tests use some of them.
    let own = support::TestEnv::private("migration").await;
    let cluster = own.cluster;
    let admin = cluster.admin().await;
    let kubeconfig = cluster.admin_kubeconfig();
    let transcript = std::cell::RefCell::new(String::new());
    let run = |args: &[&str], as_user: &Path| {
        let out = cluster.kubectl(as_user, args);
        assert!(out.success, "kubectl {args:?}: {}", out.stderr);
        transcript.borrow_mut().push_str(&format!("$ kubectl {}\n{}{}\n", args.join(" "), out.stderr, out.stdout));
        out
    };
    for (ns, label) in [
        ("ingress-nginx", "migration-a"),
        ("traefik", "migration-b"),
        ("shop", "migration"),
        ("blog", "migration"),
        ("ingress-status-guard", "migration-guard"),
    ] {
        let namespace: Namespace = serde_json::from_value(json!({
            "metadata": {"name": ns, "labels": {support::cluster::NAMESPACE_LABEL: label}}
        }))
        .unwrap();
        Api::<Namespace>::all(admin.clone()).create(&PostParams::default(), &namespace).await.unwrap();
    }
    lb_service(&Api::namespaced(admin.clone(), "ingress-nginx"), "ingress-nginx-controller", "203.0.113.10").await;
    lb_service(&Api::namespaced(admin.clone(), "traefik"), "traefik", "203.0.113.20").await;
    let rogue = cluster.kubeconfig_for("system:serviceaccount:traefik:traefik", Some(support::cluster::STATUS_WRITERS));
    let a_writer = cluster
        .kubeconfig_for("system:serviceaccount:ingress-nginx:ingress-nginx", Some(support::cluster::STATUS_WRITERS));
    for (ns, name) in [("shop", "web"), ("shop", "api"), ("blog", "www")] {
        create_ingress(&Api::namespaced(admin.clone(), ns), name, Class::Field("nginx")).await;
        // Controller A publishes its address, as it does today.
        let patch = r#"{"status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.10"}]}}}"#;
        let out = cluster.kubectl(
            &a_writer,
            &["patch", "ingress", name, "-n", ns, "--subresource=status", "--type=merge", "-p", patch],
        );
        assert!(out.success, "{}", out.stderr);
    }

    // Step 1: the policy pins the ADDRESS to A's Service (the ConfigMap of manifests/, and the
    // volume the kubelet would make of it).
    let config_for = |service: &str| {
        format!("policies:\n  - name: ingress-nginx\n    ingressClasses: [nginx]\n    publishService: {service}\n")
    };
    let configmap = |service: &str| {
        let cm: ConfigMap = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "ingress-status-guard-config", "namespace": "ingress-status-guard"},
            "data": {"config.yaml": config_for(service)}
        }))
        .unwrap();
        serde_json::to_string(&cm).unwrap()
    };
    let dir = cluster.scratch_dir("migration");
    let cm_file = dir.join("configmap.json");
    std::fs::write(&cm_file, configmap("ingress-nginx/ingress-nginx-controller")).unwrap();
    run(&["apply", "-f", &cm_file.display().to_string()], kubeconfig);
    let volume = dir.join("volume");
    std::fs::create_dir_all(&volume).unwrap();
    write_config_volume(&volume, 1, &config_for("ingress-nginx/ingress-nginx-controller"));
    let config = format!("--config={}", volume.join("config.yaml").display());
    let args = [
        config.as_str(),
        "--reconcile=true",
        "--leader-election-namespace=ingress-status-guard",
        LEASE_FLAGS[0],
        LEASE_FLAGS[1],
        LEASE_FLAGS[2],
    ];
    let webhook = Webhook::start_with_env(cluster, "migration", kubeconfig, &args, &[]).await;
    webhook.register(&admin, "migration", FailurePolicy::Ignore).await;
    run(&["get", "ingress", "-A"], kubeconfig);

    // Step 2: B runs too and writes its own address: rewritten to A's.
    let b_patch = r#"{"status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.20"}]}}}"#;
    let attempt = || {
        cluster.kubectl(
            &rogue,
            &["patch", "ingress", "web", "-n", "shop", "--subresource=status", "--type=merge", "-p", b_patch],
        )
    };
    eventually("B's write is rewritten by the webhook", Duration::from_secs(30), || async {
        let out = attempt();
        if out.success && out.stderr.contains("rewritten to [203.0.113.10]") { Ok(()) } else { Err(out.stderr) }
    })
    .await;
    run(&["patch", "ingress", "web", "-n", "shop", "--subresource=status", "--type=merge", "-p", b_patch], &rogue);
    run(&["get", "ingress", "-A"], kubeconfig);
    let all = |want: &'static [&'static str]| {
        let admin = admin.clone();
        let webhook = &webhook;
        async move {
            for (ns, name) in [("shop", "web"), ("shop", "api"), ("blog", "www")] {
                let api: Api<k8s_openapi::api::networking::v1::Ingress> = Api::namespaced(admin.clone(), ns);
                let ns_owned = ns.to_owned();
                eventually(
                    &format!("{ns}/{name} stores {want:?} (log: {})", webhook.log_path().display()),
                    HEAL,
                    || {
                        let api = api.clone();
                        let ns = ns_owned.clone();
                        async move {
                            let got = addresses(&api.get(name).await.map_err(|e| e.to_string())?);
                            if got == want { Ok(()) } else { Err(format!("{ns}/{name}: {got:?}")) }
                        }
                    },
                )
                .await;
            }
        }
    };
    all(&["203.0.113.10"]).await;

    // Step 3: no drift, as `check` reports it (read-only) and as the metric every replica
    // exports says.
    let check = |transcript: &std::cell::RefCell<String>| {
        let out = std::process::Command::new(support::webhook::BINARY)
            .args(["check", &config, &format!("--kubeconfig={}", kubeconfig.display())])
            .output()
            .expect("run check");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        transcript.borrow_mut().push_str(&format!(
            "$ ingress-status-guard check --config=config.yaml\n{stdout}$ echo $?\n{}\n\n",
            out.status.code().unwrap_or(-1)
        ));
        (out.status.code(), stdout)
    };
    let (code, stdout) = check(&transcript);
    assert_eq!(code, Some(0), "check finds no drift: {stdout}");
    let drift = webhook.metric("ingress_status_guard_drift_ingresses{policy=\"ingress-nginx\"}");
    assert_eq!(drift, 0.0);
    transcript.borrow_mut().push_str(&format!(
        "$ curl -s localhost:8080/metrics | grep -E '^ingress_status_guard_(drift|leader)'\n{}\n",
        webhook
            .metrics()
            .lines()
            .filter(|l| l.starts_with("ingress_status_guard_drift") || l.starts_with("ingress_status_guard_leader"))
            .collect::<Vec<_>>()
            .join("\n")
    ));

    // Step 4: one change points the policy at B; every Ingress follows.
    std::fs::write(&cm_file, configmap("traefik/traefik")).unwrap();
    run(&["apply", "-f", &cm_file.display().to_string()], kubeconfig);
    write_config_volume(&volume, 2, &config_for("traefik/traefik"));
    all(&["203.0.113.20"]).await;
    run(&["get", "ingress", "-A"], kubeconfig);
    let (code, stdout) = check(&transcript);
    assert_eq!(code, Some(0), "after the cutover, check finds no drift: {stdout}");
    assert!(stdout.contains("service traefik/traefik"), "{stdout}");
    let log_lines = |log: &str| {
        log.lines()
            .filter(|l| {
                l.contains("policy reloaded")
                    || l.contains("policy file reloaded")
                    || l.contains("reconciled stored status")
            })
            .map(String::from)
            .collect::<Vec<_>>()
    };
    transcript
        .borrow_mut()
        .push_str(&format!("--- webhook log after the cutover ---\n{}\n", log_lines(&webhook.log()).join("\n")));
    // B's writes now stand; A's are rewritten.
    let a_patch = r#"{"status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.10"}]}}}"#;
    let out = run(
        &["patch", "ingress", "api", "-n", "shop", "--subresource=status", "--type=merge", "-p", a_patch],
        &a_writer,
    );
    assert!(out.stderr.contains("rewritten to [203.0.113.20]"), "{}", out.stderr);

    // Step 5: rollback is the same step in reverse.
    std::fs::write(&cm_file, configmap("ingress-nginx/ingress-nginx-controller")).unwrap();
    run(&["apply", "-f", &cm_file.display().to_string()], kubeconfig);
    write_config_volume(&volume, 3, &config_for("ingress-nginx/ingress-nginx-controller"));
    all(&["203.0.113.10"]).await;
    run(&["get", "ingress", "-A"], kubeconfig);
    assert_eq!(webhook.metric("ingress_status_guard_config_reloads_total{result=\"success\"}"), 2.0);

    let file = dir.join("migration-transcript.md");
    std::fs::write(&file, transcript.into_inner()).unwrap();
}

/// An API server the reconciler cannot reach (its kubeconfig names a closed port): the webhook
/// still gets ready and answers the real API server's reviews from its caches (a static source
/// here), and the failure is logged and counted.
#[tokio::test]
async fn an_unreachable_api_server_is_counted_and_admission_keeps_working() {
    let t = TestEnv::new("rec-outage").await;
    let dir = t.cluster.scratch_dir("unreachable");
    let port = support::cluster::free_port();
    let kubeconfig = dir.join("kubeconfig.yaml");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\n\
             users:\n- name: u\n  user:\n    token: nothing\ncontexts:\n- name: c\n  context:\n    cluster: gone\n    user: u\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    let args = ["--reconcile=true", "--publish-status-address=192.0.2.10", "--leader-election-retry-period=1s"];
    // `start` returns once /readyz answers 200: readiness does not wait for the reconciler.
    let webhook = Webhook::start(t.cluster, &t.ns, &kubeconfig, &args).await;
    eventually("the failed Ingress watch is counted", HEAL, || async {
        let errors = webhook.metric("ingress_status_guard_ingress_watch_errors_total");
        if errors >= 1.0 { Ok(()) } else { Err(format!("errors {errors}")) }
    })
    .await;
    assert!(webhook.log().contains("Ingress watch failed"), "{}", webhook.log_tail());
    assert_eq!(webhook.metric("ingress_status_guard_leader"), 0.0, "no Lease, no leader");
    // The real API server calls it, and a rogue write is rewritten.
    t.register(&webhook, FailurePolicy::Fail, Class::None, &["192.0.2.10"]).await;
}

/// Issue 34: the watch keeps nothing of an Ingress no policy governs; a reload that governs
/// its class lists again, and the Ingress is healed like any other.
#[tokio::test]
async fn a_reload_that_governs_another_class_lists_again_and_heals_it() {
    let t = TestEnv::new("rec-widen").await;
    let (class, other) = (t.ns.clone(), format!("{}-other", t.ns));
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    lb_service(&services, "controller-a", "203.0.113.1").await;
    stale_ingress(&t, &t.ns, "x", Class::Field(&class), &["198.51.100.1"]).await;
    stale_ingress(&t, &t.ns, "y", Class::Field(&other), &["198.51.100.1"]).await;
    let dir = t.cluster.scratch_dir(&format!("config-{}", t.ns));
    let service = format!("{}/controller-a", t.ns);
    write_config_volume(&dir, 1, &policy_file(&class, &service));
    let config = format!("--config={}", dir.join("config.yaml").display());
    let webhook = start(&t, t.cluster.admin_kubeconfig(), &reconciler_args(&t, &[&config]), &[]).await;
    await_all(&t, &t.ns, &["x"], &["203.0.113.1"], &webhook, HEAL).await;
    let api: Api<k8s_openapi::api::networking::v1::Ingress> = Api::namespaced(t.admin.clone(), &t.ns);
    assert_eq!(addresses(&api.get("y").await.unwrap()), ["198.51.100.1"], "another class: not the guard's");
    assert!(!webhook.log().contains("the objects kept widened"), "no re-list before the reload");

    write_config_volume(&dir, 2, &policy_file(&format!("{class}, {other}"), &service));
    await_all(&t, &t.ns, &["x", "y"], &["203.0.113.1"], &webhook, HEAL).await;
    let log = webhook.log();
    assert!(log.contains("the objects kept widened"), "the reload widened the classes, and the watch listed again");
}
