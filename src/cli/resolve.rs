//! `resolve`: the canonical addresses of a source, computed offline from flags or manifests, as
//! JSON (what the webhook would publish, without a cluster).

use std::path::PathBuf;

use clap::Args;
use k8s_openapi::api::core::v1::Service;
use serde_json::Value;

use super::{CliError, output::Format, policy::PolicyFlagsArgs};
use crate::{
    address::{self, Address},
    policy,
    sources::{Sources as _, service},
};

#[derive(Args, Debug)]
pub(crate) struct ResolveArgs {
    /// Addresses as for `serve --publish-status-address`.
    #[arg(long, conflicts_with = "file", required_unless_present = "file")]
    pub publish_status_address: Option<String>,
    /// A Service manifest, YAML or JSON (`-` reads stdin); with --publish-pods-namespace, a List
    /// or multi-document YAML of Pods and Nodes.
    #[arg(short = 'f', long)]
    pub file: Option<PathBuf>,
    /// Resolve the node-IP source over the Pods and Nodes of -f: the Pods' namespace.
    #[arg(long, requires_all = ["publish_pods_selector", "file"])]
    pub publish_pods_namespace: Option<String>,
    /// The controller Pods' label selector (kubectl syntax).
    #[arg(long, requires = "publish_pods_namespace")]
    pub publish_pods_selector: Option<String>,
    /// Publish the nodes' InternalIP addresses even where they have ExternalIPs.
    #[arg(long, requires = "publish_pods_namespace")]
    pub report_node_internal_ip_address: bool,
    /// Keep the `ports` of load-balancer entries.
    #[arg(long)]
    pub keep_ports: bool,
    /// Output format: one JSON array (the default), the same as YAML, or a table (one address a
    /// line).
    #[arg(short = 'o', long, env = "ISG_OUTPUT", value_enum, default_value_t = Format::Json)]
    pub output: Format,
}

/// `addresses` (a JSON array of load-balancer entries) as `format`.
pub(crate) fn shown(addresses: &str, format: Format) -> String {
    let value: Value = serde_json::from_str(addresses).expect("resolve prints valid JSON");
    format.document(&value, || {
        let entries = value.as_array().into_iter().flatten();
        let addresses = entries.map(|entry| entry["ip"].as_str().or(entry["hostname"].as_str()).unwrap_or_default());
        std::iter::once("ADDRESS").chain(addresses).map(|address| format!("{address}\n")).collect()
    })
}

/// Runs `resolve`: the canonical addresses as a JSON array.
pub(crate) fn resolve(args: &ResolveArgs) -> Result<String, CliError> {
    let addresses: Vec<Address> = match (&args.publish_status_address, &args.file) {
        (Some(list), _) => {
            address::parse_static_list(list).map_err(|source| CliError::StaticFlag { value: list.clone(), source })?
        }
        (None, Some(path)) => {
            let (shown, text) = super::render::read_text(path)?;
            let manifest = |message: String| CliError::Manifest { path: shown.clone(), message };
            if let Some(namespace) = &args.publish_pods_namespace {
                let flags = PolicyFlagsArgs {
                    publish_pods_namespace: Some(namespace.clone()),
                    publish_pods_selector: args.publish_pods_selector.clone(),
                    report_node_internal_ip_address: args.report_node_internal_ip_address,
                    ..PolicyFlagsArgs::default()
                };
                let policies = flags.policies()?;
                let Some(policy::Source::Pods(pods)) =
                    policies.of(crate::kind::Kind::Ingress).next().and_then(|p| p.sources.first())
                else {
                    unreachable!("the pods flags build one node-IP source")
                };
                return node_ips(&text, pods).map_err(manifest);
            }
            let value: Value = serde_norway::from_str(&text).map_err(|e| manifest(format!("not YAML or JSON: {e}")))?;
            match value.get("kind").and_then(|k| k.as_str()) {
                Some("Service") | None => {}
                Some(other) => return Err(manifest(format!("kind is {other:?}; expected a Service"))),
            }
            let svc: Service =
                serde_json::from_value(value).map_err(|e| manifest(format!("not a valid Service: {e}")))?;
            let name = svc.metadata.name.clone().unwrap_or_else(|| "<unnamed>".to_owned());
            service::addresses(&svc, args.keep_ports).map_err(|e| manifest(format!("Service {name} {e}")))?
        }
        (None, None) => unreachable!("clap requires --publish-status-address or -f"),
    };
    Ok(serde_json::to_string_pretty(&addresses).expect("addresses always serialize"))
}

/// The node-IP source over the Pods and Nodes of a manifest, as JSON.
fn node_ips(text: &str, pods: &policy::PodsRef) -> Result<String, String> {
    let mut offline = super::render::Offline::default();
    for (i, object) in super::render::objects(text)?.into_iter().enumerate() {
        let kind = object.get("kind").and_then(Value::as_str);
        if !matches!(kind, Some("Pod" | "Node")) {
            return Err(format!("object {}: kind is {:?}; expected Pod or Node", i + 1, kind.unwrap_or_default()));
        }
        offline.add(object).map_err(|e| format!("object {}: {e}", i + 1))?;
    }
    let addresses = offline.pods(pods).map_err(|e| e.to_string())?;
    Ok(serde_json::to_string_pretty(&addresses).expect("addresses always serialize"))
}
