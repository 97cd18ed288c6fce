//! `doctor` against the real API server and a running webhook: it passes on a working
//! registration and fails, naming the cause, with a wrong caBundle, a webhook rule that misses
//! `ingresses/status`, and a Service without endpoints; `--wait` passes once the fault is mended
//! while it waits.

use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use super::{Run, run};
use crate::support::pki::Ca;
use crate::support::{Class, FailurePolicy, TestEnv, eventually};

const CANONICAL: &str = "203.0.113.10";

/// Edits the test's MutatingWebhookConfiguration with `edit` (read, change, replace).
async fn edit(t: &TestEnv, name: &str, edit: impl Fn(&mut Value)) {
    let api = Api::<MutatingWebhookConfiguration>::all(t.admin.clone());
    let mut value = serde_json::to_value(api.get(name).await.expect("get the configuration")).unwrap();
    edit(&mut value);
    let changed: MutatingWebhookConfiguration = serde_json::from_value(value).unwrap();
    api.replace(name, &PostParams::default(), &changed).await.expect("replace the configuration");
}

fn line<'a>(out: &'a Run, check: &str) -> &'a str {
    out.stdout
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(check))
        .unwrap_or_else(|| panic!("no {check} line:\n{}", out.stdout))
}

#[tokio::test]
async fn doctor_passes_on_a_working_webhook_and_names_each_fault() {
    let t = TestEnv::new("doctor").await;
    let class = format!("cls-{}", t.ns);
    let policy = [format!("--publish-status-address={CANONICAL}"), format!("--ingress-class={class}")];
    let webhook = t.start_webhook(&[&policy[0], &policy[1]]).await;
    t.register(&webhook, FailurePolicy::Ignore, Class::Field(&class), &[CANONICAL]).await;
    let config = format!("isg-e2e-{}", t.ns);
    let kubeconfig = format!("--kubeconfig={}", t.cluster.admin_kubeconfig().display());
    let configuration = format!("--webhook-configuration={config}");
    let probe = format!("--probe={}/probe", t.ns);
    let args = ["doctor", &kubeconfig, &configuration, &probe, &policy[0], &policy[1]];

    let out = run(&args);
    assert_eq!(out.code, Some(0), "a working webhook is healthy: {}{}", out.stdout, out.stderr);
    assert!(line(&out, "configuration").starts_with("PASS"), "{}", out.stdout);
    let ca = line(&out, "ca-bundle");
    assert!(ca.starts_with("PASS") && ca.contains("the caBundle verifies the certificate"), "{ca}");
    let write = line(&out, "dry-run-write");
    assert!(write.starts_with("PASS") && write.contains(&format!("came back rewritten to [{CANONICAL}]")), "{write}");
    // A dry run: nothing stored.
    assert_eq!(crate::support::stored(&t.ingresses, "probe").await, [CANONICAL]);

    for format in ["json", "yaml"] {
        let out = run(&[&args[..], &["-o", format]].concat());
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        let report: Value = match format {
            "json" => serde_json::from_str(&out.stdout).expect("-o json is one JSON document"),
            _ => serde_norway::from_str(&out.stdout).expect("-o yaml is one YAML document"),
        };
        assert_eq!(report["healthy"], true, "{report}");
        assert!(report["checks"].as_array().unwrap().iter().all(|c| c["state"] == "pass" || c["state"] == "skip"));
    }
    let out = run(&[&args[..], &["-o", "xml"]].concat());
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr.contains("table") && out.stderr.contains("json") && out.stderr.contains("yaml"),
        "{}",
        out.stderr
    );

    // (a) A caBundle of another CA: the API server refuses the certificate and, failing open,
    // lets the write through unreviewed.
    let right = BASE64.encode(webhook.ca_pem());
    let wrong = BASE64.encode(Ca::new("not the webhook's CA").cert_pem);
    edit(&t, &config, |c| c["webhooks"][0]["clientConfig"]["caBundle"] = json!(wrong)).await;
    let out = eventually("doctor sees the wrong caBundle", Duration::from_secs(30), || async {
        let out = run(&args);
        if out.code == Some(1) && line(&out, "dry-run-write").starts_with("FAIL") { Ok(out) } else { Err(out.stdout) }
    })
    .await;
    let ca = line(&out, "ca-bundle");
    assert!(ca.starts_with("FAIL") && ca.contains("the caBundle does not verify the certificate"), "{ca}");
    assert!(line(&out, "dry-run-write").contains("came back unchanged, with no warning"), "{}", out.stdout);
    assert!(out.stdout.contains("re-run `certs bootstrap`"), "{}", out.stdout);

    // --wait: unhealthy at first, healthy once the caBundle is mended while it waits.
    let mut waiting = Command::new(crate::support::webhook::BINARY)
        .args([&args[..], &["--wait=2m"]].concat())
        .env_remove("KUBECONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start doctor --wait");
    let stderr = waiting.stderr.take().unwrap();
    let (said, said_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = said.send(line);
        }
    });
    let first = loop {
        let said = said_rx.recv_timeout(Duration::from_secs(60)).expect("doctor --wait says it is not healthy yet");
        if said.starts_with("not healthy yet") {
            break said;
        }
    };
    assert!(first.starts_with("not healthy yet: ca-bundle:"), "{first}");
    edit(&t, &config, |c| c["webhooks"][0]["clientConfig"]["caBundle"] = json!(right)).await;
    let waited = waiting.wait_with_output().expect("doctor --wait ends");
    let stdout = String::from_utf8_lossy(&waited.stdout);
    assert_eq!(waited.status.code(), Some(0), "healthy once mended:\n{stdout}");
    assert!(stdout.contains("healthy: the API server calls the webhook"), "{stdout}");

    // (c) The rule reviews Ingresses, not their status: no call for status writes.
    edit(&t, &config, |c| c["webhooks"][0]["rules"][0]["resources"] = json!(["ingresses"])).await;
    let out = run(&args);
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    let found = line(&out, "configuration");
    assert!(found.starts_with("FAIL") && found.contains("has a rule for UPDATE ingresses/status"), "{found}");
    edit(&t, &config, |c| c["webhooks"][0]["rules"][0]["resources"] = json!(["ingresses/status"])).await;

    // (b) The webhook's Service has no endpoints (no Pod matches its selector).
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "isg-nobody"},
        "spec": {"selector": {"app": "nobody"}, "ports": [{"port": 443, "targetPort": 8443}]}
    }))
    .unwrap();
    Api::<Service>::namespaced(t.admin.clone(), &t.ns).create(&PostParams::default(), &service).await.unwrap();
    let ns = t.ns.clone();
    edit(&t, &config, |c| {
        c["webhooks"][0]["clientConfig"] = json!({
            "service": {"namespace": ns, "name": "isg-nobody", "port": 443, "path": "/mutate"},
            "caBundle": right,
        });
    })
    .await;
    let out = run(&args);
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    let endpoints = line(&out, "endpoints");
    assert!(endpoints.starts_with("FAIL") && endpoints.contains("has no ready endpoints"), "{endpoints}");
    // A Service's DNS name resolves only in the cluster: the certificate is not judged from here.
    assert!(line(&out, "ca-bundle").starts_with("SKIP"), "{}", out.stdout);
    let _ = Api::<MutatingWebhookConfiguration>::all(t.admin.clone()).delete(&config, &Default::default()).await;
    drop(webhook);
}

