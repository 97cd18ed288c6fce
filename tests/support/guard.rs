//! The scaffolding of tests that run the guard with its reconciler: short leader-election
//! timings, the reconciler's flags, waiting until it leads with a synced cache, its patches as
//! the audit log records them, and a LoadBalancer Service to publish.

use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::{Cluster, TestEnv, Webhook, eventually};

/// Leader election in seconds, not the production minute: takeovers fit a test's timeout.
pub(crate) const LEASE_FLAGS: [&str; 3] =
    ["--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=1s"];

/// `--reconcile=true`, a Lease in the test's namespace (named `lease`, else the default name),
/// [`LEASE_FLAGS`], then `extra`.
pub(crate) fn reconciler_args<S: AsRef<str>>(t: &TestEnv, lease: Option<&str>, extra: &[S]) -> Vec<String> {
    let mut args = vec!["--reconcile=true".to_owned(), format!("--leader-election-namespace={}", t.ns)];
    if let Some(lease) = lease {
        args.push(format!("--leader-election-lease-name={lease}"));
    }
    args.extend(LEASE_FLAGS.iter().map(ToString::to_string));
    args.extend(extra.iter().map(|a| a.as_ref().to_owned()));
    args
}

/// Starts the webhook with the administrator's kubeconfig and `args`.
pub(crate) async fn start(t: &TestEnv, args: &[String]) -> Webhook {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Webhook::start(t.cluster, &t.ns, t.cluster.admin_kubeconfig(), &args).await
}

/// Waits until `webhook` leads (its leader gauge is 1) with a synced Ingress cache.
pub(crate) async fn await_synced_leader(webhook: &Webhook, timeout: Duration) {
    eventually(&format!("leads with a synced cache ({})", webhook.log_path().display()), timeout, || async {
        let leading = webhook.metric("ingress_status_guard_leader") == 1.0;
        if leading && webhook.log().contains("Ingress cache synced") { Ok(()) } else { Err("not yet".into()) }
    })
    .await;
}

/// The reconciler's patches of Ingress `name` in `ns`, as the API server's audit log records
/// them (its field manager in the request URI).
pub(crate) fn guard_patches(cluster: &Cluster, ns: &str, name: &str) -> Vec<Value> {
    cluster
        .ingress_status_audit(ns, name)
        .into_iter()
        .filter(|e| {
            e["verb"] == "patch" && e["requestURI"].as_str().unwrap_or("").contains("fieldManager=ingress-status-guard")
        })
        .collect()
}

/// A LoadBalancer Service `name` whose status publishes `ip`.
pub(crate) async fn lb_service(api: &Api<Service>, name: &str, ip: &str) {
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}
    }))
    .expect("Service object");
    api.create(&PostParams::default(), &service).await.unwrap_or_else(|e| panic!("create Service {name}: {e}"));
    let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("write the status of Service {name}: {e}"));
}

/// An unreachable webhook (`failurePolicy: Ignore`) named `name`, for the status writes of
/// `resource` in the Namespaces `selector` selects: the API server calls it (and lets the write
/// through), so a guard reading the configuration for its scope sees where admission runs.
pub(crate) fn scoping_webhook(name: &str, resource: &str, selector: Value) -> Value {
    json!({
        "name": name,
        "clientConfig": {"url": "https://127.0.0.1:1/mutate"},
        "rules": [super::webhook::status_rule(resource)],
        "namespaceSelector": selector,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Ignore",
    })
}
