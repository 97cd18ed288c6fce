//! The metadata a status write carries against the stored object's (on a kind whose status
//! strategy stores it as sent), compared with bounded memory (a keyed digest per entry, at most
//! [`MAX_ITEMS`] per field), what a patch puts back ([`Metadata`]), and the policy's answer to it.

use std::{
    borrow::Cow,
    fmt,
    hash::{BuildHasher, Hash, Hasher},
    sync::OnceLock,
};

use serde::{
    Deserialize, Deserializer,
    de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor},
};
use serde_json::value::RawValue;

use crate::{
    decision::{Action, Verdict},
    policy::Policy,
};

use crate::names::{escape_control, truncate};

/// Entries of one field compared one by one; a field with more is compared as a whole (its
/// digest), and named without its keys.
pub(crate) const MAX_ITEMS: usize = 256;
/// Changed keys named in a finding; the rest are counted.
pub(crate) const MAX_NAMED: usize = 8;
/// Longest key shown, in bytes (a label or annotation key is at most 317).
const MAX_KEY_SHOWN: usize = 253;
/// Most bytes of stored values a patch puts back. The API server holds annotations to 256 KiB;
/// past this, a write cannot be mended without a patch as large as the review, so `enforce`
/// refuses it instead ([`Metadata::restorable`]).
pub(crate) const MAX_RESTORE: usize = 192 << 10;

/// `metadata` of an object in a review: its `uid`, and the raw JSON of the fields a status
/// write may change (`None`: absent or `null`). Read alike for every kind and for `oldObject`.
#[derive(Deserialize, Default, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase", expecting = "an ObjectMeta object")]
pub(crate) struct MetaIn<'a> {
    #[serde(default, borrow)]
    pub(crate) uid: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "raw")]
    pub(crate) annotations: Option<&'a str>,
    #[serde(default, borrow, deserialize_with = "raw")]
    pub(crate) labels: Option<&'a str>,
    #[serde(default, borrow, deserialize_with = "raw")]
    pub(crate) owner_references: Option<&'a str>,
    #[serde(default, borrow, deserialize_with = "raw")]
    pub(crate) finalizers: Option<&'a str>,
}

/// A member kept as its JSON text, unparsed (`null` is none).
fn raw<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de str>, D::Error> {
    Ok(Option::<&'de RawValue>::deserialize(d)?.map(RawValue::get))
}

impl<'a> MetaIn<'a> {
    fn field(&self, field: Field) -> Option<&'a str> {
        match field {
            Field::Annotations => self.annotations,
            Field::Labels => self.labels,
            Field::OwnerReferences => self.owner_references,
            Field::Finalizers => self.finalizers,
        }
    }
}

/// A metadata field a status write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    Annotations,
    Labels,
    OwnerReferences,
    Finalizers,
}

impl Field {
    pub(crate) const ALL: [Field; 4] = [Field::Annotations, Field::Labels, Field::OwnerReferences, Field::Finalizers];

