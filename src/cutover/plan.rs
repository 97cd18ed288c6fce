//! The plan of a cutover: which governed Ingresses the new source will move, from what to
//! what, and the hostnames on each (what external-dns will repoint), judged by the webhook's
//! own [`decide`] over the edited policies. Pure, with its table and JSON.

use k8s_openapi::api::networking::v1::Ingress;
use serde::Serialize;

use crate::{
    address::{Address, Addresses},
    check::align,
    decision::{Verdict, decide},
    kind::ingress::{StatusWrite, Stored},
    policy::{Policies, Policy, SourceList},
    scope::Reach,
    sources::Sources,
};

/// external-dns's annotation that adds hostnames to an Ingress's records.
const HOSTNAME_ANNOTATION: &str = "external-dns.alpha.kubernetes.io/hostname";
/// Hostnames kept per Ingress: a table cell, not a dump of whatever the spec holds.
const MAX_HOSTS: usize = 20;
/// Hostnames shown in a table cell; the JSON has all that were kept.
const SHOWN_HOSTS: usize = 3;
/// Out-of-scope Ingresses named in the table; the JSON has them all.
const SHOWN_OUT: usize = 10;

/// What the plan keeps of a stored Ingress: the decision's view, and its hostnames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    pub write: StatusWrite,
    pub hosts: Vec<String>,
}

impl Seen {
    pub(crate) fn of(ingress: &Ingress) -> Seen {
        Seen { write: Stored::of(ingress).write, hosts: hostnames(ingress) }
    }
}

/// The hostnames external-dns publishes for an Ingress: its rules' hosts, its TLS hosts and
/// the hostname annotation's, de-duplicated in that order and bounded.
pub(crate) fn hostnames(ingress: &Ingress) -> Vec<String> {
    let spec = ingress.spec.as_ref();
    let rules = spec.and_then(|s| s.rules.as_ref()).into_iter().flatten().filter_map(|r| r.host.clone());
    let tls = spec.and_then(|s| s.tls.as_ref()).into_iter().flatten().flat_map(|t| t.hosts.clone().unwrap_or_default());
    let annotated = ingress
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(HOSTNAME_ANNOTATION))
        .map(|list| list.split(',').map(|h| h.trim().to_owned()).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut hosts: Vec<String> = Vec::new();
    for host in rules.chain(tls).chain(annotated) {
        if hosts.len() == MAX_HOSTS {
            break;
        }
        let host = crate::names::truncate(&host, 253, 253);
        if !host.is_empty() && !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    hosts
}

/// One Ingress the cutover moves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Move {
    pub namespace: String,
    pub name: String,
    pub from: Vec<Address>,
    pub to: Vec<Address>,
    pub hosts: Vec<String>,
}

impl Move {
    pub(crate) fn key(&self) -> (String, String) {
        (self.namespace.clone(), self.name.clone())
    }
}

/// What the cutover will do to the Ingresses of one policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Plan {
    pub policy: String,
    /// The policy's sources before and after, as logs show them.
    pub from_source: String,
    pub to_source: String,
    /// The new source's canonical addresses; `None` when it is unresolved.
    pub canonical: Option<Vec<Address>>,
    /// Why the new source is unresolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unresolved: Option<String>,
    pub ingresses: Vec<Move>,
    /// Ingresses the policy would move but the guard's scope (its webhook configuration's
    /// namespaceSelector) leaves out: the reconciler never patches them, so they are neither
    /// moved nor waited for.
    pub out_of_scope: Vec<String>,
    pub summary: Summary,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Summary {
    /// Governed by the policy and off the new canonical value: they will move.
    pub moving: usize,
    /// Governed by the policy and already canonical for the new source.
    pub already: usize,
    /// Not governed by the policy (another policy's, or none).
    pub other: usize,
    /// Governed by the policy, off the new value, and outside the guard's scope.
    pub out_of_scope: usize,
}

