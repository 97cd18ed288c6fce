//! An Ingress policy's part of its admission objects in CEL: the canonical `status.loadBalancer`
//! as a typed literal, the class condition and the key that compares written entries.

use serde_json::json;

use crate::kind::ingress::CLASS_ANNOTATION;
use crate::{
    address::{Address, Addresses, MAX_ENTRIES},
    admission_policy::{Admitted, Governed, RenderError, SEPARATORS, Shape, cel},
    policy::Policy,
};

impl Admitted for crate::kind::ingress::Ingresses {
    fn admission_shape(policy: &Policy, canonical: &[Address], governed: &Governed) -> Result<Shape, RenderError> {
        if let Some(a) = canonical.iter().find(|a| {
            let fields = a.ports.iter().flat_map(|p| [Some(&p.protocol), p.error.as_ref()]).flatten();
            a.ip.iter().chain(&a.hostname).chain(fields).any(|s| s.contains(SEPARATORS))
        }) {
            return Err(RenderError::Separator { policy: policy.name.clone(), entry: a.to_string() });
        }
        let match_conditions = match governed {
            Governed::Everything => Vec::new(),
            Governed::Classes { names, without_class } => {
                vec![json!({"name": "governed-class", "expression": class_condition(names, *without_class)})]
            }
        };
        Ok(Shape {
            match_constraints: super::status_updates("networking.k8s.io", "ingresses/status"),
            match_conditions: json!(match_conditions),
            patch: patch(canonical),
            written: WRITTEN_KEYS,
            same_set: same_set(canonical),
            message: message(&policy.name, canonical),
            metadata_unchanged: Some(METADATA_UNCHANGED),
        })
    }

    fn rebuilt(list: &str) -> Option<String> {
        Some(load_balancer_entries(list, &[]))
    }
}

/// `list`'s entries rebuilt as typed `Object.status.loadBalancer.ingress` values, each member
/// (and the string members `extra`) present only where the stored entry has it (CEL optionals).
pub(super) fn load_balancer_entries(list: &str, extra: &[&str]) -> String {
    let opt = |of: &str, member: &str, value: String| {
        format!("?{member}: has({of}.{member}) ? optional.of({value}) : optional.none()")
    };
    let port = format!(
        "Object.status.loadBalancer.ingress.ports{{port: int(p.port), protocol: string(p.protocol), {}}}",
        opt("p", "error", "string(p.error)".to_owned())
    );
    let mut members = vec![
        opt("e", "ip", "string(e.ip)".to_owned()),
        opt("e", "hostname", "string(e.hostname)".to_owned()),
        opt("e", "ports", format!("e.ports.map(p, {port})")),
    ];
    members.extend(extra.iter().map(|m| opt("e", m, format!("string(e.{m})"))));
    format!("{list}.map(e, Object.status.loadBalancer.ingress{{{}}})", members.join(", "))
}

/// True when a status write leaves the four metadata fields as stored.
const METADATA_UNCHANGED: &str = concat!(
    "has(object.metadata.annotations) == has(oldObject.metadata.annotations) && (!has(object.metadata.annotations) || object.metadata.annotations == oldObject.metadata.annotations)",
    " && has(object.metadata.labels) == has(oldObject.metadata.labels) && (!has(object.metadata.labels) || object.metadata.labels == oldObject.metadata.labels)",
    " && has(object.metadata.ownerReferences) == has(oldObject.metadata.ownerReferences) && (!has(object.metadata.ownerReferences) || object.metadata.ownerReferences == oldObject.metadata.ownerReferences)",
    " && has(object.metadata.finalizers) == has(oldObject.metadata.finalizers) && (!has(object.metadata.finalizers) || object.metadata.finalizers == oldObject.metadata.finalizers)",
);

/// What a refused (`deny`) or reported (`audit`) write is told: the webhook's message without
/// the written value, which a static message cannot know.
fn message(policy: &str, canonical: &[Address]) -> String {
    format!("ingress-status-guard policy {policy:?} requires status.loadBalancer.ingress [{}]", Addresses(canonical))
}