const BASE64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// The guard's lease timings in these tests: a stopped guard's Lease expires within seconds.
const LEASE_TIMINGS: [&str; 3] =
    ["--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=1s"];
/// The probe doctor creates for the default Lease name.
const PROBE: &str = "ingress-status-guard-doctor-probe";

/// Whether doctor's probe Ingress is gone from `ns` (it deletes it on every path).
async fn probe_gone(t: &TestEnv, ns: &str) -> bool {
    probe_named_gone(t, ns, PROBE).await
}

/// As [`probe_gone`], for the probe `name` (`<lease>-doctor-probe`).
async fn probe_named_gone(t: &TestEnv, ns: &str, name: &str) -> bool {
    let api = Api::<k8s_openapi::api::networking::v1::Ingress>::namespaced(t.admin.clone(), ns);
    api.get_opt(name).await.expect("get the probe").is_none()
}

/// Without `--probe` doctor creates its own probe Ingress of a governed class in
/// `--probe-namespace`, writes to it (a dry run) and deletes it; it says plainly when that
/// namespace is one the webhook does not review. `--service-account` names each grant the
/// guard's ServiceAccount lacks (SubjectAccessReviews); `--leader-election-namespace` judges
/// the Lease: live while the guard runs, expired once it is stopped. Interrupted while its write
/// hangs, doctor deletes its probe before it exits.
#[tokio::test]
async fn doctor_probes_with_its_own_ingress_and_checks_the_guards_grants_and_lease() {
    let t = TestEnv::new("doctor-own").await;
    let class = format!("cls-{}", t.ns);
    let policy = [format!("--publish-status-address={CANONICAL}"), format!("--ingress-class={class}")];
    let config = format!("isg-e2e-{}", t.ns);
    let configuration = format!("--webhook-configuration={config}");
    let lease_ns = format!("--leader-election-namespace={}", t.ns);
    let mut serve = vec![policy[0].as_str(), &policy[1], "--reconcile=true", &lease_ns, &configuration];
    serve.extend(LEASE_TIMINGS);
    let webhook = t.start_webhook(&serve).await;
    t.register(&webhook, FailurePolicy::Ignore, Class::Field(&class), &[CANONICAL]).await;
    let kubeconfig = format!("--kubeconfig={}", t.cluster.admin_kubeconfig().display());
    let sa = format!("--service-account={}/guard", t.ns);
    let probe_ns = format!("--probe-namespace={}", t.ns);
    let base = ["doctor", &kubeconfig, &configuration, &policy[0], &policy[1], &lease_ns, &sa];
    let args = [&base[..], &[probe_ns.as_str()]].concat();
    let sa_object: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "guard"}})).unwrap();
    Api::namespaced(t.admin.clone(), &t.ns).create(&PostParams::default(), &sa_object).await.unwrap();

    // No grant yet: the probe works, the ServiceAccount may do nothing, the guard leads.
    let out = eventually("the guard leads", Duration::from_secs(30), || async {
        let out = run(&args);
        if line(&out, "lease").starts_with("PASS") { Ok(out) } else { Err(out.stdout) }
    })
    .await;
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    let write = line(&out, "dry-run-write");
    assert!(
        write.starts_with("PASS")
            && write.contains(&format!("to Ingress {}/{PROBE} came back rewritten to [{CANONICAL}]", t.ns)),
        "{write}"
    );
    assert!(probe_gone(&t, &t.ns).await, "doctor deletes its probe");
    let grants = line(&out, "permissions");
    assert!(grants.starts_with("FAIL"), "{grants}");
    for missing in [
        format!("ServiceAccount {}/guard may not: list ingresses.networking.k8s.io", t.ns),
        "patch ingresses.networking.k8s.io (subresource status)".to_owned(),
        format!("get leases.coordination.k8s.io/ingress-status-guard in {}", t.ns),
        format!("watch mutatingwebhookconfigurations.admissionregistration.k8s.io/{config}"),
    ] {
        assert!(grants.contains(&missing), "{missing}: {grants}");
    }
    assert!(line(&out, "lease").contains("is held by"), "{}", out.stdout);

    // The grants the mode needs, the chart's rules: then healthy.
    let subject = json!([{"kind": "ServiceAccount", "name": "guard", "namespace": t.ns}]);
    let cluster_role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": format!("isg-guard-{}", t.ns)},
        "rules": [
            {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses", "ingressclasses"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses/status"], "verbs": ["patch"]},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]},
            {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["mutatingwebhookconfigurations"], "resourceNames": [config], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
        ]
    }))
    .unwrap();
    Api::<ClusterRole>::all(t.admin.clone()).create(&PostParams::default(), &cluster_role).await.unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": format!("isg-guard-{}", t.ns)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("isg-guard-{}", t.ns)},
        "subjects": subject,
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(t.admin.clone()).create(&PostParams::default(), &binding).await.unwrap();
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "isg-guard"},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["ingress-status-guard"], "verbs": ["get", "patch"]}]
    }))
    .unwrap();
    Api::<Role>::namespaced(t.admin.clone(), &t.ns).create(&PostParams::default(), &role).await.unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "isg-guard"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "isg-guard"},
        "subjects": subject,
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(t.admin.clone(), &t.ns).create(&PostParams::default(), &binding).await.unwrap();
    let out = eventually("the grants are seen", Duration::from_secs(30), || async {
        let out = run(&args);
        if out.code == Some(0) { Ok(out) } else { Err(out.stdout) }
    })
    .await;
    assert!(line(&out, "permissions").contains(&format!("ServiceAccount {}/guard may do the", t.ns)), "{}", out.stdout);

    // A probe namespace the webhook does not review: said, not failed.
    let out = run(&[&base[..], &["--probe-namespace=default"]].concat());
    let write = line(&out, "dry-run-write");
    assert!(write.starts_with("SKIP") && write.contains("outside the webhook's namespaceSelector"), "{write}");
    assert!(probe_gone(&t, "default").await, "nothing created there");
    let out = run(&[&base[..], &["--probe-namespace=No_Such"]].concat());
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr.contains("--probe-namespace") && out.stderr.contains("is not a namespace name"),
        "{}",
        out.stderr
    );

    // The guard stopped: its Lease expires, and doctor says so (and the write is not reviewed).
    drop(webhook);
    let out = eventually("the Lease expires", Duration::from_secs(30), || async {
        let out = run(&args);
        if line(&out, "lease").starts_with("FAIL") { Ok(out) } else { Err(out.stdout) }
    })
    .await;
    assert_eq!(out.code, Some(1));
    assert!(line(&out, "lease").contains("the leader is gone or stalled"), "{}", out.stdout);
    assert!(probe_gone(&t, &t.ns).await, "doctor deletes its probe when the write fails too");

    // Interrupted mid-write (SIGTERM, as when the hook Job's Pod is deleted): the webhook's
    // address accepts and never answers, so the write hangs for the webhook's timeout; doctor
    // deletes its probe before it exits with 130.
    let blackhole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://127.0.0.1:{}/mutate", blackhole.local_addr().unwrap().port());
    edit(&t, &config, |c| c["webhooks"][0]["clientConfig"]["url"] = json!(url)).await;
    // Each request (and the certificate check, three of them) waits 4 s: the write then hangs
    // 4 s of the webhook's 5 s timeout, long enough to see the probe and interrupt doctor.
    let doctor = Command::new(crate::support::webhook::BINARY)
        .args([&args[..], &["--request-timeout=4"]].concat())
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start doctor");
    eventually("doctor creates its probe", Duration::from_secs(60), || async {
        if probe_gone(&t, &t.ns).await { Err("no probe yet".to_owned()) } else { Ok(()) }
    })
    .await;
    let killed = Command::new("kill").args(["-TERM", &doctor.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let ended = doctor.wait_with_output().expect("doctor ends");
    assert_eq!(ended.status.code(), Some(130), "{}", String::from_utf8_lossy(&ended.stderr));
    assert!(probe_gone(&t, &t.ns).await, "doctor deletes its probe when interrupted");
    drop(blackhole);
    let _ = Api::<MutatingWebhookConfiguration>::all(t.admin.clone()).delete(&config, &Default::default()).await;
    let _ = Api::<ClusterRole>::all(t.admin.clone()).delete(&format!("isg-guard-{}", t.ns), &Default::default()).await;
    let _ = Api::<ClusterRoleBinding>::all(t.admin.clone())
        .delete(&format!("isg-guard-{}", t.ns), &Default::default())
        .await;
}

/// Policy mode: doctor passes while the guard keeps its MutatingAdmissionPolicy (present,
/// current, labelled its own) and the API server rewrites the probe's dry-run write by it; a
/// MAP edited by hand fails naming the object; `--wait` passes once it is mended.
#[tokio::test]
async fn doctor_in_policy_mode_names_a_hand_edited_admission_policy() {
    let t = TestEnv::new("doctor-map").await;
    let dir = t.cluster.scratch_dir(&format!("doctor-map-{}", t.ns));
    let file = dir.join("policies.yaml");
    let policies = format!(
        "policies:\n  - name: {ns}\n    ingressClasses: [{ns}]\n    publishStatusAddress: {CANONICAL}\n",
        ns = t.ns
    );
    std::fs::write(&file, policies).unwrap();
    let config = format!("--config={}", file.display());
    let lease_ns = format!("--leader-election-namespace={}", t.ns);
    // A Lease of the test's own: the objects are named `<lease>-ingress-0`, and the shared API
    // server holds other tests' objects.
    let lease_name = format!("isg-{}", t.ns);
    let lease = format!("--leader-election-lease-name={lease_name}");
    let mut serve = vec!["--admission=policy", "--reconcile=true", &config, &lease_ns, &lease];
    serve.extend(LEASE_TIMINGS);
    let _guard = t.start_webhook(&serve).await;
    let kubeconfig = format!("--kubeconfig={}", t.cluster.admin_kubeconfig().display());
    let probe_ns = format!("--probe-namespace={}", t.ns);
    let args = ["doctor", "--admission=policy", &kubeconfig, &config, &lease_ns, &lease, &probe_ns];
    let name = format!("{lease_name}-ingress-0");

    let out = eventually("the guard's admission policy enforces", Duration::from_secs(60), || async {
        let out = run(&args);
        if out.code == Some(0) { Ok(out) } else { Err(out.stdout) }
    })
    .await;
    let policies_line = line(&out, "admission-policies");
    assert!(
        policies_line.contains(&format!("1 admission policies and their bindings present and current (labelled ingress-status-guard/lease={}.{lease_name})", t.ns)),
        "{policies_line}"
    );
    let write = line(&out, "dry-run-write");
    assert!(write.contains(&format!("came back rewritten to [{CANONICAL}]")), "{write}");
    assert!(line(&out, "lease").starts_with("PASS"), "{}", out.stdout);
    assert!(!out.stdout.contains(" configuration "), "no webhook checks in policy mode: {}", out.stdout);
    assert!(probe_named_gone(&t, &t.ns, &format!("{lease_name}-doctor-probe")).await);

    // (d) Edited by hand: another matchCondition (the keeper replaces it only at its resync).
    let admin = t.cluster.admin_kubeconfig();
    let saved = t.cluster.kubectl(admin, &["get", "mutatingadmissionpolicy", &name, "-o", "json"]);
    assert!(saved.success, "{}", saved.stderr);
    let patch = json!([{"op": "add", "path": "/spec/matchConditions/-",
        "value": {"name": "by-hand", "expression": "true"}}]);
    let out =
        t.cluster.kubectl(admin, &["patch", "mutatingadmissionpolicy", &name, "--type=json", "-p", &patch.to_string()]);
    assert!(out.success, "{}", out.stderr);
    let out = run(&args);
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    let found = line(&out, "admission-policies");
    assert!(
        found.starts_with("FAIL")
            && found.contains(&format!(
                "MutatingAdmissionPolicy {name} of policy \"{}\": STALE: its spec.matchConditions is not what the guard renders now (edited by hand?)",
                t.ns
            )),
        "{found}"
    );

    // --wait: mended (the saved spec put back) while doctor waits.
    let waiting = Command::new(crate::support::webhook::BINARY)
        .args([&args[..], &["--wait=90s"]].concat())
        .env_remove("KUBECONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start doctor --wait");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut restored: Value = serde_json::from_str(&saved.stdout).unwrap();
    let live = t.cluster.kubectl(admin, &["get", "mutatingadmissionpolicy", &name, "-o", "json"]);
    let live: Value = serde_json::from_str(&live.stdout).unwrap();
    restored["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"].clone();
    let path = dir.join("restored.json");
    std::fs::write(&path, restored.to_string()).unwrap();
    let out = t.cluster.kubectl(admin, &["replace", "-f", &path.display().to_string()]);
    assert!(out.success, "{}", out.stderr);
    let waited = waiting.wait_with_output().expect("doctor --wait ends");
    let stdout = String::from_utf8_lossy(&waited.stdout);
    assert_eq!(waited.status.code(), Some(0), "healthy once mended:\n{stdout}");
}
