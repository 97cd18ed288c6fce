//! Policies as written (the YAML file's entries, what the flags say) and their validation into
//! [`Policy`] values, every error naming the field, overlap rules included.

use std::path::Path;

use serde::Deserialize;

use super::{
    ClassScope, LabelSelector, Mode, NamespacedName, OnUnresolved, PodsRef, Policies, Policy, RefError, SelectorError,
    Source, TrustedError, TrustedWriters,
};
use crate::{
    address::{self, AddressError},
    kind::Kind,
    names,
};

mod service;

/// Why a policy file cannot be used. Errors in one policy name it by its index and field.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("config file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("config file {path}: policies: must list at least one policy")]
    NoPolicies { path: String },
    #[error("config file {path}: policies[{index}].{}: {source}", source.field())]
    Policy { path: String, index: usize, source: SpecError },
    #[error("config file {path}: policies[{index}].name: {name:?} is used by an earlier policy; names must be unique")]
    DuplicateName { path: String, index: usize, name: String },
    #[error(transparent)]
    Overlap(#[from] OverlapError),
}

/// Two policies that could govern the same Ingress.
#[derive(Debug, thiserror::Error)]
#[error("policies {first:?} and {second:?} overlap: {why}; each Ingress must be governed by at most one policy")]
pub struct OverlapError {
    first: String,
    second: String,
    why: String,
}

/// The node-IP source as written: `publishPods: {namespace, selector}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodsSpec {
    /// The controller Pods' namespace.
    pub namespace: String,
    /// Their label selector, in kubectl's text syntax.
    pub selector: String,
}

/// Every field a policy (and its `sources` entries) may have: the leader publishes them on its
/// Lease, so `version --config` can tell a file this guard would refuse before it is rolled out.
pub(crate) const FIELDS: &[&str] = &[
    "name",
    "kind",
    "ingressClasses",
    "controllerClasses",
    "watchIngressWithoutClass",
    "gatewayClasses",
    "gatewayControllers",
    "loadBalancerClasses",
    "acknowledgeKubeProxyImpact",
    "namespaceSelector",
    "publishService",
    "publishStatusAddress",
    "publishPods",
    "publishGateway",
    "reportNodeInternalIp",
    "sources",
    "trustedWriters",
    "mode",
    "keepPorts",
    "onUnresolved",
];

/// One entry of `sources:`: exactly one of its source fields.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SourceSpec {
    /// `publishService: NAMESPACE/NAME`.
    pub publish_service: Option<String>,
    /// `publishStatusAddress`: comma-separated IPs and hostnames.
    pub publish_status_address: Option<String>,
    /// `publishPods`: the node IPs of Ready controller Pods.
    pub publish_pods: Option<PodsSpec>,
    /// `publishGateway: NAMESPACE/NAME`: a Gateway's `status.addresses`.
    pub publish_gateway: Option<String>,
    /// Overrides the policy's `reportNodeInternalIp` for this `publishPods` source.
    pub report_node_internal_ip: Option<bool>,
}

/// `namespaceSelector:` as kubectl text or as a Kubernetes `LabelSelector` object.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SelectorSpec {
    /// kubectl's syntax: `app=x,tier in (a,b),!old`.
    Text(String),
    /// `matchLabels` and `matchExpressions`.
    Object(k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector),
}

