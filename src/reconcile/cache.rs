//! What the reconciler keeps per watched object, compact: the namespace and the status list
//! ([`packed`]) interned, so every object behind one load balancer shares one list; the
//! resourceVersion and uid as numbers when the API server spelled them. The [`Write`] `decide`
//! reads is rebuilt for each judgement ([`Stored::write`]).

use std::{
    borrow::Cow,
    collections::HashSet,
    hash::Hash,
    marker::PhantomData,
    sync::{Arc, Mutex},
};

use crate::kind::{Entry, Leaned, Write, packed};

/// An object's key: its namespace (interned) and name.
pub(crate) type Key = (Arc<str>, Box<str>);

/// Values shared by every object that holds an equal one. Unheld ones are swept when the set
/// has doubled since the last sweep: O(1) per insertion, within twice what is held.
#[derive(Debug)]
pub(crate) struct Pool<T: ?Sized> {
    set: HashSet<Arc<T>>,
    sweep_at: usize,
}

impl<T: ?Sized> Default for Pool<T> {
    fn default() -> Self {
        Pool { set: HashSet::new(), sweep_at: 64 }
    }
}

impl<T: ?Sized + Eq + Hash> Pool<T> {
    /// The shared copy of `value`, made from it when none is held.
    fn get(&mut self, value: &T) -> Arc<T>
    where
        for<'a> Arc<T>: From<&'a T>,
    {
        self.shared(value).unwrap_or_else(|| self.insert(Arc::from(value)))
    }

    /// The shared copy of `value`, if one is held.
    fn shared(&self, value: &T) -> Option<Arc<T>> {
        self.set.get(value).cloned()
    }

    /// Shares `value`, which no held one equals.
    fn insert(&mut self, value: Arc<T>) -> Arc<T> {
        if self.set.len() >= self.sweep_at {
            self.set.retain(|v| Arc::strong_count(v) > 1);
            self.sweep_at = (self.set.len() * 2).max(64);
        }
        self.set.insert(value.clone());
        value
    }

    /// Values held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.set.len()
    }
}

/// What few objects differ in, shared: the class and the status writers.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Meta {
    class: Option<Arc<str>>,
    /// The field managers that wrote the status, latest first (bounded).
    status_managers: Box<[Box<str>]>,
}

/// The interned values of one kind's cache.
#[derive(Debug)]
pub(crate) struct Interner<E> {
    strings: Pool<str>,
    lists: Pool<[u8]>,
    metas: Pool<Meta>,
    entry: PhantomData<fn() -> E>,
}

impl<E> Default for Interner<E> {
    fn default() -> Self {
        Interner { strings: Pool::default(), lists: Pool::default(), metas: Pool::default(), entry: PhantomData }
    }
}

impl<E: Entry> Interner<E> {
    /// The compact form of a lean object: its key and what is stored under it.
    pub(crate) fn store(&mut self, leaned: Leaned<E>) -> (Key, Stored<E>) {
        let Leaned { write, resource_version, uid, status_managers } = leaned;
        let key = (self.strings.get(&write.namespace), write.name.into_boxed_str());
        let meta = Meta {
            class: write.class.as_deref().map(|c| self.strings.get(c)),
            status_managers: status_managers.into_iter().map(String::into_boxed_str).collect(),
        };
        let meta = self.metas.shared(&meta).unwrap_or_else(|| self.metas.insert(Arc::new(meta)));
        let list = self.lists.get(&packed::pack(&write.addresses, write.omitted)[..]);
        let numbers = (resource_version.as_deref().and_then(numeric), uid.as_deref().and_then(Uid::parse));
        let (resource_version, uid, rare) = match numbers {
            (Some(rv), Some(uid)) => (rv, uid, None),
            _ => {
                let rare = Rare {
                    resource_version: resource_version.map(String::into_boxed_str),
                    uid: uid.as_deref().map(Uid::of),
                };
                (0, [0; 16], Some(Box::new(rare)))
            }
        };
        (key, Stored { meta, list, resource_version, uid, rare, entry: PhantomData })
    }
}

/// `s` as a number, when it is spelled as the number prints (so that it reads back the same).
fn numeric(s: &str) -> Option<u64> {
    let canonical = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    canonical.then(|| s.parse().ok()).flatten()
}

/// What [`Interner::store`]'s caller shares it through: the watch and the work loop's patches.
pub(crate) type Shared<E> = Mutex<Interner<E>>;

/// A `metadata.uid`: 16 bytes when it is a UUID (the API server's), else as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Uid {
    Uuid([u8; 16]),
    Other(Box<str>),
}

impl Uid {
    pub(crate) fn of(s: &str) -> Uid {
        Uid::parse(s).map_or_else(|| Uid::Other(s.into()), Uid::Uuid)
    }

    /// The 16 bytes of a canonical (lower-case, hyphenated 8-4-4-4-12) UUID; `None` otherwise.
    fn parse(s: &str) -> Option<[u8; 16]> {
        let b = s.as_bytes();
        if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
            return None;
        }
        let mut out = [0u8; 16];
        let mut digits = b.iter().filter(|&&c| c != b'-');
        for byte in &mut out {
            let mut v = 0u8;
            for _ in 0..2 {
                let c = *digits.next()?;
                let d = match c {
                    b'0'..=b'9' => c - b'0',
                    b'a'..=b'f' => c - b'a' + 10,
                    _ => return None,
                };
                v = v << 4 | d;
            }
            *byte = v;
        }
        Some(out)
    }

    /// Whether `s` spells this uid.
    pub(crate) fn is(&self, s: &str) -> bool {
        match self {
            Uid::Uuid(bytes) => Uid::parse(s).is_some_and(|b| &b == bytes),
            Uid::Other(own) => **own == *s,
        }
    }
}

