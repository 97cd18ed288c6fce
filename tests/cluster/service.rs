//! LoadBalancer Services, end to end: the built binary against the real kube-apiserver + etcd
//! of `support`. What a `services/status` write can change besides the status (measured, no
//! guard); an enforce Service policy with an acknowledged static source rewriting a governed
//! Service's status write and healing a stale one, while a ClusterIP Service and a Service of
//! another `loadBalancerClass` are never touched.
//!
//! Isolation in the shared API server: each Service policy selects its own namespace
//! (`namespaceSelector` on the namespace's label), so a reconciler never reaches another test's
//! Services.

use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support::{SENTINEL, SENTINEL_2, TestEnv, Webhook, cluster::NAMESPACE_LABEL, eventually};

/// Generous bound for state that settles asynchronously on a loaded machine.
const SETTLE: Duration = Duration::from_secs(30);
const CANONICAL: &str = "192.0.2.70";
const FIELD_MANAGER: &str = "isg-e2e-lb-controller";

/// Creates Service `name` of `type` (and `loadBalancerClass`, for a LoadBalancer).
pub(crate) async fn create_service(api: &Api<Service>, name: &str, kind: &str, class: Option<&str>) {
    let mut spec = json!({"type": kind, "ports": [{"port": 80, "protocol": "TCP"}], "selector": {"app": name}});
    if kind == "LoadBalancer" {
        spec["allocateLoadBalancerNodePorts"] = json!(false);
    }
    if let Some(class) = class {
        spec["loadBalancerClass"] = json!(class);
    }
    let service: Service =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": name}}, "spec": spec}))
            .expect("a Service object");
    api.create(&PostParams::default(), &service).await.unwrap_or_else(|e| panic!("create Service {name}: {e}"));
}

/// A `services/status` merge patch of `status` (and whatever else `extra` holds), as a load
/// balancer controller sends it.
pub(crate) async fn write_status(api: &Api<Service>, name: &str, status: Value, extra: Value) -> kube::Result<Service> {
    let mut patch = json!({"status": status});
    for (key, value) in extra.as_object().expect("an object").clone() {
        patch[key] = value;
    }
    let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
    api.patch_status(name, &params, &Patch::Merge(&patch)).await
}

pub(crate) fn ingress_of(ips: &[&str]) -> Value {
    json!({"loadBalancer": {"ingress": ips.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>()}})
}

/// The IPs of a stored Service's `status.loadBalancer.ingress`.
pub(crate) fn stored_ips(service: &Service) -> Vec<String> {
    let entries = service.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|lb| lb.ingress.as_ref());
    entries.into_iter().flatten().filter_map(|e| e.ip.clone()).collect()
}

/// Whether the API server has `ipMode` (1.29 behind a gate, on by default from 1.30; the field
/// is dropped on older ones).
async fn serves_ip_mode(client: &kube::Client) -> bool {
    let version = client.apiserver_version().await.expect("the API server's version");
    let minor: u32 = version.minor.trim_end_matches('+').parse().expect("a minor version");
    version.major == "1" && minor >= 30
}

#[tokio::test]
async fn a_service_status_write_stores_its_metadata_and_never_its_spec() {
    let t = TestEnv::new("svc-forged").await;
    let api: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    create_service(&api, "lb", "LoadBalancer", Some("example.com/lb")).await;
    let extra = json!({
        "metadata": {"labels": {"forged": "yes"}, "annotations": {"forged": "yes"}},
        "spec": {"type": "ClusterIP", "loadBalancerClass": "example.com/other"},
    });
    // ipMode written: the API server defaults it only when the written spec.type is LoadBalancer.
    let status = json!({"loadBalancer": {"ingress": [{"ip": SENTINEL, "ipMode": "VIP"}]}});
    let stored = write_status(&api, "lb", status, extra).await.expect("the status write");
    assert_eq!(stored_ips(&stored), [SENTINEL]);
    let spec = stored.spec.as_ref().unwrap();
    assert_eq!(
        (spec.type_.as_deref(), spec.load_balancer_class.as_deref()),
        (Some("LoadBalancer"), Some("example.com/lb")),
        "the status strategy puts the stored spec back"
    );
    let meta = &stored.metadata;
    assert_eq!(meta.labels.as_ref().unwrap().get("forged").map(String::as_str), Some("yes"), "labels are stored");
    assert_eq!(meta.annotations.as_ref().unwrap().get("forged").map(String::as_str), Some("yes"), "annotations too");
}

