//! Policies: which Ingresses are governed, where their canonical addresses come from, and what to
//! do about a write that differs. Built and validated once, from flags or a YAML file.

use std::{collections::BTreeMap, fmt, path::Path, str::FromStr};

use serde::Deserialize;

mod selector;
pub(crate) mod store;

pub(crate) use selector::{LabelSelector, SelectorError};

use crate::{
    address::{self, Address, AddressError, Addresses},
    names,
};

/// What to do with a governed write whose addresses are not the canonical ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Rewrite the status to the canonical addresses.
    #[default]
    Enforce,
    /// Let the write through unchanged, and report it.
    Audit,
    /// Reject the write, naming the canonical addresses.
    Deny,
}

/// What to do when the source has no addresses (Service missing, load balancer pending, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum OnUnresolved {
    /// Let the write through unchanged, with a warning.
    #[default]
    Allow,
    /// Reject the write until the source resolves.
    Deny,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Enforce => "enforce",
            Mode::Audit => "audit",
            Mode::Deny => "deny",
        })
    }
}

/// `namespace/name` of a publish Service.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceRef {
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for ServiceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Why a text is not a `NAMESPACE/NAME` Service reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceRefError {
    #[error("{0:?} must be NAMESPACE/NAME, e.g. ingress-nginx/ingress-nginx-controller")]
    Shape(String),
    #[error("{text:?}: {part} {value:?} is not a valid Kubernetes name (lowercase letters, digits and '-')")]
    Name { text: String, part: &'static str, value: String },
}

impl FromStr for ServiceRef {
    type Err = ServiceRefError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (namespace, name) = s.split_once('/').ok_or_else(|| ServiceRefError::Shape(s.to_owned()))?;
        for (part, value) in [("namespace", namespace), ("name", name)] {
            if !names::is_dns1123_label(value) {
                return Err(ServiceRefError::Name { text: s.to_owned(), part, value: value.to_owned() });
            }
        }
        Ok(ServiceRef { namespace: namespace.to_owned(), name: name.to_owned() })
    }
}

/// The node-IP source: the nodes of the Running and Ready Pods in `namespace` that match
/// `selector` (ingress-nginx without a publish Service).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodsRef {
    pub namespace: String,
    pub selector: LabelSelector,
    /// Publish the nodes' `InternalIP`s even where they have `ExternalIP`s.
    pub internal_ip: bool,
}

impl PodsRef {
    /// What one Pod watch serves: the namespace and the selector text (the address kind is
    /// applied at lookup, so two sources that differ only in it share a watch).
    pub fn watch_key(&self) -> (String, String) {
        (self.namespace.clone(), self.selector.to_string())
    }
}

impl fmt::Display for PodsRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.internal_ip { "internal" } else { "external" };
        write!(f, "pods {}/{{{}}} ({kind} node IPs)", self.namespace, self.selector)
    }
}

/// Where a policy's canonical addresses come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A fixed list, already canonical.
    Static(Vec<Address>),
    /// The addresses the Service publishes, read from a watch-fed cache.
    Service(ServiceRef),
    /// The addresses of the nodes that run the controller's Ready Pods.
    Pods(PodsRef),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Static(list) => write!(f, "static [{}]", Addresses(list)),
            Source::Service(svc) => write!(f, "service {svc}"),
            Source::Pods(pods) => pods.fmt(f),
        }
    }
}

/// A policy's sources as they read in logs: `a + b`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SourceList<'a>(pub &'a [Source]);

impl fmt::Display for SourceList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" + ")?;
            }
            s.fmt(f)?;
        }
        Ok(())
    }
}

/// Which Ingresses a policy governs, by class.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassScope {
    /// Matched against `spec.ingressClassName`, else the `kubernetes.io/ingress.class`
    /// annotation. Empty, with `controllers` empty too: every Ingress, with or without a class.
    pub classes: Vec<String>,
    /// Matched against the `spec.controller` of the IngressClass the Ingress names.
    pub controllers: Vec<String>,
    /// Also govern Ingresses that name no class.
    pub without_class: bool,
}

