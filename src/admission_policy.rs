//! Admission policies the API server enforces in process: one policy's canonical addresses
//! rendered as a MutatingAdmissionPolicy (`enforce`) or a ValidatingAdmissionPolicy (`audit`,
//! `deny`), each with its binding. Pure.
//!
//! Both run with `failurePolicy: Fail`: the reason for `Ignore` on a webhook (the guard may be
//! unreachable) does not exist in process, and a write whose expression fails (its cost budget,
//! on a pathological object) must not be stored unchecked.

pub(crate) mod cel;
pub(crate) mod desired;
pub(crate) mod enforced;
mod gateway;
mod ingress;
pub(crate) mod keeper;
pub(crate) mod served;
mod service;
mod trusted;

use serde_json::{Value, json};

use crate::{
    address::Address,
    kind::{Class, Classes, Kind},
    policy::{ClassScope, Mode, Policies, Policy},
    sources::{Sources, Unresolved},
};

/// Which `admissionregistration.k8s.io` version the MutatingAdmissionPolicy is written in:
/// `v1` (GA since Kubernetes 1.36) or `v1beta1` (1.34 and 1.35, behind the
/// `MutatingAdmissionPolicy` feature gate). The ValidatingAdmissionPolicy is `v1` either way
/// (GA since 1.30).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum ApiVersion {
    /// `admissionregistration.k8s.io/v1`.
    #[default]
    V1,
    /// `admissionregistration.k8s.io/v1beta1`.
    V1beta1,
}

impl ApiVersion {
    pub(crate) fn group_version(self) -> &'static str {
        match self {
            ApiVersion::V1 => "admissionregistration.k8s.io/v1",
            ApiVersion::V1beta1 => "admissionregistration.k8s.io/v1beta1",
        }
    }
}

/// A policy's class rules resolved into what CEL can test on the object alone: class names,
/// and whether class-less Ingresses are governed. Controller classes and the default class
/// need the IngressClasses, so this is where they are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Governed {
    /// The policy names no class or controller: every Ingress.
    Everything,
    /// Ingresses of these classes (sorted, no duplicates), and class-less ones if `without_class`.
    Classes { names: Vec<String>, without_class: bool },
}

impl Governed {
    /// The class names and class-less rule `scope` amounts to over `classes`, as
    /// [`ClassScope::matches`] decides: a listed name; a class whose controller is listed; a
    /// class-less Ingress with `watchIngressWithoutClass` or when a default class is governed.
    pub(crate) fn resolve(scope: &ClassScope, classes: &Classes) -> Governed {
        if scope.classes.is_empty() && scope.controllers.is_empty() {
            return Governed::Everything;
        }
        let governs = |(name, class): &(&String, &Class)| {
            scope.classes.contains(name) || class.controller.as_ref().is_some_and(|ctl| scope.controllers.contains(ctl))
        };
        let mut names: Vec<String> = scope.classes.clone();
        names.extend(classes.iter().filter(governs).map(|(name, _)| name.clone()));
        names.sort();
        names.dedup();
        let without_class = scope.without_class || classes.iter().any(|c| c.1.default && governs(&c));
        Governed::Classes { names, without_class }
    }

    /// The class names governed; none for `Everything`.
    pub(crate) fn names(&self) -> &[String] {
        match self {
            Governed::Classes { names, .. } => names,
            Governed::Everything => &[],
        }
    }

    /// What is left of `self` once `earlier` has taken its Ingresses.
    fn excluding(self, earlier: &Governed) -> Governed {
        match (self, earlier) {
            (Governed::Classes { names, without_class }, Governed::Classes { names: taken, without_class: gone }) => {
                Governed::Classes {
                    names: names.into_iter().filter(|n| !taken.contains(n)).collect(),
                    without_class: without_class && !gone,
                }
            }
            (_, Governed::Everything) => Governed::Classes { names: Vec::new(), without_class: false },
            // Refused by the file check (a policy of every class beside another without selectors).
            (Governed::Everything, Governed::Classes { .. }) => Governed::Everything,
        }
    }
}