/// The guard with the policy file `file` and its reconciler, leading its own Lease in the
/// test's namespace with short terms.
async fn start_reconciling(t: &TestEnv, file: &std::path::Path) -> Webhook {
    let args = [
        format!("--config={}", file.display()),
        "--reconcile=true".to_owned(),
        format!("--leader-election-namespace={}", t.ns),
        "--leader-election-lease-duration=4s".to_owned(),
        "--leader-election-renew-deadline=3s".to_owned(),
        "--leader-election-retry-period=1s".to_owned(),
    ];
    t.start_webhook(&args.iter().map(String::as_str).collect::<Vec<_>>()).await
}

/// Registers `webhook` for `services/status` UPDATEs in namespace `ns` only.
pub(crate) async fn register_services(t: &TestEnv, webhook: &Webhook) {
    use base64::Engine as _;
    use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
    let name = format!("isg-e2e-services-{}", t.ns);
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": name},
        "webhooks": [{
            "name": format!("services.{}.e2e.ingress-status-guard.test", t.ns),
            "clientConfig": {"url": webhook.url(), "caBundle": base64::engine::general_purpose::STANDARD.encode(webhook.ca_pem())},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["services/status"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: t.ns}},
            "admissionReviewVersions": ["v1"],
            "sideEffects": "NoneOnDryRun",
            "matchPolicy": "Equivalent",
            "failurePolicy": "Fail",
            "timeoutSeconds": 5,
        }]
    }))
    .expect("MutatingWebhookConfiguration object");
    Api::<MutatingWebhookConfiguration>::all(t.admin.clone())
        .create(&PostParams::default(), &config)
        .await
        .unwrap_or_else(|e| panic!("create MutatingWebhookConfiguration {name}: {e}"));
}

