//! The Gateway API in the test API server: the released CRDs of `sigs.k8s.io/gateway-api`
//! (`tests/gateway-api/fetch.sh`, fetched through the Go module proxy and cached; never a
//! hand-written schema) applied with `kubectl apply --server-side`, the rogue writer's rights
//! on Gateway statuses, and small helpers to create GatewayClasses and Gateways and write their
//! status as a controller would.
#![allow(dead_code)] // only tests/cluster/gateway.rs uses these; every test binary compiles them

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::cluster::{Cluster, ROGUE_USER, STATUS_WRITERS};
use super::eventually;

/// Group of the Gateway API.
pub(crate) const GROUP: &str = "gateway.networking.k8s.io";
/// Group bound (cluster-wide) to read Gateways and write their status, as a controller does.
const GATEWAY_STATUS_WRITERS: &str = "isg-e2e:gateway-status-writers";

/// `gateway.networking.k8s.io/v1` Gateway.
pub(crate) fn gateway_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", "Gateway"), "gateways")
}

/// `gateway.networking.k8s.io/v1` GatewayClass.
pub(crate) fn gateway_class_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", "GatewayClass"), "gatewayclasses")
}

/// Runs tests/gateway-api/fetch.sh and returns the directory holding the standard CRDs.
pub(crate) fn crd_dir() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gateway-api/fetch.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = stdout.lines().last().unwrap_or("").trim();
    assert!(out.status.success() && !dir.is_empty(), "{} failed ({})", script.display(), out.status);
    PathBuf::from(dir)
}

impl Cluster {
    /// Applies the Gateway API's standard CRDs (once per control plane) and waits until the API
    /// server serves Gateways and GatewayClasses; also lets the rogue writer's group read
    /// Gateways and write their status. The bundle holds a ValidatingAdmissionPolicy
    /// (`admissionregistration.k8s.io/v1`), so this needs an API server of 1.30 or later.
    pub(crate) async fn install_gateway_crds(&self) {
        static INSTALLED: Mutex<Option<HashSet<String>>> = Mutex::new(None);
        {
            let installed = INSTALLED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if installed.as_ref().is_some_and(|set| set.contains(&self.server)) {
                return;
            }
        }
        let dir = crd_dir();
        let out = self.kubectl(
            self.admin_kubeconfig(),
            &["apply", "--server-side", "--field-manager=isg-e2e", "-f", &dir.display().to_string()],
        );
        assert!(out.success, "kubectl apply the Gateway API CRDs from {}: {}{}", dir.display(), out.stdout, out.stderr);
        let admin = self.admin().await;
        for resource in [gateway_resource(), gateway_class_resource()] {
            let api: Api<DynamicObject> = Api::all_with(admin.clone(), &resource);
            eventually(&format!("the API server serves {}", resource.plural), Duration::from_secs(60), || async {
                api.list(&Default::default()).await.map(|_| ()).map_err(|e| e.to_string())
            })
            .await;
        }
        grant_gateway_status_writers(&admin).await;
        INSTALLED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_or_insert_with(HashSet::new)
            .insert(self.server.clone());
    }
}

/// Binds the rogue writer's group ([`STATUS_WRITERS`]) to reading Gateways and writing
/// their status; an AlreadyExists from a second control plane's call is fine.
async fn grant_gateway_status_writers(admin: &Client) {
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": GATEWAY_STATUS_WRITERS},
        "rules": [
            {"apiGroups": [GROUP], "resources": ["gateways", "gatewayclasses"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [GROUP], "resources": ["gateways/status"], "verbs": ["get", "update", "patch"]},
        ]
    }))
    .expect("ClusterRole object");
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": GATEWAY_STATUS_WRITERS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": GATEWAY_STATUS_WRITERS},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": STATUS_WRITERS}]
    }))
    .expect("ClusterRoleBinding object");
    let pp = PostParams::default();
    let exists = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 409);
    if let Err(e) = Api::<ClusterRole>::all(admin.clone()).create(&pp, &role).await
        && !exists(&e)
    {
        panic!("create ClusterRole {GATEWAY_STATUS_WRITERS}: {e}");
    }
    if let Err(e) = Api::<ClusterRoleBinding>::all(admin.clone()).create(&pp, &binding).await
        && !exists(&e)
    {
        panic!("create ClusterRoleBinding {GATEWAY_STATUS_WRITERS}: {e}");
    }
}

/// Creates GatewayClass `name` of controller `controller`.
pub(crate) async fn create_gateway_class(admin: &Client, name: &str, controller: &str) {
    let api: Api<DynamicObject> = Api::all_with(admin.clone(), &gateway_class_resource());
    let mut object = DynamicObject::new(name, &gateway_class_resource());
    object.data = json!({"spec": {"controllerName": controller}});
    api.create(&PostParams::default(), &object).await.unwrap_or_else(|e| panic!("create GatewayClass {name}: {e}"));
}

