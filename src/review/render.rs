//! The AdmissionReview on the wire, going out: one [`render`] turns a review and its verdict
//! into the response bytes, with the patch, the warning for the writer and the annotations for
//! the API server's audit log.

use base64::Engine as _;
use std::fmt::{self, Write as _};

use crate::{
    address::{Address, Addresses},
    decision::{Action, Verdict},
    kind::{Entry, Governed, Kind},
    names::truncate,
    review::{Review, Status, Target, on_status},
};

/// kubectl prints warnings as they are; the API server truncates long ones.
pub(crate) const MAX_WARNING: usize = 120;

/// Room for every response but those with very long names or address lists, so the buffer is
/// allocated once.
const CAPACITY: usize = 1024;
/// Room for the JSON patch of a few addresses without growing.
const PATCH_CAPACITY: usize = 256;

/// The serialized AdmissionReview response for `review` decided as `verdict`, written straight
/// into one buffer: members in the order of the AdmissionReview schema (`uid`, `allowed`,
/// `patchType`, `patch`, `status`, `warnings`, `auditAnnotations` with its keys sorted), strings
/// escaped as serde_json escapes them, the patch base64-encoded as it is serialized.
pub fn render(review: &Review, verdict: &Verdict<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(CAPACITY);
    out.extend_from_slice(b"{\"apiVersion\":");
    string(&mut out, format_args!("{}", review.api_version.as_str()));
    out.extend_from_slice(b",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":");
    string(&mut out, format_args!("{}", review.uid));
    // Fields the API server resets, and metadata a status write must not change, are named in
    // the audit log whatever the verdict.
    let forged = Forgeries {
        spec: review.forged_field(),
        metadata: review.forged_metadata().map(|m| truncate(&m.to_string(), usize::MAX, MAX_NAMES)),
    };
    let metadata = review.metadata_verdict(verdict);
    // The metadata's answer, when a policy governs a write that changed it.
    let (metadata_ops, metadata_refusal, metadata_warning) = match metadata {
        None => (None, None, None),
        Some((changed, policy, Action::Rewrite)) => {
            let mut ops = Vec::new();
            changed.write_ops(&mut ops);
            let text = format!("{changed} put back by policy {}: status writes keep metadata", policy.name);
            (Some(ops), None, Some(text))
        }
        Some((changed, policy, Action::Audit)) => {
            (None, None, Some(format!("status write changed {changed} (policy {}, audit mode)", policy.name)))
        }
        Some((changed, _, Action::Deny)) => {
            let why = if changed.restorable() { "" } else { "; the stored metadata is too large to put back" };
            let first = changed.first();
            (None, Some(format!("a status write may not change metadata (it changed {first}){why}")), None)
        }
    };
    let metadata_action = metadata.map(|(_, policy, action)| (policy, action));
    match verdict {
        Verdict::Ignored(_) | Verdict::NotGoverned | Verdict::Canonical { .. } | Verdict::Trusted { .. } => {
            allowed(&mut out, metadata_refusal.is_none());
            if let Target::OutOfBounds(bound) = &review.target {
                warning(&mut out, format!("ingress-status-guard: {bound}; status left as written"));
            }
            match metadata_action {
                Some((policy, action)) => {
                    write_patch(&mut out, None, metadata_ops.as_deref());
                    if let Some(refusal) = &metadata_refusal {
                        status(&mut out, format_args!("ingress-status-guard policy {:?}: {refusal}", policy.name));
                    }
                    if let Some(text) = metadata_warning {
                        warning(&mut out, text);
                    }
                    annotations(
                        &mut out,
                        &[("action", format_args!("{}", action.result())), ("policy", format_args!("{}", policy.name))],
                        &forged,
                    );
                }
                None if forged.spec.is_some() || forged.metadata.is_some() => annotations(&mut out, &[], &forged),
                None => {}
            }
        }
        Verdict::Unresolved { policy, deny, reason } => {
            allowed(&mut out, !*deny && metadata_refusal.is_none());
            write_patch(&mut out, None, metadata_ops.as_deref());
            if *deny {
                status(
                    &mut out,
                    format_args!(
                        "ingress-status-guard policy {:?} cannot resolve the canonical address: {reason}; the status write is refused until it resolves{}",
                        policy.name,
                        Also(metadata_refusal.as_deref())
                    ),
                );
            } else if let Some(refusal) = &metadata_refusal {
                status(&mut out, format_args!("ingress-status-guard policy {:?}: {refusal}", policy.name));
            } else {
                warning(&mut out, format!("canonical address unknown ({reason}); status left as written"));
            }
            annotations(
                &mut out,
                &[
                    ("action", format_args!("{}", review.result(verdict))),
                    ("policy", format_args!("{}", policy.name)),
                    ("unresolved", format_args!("{reason}")),
                ],
                &forged,
            );
        }
        Verdict::Mismatch { policy, action, canonical } => {
            let canonical_text = Addresses(canonical);
            let kind = review.kind().unwrap_or(Kind::Ingress);
            let field = kind.field();
            let attempted_text = on_status!(&review.target, s => written(s), _ => String::from("<none>"));
            let refused = *action == Action::Deny || metadata_refusal.is_some();
            // Under a trusted-writer policy the value to keep is the stored one, and the writer
            // is told why its own does not count.
            let trusted = policy.trusted_writers().is_some();
            let required = if trusted { "keeps the stored" } else { "requires" };
            allowed(&mut out, !refused);
            match action {
                Action::Rewrite if !refused => {
                    let mut json = Vec::with_capacity(PATCH_CAPACITY);
                    let patched = match trusted {
                        true => Ok(review.restoring_patch(&mut json)),
                        false => {
                            on_status!(&review.target, K, s => patch::<K>(s, canonical, &mut json), _ => Ok(false))
                        }
                    };
                    let patched = patched.expect("a patch of strings and numbers always serializes");
                    write_patch(&mut out, patched.then_some(&json[..]), metadata_ops.as_deref());
                    let to = if trusted { "put back to the stored" } else { "rewritten to" };
                    warning(&mut out, format!("{field} {to} [{canonical_text}] by policy {}", policy.name));
                }
                Action::Audit => {
                    let from = if trusted { "changed from the stored" } else { "differs from" };
                    warning(
                        &mut out,
                        format!("{field} {from} [{canonical_text}] (policy {}, audit mode)", policy.name),
                    );
                }
                Action::Deny => status(
                    &mut out,
                    format_args!(
                        "ingress-status-guard policy {:?} {required} {field} [{canonical_text}], not [{attempted_text}]{}{}",
                        policy.name,
                        Untrusted(trusted.then_some(&review.user.username)),
                        Also(metadata_refusal.as_deref())
                    ),
                ),
                Action::Rewrite => status(
                    &mut out,
                    format_args!(
                        "ingress-status-guard policy {:?}: {}",
                        policy.name,
                        metadata_refusal.as_deref().unwrap_or_default()
                    ),
                ),
            }
            annotations(
                &mut out,
                &[
                    ("action", format_args!("{}", review.result(verdict))),
                    ("attempted", format_args!("{attempted_text}")),
                    ("canonical", format_args!("{canonical_text}")),
                    ("policy", format_args!("{}", policy.name)),
                ],
                &forged,
            );
        }
    }
    out.extend_from_slice(b"}}");
    out
}

/// Longest list of changed metadata keys in an audit annotation, in bytes.
const MAX_NAMES: usize = 1024;

/// `; and <text>` after a refusal's sentence, when there is a second refusal.
struct Also<'a>(Option<&'a str>);

