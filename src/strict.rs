//! Objects only where the schema has objects: serde's derived `Deserialize` for a struct also
//! accepts a JSON array of its fields, so `status: []` would read as an empty status; these
//! helpers (`#[serde(deserialize_with = ...)]`) make such fields errors.

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

/// A list read by a bounded visitor: the entries [`Bound::keep`] lets in, and a count of the rest.
/// Every entry is still read and checked; those past the bound are dropped as they are read, so
/// what is held never grows with what was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bounded<T> {
    /// The entries kept, in the order written.
    pub(crate) kept: Vec<T>,
    /// Entries after the kept ones, not stored.
    pub(crate) omitted: usize,
}

impl<T> Default for Bounded<T> {
    fn default() -> Self {
        Bounded { kept: Vec::new(), omitted: 0 }
    }
}

/// How the entries of a [`Bounded`] list are read, and which are kept (a prefix of the list).
pub(crate) trait Bound: Sized {
    /// One entry as the wire has it.
    type In: for<'de> Deserialize<'de>;
    /// What the bound counts across the kept entries beside their number.
    type Budget: Default;
    /// What the list is, as a type error says it.
    const EXPECTING: &'static str;
    /// Whether `null` reads as an empty list (else it is an error).
    const NULL_IS_EMPTY: bool;

    /// `entry` as kept, when it fits after `kept` entries that spent `budget`; `None`: only counted.
    fn keep(entry: Self::In, kept: usize, budget: &mut Self::Budget) -> Option<Self>;
}

impl<'de, T: Bound> Deserialize<'de> for Bounded<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<T>(PhantomData<T>);
        impl<'de, T: Bound> Visitor<'de> for Visit<T> {
            type Value = Bounded<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(T::EXPECTING)
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Bounded<T>, E> {
                match T::NULL_IS_EMPTY {
                    true => Ok(Bounded::default()),
                    false => Err(E::invalid_type(serde::de::Unexpected::Unit, &self)),
                }
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bounded<T>, A::Error> {
                // No size hint is trusted: the list grows to the bound at most.
                let (mut list, mut budget) = (Bounded::default(), T::Budget::default());
                while let Some(Strict(entry)) = seq.next_element::<Strict<T::In>>()? {
                    match (list.omitted == 0).then(|| T::keep(entry, list.kept.len(), &mut budget)).flatten() {
                        Some(kept) => list.kept.push(kept),
                        None => list.omitted += 1,
                    }
                }
                Ok(list)
            }
        }
        d.deserialize_any(Visit(PhantomData))
    }
}
