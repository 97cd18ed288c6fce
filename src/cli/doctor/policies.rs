//! Policy mode: the guard's admission policies and bindings are present, current and its own,
//! judged with `check`'s reader and the keeper's plan, so doctor, `check` and the guard agree.

use std::{collections::BTreeMap, time::Duration};

use super::report::Finding;
use crate::{
    admission_policy::{desired, served},
    check::admission::{self, Found, Row, State},
    policy::Policies,
    sources::snapshot,
};

const CHECK: &str = "admission-policies";

/// The admission policies of `owner` against the plan the guard would carry out now.
pub(crate) async fn admission_policies(
    client: &kube::Client,
    policies: &Policies,
    owner: &desired::Owner,
    timeout: Duration,
) -> Finding {
    let api = match served::discover(client).await {
        Ok(api) => api,
        Err(e) => {
            let todo = "run the guard in webhook mode on this cluster, or upgrade it (docs/admission-policy.md)";
            return Finding::fail(CHECK, e.to_string(), todo);
        }
    };
    let read = "give doctor an identity that may read the policies' sources and the guard's admission policies (the chart's doctor Role)";
    let sources = match snapshot::read(client, policies, timeout).await {
        Ok(sources) => sources,
        Err(e) => return Finding::fail(CHECK, format!("cannot read the sources: {e}"), read),
    };
    let found = match admission::fetch(client, policies, owner, timeout).await {
        Ok(found) => found,
        Err(e) => return Finding::fail(CHECK, e.to_string(), read),
    };
    let plan = desired::desired(policies, &sources, api, owner);
    let rows = admission::compare(policies, owner, &sources, &found);
    judge(&plan, &rows, &found, owner)
}

/// What the plan, the comparison's rows and the objects found say (pure).
fn judge(plan: &desired::Desired, rows: &[Row], found: &BTreeMap<String, Found>, owner: &desired::Owner) -> Finding {
    let mut wrong: Vec<String> = Vec::new();
    // Present: every object the guard renders now (a binding's absence is the row's to say).
    for object in plan.objects.iter().filter(|o| o["kind"].as_str().is_some_and(|k| !k.ends_with("Binding"))) {
        let (kind, name) = (object["kind"].as_str().unwrap_or_default(), object["metadata"]["name"].as_str());
        let name = name.unwrap_or_default();
        if !found.contains_key(name) {
            let policy = plan.names.iter().find(|(_, n)| n == name).map_or("", |(p, _)| p.as_str());
            wrong.push(format!(
                "{kind} {name} of policy {policy:?} is missing (or doctor may not get it): the API server enforces nothing for the policy"
            ));
        }
    }
    // Current and owned: `check`'s comparison, and the owner label where it is known.
    for row in rows {
        match row.state {
            State::Stale => wrong.push(stale(plan, row, found)),
            State::Foreign => wrong.push(row.shown()),
            State::Current | State::Unknown => {}
        }
        let label = found.get(&row.name).and_then(|f| f.owner.as_deref());
        if !owner.label.is_empty() && label.is_none() && row.state != State::Foreign {
            wrong.push(format!(
                "{} {} of policy {:?} carries no {} label: written by hand, not kept by the guard",
                row.kind,
                row.name,
                row.policy,
                desired::OWNER_LABEL
            ));
        }
    }
    if !wrong.is_empty() {
        return Finding::fail(
            CHECK,
            wrong.join("; "),
            "an object edited by hand is replaced at the guard's next resync (--admission-policy-resync); if it stays, is the guard's leader running (see lease) and may it write them (see permissions)? Another guard's is renamed with another --leader-election-lease-name (chart: release name)",
        );
    }
    let unknown: Vec<String> = rows.iter().filter(|r| r.state == State::Unknown).map(Row::shown).collect();
    let current = rows.iter().filter(|r| r.state == State::Current).count();
    let whose = if owner.label.is_empty() {
        "owner not checked: pass --leader-election-namespace".to_owned()
    } else {
        format!("labelled {}={}", desired::OWNER_LABEL, owner.label)
    };
    let mut said = format!("{current} admission policies and their bindings present and current ({whose})");
    if !unknown.is_empty() {
        said.push_str(&format!("; not judged: {}", unknown.join("; ")));
    }
    if current == 0 && plan.objects.is_empty() {
        return Finding::skip(
            CHECK,
            "no policy renders an admission policy now (their sources are unresolved or not readable)",
            "see `check`",
        );
    }
    Finding::pass(CHECK, said)
}