impl fmt::Display for Also<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(text) => write!(f, "; and {text}"),
            None => Ok(()),
        }
    }
}

/// `: only its trusted writers may change it, and <user> is not one` after a trusted-writer
/// policy's refusal; the user is cut, as every caller string is.
struct Untrusted<'a>(Option<&'a str>);

impl fmt::Display for Untrusted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(user) => write!(
                f,
                ": only its trusted writers may change it, and {:?} is not one",
                truncate(user, usize::MAX, MAX_USER_SHOWN)
            ),
            None => Ok(()),
        }
    }
}

/// Longest username a refusal quotes, in bytes.
const MAX_USER_SHOWN: usize = 256;

/// `"patchType"` and `"patch"`: the metadata's operations (each ending in a comma) and the
/// kind's status patch (a JSON array), in one array, base64-encoded; nothing when both are
/// absent.
fn write_patch(out: &mut Vec<u8>, status_patch: Option<&[u8]>, metadata_ops: Option<&[u8]>) {
    let json: std::borrow::Cow<'_, [u8]> = match (status_patch, metadata_ops) {
        (None, None) => return,
        (Some(status), None) => status.into(),
        (status, Some(ops)) => {
            let mut json = Vec::with_capacity(ops.len() + status.map_or(0, <[u8]>::len) + 2);
            json.push(b'[');
            json.extend_from_slice(ops);
            match status {
                // The status patch's operations, without its brackets.
                Some(status) => json.extend_from_slice(&status[1..]),
                None => {
                    json.pop();
                    json.push(b']');
                }
            }
            json.into()
        }
    };
    out.extend_from_slice(b",\"patchType\":\"JSONPatch\",\"patch\":\"");
    // Serialized whole, then encoded in one call: serde_json writes many small pieces, which
    // cost more through a base64 writer than one copy.
    let start = out.len();
    out.resize(start + base64::encoded_len(json.len(), true).expect("a patch is bounded"), 0);
    let written =
        base64::engine::general_purpose::STANDARD.encode_slice(&json, &mut out[start..]).expect("sized by encoded_len");
    out.truncate(start + written);
    out.push(b'"');
}

