//! The JSON patch (RFC 6902) that sets `status.loadBalancer.ingress`, shaped so that it applies to
//! the object exactly as the API server sent it, whichever parents are absent.

use serde::Serialize;

use crate::address::Address;

/// How much of `status.loadBalancer.ingress` the reviewed object has. A member that is `null`
/// counts as absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusShape {
    NoStatus,
    NoLoadBalancer,
    NoIngressList,
    IngressList,
}

/// One patch operation. Only `add` and `replace` are ever needed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct PatchOp {
    pub op: &'static str,
    pub path: &'static str,
    pub value: serde_json::Value,
}

/// The patch that makes `status.loadBalancer.ingress` equal `canonical`: one operation.
///
/// `add` onto an existing member replaces it (RFC 6902 section 4.1), so `add` at the deepest
/// parent that exists is right whether the member below is absent or `null`; `replace` is used
/// when the list is there, so the API server's audit log reads as a replacement.
pub(crate) fn set_addresses(shape: StatusShape, canonical: &[Address]) -> Vec<PatchOp> {
    let list = serde_json::to_value(canonical).expect("addresses always serialize");
    let (op, path, value) = match shape {
        StatusShape::NoStatus => ("add", "/status", serde_json::json!({"loadBalancer": {"ingress": list}})),
        StatusShape::NoLoadBalancer => ("add", "/status/loadBalancer", serde_json::json!({"ingress": list})),
        StatusShape::NoIngressList => ("add", "/status/loadBalancer/ingress", list),
        StatusShape::IngressList => ("replace", "/status/loadBalancer/ingress", list),
    };
    vec![PatchOp { op, path, value }]
}