#[tokio::test]
async fn an_enforce_service_policy_governs_its_load_balancers_and_no_other_service() {
    let t = TestEnv::new("svc-enforce").await;
    let ns = &t.ns;
    let api: Api<Service> = Api::namespaced(t.admin.clone(), ns);
    create_service(&api, "lb", "LoadBalancer", None).await;
    create_service(&api, "other", "LoadBalancer", Some("example.com/other")).await;
    create_service(&api, "internal", "ClusterIP", None).await;
    // Stale statuses stored before the guard runs.
    for name in ["lb", "other"] {
        let stored = write_status(&api, name, ingress_of(&[SENTINEL]), json!({})).await.expect("a stale status");
        assert_eq!(stored_ips(&stored), [SENTINEL]);
    }

    let dir = t.cluster.scratch_dir(&format!("config-{ns}"));
    let file = dir.join("config.yaml");
    let policies = format!(
        "policies:\n  - {{name: metallb, kind: Service, loadBalancerClasses: [''], namespaceSelector: '{NAMESPACE_LABEL}={ns}', publishStatusAddress: {CANONICAL}, acknowledgeKubeProxyImpact: true, mode: enforce}}\n"
    );
    std::fs::write(&file, policies).expect("write the policy file");
    let webhook = start_reconciling(&t, &file).await;
    let log = webhook.log_path().display().to_string();

    // The reconciler heals the stale governed Service, through the status subresource.
    let healed = eventually(&format!("Service {ns}/lb healed by the reconciler (log: {log})"), SETTLE, || async {
        let got = api.get("lb").await.map_err(|e| e.to_string())?;
        if stored_ips(&got) == [CANONICAL] { Ok(got) } else { Err(format!("stored {:?}", stored_ips(&got))) }
    })
    .await;
    let entry = &healed.status.as_ref().unwrap().load_balancer.as_ref().unwrap().ingress.as_ref().unwrap()[0];
    let served = serves_ip_mode(&t.admin).await;
    assert_eq!(
        entry.ip_mode.as_deref(),
        served.then_some("VIP"),
        "the patch's ipMode, where the API server has the field"
    );
    let managers: Vec<&str> =
        healed.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.as_deref()).collect();
    assert!(managers.contains(&"ingress-status-guard"), "the reconciler's field manager: {managers:?}");

    // The webhook rewrites a later write of the governed Service as it is made.
    register_services(&t, &webhook).await;
    eventually(&format!("a write of Service {ns}/lb is rewritten (log: {log})"), SETTLE, || async {
        let stored = write_status(&api, "lb", ingress_of(&[SENTINEL_2]), json!({})).await.map_err(|e| e.to_string())?;
        if stored_ips(&stored) == [CANONICAL] { Ok(()) } else { Err(format!("stored {:?}", stored_ips(&stored))) }
    })
    .await;

    // Another class: written and stored as written, by the webhook and the reconciler alike.
    let stored = write_status(&api, "other", ingress_of(&[SENTINEL_2]), json!({})).await.expect("another class");
    assert_eq!(stored_ips(&stored), [SENTINEL_2], "a Service of another loadBalancerClass is never rewritten");
    // A ClusterIP Service's status write passes unread: a patch adding load-balancer entries
    // would make the API server refuse it ("may only be used when spec.type is LoadBalancer").
    let conditions = json!({"conditions": [{"type": "Probe", "status": "True", "reason": "Test", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
    let stored = write_status(&api, "internal", conditions.clone(), json!({})).await.expect("a ClusterIP status write");
    assert!(stored_ips(&stored).is_empty());
    assert_eq!(stored.status.as_ref().unwrap().conditions.as_ref().map(Vec::len), Some(1));

    // Give the reconciler time to act on what it should not: a later write to the governed
    // Service is healed again, and by then the others are still as written.
    write_status(&api, "lb", ingress_of(&[SENTINEL]), json!({})).await.expect("a write of lb");
    eventually(&format!("Service {ns}/lb canonical (log: {log})"), SETTLE, || async {
        let got = api.get("lb").await.map_err(|e| e.to_string())?;
        if stored_ips(&got) == [CANONICAL] { Ok(()) } else { Err(format!("stored {:?}", stored_ips(&got))) }
    })
    .await;
    for name in ["other", "internal"] {
        let got = api.get(name).await.unwrap();
        let touched =
            got.metadata.managed_fields.iter().flatten().any(|m| m.manager.as_deref() == Some("ingress-status-guard"));
        assert!(!touched, "Service {name} is never patched by the guard");
    }
    assert_eq!(stored_ips(&api.get("other").await.unwrap()), [SENTINEL_2]);
    let patched = webhook.metric("ingress_status_guard_admission_requests_total{result=\"patched\"}");
    assert!(patched >= 1.0, "the webhook's rewrite is counted (log: {log})");
    let healed = webhook.metric("ingress_status_guard_reconcile_patches_total{policy=\"metallb\",result=\"patched\"}");
    assert!(healed >= 1.0, "the reconciler's patch is counted (log: {log})");
    eventually("no governed Service drifts", SETTLE, || async {
        let drift = webhook.metric("ingress_status_guard_drift_objects{policy=\"metallb\",kind=\"service\"}");
        if drift == 0.0 { Ok(()) } else { Err(format!("drift {drift}")) }
    })
    .await;
    assert!(webhook.forbidden_lines().is_empty(), "{:?}", webhook.forbidden_lines());
    // The audit line names the Service by its kind's fields.
    let log = webhook.log();
    let line = log.lines().find(|l| l.contains("\"rogue Service status write\"")).expect("a rogue Service line");
    for field in [
        format!("\"service_namespace\":\"{ns}\""),
        "\"service_name\":\"lb\"".to_owned(),
        "\"load_balancer_class\":\"\"".to_owned(),
        "\"action\":\"patched\"".to_owned(),
    ] {
        assert!(line.contains(&field), "{field} in {line}");
    }

    // `check` lists the governed Service and counts the other class as not governed; a
    // ClusterIP Service is neither listed nor counted.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ingress-status-guard"))
        .args([
            "check",
            &format!("--kubeconfig={}", t.cluster.admin_kubeconfig().display()),
            &format!("--config={}", file.display()),
            "--kind=service",
            &format!("--namespace={ns}"),
        ])
        .env_remove("KUBECONFIG")
        .output()
        .expect("run check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&format!("{ns}/lb")) && stdout.contains(CANONICAL), "{stdout}");
    assert!(!stdout.contains("internal") && !stdout.contains(&format!("{ns}/other")), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.starts_with("governed Services: 1 (1 OK, 0 DRIFT, 0 UNRESOLVED); not governed: 1")),
        "{stdout}"
    );
}

/// Two load-balancer controllers, each its own ServiceAccount identity, in namespace `ns`:
/// `(metallb, kube-vip)`, with a Role to write Services' status there.
pub(crate) async fn two_controllers(t: &TestEnv) -> (Api<Service>, Api<Service>, String, String) {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let ns = &t.ns;
    let (first, second) =
        (format!("system:serviceaccount:{ns}:metallb"), format!("system:serviceaccount:{ns}:kube-vip"));
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "lb-controllers"},
        "rules": [
            {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["services/status"], "verbs": ["get", "update", "patch"]},
        ],
    }))
    .unwrap();
    Api::<Role>::namespaced(t.admin.clone(), ns).create(&PostParams::default(), &role).await.unwrap();
    let subjects: Vec<Value> =
        [&first, &second].map(|u| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": u})).to_vec();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "lb-controllers"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "lb-controllers"},
        "subjects": subjects,
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(t.admin.clone(), ns).create(&PostParams::default(), &binding).await.unwrap();
    let first_api = Api::namespaced(t.cluster.client_for(&first, None).await, ns);
    let second_api = Api::namespaced(t.cluster.client_for(&second, None).await, ns);
    (first_api, second_api, first, second)
}