    /// The field as findings, metrics and messages name it.
    pub fn path(self) -> &'static str {
        match self {
            Field::Annotations => "metadata.annotations",
            Field::Labels => "metadata.labels",
            Field::OwnerReferences => "metadata.ownerReferences",
            Field::Finalizers => "metadata.finalizers",
        }
    }

    /// What its JSON is: a map of strings, a list of strings, a list of objects.
    fn shape(self) -> Shape {
        match self {
            Field::Annotations | Field::Labels => Shape::Map,
            Field::Finalizers => Shape::Strings,
            Field::OwnerReferences => Shape::List,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Map,
    Strings,
    List,
}

/// What a status write changed in the metadata, against the stored object: each changed field
/// with the stored value that puts it back, and the changed keys to name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata<'a> {
    /// Each changed field and its stored JSON (`None`: the stored object has none, so the
    /// written one is removed), in [`Field::ALL`]'s order.
    pub(crate) restore: Vec<(Field, Option<&'a str>)>,
    /// Whether the written object has a `metadata` object at all (a patch adds one first if not).
    pub(crate) written_has_metadata: bool,
    /// The first [`MAX_NAMED`] changed keys as shown (`metadata.labels[team]`; a field whose
    /// entries cannot be told apart is named alone), escaped and cut.
    pub(crate) named: Vec<String>,
    /// How many more changed keys there are.
    pub(crate) more: usize,
}

/// A metadata field that is not what its type says (`metadata.labels: invalid type: ...`).
#[derive(Debug, thiserror::Error)]
#[error("{object}.{path}: {error}")]
pub struct MetadataError {
    object: &'static str,
    path: &'static str,
    error: String,
}

impl<'a> Metadata<'a> {
    /// What `written` (the object's metadata, `None` if it has none) changed against `stored`
    /// (`oldObject`'s): `None` when nothing.
    pub(crate) fn compare(written: Option<&MetaIn<'a>>, stored: &MetaIn<'a>) -> Result<Option<Self>, MetadataError> {
        let empty = MetaIn::default();
        let object = written.unwrap_or(&empty);
        let mut changed =
            Metadata { restore: Vec::new(), written_has_metadata: written.is_some(), named: Vec::new(), more: 0 };
        for field in Field::ALL {
            let (new, old) = (object.field(field), stored.field(field));
            let read = |raw: Option<&str>, object| {
                Items::read(raw, field.shape()).map_err(|e| MetadataError {
                    object,
                    path: field.path(),
                    error: truncate(&e.to_string(), usize::MAX, 1024),
                })
            };
            let (new_items, old_items) = (read(new, "request.object")?, read(old, "request.oldObject")?);
            if new_items.same(&old_items) {
                continue;
            }
            changed.restore.push((field, old.filter(|_| old_items.count > 0)));
            changed.name(field, new, old, &new_items, &old_items);
        }
        Ok((!changed.restore.is_empty()).then_some(changed))
    }

    /// Names the keys of `field` that differ, or the field alone where its entries cannot be
    /// told apart (too many of them, a list of objects, or the same entries in another order).
    fn name(&mut self, field: Field, new: Option<&str>, old: Option<&str>, new_items: &Items, old_items: &Items) {
        let mut keys: Vec<u64> = match (new_items.entries.as_ref(), old_items.entries.as_ref()) {
            (Some(n), Some(o)) if field.shape() != Shape::List => symmetric_difference(n, o),
            _ => Vec::new(),
        };
        if keys.is_empty() {
            self.push(field.path().to_owned());
            return;
        }
        keys.sort_unstable();
        keys.dedup();
        let mut shown = Vec::new();
        for raw in [new, old].into_iter().flatten() {
            let _ = Names { shape: field.shape(), wanted: &keys, shown: &mut shown }.collect(raw);
        }
        let total = keys.len();
        for key in shown.iter().take(total) {
            self.push(format!("{}[{key}]", field.path()));
        }
        self.more += total.saturating_sub(shown.len());
    }

    fn push(&mut self, name: String) {
        if self.named.len() < MAX_NAMED {
            self.named.push(name);
        } else {
            self.more += 1;
        }
    }

    /// The changed fields, for the counter.
    pub fn fields(&self) -> impl Iterator<Item = Field> + '_ {
        self.restore.iter().map(|(field, _)| *field)
    }

    /// The first changed key, as a refusal names it.
    pub fn first(&self) -> &str {
        self.named.first().map_or("metadata", String::as_str)
    }

    /// Whether the stored values are small enough to be put back by a patch.
    pub fn restorable(&self) -> bool {
        self.restore.iter().map(|(_, raw)| raw.map_or(0, str::len)).sum::<usize>() <= MAX_RESTORE
    }

    /// The JSON patch operations that put the stored values back, each followed by a comma.
    pub(crate) fn write_ops(&self, out: &mut Vec<u8>) {
        if !self.written_has_metadata {
            out.extend_from_slice(br#"{"op":"add","path":"/metadata","value":{}},"#);
        }
        for (field, stored) in &self.restore {
            let op: &[u8] = if stored.is_some() { b"add" } else { b"remove" };
            out.extend_from_slice(br#"{"op":""#);
            out.extend_from_slice(op);
            out.extend_from_slice(br#"","path":"/"#);
            out.extend(field.path().bytes().map(|b| if b == b'.' { b'/' } else { b }));
            out.push(b'"');
            if let Some(value) = stored {
                out.extend_from_slice(br#","value":"#);
                out.extend_from_slice(value.as_bytes());
            }
            out.extend_from_slice(b"},");
        }
    }
}

impl fmt::Display for Metadata<'_> {
    /// The changed keys, comma-separated, with how many more.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.named.join(","))?;
        if self.more > 0 {
            write!(f, ",+{} more", self.more)?;
        }
        Ok(())
    }
}

/// The keys in one sorted list of entries and not in the other with the same content.
fn symmetric_difference(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<u64> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x.0 == y.0 => {
                if x.1 != y.1 {
                    out.push(x.0);
                }
                (i, j) = (i + 1, j + 1);
            }
            (x, Some(y)) if x.is_none_or(|x| y.0 < x.0) => {
                out.push(y.0);
                j += 1;
            }
            (Some(x), _) => {
                out.push(x.0);
                i += 1;
            }
            _ => break,
        }
    }
    out
}

