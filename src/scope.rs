//! The guard's scope, as its own MutatingWebhookConfiguration says: the Namespaces the API
//! server calls the webhook for. The reconciler ([`follow`]) and `check`/`explain` ([`read`])
//! act only there, so they are never wider than admission, and an operator scopes the guard in
//! one place (the webhook's `namespaceSelector`), in the chart and in kustomize alike. With
//! `--admission=policy` there is no webhook configuration: the policies' selectors are the
//! scope, as they are in both modes too (the effective scope is both, ANDed).

pub(crate) mod follow;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::{Api, Client};

use crate::{
    client::{CallError, within},
    policy::{LabelSelector, MAX_SELECTOR_TEXT as MAX_TEXT, SelectorError},
};

/// The configuration the manifests and the chart's default release install.
pub(crate) const DEFAULT_CONFIGURATION: &str = "ingress-status-guard";
/// More webhooks than this in one configuration is not the guard's.
const MAX_WEBHOOKS: usize = 16;

/// Why a webhook configuration gives no scope the guard can honour.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ScopeError {
    #[error("MutatingWebhookConfiguration {name} has no webhooks")]
    NoWebhooks { name: String },
    #[error("MutatingWebhookConfiguration {name} has {count} webhooks, more than the {MAX_WEBHOOKS} the guard reads")]
    TooManyWebhooks { name: String, count: usize },
    #[error("MutatingWebhookConfiguration {name}: webhooks[{index}].namespaceSelector: {source}")]
    Selector { name: String, index: usize, source: SelectorError },
    #[error(
        "MutatingWebhookConfiguration {name}: webhooks[{index}].objectSelector is set, and the reconciler keeps no Ingress labels to stay within it; scope by namespaceSelector"
    )]
    ObjectSelector { name: String, index: usize },
    #[error(
        "MutatingWebhookConfiguration {name}: webhooks[{index}].matchConditions ({condition:?}) is CEL the guard cannot evaluate, so it cannot know where admission runs: the reconciler patches nothing (fail closed); scope by namespaceSelector instead"
    )]
    MatchConditions { name: String, index: usize, condition: String },
}

/// The Namespaces `config` sends reviews for, as one selector: every webhook's
/// `namespaceSelector`, ANDed (so never wider than any of them; an absent or empty one selects
/// every Namespace, as the API server reads it). Empty: every Namespace.
pub(crate) fn selector_of(config: &MutatingWebhookConfiguration) -> Result<LabelSelector, ScopeError> {
    let name = config.metadata.name.clone().unwrap_or_default();
    let webhooks = config.webhooks.as_deref().unwrap_or_default();
    if webhooks.is_empty() {
        return Err(ScopeError::NoWebhooks { name });
    }
    if webhooks.len() > MAX_WEBHOOKS {
        return Err(ScopeError::TooManyWebhooks { name, count: webhooks.len() });
    }
    let mut scope = LabelSelector::default();
    for (index, webhook) in webhooks.iter().enumerate() {
        let empty = |s: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector| {
            s.match_labels.as_ref().is_none_or(std::collections::BTreeMap::is_empty)
                && s.match_expressions.as_ref().is_none_or(Vec::is_empty)
        };
        if webhook.object_selector.as_ref().is_some_and(|s| !empty(s)) {
            return Err(ScopeError::ObjectSelector { name, index });
        }
        // A condition can exclude any write (a namespace, a user, a field): patching where it
        // would exclude is patching where admission never runs. Its name is the caller's text.
        if let Some(first) = webhook.match_conditions.as_deref().and_then(<[_]>::first) {
            let condition = crate::names::truncate(&first.name, 63, 63);
            return Err(ScopeError::MatchConditions { name, index, condition });
        }
        let Some(selector) = webhook.namespace_selector.clone() else { continue };
        let selector = LabelSelector::from_kube(selector).map_err(|source| ScopeError::Selector {
            name: name.clone(),
            index,
            source,
        })?;
        scope = scope.and(&selector);
        // The selector goes to a watch's labelSelector: bounded as a policy's is.
        if scope.to_string().len() > MAX_TEXT {
            return Err(ScopeError::Selector { name, index, source: SelectorError::TooLong });
        }
    }
    Ok(scope)
}

/// Why `check` or `explain` cannot read the scope (`--webhook-configuration`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error(
        "--webhook-configuration {name}: cannot read the MutatingWebhookConfiguration that scopes the reconciler: {source} (pass --webhook-configuration= to judge by the policies' namespaceSelectors alone)"
    )]
    Read { name: String, source: CallError },
    #[error("--webhook-configuration: {0}")]
    Scope(#[from] ScopeError),
}

