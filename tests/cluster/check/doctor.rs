//! `doctor` against the real API server and a running webhook: it passes on a working
//! registration and fails, naming the cause, with a wrong caBundle, a webhook rule that misses
//! `ingresses/status`, and a Service without endpoints; `--wait` passes once the fault is mended
//! while it waits.

use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Service;
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
