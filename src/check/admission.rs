//! The admission policies in the cluster against what the sources render now: a value or class
//! condition that lags, or a field another writer added, is drift of the enforcement itself.
//! The comparison is pure ([`compare`]); [`fetch`] reads each object and binding by name.

use std::{collections::BTreeMap, time::Duration};

use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject},
};
use serde::Serialize;
use serde_json::Value;

use crate::{
    address::Address,
    admission_policy::{self, ApiVersion, desired::Owner, keeper::resource},
    client::{RequestError, bounded},
    kind::{Kind, with_kind},
    policy::{Policies, Policy},
    sources::{Sources, snapshot::Snapshot},
};

/// What is in the cluster under one policy's object name.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Found {
    pub kind: &'static str,
    pub api: ApiVersion,
    pub spec: Value,
    /// Its `ingress-status-guard/lease` label, if any.
    pub owner: Option<String>,
    /// Its binding's spec; `None` when there is no binding of its name.
    pub binding: Option<Value>,
}

/// How an admission policy in the cluster compares with what the sources render now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum State {
    Current,
    /// Its value or class condition is not what the sources give now.
    Stale,
    /// The sources give nothing to compare with (unresolved).
    Unknown,
    /// Another guard holds it (another owner label): not this guard's to keep.
    Foreign,
}

/// One admission policy in the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Row {
    pub policy: String,
    pub kind: String,
    pub name: String,
    pub state: State,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Row {
    /// One line: `MutatingAdmissionPolicy ingress-status-guard-x: CURRENT (...)`.
    pub(crate) fn shown(&self) -> String {
        // As JSON spells it.
        let state = serde_json::to_value(self.state).unwrap_or_default();
        let state = state.as_str().unwrap_or_default();
        let reason = self.reason.as_ref().map_or_else(String::new, |r| format!(" ({r})"));
        format!("{} {} of policy {:?}: {state}{reason}", self.kind, self.name, self.policy)
    }
}

/// The parts of a spec the canonical value and the class rules live in; the API server fills
/// in defaults elsewhere, which are not ours to compare.
fn ours(spec: &Value) -> [Value; 3] {
    let conditions: Vec<Value> =
        spec["matchConditions"].as_array().into_iter().flatten().map(|c| c["expression"].clone()).collect();
    [
        spec["mutations"][0]["jsonPatch"]["expression"].clone(),
        spec["validations"][0]["expression"].clone(),
        conditions.into(),
    ]
}

/// What the API server fills in when the field `key` is left out: a field the rendering leaves
/// out and the cluster has at this value is not drift.
fn server_default(key: &str) -> Option<Value> {
    match key {
        "matchPolicy" => Some(Value::from("Equivalent")),
        "namespaceSelector" | "objectSelector" => Some(Value::Object(serde_json::Map::new())),
        "scope" => Some(Value::from("*")),
        _ => None,
    }
}

fn empty(v: &Value) -> bool {
    v.is_null() || v.as_object().is_some_and(serde_json::Map::is_empty) || v.as_array().is_some_and(Vec::is_empty)
}

/// Whether the field `key` at `value` is one the API server fills in: empty, a default, or an
/// object of nothing else (a defaulted `matchResources`). Bounded by the value's depth.
fn defaulted(key: &str, value: &Value) -> bool {
    empty(value)
        || server_default(key).as_ref() == Some(value)
        || value.as_object().is_some_and(|o| o.iter().all(|(k, v)| defaulted(k, v)))
}

/// Where `live` differs from `rendered` (a path such as `spec.matchResources`), server
/// defaults and empty values aside. Bounded by the rendering's depth, not the cluster's.
pub(crate) fn drift(rendered: &Value, live: &Value, at: &str) -> Option<String> {
    match (rendered, live) {
        (Value::Object(want), Value::Object(got)) => {
            for (key, value) in want {
                if let Some(path) = drift(value, got.get(key).unwrap_or(&Value::Null), &format!("{at}.{key}")) {
                    return Some(path);
                }
            }
            got.iter()
                .filter(|(key, _)| !want.contains_key(*key))
                .find(|(key, value)| !defaulted(key, value))
                .map(|(key, _)| format!("{at}.{key}"))
        }
        (Value::Array(want), Value::Array(got)) if want.len() == got.len() => {
            want.iter().zip(got).enumerate().find_map(|(i, (w, g))| drift(w, g, &format!("{at}[{i}]")))
        }
        (want, got) if want == got || (empty(want) && empty(got)) => None,
        _ => Some(at.to_owned()),
    }
}

