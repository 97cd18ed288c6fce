//! The JSON patches (RFC 6902) of each kind are in `kind/<kind>.rs` ([`Governed::patch`]); these
//! tests hold the Ingress's to the same patch built as values.

#[cfg(test)]
mod tests {
    use serde::Serialize;

    use crate::{
        address::{Address, PortStatus},
        kind::{
            Governed,
            ingress::{Ingresses, StatusShape},
        },
    };
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
                Ingresses::patch(shape, list, &mut written).unwrap();
                let written: serde_json::Value = serde_json::from_slice(&written).unwrap();
                assert_eq!(written, serde_json::to_value(set_addresses(shape, list)).unwrap(), "{shape:?} {list:?}");
            }
        }
    }
}