/// Two controllers fight over LoadBalancer Services whose policies trust the first: in
/// `enforce` the stored status is the first's at every change the API server stores (watched
/// for the whole fight), in `deny` the second is refused naming the policy, in `audit` both
/// land and the second is reported by name.
#[tokio::test]
async fn a_trusted_controller_wins_a_fight_over_a_load_balancer_service() {
    use futures::{StreamExt as _, TryStreamExt as _};
    use kube::api::WatchParams;
    let t = TestEnv::new("svc-trusted").await;
    let ns = &t.ns;
    let admin: Api<Service> = Api::namespaced(t.admin.clone(), ns);
    let (metallb, kube_vip, first, second) = two_controllers(&t).await;
    let class = |mode: &str| format!("e2e.test/{mode}");
    let dir = t.cluster.scratch_dir(&format!("config-{ns}"));
    let file = dir.join("config.yaml");
    let policy = |mode: &str| {
        format!(
            "  - {{name: {ns}-{mode}, kind: Service, loadBalancerClasses: ['{}'], namespaceSelector: '{NAMESPACE_LABEL}={ns}', mode: {mode}, trustedWriters: ['{first}']}}\n",
            class(mode)
        )
    };
    std::fs::write(&file, format!("policies:\n{}{}{}", policy("enforce"), policy("deny"), policy("audit"))).unwrap();
    let webhook = t.start_webhook(&[&format!("--config={}", file.display())]).await;
    register_services(&t, &webhook).await;
    let log = webhook.log_path().display().to_string();
    for mode in ["enforce", "deny", "audit"] {
        create_service(&admin, mode, "LoadBalancer", Some(&class(mode))).await;
    }

    // Enforce: until the API server calls the webhook, the second's write lands; then it is
    // put back to the first's.
    let (ours, theirs) = (ingress_of(&["198.51.100.10"]), ingress_of(&["198.51.100.20"]));
    eventually(&format!("the second controller's write is put back (log: {log})"), SETTLE, || async {
        write_status(&metallb, "enforce", ours.clone(), json!({})).await.map_err(|e| e.to_string())?;
        let got = write_status(&kube_vip, "enforce", theirs.clone(), json!({})).await.map_err(|e| e.to_string())?;
        if stored_ips(&got) == ["198.51.100.10"] { Ok(()) } else { Err(format!("stored {:?}", stored_ips(&got))) }
    })
    .await;
    // From here on, every version the API server stores is the first controller's.
    let from = admin.get("enforce").await.unwrap().metadata.resource_version.unwrap();
    let params = WatchParams::default().fields("metadata.name=enforce");
    let mut stream = admin.watch(&params, &from).await.unwrap().boxed();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let watched = tokio::spawn({
        let seen = seen.clone();
        async move {
            while let Ok(Some(event)) = stream.try_next().await {
                if let kube::api::WatchEvent::Added(s) | kube::api::WatchEvent::Modified(s) = event {
                    seen.lock().unwrap().push(stored_ips(&s));
                }
            }
        }
    });
    let moves = ["198.51.100.11", "198.51.100.12", "198.51.100.13"];
    for round in 0..12 {
        let own = moves[round % moves.len()];
        let stored = write_status(&metallb, "enforce", ingress_of(&[own]), json!({})).await.unwrap();
        assert_eq!(stored_ips(&stored), [own], "the trusted controller's write stands");
        let fought = write_status(&kube_vip, "enforce", theirs.clone(), json!({})).await.unwrap();
        assert_eq!(stored_ips(&fought), [own], "round {round}: the second's write is put back");
    }
    // Every trusted write is a change the watch delivers; the last one ends the wait.
    let last = vec![moves[11 % moves.len()].to_owned()];
    eventually("the watch delivers the fight", SETTLE, || async {
        let seen = seen.lock().unwrap();
        if seen.len() >= 12 && seen.last() == Some(&last) { Ok(()) } else { Err(format!("{seen:?}")) }
    })
    .await;
    watched.abort();
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.iter().all(|ips| ips.len() == 1 && moves.contains(&ips[0].as_str())),
        "the API server stored a status that is not the trusted controller's: {seen:?}"
    );
    let patched = format!(
        "ingress_status_guard_rogue_writes_total{{policy=\"{ns}-enforce\",writer=\"{second}\",action=\"patched\"}}"
    );
    assert!(webhook.metric(&patched) >= 12.0, "every put-back counted, by the writer's name (log: {log})");

    // Deny: the first's write lands, the second's is refused naming the policy.
    write_status(&metallb, "deny", ours.clone(), json!({})).await.expect("the trusted write");
    let refused = write_status(&kube_vip, "deny", theirs.clone(), json!({})).await.expect_err("refused");
    let kube::Error::Api(status) = &refused else { panic!("{refused:?}") };
    assert_eq!(status.code, 403, "{status:?}");
    assert!(status.message.contains(&format!("policy \"{ns}-deny\"")), "{}", status.message);
    assert_eq!(stored_ips(&admin.get("deny").await.unwrap()), ["198.51.100.10"]);

    // Audit: both land; the second is reported with its name, the first is no finding.
    write_status(&metallb, "audit", ours.clone(), json!({})).await.expect("the trusted write");
    let landed = write_status(&kube_vip, "audit", theirs.clone(), json!({})).await.expect("allowed");
    assert_eq!(stored_ips(&landed), ["198.51.100.20"], "landed as written");
    let audited = format!(
        "ingress_status_guard_rogue_writes_total{{policy=\"{ns}-audit\",writer=\"{second}\",action=\"audited\"}}"
    );
    eventually("the second's write is reported", SETTLE, || async {
        if webhook.metric(&audited) >= 1.0 { Ok(()) } else { Err(webhook.log_tail()) }
    })
    .await;
    let trusted_label = format!("writer=\"{first}\"");
    assert!(!webhook.metrics().lines().any(|l| l.contains(&trusted_label)), "{}", webhook.metrics());
    assert!(webhook.forbidden_lines().is_empty(), "{:?}", webhook.forbidden_lines());
}