impl Plan {
    /// Judges every stored Ingress under the edited `policies`, for policy `name`; `from` is
    /// the policy before the edit, `scope` the guard's (`None`: every Namespace).
    pub(crate) fn build(
        stored: &[Seen],
        policies: &Policies,
        sources: &dyn Sources,
        name: &str,
        from: Option<&Policy>,
        scope: Option<&Reach>,
    ) -> Plan {
        let target = policies.of(crate::kind::Kind::Ingress).find(|p| p.name == name);
        let (canonical, unresolved) = match target.map(|p| sources.canonical(p)) {
            Some(Ok(list)) => (Some(list.into_owned()), None),
            Some(Err(reason)) => (None, Some(reason.to_string())),
            None => (None, Some(format!("policy {name:?} is not in the edited file"))),
        };
        let mut plan = Plan {
            policy: name.to_owned(),
            from_source: from.map_or_else(|| "?".to_owned(), |p| SourceList(&p.sources).to_string()),
            to_source: target.map_or_else(|| "?".to_owned(), |p| SourceList(&p.sources).to_string()),
            canonical,
            unresolved,
            ingresses: Vec::new(),
            out_of_scope: Vec::new(),
            summary: Summary::default(),
        };
        // Unknown labels (a Namespace not listed) count as outside: never planned as moving.
        let in_scope = |ns: &str| scope.is_none_or(|s| sources.namespace_labels(ns).is_some_and(|l| s.matches(&l)));
        for seen in stored {
            match decide::<crate::kind::ingress::Ingresses>(&seen.write, policies, sources) {
                Verdict::Mismatch { policy, .. } if policy.name == name && !in_scope(&seen.write.namespace) => {
                    plan.out_of_scope.push(format!("{}/{}", seen.write.namespace, seen.write.name));
                }
                Verdict::Mismatch { policy, canonical, .. } if policy.name == name => plan.ingresses.push(Move {
                    namespace: seen.write.namespace.clone(),
                    name: seen.write.name.clone(),
                    from: seen.write.addresses.clone(),
                    to: canonical.into_owned(),
                    hosts: seen.hosts.clone(),
                }),
                Verdict::Canonical { policy } if policy.name == name => plan.summary.already += 1,
                // The new source unresolved: the plan says so once, as `unresolved`.
                Verdict::Unresolved { policy, .. } if policy.name == name => {}
                _ => plan.summary.other += 1,
            }
        }
        plan.ingresses.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        plan.summary.moving = plan.ingresses.len();
        plan.out_of_scope.sort();
        plan.summary.out_of_scope = plan.out_of_scope.len();
        plan
    }

    /// The summary line of the table.
    pub(crate) fn summary_line(&self) -> String {
        let s = &self.summary;
        let to = match (&self.canonical, &self.unresolved) {
            (Some(list), _) => format!("{} [{}]", self.to_source, Addresses(list)),
            (None, Some(why)) => format!("{} (UNRESOLVED: {why})", self.to_source),
            (None, None) => self.to_source.clone(),
        };
        let outside = match s.out_of_scope {
            0 => String::new(),
            n => format!("; {n} outside the guard's scope (not moved, not waited for)"),
        };
        format!(
            "plan: policy {} moves from {} to {to}: {} Ingresses move, {} already there; {} governed by other policies or none{outside}",
            self.policy, self.from_source, s.moving, s.already, s.other
        )
    }

    /// An aligned table, one line per Ingress that moves, then the summary line.
    pub(crate) fn table(&self) -> String {
        let mut out = String::new();
        if !self.ingresses.is_empty() {
            let header = ["INGRESS", "FROM", "TO", "HOSTS"].map(String::from).to_vec();
            let rows = self.ingresses.iter().map(|m| {
                vec![
                    format!("{}/{}", m.namespace, m.name),
                    Addresses(&m.from).to_string(),
                    Addresses(&m.to).to_string(),
                    hosts_cell(&m.hosts),
                ]
            });
            out = align(std::iter::once(header).chain(rows));
        }
        if !self.out_of_scope.is_empty() {
            let mut names = self.out_of_scope.iter().take(SHOWN_OUT).cloned().collect::<Vec<_>>().join(", ");
            if self.out_of_scope.len() > SHOWN_OUT {
                names.push_str(&format!(" and {} more", self.out_of_scope.len() - SHOWN_OUT));
            }
            out.push_str(&format!(
                "OUT OF SCOPE (the guard's webhook configuration does not select their Namespace; the reconciler leaves them as they are): {names}\n"
            ));
        }
        out.push_str(&self.summary_line());
        out.push('\n');
        out
    }
}

