//! `render-admission-policy`: the admission policies that enforce the current config without a
//! running guard, computed offline from the policy flags (or `--config`) and the Services, Pods,
//! Nodes and IngressClasses of `-f` manifests, printed as YAML.

use std::{
    collections::{BTreeMap, HashMap},
    path::PathBuf,
};

use clap::Args;
use k8s_openapi::api::{
    core::v1::{Node, Pod, Service},
    networking::v1::IngressClass,
};
use serde::Deserialize as _;
use serde_json::Value;

use super::{CliError, policy::PolicyArgs};
use crate::{
    address::Address,
    admission_policy::{self, ApiVersion, ClassFact},
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
    #[command(flatten)]
    pub policy: PolicyArgs,
}

/// What the manifests hold, as the sources of a running guard would hold it.
#[derive(Default)]
struct Offline {
    services: HashMap<ServiceRef, Service>,
    pods: Vec<Pod>,
    nodes: HashMap<String, nodeip::NodeAddrs>,
    classes: Vec<ClassFact>,
    /// GatewayClass name → `spec.controllerName`, for Gateway policies by controller.
    gateway_classes: BTreeMap<String, Option<String>>,
}

impl Sources for Offline {
    fn service(&self, svc: &ServiceRef) -> Result<Vec<Address>, Unresolved> {
        let found = self.services.get(svc).ok_or_else(|| Unresolved::Missing(svc.clone()))?;
        service::addresses(found, true).map_err(|e| Unresolved::Service(svc.clone(), e))
    }

    fn pods(&self, pods: &PodsRef) -> Result<Vec<Address>, Unresolved> {
        let facts: Vec<nodeip::PodFacts> = self
            .pods
            .iter()
            .filter(|p| p.metadata.namespace.as_deref().unwrap_or("default") == pods.namespace)
            .filter(|p| pods.selector.matches(&p.metadata.labels.clone().unwrap_or_default()))
            .map(nodeip::PodFacts::of)
            .collect();
        nodeip::addresses(&facts, &self.nodes, pods.internal_ip).map_err(|e| Unresolved::Pods(pods.to_string(), e))
    }
}

/// Runs `render-admission-policy`: every policy's admission policy and binding, as YAML.
pub(crate) fn render(args: &RenderArgs) -> Result<String, CliError> {
    let policies = args.policy.policies()?;
    let mut offline = Offline::default();
    for path in &args.file {
        read_manifest(path, &mut offline)?;
    }
    let mut objects = Vec::new();
    let governed = admission_policy::governed_in_order(&policies, &offline.classes);
    for (policy, governed) in policies.iter().zip(&governed) {
        let canonical =
            offline.canonical(policy).map_err(|reason| CliError::Unresolved { policy: policy.name.clone(), reason })?;
        objects.extend(admission_policy::render::<crate::kind::ingress::Ingresses>(
            policy,
            &canonical,
            governed,
            args.api_version,
        )?);
    }
    // Gateway policies: the webhook lets the first matching one govern, and two Gateway
    // policies that certainly overlap are refused by the file check, as for Ingresses.
    for policy in policies.gateway_policies() {
        let canonical =
            offline.canonical(policy).map_err(|reason| CliError::Unresolved { policy: policy.name.clone(), reason })?;
        let governed =
            admission_policy::Governed::resolve(&policy.scope, &admission_policy::facts(&offline.gateway_classes));
        objects.extend(admission_policy::render::<crate::kind::gateway::Gateways>(
            policy,
            &canonical,
            &governed,
            args.api_version,
        )?);
    }
    Ok(admission_policy::to_yaml(&objects))
}

/// Reads one manifest's objects into `offline`; other kinds (Namespaces, Ingresses, ...) are
/// skipped, so `kubectl get ... -o yaml` of more than is needed can be piped in.
fn read_manifest(path: &PathBuf, offline: &mut Offline) -> Result<(), CliError> {
    let stdin = path.as_os_str() == "-";
    let shown = if stdin { "<stdin>".to_owned() } else { path.display().to_string() };
    let manifest = |message: String| CliError::Manifest { path: shown.clone(), message };
    let text = if stdin {
        std::io::read_to_string(std::io::stdin())?
    } else {
        std::fs::read_to_string(path).map_err(|e| manifest(e.to_string()))?
    };
    let mut objects = Vec::new();
    for (i, doc) in serde_norway::Deserializer::from_str(&text).enumerate() {
        let value =
            Value::deserialize(doc).map_err(|e| manifest(format!("document {}: not YAML or JSON: {e}", i + 1)))?;
        match value.get("kind").and_then(Value::as_str) {
            _ if value.is_null() => {}
            Some(kind) if kind.ends_with("List") => {
                objects.extend(value.get("items").and_then(Value::as_array).cloned().unwrap_or_default());
            }
            _ => objects.push(value),
        }
    }
    for (i, object) in objects.into_iter().enumerate() {
        let what = |e: serde_json::Error| manifest(format!("object {}: {e}", i + 1));
        match object.get("kind").and_then(Value::as_str) {
            Some("Service") => {
                let svc: Service = serde_json::from_value(object).map_err(what)?;
                let key = ServiceRef {
                    namespace: svc.metadata.namespace.clone().unwrap_or_else(|| "default".to_owned()),
                    name: svc.metadata.name.clone().unwrap_or_default(),
                };
                offline.services.insert(key, svc);
            }
            Some("Pod") => offline.pods.push(serde_json::from_value(object).map_err(what)?),
            Some("Node") => {
                let node: Node = serde_json::from_value(object).map_err(what)?;
                offline.nodes.insert(node.metadata.name.clone().unwrap_or_default(), nodeip::NodeAddrs::of(&node));
            }
            Some("IngressClass") => {
                let class: IngressClass = serde_json::from_value(object).map_err(what)?;
                offline.classes.push(ClassFact {
                    default: crate::kind::ingress::is_default_class(&class),
                    name: class.metadata.name.unwrap_or_default(),
                    controller: class.spec.and_then(|s| s.controller),
                });
            }
            Some("GatewayClass") => {
                let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
                let controller = object.pointer("/spec/controllerName").and_then(Value::as_str).map(str::to_owned);
                offline.gateway_classes.insert(name, controller);
            }
            _ => {}
        }
    }
    Ok(())
}
