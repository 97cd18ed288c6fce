//! The bounded readers of the reconciler's lean projection ([`super::LeanIngress`]): every replica
//! caches every Ingress, whose annotations and status any user who may create one chooses, so
//! what is kept is bounded at the wire: a valid class name, at most [`MAX_MANAGERS`] managers.

use std::{borrow::Cow, fmt};

use serde::{Deserialize, Deserializer, de};

/// The class kept for an Ingress whose class is not a valid class name (a DNS-1123 subdomain of
/// at most 253 bytes): not a valid name itself, so no policy and no IngressClass matches it.
pub(crate) const INVALID_CLASS: &str = "<invalid class>";
/// Field managers of the status kept per Ingress, and bytes kept of each name.
pub(crate) const MAX_MANAGERS: usize = 4;
pub(crate) const MAX_MANAGER_BYTES: usize = 128;

/// `class` if it is a valid class name, else [`INVALID_CLASS`]. An empty class is kept as the
/// other readers keep it: it is small, and names no class either.
pub(crate) fn valid_class(class: impl AsRef<str> + Into<String>) -> String {
    let name = class.as_ref();
    if name.is_empty() || crate::names::is_dns1123_subdomain(name) { class.into() } else { INVALID_CLASS.to_owned() }
}

/// A class read from the wire, validated without keeping an invalid value (which may be large).
struct Class(String);

impl<'de> Deserialize<'de> for Class {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl de::Visitor<'_> for Visit {
            type Value = Class;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a class name")
            }
            fn visit_str<E>(self, v: &str) -> Result<Class, E> {
                Ok(Class(valid_class(v)))
            }
        }
        d.deserialize_str(Visit)
    }
}

/// `spec.ingressClassName`, validated.
pub(crate) fn class_field<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<Class>::deserialize(d)?.map(|c| c.0))
}

/// The [`super::CLASS_ANNOTATION`] out of `metadata.annotations` (`null` is none), validated; every
/// other annotation is skipped unparsed.
pub(crate) fn class_annotation<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(super::class_annotation::<D, Class>(d)?.map(|c| c.0))
}

/// The field managers whose `metadata.managedFields` entry owns some of `status`, at most
/// [`MAX_MANAGERS`], each name cut to [`MAX_MANAGER_BYTES`].
pub(crate) fn status_managers<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Entry<'a> {
        #[serde(borrow)]
        manager: Option<Cow<'a, str>>,
        #[serde(borrow)]
        time: Option<Cow<'a, str>>,
        #[serde(default, rename = "fieldsV1", deserialize_with = "owns_status")]
        fields_v1: bool,
    }
    struct Visit;
    impl<'de> de::Visitor<'de> for Visit {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of managedFields entries")
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            // (time, manager), the latest writer first: the one most likely to have replaced
            // the reconciler's value. Times are RFC 3339 in UTC, so they sort as text.
            let mut kept: Vec<(String, String)> = Vec::new();
            while let Some(entry) = seq.next_element::<Entry<'de>>()? {
                let Some(manager) = entry.manager.filter(|_| entry.fields_v1) else { continue };
                let manager = crate::names::truncate(&manager, usize::MAX, MAX_MANAGER_BYTES);
                let time = crate::names::truncate(entry.time.as_deref().unwrap_or(""), usize::MAX, 40);
                match kept.iter_mut().find(|(_, m)| *m == manager) {
                    Some(slot) => slot.0 = slot.0.clone().max(time),
                    None => kept.push((time, manager)),
                }
                kept.sort_by(|a, b| b.0.cmp(&a.0));
                kept.truncate(MAX_MANAGERS);
            }
            Ok(kept.into_iter().map(|(_, m)| m).collect())
        }
    }
    d.deserialize_any(Visit)
}

/// Whether a `fieldsV1` map has a top-level `f:status`.
fn owns_status<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    struct Visit;
    impl<'de> de::Visitor<'de> for Visit {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a fieldsV1 map")
        }
        fn visit_unit<E>(self) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
            let mut owns = false;
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                owns |= key == "f:status";
                map.next_value::<de::IgnoredAny>()?;
            }
            Ok(owns)
        }
    }
    d.deserialize_any(Visit)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kind::ingress::CLASS_ANNOTATION;

    #[derive(Deserialize)]
    struct Annotations(#[serde(deserialize_with = "class_annotation")] Option<String>);
    #[derive(Deserialize)]
    struct Field(#[serde(deserialize_with = "class_field")] Option<String>);
    #[derive(Deserialize)]
    struct Managers(#[serde(deserialize_with = "status_managers")] Vec<String>);

    #[test]
    fn only_valid_class_names_are_kept() {
        let cases = [
            ("nginx", "nginx"),
            ("a.b-c", "a.b-c"),
            ("", ""),
            ("Nginx", INVALID_CLASS),
            ("nginx ", INVALID_CLASS),
            ("-a", INVALID_CLASS),
            (&"a".repeat(253), &"a".repeat(253)),
            (&"a".repeat(254), INVALID_CLASS),
            (&"x".repeat(200 * 1024), INVALID_CLASS),
        ];
        for (class, want) in cases {
            let read: Annotations = serde_json::from_value(json!({CLASS_ANNOTATION: class, "other": "X"})).unwrap();
            assert_eq!(read.0.as_deref(), Some(want), "annotation {class:.20}");
            let read: Field = serde_json::from_value(json!(class)).unwrap();
            assert_eq!(read.0.as_deref(), Some(want), "field {class:.20}");
        }
        let none: Annotations = serde_json::from_value(json!({"other": "X"})).unwrap();
        assert_eq!(none.0, None);
        assert!(serde_json::from_value::<Annotations>(json!({CLASS_ANNOTATION: null})).is_err(), "null is refused");
        assert_eq!(valid_class(INVALID_CLASS), INVALID_CLASS, "the marker is no class name");
    }

    #[test]
    fn only_managers_of_the_status_are_kept_and_bounded() {
        let at = |manager: &str, time: &str, fields: serde_json::Value| json!({"manager": manager, "operation": "Update", "time": time, "fieldsType": "FieldsV1", "fieldsV1": fields});
        let entry = |manager: &str, fields| at(manager, "2026-01-01T00:00:00Z", fields);
        let mut list = vec![
            entry("kubectl", json!({"f:spec": {"f:rules": {}}})),
            at("nginx", "2026-01-01T00:00:05Z", json!({"f:status": {"f:loadBalancer": {}}})),
            entry("nginx", json!({"f:status": {}})),
            json!({"manager": "nofields"}),
            at("ingress-status-guard", "2026-01-01T00:00:03Z", json!({"f:metadata": {}, "f:status": {}})),
        ];
        let read = |list: &Vec<serde_json::Value>| serde_json::from_value::<Managers>(json!(list)).unwrap().0;
        assert_eq!(read(&list), ["nginx", "ingress-status-guard"], "the latest writer first");
        list.push(entry(&"m".repeat(1000), json!({"f:status": {}})));
        for i in 0..100 {
            list.push(entry(&format!("w{i}"), json!({"f:status": {}})));
        }
        let kept = read(&list);
        assert_eq!(kept.len(), MAX_MANAGERS);
        assert!(kept.iter().all(|m| m.len() <= MAX_MANAGER_BYTES));
        assert_eq!(serde_json::from_value::<Managers>(json!(null)).unwrap().0, Vec::<String>::new());
    }
}