/// One policy as written, before validation: a YAML file's entry, or what the flags say (named
/// `default` by [`Default`], as the flags' policy is); built by [`PolicySpec::into_policies`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicySpec {
    /// Names the policy in logs, metrics, Events and errors; unique in a file.
    pub name: String,
    /// `kind`: the kind of object the policy governs (`Ingress` when absent; a policy with
    /// Gateway class fields and no `kind` governs Gateways, with a deprecation warning).
    #[serde(default)]
    pub kind: Option<Kind>,
    /// `ingressClasses`: class names governed (`spec.ingressClassName` or the legacy annotation).
    #[serde(default)]
    pub ingress_classes: Vec<String>,
    /// `controllerClasses`: IngressClass `spec.controller` values governed.
    #[serde(default)]
    pub controller_classes: Vec<String>,
    /// `watchIngressWithoutClass`: also govern Ingresses that name no class.
    #[serde(default)]
    pub watch_ingress_without_class: bool,
    /// `gatewayClasses`: the policy governs Gateways (not Ingresses) of these `gatewayClassName`s.
    #[serde(default)]
    pub gateway_classes: Vec<String>,
    /// `gatewayControllers`: the policy governs Gateways whose GatewayClass has this `controllerName`.
    #[serde(default)]
    pub gateway_controllers: Vec<String>,
    /// `loadBalancerClasses` (`kind: Service` only): the `spec.loadBalancerClass` values governed;
    /// `""` stands for Services without one.
    #[serde(default)]
    pub load_balancer_classes: Vec<String>,
    /// `acknowledgeKubeProxyImpact` (`kind: Service` only): required with a static or node-IP
    /// source, whose addresses are not the load balancer's, because kube-proxy programs every
    /// node from a Service's `status.loadBalancer.ingress`.
    #[serde(default)]
    pub acknowledge_kube_proxy_impact: bool,
    /// `namespaceSelector`: only Ingresses in Namespaces whose labels match.
    pub namespace_selector: Option<SelectorSpec>,
    /// `publishService`: the one source, shorthand for `sources: [{publishService}]`.
    pub publish_service: Option<String>,
    /// `publishStatusAddress`: the one source, shorthand for `sources: [{publishStatusAddress}]`.
    pub publish_status_address: Option<String>,
    /// `publishPods`: the one source, shorthand for `sources: [{publishPods}]`.
    pub publish_pods: Option<PodsSpec>,
    /// `publishGateway`: the one source, shorthand for `sources: [{publishGateway}]`.
    pub publish_gateway: Option<String>,
    /// `reportNodeInternalIp`: node IPs are InternalIPs even where ExternalIPs exist.
    #[serde(default)]
    pub report_node_internal_ip: bool,
    /// `sources`: several sources, whose union is canonical.
    #[serde(default)]
    pub sources: Vec<SourceSpec>,
    /// `trustedWriters`: the identities whose status writes define the status; the policy's
    /// only source (`None` when absent, so that `[]` is an error of its own).
    #[serde(default)]
    pub trusted_writers: Option<Vec<String>>,
    /// What a differing write gets: `enforce` when absent, `audit` for a Service policy.
    #[serde(default)]
    pub mode: Option<Mode>,
    /// `keepPorts`: keep and compare the entries' `ports`.
    #[serde(default)]
    pub keep_ports: bool,
    /// What to do while the sources give no address.
    #[serde(default)]
    pub on_unresolved: OnUnresolved,
}

impl Default for PolicySpec {
    fn default() -> Self {
        PolicySpec {
            name: "default".to_owned(),
            kind: None,
            ingress_classes: Vec::new(),
            controller_classes: Vec::new(),
            watch_ingress_without_class: false,
            gateway_classes: Vec::new(),
            gateway_controllers: Vec::new(),
            load_balancer_classes: Vec::new(),
            acknowledge_kube_proxy_impact: false,
            namespace_selector: None,
            publish_service: None,
            publish_status_address: None,
            publish_pods: None,
            publish_gateway: None,
            report_node_internal_ip: false,
            sources: Vec::new(),
            trusted_writers: None,
            mode: None,
            keep_ports: false,
            on_unresolved: OnUnresolved::default(),
        }
    }
}

