//! `version` against the real API server: a running guard's leader writes its version on its
//! Lease and `version` reports it with the Deployment's image version and no warning; a Lease
//! and a Deployment of an older minor version are reported with a warning each; `--client`
//! asks no cluster; an identity that may not list Deployments gets exit 2 saying so.

use std::time::Duration;

use k8s_openapi::api::{apps::v1::Deployment, coordination::v1::Lease};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use super::run;
use crate::support::{TestEnv, eventually};

const VERSION: &str = env!("CARGO_PKG_VERSION");
const ANNOTATION: &str = "ingress-status-guard/version";

/// A version one minor below this build's.
fn older() -> String {
    let mut parts = VERSION.split('.').map(|p| p.parse::<u64>().expect("a numeric version"));
    let (major, minor) = (parts.next().unwrap(), parts.next().unwrap());
    if minor > 0 { format!("{major}.{}.0", minor - 1) } else { format!("{}.0.0", major - 1) }
}

/// A Deployment `name` labelled `labels` whose one container runs `image` (no controller runs
/// it here: `version` reads its spec).
async fn deployment(t: &TestEnv, name: &str, labels: Value, image: &str) {
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"isg-test": name}},
            "template": {
                "metadata": {"labels": {"isg-test": name}},
                "spec": {"containers": [{"name": "guard", "image": image}]}
            }
        }
    }))
    .unwrap();
    Api::<Deployment>::namespaced(t.admin.clone(), &t.ns)
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create the Deployment");
}