/// What `status` wrote, as its kind shows it.
fn written<E: Entry, S>(status: &Status<'_, E, S>) -> String {
    crate::address::Written { kept: &status.write.addresses, omitted: status.write.omitted }.to_string()
}

/// The kind's patch to `canonical` into `out`; `false` when the kind cannot hold it (never
/// for a mismatch: `decide` found it unresolved then).
fn patch<K: Governed>(
    status: &Status<'_, K::Entry, K::Shape>,
    canonical: &[Address],
    out: &mut Vec<u8>,
) -> serde_json::Result<bool> {
    match K::entries(canonical) {
        Ok(entries) => K::patch(status.shape, &entries, out).map(|()| true),
        Err(_) => Ok(false),
    }
}

fn allowed(out: &mut Vec<u8>, allowed: bool) {
    out.extend_from_slice(if allowed { b",\"allowed\":true" } else { b",\"allowed\":false" });
}

/// `"status"` of a refusal.
fn status(out: &mut Vec<u8>, message: fmt::Arguments<'_>) {
    out.extend_from_slice(b",\"status\":{\"code\":403,\"reason\":\"Forbidden\",\"message\":");
    string(out, message);
    out.push(b'}');
}

/// `"warnings"` with one warning, cut to what kubectl shows in full.
fn warning(out: &mut Vec<u8>, text: String) {
    out.extend_from_slice(b",\"warnings\":[");
    if text.chars().count() <= MAX_WARNING {
        string(out, format_args!("{text}"));
    } else {
        string(out, format_args!("{}", truncate(&text, MAX_WARNING, usize::MAX)));
    }
    out.push(b']');
}

/// The audit annotations that name what a status write changed and may not: a field the API
/// server resets, and metadata the guard judges by its stored value.
struct Forgeries<'a> {
    spec: Option<&'a str>,
    metadata: Option<String>,
}

/// `"auditAnnotations"`; `members` in key order, and the forgeries in their places among them.
fn annotations(out: &mut Vec<u8>, members: &[(&str, fmt::Arguments<'_>)], forged: &Forgeries<'_>) {
    out.extend_from_slice(b",\"auditAnnotations\":{");
    let mut first = true;
    let mut member = |out: &mut Vec<u8>, key: &str, value: fmt::Arguments<'_>| {
        if !first {
            out.push(b',');
        }
        first = false;
        string(out, format_args!("{key}"));
        out.push(b':');
        string(out, value);
    };
    // `forged_metadata` sorts before `forged_spec`.
    let mut extra: Vec<(&str, &str)> = Vec::with_capacity(2);
    if let Some(names) = &forged.metadata {
        extra.push(("forged_metadata", names));
    }
    if let Some(field) = forged.spec {
        extra.push(("forged_spec", field));
    }
    let mut extra = extra.into_iter().peekable();
    for (key, value) in members {
        while let Some((name, text)) = extra.next_if(|(name, _)| *key > *name) {
            member(out, name, format_args!("{text}"));
        }
        member(out, key, *value);
    }
    for (name, text) in extra {
        member(out, name, format_args!("{text}"));
    }
    out.push(b'}');
}

/// A JSON string of formatted text, escaped as it is formatted.
fn string(out: &mut Vec<u8>, text: fmt::Arguments<'_>) {
    out.push(b'"');
    match text.as_str() {
        Some(text) => escape(out, text),
        None => Escaped(out).write_fmt(text).expect("writing to a Vec cannot fail"),
    }
    out.push(b'"');
}

struct Escaped<'a>(&'a mut Vec<u8>);

impl fmt::Write for Escaped<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        escape(self.0, s);
        Ok(())
    }
}

/// serde_json's escaping: `"`, `\\` and control characters; nothing else. Clean runs are
/// found 16 bytes at a time and copied whole.
fn escape(out: &mut Vec<u8>, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = text.as_bytes();
    let mut start = 0;
    while let Some(i) = next_to_escape(bytes, start) {
        let b = bytes[i];
        let escaped: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            _ => &[b'\\', b'u', b'0', b'0', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]],
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(escaped);
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
}

/// The first byte from `from` on that JSON escapes: `"`, `\\` or below 0x20.
fn next_to_escape(bytes: &[u8], from: usize) -> Option<usize> {
    use wide::u8x16;
    let mut blocks = bytes.get(from..)?.chunks_exact(16);
    let mut at = from;
    for block in &mut blocks {
        let v = u8x16::new(block.try_into().expect("16 bytes"));
        let flagged = v.simd_eq(u8x16::splat(b'"'))
            | v.simd_eq(u8x16::splat(b'\\'))
            | (v & u8x16::splat(0xe0)).simd_eq(u8x16::ZERO);
        let mask = flagged.to_bitmask();
        if mask != 0 {
            return Some(at + mask.trailing_zeros() as usize);
        }
        at += 16;
    }
    let rest = blocks.remainder();
    rest.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20).map(|k| at + k)
}

#[cfg(test)]
mod tests;