/// What is kept per object beside its [`Key`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored<E> {
    meta: Arc<Meta>,
    /// The status list and how many entries were written past the bound, [`packed`].
    list: Arc<[u8]>,
    /// `metadata.resourceVersion` as a number, unless `rare` holds it.
    resource_version: u64,
    /// `metadata.uid` as a UUID's bytes, unless `rare` holds it.
    uid: [u8; 16],
    /// Both, as written, when either is not spelled as the API server spells them.
    rare: Option<Box<Rare>>,
    entry: PhantomData<fn() -> E>,
}

/// A resourceVersion and uid kept as written.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rare {
    resource_version: Option<Box<str>>,
    uid: Option<Uid>,
}

impl<E: Entry> Stored<E> {
    /// The write `decide` reads, for one judgement.
    pub(crate) fn write(&self, key: &Key) -> Write<E> {
        let (addresses, omitted) = packed::unpack(&self.list);
        Write {
            namespace: key.0.to_string(),
            name: key.1.to_string(),
            class: self.meta.class.as_deref().map(str::to_owned),
            addresses,
            omitted,
        }
    }

    /// The class the object names.
    pub(crate) fn class(&self) -> Option<&str> {
        self.meta.class.as_deref()
    }

    /// The stored status list.
    pub(crate) fn addresses(&self) -> Vec<E> {
        packed::unpack(&self.list).0
    }

    pub(crate) fn resource_version(&self) -> Option<Cow<'_, str>> {
        match &self.rare {
            Some(rare) => rare.resource_version.as_deref().map(Cow::Borrowed),
            None => Some(Cow::Owned(self.resource_version.to_string())),
        }
    }

    pub(crate) fn status_managers(&self) -> impl Iterator<Item = &str> {
        self.meta.status_managers.iter().map(|m| &**m)
    }

    /// `metadata.uid`, for the known-object index the audit trail checks Events against.
    pub(crate) fn uid(&self) -> Option<Uid> {
        match &self.rare {
            Some(rare) => rare.uid.clone(),
            None => Some(Uid::Uuid(self.uid)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::Address;

    #[test]
    fn a_uuid_is_16_bytes_and_reads_back_the_same() {
        let s = "0f8fad5b-d9cb-469f-a165-70867728950e";
        let uid = Uid::of(s);
        assert!(matches!(uid, Uid::Uuid(_)));
        assert!(uid.is(s) && !uid.is("0f8fad5b-d9cb-469f-a165-70867728950f"));
        for other in ["uid-1", "0F8FAD5B-D9CB-469F-A165-70867728950E", "0f8fad5bxd9cb-469f-a165-70867728950e"] {
            let uid = Uid::of(other);
            assert!(matches!(uid, Uid::Other(_)), "{other}");
            assert!(uid.is(other), "kept as written: {other}");
        }
    }

    #[test]
    fn a_map_slot_is_88_bytes_and_odd_spellings_read_back() {
        // The slot is paid for every held object, at 8/7 to 16/7 of it (hashbrown's fill).
        assert!(std::mem::size_of::<(Key, Stored<Address>)>() <= 88);
        let mut i = Interner::<Address>::default();
        for (rv, uid) in
            [("42", "0f8fad5b-d9cb-469f-a165-70867728950e"), ("042", "u"), ("", "x"), ("18446744073709551616", "y")]
        {
            let leaned = Leaned {
                write: Write::default(),
                resource_version: Some(rv.into()),
                uid: Some(uid.into()),
                status_managers: vec![],
            };
            let (_, stored) = i.store(leaned);
            assert_eq!(stored.resource_version().as_deref(), Some(rv));
            assert!(stored.uid().is_some_and(|u| u.is(uid)));
        }
        let (_, stored) =
            i.store(Leaned { write: Write::default(), resource_version: None, uid: None, status_managers: vec![] });
        assert_eq!((stored.resource_version(), stored.uid()), (None, None));
    }

    #[test]
    fn equal_values_are_shared_and_unheld_ones_swept() {
        let mut i = Interner::<Address>::default();
        let leaned = |ns: &str, name: &str| Leaned {
            write: Write {
                namespace: ns.into(),
                name: name.into(),
                class: Some("nginx".into()),
                addresses: vec![Address { ip: Some("192.0.2.1".into()), ..Address::default() }],
                omitted: 0,
            },
            resource_version: Some("7".into()),
            uid: None,
            status_managers: vec!["nginx".into()],
        };
        let (a, sa) = i.store(leaned("ns", "a"));
        let (b, sb) = i.store(leaned("ns", "b"));
        assert!(Arc::ptr_eq(&a.0, &b.0) && Arc::ptr_eq(&sa.list, &sb.list));
        assert_eq!(sa.write(&a), leaned("ns", "a").write);
        drop((a, sa, b, sb));
        for n in 0..200 {
            i.store(leaned(&format!("ns-{n}"), "x"));
        }
        assert!(i.strings.len() <= 128, "unheld namespaces are swept: {}", i.strings.len());
    }
}
