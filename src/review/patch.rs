//! The JSON patch (RFC 6902) that sets `status.loadBalancer.ingress`, shaped so that it applies to
//! the object exactly as the API server sent it, whichever parents are absent.

use serde::Serialize;

use crate::{address::Address, kind::ingress::StatusShape};

/// The patch that makes `status.loadBalancer.ingress` equal `canonical`, one operation,
/// serialized straight into `out` without building values (the handler writes it through a
/// base64 encoder into the response).
///
/// `add` onto an existing member replaces it (RFC 6902 section 4.1), so `add` at the deepest
/// parent that exists is right whether the member below is absent or `null`; `replace` is used
/// when the list is there, so the API server's audit log reads as a replacement.
pub(crate) fn write(shape: StatusShape, canonical: &[Address], out: impl std::io::Write) -> serde_json::Result<()> {
    #[derive(Serialize)]
    struct Op<V> {
        op: &'static str,
        path: &'static str,
        value: V,
    }
    #[derive(Serialize)]
    struct LoadBalancer<'a> {
        ingress: &'a [Address],
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Status<'a> {
        load_balancer: LoadBalancer<'a>,
    }
    let lb = LoadBalancer { ingress: canonical };
    match shape {
        StatusShape::NoStatus => {
            serde_json::to_writer(out, &[Op { op: "add", path: "/status", value: Status { load_balancer: lb } }])
        }
        StatusShape::NoLoadBalancer => {
            serde_json::to_writer(out, &[Op { op: "add", path: "/status/loadBalancer", value: lb }])
        }
        StatusShape::NoIngressList => {
            serde_json::to_writer(out, &[Op { op: "add", path: "/status/loadBalancer/ingress", value: canonical }])
        }
        StatusShape::IngressList => {
            serde_json::to_writer(out, &[Op { op: "replace", path: "/status/loadBalancer/ingress", value: canonical }])
        }
    }
}

/// The patch that makes a Gateway's `status.addresses` equal `entries`, one operation that
/// touches nothing else (`conditions` and `listeners` stay as written), shaped as [`write()`]'s.
pub(crate) fn write_gateway(
    shape: crate::kind::gateway::GatewayShape,
    entries: &[crate::kind::gateway::status::GatewayAddress],
    out: impl std::io::Write,
) -> serde_json::Result<()> {
    use crate::kind::gateway::GatewayShape;
    #[derive(Serialize)]
    struct Op<V> {
        op: &'static str,
        path: &'static str,
        value: V,
    }
    #[derive(Serialize)]
    struct Entry<'a> {
        #[serde(rename = "type")]
        kind: &'a str,
        value: &'a str,
    }
    #[derive(Serialize)]
    struct Status<'a> {
        addresses: Vec<Entry<'a>>,
    }
    let list = || entries.iter().map(|e| Entry { kind: &e.kind, value: &e.value }).collect::<Vec<_>>();
    match shape {
        GatewayShape::NoStatus => {
            serde_json::to_writer(out, &[Op { op: "add", path: "/status", value: Status { addresses: list() } }])
        }
        GatewayShape::NoAddresses => {
            serde_json::to_writer(out, &[Op { op: "add", path: "/status/addresses", value: list() }])
        }
        GatewayShape::Addresses => {
            serde_json::to_writer(out, &[Op { op: "replace", path: "/status/addresses", value: list() }])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::PortStatus;

    /// One patch operation. Only `add` and `replace` are ever needed.
    #[derive(Debug, Clone, PartialEq, Serialize)]
    struct PatchOp {
        op: &'static str,
        path: &'static str,
        value: serde_json::Value,
    }

    /// The same patch built as values: the oracle `write` is held to.
    fn set_addresses(shape: StatusShape, canonical: &[Address]) -> Vec<PatchOp> {
        let list = serde_json::to_value(canonical).expect("addresses always serialize");
        let (op, path, value) = match shape {
            StatusShape::NoStatus => ("add", "/status", serde_json::json!({"loadBalancer": {"ingress": list}})),
            StatusShape::NoLoadBalancer => ("add", "/status/loadBalancer", serde_json::json!({"ingress": list})),
            StatusShape::NoIngressList => ("add", "/status/loadBalancer/ingress", list),
            StatusShape::IngressList => ("replace", "/status/loadBalancer/ingress", list),
        };
        vec![PatchOp { op, path, value }]
    }

    #[test]
    fn written_patch_is_the_built_one() {
        let both = Address {
            ip: Some("192.0.2.10".into()),
            hostname: Some("lb.example.test".into()),
            ports: vec![PortStatus { port: 443, protocol: "TCP".into(), error: Some("x\"y".into()) }],
        };
        let lists = [vec![], vec![Address::hostname("lb.example.test")], vec![both, Address::hostname("b")]];
        for shape in
            [StatusShape::NoStatus, StatusShape::NoLoadBalancer, StatusShape::NoIngressList, StatusShape::IngressList]
        {
            for list in &lists {
                let mut written = Vec::new();
                write(shape, list, &mut written).unwrap();
                let written: serde_json::Value = serde_json::from_slice(&written).unwrap();
                assert_eq!(written, serde_json::to_value(set_addresses(shape, list)).unwrap(), "{shape:?} {list:?}");
            }
        }
    }
}
