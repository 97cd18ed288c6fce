//! The bounds on the strings a caller writes into a review, checked once as it is read: what the
//! API server checks (uids, namespace, name) only a forged review breaks; what an authenticator
//! chooses (username, groups) is cut, never refused, so no write escapes its policy by it.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, de};

use crate::names::{is_dns1123_label, is_dns1123_subdomain, truncate};

/// Longest `request.uid`: the API server sends a UUID (36 bytes), so anything longer is not
/// from it. It is answered with an HTTP error naming the bound rather than echoed: only the API
/// server needs `response.uid` to match, and a forged caller must not get its megabyte back.
pub(crate) const MAX_UID: usize = 128;
/// Longest `request.oldObject.metadata.uid` (a UUID the API server assigned).
pub(crate) const MAX_OBJECT_UID: usize = 128;
/// Longest `request.userInfo.username` kept. A ServiceAccount's is at most 339 bytes
/// (`system:serviceaccount:` + a 63-byte namespace + `:` + a 253-byte name).
pub(crate) const MAX_USERNAME: usize = 512;
// A username cut to the bound (ending in `…`) can never equal a trusted identity
// (`trustedWriters`): every identity is shorter than what is kept whole.
const _: () = assert!(crate::policy::MAX_IDENTITY < MAX_USERNAME);
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
    /// `request.oldObject.metadata.uid` is too long.
    #[error("request.oldObject.metadata.uid is over {MAX_OBJECT_UID} bytes")]
    ObjectUid,
}

impl OutOfBounds {
    /// The first bound a status review breaks, if any. Empty names are left to the decision
    /// (they match nothing the API server stores).
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

/// `username` read as `Cow<str>` reads it, cut to [`MAX_USERNAME`] bytes as it is read, ending in
/// `…` when cut (which no trusted identity can equal). Borrowed from the body when it has no escapes.
pub(crate) fn username<'de, D: Deserializer<'de>>(d: D) -> Result<Cow<'de, str>, D::Error> {
    struct Visit;
    impl<'de> de::Visitor<'de> for Visit {
        type Value = Cow<'de, str>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a string")
        }
        fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Cow<'de, str>, E> {
            Ok(if text.len() <= MAX_USERNAME { Cow::Borrowed(text) } else { Cow::Owned(cut(text)) })
        }
        fn visit_str<E: de::Error>(self, text: &str) -> Result<Cow<'de, str>, E> {
            Ok(Cow::Owned(if text.len() <= MAX_USERNAME { text.to_owned() } else { cut(text) }))
        }
    }
    fn cut(text: &str) -> String {
        truncate(text, usize::MAX, MAX_USERNAME)
    }
    d.deserialize_str(Visit)
}