#[tokio::test]
async fn version_reports_the_running_guard_and_warns_of_a_skewed_one() {
    let t = TestEnv::new("version").await;
    let namespace = format!("--leader-election-namespace={}", t.ns);
    let class = format!("--ingress-class=cls-{}", t.ns);
    let guard = t
        .start_webhook(&[
            "--reconcile=true",
            &namespace,
            "--leader-election-lease-name=isg-version",
            "--publish-status-address=192.0.2.10",
            &class,
        ])
        .await;
    let leases = Api::<Lease>::namespaced(t.admin.clone(), &t.ns);
    eventually(
        &format!("the leader writes its version ({})", guard.log_path().display()),
        Duration::from_secs(60),
        || async {
            let lease = leases.get_opt("isg-version").await.map_err(|e| e.to_string())?;
            let version = lease.and_then(|l| l.metadata.annotations).and_then(|mut a| a.remove(ANNOTATION));
            if version.as_deref() == Some(VERSION) { Ok(()) } else { Err(format!("annotation {version:?}")) }
        },
    )
    .await;
    let current = format!("example.test/acme/ingress-status-guard:v{VERSION}");
    deployment(&t, "ingress-status-guard", json!({"app.kubernetes.io/name": "ingress-status-guard"}), &current).await;

    let kubeconfig = format!("--kubeconfig={}", t.cluster.admin_kubeconfig().display());
    let args = ["version", &kubeconfig, &namespace, "--leader-election-lease-name=isg-version"];
    let out = run(&[&args[..], &["-o", "json"]].concat());
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).expect("-o json is one JSON document");
    assert_eq!(report["client"]["version"], VERSION);
    assert!(!report["client"]["revision"].as_str().unwrap().is_empty(), "{report}");
    assert_eq!(report["cluster"]["leases"].as_array().unwrap().len(), 1, "{report}");
    let lease = &report["cluster"]["leases"][0];
    assert_eq!((lease["namespace"].as_str(), lease["name"].as_str()), (Some(t.ns.as_str()), Some("isg-version")));
    assert!(!lease["holder"].as_str().unwrap().is_empty(), "the running guard holds it: {report}");
    assert_eq!(lease["version"], VERSION);
    assert_eq!(
        report["cluster"]["deployments"],
        json!([{
            "namespace": t.ns, "name": "ingress-status-guard", "container": "guard", "image": current, "version": VERSION
        }])
    );
    assert_eq!(report["warnings"], json!([]), "same version, no warning");

    let out = run(&[&args[..], &["-o", "yaml"]].concat());
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let yaml: Value = serde_norway::from_str(&out.stdout).expect("-o yaml is one YAML document");
    assert_eq!(yaml, report);
    let out = run(&args);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lease_row = out.stdout.lines().find(|l| l.starts_with("lease")).unwrap_or_else(|| panic!("{}", out.stdout));
    assert_eq!(
        lease_row.split_whitespace().take(3).collect::<Vec<_>>(),
        ["lease", &format!("{}/isg-version", t.ns), VERSION]
    );
    assert!(!out.stdout.contains("warning:"), "{}", out.stdout);

    // --config: the running guard lists the fields it knows, every one a file of this client
    // may use; one that lists fewer gets the file's unknown field named.
    let file = t.cluster.scratch_dir("version-config").join("policies.yaml");
    std::fs::write(
        &file,
        "policies:\n  - {name: gw, kind: Gateway, gatewayClasses: [eg], sources: [{publishStatusAddress: 192.0.2.1}]}\n",
    )
    .unwrap();
    let config = format!("--config={}", file.display());
    let out = run(&[&args[..], &[&config, "-o", "json"]].concat());
    let report: Value = serde_json::from_str(&out.stdout).expect("-o json is one JSON document");
    assert_eq!(report["warnings"], json!([]), "the running guard knows every field: {report}");
    assert!(report["cluster"]["leases"][0]["policyFields"].as_array().unwrap().contains(&json!("kind")), "{report}");
    let lacking: Lease = serde_json::from_value(json!({
        "metadata": {"name": "isg-lacking", "annotations": {ANNOTATION: VERSION,
            "ingress-status-guard/policy-fields": "name,gatewayClasses,sources,publishStatusAddress"}},
        "spec": {"holderIdentity": "lacking-guard", "leaseDurationSeconds": 15}
    }))
    .unwrap();
    leases.create(&PostParams::default(), &lacking).await.expect("create the lacking guard's Lease");
    let out = run(&["version", &kubeconfig, &namespace, "--leader-election-lease-name=isg-lacking", &config]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!(
            "warning: {} uses kind, which the leader \"lacking-guard\" of Lease {}/isg-lacking does not know",
            file.display(),
            t.ns
        )),
        "{}",
        out.stdout
    );
    let out = run(&["version", &kubeconfig, &namespace, "--config=/nonexistent/p.yaml"]);
    assert_eq!(out.code, Some(2), "{}", out.stdout);
    assert!(out.stderr.contains("cannot read --config /nonexistent/p.yaml"), "{}", out.stderr);

    // A guard one minor older: a Lease its leader annotated, and a Deployment of its image.
    let old = older();
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "isg-old", "annotations": {ANNOTATION: old}},
        "spec": {"holderIdentity": "old-guard-7d9f", "leaseDurationSeconds": 15}
    }))
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.expect("create the old guard's Lease");
    deployment(&t, "isg-old", json!({"app": "isg-old"}), &format!("example.test/isg:{old}")).await;
    let skewed = ["version", &kubeconfig, &namespace, "--leader-election-lease-name=isg-old", "--selector=app=isg-old"];
    let out = run(&skewed);
    assert_eq!(out.code, Some(0), "a skew is a warning, not a failure: {}", out.stderr);
    let warnings: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(warnings.len(), 2, "{}", out.stdout);
    assert!(
        warnings[0].contains(&format!(
            "Deployment {}/isg-old (container guard) runs version {old}, this client is {VERSION}",
            t.ns
        )),
        "{warnings:?}"
    );
    assert!(
        warnings[1].contains(&format!("\"old-guard-7d9f\" of Lease {}/isg-old runs version {old}", t.ns))
            && warnings[1].contains("differ by a minor version"),
        "{warnings:?}"
    );
    let out = run(&[&skewed[..], &["-o", "json"]].concat());
    let report: Value = serde_json::from_str(&out.stdout).expect("-o json is one JSON document");
    assert_eq!(report["warnings"].as_array().unwrap().len(), 2, "{report}");
    assert_eq!(report["cluster"]["leases"][0]["version"], json!(old));

    // --client asks no cluster: an unreachable one does not matter.
    let out = run(&["version", "--client", "--kubeconfig=/nonexistent/kubeconfig", "-o", "json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["client"]["version"], VERSION);
    assert!(report.get("cluster").is_none(), "{report}");

    // An identity that may read Ingresses but not Deployments: exit 2, naming the read.
    let reader = super::reader_kubeconfig(&t).await;
    let out = run(&["version", &format!("--kubeconfig={}", reader.display()), &namespace]);
    assert_eq!(out.code, Some(2), "{}", out.stdout);
    assert!(
        out.stderr.contains("cannot list the Deployments labelled") && out.stderr.contains("--client"),
        "{}",
        out.stderr
    );
    drop(guard);
}
