//! The scope of a webhook configuration, per kind: which webhooks count, their union, and
//! what the guard refuses.

use super::*;
use serde_json::json;

fn config(webhooks: serde_json::Value) -> MutatingWebhookConfiguration {
    serde_json::from_value(json!({"metadata": {"name": "isg"}, "webhooks": webhooks})).unwrap()
}

/// The rule of the guard's own webhook for `kind`'s status writes.
fn rule(kind: Kind) -> serde_json::Value {
    json!({"apiGroups": [kind.group()], "apiVersions": [kind.version()], "operations": ["UPDATE"],
           "resources": [format!("{}/status", kind.plural())], "scope": "Namespaced"})
}

/// A webhook called for Ingress status writes, with `extra` fields.
fn hook(extra: serde_json::Value) -> serde_json::Value {
    hook_for(&[Kind::Ingress], extra)
}

fn hook_for(kinds: &[Kind], extra: serde_json::Value) -> serde_json::Value {
    let rules: Vec<_> = kinds.iter().map(|k| rule(*k)).collect();
    let mut hook = json!({"name": "a.b.c", "clientConfig": {}, "sideEffects": "None",
                          "admissionReviewVersions": ["v1"], "rules": rules});
    hook.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    hook
}

fn labels(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn selects(labelled: &[(&str, &str)]) -> serde_json::Value {
    let labels: serde_json::Map<_, _> = labelled.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect();
    json!({"namespaceSelector": {"matchLabels": labels}})
}

#[test]
fn a_webhook_without_a_selector_reviews_every_namespace() {
    // None, or the API server's default `{}`: every Namespace.
    let reaches = reaches_of(&config(json!([hook(json!({}))]))).unwrap();
    assert_eq!(reaches.of(Kind::Ingress), &Reach::Everywhere);
    let defaulted = hook(json!({"namespaceSelector": {}, "objectSelector": {}}));
    assert_eq!(reaches_of(&config(json!([defaulted]))).unwrap().of(Kind::Ingress), &Reach::Everywhere);
    // With one selected, an empty one is still every Namespace.
    let both = config(json!([hook(selects(&[("team", "edge")])), hook(json!({}))]));
    assert_eq!(reaches_of(&both).unwrap().of(Kind::Ingress), &Reach::Everywhere);
}

#[test]
fn a_kinds_scope_is_the_union_of_the_webhooks_that_review_it() {
    let scope = reaches_of(&config(json!([
        hook(selects(&[("team", "edge")])),
        hook(
            json!({"namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]}})
        ),
        hook(selects(&[("team", "edge")])),
    ])))
    .unwrap();
    let ingress = scope.of(Kind::Ingress);
    assert_eq!(ingress.selectors().map(<[_]>::len), Some(2), "the same selector once");
    assert!(ingress.matches(&labels(&[("team", "edge")])));
    assert!(ingress.matches(&labels(&[("env", "prod")])));
    assert!(ingress.matches(&labels(&[("team", "edge"), ("env", "dev")])));
    assert!(!ingress.matches(&labels(&[("team", "web"), ("env", "dev")])));
    assert!(!ingress.matches(&labels(&[])));
}

/// Regression: every webhook's selector was ANDed whatever its rules said, so a
/// Gateway-only webhook narrowed the Ingresses' scope (two disjoint ones: to nothing), and a
/// webhook for neither counted as well.
#[test]
fn a_webhook_counts_only_for_the_kinds_its_rules_cover() {
    let pods =
        json!({"rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]});
    let mut unrelated = selects(&[("never", "x")]);
    unrelated.as_object_mut().unwrap().extend(pods.as_object().unwrap().clone());
    let reaches = reaches_of(&config(json!([
        hook_for(&[Kind::Ingress], selects(&[("zone", "a")])),
        hook_for(&[Kind::Gateway], selects(&[("zone", "b")])),
        hook(unrelated),
    ])))
    .unwrap();
    let (ingress, gateway) = (reaches.of(Kind::Ingress), reaches.of(Kind::Gateway));
    assert!(ingress.matches(&labels(&[("zone", "a")])) && !ingress.matches(&labels(&[("zone", "b")])));
    assert!(gateway.matches(&labels(&[("zone", "b")])) && !gateway.matches(&labels(&[("zone", "a")])));

    // A Gateway-only webhook gives the Ingresses no scope at all: admission never runs there.
    let gateways_only = reaches_of(&config(json!([hook_for(&[Kind::Gateway], json!({}))]))).unwrap();
    assert!(gateways_only.of(Kind::Ingress).is_nowhere());
    assert!(!gateways_only.of(Kind::Ingress).matches(&labels(&[])));
    assert_eq!(gateways_only.of(Kind::Gateway), &Reach::Everywhere);
    // One webhook for both kinds (the chart's, with Gateway policies).
    let both = reaches_of(&config(json!([hook_for(&Kind::ALL, selects(&[("a", "b")]))]))).unwrap();
    assert_eq!(both.of(Kind::Ingress), both.of(Kind::Gateway));
    assert!(!both.of(Kind::Gateway).is_nowhere());
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
                hook_for(
                    &[Kind::Gateway],
                    json!({"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Gt"}]}})
                )
            ])),
            "webhooks[1].namespaceSelector: matchExpressions operator \"Gt\"",
        ),
    ];
    for (config, want) in cases {
        let error = reaches_of(&config).unwrap_err().to_string();
        assert!(error.contains(want) && error.contains("MutatingWebhookConfiguration isg"), "{error}");
    }
    let values: Vec<String> = (0..1000).map(|i| format!("value-{i}")).collect();
    let long =
        hook(json!({"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "In", "values": values}]}}));
    assert!(reaches_of(&config(json!([long]))).unwrap_err().to_string().contains("longer than"));
    // A webhook that reviews no status write of the guard's does not decide where admission
    // runs for them: its conditions and selectors are not the guard's to refuse.
    let other = hook_for(
        &[],
        json!({"objectSelector": {"matchLabels": {"a": "b"}}, "matchConditions": [{"name": "x", "expression": "true"}]}),
    );
    let reaches = reaches_of(&config(json!([other, hook(json!({}))]))).unwrap();
    assert_eq!(reaches.of(Kind::Ingress), &Reach::Everywhere);
}

#[test]
fn the_scope_narrows_every_policy_of_its_kind() {
    let policies = crate::policy::parse_file(
        "f",
        "policies:\n  - name: open\n    ingressClasses: [a]\n    publishStatusAddress: 192.0.2.1\n  - name: own\n    ingressClasses: [b]\n    namespaceSelector: tier=web\n    publishStatusAddress: 192.0.2.2\n  - name: gw\n    gatewayClasses: [g]\n    publishStatusAddress: 192.0.2.3\n",
    )
    .unwrap();
    let reaches = |ingress: Reach, gateway: Reach| Reaches([ingress, gateway, Reach::Any(Vec::new())]);
    let any = |texts: &[&str]| Reach::Any(texts.iter().map(|t| LabelSelector::parse(t).unwrap()).collect());
    let shown = |policies: &Policies| -> Vec<String> {
        Kind::ALL
            .into_iter()
            .flat_map(|kind| policies.of(kind))
            .map(|p| {
                format!("{}:{}", p.name, p.namespace_selector.as_ref().map_or("*".to_owned(), ToString::to_string))
            })
            .collect()
    };
    let one = reaches(any(&["team=edge"]), Reach::Everywhere).narrow(&policies);
    assert_eq!(shown(&one), ["open:team=edge", "own:tier=web,team=edge", "gw:*"]);
    // A union: one copy per selector, side by side, so the first policy still governs.
    let two = reaches(any(&["zone=a", "zone=b"]), any(&["zone=b"])).narrow(&policies);
    assert_eq!(shown(&two), ["open:zone=a", "open:zone=b", "own:tier=web,zone=a", "own:tier=web,zone=b", "gw:zone=b"]);
    // Nowhere: the policy governs no Namespace.
    let nowhere = reaches(Reach::Everywhere, any(&[])).narrow(&policies);
    let gw = nowhere.of(Kind::Gateway).find(|p| p.name == "gw").unwrap().namespace_selector.clone().unwrap();
    assert!(
        !gw.matches(&labels(&[])) && !gw.matches(&labels(&[("ingress-status-guard/no-webhook-reviews-this-kind", "")]))
    );
    assert_eq!(reaches(Reach::Everywhere, Reach::Everywhere).narrow(&policies), policies, "every Namespace: unchanged");
}