/// Each policy's object found in the cluster, judged against its rendering over `snapshot`;
/// `owner` is the guard whose objects these are (an empty label: whoever's they are).
pub(crate) fn compare(
    policies: &Policies,
    owner: &Owner,
    snapshot: &Snapshot,
    found: &BTreeMap<String, Found>,
) -> Vec<Row> {
    let mut rows = Vec::new();
    for kind in Kind::ALL {
        let classes = snapshot.classes(kind).unwrap_or_default();
        let governed = admission_policy::governed_in_order(policies, kind, &classes);
        for (policy, governed) in policies.of(kind).zip(&governed) {
            let Ok(name) = admission_policy::object_name_in(&owner.lease, policies, policy) else { continue };
            let Some(found) = found.get(&name) else { continue };
            let render = |canonical: &[Address]| with_kind!(kind, K => admission_policy::render_named::<K>(policy, canonical, governed, found.api, &name));
            rows.push(row_of(policy, name.clone(), found, owner, snapshot, render));
        }
    }
    rows
}

/// The row of one policy's object `name`: another guard's, or judged against `render`.
fn row_of<R>(policy: &Policy, name: String, found: &Found, owner: &Owner, snapshot: &Snapshot, render: R) -> Row
where
    R: FnOnce(&[Address]) -> Result<Vec<Value>, admission_policy::RenderError>,
{
    let row = |state, reason: Option<String>| Row {
        policy: policy.name.clone(),
        kind: found.kind.to_owned(),
        name: name.clone(),
        state,
        reason,
    };
    if let Some(other) = owner.other(found.owner.as_deref()).filter(|_| !owner.label.is_empty()) {
        let reason = format!(
            "held by another guard: its ingress-status-guard/lease label is {other:?}, this guard's {:?}",
            owner.label
        );
        return row(State::Foreign, Some(reason));
    }
    let canonical = match admission_policy::value(policy, snapshot) {
        Ok(canonical) => canonical,
        Err(e) => return row(State::Unknown, Some(format!("the sources are unresolved: {e}"))),
    };
    let objects = match render(&canonical) {
        Ok(objects) => objects,
        Err(e) => return row(State::Unknown, Some(e.to_string())),
    };
    match objects.iter().find(|o| o["kind"] == found.kind) {
        Some(object) if ours(&object["spec"]) != ours(&found.spec) => {
            let (want, got) = (ours(&object["spec"]), ours(&found.spec));
            // The value is the same: only the class conditions differ, which a class change
            // or another writer's edit explains, not the sources' addresses.
            let reason = match want[..2] == got[..2] {
                true => "its spec.matchConditions are not the rendering's (the governed classes changed, or another writer edited them); re-render it, or run the guard with --admission=policy".to_owned(),
                false => format!(
                    "the sources give {} now; re-render it, or run the guard with --admission=policy",
                    crate::address::Addresses(&canonical)
                ),
            };
            row(State::Stale, Some(reason))
        }
        Some(object) => {
            let binding = objects.iter().find(|o| o["kind"].as_str().is_some_and(|k| k.ends_with("Binding")));
            let field = drift(&object["spec"], &found.spec, "spec");
            let bound = match (binding, &found.binding) {
                (_, None) => Some("its binding is missing".to_owned()),
                (Some(b), Some(live)) => {
                    drift(&b["spec"], live, "spec").map(|f| format!("its binding's {f} is not the rendering's"))
                }
                (None, Some(_)) => None,
            };
            match field.map(|f| format!("its {f} is not the rendering's")).or(bound) {
                None => row(State::Current, None),
                Some(what) => {
                    row(State::Stale, Some(format!("{what} (another writer's?); the guard's next resync replaces it")))
                }
            }
        }
        None => row(State::Stale, Some(format!("mode {} renders another kind", policy.mode))),
    }
}

