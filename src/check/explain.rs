//! `explain`: how one Ingress is governed and what the webhook would do with it, from values.

use super::{MAX_CLASS_CHARS, report::Row};
use crate::{
    address::Addresses,
    decision::{Verdict, decide, subject},
    kind::ingress::{CLASS_ANNOTATION, ClassFrom, Stored},
    names::truncate,
    policy::{Policies, Policy, Source, SourceList},
    review::render,
    review::{ApiVersion, Review, Target, User},
    sources::Sources,
    sources::snapshot::{Fetched, Snapshot},
};

/// What `explain` says about one Ingress: labelled lines, and the exit code of its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Explanation {
    pub lines: Vec<(&'static str, String)>,
    pub exit_code: u8,
}

impl Explanation {
    pub(crate) fn text(&self) -> String {
        // As wide as the longest label, "Canonical:", whichever lines there are.
        let width = "Canonical:".len();
        self.lines.iter().map(|(label, value)| format!("{:<width$} {value}\n", format!("{label}:"))).collect()
    }
}

pub(super) fn class_shown(stored: &Stored) -> String {
    let class = |c: &str| format!("{:?}", truncate(c, MAX_CLASS_CHARS, usize::MAX));
    match (&stored.write.class, stored.class_from) {
        (Some(c), ClassFrom::Field) => format!("{} (from spec.ingressClassName)", class(c)),
        (Some(c), _) => format!("{} (from annotation {CLASS_ANNOTATION})", class(c)),
        (None, _) => format!("none (neither spec.ingressClassName nor annotation {CLASS_ANNOTATION} is set)"),
    }
}

pub(super) fn scope_shown(policy: &Policy) -> String {
    let every = policy.scope.classes.is_empty() && policy.scope.controllers.is_empty();
    let mut classes =
        if every { "every class".to_owned() } else { format!("classes {}", policy.scope.classes.join(",")) };
    if !policy.scope.controllers.is_empty() {
        classes.push_str(&format!(" and IngressClasses of controllers {}", policy.scope.controllers.join(",")));
    }
    let without = if every || policy.scope.without_class {
        "and class-less Ingresses"
    } else {
        "and class-less Ingresses only when the default IngressClass is one of them"
    };
    let namespaces =
        policy.namespace_selector.as_ref().map_or_else(String::new, |s| format!(", in Namespaces labelled {s}"));
    format!("{classes} {without}{namespaces}")
}

pub(super) fn resolved_shown(policy: &Policy, snapshot: &Snapshot, sources: &dyn Sources) -> String {
    let rules: Vec<String> = policy
        .sources
        .iter()
        .map(|source| match source {
            Source::Static(_) => "static list of the policy".to_owned(),
            Source::Service(svc) => match snapshot.0.get(svc) {
                Some(Fetched::Found { rule, .. }) => rule.clone(),
                Some(Fetched::Missing) => "Service not found".to_owned(),
                None => "Service not read".to_owned(),
            },
            Source::Pods(_) => "node IPs of the Running and Ready controller Pods".to_owned(),
            Source::Gateway(_) => "the Gateway's status.addresses (IPAddress as ip, Hostname as hostname)".to_owned(),
        })
        .collect();
    let rule = rules.join("; ");
    let ports = if policy.keep_ports { "ports kept" } else { "ports dropped" };
    match sources.canonical(policy) {
        Ok(list) => format!("{} ({rule}; {ports})", Addresses(&list)),
        Err(reason) => format!("unresolved: {reason} ({rule})"),
    }
}

