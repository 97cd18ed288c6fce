//! Policies: which Ingresses are governed, where their canonical addresses come from, and what to
//! do about a write that differs. Built and validated once, from flags or a YAML file.

mod selector;
pub(crate) mod spec;
pub(crate) mod store;
mod trusted;

pub(crate) use selector::{LabelSelector, MAX_TEXT as MAX_SELECTOR_TEXT, SelectorError};
pub(crate) use spec::load_file;
pub(crate) use spec::{ConfigError, OverlapError};
pub use spec::{PodsSpec, PolicySpec, SelectorSpec, SourceSpec, SpecError, parse_file};
pub(crate) use trusted::{MAX_IDENTITY, TrustedError, TrustedWriters};

use std::{collections::BTreeMap, fmt};

use serde::Deserialize;

use crate::policy::spec::class_clash;
use crate::policy::spec::validate_overlaps;
use crate::{
    address::{Address, Addresses},
    kind::Kind,
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

/// As the flag spells it.
impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(clap::ValueEnum::to_possible_value(self).expect("no mode is skipped").get_name())
    }
}

/// `namespace/name` of an object a source reads: a publish Service, a publish Gateway.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NamespacedName {
    pub namespace: String,
    pub name: String,
}

/// A publish Service's reference (`publishService`).
pub(crate) type ServiceRef = NamespacedName;
/// A publish Gateway's reference (`publishGateway`): the Ingress → Gateway API cutover source.
pub(crate) type GatewayRef = NamespacedName;

impl fmt::Display for NamespacedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Why a text is not a `NAMESPACE/NAME` reference to the object it names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    #[error("{text:?} must be NAMESPACE/NAME{of}, e.g. {example}")]
    Shape { text: String, of: &'static str, example: &'static str },
    #[error("{text:?}: {part} {value:?} is not a valid Kubernetes name ({rule})")]
    Name { text: String, part: &'static str, value: String, rule: &'static str },
}

impl NamespacedName {
    /// A publish Service's `NAMESPACE/NAME`: both DNS-1123 labels, as a Service's name is.
    pub fn service(text: &str) -> Result<Self, RefError> {
        let label = (names::is_dns1123_label as fn(&str) -> bool, "lowercase letters, digits and '-'");
        Self::parse(text, "", "ingress-nginx/ingress-nginx-controller", label)
    }

    /// A publish Gateway's `NAMESPACE/NAME`: its name a DNS-1123 subdomain, as a custom resource's.
    pub fn gateway(text: &str) -> Result<Self, RefError> {
        let subdomain = (names::is_dns1123_subdomain as fn(&str) -> bool, "lowercase letters, digits, '-' and '.'");
        Self::parse(text, " of a Gateway", "gateway-system/public", subdomain)
    }

