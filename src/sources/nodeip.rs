//! The node-IP source: ingress-nginx's fallback when it has no publish Service (`GetNodeIPs`
//! and `runningAddresses`). Pure: the facts kept about Pods and Nodes in, addresses out.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Node, Pod};

use crate::address::{self, Address};

/// What the source needs of one controller Pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PodFacts {
    pub node: Option<String>,
    /// `status.phase` is `Running` and the `Ready` condition is `True`.
    pub running_ready: bool,
}

impl PodFacts {
    pub(crate) fn of(pod: &Pod) -> Self {
        let status = pod.status.as_ref();
        let running = status.and_then(|s| s.phase.as_deref()) == Some("Running");
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty());
        PodFacts { node, running_ready: running && ready }
    }
}

/// What the source keeps of one Node: its addresses by kind, nothing else (a lean cache).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeAddrs {
    /// The Node's `ExternalIP` addresses, in its order.
    pub external: Vec<String>,
    /// Its `InternalIP` addresses.
    pub internal: Vec<String>,
}

impl NodeAddrs {
    /// What is kept of `node`.
    pub fn of(node: &Node) -> Self {
        let mut addrs = NodeAddrs::default();
        for a in node.status.as_ref().and_then(|s| s.addresses.as_ref()).into_iter().flatten() {
            if a.address.is_empty() {
                continue;
            }
            match a.type_.as_str() {
                "ExternalIP" => addrs.external.push(a.address.clone()),
                "InternalIP" => addrs.internal.push(a.address.clone()),
                _ => {}
            }
        }
        addrs
    }
}

/// Why the node-IP source has no address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeIpError {
    #[error("no Running and Ready pod matches")]
    NoReadyPod,
    #[error("{ready} Running and Ready pod(s), but {}", .why.join("; "))]
    NoAddress { ready: usize, why: Vec<String> },
}