/// What the cluster says about one Ingress, beyond the write itself: the facts class and
/// namespace matching need, read from watch-fed caches by the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subject<'a> {
    pub namespace: &'a str,
    pub class: Option<&'a str>,
    /// `spec.controller` of the IngressClass named `class`, when it exists.
    pub class_controller: Option<String>,
    /// The default IngressClasses (annotation `ingressclass.kubernetes.io/is-default-class`),
    /// each with its controller.
    pub default_classes: Vec<(String, Option<String>)>,
    /// The labels of the Ingress's Namespace; `None` when unknown.
    pub namespace_labels: Option<BTreeMap<String, String>>,
}

/// Which rule made a policy govern an Ingress (what `explain` shows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassRule {
    /// The policy lists no class or controller: it governs every Ingress.
    Everything,
    /// The Ingress's class is listed in `ingressClasses`.
    ClassName,
    /// The Ingress's IngressClass names a controller in `controllerClasses`.
    Controller(String),
    /// A class-less Ingress, governed by `watchIngressWithoutClass`.
    WithoutClass,
    /// A class-less Ingress, governed because this default IngressClass is the policy's.
    DefaultClass(String),
}

impl fmt::Display for ClassRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClassRule::Everything => f.write_str("the policy governs every class"),
            ClassRule::ClassName => f.write_str("its class is in ingressClasses"),
            ClassRule::Controller(c) => write!(f, "its IngressClass's controller {c} is in controllerClasses"),
            ClassRule::WithoutClass => f.write_str("it names no class and watchIngressWithoutClass is set"),
            ClassRule::DefaultClass(c) => write!(f, "it names no class and the default IngressClass {c} is governed"),
        }
    }
}

impl ClassScope {
    fn governs_everything(&self) -> bool {
        self.classes.is_empty() && self.controllers.is_empty()
    }

    fn governs_class(&self, class: &str, controller: Option<&str>) -> Option<ClassRule> {
        if self.classes.iter().any(|c| c == class) {
            return Some(ClassRule::ClassName);
        }
        let controller = controller?;
        self.controllers.iter().any(|c| c == controller).then(|| ClassRule::Controller(controller.to_owned()))
    }

