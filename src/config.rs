//! Policies: which Ingresses are governed, where their canonical addresses come from, and what to
//! do about a write that differs. Built and validated once, from flags or a YAML file.

use std::{fmt, path::Path, str::FromStr};

use serde::Deserialize;

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

/// Where a policy's canonical addresses come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A fixed list, already canonical.
    Static(Vec<Address>),
    /// The addresses the Service publishes, read from a watch-fed cache.
    Service(ServiceRef),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Static(list) => write!(f, "static [{}]", Addresses(list)),
            Source::Service(svc) => write!(f, "service {svc}"),
        }
    }
}

/// Which Ingresses a policy governs, by class.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassScope {
    /// Matched against `spec.ingressClassName`, else the `kubernetes.io/ingress.class`
    /// annotation. Empty: every Ingress, with or without a class.
    pub classes: Vec<String>,
    /// Also govern Ingresses that name no class.
    pub without_class: bool,
}

impl ClassScope {
    pub fn matches(&self, class: Option<&str>) -> bool {
        match class {
            _ if self.classes.is_empty() => true,
            Some(class) => self.classes.iter().any(|c| c == class),
            None => self.without_class,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub name: String,
    pub scope: ClassScope,
    pub source: Source,
    pub mode: Mode,
    pub keep_ports: bool,
    pub on_unresolved: OnUnresolved,
}

/// The validated set of policies; the first policy whose scope matches an Ingress governs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policies(Vec<Policy>);

impl Policies {
    pub fn new(policies: Vec<Policy>) -> Result<Self, OverlapError> {
        validate_overlaps(&policies)?;
        Ok(Policies(policies))
    }

    pub fn governing(&self, class: Option<&str>) -> Option<&Policy> {
        self.0.iter().find(|p| p.scope.matches(class))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Policy> {
        self.0.iter()
    }

    /// Every distinct publish Service, each to be watched once.
    pub fn services(&self) -> Vec<ServiceRef> {
        let mut refs: Vec<ServiceRef> = self
            .0
            .iter()
            .filter_map(|p| match &p.source {
                Source::Service(svc) => Some(svc.clone()),
                Source::Static(_) => None,
            })
            .collect();
        refs.sort();
        refs.dedup();
        refs
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

/// One policy as written, before validation: a YAML file's entry, or what the flags say.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct PolicySpec {
    pub name: String,
    #[serde(default)]
    pub ingress_classes: Vec<String>,
    #[serde(default)]
    pub watch_ingress_without_class: bool,
    pub publish_service: Option<String>,
    pub publish_status_address: Option<String>,
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
    #[error("one of publishService or publishStatusAddress is required")]
    NoSource,
    #[error("and publishStatusAddress are mutually exclusive; set one")]
    BothSources,
    #[error(transparent)]
    Service(ServiceRefError),
    #[error(transparent)]
    Static(AddressError),
}

impl SpecError {
    /// The field of the policy file at fault.
    pub fn field(&self) -> &'static str {
        match self {
            SpecError::EmptyName => "name",
            SpecError::EmptyClass(_) => "ingressClasses",
            SpecError::NoSource | SpecError::BothSources | SpecError::Service(_) => "publishService",
            SpecError::Static(_) => "publishStatusAddress",
        }
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
        let source = match (self.publish_service, self.publish_status_address) {
            (Some(_), Some(_)) => return Err(SpecError::BothSources),
            (Some(svc), None) => Source::Service(svc.parse().map_err(SpecError::Service)?),
            (None, Some(list)) => Source::Static(address::parse_static_list(&list).map_err(SpecError::Static)?),
            (None, None) => return Err(SpecError::NoSource),
        };
        Ok(Policy {
            name: self.name,
            scope: ClassScope { classes: self.ingress_classes, without_class: self.watch_ingress_without_class },
            source,
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

/// Two policies must never claim the same Ingress, or which one wins would depend on file order.
fn validate_overlaps(policies: &[Policy]) -> Result<(), OverlapError> {
    for (i, p) in policies.iter().enumerate() {
        for q in &policies[..i] {
            let clash = if p.scope.classes.is_empty() || q.scope.classes.is_empty() {
                Some("one of them lists no ingressClasses and so governs every Ingress".to_owned())
            } else if let Some(c) = p.scope.classes.iter().find(|c| q.scope.classes.contains(c)) {
                Some(format!("both govern class {c:?}"))
            } else if p.scope.without_class && q.scope.without_class {
                Some("both set watchIngressWithoutClass".to_owned())
            } else {
                None
            };
            if let Some(why) = clash {
                return Err(OverlapError { first: q.name.clone(), second: p.name.clone(), why });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(classes: &[&str], without_class: bool) -> ClassScope {
        ClassScope { classes: classes.iter().map(std::string::ToString::to_string).collect(), without_class }
    }

    #[test]
    fn class_scope() {
        let cases = [
            ("no classes governs all", scope(&[], false), Some("x"), true),
            ("no classes governs class-less", scope(&[], false), None, true),
            ("listed class", scope(&["nginx"], false), Some("nginx"), true),
            ("other class", scope(&["nginx"], false), Some("traefik"), false),
            ("class-less not governed", scope(&["nginx"], false), None, false),
            ("class-less governed on request", scope(&["nginx"], true), None, true),
            ("without-class does not widen classes", scope(&["nginx"], true), Some("traefik"), false),
        ];
        for (name, scope, class, want) in cases {
            assert_eq!(scope.matches(class), want, "case {name}");
        }
    }

    #[test]
    fn service_refs() {
        assert_eq!("ns/svc".parse::<ServiceRef>().unwrap().to_string(), "ns/svc");
        for bad in ["svc", "/svc", "ns/", "Ns/svc", "ns/svc/x", "n.s/svc"] {
            let err = bad.parse::<ServiceRef>().unwrap_err().to_string();
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
    }

    #[test]
    fn file_policies() {
        let text = r#"
policies:
  - name: public
    ingressClasses: [nginx]
    watchIngressWithoutClass: true
    publishService: ingress-nginx/ingress-nginx-controller
  - name: internal
    ingressClasses: [internal]
    publishStatusAddress: "10.0.0.2, 10.0.0.1,"
    mode: audit
    keepPorts: true
    onUnresolved: deny
"#;
        let policies = parse_file("p.yaml", text).unwrap();
        let public = policies.governing(Some("nginx")).unwrap();
        assert_eq!(public.name, "public");
        assert_eq!(policies.governing(None).unwrap().name, "public");
        let internal = policies.governing(Some("internal")).unwrap();
        assert_eq!(internal.mode, Mode::Audit);
        assert_eq!(internal.on_unresolved, OnUnresolved::Deny);
        assert!(internal.keep_ports);
        assert_eq!(internal.source.to_string(), "static [10.0.0.1,10.0.0.2]");
        assert!(policies.governing(Some("traefik")).is_none());
        assert_eq!(policies.services(), vec!["ingress-nginx/ingress-nginx-controller".parse().unwrap()]);
    }

    #[test]
    fn file_errors_name_the_field() {
        let cases = [
            ("policies: []", "policies: must list at least one policy"),
            (
                "policies: [{name: a}]",
                "policies[0].publishService: one of publishService or publishStatusAddress is required",
            ),
            ("policies: [{name: a, publishService: x}]", "policies[0].publishService: \"x\" must be NAMESPACE/NAME"),
            (
                "policies: [{name: a, publishService: a/b, publishStatusAddress: 1.1.1.1}]",
                "policies[0].publishService: and publishStatusAddress are mutually exclusive",
            ),
            (
                "policies: [{name: a, publishStatusAddress: 'x_y'}]",
                "policies[0].publishStatusAddress: \"x_y\" is neither",
            ),
            ("policies: [{name: a, publishStatusAddress: 1.1.1.1, mode: block}]", "unknown variant `block`"),
            ("policies: [{name: a, publishStatusAddress: 1.1.1.1, classes: [x]}]", "unknown field `classes`"),
            (
                "policies: [{name: a, ingressClasses: [x], publishStatusAddress: 1.1.1.1}, {name: a, ingressClasses: [y], publishStatusAddress: 1.1.1.1}]",
                "policies[1].name: \"a\" is used by an earlier policy",
            ),
            (
                "policies: [{name: a, ingressClasses: [x], publishStatusAddress: 1.1.1.1}, {name: b, ingressClasses: [y, x], publishStatusAddress: 1.1.1.1}]",
                "policies \"a\" and \"b\" overlap: both govern class \"x\"",
            ),
            (
                "policies: [{name: a, publishStatusAddress: 1.1.1.1}, {name: b, ingressClasses: [y], publishStatusAddress: 1.1.1.1}]",
                "governs every Ingress",
            ),
            (
                "policies: [{name: a, ingressClasses: [x], watchIngressWithoutClass: true, publishStatusAddress: 1.1.1.1}, {name: b, ingressClasses: [y], watchIngressWithoutClass: true, publishStatusAddress: 1.1.1.1}]",
                "both set watchIngressWithoutClass",
            ),
        ];
        for (text, want) in cases {
            let err = parse_file("p.yaml", text).unwrap_err().to_string();
            assert!(err.contains(want), "{text}\n  got:  {err}\n  want: {want}");
        }
    }

    #[test]
    fn specs_say_which_field_is_wrong() {
        let spec = |svc: Option<&str>, list: Option<&str>| PolicySpec {
            name: "p".into(),
            publish_service: svc.map(String::from),
            publish_status_address: list.map(String::from),
            ..Default::default()
        };
        assert_eq!(spec(None, None).build().unwrap_err(), SpecError::NoSource);
        assert_eq!(spec(Some("a/b"), Some("1.1.1.1")).build().unwrap_err(), SpecError::BothSources);
        let err = spec(None, Some("1.1.1.1, bad_host")).build().unwrap_err();
        assert_eq!(err.field(), "publishStatusAddress");
        assert!(err.to_string().starts_with("\"bad_host\" is neither"), "{err}");
        assert_eq!(spec(Some("x"), None).build().unwrap_err().field(), "publishService");
        assert_eq!(spec(Some("a/b"), None).build().unwrap().source.to_string(), "service a/b");
        let unnamed = PolicySpec { name: String::new(), ..spec(Some("a/b"), None) };
        assert_eq!(unnamed.build().unwrap_err(), SpecError::EmptyName);
    }
}