/// Reads each policy's object by name (a MutatingAdmissionPolicy, v1 else v1beta1, else a
/// ValidatingAdmissionPolicy) and its binding. Not found, not served and forbidden all count
/// as not there: the cluster may simply run the webhook.
pub(crate) async fn fetch(
    client: &Client,
    policies: &Policies,
    owner: &Owner,
    timeout: Duration,
) -> Result<BTreeMap<String, Found>, RequestError> {
    let kinds = [
        ("MutatingAdmissionPolicy", ApiVersion::V1),
        ("MutatingAdmissionPolicy", ApiVersion::V1beta1),
        ("ValidatingAdmissionPolicy", ApiVersion::V1),
    ];
    let mut found = BTreeMap::new();
    for policy in policies.iter() {
        let Ok(name) = admission_policy::object_name_in(&owner.lease, policies, policy) else { continue };
        for (kind, api) in kinds {
            let of = |kind: &str| resource(kind, api).expect("one of the four admission policy kinds");
            let Some(object) = get(client, &of(kind), &name, timeout).await? else { continue };
            let binding = get(client, &of(&format!("{kind}Binding")), &name, timeout).await?;
            let owner =
                object.metadata.labels.as_ref().and_then(|l| l.get(admission_policy::desired::OWNER_LABEL)).cloned();
            let spec = object.data.get("spec").cloned().unwrap_or_default();
            let binding = binding.map(|b| b.data.get("spec").cloned().unwrap_or_default());
            found.insert(name.clone(), Found { kind, api, spec, owner, binding });
            break;
        }
    }
    Ok(found)
}