    fn parse(
        text: &str,
        of: &'static str,
        example: &'static str,
        (valid_name, rule): (fn(&str) -> bool, &'static str),
    ) -> Result<Self, RefError> {
        let (namespace, name) =
            text.split_once('/').ok_or_else(|| RefError::Shape { text: text.to_owned(), of, example })?;
        let checks = [("namespace", namespace, names::is_dns1123_label(namespace)), ("name", name, valid_name(name))];
        for (part, value, ok) in checks {
            if !ok {
                return Err(RefError::Name { text: text.to_owned(), part, value: value.to_owned(), rule });
            }
        }
        Ok(NamespacedName { namespace: namespace.to_owned(), name: name.to_owned() })
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
    /// What one Pod watch serves (the address kind is applied at lookup, so sources share it).
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
    /// A Gateway's `status.addresses`, read from a watch-fed cache.
    Gateway(GatewayRef),
    /// The identities whose status writes define the status (`trustedWriters`), always a policy's
    /// only source: it resolves to no address.
    Trusted(TrustedWriters),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Static(list) => write!(f, "static [{}]", Addresses(list)),
            Source::Service(svc) => write!(f, "service {svc}"),
            Source::Pods(pods) => pods.fmt(f),
            Source::Gateway(gw) => write!(f, "gateway {gw}"),
            Source::Trusted(writers) => writers.fmt(f),
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
    /// Matched against the Ingress's class ([`crate::kind::ingress::class`]: `spec.ingressClassName`,
    /// else the legacy annotation). Empty, with `controllers` empty too: every Ingress, with or without a class.
    pub classes: Vec<String>,
    /// Matched against the `spec.controller` of the IngressClass the Ingress names.
    pub controllers: Vec<String>,
    /// Also govern Ingresses that name no class.
    pub without_class: bool,
}

/// What the cluster says about one object beyond its write: what class and namespace matching need.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subject<'a> {
    pub namespace: &'a str,
    pub class: Option<&'a str>,
    /// `spec.controller` of the IngressClass named `class`, when it exists.
    pub class_controller: Option<String>,
    /// The default classes ([`crate::kind::ingress::is_default_class`]), each with its controller.
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
    /// The kind of object the policy governs (`kind`).
    pub kind: Kind,
    /// The kind was inferred from Gateway class fields, not named (deprecated; `serve` warns).
    pub kind_inferred: bool,
    pub scope: ClassScope,
    /// Only Ingresses in Namespaces whose labels match (config only).
    pub namespace_selector: Option<LabelSelector>,
    /// Never empty; the canonical set is their union. A [`Source::Trusted`] is always alone.
    pub sources: Vec<Source>,
    pub mode: Mode,
    pub keep_ports: bool,
    pub on_unresolved: OnUnresolved,
}

impl Policy {
    /// The identities whose writes define the status, when that is the policy's source.
    pub fn trusted_writers(&self) -> Option<&TrustedWriters> {
        match &self.sources[..] {
            [Source::Trusted(writers)] => Some(writers),
            _ => None,
        }
    }

    /// Warns, once per load, that the policy's kind was inferred from its Gateway class fields.
    pub(crate) fn warn_if_kind_inferred(&self) {
        if self.kind_inferred {
            tracing::warn!(policy = %self.name, "the policy names Gateway class fields and no kind: it governs Gateways, but a kind inferred from its fields is deprecated; add kind: Gateway");
        }
    }

    /// The rule by which this policy governs `subject`, if it does (never in a Namespace of
    /// unknown labels, under a `namespaceSelector`).
    pub fn matches(&self, subject: &Subject<'_>) -> Option<ClassRule> {
        if let Some(selector) = &self.namespace_selector
            && !subject.namespace_labels.as_ref().is_some_and(|labels| selector.matches(labels))
        {
            return None;
        }
        self.scope.matches(subject)
    }
}

/// The validated set of policies, in file order: the first of an object's kind that matches governs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policies(Vec<Policy>);

impl Policies {
    /// A policy set, refused when two policies of one kind certainly govern the same objects
    /// (policies of two kinds never do).
    pub fn new(policies: Vec<Policy>) -> Result<Self, OverlapError> {
        let policies = Policies(policies);
        for kind in Kind::ALL {
            validate_overlaps(&policies.of(kind).collect::<Vec<_>>())?;
        }
        Ok(policies)
    }

    /// Every policy, of every kind, in file order ([`Policies::of`] for one kind's).
    pub fn iter(&self) -> impl Iterator<Item = &Policy> + Clone {
        self.0.iter()
    }

    /// The policies of `kind`, in file order.
    pub fn of(&self, kind: Kind) -> impl Iterator<Item = &Policy> + Clone {
        self.0.iter().filter(move |p| p.kind == kind)
    }

    /// The policy of `kind` that governs `subject`: the first match in file order.
    pub fn governing(&self, kind: Kind, subject: &Subject<'_>) -> Option<&Policy> {
        self.of(kind).find(|p| p.matches(subject).is_some())
    }

    /// Every policy of `kind` that matches `subject`, in file order (more than one is an overlap).
    pub fn matching(&self, kind: Kind, subject: &Subject<'_>) -> Vec<&Policy> {
        self.of(kind).filter(|p| p.matches(subject).is_some()).collect()
    }

    /// Whether matching objects of `kind` needs their classes read: a policy matches by controller,
    /// or could govern class-less objects through the kind's default class.
    pub fn need_classes(&self, kind: Kind) -> bool {
        let default_class = kind.info().default_class;
        kind.has_class_objects()
            && self.of(kind).any(|p| {
                !p.scope.controllers.is_empty()
                    || (default_class && !p.scope.classes.is_empty() && !p.scope.without_class)
            })
    }