/// A field of [`PolicySpec`] that is wrong, and why. Messages use the file's field names; the
/// command line puts its flag names on them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("must not be empty")]
    /// The policy has no name.
    EmptyName,
    #[error("{0:?}: class names must not be empty")]
    /// An empty class name.
    EmptyClass(String),
    #[error("{0:?}: controller names must not be empty")]
    /// An empty controller name.
    EmptyController(String),
    #[error("{0} governs Ingresses and {1} Gateways; a policy governs one kind, so split it in two")]
    /// Ingress class fields and Gateway class fields in one policy.
    MixedKinds(&'static str, &'static str),
    #[error("{0} is a field of {1} policies; this policy has kind: {2}")]
    /// A class field of another kind than the policy's `kind` (the field, its kind, the policy's).
    OtherKindsField(&'static str, Kind, Kind),
    #[error(
        "{1:?} is not a class name (a DNS-1123 subdomain: lowercase letters, digits, '-' and '.'), so no {2} can be of this class"
    )]
    /// An `ingressClasses` or `gatewayClasses` item that no object's class can equal: the
    /// guard reads such a class as none (the field, the name, the policy's kind).
    InvalidClass(&'static str, String, Kind),
    #[error(
        "is required for kind: Service: list the spec.loadBalancerClass values governed, and \"\" for LoadBalancer Services without one"
    )]
    /// A Service policy without `loadBalancerClasses`.
    NoLoadBalancerClasses,
    #[error(
        "{0:?} is not a loadBalancerClass (a qualified name such as example.com/lb or internal-vip; \"\" stands for Services without one), so no Service can be of this class"
    )]
    /// A `loadBalancerClasses` item no Service's class can equal.
    InvalidLoadBalancerClass(String),
    #[error(
        "must be true for a Service policy with a {0} source: kube-proxy programs every node from a LoadBalancer Service's status.loadBalancer.ingress (it routes each IP there to the Service's endpoints locally), so addresses that are not the load balancer's change where traffic goes; see docs/services.md"
    )]
    /// A Service policy whose source puts addresses that are not its load balancer's, unacknowledged.
    KubeProxyImpact(&'static str),
    #[error("{1:?}: names must not be empty")]
    /// An empty `gatewayClasses` or `gatewayControllers` item (the field).
    EmptyGatewayName(&'static str, String),
    #[error(
        "one of publishService, publishStatusAddress, publishPods, publishGateway, sources or trustedWriters is required"
    )]
    /// No source at all.
    NoSource,
    #[error("{0} and {1} are mutually exclusive; set one, or list both under sources to use their union")]
    /// Two one-source shorthands in one policy.
    BothSources(&'static str, &'static str),
    #[error("must list at least one source")]
    /// `sources: []`.
    EmptySources,
    #[error(transparent)]
    /// A `trustedWriters` list or identity that cannot be used.
    Trusted(TrustedError),
    #[error(
        "trustedWriters and {0} cannot be combined: a trusted writer's write defines the status, while {0} computes it, and no status can be both; keep one of the two fields"
    )]
    /// `trustedWriters` beside a source that computes addresses (the field).
    TrustedWithSource(&'static str),
    #[error(
        "has no meaning with trustedWriters: a trusted writer's entries are kept as written, ports included; remove keepPorts"
    )]
    /// `keepPorts` on a trusted-writer policy.
    TrustedKeepPorts,
    #[error(transparent)]
    /// A publish Service reference that is not `NAMESPACE/NAME`.
    Service(RefError),
    #[error(transparent)]
    /// A publish Gateway reference that is not `NAMESPACE/NAME`.
    Gateway(RefError),
    #[error(transparent)]
    /// An item of a static list that is neither an IP nor a hostname.
    Static(AddressError),
    #[error("{0:?} is not a valid namespace name (DNS-1123 label)")]
    /// A `publishPods` namespace that is not a namespace name.
    PodsNamespace(String),
    #[error("must not be empty (it would select every Pod of the namespace)")]
    /// A `publishPods` selector that selects everything.
    EmptyPodsSelector,
    #[error(transparent)]
    /// A `publishPods` selector that does not parse.
    PodsSelector(SelectorError),
    #[error("applies only to a publishPods source")]
    /// `reportNodeInternalIp` without a node-IP source.
    InternalIpWithoutPods,
    #[error(transparent)]
    /// A `namespaceSelector` that does not parse.
    NamespaceSelector(SelectorError),
    /// An error in entry `index` of `sources`.
    #[error("{error}")]
    InSource {
        /// The entry's position in `sources`.
        index: usize,
        /// What is wrong with it.
        error: Box<SpecError>,
    },
}

