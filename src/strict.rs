//! Objects only where the schema has objects. serde's derived `Deserialize` for a struct also
//! accepts a JSON array of its fields in order, so `status: []` would read as an empty status
//! and `[["10.9.9.9"]]` as an address; the helpers here make those fields errors. They are used
//! as `#[serde(deserialize_with = ...)]` on the fields of the wire types.

use std::{fmt, marker::PhantomData};

use serde::{
    Deserialize, Deserializer,
    de::{SeqAccess, Visitor},
    forward_to_deserialize_any,
};

/// A deserializer that reads a struct only from a map (a JSON object).
struct MapOnly<D>(D);

impl<'de, D: Deserializer<'de>> Deserializer<'de> for MapOnly<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.0.deserialize_any(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_map(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        // serde_json's RawValue is read through here, by name.
        self.0.deserialize_newtype_struct(name, visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.0.deserialize_option(visitor)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

/// A `T` read as [`MapOnly`] does.
pub(crate) struct Strict<T>(pub(crate) T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Strict<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(MapOnly(d)).map(Strict)
    }
}

/// A struct field that must be a JSON object.
pub(crate) fn object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    T::deserialize(MapOnly(d))
}

/// An optional struct field that must be a JSON object or `null`.
pub(crate) fn optional_object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Ok(Option::<Strict<T>>::deserialize(d)?.map(|s| s.0))
}

/// A list whose items must be JSON objects.
pub(crate) fn objects<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    struct Items<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for Items<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of objects")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            // Bounded by the body size; no size hint is trusted for the allocation.
            let mut items = Vec::new();
            while let Some(Strict(item)) = seq.next_element::<Strict<T>>()? {
                items.push(item);
            }
            Ok(items)
        }
    }
    d.deserialize_seq(Items(PhantomData))
}

/// `T` from JSON text, objects only at the top.
pub(crate) fn from_str<'a, T: Deserialize<'a>>(text: &'a str) -> serde_json::Result<T> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = T::deserialize(MapOnly(&mut de))?;
    de.end()?;
    Ok(value)
}

/// [`serde_path_to_error`] over a [`MapOnly`] deserializer: the same strictness, with the path.
pub(crate) fn path_to_error<'a, T: Deserialize<'a>>(
    body: &'a [u8],
) -> Result<T, serde_path_to_error::Error<serde_json::Error>> {
    let mut de = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(MapOnly(&mut de))
}
