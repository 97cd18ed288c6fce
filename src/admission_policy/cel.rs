//! The CEL text of the rendered policies: string literals escaped so no value can end a literal
//! or change the expression, the canonical list as a typed literal, the class condition and the
//! key that compares written entries with canonical ones.

use std::fmt::Write as _;

use crate::{
    address::{Address, MAX_ENTRIES},
    kind::ingress::CLASS_ANNOTATION,
};

/// A CEL double-quoted string literal of `text`. Quotes and backslashes are escaped, and every
/// character outside printable ASCII as `\uXXXX` or `\UXXXXXXXX`, so the expression is plain
/// ASCII whatever YAML or terminal carries it, and no value can close the literal.
pub(crate) fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            ' '..='~' => out.push(c),
            c if u32::from(c) <= 0xFFFF => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\U{:08X}", u32::from(c));
            }
        }
    }
    out.push('"');
    out
}

/// `[a, b]` of CEL string literals.
pub(crate) fn string_list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let items: Vec<String> = items.into_iter().map(string).collect();
    format!("[{}]", items.join(", "))
}

/// The canonical entries as a typed `Object.status.loadBalancer` literal, the value of the
/// JSONPatch: typed, so the API server checks it against the Ingress schema when the policy is
/// created rather than when a write arrives.
pub(crate) fn load_balancer(canonical: &[Address]) -> String {
    let entries: Vec<String> = canonical
        .iter()
        .map(|a| {
            let mut fields = Vec::new();
            if let Some(ip) = &a.ip {
                fields.push(format!("ip: {}", string(ip)));
            }
            if let Some(hostname) = &a.hostname {
                fields.push(format!("hostname: {}", string(hostname)));
            }
            if !a.ports.is_empty() {
                let ports: Vec<String> = a
                    .ports
                    .iter()
                    .map(|p| {
                        let mut port = format!("port: {}, protocol: {}", p.port, string(&p.protocol));
                        if let Some(error) = &p.error {
                            let _ = write!(port, ", error: {}", string(error));
                        }
                        format!("Object.status.loadBalancer.ingress.ports{{{port}}}")
                    })
                    .collect();
                fields.push(format!("ports: [{}]", ports.join(", ")));
            }
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

/// Whether the Ingress's class is one of `classes`, by the class rule of `ingress`:
/// `spec.ingressClassName`, else the legacy annotation; a class-less Ingress gives
/// `without_class`. Each is read where the webhook reads it (`review::read`,
/// `stored_ingress_class`): the field from `oldObject`, because the API server puts the
/// stored spec back after mutating admission; the annotation from `object`, because a status
/// write keeps the metadata it writes. The rules match UPDATEs only, which always have an
/// `oldObject`.
pub(crate) fn class_condition(classes: &[String], without_class: bool) -> String {
    let list = string_list(classes.iter().map(String::as_str));
    let annotation = string(CLASS_ANNOTATION);
    format!(
        "has(oldObject.spec.ingressClassName) ? oldObject.spec.ingressClassName in {list} : (has(object.metadata.annotations) && {annotation} in object.metadata.annotations ? object.metadata.annotations[{annotation}] in {list} : {without_class})"
    )
}

/// Separators of [`key`]; a canonical value containing one is refused by the renderer, which is
/// what makes the key injective (see [`key`]).
pub(crate) const SEPARATORS: [char; 3] = ['|', ';', '/'];

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
    let list = string_list(keys.iter().map(String::as_str));
    format!(
        "size(variables.written) <= {MAX_ENTRIES} && variables.written.all(k, k in {list}) && {list}.all(k, k in variables.written)"
    )
}