/// The scope of configuration `name` for a one-shot reader: `None` when there is none to
/// honour (`name` empty, or no such configuration, as in `--admission=policy`) or the reader
/// may not see it (said in one warning).
pub(crate) async fn read(
    client: &Client,
    name: &str,
    timeout: std::time::Duration,
) -> Result<Option<LabelSelector>, ReadError> {
    if name.is_empty() {
        return Ok(None);
    }
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    match within(timeout, api.get_opt(name)).await {
        Ok(Some(config)) => Ok(Some(selector_of(&config)?)),
        Ok(None) => {
            tracing::info!(webhook_configuration = %name, "no such MutatingWebhookConfiguration: the policies' namespaceSelectors alone scope the guard");
            Ok(None)
        }
        // A reader who may not see the scope still gets a report, told what it lacks.
        Err(CallError::Api(kube::Error::Api(status))) if status.code == 403 => {
            tracing::warn!(
                "cannot read MutatingWebhookConfiguration {name} (forbidden): judging by the policies' namespaceSelectors alone, which may be wider than the reconciler's scope; grant get on it, or pass --webhook-configuration="
            );
            Ok(None)
        }
        Err(source) => Err(ReadError::Read { name: name.to_owned(), source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(webhooks: serde_json::Value) -> MutatingWebhookConfiguration {
        serde_json::from_value(json!({"metadata": {"name": "isg"}, "webhooks": webhooks})).unwrap()
    }

    fn hook(extra: serde_json::Value) -> serde_json::Value {
        let mut hook =
            json!({"name": "a.b.c", "clientConfig": {}, "sideEffects": "None", "admissionReviewVersions": ["v1"]});
        hook.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        hook
    }

    fn labels(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn every_webhooks_namespace_selector_scopes_the_guard() {
        // None, or the API server's default `{}`: every Namespace.
        assert!(selector_of(&config(json!([hook(json!({}))]))).unwrap().is_empty());
        let defaulted = hook(json!({"namespaceSelector": {}, "objectSelector": {}}));
        assert!(selector_of(&config(json!([defaulted]))).unwrap().is_empty());
        // Two webhooks: a Namespace is in scope only if both select it.
        let scope = selector_of(&config(json!([
            hook(json!({"namespaceSelector": {"matchLabels": {"team": "edge"}}})),
            hook(json!({"namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]}})),
        ])))
        .unwrap();
        assert!(scope.matches(&labels(&[("team", "edge")])));
        assert!(!scope.matches(&labels(&[("team", "edge"), ("env", "dev")])));
        assert!(!scope.matches(&labels(&[])));
    }

    #[test]
    fn a_configuration_the_guard_cannot_honour_is_an_error_naming_the_field() {
        let cases = [
            (config(json!([])), "has no webhooks"),
            (config(json!(vec![hook(json!({})); MAX_WEBHOOKS + 1])), "17 webhooks"),
            (
                config(json!([hook(json!({"objectSelector": {"matchLabels": {"a": "b"}}}))])),
                "webhooks[0].objectSelector is set",
            ),
            (
                config(json!([hook(json!({"matchConditions": [
                    {"name": "not-kube-system", "expression": "request.namespace != 'kube-system'"}
                ]}))])),
                "webhooks[0].matchConditions (\"not-kube-system\") is CEL the guard cannot evaluate",
            ),
            (
                config(json!([
                    hook(json!({})),
                    hook(json!({"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Gt"}]}}))
                ])),
                "webhooks[1].namespaceSelector: matchExpressions operator \"Gt\"",
            ),
        ];
        for (config, want) in cases {
            let error = selector_of(&config).unwrap_err().to_string();
            assert!(error.contains(want) && error.contains("MutatingWebhookConfiguration isg"), "{error}");
        }
        let values: Vec<String> = (0..1000).map(|i| format!("value-{i}")).collect();
        let long = hook(
            json!({"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "In", "values": values}]}}),
        );
        assert!(selector_of(&config(json!([long]))).unwrap_err().to_string().contains("longer than"));
    }

    #[test]
    fn the_scope_narrows_every_policy() {
        let policies = crate::policy::parse_file(
            "f",
            "policies:\n  - name: open\n    ingressClasses: [a]\n    publishStatusAddress: 192.0.2.1\n  - name: own\n    ingressClasses: [b]\n    namespaceSelector: tier=web\n    publishStatusAddress: 192.0.2.2\n",
        )
        .unwrap();
        let scope = LabelSelector::parse("team=edge").unwrap();
        let narrowed = policies.within(&scope);
        let selectors: Vec<String> =
            narrowed.iter().map(|p| p.namespace_selector.as_ref().unwrap().to_string()).collect();
        assert_eq!(selectors, ["team=edge", "tier=web,team=edge"]);
        assert_eq!(policies.within(&LabelSelector::default()), policies, "an empty scope narrows nothing");
    }
}
