//! The bounds on the strings a caller writes into a review, checked once, as the review is read,
//! so that nothing after the reader (decision, response, log, metrics, Events) holds more of
//! them than this. Two kinds: what the API server itself checks (the request uid, the object's
//! namespace, name and uid), which only a forged review can break; and what an authenticator
//! chooses (username, groups), which a real write may exceed, so it is cut, never refused: a
//! write must not escape its policy because its writer is in many groups.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, de};

use crate::names::{is_dns1123_label, is_dns1123_subdomain, truncate};

/// Longest `request.uid`: the API server sends a UUID (36 bytes); anything longer is not from
/// it, and is answered with an HTTP error, since no `response.uid` could echo it faithfully.
pub(crate) const MAX_UID: usize = 128;
/// Longest `request.object.metadata.uid` (a UUID the API server assigned).
pub(crate) const MAX_OBJECT_UID: usize = 128;
/// Longest `request.userInfo.username` kept. A ServiceAccount's is at most 339 bytes
/// (`system:serviceaccount:` + a 63-byte namespace + `:` + a 253-byte name).
pub(crate) const MAX_USERNAME: usize = 512;
/// Most `request.userInfo.groups` kept: a ServiceAccount has three, and the groups are only
/// shown (the log line, bounded to 1 KiB itself), never judged.
pub(crate) const MAX_GROUPS: usize = 64;
/// Longest group kept, in bytes: `system:serviceaccounts:<namespace>` is at most 86.
pub(crate) const MAX_GROUP: usize = 256;

/// A review field the API server would never send as it is: the review is allowed as written,
/// with a warning that names the field and the bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutOfBounds {
    /// `request.namespace` is not a DNS-1123 label.
    #[error("request.namespace is not a DNS-1123 label (at most 63 bytes)")]
    Namespace,
    /// `request.name` is not a DNS-1123 subdomain.
    #[error("request.name is not a DNS-1123 subdomain (at most 253 bytes)")]
    Name,
    /// `request.object.metadata.uid` is too long.
    #[error("request.object.metadata.uid is over {MAX_OBJECT_UID} bytes")]
    ObjectUid,
}

impl OutOfBounds {
    /// The first bound an Ingress status review breaks, if any. Empty names are left to the
    /// decision, as before (they match nothing the API server stores).
    pub(crate) fn check(namespace: &str, name: &str, object_uid: Option<&str>) -> Option<OutOfBounds> {
        if !namespace.is_empty() && !is_dns1123_label(namespace) {
            Some(OutOfBounds::Namespace)
        } else if !name.is_empty() && !is_dns1123_subdomain(name) {
            Some(OutOfBounds::Name)
        } else if object_uid.is_some_and(|uid| uid.len() > MAX_OBJECT_UID) {
            Some(OutOfBounds::ObjectUid)
        } else {
            None
        }
    }
}

/// `request.uid`, if within [`MAX_UID`]; else its length.
pub(crate) fn uid(uid: &str) -> Result<(), usize> {
    if uid.len() <= MAX_UID { Ok(()) } else { Err(uid.len()) }
}

/// A username cut to [`MAX_USERNAME`] bytes, ending in `…` when cut (which no username the
/// API server authenticates as a ServiceAccount ends in).
pub(crate) fn username(username: Cow<'_, str>) -> Cow<'_, str> {
    if username.len() <= MAX_USERNAME { username } else { Cow::Owned(truncate(&username, usize::MAX, MAX_USERNAME)) }
}

/// `groups` read as a list of strings, as `Vec<String>` reads it (so the same documents are
/// errors), keeping the first [`MAX_GROUPS`], each cut to [`MAX_GROUP`] bytes.
pub(crate) fn groups<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    /// A string, borrowed from the body when it has no escapes.
    #[derive(Deserialize)]
    struct Text<'a>(#[serde(borrow)] Cow<'a, str>);
    struct Visit;
    impl<'de> de::Visitor<'de> for Visit {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a sequence")
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
            let mut groups = Vec::new();
            while let Some(Text(group)) = seq.next_element::<Text>()? {
                if groups.len() < MAX_GROUPS {
                    groups.push(truncate(&group, usize::MAX, MAX_GROUP));
                }
            }
            Ok(groups)
        }
    }
    d.deserialize_seq(Visit)
}