/// A stale object's line: the field that differs from the guard's rendering, else `check`'s reason.
fn stale(plan: &desired::Desired, row: &Row, found: &BTreeMap<String, Found>) -> String {
    let rendered =
        plan.objects.iter().find(|o| o["kind"] == row.kind.as_str() && o["metadata"]["name"] == row.name.as_str());
    let path = rendered.zip(found.get(&row.name)).and_then(|(o, f)| admission::drift(&o["spec"], &f.spec, "spec"));
    match path {
        Some(path) => format!(
            "{} {} of policy {:?}: STALE: its {path} is not what the guard renders now (edited by hand?)",
            row.kind, row.name, row.policy
        ),
        None => row.shown(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::report::State as Shown;
    use super::*;
    use crate::admission_policy::ApiVersion;

    fn owner() -> desired::Owner {
        desired::Owner::new("isg", "g")
    }

    fn found(label: Option<&str>) -> Found {
        Found {
            kind: "MutatingAdmissionPolicy",
            api: ApiVersion::V1,
            spec: json!({}),
            owner: label.map(str::to_owned),
            binding: Some(json!({})),
        }
    }

    fn row(state: State) -> Row {
        Row {
            policy: "p".into(),
            kind: "MutatingAdmissionPolicy".into(),
            name: "g-p".into(),
            state,
            reason: Some("its spec.matchConditions is not the rendering's".into()),
        }
    }

    fn plan() -> desired::Desired {
        desired::Desired {
            objects: vec![
                json!({"kind": "MutatingAdmissionPolicy", "metadata": {"name": "g-p"}}),
                json!({"kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": "g-p"}}),
            ],
            names: vec![("p".into(), "g-p".into())],
            ..desired::Desired::default()
        }
    }

    #[test]
    fn missing_stale_and_unowned_objects_fail_naming_them() {
        let label = owner().label;
        let ok = BTreeMap::from([("g-p".to_owned(), found(Some(&label)))]);
        assert_eq!(judge(&plan(), &[row(State::Current)], &ok, &owner()).state, Shown::Pass);
        let missing = judge(&plan(), &[], &BTreeMap::new(), &owner());
        assert!(missing.found.contains("MutatingAdmissionPolicy g-p of policy \"p\" is missing"), "{missing:?}");
        let stale = judge(&plan(), &[row(State::Stale)], &ok, &owner());
        assert_eq!(stale.state, Shown::Fail);
        assert!(stale.found.contains("MutatingAdmissionPolicy g-p of policy \"p\": STALE"), "{stale:?}");
        let unowned = BTreeMap::from([("g-p".to_owned(), found(None))]);
        let adopted = judge(&plan(), &[row(State::Current)], &unowned, &owner());
        assert!(adopted.found.contains("carries no ingress-status-guard/lease label"), "{adopted:?}");
        let mut edited = found(Some(&label));
        edited.spec = json!({"matchConditions": [{"name": "by-hand", "expression": "true"}]});
        let mut rendered = plan();
        rendered.objects[0]["spec"] = json!({"matchConditions": []});
        let by_hand = judge(&rendered, &[row(State::Stale)], &BTreeMap::from([("g-p".to_owned(), edited)]), &owner());
        assert!(
            by_hand
                .found
                .contains("g-p of policy \"p\": STALE: its spec.matchConditions is not what the guard renders now"),
            "{by_hand:?}"
        );
        let foreign = judge(&plan(), &[row(State::Foreign)], &ok, &owner());
        assert!(foreign.found.contains("FOREIGN"), "{foreign:?}");
    }
}