/// The class rules of every policy, in file order, with what an earlier policy governs taken
/// out of the later ones: the webhook lets the first matching policy govern, while the API
/// server would run every matching admission policy. What an earlier policy without a
/// `namespaceSelector` governs is taken out (it governs every Namespace); after an earlier
/// policy with one, a later one stays whole, since which Namespaces both select is the
/// cluster's to say (as the log at start-up warns).
pub(crate) fn governed_in_order(policies: &Policies, kind: Kind, classes: &Classes) -> Vec<Governed> {
    let mut earlier: Vec<Governed> = Vec::new();
    let mut out = Vec::new();
    for policy in policies.of(kind) {
        let mut governed = Governed::resolve(&policy.scope, classes);
        for before in &earlier {
            governed = governed.excluding(before);
        }
        if policy.namespace_selector.is_none() {
            earlier.push(governed.clone());
        }
        out.push(governed);
    }
    out
}

/// Why a policy cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RenderError {
    /// Unresolved sources are the caller's to report; an empty list would clear statuses.
    #[error("policy {0:?}: no canonical addresses to render")]
    Empty(String),
    #[error(
        "policy {policy:?}: canonical entry {entry} holds one of {:?}, which the admission policy's comparison cannot tell apart",
        SEPARATORS
    )]
    Separator { policy: String, entry: String },
    #[error(
        "policy {policy:?}: {} canonical {} addresses, more than the {} {} may hold",
        too_many.entries, too_many.kind, too_many.max, too_many.kind.field()
    )]
    TooMany { policy: String, too_many: crate::kind::TooMany },
    #[error(
        "policy {policy:?}: the Lease name {lease:?} cannot start its admission objects' names (<lease>-<kind>-<n>, up to <lease>-gateway-15, must be DNS-1123 labels of at most 63 characters: lowercase letters, digits and '-'); give a Lease name (the chart's release fullname) of at most {} such characters",
        MAX_LEASE
    )]
    Name { policy: String, lease: String },
    #[error(
        "policy {policy:?}: it is {kind} policy number {number} of the file, and admission policy mode keeps at most {SLOTS} policies of a kind (their objects are named <lease>-{label}-0 to <lease>-{label}-{}); merge policies, or run another release for the rest",
        SLOTS - 1,
        label = .kind.info().label
    )]
    Slots { policy: String, kind: crate::kind::Kind, number: usize },
    #[error(
        "policy {policy:?}: admission policy mode cannot put {} back yet (trustedWriters); run this policy with --admission=webhook",
        .kind.info().field_of
    )]
    Trusted { policy: String, kind: crate::kind::Kind },
}

/// Separators of an Ingress entry's comparison key (`kind/ingress/admission`'s `key`); a
/// canonical value containing one is refused by the renderer, which is what makes the key
/// injective.
pub(crate) const SEPARATORS: [char; 3] = ['|', ';', '/'];

/// A governed kind's part of its admission objects, said in `admission_policy/<kind>.rs`.
pub(crate) trait Admitted: crate::kind::Governed {
    /// The resources and classes (`governed`) matched, and the CEL that sets or compares the
    /// status list, for a non-empty `canonical`; or why the list cannot be rendered.
    fn admission_shape(policy: &Policy, canonical: &[Address], governed: &Governed) -> Result<Shape, RenderError>;

    /// CEL that rebuilds the status list `list` (read from `oldObject`) entry by entry as
    /// values a JSONPatch can carry: the API server does not marshal a list read from an
    /// object into a patch value (measured on 1.37: "type conversion error from 'list(dyn)'"),
    /// so a trusted-writer policy's MutatingAdmissionPolicy writes the stored list back this
    /// way. `None` (the default): the kind's trusted-writer policies are refused in policy
    /// mode, and the webhook enforces them.
    fn rebuilt(_list: &str) -> Option<String> {
        None
    }
}

