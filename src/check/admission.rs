//! The admission policies in the cluster (`serve --admission=policy`, or a rendered file
//! applied by hand) against what the sources render now: a policy whose value or class
//! condition lags the sources is drift of the enforcement itself. The comparison is pure
//! ([`compare`]); [`fetch`] reads each policy's object by name.

use std::{collections::BTreeMap, time::Duration};

use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind},
};
use serde::Serialize;
use serde_json::Value;

use crate::{
    address::Address,
    admission_policy::{self, ApiVersion},
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
        let state = match self.state {
            State::Current => "CURRENT",
            State::Stale => "STALE",
            State::Unknown => "UNKNOWN",
        };
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

/// Each policy's object found in the cluster, judged against its rendering over `snapshot`,
/// which holds each kind's classes as the keeper's sources would.
pub(crate) fn compare(policies: &Policies, snapshot: &Snapshot, found: &BTreeMap<String, Found>) -> Vec<Row> {
    let mut rows = Vec::new();
    for kind in Kind::ALL {
        let classes = snapshot.classes(kind).unwrap_or_default();
        let governed = admission_policy::governed_in_order(policies, kind, &classes);
        for (policy, governed) in policies.of(kind).zip(&governed) {
            let name = admission_policy::object_name_of(policy);
            let Some(found) = found.get(&name) else { continue };
            let render = |canonical: &[Address]| with_kind!(kind, K => admission_policy::render::<K>(policy, canonical, governed, found.api));
            rows.push(row_of(policy, name, found, snapshot, render));
        }
    }
    rows
}

/// The row of one policy's object `name` found in the cluster, whatever the policy's kind:
/// `render` renders it from a canonical value.
fn row_of<R>(policy: &Policy, name: String, found: &Found, snapshot: &Snapshot, render: R) -> Row
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
    match snapshot.canonical(policy) {
        Ok(canonical) => {
            let rendered = render(&canonical).map(|objects| (objects, canonical.into_owned()));
            judge(policy, found, rendered, row)
        }
        Err(e) => row(State::Unknown, Some(format!("the sources are unresolved: {e}"))),
    }
}

/// The row of one policy's object found in the cluster against its rendering now.
fn judge(
    policy: &Policy,
    found: &Found,
    rendered: Result<(Vec<Value>, Vec<Address>), admission_policy::RenderError>,
    row: impl Fn(State, Option<String>) -> Row,
) -> Row {
    match rendered {
        Ok((objects, canonical)) => match objects.iter().find(|o| o["kind"] == found.kind) {
            Some(object) if ours(&object["spec"]) == ours(&found.spec) => row(State::Current, None),
            Some(_) => row(
                State::Stale,
                Some(format!(
                    "the sources give {} now; re-render it, or run the guard with --admission=policy",
                    crate::address::Addresses(&canonical)
                )),
            ),
            None => row(State::Stale, Some(format!("mode {} renders another kind", policy.mode))),
        },
        Err(e) => row(State::Unknown, Some(e.to_string())),
    }
}

fn resource(kind: &str, api: ApiVersion, plural: &str) -> ApiResource {
    let version = api.group_version().trim_start_matches("admissionregistration.k8s.io/");
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("admissionregistration.k8s.io", version, kind), plural)
}

