//! `render-admission-policy`: the admission policies that enforce the current config, computed
//! offline from the policies and `-f` manifests; with `--names`, only the names RBAC grants by.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use clap::Args;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::Resource as _;
use serde::Deserialize as _;
use serde_json::Value;

use super::{CliError, policy::PolicyArgs};
use crate::{
    address::Address,
    admission_policy::{self, ApiVersion},
    kind::{Classes, Governed, Kind, with_kind},
    policy::{PodsRef, ServiceRef},
    sources::{Sources, Unresolved, nodeip, service},
};

#[derive(Args, Debug)]
pub(crate) struct RenderArgs {
    /// Manifests (YAML documents or Lists, `-` reads stdin) holding the publish Services, the
    /// controller Pods and their Nodes, and the IngressClasses and GatewayClasses the policies
    /// need; repeatable.
    #[arg(short = 'f', long, env = "ISG_RENDER_FILE", value_delimiter = ',')]
    pub file: Vec<PathBuf>,
    /// apiVersion of the MutatingAdmissionPolicy: `v1` (Kubernetes 1.36+) or `v1beta1` (1.34 and
    /// 1.35, with the MutatingAdmissionPolicy feature gate).
    #[arg(long, env = "ISG_ADMISSION_POLICY_API_VERSION", value_enum, default_value_t = ApiVersion::V1)]
    pub api_version: ApiVersion,
    /// The leader Lease of the guard the objects are for (`serve --leader-election-lease-name`;
    /// the chart's release fullname): the objects are named `<lease>-<kind>-<n>`, n the policy's
    /// place among the file's policies of its kind (`<lease>-ingress-0`, `<lease>-gateway-0`).
    #[arg(long, env = "ISG_LEADER_ELECTION_LEASE_NAME", default_value = admission_policy::DEFAULT_LEASE)]
    pub leader_election_lease_name: String,
    /// Print only the names the guard of the Lease may give its objects, one a line: every
    /// slot of every kind (`<lease>-ingress-0` to `<lease>-gateway-15`), whatever the policies
    /// are called, so a rename never changes them. What the ClusterRole's resourceNames must
    /// list. Reads no manifest; still refuses a policy file with more policies of a kind than
    /// slots.
    #[arg(long)]
    pub names: bool,
    /// Output format: YAML documents (for `kubectl apply -f`), or one JSON `List` of them.
    #[arg(short = 'o', long, env = "ISG_RENDER_OUTPUT", value_enum, default_value_t = RenderOutput::Yaml)]
    pub output: RenderOutput,
    #[command(flatten)]
    pub policy: PolicyArgs,
}

/// What the manifests hold, as the sources of a running guard would hold it.
#[derive(Default)]
pub(super) struct Offline {
    services: HashMap<ServiceRef, Service>,
    pods: Vec<Pod>,
    nodes: HashMap<String, nodeip::NodeAddrs>,
    /// Each kind's classes ([`Kind::index`]).
    classes: [Classes; Kind::ALL.len()],
}

impl Sources for Offline {
    fn service(&self, svc: &ServiceRef) -> Result<Vec<Address>, Unresolved> {
        let found = self.services.get(svc).ok_or_else(|| Unresolved::Missing(svc.clone()))?;
        service::addresses(found, true).map_err(|e| Unresolved::Service(svc.clone(), e))
    }

    fn pods(&self, pods: &PodsRef) -> Result<Vec<Address>, Unresolved> {
        let in_namespace = |p: &&Pod| p.metadata.namespace.as_deref().unwrap_or("default") == pods.namespace;
        let selected = |p: &&Pod| pods.selector.matches(&p.metadata.labels.clone().unwrap_or_default());
        let facts: Vec<_> = self.pods.iter().filter(in_namespace).filter(selected).map(nodeip::PodFacts::of).collect();
        nodeip::addresses(&facts, &self.nodes, pods.internal_ip).map_err(|e| Unresolved::Pods(pods.to_string(), e))
    }

    fn classes(&self, kind: Kind) -> Option<Classes> {
        Some(self.classes[kind.index()].clone())
    }
}

/// `render-admission-policy`'s formats: the objects are manifests, not a report, so no table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum RenderOutput {
    Yaml,
    Json,
}