    /// The rule by which this scope governs `subject`'s class, if any.
    pub fn matches(&self, subject: &Subject<'_>) -> Option<ClassRule> {
        if self.governs_everything() {
            return Some(ClassRule::Everything);
        }
        match subject.class {
            Some(class) => self.governs_class(class, subject.class_controller.as_deref()),
            None if self.without_class => Some(ClassRule::WithoutClass),
            None => subject.default_classes.iter().find_map(|(name, controller)| {
                self.governs_class(name, controller.as_deref()).map(|_| ClassRule::DefaultClass(name.clone()))
            }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub name: String,
    pub scope: ClassScope,
    /// Only Ingresses in Namespaces whose labels match (config only).
    pub namespace_selector: Option<LabelSelector>,
    /// Never empty; the canonical set is the union of what they resolve to.
    pub sources: Vec<Source>,
    pub mode: Mode,
    pub keep_ports: bool,
    pub on_unresolved: OnUnresolved,
}

impl Policy {
    /// The rule by which this policy governs `subject`, if it does. A Namespace whose labels
    /// are unknown is not governed by a policy with a `namespaceSelector`.
    pub fn matches(&self, subject: &Subject<'_>) -> Option<ClassRule> {
        if let Some(selector) = &self.namespace_selector
            && !subject.namespace_labels.as_ref().is_some_and(|labels| selector.matches(labels))
        {
            return None;
        }
        self.scope.matches(subject)
    }
}

/// The validated set of policies; the first policy whose scope matches an Ingress governs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policies(Vec<Policy>);

impl Policies {
    pub fn new(policies: Vec<Policy>) -> Result<Self, OverlapError> {
        validate_overlaps(&policies)?;
        Ok(Policies(policies))
    }

    /// The policy that governs `subject`: the first match in file order.
    pub fn governing(&self, subject: &Subject<'_>) -> Option<&Policy> {
        self.0.iter().find(|p| p.matches(subject).is_some())
    }

    /// Every policy that matches `subject`, in file order (more than one is a run-time overlap).
    pub fn matching(&self, subject: &Subject<'_>) -> Vec<&Policy> {
        self.0.iter().filter(|p| p.matches(subject).is_some()).collect()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Policy> {
        self.0.iter()
    }

    /// The same policies with `keepPorts` off, for an API server that cannot store ports.
    pub fn without_ports(self) -> Policies {
        Policies(self.0.into_iter().map(|p| Policy { keep_ports: false, ..p }).collect())
    }

    /// Whether more than one policy could match an Ingress at run time.
    pub fn several(&self) -> bool {
        self.0.len() > 1
    }

    /// Every distinct publish Service, each to be watched once.
    pub fn services(&self) -> Vec<ServiceRef> {
        let mut refs: Vec<ServiceRef> = self
            .sources()
            .filter_map(|s| match s {
                Source::Service(svc) => Some(svc.clone()),
                _ => None,
            })
            .collect();
        refs.sort();
        refs.dedup();
        refs
    }

    /// Every distinct node-IP source's Pod watch (namespace, selector).
    pub fn pod_watches(&self) -> Vec<(String, String)> {
        let mut keys: Vec<_> = self
            .sources()
            .filter_map(|s| match s {
                Source::Pods(pods) => Some(pods.watch_key()),
                _ => None,
            })
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    fn sources(&self) -> impl Iterator<Item = &Source> {
        self.0.iter().flat_map(|p| &p.sources)
    }

    /// Whether matching needs IngressClasses: a policy matches by controller, or could govern
    /// class-less Ingresses through the default IngressClass.
    pub fn need_ingress_classes(&self) -> bool {
        self.0
            .iter()
            .any(|p| !p.scope.controllers.is_empty() || (!p.scope.classes.is_empty() && !p.scope.without_class))
    }

    /// Pairs of policies (earlier, later) that govern a common class in Namespaces whose
    /// selectors are not provably disjoint: they overlap if a Namespace matches both, which is
    /// counted at run time (the earlier wins). Logged at start-up.
    pub fn possible_overlaps(&self) -> Vec<(&str, &str)> {
        let mut pairs = Vec::new();
        for (i, p) in self.0.iter().enumerate() {
            for q in &self.0[..i] {
                if let (Some(a), Some(b)) = (&q.namespace_selector, &p.namespace_selector)
                    && class_clash(&p.scope, &q.scope).is_some()
                    && !a.disjoint(b)
                {
                    pairs.push((q.name.as_str(), p.name.as_str()));
                }
            }
        }
        pairs
    }

    /// Whether matching needs Namespace labels.
    pub fn need_namespaces(&self) -> bool {
        self.0.iter().any(|p| p.namespace_selector.is_some())
    }
}

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
pub(crate) struct PodsSpec {
    pub namespace: String,
    pub selector: String,
}

/// One entry of `sources:`: exactly one of its source fields.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SourceSpec {
    pub publish_service: Option<String>,
    pub publish_status_address: Option<String>,
    pub publish_pods: Option<PodsSpec>,
    /// Overrides the policy's `reportNodeInternalIp` for this `publishPods` source.
    pub report_node_internal_ip: Option<bool>,
}

/// `namespaceSelector:` as kubectl text or as a Kubernetes `LabelSelector` object.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum SelectorSpec {
    Text(String),
    Object(k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector),
}

/// One policy as written, before validation: a YAML file's entry, or what the flags say.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct PolicySpec {
    pub name: String,
    #[serde(default)]
    pub ingress_classes: Vec<String>,
    #[serde(default)]
    pub controller_classes: Vec<String>,
    #[serde(default)]
    pub watch_ingress_without_class: bool,
    pub namespace_selector: Option<SelectorSpec>,
    pub publish_service: Option<String>,
    pub publish_status_address: Option<String>,
    pub publish_pods: Option<PodsSpec>,
    #[serde(default)]
    pub report_node_internal_ip: bool,
    #[serde(default)]
    pub sources: Vec<SourceSpec>,
    #[serde(default)]
    pub mode: Mode,
    #[serde(default)]
    pub keep_ports: bool,
    #[serde(default)]
    pub on_unresolved: OnUnresolved,
}

/// A field of [`PolicySpec`] that is wrong, and why. Messages use the file's field names; the
/// command line puts its flag names on them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("must not be empty")]
    EmptyName,
    #[error("{0:?}: class names must not be empty")]
    EmptyClass(String),
    #[error("{0:?}: controller names must not be empty")]
    EmptyController(String),
    #[error("one of publishService, publishStatusAddress, publishPods or sources is required")]
    NoSource,
    #[error("{0} and {1} are mutually exclusive; set one, or list both under sources to use their union")]
    BothSources(&'static str, &'static str),
    #[error("must list at least one source")]
    EmptySources,
    #[error(transparent)]
    Service(ServiceRefError),
    #[error(transparent)]
    Static(AddressError),
    #[error("{0:?} is not a valid namespace name (DNS-1123 label)")]
    PodsNamespace(String),
    #[error("must not be empty (it would select every Pod of the namespace)")]
    EmptyPodsSelector,
    #[error(transparent)]
    PodsSelector(SelectorError),
    #[error("applies only to a publishPods source")]
    InternalIpWithoutPods,
    #[error(transparent)]
    NamespaceSelector(SelectorError),
    /// An error in entry `index` of `sources`.
    #[error("{error}")]
    InSource { index: usize, error: Box<SpecError> },
}

impl SpecError {
    /// The field of the policy file at fault.
    pub fn field(&self) -> String {
        match self {
            SpecError::EmptyName => "name".into(),
            SpecError::EmptyClass(_) => "ingressClasses".into(),
            SpecError::EmptyController(_) => "controllerClasses".into(),
            SpecError::NoSource | SpecError::Service(_) => "publishService".into(),
            SpecError::BothSources(first, _) => (*first).into(),
            SpecError::EmptySources => "sources".into(),
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
    /// Validates one source; `internal_ip` is the policy's `reportNodeInternalIp`.
    fn build(self, internal_ip: bool) -> Result<Source, SpecError> {
        let given = [
            ("publishService", self.publish_service.is_some()),
            ("publishStatusAddress", self.publish_status_address.is_some()),
            ("publishPods", self.publish_pods.is_some()),
        ];
        let mut set = given.iter().filter(|(_, on)| *on).map(|(name, _)| *name);
        if let (Some(first), Some(second)) = (set.next(), set.next()) {
            return Err(SpecError::BothSources(first, second));
        }
        if self.publish_pods.is_none() && self.report_node_internal_ip == Some(true) {
            return Err(SpecError::InternalIpWithoutPods);
        }
        if let Some(svc) = self.publish_service {
            return Ok(Source::Service(svc.parse().map_err(SpecError::Service)?));
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
    /// Validates the spec into a policy.
    pub(crate) fn build(self) -> Result<Policy, SpecError> {
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
            report_node_internal_ip: None,
        };
        let has_shorthand = shorthand.publish_service.is_some()
            || shorthand.publish_status_address.is_some()
            || shorthand.publish_pods.is_some();
        let internal_ip = self.report_node_internal_ip;
        let sources = if self.sources.is_empty() {
            if internal_ip && shorthand.publish_pods.is_none() {
                return Err(SpecError::InternalIpWithoutPods);
            }
            vec![shorthand.build(internal_ip)?]
        } else if has_shorthand {
            let first = [
                ("publishService", shorthand.publish_service.is_some()),
                ("publishStatusAddress", shorthand.publish_status_address.is_some()),
                ("publishPods", shorthand.publish_pods.is_some()),
            ]
            .into_iter()
            .find_map(|(name, on)| on.then_some(name))
            .unwrap_or("publishService");
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
            scope: ClassScope {
                classes: self.ingress_classes,
                controllers: self.controller_classes,
                without_class: self.watch_ingress_without_class,
            },
            namespace_selector,
            sources,
            mode: self.mode,
            keep_ports: self.keep_ports,
            on_unresolved: self.on_unresolved,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileConfig {
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

/// Why two class scopes certainly share Ingresses, whatever the cluster holds; `None` when
/// they share none, or only through IngressClasses seen at run time (a class name on one side
/// and its controller on the other, the default class).
fn class_clash(p: &ClassScope, q: &ClassScope) -> Option<String> {
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

/// Two policies must never claim the same Ingress, or which one wins would depend on file
/// order. What can be decided here is refused; what depends on IngressClasses and Namespace
/// labels is counted at run time (the first policy wins).
fn validate_overlaps(policies: &[Policy]) -> Result<(), OverlapError> {
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

#[cfg(test)]
mod tests;