/// Reads each policy's object by name: a MutatingAdmissionPolicy (v1, else v1beta1), else a
/// ValidatingAdmissionPolicy. Not found, a version not served and no permission to read all
/// count as not there: the cluster may simply run the webhook.
pub(crate) async fn fetch(
    client: &Client,
    policies: &Policies,
    timeout: Duration,
) -> Result<BTreeMap<String, Found>, RequestError> {
    let kinds = [
        ("MutatingAdmissionPolicy", ApiVersion::V1, "mutatingadmissionpolicies"),
        ("MutatingAdmissionPolicy", ApiVersion::V1beta1, "mutatingadmissionpolicies"),
        ("ValidatingAdmissionPolicy", ApiVersion::V1, "validatingadmissionpolicies"),
    ];
    let mut found = BTreeMap::new();
    for policy in policies.all() {
        let name = admission_policy::object_name_of(policy);
        for (kind, api, plural) in kinds {
            let objects: Api<DynamicObject> = Api::all_with(client.clone(), &resource(kind, api, plural));
            let what = || format!("get {kind} {name}");
            match bounded(what, timeout, objects.get_opt(&name)).await {
                Ok(Some(object)) => {
                    let spec = object.data.get("spec").cloned().unwrap_or_default();
                    found.insert(name.clone(), Found { kind, api, spec });
                    break;
                }
                Ok(None) => {}
                Err(e) if matches!(e.code(), Some(404 | 403)) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(found)
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

    fn snapshot(ip: Option<&str>) -> Snapshot {
        with_gateway_classes(ip, Classes::new())
    }

    fn with_gateway_classes(ip: Option<&str>, classes: Classes) -> Snapshot {
        let svc: ServiceRef = "edge/lb".parse().unwrap();
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
        let policy = policies.iter().next().unwrap();
        let governed = admission_policy::governed_in_order(&policies, Kind::Ingress, &Classes::new());
        let rendered = admission_policy::render::<Ingresses>(
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
            "ingress-status-guard-lb".to_owned(),
            Found { kind: "MutatingAdmissionPolicy", api: ApiVersion::V1, spec },
        )]);
        let state = |ip| compare(&policies, &snapshot(ip), &found).iter().map(|r| r.state).collect::<Vec<_>>();
        assert_eq!(state(Some("192.0.2.1")), [State::Current]);
        assert_eq!(state(Some("192.0.2.2")), [State::Stale]);
        assert_eq!(state(None), [State::Unknown]);
        let stale = compare(&policies, &snapshot(Some("192.0.2.2")), &found);
        assert!(stale[0].shown().contains("STALE (the sources give 192.0.2.2 now"), "{}", stale[0].shown());
        assert!(compare(&policies, &snapshot(Some("192.0.2.1")), &BTreeMap::new()).is_empty(), "none: webhook mode");
    }

    #[test]
    fn a_gateway_policy_lags_when_its_classes_or_value_do() {
        let policies = parse_file(
            "t",
            "policies:\n- {name: gw, gatewayControllers: [example.test/gw], publishService: edge/lb}\n",
        )
        .unwrap();
        let policy = policies.gateway_policies().next().unwrap();
        let class = |controller: &str| Class { controller: Some(controller.to_owned()), default: false };
        let classes = Classes::from([("eg".to_owned(), class("example.test/gw"))]);
        let rendered = admission_policy::render::<Gateways>(
            policy,
            &parse_static_list("192.0.2.1").unwrap(),
            &admission_policy::Governed::Classes { names: vec!["eg".to_owned()], without_class: false },
            ApiVersion::V1,
        )
        .unwrap();
        let spec = rendered[0]["spec"].clone();
        let found = BTreeMap::from([(
            "ingress-status-guard-gateway-gw".to_owned(),
            Found { kind: "MutatingAdmissionPolicy", api: ApiVersion::V1, spec },
        )]);
        let state = |ip, classes| {
            let snapshot = with_gateway_classes(Some(ip), classes);
            compare(&policies, &snapshot, &found).iter().map(|r| r.state).collect::<Vec<_>>()
        };
        assert_eq!(state("192.0.2.1", classes.clone()), [State::Current]);
        assert_eq!(state("192.0.2.2", classes.clone()), [State::Stale]);
        let mut more = classes.clone();
        more.insert("eg2".to_owned(), class("example.test/gw"));
        assert_eq!(state("192.0.2.1", more), [State::Stale], "a new class of the controller");
        let rows = compare(&policies, &with_gateway_classes(Some("192.0.2.2"), classes), &found);
        assert_eq!(rows[0].name, "ingress-status-guard-gateway-gw");
    }
}
