//! `explain gateway/NAMESPACE/NAME`: how one Gateway is governed and what the webhook would do
//! with a write of its stored `status.addresses`, from values, with the webhook's own
//! [`decide`] and [`render`].

use super::{explain::Explanation, explain::resolved_shown};
use crate::{
    address::Addresses,
    decision::{Verdict, decide, subject},
    kind::gateway::{GatewayShape, GatewayWrite, GatewayWritten},
    names::truncate,
    policy::{ClassRule, Policies, SourceList},
    review::render,
    review::{ApiVersion, Review, Target, User},
    sources::snapshot::Snapshot,
};

/// Explains how the webhook judges a write of `write` (a Gateway's stored status).
pub(crate) fn explain(write: &GatewayWrite, policies: &Policies, snapshot: &Snapshot) -> Explanation {
    let verdict = decide(write, policies, snapshot);
    let class =
        write.class.as_deref().map_or_else(|| "none".to_owned(), |c| format!("{:?}", truncate(c, 63, usize::MAX)));
    let controller =
        write.class.as_deref().and_then(|c| crate::sources::Sources::gateway_class_controller(snapshot, c));
    let mut lines = vec![
        ("Gateway", format!("{}/{}", write.namespace, write.name)),
        (
            "Class",
            match controller {
                Some(ctl) => format!("{class} (GatewayClass controller {ctl})"),
                None => class,
            },
        ),
    ];
    let policy = super::explain::governing(&verdict);
    let stored = GatewayWritten(write).to_string();
    let (state, canonical) = match &verdict {
        Verdict::Canonical { .. } => ("OK", None),
        Verdict::Mismatch { canonical, .. } => ("DRIFT", Some(Addresses(canonical).to_string())),
        Verdict::Unresolved { .. } => ("UNRESOLVED", None),
        Verdict::Ignored(_) | Verdict::NotGoverned => ("NOT GOVERNED", None),
    };
    match policy {
        None => {
            let why: Vec<String> = policies
                .gateway_policies()
                .map(|p| {
                    format!(
                        "policy {:?} governs gatewayClasses [{}] and gatewayControllers [{}]",
                        p.name,
                        p.scope.classes.join(","),
                        p.scope.controllers.join(",")
                    )
                })
                .collect();
            let why = if why.is_empty() { "no policy governs Gateways".to_owned() } else { why.join("; ") };
            lines.push(("Policy", format!("none: {why}")));
        }
        Some(policy) => {
            lines.push(("Policy", format!("{:?} (mode {})", policy.name, policy.mode)));
            if let Some(rule) = policy.matches(&subject(write, policies, snapshot)) {
                lines.push(("Rule", format!("governed because {}", rule_shown(&rule))));
            }
            lines.push(("Source", SourceList(&policy.sources).to_string()));
            lines.push(("Resolved", resolved_shown(policy, snapshot, snapshot)));
        }
    }
    lines.push(("Stored", stored.clone()));
    if policy.is_some() {
        let canonical = match (&verdict, canonical) {
            (Verdict::Canonical { .. }, _) => stored,
            (_, Some(c)) => c,
            _ => "unknown (source unresolved)".to_owned(),
        };
        lines.push(("Canonical", canonical));
    }
    lines.push(("State", state.to_owned()));
    lines.push(("Webhook", format!("a write of the stored value: {}", webhook_shown(write, &verdict))));
    let exit_code = u8::from(matches!(verdict, Verdict::Mismatch { .. } | Verdict::Unresolved { .. }));
    Explanation { lines, exit_code }
}

/// A class rule in a Gateway policy's terms: the class fields are `gatewayClasses` and
/// `gatewayControllers` (a Gateway always names its class, so the other rules never apply).
fn rule_shown(rule: &ClassRule) -> String {
    match rule {
        ClassRule::ClassName => "its class is in gatewayClasses".to_owned(),
        ClassRule::Controller(c) => format!("its GatewayClass's controller {c} is in gatewayControllers"),
        other => other.to_string(),
    }
}

/// What the webhook answers to a write of `write`: its own [`render`] of the verdict, read back.
fn webhook_shown(write: &GatewayWrite, verdict: &Verdict<'_>) -> String {
    let shape = if write.addresses.is_empty() && write.omitted == 0 {
        GatewayShape::NoAddresses
    } else {
        GatewayShape::Addresses
    };
    let review = Review {
        api_version: ApiVersion::V1,
        uid: "explain".into(),
        dry_run: true,
        user: User::default(),
        target: Target::Gateway(crate::review::Status { write: write.clone(), object_uid: None, shape, forged: None }),
    };
    let answer: serde_json::Value =
        serde_json::from_slice(&render(&review, verdict)).expect("render always writes JSON");
    let response = &answer["response"];
    if response["allowed"] == serde_json::Value::Bool(false) {
        return format!("refuse it ({}): {}", verdict.result(), response["status"]["message"].as_str().unwrap_or(""));
    }
    let patch = response["patch"].as_str().and_then(|b64| {
        use base64::Engine as _;
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b64).ok()?).ok()
    });
    let warning = response["warnings"][0].as_str().map(|w| format!("; warning {w:?}")).unwrap_or_default();
    match patch {
        Some(patch) => format!("rewrite it ({}) with JSON patch {patch}{warning}", verdict.result()),
        None => format!("allow it unchanged ({}){warning}", verdict.result()),
    }
}