/// One object by name, `None` when not found, not served or not readable.
async fn get(
    client: &Client,
    resource: &ApiResource,
    name: &str,
    timeout: Duration,
) -> Result<Option<DynamicObject>, RequestError> {
    let objects: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    match bounded(|| format!("get {} {name}", resource.kind), timeout, objects.get_opt(name)).await {
        Ok(found) => Ok(found),
        Err(e) if matches!(e.code(), Some(404 | 403)) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        address::parse_static_list,
        kind::{Class, Classes, gateway::Gateways, ingress::Ingresses},
        policy::{ServiceRef, parse_file},
        sources::snapshot::{Facts, Fetched},
    };

    fn owner() -> Owner {
        Owner::new("isg", admission_policy::DEFAULT_LEASE)
    }

    fn snapshot(ip: Option<&str>) -> Snapshot {
        with_gateway_classes(ip, Classes::new())
    }

    fn with_gateway_classes(ip: Option<&str>, classes: Classes) -> Snapshot {
        let svc = ServiceRef::service("edge/lb").unwrap();
        let fetched = match ip {
            None => Fetched::Missing,
            Some(ip) => Fetched::Found { addresses: Ok(parse_static_list(ip).unwrap()), rule: "test".into() },
        };
        let mut facts = Facts::default();
        facts.classes[Kind::Gateway.index()] = classes;
        Snapshot(BTreeMap::from([(svc, fetched)]), facts)
    }

    #[test]
    fn an_admission_policy_is_current_stale_or_unknown_against_the_sources() {
        let policies =
            parse_file("t", "policies:\n- {name: lb, ingressClasses: [nginx], watchIngressWithoutClass: true, publishService: edge/lb}\n")
                .unwrap();
        let policy = policies.of(crate::kind::Kind::Ingress).next().unwrap();
        let governed = admission_policy::governed_in_order(&policies, Kind::Ingress, &Classes::new());
        let rendered = admission_policy::tests::render::<Ingresses>(
            policy,
            &parse_static_list("192.0.2.1").unwrap(),
            &governed[0],
            ApiVersion::V1,
        )
        .unwrap();
        // As the API server returns it: with defaults filled in beside ours.
        let mut spec = rendered[0]["spec"].clone();
        spec["matchPolicy"] = "Equivalent".into();
        let found = BTreeMap::from([(
            "ingress-status-guard-ingress-0".to_owned(),
            Found {
                kind: "MutatingAdmissionPolicy",
                api: ApiVersion::V1,
                spec,
                owner: None,
                binding: Some(rendered[1]["spec"].clone()),
            },
        )]);
        let state =
            |ip| compare(&policies, &owner(), &snapshot(ip), &found).iter().map(|r| r.state).collect::<Vec<_>>();
        assert_eq!(state(Some("192.0.2.1")), [State::Current]);
        assert_eq!(state(Some("192.0.2.2")), [State::Stale]);
        assert_eq!(state(None), [State::Unknown]);
        let stale = compare(&policies, &owner(), &snapshot(Some("192.0.2.2")), &found);
        assert!(stale[0].shown().contains("STALE (the sources give 192.0.2.2 now"), "{}", stale[0].shown());
        assert!(
            compare(&policies, &owner(), &snapshot(Some("192.0.2.1")), &BTreeMap::new()).is_empty(),
            "none: webhook mode"
        );

        // Another writer's field, a missing binding, another guard's object.
        let with = |change: &dyn Fn(&mut Found)| {
            let mut found = found.clone();
            change(found.get_mut("ingress-status-guard-ingress-0").unwrap());
            compare(&policies, &owner(), &snapshot(Some("192.0.2.1")), &found).remove(0)
        };
        let defaulted = with(&|f| {
            f.binding.as_mut().unwrap()["matchResources"] =
                serde_json::json!({"matchPolicy": "Equivalent", "objectSelector": {}});
        });
        assert_eq!(defaulted.state, State::Current, "{}", defaulted.shown());
        let selector = serde_json::json!({"namespaceSelector": {"matchLabels": {"team": "x"}}});
        let foreign = with(&|f| f.binding.as_mut().unwrap()["matchResources"] = selector.clone());
        assert_eq!(foreign.state, State::Stale);
        assert!(
            foreign.shown().contains("its binding's spec.matchResources is not the rendering's"),
            "{}",
            foreign.shown()
        );
        let added = with(&|f| f.spec["variables"] = serde_json::json!([{"name": "x", "expression": "1"}]));
        assert!(added.shown().contains("its spec.variables is not the rendering's"), "{}", added.shown());
        let conditions = with(&|f| f.spec["matchConditions"][0]["expression"] = "true".into());
        assert_eq!(conditions.state, State::Stale);
        assert!(
            conditions.shown().contains("its spec.matchConditions are not the rendering's"),
            "{}",
            conditions.shown()
        );
        assert!(!conditions.shown().contains("the sources give"), "the value is current: {}", conditions.shown());
        let unbound = with(&|f| f.binding = None);
        assert!(unbound.shown().contains("its binding is missing"), "{}", unbound.shown());
        let held = with(&|f| f.owner = Some("other.ingress-status-guard".into()));
        assert_eq!(held.state, State::Foreign);
        assert!(held.shown().contains("FOREIGN (held by another guard"), "{}", held.shown());
        assert_eq!(with(&|f| f.owner = Some("isg.ingress-status-guard".into())).state, State::Current, "its own");
    }

    #[test]
    fn a_gateway_policy_lags_when_its_classes_or_value_do() {
        let policies = parse_file(
            "t",
            "policies:\n- {name: gw, gatewayControllers: [example.test/gw], publishService: edge/lb}\n",
        )
        .unwrap();
        let policy = policies.of(crate::kind::Kind::Gateway).next().unwrap();
        let class = |controller: &str| Class { controller: Some(controller.to_owned()), default: false };
        let classes = Classes::from([("eg".to_owned(), class("example.test/gw"))]);
        let rendered = admission_policy::tests::render::<Gateways>(
            policy,
            &parse_static_list("192.0.2.1").unwrap(),
            &admission_policy::Governed::Classes { names: vec!["eg".to_owned()], without_class: false },
            ApiVersion::V1,
        )
        .unwrap();
        let spec = rendered[0]["spec"].clone();
        let found = BTreeMap::from([(
            "ingress-status-guard-gateway-0".to_owned(),
            Found {
                kind: "MutatingAdmissionPolicy",
                api: ApiVersion::V1,
                spec,
                owner: None,
                binding: Some(rendered[1]["spec"].clone()),
            },
        )]);
        let state = |ip, classes| {
            let snapshot = with_gateway_classes(Some(ip), classes);
            compare(&policies, &owner(), &snapshot, &found).iter().map(|r| r.state).collect::<Vec<_>>()
        };
        assert_eq!(state("192.0.2.1", classes.clone()), [State::Current]);
        assert_eq!(state("192.0.2.2", classes.clone()), [State::Stale]);
        let mut more = classes.clone();
        more.insert("eg2".to_owned(), class("example.test/gw"));
        assert_eq!(state("192.0.2.1", more), [State::Stale], "a new class of the controller");
        let rows = compare(&policies, &owner(), &with_gateway_classes(Some("192.0.2.2"), classes), &found);
        assert_eq!(rows[0].name, "ingress-status-guard-gateway-0");
    }
}