impl SpecError {
    /// The field of the policy file at fault.
    pub fn field(&self) -> String {
        match self {
            SpecError::EmptyName => "name".into(),
            SpecError::NoLoadBalancerClasses | SpecError::InvalidLoadBalancerClass(_) => "loadBalancerClasses".into(),
            SpecError::KubeProxyImpact(_) => "acknowledgeKubeProxyImpact".into(),
            SpecError::MixedKinds(_, gateway) => (*gateway).into(),
            SpecError::OtherKindsField(field, ..) => (*field).into(),
            SpecError::EmptyGatewayName(field, _) | SpecError::InvalidClass(field, ..) => (*field).into(),
            SpecError::EmptyClass(_) => "ingressClasses".into(),
            SpecError::EmptyController(_) => "controllerClasses".into(),
            SpecError::NoSource | SpecError::Service(_) => "publishService".into(),
            SpecError::BothSources(first, _) => (*first).into(),
            SpecError::EmptySources => "sources".into(),
            SpecError::Trusted(_) | SpecError::TrustedWithSource(_) => "trustedWriters".into(),
            SpecError::TrustedKeepPorts => "keepPorts".into(),
            SpecError::Gateway(_) => "publishGateway".into(),
            SpecError::Static(_) => "publishStatusAddress".into(),
            SpecError::PodsNamespace(_) => "publishPods.namespace".into(),
            SpecError::EmptyPodsSelector | SpecError::PodsSelector(_) => "publishPods.selector".into(),
            SpecError::InternalIpWithoutPods => "reportNodeInternalIp".into(),
            SpecError::NamespaceSelector(_) => "namespaceSelector".into(),
            SpecError::InSource { index, error } => format!("sources[{index}].{}", error.field()),
        }
    }
}

impl SourceSpec {
    /// The source fields that are set.
    fn set(&self) -> impl Iterator<Item = &'static str> + use<> {
        [
            ("publishService", self.publish_service.is_some()),
            ("publishStatusAddress", self.publish_status_address.is_some()),
            ("publishPods", self.publish_pods.is_some()),
            ("publishGateway", self.publish_gateway.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, on)| on.then_some(name))
    }

    /// Validates one source; `internal_ip` is the policy's `reportNodeInternalIp`.
    fn build(self, internal_ip: bool) -> Result<Source, SpecError> {
        let mut set = self.set();
        if let (Some(first), Some(second)) = (set.next(), set.next()) {
            return Err(SpecError::BothSources(first, second));
        }
        if self.publish_pods.is_none() && self.report_node_internal_ip == Some(true) {
            return Err(SpecError::InternalIpWithoutPods);
        }
        if let Some(svc) = self.publish_service {
            return Ok(Source::Service(NamespacedName::service(&svc).map_err(SpecError::Service)?));
        }
        if let Some(gw) = self.publish_gateway {
            return Ok(Source::Gateway(NamespacedName::gateway(&gw).map_err(SpecError::Gateway)?));
        }
        if let Some(list) = self.publish_status_address {
            return Ok(Source::Static(address::parse_static_list(&list).map_err(SpecError::Static)?));
        }
        let Some(pods) = self.publish_pods else {
            return Err(SpecError::NoSource);
        };
        if !names::is_dns1123_label(&pods.namespace) {
            return Err(SpecError::PodsNamespace(pods.namespace));
        }
        let selector = LabelSelector::parse(&pods.selector).map_err(SpecError::PodsSelector)?;
        if selector.is_empty() {
            return Err(SpecError::EmptyPodsSelector);
        }
        Ok(Source::Pods(PodsRef {
            namespace: pods.namespace,
            selector,
            internal_ip: self.report_node_internal_ip.unwrap_or(internal_ip),
        }))
    }
}

impl PolicySpec {
    /// The policy set of just this policy (one policy cannot overlap another).
    pub fn into_policies(self) -> Result<Policies, SpecError> {
        Ok(Policies(vec![self.build()?]))
    }