/// Gateways in `ns`, through `client`.
pub(crate) fn gateways(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &gateway_resource())
}

/// Creates Gateway `name` of class `class` with one HTTP listener on port 80.
pub(crate) async fn create_gateway(api: &Api<DynamicObject>, name: &str, class: &str) -> DynamicObject {
    let mut object = DynamicObject::new(name, &gateway_resource());
    object.data = json!({"spec": {
        "gatewayClassName": class,
        "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
    }});
    api.create(&PostParams::default(), &object).await.unwrap_or_else(|e| panic!("create Gateway {name}: {e}"))
}

/// `status.addresses` from short strings: an IP literal is `{type: IPAddress}`, anything else
/// `{type: Hostname}`, and `TYPE=value` any other type.
pub(crate) fn gateway_addresses(addresses: &[&str]) -> Value {
    Value::Array(
        addresses
            .iter()
            .map(|a| match a.split_once('=') {
                Some((kind, value)) => json!({"type": kind, "value": value}),
                None if a.parse::<std::net::IpAddr>().is_ok() => json!({"type": "IPAddress", "value": a}),
                None => json!({"type": "Hostname", "value": a}),
            })
            .collect(),
    )
}

/// A Gateway status as a controller writes it: `addresses`, the `Programmed` condition with
/// `programmed` (`True` or `False`) and `Accepted: True`, and the listener `http`.
pub(crate) fn gateway_status(addresses: &[&str], programmed: bool, generation: i64) -> Value {
    let condition = |kind: &str, status: bool, reason: &str| {
        json!({
            "type": kind,
            "status": if status { "True" } else { "False" },
            "reason": reason,
            "message": format!("{kind} by the test controller"),
            "observedGeneration": generation,
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        })
    };
    json!({
        "addresses": gateway_addresses(addresses),
        "conditions": [
            condition("Accepted", true, "Accepted"),
            condition("Programmed", programmed, if programmed { "Programmed" } else { "Pending" }),
        ],
        "listeners": [{
            "name": "http",
            "attachedRoutes": 0,
            "supportedKinds": [{"group": GROUP, "kind": "HTTPRoute"}],
            "conditions": [condition("Programmed", programmed, if programmed { "Programmed" } else { "Pending" })],
        }],
    })
}

/// Merge-patches a Gateway's whole `status` (through the status subresource) as field manager
/// `manager`; returns what the API server stored.
pub(crate) async fn write_gateway_status(
    api: &Api<DynamicObject>,
    name: &str,
    status: Value,
    dry_run: bool,
) -> kube::Result<DynamicObject> {
    let params = PatchParams { field_manager: Some(ROGUE_USER.into()), dry_run, ..PatchParams::default() };
    api.patch_status(name, &params, &Patch::Merge(&json!({ "status": status }))).await
}

/// A Gateway's `status.addresses` values as short strings (IP or hostname; `TYPE=value` for
/// other types), order kept.
pub(crate) fn stored_gateway_addresses(gateway: &DynamicObject) -> Vec<String> {
    gateway.data["status"]["addresses"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|a| {
                    let value = a["value"].as_str().unwrap_or("<none>");
                    match a["type"].as_str() {
                        Some("IPAddress" | "Hostname") | None => value.to_owned(),
                        Some(kind) => format!("{kind}={value}"),
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Registers the webhook at `url` (serving a certificate signed by `ca_pem`) for Gateway status
/// updates in namespace `namespace` only, as `Webhook::register` does for Ingresses.
pub(crate) async fn register_gateway_webhook(admin: &Client, namespace: &str, url: &str, ca_pem: &str) -> String {
    use base64::Engine as _;
    use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
    let name = format!("isg-e2e-gateways-{namespace}");
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": name},
        "webhooks": [{
            "name": format!("gateways.{namespace}.e2e.ingress-status-guard.test"),
            "clientConfig": {"url": url, "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem)},
            "rules": [{
                "apiGroups": [GROUP],
                "apiVersions": ["v1"],
                "operations": ["UPDATE"],
                "resources": ["gateways/status"],
                "scope": "Namespaced",
            }],
            "namespaceSelector": {"matchLabels": {super::cluster::NAMESPACE_LABEL: namespace}},
            "admissionReviewVersions": ["v1"],
            "sideEffects": "NoneOnDryRun",
            "matchPolicy": "Equivalent",
            "failurePolicy": "Fail",
            "timeoutSeconds": 5,
        }]
    }))
    .expect("MutatingWebhookConfiguration object");
    Api::<MutatingWebhookConfiguration>::all(admin.clone())
        .create(&PostParams::default(), &config)
        .await
        .unwrap_or_else(|e| panic!("create MutatingWebhookConfiguration {name}: {e}"));
    name
}