/// The objects for one policy of kind `K`, named `name` ([`object_name_in`]): the admission
/// policy, then its binding.
pub(crate) fn render_named<K: Admitted>(
    policy: &Policy,
    canonical: &[Address],
    governed: &Governed,
    api: ApiVersion,
    name: &str,
) -> Result<Vec<Value>, RenderError> {
    if let Some(writers) = policy.trusted_writers() {
        return Ok(objects(policy, name, api, trusted::shape::<K>(policy, writers, governed)?));
    }
    if canonical.is_empty() {
        return Err(RenderError::Empty(policy.name.clone()));
    }
    let shape = K::admission_shape(policy, canonical, governed)?;
    Ok(objects(policy, name, api, shape))
}

/// The value `policy`'s admission objects carry: its canonical addresses, or none for a
/// trusted-writer policy (its objects put the stored status back).
pub(crate) fn value<'p>(
    policy: &'p Policy,
    sources: &dyn Sources,
) -> Result<std::borrow::Cow<'p, [Address]>, Unresolved> {
    match policy.trusted_writers() {
        Some(_) => Ok(std::borrow::Cow::Borrowed(&[])),
        None => sources.canonical(policy),
    }
}

/// `matchConstraints` of the UPDATEs of the status subresource `resource` of `group`, version `v1`.
fn status_updates(group: &str, resource: &str) -> Value {
    let rule = json!({"apiGroups": [group], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": [resource]});
    json!({"resourceRules": [rule]})
}

/// What one kind's admission objects say of its status ([`Admitted::admission_shape`]).
pub(crate) struct Shape {
    /// The resources matched (`matchConstraints`).
    pub(crate) match_constraints: Value,
    /// The CEL conditions of the governed classes (`matchConditions`).
    pub(crate) match_conditions: Value,
    /// `enforce`: the JSONPatch expression that sets the canonical value.
    pub(crate) patch: String,
    /// `audit`, `deny`: the expression of the `written` variable.
    pub(crate) written: &'static str,
    /// `audit`, `deny`: true when the written value is canonical.
    pub(crate) same_set: String,
    /// `audit`, `deny`: what a write that is not is told.
    pub(crate) message: String,
    /// For a kind whose status writes store the metadata they carry: `audit`'s and `deny`'s
    /// condition that it is unchanged. A MutatingAdmissionPolicy cannot put it back: the API
    /// server does not marshal a map read from `oldObject` into a JSONPatch value (measured on
    /// 1.37: "type conversion error from 'map(dyn, dyn)'"), so `enforce` in policy mode
    /// judges by the stored class and leaves the metadata as written.
    pub(crate) metadata_unchanged: Option<&'static str>,
}

/// The admission policy named `name` for `policy`, then its binding, which carries the policy's
/// `namespaceSelector`: one builder for every kind.
pub(crate) fn objects(policy: &Policy, name: &str, api: ApiVersion, shape: Shape) -> Vec<Value> {
    let Shape { match_constraints, match_conditions, patch, written, same_set, message, metadata_unchanged } = shape;
    let mut validations = vec![json!({
        "expression": same_set,
        "message": message,
        // The webhook's refusal is a 403 too: a writer sees one answer.
        "reason": "Forbidden",
    })];
    if let Some(unchanged) = metadata_unchanged {
        validations.push(json!({
            "expression": unchanged,
            "message": format!("ingress-status-guard policy {:?}: a status write may not change metadata", policy.name),
            "reason": "Forbidden",
        }));
    }
    // The name is a slot's (`<lease>-<kind>-<n>`): the annotation says whose policy it holds.
    let metadata = json!({
        "name": name,
        "labels": {"app.kubernetes.io/managed-by": "ingress-status-guard"},
        "annotations": {POLICY_ANNOTATION: policy.name},
    });
    let (group_version, kind, spec, binding_spec) = match policy.mode {
        Mode::Enforce => (
            api.group_version(),
            "MutatingAdmissionPolicy",
            json!({
                "failurePolicy": "Fail",
                // One mutation whose value does not depend on anything another policy or
                // webhook could change: running it again would change nothing.
                "reinvocationPolicy": "Never",
                "matchConstraints": match_constraints,
                "matchConditions": match_conditions,
                "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": patch}}],
            }),
            json!({"policyName": name}),
        ),
        Mode::Audit | Mode::Deny => {
            let actions = if policy.mode == Mode::Deny { json!(["Deny"]) } else { json!(["Warn", "Audit"]) };
            (
                ApiVersion::V1.group_version(),
                "ValidatingAdmissionPolicy",
                json!({
                    "failurePolicy": "Fail",
                    "matchConstraints": match_constraints,
                    "matchConditions": match_conditions,
                    "variables": [{"name": "written", "expression": written}],
                    "validations": validations,
                }),
                json!({"policyName": name, "validationActions": actions}),
            )
        }
    };
    let object =
        |kind: String, spec| json!({"apiVersion": group_version, "kind": kind, "metadata": metadata, "spec": spec});
    let mut binding = object(format!("{kind}Binding"), binding_spec);
    if let Some(selector) = &policy.namespace_selector {
        binding["spec"]["matchResources"] =
            json!({"namespaceSelector": serde_json::to_value(selector.to_kube()).unwrap_or_default()});
    }
    vec![object(kind.to_owned(), spec), binding]
}

