//! `explain`: how one Ingress or Gateway is governed and what the webhook would do with a write
//! of its stored status, from values, with the webhook's own [`decide`] and [`render`]; what
//! differs by kind is said by its [`Explained`] impl.

pub(super) mod gateway;
mod ingress;
mod service;

use super::{
    Explained,
    report::{LastWriter, State},
};
use crate::{
    address::{Address, Addresses, Written},
    decision::{Verdict, decide, subject},
    policy::{Policies, Policy, Source, SourceList},
    review::render,
    review::{ApiVersion, Review, User},
    sources::Sources,
    sources::snapshot::{Fetched, Snapshot},
};

/// A stored object read as its lean projection: its write, and the shape of its status, so
/// that `explain` shows the patch the webhook would send.
#[derive(Debug, Clone)]
pub(crate) struct Leaned<W, S> {
    pub(crate) write: W,
    pub(crate) shape: S,
}

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

    /// `{"lines": [{"label", "value"}], "exitCode"}`: the same lines, for programs.
    pub(crate) fn json(&self) -> String {
        let lines: Vec<_> =
            self.lines.iter().map(|(label, value)| serde_json::json!({"label": label, "value": value})).collect();
        serde_json::to_string_pretty(&serde_json::json!({"lines": lines, "exitCode": self.exit_code}))
            .expect("strings always serialize")
            + "\n"
    }
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
            Source::Trusted(_) => "the status as its trusted writers wrote it".to_owned(),
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
fn webhook_shown<K: Explained>(stored: &K::Stored, verdict: &Verdict<'_>) -> String {
    let review = Review {
        api_version: ApiVersion::V1,
        uid: "explain".into(),
        dry_run: true,
        user: User::default(),
        target: K::review_target(stored),
        stored_status: None,
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

/// Explains how the webhook judges `stored`; `last_writer` is shown when a trusted-writer
/// policy governs it.
pub(crate) fn explain<K: Explained>(
    stored: &K::Stored,
    last_writer: Option<&LastWriter>,
    policies: &Policies,
    snapshot: &Snapshot,
) -> Explanation {
    let write = K::stored_write(stored);
    let verdict = decide::<K>(write, policies, snapshot);
    let mut lines = vec![
        (K::KIND.name(), format!("{}/{}", write.namespace, write.name)),
        ("Class", K::class_shown(stored, snapshot)),
    ];
    match verdict.policy() {
        None => lines.push(("Policy", format!("none: {}", K::none_shown(policies)))),
        Some(policy) => {
            lines.push(("Policy", format!("{:?} (mode {}{})", policy.name, policy.mode, K::governs_shown(policy))));
            if let Some(rule) = policy.matches(&subject::<K>(write, policies, snapshot)) {
                lines.push(("Rule", format!("governed because {}", K::rule_shown(&rule))));
            }
            lines.push(("Source", SourceList(&policy.sources).to_string()));
            lines.push(("Resolved", resolved_shown(policy, snapshot, snapshot)));
        }
    }
    lines.push(("Stored", Written { kept: &write.addresses, omitted: write.omitted }.to_string()));
    // Canonical lists in the kind's own entries, as the webhook writes them; a canonical
    // write's list in the sources' order (the stored one equals it as a set).
    let shown = |canonical: &[Address]| match K::entries(canonical) {
        Ok(entries) => Addresses(&entries).to_string(),
        Err(_) => Addresses(canonical).to_string(),
    };
    let state = match &verdict {
        Verdict::Canonical { policy } => {
            let canonical =
                snapshot.canonical(policy).map_or_else(|_| Addresses(&write.addresses).to_string(), |c| shown(&c));
            Some((canonical, State::Ok.as_str()))
        }
        Verdict::Trusted { .. } => {
            let writer = last_writer.map_or_else(
                || "unknown (no managedFields entry of the status subresource owns status)".to_owned(),
                ToString::to_string,
            );
            lines.push(("Written by", writer));
            Some(("none: its trusted writers define the status".to_owned(), State::Trusted.as_str()))
        }
        Verdict::Mismatch { canonical, .. } => Some((shown(canonical), State::Drift.as_str())),
        Verdict::Unresolved { .. } => Some(("unknown (source unresolved)".to_owned(), State::Unresolved.as_str())),
        Verdict::Ignored(_) | Verdict::NotGoverned => None,
    };
    match state {
        Some((canonical, state)) => {
            lines.push(("Canonical", canonical));
            lines.push(("State", state.to_owned()));
        }
        None => lines.push(("State", "NOT GOVERNED".to_owned())),
    }
    lines.push(("Webhook", format!("a write of the stored value: {}", webhook_shown::<K>(stored, &verdict))));
    let exit_code = u8::from(matches!(verdict, Verdict::Mismatch { .. } | Verdict::Unresolved { .. }));
    Explanation { lines, exit_code }
}

/// The `Admission` line, before the `Webhook` one: which admission policy in the cluster
/// enforces the governing policy (named `object`), and whether it is current (stale: exit 1).
pub(crate) fn add_admission(
    explanation: &mut Explanation,
    governing: Option<(&Policy, String)>,
    policies: &Policies,
    owner: &crate::admission_policy::desired::Owner,
    snapshot: &Snapshot,
    found: &std::collections::BTreeMap<String, super::admission::Found>,
) {
    let Some((_, object)) = governing else { return };
    let rows = super::admission::compare(policies, owner, snapshot, found);
    let line = match rows.iter().find(|r| r.name == object) {
        Some(row) => {
            if matches!(row.state, super::admission::State::Stale | super::admission::State::Foreign) {
                explanation.exit_code = 1;
            }
            format!("enforced by {} (the API server applies it in process)", row.shown())
        }
        None => format!("no admission policy {object} in the cluster: the webhook enforces (--admission=webhook)"),
    };
    let at = explanation.lines.iter().position(|(label, _)| *label == "Webhook").unwrap_or(explanation.lines.len());
    explanation.lines.insert(at, ("Admission", line));
}