/// The canonical entries as a typed `Object.status.loadBalancer` literal, the value of the
/// JSONPatch: typed, so the API server checks it against the Ingress schema when the policy is
/// created rather than when a write arrives.
pub(crate) fn load_balancer(canonical: &[Address]) -> String {
    let entries: Vec<String> = canonical
        .iter()
        .map(|a| {
            let ports: Vec<String> = a
                .ports
                .iter()
                .map(|p| {
                    let error = p.error.as_ref().map(|e| format!(", error: {}", cel::string(e))).unwrap_or_default();
                    let (port, protocol) = (p.port, cel::string(&p.protocol));
                    format!("Object.status.loadBalancer.ingress.ports{{port: {port}, protocol: {protocol}{error}}}")
                })
                .collect();
            let fields: Vec<String> = [
                a.ip.as_ref().map(|ip| format!("ip: {}", cel::string(ip))),
                a.hostname.as_ref().map(|hostname| format!("hostname: {}", cel::string(hostname))),
                (!ports.is_empty()).then(|| format!("ports: [{}]", ports.join(", "))),
            ]
            .into_iter()
            .flatten()
            .collect();
            format!("Object.status.loadBalancer.ingress{{{}}}", fields.join(", "))
        })
        .collect();
    format!("Object.status.loadBalancer{{ingress: [{}]}}", entries.join(", "))
}

/// The JSONPatch that sets `status.loadBalancer` to the canonical value. `add` replaces a
/// member that exists and creates one that does not; `/status` itself is added when the
/// object has none, because a patch whose parent path is missing fails the write.
pub(crate) fn patch(canonical: &[Address]) -> String {
    let value = load_balancer(canonical);
    format!(
        "has(object.status) ? [JSONPatch{{op: \"add\", path: \"/status/loadBalancer\", value: {value}}}] : [JSONPatch{{op: \"add\", path: \"/status\", value: Object.status{{loadBalancer: {value}}}}}]"
    )
}

/// Whether the Ingress's class (`spec.ingressClassName`, else the legacy annotation; none:
/// `without_class`) is one of `classes`, read from `oldObject` as the webhook reads it: the API
/// server puts the stored spec back after mutating admission, and a governed status write's
/// metadata is put back too (or refused). UPDATEs always have an `oldObject`.
pub(crate) fn class_condition(classes: &[String], without_class: bool) -> String {
    let list = cel::string_list(classes.iter().map(String::as_str));
    let annotation = cel::string(CLASS_ANNOTATION);
    format!(
        "has(oldObject.spec.ingressClassName) ? oldObject.spec.ingressClassName in {list} : (has(oldObject.metadata.annotations) && {annotation} in oldObject.metadata.annotations ? oldObject.metadata.annotations[{annotation}] in {list} : {without_class})"
    )
}

/// The written entries as keys (`variables.written`), one per entry of
/// `status.loadBalancer.ingress` (none when absent).
pub(crate) const WRITTEN_KEYS: &str = "(has(object.status) && has(object.status.loadBalancer) && has(object.status.loadBalancer.ingress) ? object.status.loadBalancer.ingress : []).map(e, (has(e.ip) ? e.ip : \"\") + \"|\" + (has(e.hostname) ? e.hostname : \"\") + \"|\" + (has(e.ports) ? string(size(e.ports)) + \":\" + e.ports.map(p, string(p.port) + \"/\" + (has(p.protocol) ? p.protocol : \"\") + \"/\" + (has(p.error) ? p.error : \"\")).join(\";\") : \"0:\"))";

/// An entry's key, as [`WRITTEN_KEYS`] computes it in CEL: `ip|hostname|N:port/protocol/error;...`.
/// Two entries have the same key only if they are equal when the canonical one's strings hold
/// no [`SEPARATORS`]: a key has two `|`, and for N ports N-1 `;` and 2N `/`, so a written key
/// equal to a canonical one holds no separator in its strings either and parses back one way
/// only (the `:` after N needs no such care: N is digits, so its first `:` ends it).
pub(crate) fn key(a: &Address) -> String {
    let ports: Vec<String> =
        a.ports.iter().map(|p| format!("{}/{}/{}", p.port, p.protocol, p.error.as_deref().unwrap_or(""))).collect();
    format!(
        "{}|{}|{}:{}",
        a.ip.as_deref().unwrap_or(""),
        a.hostname.as_deref().unwrap_or(""),
        a.ports.len(),
        ports.join(";")
    )
}

/// Whether the written keys are the canonical ones, ignoring order and duplicates, as the
/// webhook compares; like its reader, a list longer than [`MAX_ENTRIES`] is never canonical.
pub(crate) fn same_set(canonical: &[Address]) -> String {
    let keys: Vec<String> = canonical.iter().map(key).collect();
    let list = cel::string_list(keys.iter().map(String::as_str));
    format!(
        "size(variables.written) <= {MAX_ENTRIES} && variables.written.all(k, k in {list}) && {list}.all(k, k in variables.written)"
    )
}
