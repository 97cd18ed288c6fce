//! The stored status a write replaces (`request.oldObject.status`): kept unparsed ([`RawStatus`]),
//! and read by the kind's own bounded reader only when a trusted-writer policy needs it.

use serde::{Deserialize, de};

use super::{MAX_QUOTED, Reviewed};
use crate::{kind::Write, names::truncate};

/// A stored `status` as the body holds it, unparsed. Two are equal when they are the same JSON,
/// however it is spaced (a compact and a pretty-printed review read alike).
#[derive(Debug, Clone, Copy)]
pub struct RawStatus<'a>(pub &'a str);

impl PartialEq for RawStatus<'_> {
    fn eq(&self, other: &Self) -> bool {
        let value = |raw: &str| serde_json::from_str::<serde_json::Value>(raw).ok();
        self.0 == other.0 || value(self.0).is_some_and(|a| Some(a) == value(other.0))
    }
}

impl Eq for RawStatus<'_> {}

/// The stored status list of a review of kind `K`: empty when there is none; an error naming the
/// field when it is not the kind's.
pub(super) fn stored_status<K: Reviewed>(raw: Option<&str>) -> Result<Write<K::Entry>, String> {
    let Some(raw) = raw else { return Ok(Write::default()) };
    let object = K::In::deserialize(StatusOnly(raw))
        .map_err(|e| format!("status: {}", truncate(&e.to_string(), usize::MAX, MAX_QUOTED)))?;
    let (write, _, _) = K::written(object, None, None, Write::default()).map_err(|e| e.to_string())?;
    Ok(write)
}

/// An object whose only member is `status`, the raw value it wraps: no copy of the body.
struct StatusOnly<'a>(&'a str);

impl<'de> de::Deserializer<'de> for StatusOnly<'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_map(OnlyMember(Some(self.0)))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

/// The one member of [`StatusOnly`], until it is taken.
struct OnlyMember<'a>(Option<&'a str>);

impl<'de> de::MapAccess<'de> for OnlyMember<'de> {
    type Error = serde_json::Error;

    fn next_key_seed<S: de::DeserializeSeed<'de>>(&mut self, seed: S) -> Result<Option<S::Value>, Self::Error> {
        match self.0 {
            Some(_) => seed.deserialize(de::value::BorrowedStrDeserializer::new("status")).map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<S: de::DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, Self::Error> {
        let raw = self.0.take().ok_or_else(|| de::Error::custom("no member left"))?;
        seed.deserialize(&mut serde_json::Deserializer::from_str(raw))
    }
}
