//! Whether the API server calls one webhook for the reconciler's write of one kind (a PATCH of
//! its `status` in the version the guard writes, which admission sees as an UPDATE), as
//! k8s.io/apiserver's admission rule matcher (`predicates/rules`) matches it.

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, RuleWithOperations};

use crate::kind::Kind;

/// Admission sees a PATCH as an UPDATE.
const OPERATION: &str = "UPDATE";
/// The subresource the reconciler writes.
const SUBRESOURCE: &str = "status";

/// `requested` is one of `items`, or `items` has `*`.
fn exact_or_wildcard(items: Option<&[String]>, requested: &str) -> bool {
    items.unwrap_or_default().iter().any(|item| item == "*" || item == requested)
}

/// One rule matches the status write of `kind`: every field does. `resources` entries are
/// `resource/subresource` with `*` on either side; a bare `resource` (and so `*`) names no
/// subresource. A `scope` of `Cluster` excludes a namespaced object; absent is `*`.
///
/// A rule naming another version of the kind is not counted, although `matchPolicy: Equivalent`
/// may have the API server call the webhook through it while that version is served, which the
/// guard does not know: a scope narrower than admission's is the safe side.
fn matches(rule: &RuleWithOperations, kind: Kind) -> bool {
    let resource = rule.resources.as_deref().unwrap_or_default().iter().any(|entry| {
        let (resource, sub) = entry.split_once('/').unwrap_or((entry, ""));
        (resource == "*" || resource == kind.plural()) && (sub == "*" || sub == SUBRESOURCE)
    });
    let scope = rule.scope.as_deref().is_none_or(|scope| scope != "Cluster");
    scope
        && resource
        && exact_or_wildcard(rule.operations.as_deref(), OPERATION)
        && exact_or_wildcard(rule.api_groups.as_deref(), kind.group())
        && exact_or_wildcard(rule.api_versions.as_deref(), kind.version())
}

/// Whether `webhook`'s rules match the reconciler's status write of `kind` (selectors aside).
pub(super) fn calls(webhook: &MutatingWebhook, kind: Kind) -> bool {
    webhook.rules.as_deref().unwrap_or_default().iter().any(|rule| matches(rule, kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(groups: &[&str], versions: &[&str], resources: &[&str], operations: &[&str]) -> serde_json::Value {
        json!({"apiGroups": groups, "apiVersions": versions, "resources": resources, "operations": operations})
    }

    fn hook(rules: &[serde_json::Value]) -> MutatingWebhook {
        serde_json::from_value(json!({
            "name": "a.b.c", "clientConfig": {}, "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "rules": rules,
        }))
        .unwrap()
    }

    /// Which kinds one rule covers.
    fn covered(rule: serde_json::Value) -> Vec<Kind> {
        let webhook = hook(&[rule]);
        Kind::ALL.into_iter().filter(|kind| calls(&webhook, *kind)).collect()
    }

    #[test]
    fn rules_match_as_the_api_server_matches_them() {
        use Kind::{Gateway, Ingress, Service};
        let net = "networking.k8s.io";
        let gw = "gateway.networking.k8s.io";
        let cases: [(serde_json::Value, &[Kind], &str); 22] = [
            (rule(&[net], &["v1"], &["ingresses/status"], &["UPDATE"]), &[Ingress], "the guard's own rule"),
            (rule(&[gw], &["v1"], &["gateways/status"], &["UPDATE"]), &[Gateway], "the Gateway rule"),
            (rule(&["*"], &["*"], &["*/*"], &["*"]), &[Ingress, Gateway, Service], "everything"),
            (rule(&["*"], &["*"], &["*/status"], &["UPDATE"]), &[Ingress, Gateway, Service], "every status"),
            (rule(&[""], &["v1"], &["services/status"], &["UPDATE"]), &[Service], "the Service rule"),
            (rule(&[net], &["v1"], &["ingresses/*"], &["UPDATE"]), &[Ingress], "every subresource of ingresses"),
            (rule(&["*"], &["v1"], &["*"], &["*"]), &[], "`*`: every resource, no subresource"),
            (rule(&[net], &["v1"], &["ingresses"], &["UPDATE"]), &[], "the main resource only"),
            (rule(&[net], &["v1"], &["ingresses/scale"], &["UPDATE"]), &[], "another subresource"),
            (rule(&[net], &["v1"], &["ingressclasses/status"], &["UPDATE"]), &[], "another resource"),
            (rule(&[net], &["v1beta1"], &["ingresses/status"], &["UPDATE"]), &[], "another version"),
            (rule(&["extensions"], &["v1"], &["ingresses/status"], &["UPDATE"]), &[], "another group"),
            (rule(&[""], &["*"], &["pods/*"], &["*"]), &[], "the core group's other resources"),
            (rule(&[net, gw], &["*"], &["*/status"], &["CREATE", "UPDATE"]), &[Ingress, Gateway], "lists"),
            (rule(&[net], &["v1"], &["ingresses/status"], &["CREATE"]), &[], "another operation"),
            (rule(&[net], &["v1"], &["ingresses/status"], &["PATCH"]), &[], "PATCH is not an admission operation"),
            (rule(&[net], &["v1"], &["ingresses/status"], &[]), &[], "no operation"),
            (rule(&[], &["v1"], &["ingresses/status"], &["UPDATE"]), &[], "no group"),
            (
                json!({"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"], "operations": ["*"], "scope": "Namespaced"}),
                &[Ingress, Gateway, Service],
                "Namespaced",
            ),
            (
                json!({"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"], "operations": ["*"], "scope": "*"}),
                &[Ingress, Gateway, Service],
                "all scopes",
            ),
            (
                json!({"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"], "operations": ["*"], "scope": "Cluster"}),
                &[],
                "cluster-scoped only",
            ),
            (json!({"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"]}), &[], "no resources"),
        ];
        for (rule, want, why) in cases {
            assert_eq!(covered(rule.clone()), want, "{why}: {rule}");
        }
    }

    #[test]
    fn any_rule_of_a_webhook_calls_it_and_none_is_no_call() {
        let ingress = rule(&["networking.k8s.io"], &["v1"], &["ingresses/status"], &["UPDATE"]);
        let pods = rule(&[""], &["v1"], &["pods"], &["CREATE"]);
        assert!(calls(&hook(&[pods.clone(), ingress]), Kind::Ingress));
        assert!(!calls(&hook(&[pods]), Kind::Ingress));
        assert!(!calls(&hook(&[]), Kind::Ingress), "no rules: never called");
    }
}