/// The leader Lease of a guard run with the defaults (`--leader-election-lease-name`), and of
/// the chart's release `ingress-status-guard`.
pub(crate) const DEFAULT_LEASE: &str = "ingress-status-guard";

/// Admission objects a guard keeps per kind: named `<lease>-<kind>-0` to `<lease>-<kind>-15`
/// whatever its policies are called, so the chart and the kustomize overlay grant a fixed set
/// of names, and renaming a policy never changes a name (under `helm template` there is no
/// lookup to find the old one).
pub(crate) const SLOTS: usize = 16;

/// The annotation that names the policy an admission object holds.
pub(crate) const POLICY_ANNOTATION: &str = "ingress-status-guard/policy";

/// The longest Lease name whose objects are still DNS-1123 labels: `<lease>-gateway-15`.
pub(crate) const MAX_LEASE: usize = 63 - "-gateway-15".len();

/// The name of `policy`'s admission objects: `<lease>-<kind label>-<slot>`, the slot being its
/// place among the file's policies of its kind. Read from the right (the kind label holds no
/// `-`), a name gives back its Lease, kind and slot, so no two share one. A name that is not a
/// DNS-1123 label is refused, never hashed: the chart grants these names
/// (`isg.admissionObjectNames`), and a hash it cannot compute would widen the grant to all.
pub(crate) fn object_name_in(lease: &str, policies: &Policies, policy: &Policy) -> Result<String, RenderError> {
    let label = policy.kind.info().label;
    let slot = policies.of(policy.kind).position(|p| p.name == policy.name);
    let slot = slot.unwrap_or_else(|| policies.of(policy.kind).count());
    if slot >= SLOTS {
        return Err(RenderError::Slots { policy: policy.name.clone(), kind: policy.kind, number: slot + 1 });
    }
    let name = slot_name(lease, label, slot);
    // Every slot's name fits, not only this one's: the chart grants them all.
    if lease.len() <= MAX_LEASE && crate::names::is_dns1123_label(&name) {
        Ok(name)
    } else {
        Err(RenderError::Name { policy: policy.name.clone(), lease: lease.to_owned() })
    }
}

/// The name of slot `slot` of the kind labelled `label` under the Lease `lease`.
pub(crate) fn slot_name(lease: &str, label: &str, slot: usize) -> String {
    format!("{lease}-{label}-{slot}")
}

/// Every name the guard of `lease` may give an admission object, whatever its policies: what
/// the chart and the overlay grant by name.
pub(crate) fn all_slot_names(lease: &str) -> Vec<String> {
    Kind::ALL.iter().flat_map(|kind| (0..SLOTS).map(move |slot| slot_name(lease, kind.info().label, slot))).collect()
}

/// Every policy's object name under the Lease `lease`, in file order, or the first that cannot
/// be named.
pub(crate) fn object_names(policies: &Policies, lease: &str) -> Result<Vec<(String, String)>, RenderError> {
    policies.iter().map(|p| object_name_in(lease, policies, p).map(|name| (p.name.clone(), name))).collect()
}

#[cfg(test)]
pub(crate) mod tests;