/// Runs `render-admission-policy`: every policy's admission policy and binding, as YAML.
pub(crate) fn render(args: &RenderArgs) -> Result<String, CliError> {
    let policies = args.policy.policies()?;
    let lease = &args.leader_election_lease_name;
    admission_policy::object_names(&policies, lease)?;
    if args.names {
        return Ok(admission_policy::all_slot_names(lease).into_iter().map(|name| name + "\n").collect());
    }
    let mut offline = Offline::default();
    for path in &args.file {
        read_manifest(path, &mut offline)?;
    }
    let mut objects = Vec::new();
    for kind in Kind::ALL {
        let governed = admission_policy::governed_in_order(&policies, kind, &offline.classes[kind.index()]);
        for (policy, governed) in policies.of(kind).zip(&governed) {
            let unresolved = |reason| CliError::Unresolved { policy: policy.name.clone(), reason };
            let canonical = admission_policy::value(policy, &offline).map_err(unresolved)?;
            let (api, name) = (args.api_version, admission_policy::object_name_in(lease, &policies, policy)?);
            let rendered =
                with_kind!(kind, K => admission_policy::render_named::<K>(policy, &canonical, governed, api, &name))?;
            objects.extend(rendered);
        }
    }
    Ok(match args.output {
        // YAML documents, each opened by `---`.
        RenderOutput::Yaml => {
            objects.iter().map(|o| format!("---\n{}", serde_norway::to_string(o).unwrap_or_default())).collect()
        }
        RenderOutput::Json => {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects});
            serde_json::to_string_pretty(&list).expect("JSON values always serialize") + "\n"
        }
    })
}

/// Reads one manifest's objects into `offline`.
fn read_manifest(path: &Path, offline: &mut Offline) -> Result<(), CliError> {
    let (shown, text) = read_text(path)?;
    let manifest = |message: String| CliError::Manifest { path: shown.clone(), message };
    for (i, object) in objects(&text).map_err(manifest)?.into_iter().enumerate() {
        offline.add(object).map_err(|e| manifest(format!("object {}: {e}", i + 1)))?;
    }
    Ok(())
}

/// The text of manifest `path` (`-` reads stdin), and how errors name it.
pub(super) fn read_text(path: &Path) -> Result<(String, String), CliError> {
    let stdin = path.as_os_str() == "-";
    let shown = if stdin { "<stdin>".to_owned() } else { path.display().to_string() };
    let text = if stdin {
        std::io::read_to_string(std::io::stdin())?
    } else {
        std::fs::read_to_string(path).map_err(|e| CliError::Manifest { path: shown.clone(), message: e.to_string() })?
    };
    Ok((shown, text))
}

/// The objects of a manifest's YAML documents, each an object or a List.
pub(super) fn objects(text: &str) -> Result<Vec<Value>, String> {
    let mut objects = Vec::new();
    for (i, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(doc).map_err(|e| format!("document {}: not YAML or JSON: {e}", i + 1))?;
        match value.get("kind").and_then(Value::as_str) {
            _ if value.is_null() => {}
            Some(kind) if kind.ends_with("List") => {
                objects.extend(value.get("items").and_then(Value::as_array).cloned().unwrap_or_default());
            }
            _ => objects.push(value),
        }
    }
    Ok(objects)
}

impl Offline {
    /// Adds `object`; other kinds (Namespaces, Ingresses, ...) are skipped, so `kubectl get ...
    /// -o yaml` of more than is needed can be piped in.
    pub(super) fn add(&mut self, object: Value) -> Result<(), serde_json::Error> {
        match object.get("kind").and_then(Value::as_str) {
            Some("Service") => {
                let svc: Service = serde_json::from_value(object)?;
                let key = ServiceRef {
                    namespace: svc.metadata.namespace.clone().unwrap_or_else(|| "default".to_owned()),
                    name: svc.metadata.name.clone().unwrap_or_default(),
                };
                self.services.insert(key, svc);
            }
            Some("Pod") => self.pods.push(serde_json::from_value(object)?),
            Some("Node") => {
                let node: Node = serde_json::from_value(object)?;
                self.nodes.insert(node.metadata.name.clone().unwrap_or_default(), nodeip::NodeAddrs::of(&node));
            }
            Some(class_kind) => {
                let Some(kind) = Kind::ALL.into_iter().find(|k| k.info().class_kind == class_kind) else {
                    return Ok(());
                };
                let (name, class) = with_kind!(kind, K => {
                    let class: <K as Governed>::ClassObject = serde_json::from_value(object)?;
                    (class.meta().name.clone().unwrap_or_default(), K::class(&class))
                });
                self.classes[kind.index()].insert(name, class);
            }
            None => {}
        }
        Ok(())
    }
}
