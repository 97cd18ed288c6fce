//! Where `serve`, `check` and `explain` read their policies from: a file, or the flags of one
//! policy (named as in ingress-nginx); errors name the flag to fix.

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::{
    kind::ingress::CLASS_ANNOTATION,
    policy::{self, Mode, OnUnresolved, PodsSpec, Policies, PolicySpec, ServiceRef, SpecError},
};

/// Where the policies come from: a file, or the flags of one policy (the same for every command).
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct PolicyArgs {
    /// YAML file with several policies (see docs/policies.md); replaces the policy flags below.
    #[arg(long, env = "ISG_CONFIG", conflicts_with_all = ["publish_service", "publish_status_address", "publish_pods_namespace", "publish_pods_selector", "report_node_internal_ip_address", "ingress_class", "controller_class", "watch_ingress_without_class", "mode", "keep_ports", "on_unresolved"])]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub flags: PolicyFlagsArgs,
}

impl PolicyArgs {
    /// The validated policies; errors name the file's field or the flag.
    pub(crate) fn policies(&self) -> Result<Policies, CliError> {
        match &self.config {
            Some(path) => Ok(policy::load_file(path)?),
            None => self.flags.policies(),
        }
    }
}

/// The flags that describe one policy (named `default`), named as in ingress-nginx.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct PolicyFlagsArgs {
    /// Publish the addresses of this Service (NAMESPACE/NAME), as ingress-nginx does.
    #[arg(long, env = "ISG_PUBLISH_SERVICE", conflicts_with = "publish_status_address", value_parser = ServiceRef::service)]
    pub publish_service: Option<ServiceRef>,
    /// Publish these addresses (comma-separated IPs and hostnames) instead of a Service's.
    #[arg(long, env = "ISG_PUBLISH_STATUS_ADDRESS", conflicts_with = "publish_pods_namespace")]
    pub publish_status_address: Option<String>,
    /// Publish the IPs of the nodes that run the Running and Ready Pods of this namespace that
    /// match --publish-pods-selector (ingress-nginx without a publish Service).
    #[arg(
        long,
        env = "ISG_PUBLISH_PODS_NAMESPACE",
        requires = "publish_pods_selector",
        conflicts_with = "publish_service"
    )]
    pub publish_pods_namespace: Option<String>,
    /// Label selector (kubectl syntax) of the controller Pods for --publish-pods-namespace.
    #[arg(long, env = "ISG_PUBLISH_PODS_SELECTOR", requires = "publish_pods_namespace")]
    pub publish_pods_selector: Option<String>,
    /// Publish the nodes' InternalIP addresses even where they have ExternalIPs.
    #[arg(long, env = "ISG_REPORT_NODE_INTERNAL_IP_ADDRESS", requires = "publish_pods_namespace")]
    pub report_node_internal_ip_address: bool,
    // The help names the annotation from `ingress`, where the class rule is defined once.
    #[arg(
        long,
        env = "ISG_INGRESS_CLASS",
        value_delimiter = ',',
        help = format!("Govern Ingresses of this class (spec.ingressClassName or the {CLASS_ANNOTATION} annotation). Repeatable. Without it, every Ingress is governed")
    )]
    pub ingress_class: Vec<String>,
    /// Govern Ingresses whose IngressClass has this spec.controller (e.g. k8s.io/ingress-nginx).
    /// Repeatable; with --ingress-class, either match is enough.
    #[arg(long, env = "ISG_CONTROLLER_CLASS", value_delimiter = ',')]
    pub controller_class: Vec<String>,
    /// Also govern Ingresses that name no class.
    #[arg(long, env = "ISG_WATCH_INGRESS_WITHOUT_CLASS")]
    pub watch_ingress_without_class: bool,
    /// What to do with a write that differs from the canonical addresses.
    #[arg(long, env = "ISG_MODE", value_enum, default_value_t = Mode::Enforce)]
    pub mode: Mode,
    /// Keep the `ports` of load-balancer entries (as Contour and Traefik do); dropped by default.
    #[arg(long, env = "ISG_KEEP_PORTS")]
    pub keep_ports: bool,
    /// What to do when the publish Service is missing or has no address yet.
    #[arg(long, env = "ISG_ON_UNRESOLVED", value_enum, default_value_t = OnUnresolved::Allow)]
    pub on_unresolved: OnUnresolved,
}

impl From<&PolicyFlagsArgs> for PolicySpec {
    fn from(flags: &PolicyFlagsArgs) -> Self {
        PolicySpec {
            name: "default".to_owned(),
            ingress_classes: flags.ingress_class.clone(),
            controller_classes: flags.controller_class.clone(),
            watch_ingress_without_class: flags.watch_ingress_without_class,
            publish_service: flags.publish_service.as_ref().map(ServiceRef::to_string),
            publish_status_address: flags.publish_status_address.clone(),
            publish_pods: flags.publish_pods_namespace.as_ref().map(|namespace| PodsSpec {
                namespace: namespace.clone(),
                selector: flags.publish_pods_selector.clone().unwrap_or_default(),
            }),
            report_node_internal_ip: flags.report_node_internal_ip_address,
            mode: Some(flags.mode),
            keep_ports: flags.keep_ports,
            on_unresolved: flags.on_unresolved,
            ..PolicySpec::default()
        }
    }
}

impl PolicyFlagsArgs {
    /// The policy set of just the policy these flags describe; errors name the flag.
    pub(crate) fn policies(&self) -> Result<Policies, CliError> {
        let value = || self.publish_status_address.clone().unwrap_or_default();
        PolicySpec::from(self).into_policies().map_err(|e| match e {
            SpecError::NoSource => CliError::NoSource,
            SpecError::Static(source) => CliError::StaticFlag { value: value(), source },
            e @ SpecError::EmptyController(_) => CliError::ControllerFlag(e),
            e @ SpecError::PodsNamespace(_) => CliError::PodsNamespaceFlag(e),
            e @ (SpecError::PodsSelector(_) | SpecError::EmptyPodsSelector) => {
                CliError::PodsSelectorFlag { value: self.publish_pods_selector.clone().unwrap_or_default(), source: e }
            }
            // clap already refuses both sources at once and parses --publish-service.
            other => CliError::ClassFlag(other),
        })
    }
}