    /// Validates the spec into a policy of the kind it governs (Gateways when it has
    /// `gatewayClasses` or `gatewayControllers`, which are then its classes and controllers).
    pub(crate) fn build(mut self) -> Result<Policy, SpecError> {
        let ingress_field = [
            ("ingressClasses", !self.ingress_classes.is_empty()),
            ("controllerClasses", !self.controller_classes.is_empty()),
            ("watchIngressWithoutClass", self.watch_ingress_without_class),
        ]
        .into_iter()
        .find_map(|(name, on)| on.then_some(name));
        let gateway_field = [
            ("gatewayClasses", !self.gateway_classes.is_empty()),
            ("gatewayControllers", !self.gateway_controllers.is_empty()),
        ]
        .into_iter()
        .find_map(|(name, on)| on.then_some(name));
        let service_field = [
            ("loadBalancerClasses", !self.load_balancer_classes.is_empty()),
            ("acknowledgeKubeProxyImpact", self.acknowledge_kube_proxy_impact),
        ]
        .into_iter()
        .find_map(|(name, on)| on.then_some(name));
        let kind_inferred = self.kind.is_none() && gateway_field.is_some();
        let kind = match (self.kind, gateway_field) {
            (Some(kind), _) => kind,
            (None, Some(_)) => Kind::Gateway,
            (None, None) => Kind::Ingress,
        };
        if let (Kind::Gateway, Some(ingress), Some(gateway)) = (kind, ingress_field, gateway_field) {
            return Err(SpecError::MixedKinds(ingress, gateway));
        }
        let service_field = service_field.map(|field| (field, Kind::Service));
        let other = match kind {
            Kind::Ingress => gateway_field.map(|field| (field, Kind::Gateway)).or(service_field),
            Kind::Gateway => ingress_field.map(|field| (field, Kind::Ingress)).or(service_field),
            Kind::Service => {
                ingress_field.map(|field| (field, Kind::Ingress)).or(gateway_field.map(|field| (field, Kind::Gateway)))
            }
        };
        if let Some((field, of)) = other {
            return Err(SpecError::OtherKindsField(field, of, kind));
        }
        if kind == Kind::Gateway {
            for (field, names) in
                [("gatewayClasses", &self.gateway_classes), ("gatewayControllers", &self.gateway_controllers)]
            {
                if let Some(empty) = names.iter().find(|n| n.is_empty()) {
                    return Err(SpecError::EmptyGatewayName(field, empty.clone()));
                }
            }
        }
        let classes = if kind == Kind::Gateway {
            ("gatewayClasses", &self.gateway_classes)
        } else {
            ("ingressClasses", &self.ingress_classes)
        };
        if let Some(bad) = classes.1.iter().find(|c| !c.is_empty() && !names::is_dns1123_subdomain(c)) {
            return Err(SpecError::InvalidClass(classes.0, bad.clone(), kind));
        }
        if kind == Kind::Gateway {
            // Matching is the same as for Ingresses, on the Gateway's class and its controller.
            self.ingress_classes = std::mem::take(&mut self.gateway_classes);
            self.controller_classes = std::mem::take(&mut self.gateway_controllers);
        }
        if kind == Kind::Service {
            return self.build_service();
        }
        let mode = self.mode.unwrap_or_default();
        self.build_one().map(|policy| Policy { kind, kind_inferred, mode, ..policy })
    }