/// The publish-Service chain: an Ingress policy follows a LoadBalancer Service whose own policy
/// trusts one controller. While a second controller fights over the Service, no Ingress that
/// follows it ever stores another address (every version watched); when the trusted controller
/// moves the address, the Ingresses follow it.
#[tokio::test]
async fn ingresses_that_follow_a_trusted_service_never_flap_while_controllers_fight() {
    use futures::{StreamExt as _, TryStreamExt as _};
    use kube::api::WatchParams;
    let t = TestEnv::new("svc-chain").await;
    let ns = &t.ns;
    let admin: Api<Service> = Api::namespaced(t.admin.clone(), ns);
    let (metallb, kube_vip, first, _) = two_controllers(&t).await;
    let ingress_class = format!("{ns}-class");
    create_service(&admin, "edge", "LoadBalancer", Some("e2e.test/chain")).await;
    write_status(&metallb, "edge", ingress_of(&["198.51.100.10"]), json!({})).await.expect("the trusted write");

    let dir = t.cluster.scratch_dir(&format!("config-{ns}"));
    let file = dir.join("config.yaml");
    let policies = format!(
        "policies:\n\
         \x20 - {{name: {ns}-edge, kind: Service, loadBalancerClasses: ['e2e.test/chain'], namespaceSelector: '{NAMESPACE_LABEL}={ns}', mode: enforce, trustedWriters: ['{first}']}}\n\
         \x20 - {{name: {ns}-web, ingressClasses: [{ingress_class}], publishService: {ns}/edge, mode: enforce}}\n"
    );
    std::fs::write(&file, policies).unwrap();
    let webhook = start_reconciling(&t, &file).await;
    webhook.register(&t.admin, ns, crate::support::FailurePolicy::Fail).await;
    register_services(&t, &webhook).await;
    let log = webhook.log_path().display().to_string();
    let names = ["web-0", "web-1", "web-2"];
    for name in names {
        crate::support::create_ingress(&t.ingresses, name, crate::support::Class::Field(&ingress_class)).await;
    }
    let all_at = |ip: &'static str| {
        let ingresses = t.ingresses.clone();
        async move {
            for name in names {
                let got = crate::support::stored(&ingresses, name).await;
                if got != [ip] {
                    return Err(format!("{name} stored {got:?}"));
                }
            }
            Ok(())
        }
    };
    eventually(&format!("the Ingresses follow the Service (log: {log})"), SETTLE, || all_at("198.51.100.10")).await;
    eventually(&format!("the second controller's Service write is put back (log: {log})"), SETTLE, || async {
        let got = write_status(&kube_vip, "edge", ingress_of(&["198.51.100.20"]), json!({}))
            .await
            .map_err(|e| e.to_string())?;
        if stored_ips(&got) == ["198.51.100.10"] { Ok(()) } else { Err(format!("stored {:?}", stored_ips(&got))) }
    })
    .await;

    // Every version of every Ingress the API server stores from here on.
    let from = t.ingresses.list(&Default::default()).await.unwrap().metadata.resource_version.unwrap();
    let mut stream = t.ingresses.watch(&WatchParams::default(), &from).await.unwrap().boxed();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let watched = tokio::spawn({
        let seen = seen.clone();
        async move {
            while let Ok(Some(event)) = stream.try_next().await {
                if let kube::api::WatchEvent::Added(i) | kube::api::WatchEvent::Modified(i) = event {
                    seen.lock()
                        .unwrap()
                        .push((i.metadata.name.clone().unwrap_or_default(), crate::support::addresses(&i)));
                }
            }
        }
    });
    for round in 0..12 {
        let fought = write_status(&kube_vip, "edge", ingress_of(&["198.51.100.20"]), json!({})).await.unwrap();
        assert_eq!(stored_ips(&fought), ["198.51.100.10"], "round {round}: put back");
    }
    // Time for a reconciler pass that would follow a flapped Service; then a real move, which
    // the Ingresses follow, and which ends the watch's record.
    tokio::time::sleep(Duration::from_secs(3)).await;
    write_status(&metallb, "edge", ingress_of(&["198.51.100.11"]), json!({})).await.expect("the trusted move");
    eventually(&format!("the Ingresses follow the trusted move (log: {log})"), SETTLE, || all_at("198.51.100.11"))
        .await;
    eventually("the watch delivers the move", SETTLE, || async {
        let seen = seen.lock().unwrap();
        let moved = names.iter().all(|n| seen.iter().any(|(name, ips)| name == n && ips == &["198.51.100.11"]));
        if moved { Ok(()) } else { Err(format!("{seen:?}")) }
    })
    .await;
    watched.abort();
    let seen = seen.lock().unwrap().clone();
    let flapped: Vec<_> =
        seen.iter().filter(|(_, ips)| ips != &["198.51.100.10"] && ips != &["198.51.100.11"]).collect();
    assert!(flapped.is_empty(), "an Ingress stored an address the trusted controller never wrote: {flapped:?}");
    let moves = seen.iter().filter(|(_, ips)| ips == &["198.51.100.11"]).count();
    assert_eq!(moves, names.len(), "each Ingress moved once, with the Service: {seen:?}");
}