fn hosts_cell(hosts: &[String]) -> String {
    if hosts.is_empty() {
        return "-".to_owned();
    }
    let mut cell = hosts.iter().take(SHOWN_HOSTS).cloned().collect::<Vec<_>>().join(",");
    if hosts.len() > SHOWN_HOSTS {
        cell.push_str(&format!(" +{}", hosts.len() - SHOWN_HOSTS));
    }
    cell
}

/// Why the new source gives no addresses, for the exit-1 message.
pub(crate) fn unresolved_message(plan: &Plan) -> Option<String> {
    plan.unresolved.as_ref().map(|why| format!("the new source of policy {} is unresolved: {why}", plan.policy))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::sources::snapshot::{Fetched, Snapshot};

    fn ingress(ns: &str, name: &str, class: &str, ip: &str) -> Ingress {
        serde_json::from_value(json!({
            "metadata": {"namespace": ns, "name": name,
                "annotations": {HOSTNAME_ANNOTATION: "extra.example.test, web.example.test"}},
            "spec": {"ingressClassName": class, "rules": [{"host": "web.example.test"}, {"host": "www.example.test"}],
                "tls": [{"hosts": ["tls.example.test", "www.example.test"]}]},
            "status": {"loadBalancer": {"ingress": [{"ip": ip}]}}
        }))
        .unwrap()
    }

    fn lb(ip: &str) -> k8s_openapi::api::core::v1::Service {
        serde_json::from_value(json!({
            "metadata": {"namespace": "n", "name": "b"},
            "spec": {"type": "LoadBalancer"},
            "status": {"loadBalancer": {"ingress": [{"ip": ip}]}}
        }))
        .unwrap()
    }

    const FILE: &str = "policies:\n  - name: edge\n    ingressClasses: [nginx]\n    publishService: n/b\n";

    /// Regression: an Ingress outside the guard's scope was planned as moving, then waited
    /// for until `--timeout`: the reconciler never patches it.
    #[test]
    fn ingresses_outside_the_scope_are_shown_as_such_and_not_planned() {
        let policies = crate::policy::parse_file("f", FILE).unwrap();
        let mut facts = crate::sources::snapshot::Facts::default();
        let labels = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        facts.namespaces.insert("shop".into(), labels(&[("team", "edge")]));
        facts.namespaces.insert("blog".into(), labels(&[]));
        let sources = Snapshot(
            BTreeMap::from([(
                crate::policy::ServiceRef::service("n/b").unwrap(),
                Fetched::of(Some(&lb("203.0.113.20"))),
            )]),
            facts,
        );
        let stored: Vec<Seen> = [
            ingress("shop", "web", "nginx", "203.0.113.10"),
            ingress("blog", "www", "nginx", "203.0.113.10"),
            ingress("unlisted", "x", "nginx", "203.0.113.10"),
        ]
        .iter()
        .map(Seen::of)
        .collect();
        let scope = Reach::Any(vec![crate::policy::LabelSelector::parse("team=edge").unwrap()]);
        let plan = Plan::build(&stored, &policies, &sources, "edge", None, Some(&scope));
        let names: Vec<String> = plan.ingresses.iter().map(|m| format!("{}/{}", m.namespace, m.name)).collect();
        assert_eq!(names, ["shop/web"]);
        assert_eq!(plan.out_of_scope, ["blog/www", "unlisted/x"]);
        assert_eq!(plan.summary.out_of_scope, 2);
        let table = plan.table();
        assert!(table.contains("OUT OF SCOPE (the guard's webhook configuration does not select their Namespace; the reconciler leaves them as they are): blog/www, unlisted/x\n"), "{table}");
        assert!(table.ends_with("; 2 outside the guard's scope (not moved, not waited for)\n"), "{table}");
        let all = Plan::build(&stored, &policies, &sources, "edge", None, None);
        assert_eq!((all.ingresses.len(), all.out_of_scope.len()), (3, 0), "no scope: every Namespace");
    }

    #[test]
    fn the_plan_lists_the_ingresses_that_move_with_their_hostnames() {
        let policies = crate::policy::parse_file("f", FILE).unwrap();
        let sources = Snapshot(
            BTreeMap::from([(
                crate::policy::ServiceRef::service("n/b").unwrap(),
                Fetched::of(Some(&lb("203.0.113.20"))),
            )]),
            Default::default(),
        );
        let stored: Vec<Seen> = [
            ingress("shop", "web", "nginx", "203.0.113.10"),
            ingress("blog", "www", "nginx", "203.0.113.10"),
            ingress("shop", "done", "nginx", "203.0.113.20"),
            ingress("shop", "other", "traefik", "203.0.113.10"),
        ]
        .iter()
        .map(Seen::of)
        .collect();
        let plan = Plan::build(&stored, &policies, &sources, "edge", None, None);
        let names: Vec<String> = plan.ingresses.iter().map(|m| format!("{}/{}", m.namespace, m.name)).collect();
        assert_eq!(names, ["blog/www", "shop/web"]);
        assert_eq!(plan.summary, Summary { moving: 2, already: 1, other: 1, out_of_scope: 0 });
        assert_eq!(
            plan.ingresses[0].hosts,
            ["web.example.test", "www.example.test", "tls.example.test", "extra.example.test"]
        );
        let table = plan.table();
        assert!(table.starts_with("INGRESS   FROM          TO            HOSTS\n"), "{table}");
        assert!(
            table.contains(
                "blog/www  203.0.113.10  203.0.113.20  web.example.test,www.example.test,tls.example.test +1\n"
            ),
            "{table}"
        );
        assert!(table.ends_with("plan: policy edge moves from ? to service n/b [203.0.113.20]: 2 Ingresses move, 1 already there; 1 governed by other policies or none\n"), "{table}");
        assert_eq!(unresolved_message(&plan), None);
        let json = serde_json::to_value(&plan).unwrap();
        assert_eq!(json["summary"]["moving"], 2);
        assert_eq!(json["ingresses"][1]["to"], json!([{"ip": "203.0.113.20"}]));
    }

    #[test]
    fn an_unresolved_source_is_named_and_moves_nothing() {
        let policies = crate::policy::parse_file("f", FILE).unwrap();
        let sources = Snapshot(
            BTreeMap::from([(crate::policy::ServiceRef::service("n/b").unwrap(), Fetched::Missing)]),
            Default::default(),
        );
        let stored = vec![Seen::of(&ingress("shop", "web", "nginx", "203.0.113.10"))];
        let plan = Plan::build(&stored, &policies, &sources, "edge", None, None);
        assert!(plan.ingresses.is_empty());
        assert_eq!(
            unresolved_message(&plan).unwrap(),
            "the new source of policy edge is unresolved: Service n/b not found"
        );
        assert!(plan.table().contains("(UNRESOLVED: Service n/b not found)"), "{}", plan.table());
    }

    /// A tenant's hostname annotation is free text: a line break in it stays in its cell, as
    /// an escape, instead of printing a row of its own into the plan.
    #[test]
    fn a_line_break_in_a_tenant_hostname_stays_in_its_cell() {
        let policies = crate::policy::parse_file("f", FILE).unwrap();
        let sources = Snapshot(
            BTreeMap::from([(
                crate::policy::ServiceRef::service("n/b").unwrap(),
                Fetched::of(Some(&lb("203.0.113.20"))),
            )]),
            crate::sources::snapshot::Facts::default(),
        );
        let forged: Ingress = serde_json::from_value(json!({
            "metadata": {"namespace": "shop", "name": "web",
                "annotations": {HOSTNAME_ANNOTATION: "a.example.test\nshop/fake  203.0.113.10  x"}},
            "spec": {"ingressClassName": "nginx"},
            "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}]}}
        }))
        .unwrap();
        let plan = Plan::build(&[Seen::of(&forged)], &policies, &sources, "edge", None, None);
        let table = plan.table();
        assert_eq!(table.lines().count(), 3, "the header, one row and the summary:\n{table}");
        assert!(table.contains("a.example.test\\nshop/fake"), "{table}");
    }

    #[test]
    fn hostnames_are_bounded() {
        let rules: Vec<_> = (0..50).map(|i| json!({"host": format!("h{i}.example.test")})).collect();
        let ing: Ingress =
            serde_json::from_value(json!({"metadata": {"name": "x"}, "spec": {"rules": rules}})).unwrap();
        assert_eq!(hostnames(&ing).len(), MAX_HOSTS);
        assert_eq!(hosts_cell(&hostnames(&ing)), "h0.example.test,h1.example.test,h2.example.test +17");
    }
}