/// The canonical addresses of the nodes that run Running and Ready pods: each node's
/// `ExternalIP`s, or its `InternalIP`s when `internal` is set or it has no `ExternalIP`;
/// invalid and empty addresses skipped; de-duplicated and sorted.
pub(crate) fn addresses<'a>(
    pods: impl IntoIterator<Item = &'a PodFacts>,
    nodes: &HashMap<String, NodeAddrs>,
    internal: bool,
) -> Result<Vec<Address>, NodeIpError> {
    let (mut ready, mut why, mut entries) = (0, Vec::new(), Vec::new());
    for pod in pods.into_iter().filter(|p| p.running_ready) {
        ready += 1;
        let Some(node) = &pod.node else {
            why.push("a pod has no node".to_owned());
            continue;
        };
        let Some(addrs) = nodes.get(node) else {
            why.push(format!("node {node} not found"));
            continue;
        };
        let chosen = if internal || addrs.external.is_empty() { &addrs.internal } else { &addrs.external };
        let before = entries.len();
        entries.extend(
            chosen.iter().filter_map(|ip| Address { ip: Some(ip.clone()), ..Default::default() }.sanitized().ok()),
        );
        if entries.len() == before {
            why.push(format!("node {node} has no usable address"));
        }
    }
    if ready == 0 {
        return Err(NodeIpError::NoReadyPod);
    }
    if entries.is_empty() {
        why.sort();
        why.dedup();
        return Err(NodeIpError::NoAddress { ready, why });
    }
    Ok(address::canonicalize(entries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(addresses: &[(&str, &str)]) -> NodeAddrs {
        let list: Vec<_> = addresses.iter().map(|(t, a)| json!({"type": t, "address": a})).collect();
        NodeAddrs::of(&serde_json::from_value(json!({"status": {"addresses": list}})).unwrap())
    }

    fn ready_on(node: &str) -> PodFacts {
        PodFacts { node: Some(node.to_owned()), running_ready: true }
    }

    fn shown(r: Result<Vec<Address>, NodeIpError>) -> Result<Vec<String>, NodeIpError> {
        r.map(|v| v.iter().map(ToString::to_string).collect())
    }

    /// ingress-nginx `internal/k8s/main_test.go` `TestGetNodeIP`, one Ready pod on node
    /// `demo` (or the named node): node missing and empty lists are unresolved here, where
    /// ingress-nginx returns "".
    #[test]
    fn get_node_ip() {
        type Case<'a> = (&'a str, Vec<(&'a str, NodeAddrs)>, &'a str, bool, Result<Vec<&'a str>, ()>);
        let cases: Vec<Case<'_>> = vec![
            ("empty node list", vec![], "demo", true, Err(())),
            ("node does not exist", vec![("demo", node(&[("InternalIP", "10.0.0.1")]))], "notexistnode", true, Err(())),
            (
                "only an internal IP (useInternalIP=false)",
                vec![("demo", node(&[("InternalIP", "10.0.0.1")]))],
                "demo",
                false,
                Ok(vec!["10.0.0.1"]),
            ),
            (
                "only an internal IP",
                vec![("demo", node(&[("InternalIP", "10.0.0.1")]))],
                "demo",
                true,
                Ok(vec!["10.0.0.1"]),
            ),
            (
                "only an external IP",
                vec![("demo", node(&[("ExternalIP", "10.0.0.1")]))],
                "demo",
                false,
                Ok(vec!["10.0.0.1"]),
            ),
            (
                "multiple nodes, the right one",
                vec![("demo1", node(&[("InternalIP", "10.0.0.1")])), ("demo2", node(&[("InternalIP", "10.0.0.2")]))],
                "demo2",
                true,
                Ok(vec!["10.0.0.2"]),
            ),
            (
                "internal and external, external wins",
                vec![("demo", node(&[("InternalIP", "10.0.0.1"), ("ExternalIP", "10.0.0.2")]))],
                "demo",
                false,
                Ok(vec!["10.0.0.2"]),
            ),
            (
                "empty external skipped, internal asked for",
                vec![("demo", node(&[("ExternalIP", ""), ("InternalIP", "10.0.0.2")]))],
                "demo",
                true,
                Ok(vec!["10.0.0.2"]),
            ),
            // Ours, from the rules: every address of the kind, not only the first.
            (
                "all external addresses, dual-stack",
                vec![(
                    "demo",
                    node(&[("ExternalIP", "2001:db8::2"), ("ExternalIP", "203.0.113.2"), ("InternalIP", "10.0.0.1")]),
                )],
                "demo",
                false,
                Ok(vec!["2001:db8::2", "203.0.113.2"]),
            ),
            (
                "internal flag ignores external",
                vec![(
                    "demo",
                    node(&[("ExternalIP", "203.0.113.2"), ("InternalIP", "10.0.0.1"), ("InternalIP", "10.0.0.9")]),
                )],
                "demo",
                true,
                Ok(vec!["10.0.0.1", "10.0.0.9"]),
            ),
            ("hostname only", vec![("demo", node(&[("Hostname", "demo")]))], "demo", false, Err(())),
            ("invalid address skipped", vec![("demo", node(&[("ExternalIP", "not-an-ip")]))], "demo", false, Err(())),
        ];
        for (name, nodes, pod_node, internal, want) in cases {
            let nodes: HashMap<String, NodeAddrs> = nodes.into_iter().map(|(n, a)| (n.to_owned(), a)).collect();
            let got = shown(addresses([&ready_on(pod_node)], &nodes, internal)).map_err(|_| ());
            let want = want.map(|v| v.into_iter().map(String::from).collect());
            assert_eq!(got, want, "case {name}");
        }
    }

    /// ingress-nginx `status_test.go` `TestRunningAddressesWithPods` (its `buildSimpleClientSet`
    /// pods: one Running and Ready pod on `foo_node_2`, one `Unknown` pod on `foo_node_1`),
    /// then rows from the rules.
    #[test]
    fn running_addresses_with_pods() {
        let pod = |v: serde_json::Value| PodFacts::of(&serde_json::from_value(v).unwrap());
        let ready = json!({"spec": {"nodeName": "foo-node-2"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        let unknown = json!({"spec": {"nodeName": "foo-node-1"}, "status": {"phase": "Unknown"}});
        let running_not_ready = json!({"spec": {"nodeName": "foo-node-1"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}});
        let ready_not_running = json!({"spec": {"nodeName": "foo-node-1"},
            "status": {"phase": "Pending", "conditions": [{"type": "Ready", "status": "True"}]}});
        let unscheduled = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        let nodes: HashMap<String, NodeAddrs> = [
            ("foo-node-1".to_owned(), node(&[("InternalIP", "10.0.0.1"), ("ExternalIP", "10.0.0.2")])),
            ("foo-node-2".to_owned(), node(&[("InternalIP", "11.0.0.1"), ("ExternalIP", "11.0.0.2")])),
            ("foo-node-3".to_owned(), node(&[("InternalIP", "12.0.0.1")])),
        ]
        .into();
        let on = |n: &str| {
            let mut p = ready.clone();
            p["spec"]["nodeName"] = json!(n);
            p
        };
        type Case<'a> = (&'a str, Vec<serde_json::Value>, bool, Result<Vec<&'a str>, &'a str>);
        let cases: Vec<Case<'_>> = vec![
            ("ingress-nginx fixture", vec![ready.clone(), unknown.clone()], false, Ok(vec!["11.0.0.2"])),
            ("ingress-nginx fixture, internal", vec![ready.clone(), unknown], true, Ok(vec!["11.0.0.1"])),
            ("not ready excluded", vec![ready.clone(), running_not_ready.clone()], false, Ok(vec!["11.0.0.2"])),
            ("ready but not running excluded", vec![ready_not_running.clone()], false, Err("no Running and Ready pod")),
            ("no pods", vec![], false, Err("no Running and Ready pod")),
            ("only not-ready pods", vec![running_not_ready], false, Err("no Running and Ready pod")),
            ("two pods on one node, deduplicated", vec![ready.clone(), ready.clone()], false, Ok(vec!["11.0.0.2"])),
            (
                "nodes with and without external IPs",
                vec![on("foo-node-1"), on("foo-node-3")],
                false,
                Ok(vec!["10.0.0.2", "12.0.0.1"]),
            ),
            ("pod without node is skipped", vec![unscheduled.clone(), ready.clone()], false, Ok(vec!["11.0.0.2"])),
            ("only a pod without node", vec![unscheduled], false, Err("a pod has no node")),
            ("node not found", vec![on("gone")], false, Err("node gone not found")),
        ];
        for (name, pods, internal, want) in cases {
            let pods: Vec<PodFacts> = pods.into_iter().map(pod).collect();
            match (addresses(&pods, &nodes, internal), want) {
                (Ok(got), Ok(want)) => {
                    assert_eq!(got.iter().map(ToString::to_string).collect::<Vec<_>>(), want, "case {name}");
                }
                (Err(e), Err(want)) => assert!(e.to_string().contains(want), "case {name}: {e}"),
                (got, want) => panic!("case {name}: got {got:?}, want {want:?}"),
            }
        }
    }
}