    /// The same policies, each narrowed to its kind's webhook scope ([`crate::scope`]), a union of
    /// selectors (`None`: every Namespace; empty: none): one copy per selector, its own AND that
    /// one, side by side, so the first match still governs. Narrowing all alike cannot make overlaps.
    pub(crate) fn within<'s>(&self, scope: impl Fn(Kind) -> Option<&'s [LabelSelector]>) -> Policies {
        let mut narrowed = Vec::with_capacity(self.0.len());
        for p in &self.0 {
            let narrow = |by: &LabelSelector| Policy {
                namespace_selector: Some(p.namespace_selector.as_ref().map_or_else(|| by.clone(), |own| own.and(by))),
                ..p.clone()
            };
            match scope(p.kind) {
                None => narrowed.push(p.clone()),
                Some([]) => narrowed.push(narrow(&LabelSelector::nothing())),
                Some(any) => narrowed.extend(any.iter().map(narrow)),
            }
        }
        Policies(narrowed)
    }

    /// The same policies with `keepPorts` off, for an API server that cannot store ports.
    pub fn without_ports(self) -> Policies {
        Policies(self.0.into_iter().map(|p| Policy { keep_ports: false, ..p }).collect())
    }

    /// Whether more than one policy of `kind` could match an object at run time.
    pub fn several(&self, kind: Kind) -> bool {
        self.of(kind).nth(1).is_some()
    }

    /// Every distinct publish Service, each to be watched once.
    pub fn services(&self) -> Vec<ServiceRef> {
        self.distinct(|s| if let Source::Service(svc) = s { Some(svc.clone()) } else { None })
    }

    /// Every distinct publish Gateway, each to be watched once.
    pub fn gateways(&self) -> Vec<GatewayRef> {
        self.distinct(|s| if let Source::Gateway(gw) = s { Some(gw.clone()) } else { None })
    }

    /// Every distinct node-IP source's Pod watch (namespace, selector).
    pub fn pod_watches(&self) -> Vec<(String, String)> {
        self.distinct(|s| if let Source::Pods(pods) = s { Some(pods.watch_key()) } else { None })
    }

    /// What `pick` takes from the sources of every policy, sorted, each once.
    fn distinct<T: Ord>(&self, pick: impl FnMut(&Source) -> Option<T>) -> Vec<T> {
        let mut picked: Vec<T> = self.sources().filter_map(pick).collect();
        picked.sort();
        picked.dedup();
        picked
    }

    fn sources(&self) -> impl Iterator<Item = &Source> {
        self.0.iter().flat_map(|p| &p.sources)
    }

    /// Pairs of policies of one kind (earlier, later) that govern a common class in Namespaces whose
    /// selectors are not provably disjoint: an overlap is counted at run time (the earlier wins).
    pub fn possible_overlaps(&self) -> Vec<(&str, &str)> {
        let mut pairs = Vec::new();
        for (i, p) in self.0.iter().enumerate() {
            for q in self.0[..i].iter().filter(|q| q.kind == p.kind) {
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

    /// What the policies read from the cluster beside the governed objects.
    pub(crate) fn cluster_needs(&self) -> ClusterNeeds {
        ClusterNeeds {
            services: !self.services().is_empty(),
            gateways: !self.gateways().is_empty(),
            classes: Kind::ALL.map(|kind| self.need_classes(kind)),
            pods: !self.pod_watches().is_empty(),
            namespaces: self.need_namespaces(),
        }
    }
}

/// What of the cluster a set of policies watches; see [`Policies::cluster_needs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ClusterNeeds {
    /// Publish Services.
    pub(crate) services: bool,
    /// Publish Gateways (the Gateway API).
    pub(crate) gateways: bool,
    /// Each kind's class objects ([`Policies::need_classes`]).
    pub(crate) classes: [bool; Kind::ALL.len()],
    /// Controller Pods and their Nodes.
    pub(crate) pods: bool,
    pub(crate) namespaces: bool,
}

impl ClusterNeeds {
    /// Whether they need a cluster at all.
    pub(crate) fn any(self) -> bool {
        self.services || self.gateways || self.classes.contains(&true) || self.pods || self.namespaces
    }
}

#[cfg(test)]
mod tests;
