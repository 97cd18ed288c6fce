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
    admission_policy::{self, ApiVersion, ClassFact},
    client::{RequestError, bounded},
    kind::{gateway::Gateways, ingress::Ingresses},
    policy::{Policies, Policy},
    sources::{Sources, snapshot::Snapshot},
};

/// What is in the cluster under one policy's object name.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Found {
    pub kind: &'static str,
    pub api: ApiVersion,
    pub spec: Value,
    /// For a Gateway policy's object: the GatewayClasses (name → controller) its class names
    /// render from, read beside it; `None` for an Ingress policy's, or when they could not be
    /// read.
    pub gateway_classes: Option<BTreeMap<String, Option<String>>>,
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

/// Each policy's object found in the cluster, judged against its rendering over `snapshot`.
pub(crate) fn compare(policies: &Policies, snapshot: &Snapshot, found: &BTreeMap<String, Found>) -> Vec<Row> {
    let classes: Vec<ClassFact> = (snapshot.1.classes.iter())
        .map(|(name, (controller, default))| ClassFact {
            name: name.clone(),
            controller: (!controller.is_empty()).then(|| controller.clone()),
            default: *default,
        })
        .collect();
    let governed = admission_policy::governed_in_order(policies, &classes);
    let mut rows = Vec::new();
    for (policy, governed) in policies.iter().zip(&governed) {
        let name = admission_policy::object_name_of(policy);
        let Some(found) = found.get(&name) else { continue };
        let render =
            |canonical: &[Address]| admission_policy::render::<Ingresses>(policy, canonical, governed, found.api);
        rows.push(row_of(policy, name, found, snapshot, Ok(render)));
    }
    for policy in policies.gateway_policies() {
        let name = admission_policy::object_name_of(policy);
        let Some(found) = found.get(&name) else { continue };
        // Class names by controller need the GatewayClasses; by name alone, none.
        let classes = match (&found.gateway_classes, policy.scope.controllers.is_empty()) {
            (_, true) => Ok(BTreeMap::new()),
            (Some(classes), false) => Ok(classes.clone()),
            (None, false) => Err("the GatewayClasses could not be read"),
        };
        let render = classes.map(|classes| {
            let governed = admission_policy::Governed::resolve(&policy.scope, &admission_policy::facts(&classes));
            move |canonical: &[Address]| admission_policy::render::<Gateways>(policy, canonical, &governed, found.api)
        });
        rows.push(row_of(policy, name, found, snapshot, render));
    }
    rows
}

/// The row of one policy's object `name` found in the cluster, whatever the policy's kind:
/// `render` renders it from a canonical value, or says why the class facts it needs are
/// unknown.
fn row_of<R>(policy: &Policy, name: String, found: &Found, snapshot: &Snapshot, render: Result<R, &str>) -> Row
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
    let render = match render {
        Ok(render) => render,
        Err(why) => return row(State::Unknown, Some(why.to_owned())),
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
    let mut classes: Option<Option<BTreeMap<String, Option<String>>>> = None;
    for policy in policies.all() {
        let name = admission_policy::object_name_of(policy);
        // A Gateway policy's class names by controller render from the GatewayClasses.
        let of_gateway = policy.kind == crate::kind::Kind::Gateway;
        for (kind, api, plural) in kinds {
            let objects: Api<DynamicObject> = Api::all_with(client.clone(), &resource(kind, api, plural));
            let what = || format!("get {kind} {name}");
            match bounded(what, timeout, objects.get_opt(&name)).await {
                Ok(Some(object)) => {
                    let spec = object.data.get("spec").cloned().unwrap_or_default();
                    let gateway_classes = if of_gateway && policies.need_gateway_classes() {
                        if classes.is_none() {
                            classes = Some(gateway_classes(client, timeout).await);
                        }
                        classes.clone().flatten()
                    } else {
                        None
                    };
                    found.insert(name.clone(), Found { kind, api, spec, gateway_classes });
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

/// GatewayClasses read at most this many: class names in a CEL list, not a dump of a cluster.
const MAX_GATEWAY_CLASSES: u32 = 500;

/// Every GatewayClass with its controller, or `None` when they cannot be read (no CRDs, no
/// permission, a timeout): the row then says so rather than guessing.
async fn gateway_classes(client: &Client, timeout: Duration) -> Option<BTreeMap<String, Option<String>>> {
    let api: Api<crate::kind::gateway::LeanGatewayClass> = Api::all(client.clone());
    let params = kube::api::ListParams::default().limit(MAX_GATEWAY_CLASSES);
    let list = bounded(|| "list GatewayClasses".to_owned(), timeout, api.list(&params)).await.ok()?;
    Some(list.items.into_iter().map(|c| (kube::ResourceExt::name_any(&c), c.controller)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        address::parse_static_list,
        policy::{ServiceRef, parse_file},
        sources::snapshot::{Facts, Fetched},
    };

    fn snapshot(ip: Option<&str>) -> Snapshot {
        let svc: ServiceRef = "edge/lb".parse().unwrap();
        let fetched = match ip {
            None => Fetched::Missing,
            Some(ip) => Fetched::Found { addresses: Ok(parse_static_list(ip).unwrap()), rule: "test".into() },
        };
        Snapshot(BTreeMap::from([(svc, fetched)]), Facts::default())
    }

    #[test]
    fn an_admission_policy_is_current_stale_or_unknown_against_the_sources() {
        let policies =
            parse_file("t", "policies:\n- {name: lb, ingressClasses: [nginx], watchIngressWithoutClass: true, publishService: edge/lb}\n")
                .unwrap();
        let policy = policies.iter().next().unwrap();
        let governed = admission_policy::governed_in_order(&policies, &[]);
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
            Found { kind: "MutatingAdmissionPolicy", api: ApiVersion::V1, spec, gateway_classes: None },
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
        let classes = BTreeMap::from([("eg".to_owned(), Some("example.test/gw".to_owned()))]);
        let rendered = admission_policy::render::<Gateways>(
            policy,
            &parse_static_list("192.0.2.1").unwrap(),
            &admission_policy::Governed::Classes { names: vec!["eg".to_owned()], without_class: false },
            ApiVersion::V1,
        )
        .unwrap();
        let found = |classes: Option<BTreeMap<String, Option<String>>>| {
            let spec = rendered[0]["spec"].clone();
            BTreeMap::from([(
                "ingress-status-guard-gateway-gw".to_owned(),
                Found { kind: "MutatingAdmissionPolicy", api: ApiVersion::V1, spec, gateway_classes: classes },
            )])
        };
        let state = |ip, classes| {
            compare(&policies, &snapshot(Some(ip)), &found(classes)).iter().map(|r| r.state).collect::<Vec<_>>()
        };
        assert_eq!(state("192.0.2.1", Some(classes.clone())), [State::Current]);
        assert_eq!(state("192.0.2.2", Some(classes.clone())), [State::Stale]);
        let mut more = classes.clone();
        more.insert("eg2".to_owned(), Some("example.test/gw".to_owned()));
        assert_eq!(state("192.0.2.1", Some(more)), [State::Stale], "a new class of the controller");
        assert_eq!(state("192.0.2.1", None), [State::Unknown]);
        let rows = compare(&policies, &snapshot(Some("192.0.2.2")), &found(Some(classes)));
        assert_eq!(rows[0].name, "ingress-status-guard-gateway-gw");
    }
}
