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
    // A field the API server resets is named in the audit log whatever the verdict.
    let forged = review.forged_field();
    match verdict {
        Verdict::Ignored(_) | Verdict::NotGoverned | Verdict::Canonical { .. } => {
            allowed(&mut out, true);
            if let Target::OutOfBounds(bound) = &review.target {
                warning(&mut out, format!("ingress-status-guard: {bound}; status left as written"));
            }
            if forged.is_some() {
                annotations(&mut out, &[], forged);
            }
        }
        Verdict::Unresolved { policy, deny, reason } => {
            allowed(&mut out, !*deny);
            if *deny {
                status(
                    &mut out,
                    format_args!(
                        "ingress-status-guard policy {:?} cannot resolve the canonical address: {reason}; the status write is refused until it resolves",
                        policy.name
                    ),
                );
            } else {
                warning(&mut out, format!("canonical address unknown ({reason}); status left as written"));
            }
            annotations(
                &mut out,
                &[
                    ("action", format_args!("{}", verdict.result())),
                    ("policy", format_args!("{}", policy.name)),
                    ("unresolved", format_args!("{reason}")),
                ],
                forged,
            );
        }
        Verdict::Mismatch { policy, action, canonical } => {
            let canonical_text = Addresses(canonical);
            let kind = review.kind().unwrap_or(Kind::Ingress);
            let field = kind.field();
            let attempted_text = on_status!(&review.target, s => written(s), _ => String::from("<none>"));
            allowed(&mut out, *action != Action::Deny);
            match action {
                Action::Rewrite => {
                    let mut json = Vec::with_capacity(PATCH_CAPACITY);
                    let patched = on_status!(&review.target, s => patch(s, canonical, &mut json), _ => Ok(false));
                    if patched.expect("a patch of strings and numbers always serializes") {
                        out.extend_from_slice(b",\"patchType\":\"JSONPatch\",\"patch\":\"");
                        // Serialized whole, then encoded in one call: serde_json writes many
                        // small pieces, which cost more through a base64 writer than one copy.
                        let start = out.len();
                        out.resize(start + base64::encoded_len(json.len(), true).expect("a patch is small"), 0);
                        let written = base64::engine::general_purpose::STANDARD
                            .encode_slice(&json, &mut out[start..])
                            .expect("sized by encoded_len");
                        out.truncate(start + written);
                        out.push(b'"');
                    }
                    warning(&mut out, format!("{field} rewritten to [{canonical_text}] by policy {}", policy.name));
                }
                Action::Audit => warning(
                    &mut out,
                    format!("{field} differs from [{canonical_text}] (policy {}, audit mode)", policy.name),
                ),
                Action::Deny => status(
                    &mut out,
                    format_args!(
                        "ingress-status-guard policy {:?} requires {field} [{canonical_text}], not [{attempted_text}]",
                        policy.name
                    ),
                ),
            }
            annotations(
                &mut out,
                &[
                    ("action", format_args!("{}", action.result())),
                    ("attempted", format_args!("{attempted_text}")),
                    ("canonical", format_args!("{canonical_text}")),
                    ("policy", format_args!("{}", policy.name)),
                ],
                forged,
            );
        }
    }
    out.extend_from_slice(b"}}");
    out
}

/// What `status` wrote, as its kind shows it.
fn written<E: Entry, S>(status: &Status<'_, E, S>) -> String {
    crate::address::Written { kept: &status.write.addresses, omitted: status.write.omitted }.to_string()
}

/// The kind's patch to `canonical` into `out`; `false` when the kind cannot hold it (never
/// for a mismatch: `decide` found it unresolved then).
fn patch<E: Entry>(
    status: &Status<'_, E, <E::Of as Governed>::Shape>,
    canonical: &[Address],
    out: &mut Vec<u8>,
) -> serde_json::Result<bool> {
    match <E::Of as Governed>::entries(canonical) {
        Ok(entries) => <E::Of as Governed>::patch(status.shape, &entries, out).map(|()| true),
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

/// The audit annotation that names a field a status write changed and the API server resets.
const FORGED_SPEC: &str = "forged_spec";

/// `"auditAnnotations"`; `members` in key order, and [`FORGED_SPEC`] in its place among them
/// when the write forged a field.
fn annotations(out: &mut Vec<u8>, members: &[(&str, fmt::Arguments<'_>)], forged: Option<&str>) {
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
    let mut forged = forged;
    for (key, value) in members {
        if let Some(field) = forged.filter(|_| *key > FORGED_SPEC) {
            member(out, FORGED_SPEC, format_args!("{field}"));
            forged = None;
        }
        member(out, key, *value);
    }
    if let Some(field) = forged {
        member(out, FORGED_SPEC, format_args!("{field}"));
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