    pub(super) fn build_one(self) -> Result<Policy, SpecError> {
        if self.name.is_empty() {
            return Err(SpecError::EmptyName);
        }
        if let Some(class) = self.ingress_classes.iter().find(|c| c.is_empty()) {
            return Err(SpecError::EmptyClass(class.clone()));
        }
        if let Some(controller) = self.controller_classes.iter().find(|c| c.is_empty()) {
            return Err(SpecError::EmptyController(controller.clone()));
        }
        let shorthand = SourceSpec {
            publish_service: self.publish_service,
            publish_status_address: self.publish_status_address,
            publish_pods: self.publish_pods,
            publish_gateway: self.publish_gateway,
            report_node_internal_ip: None,
        };
        let first_shorthand = shorthand.set().next();
        let internal_ip = self.report_node_internal_ip;
        let sources = if let Some(identities) = self.trusted_writers {
            // What else a source could say of the status: no union with a trusted writer has a meaning.
            let computed = first_shorthand
                .or((!self.sources.is_empty()).then_some("sources"))
                .or(internal_ip.then_some("reportNodeInternalIp"));
            if let Some(field) = computed {
                return Err(SpecError::TrustedWithSource(field));
            }
            if self.keep_ports {
                // A trusted writer's entries stand as written, ports included.
                return Err(SpecError::TrustedKeepPorts);
            }
            vec![Source::Trusted(TrustedWriters::new(identities).map_err(SpecError::Trusted)?)]
        } else if self.sources.is_empty() {
            if internal_ip && shorthand.publish_pods.is_none() {
                return Err(SpecError::InternalIpWithoutPods);
            }
            vec![shorthand.build(internal_ip)?]
        } else if let Some(first) = first_shorthand {
            return Err(SpecError::BothSources(first, "sources"));
        } else {
            let mut built = Vec::with_capacity(self.sources.len());
            for (index, spec) in self.sources.into_iter().enumerate() {
                built.push(spec.build(internal_ip).map_err(|e| SpecError::InSource { index, error: Box::new(e) })?);
            }
            if internal_ip && !built.iter().any(|s| matches!(s, Source::Pods(_))) {
                return Err(SpecError::InternalIpWithoutPods);
            }
            built
        };
        let namespace_selector = match self.namespace_selector {
            None => None,
            Some(SelectorSpec::Text(text)) => Some(LabelSelector::parse(&text).map_err(SpecError::NamespaceSelector)?),
            Some(SelectorSpec::Object(obj)) => {
                Some(LabelSelector::from_kube(obj).map_err(SpecError::NamespaceSelector)?)
            }
        };
        Ok(Policy {
            name: self.name,
            kind: Kind::Ingress,
            kind_inferred: false,
            scope: ClassScope {
                classes: self.ingress_classes,
                controllers: self.controller_classes,
                without_class: self.watch_ingress_without_class,
            },
            namespace_selector,
            sources,
            mode: Mode::default(),
            keep_ports: self.keep_ports,
            on_unresolved: self.on_unresolved,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct FileConfig {
    policies: Vec<PolicySpec>,
}

/// Reads and validates a YAML policy file.
pub(crate) fn load_file(path: &Path) -> Result<Policies, ConfigError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: shown.clone(), source })?;
    parse_file(&shown, &text)
}

/// Parses a YAML policy file's text; `path` only names it in errors.
pub fn parse_file(path: &str, text: &str) -> Result<Policies, ConfigError> {
    let file: FileConfig = serde_norway::from_str(text)
        .map_err(|e| ConfigError::Parse { path: path.to_owned(), message: e.to_string() })?;
    if file.policies.is_empty() {
        return Err(ConfigError::NoPolicies { path: path.to_owned() });
    }
    let mut policies: Vec<Policy> = Vec::with_capacity(file.policies.len());
    for (index, spec) in file.policies.into_iter().enumerate() {
        if policies.iter().any(|q| q.name == spec.name) {
            return Err(ConfigError::DuplicateName { path: path.to_owned(), index, name: spec.name });
        }
        let policy = spec.build().map_err(|source| ConfigError::Policy { path: path.to_owned(), index, source })?;
        policies.push(policy);
    }
    Ok(Policies::new(policies)?)
}

/// Why two class scopes certainly share objects, whatever the cluster holds; `None` when they
/// share none, or only through class objects seen at run time.
pub(super) fn class_clash(p: &ClassScope, q: &ClassScope) -> Option<String> {
    if p.governs_everything() || q.governs_everything() {
        Some("one of them lists no ingressClasses or controllerClasses and so governs every Ingress".to_owned())
    } else if let Some(c) = p.classes.iter().find(|c| q.classes.contains(c)) {
        Some(format!("both govern class {c:?}"))
    } else if let Some(c) = p.controllers.iter().find(|c| q.controllers.contains(c)) {
        Some(format!("both govern controller {c:?}"))
    } else if p.without_class && q.without_class {
        Some("both set watchIngressWithoutClass".to_owned())
    } else {
        None
    }
}

/// Two policies must never claim the same object, or which one wins would depend on file order:
/// what can be decided here is refused; the rest is counted at run time (the first policy wins).
pub(super) fn validate_overlaps(policies: &[&Policy]) -> Result<(), OverlapError> {
    for (i, p) in policies.iter().enumerate() {
        for q in &policies[..i] {
            let Some(class_why) = class_clash(&p.scope, &q.scope) else { continue };
            let why = match (&q.namespace_selector, &p.namespace_selector) {
                (None, None) => Some(class_why),
                (Some(_), None) | (None, Some(_)) => Some(format!(
                    "{class_why}, and one of them has no namespaceSelector, so it governs every namespace the other selects"
                )),
                (Some(a), Some(b)) if a == b => Some(format!("{class_why}, with the same namespaceSelector")),
                // Disjoint selectors split the class between them; any other pair may or may
                // not share a Namespace, which only its labels tell.
                (Some(_), Some(_)) => None,
            };
            if let Some(why) = why {
                return Err(OverlapError { first: q.name.clone(), second: p.name.clone(), why });
            }
        }
    }
    Ok(())
}