/// What the webhook answers to a write of `stored`'s status: its own [`render`] of the
/// verdict, read back.
pub(super) fn webhook_shown(stored: &Stored, verdict: &Verdict<'_>) -> String {
    let review = Review {
        api_version: ApiVersion::V1,
        uid: "explain".into(),
        dry_run: true,
        user: User::default(),
        target: Target::Ingress(crate::review::Status {
            write: stored.write.clone(),
            object_uid: stored.object_uid.as_deref().map(Into::into),
            shape: stored.shape,
            forged: None,
        }),
    };
    let answer: serde_json::Value =
        serde_json::from_slice(&render(&review, verdict)).expect("render always writes JSON");
    let response = &answer["response"];
    let warnings: Vec<&str> =
        response["warnings"].as_array().into_iter().flatten().filter_map(serde_json::Value::as_str).collect();
    let warned = if warnings.is_empty() { String::new() } else { format!("; warning {:?}", warnings.join("; ")) };
    if response["allowed"] == serde_json::Value::Bool(false) {
        let message = response["status"]["message"].as_str().unwrap_or("");
        return format!("refuse it ({}): {message}", verdict.result());
    }
    let patch = response["patch"].as_str().and_then(|b64| {
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
        String::from_utf8(bytes).ok()
    });
    match patch {
        Some(patch) => format!("rewrite it ({}) with JSON patch {patch}{warned}", verdict.result()),
        None => format!("allow it unchanged ({}){warned}", verdict.result()),
    }
}

/// Explains how the webhook judges `stored`.
pub(crate) fn explain(stored: &Stored, policies: &Policies, snapshot: &Snapshot) -> Explanation {
    let write = &stored.write;
    let verdict = decide(write, policies, snapshot);
    let mut lines = vec![("Ingress", format!("{}/{}", write.namespace, write.name)), ("Class", class_shown(stored))];
    let exit_code = match governing(&verdict) {
        None => {
            let why: Vec<String> =
                policies.iter().map(|p| format!("policy {:?} governs {}", p.name, scope_shown(p))).collect();
            lines.push(("Policy", format!("none: {}", why.join("; "))));
            0
        }
        Some(policy) => {
            lines
                .push(("Policy", format!("{:?} (mode {}; governs {})", policy.name, policy.mode, scope_shown(policy))));
            if let Some(rule) = policy.matches(&subject(write, policies, snapshot)) {
                lines.push(("Rule", format!("governed because {rule}")));
            }
            lines.push(("Source", SourceList(&policy.sources).to_string()));
            lines.push(("Resolved", resolved_shown(policy, snapshot, snapshot)));
            match &verdict {
                Verdict::Canonical { .. } => 0,
                _ => 1,
            }
        }
    };
    lines.push(("Stored", Addresses(&write.addresses).to_string()));
    if let Some(row) = Row::of(write, &verdict, snapshot) {
        lines.push((
            "Canonical",
            row.canonical.as_ref().map_or_else(|| "unknown (source unresolved)".to_owned(), ToString::to_string),
        ));
        lines.push(("State", row.state.as_str().to_owned()));
    }
    lines.push(("Webhook", format!("a write of the stored value: {}", webhook_shown(stored, &verdict))));
    Explanation { lines, exit_code }
}

/// The policy a verdict names, if one governs.
pub(crate) fn governing<'p>(verdict: &Verdict<'p>) -> Option<&'p Policy> {
    match verdict {
        Verdict::Canonical { policy } | Verdict::Mismatch { policy, .. } | Verdict::Unresolved { policy, .. } => {
            Some(*policy)
        }
        Verdict::Ignored(_) | Verdict::NotGoverned => None,
    }
}

/// The `Admission` line: which admission policy in the cluster (`found`:
/// [`super::admission::fetch`]) enforces the governing policy, whose object is named `object`,
/// and whether it carries what the sources give now. Added before the `Webhook` line; a stale
/// one turns the exit code to 1. Not governed: no line.
pub(crate) fn add_admission(
    explanation: &mut Explanation,
    governing: Option<(&Policy, String)>,
    policies: &Policies,
    snapshot: &Snapshot,
    found: &std::collections::BTreeMap<String, super::admission::Found>,
) {
    let Some((_, object)) = governing else { return };
    let rows = super::admission::compare(policies, snapshot, found);
    let line = match rows.iter().find(|r| r.name == object) {
        Some(row) => {
            if row.state == super::admission::State::Stale {
                explanation.exit_code = 1;
            }
            format!("enforced by {} (the API server applies it in process)", row.shown())
        }
        None => format!("no admission policy {object} in the cluster: the webhook enforces (--admission=webhook)"),
    };
    let at = explanation.lines.iter().position(|(label, _)| *label == "Webhook").unwrap_or(explanation.lines.len());
    explanation.lines.insert(at, ("Admission", line));
}