/// One process-wide key: a caller cannot choose entries whose digests collide.
fn hasher() -> impl Hasher {
    static KEYS: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    KEYS.get_or_init(Default::default).build_hasher()
}

/// The keyed digest of `value`.
fn digest(value: impl Hash) -> u64 {
    let mut h = hasher();
    value.hash(&mut h);
    h.finish()
}

/// One field's entries, digested: (key, content) per entry, sorted by key, while there are at
/// most [`MAX_ITEMS`]; always the count and a digest of the whole (order-insensitive for a map,
/// in order for a list).
#[derive(Debug, Default)]
struct Items {
    entries: Option<Vec<(u64, u64)>>,
    count: usize,
    whole: u64,
}

impl Items {
    /// `raw` (absent is empty) read as `shape`.
    fn read(raw: Option<&str>, shape: Shape) -> serde_json::Result<Items> {
        let Some(raw) = raw else { return Ok(Items { entries: Some(Vec::new()), ..Items::default() }) };
        let mut de = serde_json::Deserializer::from_str(raw);
        let items = de.deserialize_any(ItemsVisitor { shape })?;
        de.end()?;
        Ok(items)
    }

    fn same(&self, other: &Items) -> bool {
        self.count == other.count && self.whole == other.whole
    }

    fn add(&mut self, key: u64, content: u64, ordered: bool) {
        self.count += 1;
        let entry = digest((key, content));
        self.whole = if ordered { digest((self.whole, entry)) } else { self.whole.wrapping_add(entry) };
        match &mut self.entries {
            Some(entries) if entries.len() < MAX_ITEMS => entries.push((key, content)),
            entries => *entries = None,
        }
    }

    fn sorted(mut self) -> Items {
        if let Some(entries) = &mut self.entries {
            entries.sort_unstable();
        }
        self
    }
}

struct ItemsVisitor {
    shape: Shape,
}

impl<'de> Visitor<'de> for ItemsVisitor {
    type Value = Items;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(match self.shape {
            Shape::Map => "a map of strings",
            Shape::Strings => "a list of strings",
            Shape::List => "a list of objects",
        })
    }

    fn visit_unit<E>(self) -> Result<Items, E> {
        Ok(Items { entries: Some(Vec::new()), ..Items::default() })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Items, A::Error> {
        if self.shape != Shape::Map {
            return Err(de::Error::invalid_type(de::Unexpected::Map, &self));
        }
        let mut items = Items { entries: Some(Vec::new()), ..Items::default() };
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            let content = map.next_value_seed(Digest)?;
            items.add(digest(&*key), content, false);
        }
        Ok(items.sorted())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Items, A::Error> {
        if self.shape == Shape::Map {
            return Err(de::Error::invalid_type(de::Unexpected::Seq, &self));
        }
        let mut items = Items { entries: Some(Vec::new()), ..Items::default() };
        while let Some(content) = seq.next_element_seed(Digest)? {
            items.add(content, content, true);
        }
        Ok(items.sorted())
    }
}