/// `groups` read as `Vec<String>` reads it, keeping the first [`MAX_GROUPS`], each cut to [`MAX_GROUP`] bytes.
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::review::{Review, Target, read};

    const FIXTURE: &str =
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ingress-status-update.apiserver-1.24.json"));

    /// The fixture with the member at `path` set to `value`, read; the error's text, if any.
    fn read_with(path: &[&str], value: Value) -> Result<Review<'static>, String> {
        let mut review: Value = serde_json::from_str(FIXTURE).unwrap();
        *path.iter().fold(&mut review, |at, key| &mut at[*key]) = value;
        let body: &'static [u8] = serde_json::to_vec(&review).unwrap().leak();
        read(body).map_err(|e| e.to_string())
    }

    fn out_of_bounds(review: &Review) -> Option<String> {
        match &review.target {
            Target::OutOfBounds(bound) => Some(bound.to_string()),
            _ => None,
        }
    }

    #[test]
    fn each_field_at_its_bound_passes_and_one_byte_over_is_named() {
        let cases: [(&str, &[&str], usize, &str); 4] = [
            ("uid", &["request", "uid"], MAX_UID, "request.uid is 129 bytes, over the limit of 128"),
            ("namespace", &["request", "namespace"], 63, "request.namespace is not a DNS-1123 label"),
            ("name", &["request", "name"], 253, "request.name is not a DNS-1123 subdomain"),
            (
                "object uid",
                &["request", "oldObject", "metadata", "uid"],
                MAX_OBJECT_UID,
                "request.oldObject.metadata.uid is over 128 bytes",
            ),
        ];
        for (name, path, bound, message) in cases {
            let at = read_with(path, json!("a".repeat(bound))).unwrap();
            assert_eq!(out_of_bounds(&at), None, "{name} at its bound");
            assert!(matches!(at.target, Target::Ingress(_)), "{name}");
            let over = match read_with(path, json!("a".repeat(bound + 1))) {
                Ok(review) => out_of_bounds(&review).unwrap_or_else(|| panic!("{name} over its bound passed")),
                Err(error) => error,
            };
            assert!(over.starts_with(message), "{name}: {over}");
        }
        let bad_label = read_with(&["request", "namespace"], json!("Default")).unwrap();
        assert_eq!(
            out_of_bounds(&bad_label).as_deref(),
            Some("request.namespace is not a DNS-1123 label (at most 63 bytes)")
        );
    }

    #[test]
    fn what_an_authenticator_chooses_is_cut_not_refused() {
        let username =
            |text: String| read_with(&["request", "userInfo", "username"], json!(text)).unwrap().user.username;
        assert_eq!(username("u".repeat(MAX_USERNAME)).len(), MAX_USERNAME);
        let cut = username("u".repeat(MAX_USERNAME + 1));
        assert!(cut.len() <= MAX_USERNAME && cut.ends_with('…'), "{} bytes", cut.len());
        // One with escapes is decoded by serde_json, then cut alike; one within the bound is
        // kept whole, and a username is still a string.
        let escaped = username("\"q".repeat(MAX_USERNAME));
        assert!(escaped.len() <= MAX_USERNAME && escaped.ends_with('…') && escaped.starts_with("\"q"), "{escaped}");
        assert_eq!(username("a\"b".to_owned()), "a\"b");
        let error = read_with(&["request", "userInfo", "username"], json!(7)).unwrap_err();
        assert!(error.contains("request.userInfo.username: invalid type: integer `7`, expected a string"), "{error}");

        let groups =
            |groups: Vec<String>| read_with(&["request", "userInfo", "groups"], json!(groups)).unwrap().user.groups;
        let at = groups(vec!["g".repeat(MAX_GROUP); MAX_GROUPS]);
        assert_eq!((at.len(), at[0].len()), (MAX_GROUPS, MAX_GROUP));
        let over = groups((0..=MAX_GROUPS).map(|i| format!("{i}-{}", "g".repeat(MAX_GROUP))).collect());
        assert_eq!(over.len(), MAX_GROUPS);
        assert!(over.iter().all(|g| g.len() <= MAX_GROUP && g.ends_with('…')), "{over:?}");
        // Still a list of strings, as before.
        let error = read_with(&["request", "userInfo", "groups"], json!(["a", 7])).unwrap_err();
        assert!(error.contains("request.userInfo.groups[1]: invalid type: integer `7`"), "{error}");
    }

    #[test]
    fn a_status_list_past_the_bound_is_counted_not_kept() {
        let list = |entries: Value| {
            let review = read_with(&["request", "object", "status"], json!({"loadBalancer": {"ingress": entries}}));
            let review = review.unwrap();
            let kept = crate::review::on_status!(&review.target, s => s.write.addresses.len(), _ => 0);
            (kept, review.omitted())
        };
        let ips =
            |n: usize| Value::Array((0..n).map(|i| json!({"ip": format!("10.0.{}.{}", i / 256, i % 256)})).collect());
        use crate::address::{MAX_ENTRIES, MAX_PORTS};
        assert_eq!(list(ips(MAX_ENTRIES)), (MAX_ENTRIES, 0));
        assert_eq!(list(ips(MAX_ENTRIES + 1)), (MAX_ENTRIES, 1));
        assert_eq!(list(json!([{}, {}, {}])), (3, 0));
        let ports = |n: usize| json!({"ip": "10.0.0.1", "ports": vec![json!({"port": 80, "protocol": "TCP"}); n]});
        assert_eq!(list(json!([ports(MAX_PORTS)])), (1, 0));
        assert_eq!(list(json!([ports(MAX_PORTS + 1), ports(1)])), (0, 2), "an entry cut is not kept, nor what follows");
        assert_eq!(list(json!([ports(MAX_PORTS), ports(1)])), (1, 1), "the port budget is the list's");
        // An invalid entry is an error wherever it is.
        let mut late = ips(MAX_ENTRIES + 10);
        late[MAX_ENTRIES + 5] = json!({"ip": 7});
        let error =
            read_with(&["request", "object", "status"], json!({"loadBalancer": {"ingress": late}})).unwrap_err();
        assert!(error.contains("status.loadBalancer.ingress[261].ip: invalid type: integer `7`"), "{error}");
    }
}
