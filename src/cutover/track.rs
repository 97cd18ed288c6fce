//! What `cutover` follows: the Ingresses of the plan, which of them are canonical for the new
//! source yet, and, for those that are not, why (drift, fight, unresolved). A pure state
//! machine fed with judgements; the watch that feeds it is in `follow`.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::address::{Address, Addresses};

/// An Ingress, as `(namespace, name)`.
pub(crate) type Key = (String, String);

/// One observation of an Ingress of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Judged {
    /// Its stored status is canonical for the new source.
    Canonical,
    /// It is not; with the field managers that wrote its status, latest first.
    Off { stored: Vec<Address>, canonical: Vec<Address>, writers: Vec<String> },
    /// The new source gives no addresses now.
    Unresolved(String),
    /// No policy governs it now, or another one does (its class or namespace changed).
    NotGoverned,
    /// Deleted.
    Gone,
}

/// What an observation changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    None,
    /// Newly canonical.
    Moved,
    /// Was canonical, is not any more: another writer undid it.
    Undone,
    /// Left the plan (deleted or no longer governed by the policy).
    Left,
}

/// Why an Ingress has not moved, as the timeout reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Reason {
    /// Off canonical and never moved: not patched (yet).
    Drift,
    /// Moved, then written back by another writer.
    Fight,
    /// The new source has no addresses.
    Unresolved,
}

/// One Ingress that has not moved, for the timeout report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct NotMoved {
    pub ingress: String,
    pub reason: Reason,
    pub detail: String,
}

#[derive(Debug, Clone)]
struct Entry {
    moved: bool,
    undone: bool,
    last: Option<Judged>,
}

/// The Ingresses of the plan and how far they have moved.
#[derive(Debug, Clone)]
pub(crate) struct Tracker {
    entries: BTreeMap<Key, Entry>,
    moved: usize,
    newest: Option<Key>,
}

impl Tracker {
    pub(crate) fn new(keys: impl IntoIterator<Item = Key>) -> Tracker {
        let entries = keys.into_iter().map(|k| (k, Entry { moved: false, undone: false, last: None })).collect();
        Tracker { entries, moved: 0, newest: None }
    }

    /// Whether `key` is one of the plan's Ingresses (still).
    pub(crate) fn follows(&self, key: &Key) -> bool {
        self.entries.contains_key(key)
    }

    /// Records an observation of `key`; anything not in the plan is ignored.
    pub(crate) fn observe(&mut self, key: &Key, judged: Judged) -> Change {
        let Some(entry) = self.entries.get_mut(key) else { return Change::None };
        match judged {
            Judged::Gone | Judged::NotGoverned => {
                if entry.moved {
                    self.moved -= 1;
                }
                self.entries.remove(key);
                Change::Left
            }
            Judged::Canonical => {
                entry.last = Some(Judged::Canonical);
                if entry.moved {
                    return Change::None;
                }
                entry.moved = true;
                self.moved += 1;
                self.newest = Some(key.clone());
                Change::Moved
            }
            other => {
                entry.last = Some(other);
                if !entry.moved {
                    return Change::None;
                }
                entry.moved = false;
                entry.undone = true;
                self.moved -= 1;
                Change::Undone
            }
        }
    }

    pub(crate) fn moved(&self) -> usize {
        self.moved
    }

    pub(crate) fn total(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn done(&self) -> bool {
        self.moved == self.entries.len()
    }

    /// The Ingress that moved last, `namespace/name`.
    pub(crate) fn newest(&self) -> Option<String> {
        self.newest.as_ref().map(|(ns, name)| format!("{ns}/{name}"))
    }

    /// Every Ingress that has not moved, and why, in name order.
    pub(crate) fn not_moved(&self) -> Vec<NotMoved> {
        self.entries
            .iter()
            .filter(|(_, e)| !e.moved)
            .map(|((ns, name), e)| {
                let (reason, detail) = match &e.last {
                    Some(Judged::Unresolved(why)) => (Reason::Unresolved, why.clone()),
                    Some(Judged::Off { stored, canonical, writers }) => {
                        let by = if writers.is_empty() {
                            String::new()
                        } else {
                            format!(", status writers (latest first): {}", writers.join(", "))
                        };
                        let (reason, what) = if e.undone {
                            (Reason::Fight, "moved, then written back")
                        } else {
                            (Reason::Drift, "not patched yet")
                        };
                        (
                            reason,
                            format!("{what}: stored {}, canonical {}{by}", Addresses(stored), Addresses(canonical)),
                        )
                    }
                    _ => (Reason::Drift, "not seen since the plan".to_owned()),
                };
                NotMoved { ingress: format!("{ns}/{name}"), reason, detail }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        ("ns".to_owned(), name.to_owned())
    }

    fn off(writer: &str) -> Judged {
        let ip = |ip: &str| Address { ip: Some(ip.to_owned()), ..Address::default() };
        Judged::Off {
            stored: vec![ip("192.0.2.1")],
            canonical: vec![ip("192.0.2.2")],
            writers: vec![writer.to_owned()],
        }
    }

    #[test]
    fn moves_are_counted_once_and_undone_moves_are_fights() {
        let mut t = Tracker::new([key("a"), key("b"), key("c"), key("d")]);
        assert_eq!((t.moved(), t.total(), t.done()), (0, 4, false));
        assert_eq!(t.observe(&key("a"), off("nginx")), Change::None);
        assert_eq!(t.observe(&key("a"), Judged::Canonical), Change::Moved);
        assert_eq!(t.observe(&key("a"), Judged::Canonical), Change::None);
        assert_eq!(t.observe(&key("b"), Judged::Canonical), Change::Moved);
        assert_eq!(t.newest().as_deref(), Some("ns/b"));
        assert_eq!(t.observe(&key("b"), off("traefik")), Change::Undone);
        assert_eq!(t.observe(&key("c"), Judged::Unresolved("Service n/b not found".into())), Change::None);
        assert_eq!(t.observe(&key("zz"), Judged::Canonical), Change::None, "not in the plan");
        assert_eq!((t.moved(), t.total()), (1, 4));
        let why: Vec<(String, Reason)> = t.not_moved().into_iter().map(|n| (n.ingress, n.reason)).collect();
        assert_eq!(
            why,
            [("ns/b".into(), Reason::Fight), ("ns/c".into(), Reason::Unresolved), ("ns/d".into(), Reason::Drift)]
        );
        assert!(t.not_moved()[0].detail.contains("status writers (latest first): traefik"), "{:?}", t.not_moved());
        // Deleted or no longer governed: out of the plan, counted or not.
        assert_eq!(t.observe(&key("a"), Judged::Gone), Change::Left);
        assert_eq!(t.observe(&key("c"), Judged::NotGoverned), Change::Left);
        assert_eq!((t.moved(), t.total()), (0, 2));
        assert_eq!(t.observe(&key("b"), Judged::Canonical), Change::Moved);
        assert_eq!(t.observe(&key("d"), Judged::Canonical), Change::Moved);
        assert!(t.done());
        assert!(t.not_moved().is_empty());
    }
}