/// The keyed digest of any JSON value, equal for equal values: members of an object in any
/// order, numbers by their text. Recursion is serde_json's, bounded by its depth limit.
struct Digest;

impl<'de> DeserializeSeed<'de> for Digest {
    type Value = u64;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<u64, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Digest {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<u64, E> {
        Ok(tagged(1, v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<u64, E> {
        Ok(tagged(2, v.to_string()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<u64, E> {
        Ok(tagged(2, v.to_string()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<u64, E> {
        Ok(tagged(2, v.to_string()))
    }
    fn visit_str<E>(self, v: &str) -> Result<u64, E> {
        Ok(tagged(3, v))
    }
    fn visit_unit<E>(self) -> Result<u64, E> {
        Ok(tagged(4, ()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<u64, A::Error> {
        let mut h = hasher();
        5u8.hash(&mut h);
        while let Some(item) = seq.next_element_seed(Digest)? {
            item.hash(&mut h);
        }
        Ok(h.finish())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<u64, A::Error> {
        let mut sum = 0u64;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            let value = map.next_value_seed(Digest)?;
            sum = sum.wrapping_add(digest((&*key, value)));
        }
        Ok(tagged(6, sum))
    }
}

fn tagged(tag: u8, value: impl Hash) -> u64 {
    digest((tag, value))
}

/// A second reading of one field, for the text of the keys (or strings) whose digests are
/// `wanted`, escaped and cut; only for a write that changed them.
struct Names<'w> {
    shape: Shape,
    wanted: &'w [u64],
    shown: &'w mut Vec<String>,
}

impl Names<'_> {
    fn collect(self, raw: &str) -> serde_json::Result<()> {
        let mut de = serde_json::Deserializer::from_str(raw);
        de.deserialize_any(self)
    }

    fn found(&mut self, text: &str, digest: u64) {
        if self.shown.len() < MAX_NAMED && self.wanted.binary_search(&digest).is_ok() {
            let text = truncate(&escape_control(text), usize::MAX, MAX_KEY_SHOWN);
            if !self.shown.contains(&text) {
                self.shown.push(text);
            }
        }
    }
}

impl<'de> Visitor<'de> for Names<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map or a list")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            map.next_value::<IgnoredAny>()?;
            self.found(&key, digest(&*key));
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        if self.shape != Shape::Strings {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(());
        }
        while let Some(item) = seq.next_element::<Cow<'de, str>>()? {
            self.found(&item, tagged(3, &*item));
        }
        Ok(())
    }
}

impl super::Review<'_> {
    /// The governing policy's answer to the metadata this write changed: `None` when it changed
    /// none, no policy governs the object, or a trusted writer wrote it (its write stands, as the
    /// admission policy lets it). `enforce` puts it back, or refuses it past `MAX_RESTORE`.
    pub fn metadata_verdict<'p>(&self, verdict: &Verdict<'p>) -> Option<(&Metadata<'_>, &'p Policy, Action)> {
        if matches!(verdict, Verdict::Trusted { .. }) {
            return None;
        }
        let metadata = self.forged_metadata()?;
        let policy = verdict.policy()?;
        let action = match Action::from(policy.mode) {
            Action::Rewrite if !metadata.restorable() => Action::Deny,
            action => action,
        };
        Some((metadata, policy, action))
    }

    /// What the answer did, as `admission_requests_total{result}` counts it: the verdict's
    /// result, unless the metadata's answer is the stronger one.
    pub fn result(&self, verdict: &Verdict<'_>) -> &'static str {
        let Some((_, _, action)) = self.metadata_verdict(verdict) else { return verdict.result() };
        match verdict {
            _ if action == Action::Deny => action.result(),
            Verdict::Mismatch { .. } | Verdict::Unresolved { deny: true, .. } => verdict.result(),
            _ => action.result(),
        }
    }
}

#[cfg(test)]
mod tests;
