//! Findings: who tried to write which addresses to a governed Ingress, against what the policy
//! says, and what the webhook did about it. Pure values, plus their log line.

pub(crate) mod events;
pub(crate) mod ratelimit;
pub(crate) mod summary;

use std::hash::{Hash, Hasher};

use crate::{
    address::{Address, MAX_SHOWN_BYTES, PortStatus, Written},
    decision::{Action, Verdict},
    kind::{Governed, Kind, Write},
    names::truncate,
    review::{Review, Status, on_status},
};

/// The Events API refuses notes over 1 kB.
const MAX_NOTE: usize = 1024;
/// Longest caller-chosen text field of the log line (the address lists have their own bound).
const MAX_FIELD: usize = 1024;
/// Longest uid kept (request and object): Kubernetes uids are 36 bytes.
const MAX_UID: usize = 128;
/// Longest namespace, name and class kept: DNS-1123 subdomains are at most 253 bytes.
const MAX_NAME: usize = 253;
/// Longest username kept, as the wire reader bounds it.
const MAX_USERNAME: usize = 512;
/// Groups kept of a writer, and the longest group name.
const MAX_GROUPS: usize = 16;
const MAX_GROUP: usize = 256;
/// Entries kept of an address list (the rest are counted; as many as a list shows), and the
/// ports kept of an entry.
pub(crate) const MAX_ENTRIES: usize = crate::address::MAX_SHOWN;
const MAX_PORTS: usize = 4;

/// `text` cut to `max` bytes (on a character boundary, with an ellipsis); kept as it is, without a
/// copy, when it fits.
fn bounded(text: String, max: usize) -> String {
    if text.len() <= max { text } else { truncate(&text, usize::MAX, max) }
}

/// The identity that sent a status write, from `request.userInfo`, bounded.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Writer {
    pub username: String,
    pub groups: Vec<String>,
    /// `(namespace, name)` when the writer is a ServiceAccount.
    pub service_account: Option<(String, String)>,
}

impl Writer {
    pub fn new(username: String, mut groups: Vec<String>) -> Self {
        let username = bounded(username, MAX_USERNAME);
        groups.truncate(MAX_GROUPS);
        // The log line shows 1 KiB of the joined groups; keep no more than that.
        let groups = groups
            .into_iter()
            .map(|g| bounded(g, MAX_GROUP))
            .scan(MAX_FIELD, |room, g| {
                *room = room.checked_sub(g.len())?;
                Some(g)
            })
            .collect();
        let service_account = username
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
            // As the API server names them; a username cut by the reader ends in `…`.
            .filter(|(ns, name)| crate::names::is_dns1123_label(ns) && crate::names::is_dns1123_subdomain(name))
            .map(|(ns, name)| (ns.to_owned(), name.to_owned()));
        Writer { username, groups, service_account }
    }
}

/// An address list as a finding carries it: at most [`MAX_ENTRIES`] entries, each with bounded
/// strings, and how many the list had. What the log line, the Event and the summary show of a
/// list is no more than this, so the queue holds no more either.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Shown {
    /// The first entries, cut.
    pub entries: Vec<Address>,
    /// Entries in the list as written.
    pub total: usize,
}

impl Shown {
    /// The display-sized part of `list`, which `omitted` more entries followed (the reader's
    /// bound, [`crate::address::Entries`]).
    pub fn of(mut list: Vec<Address>, omitted: usize) -> Shown {
        let total = list.len().saturating_add(omitted);
        list.truncate(MAX_ENTRIES);
        // What is shown of a list is at most `MAX_SHOWN_BYTES`: entries past it are only counted.
        let mut used = 0;
        let mut keep = 0;
        for entry in &mut list {
            entry.ip = entry.ip.take().map(|ip| bounded(ip, 64));
            entry.hostname = entry.hostname.take().map(|h| bounded(h, MAX_NAME));
            entry.ports.truncate(MAX_PORTS);
            for PortStatus { protocol, error, .. } in &mut entry.ports {
                *protocol = bounded(std::mem::take(protocol), 16);
                *error = error.take().map(|e| bounded(e, 64));
            }
            let text = |s: &Option<String>| s.as_ref().map_or(0, String::len);
            used += text(&entry.ip) + text(&entry.hostname) + 1;
            if used > MAX_SHOWN_BYTES && keep > 0 {
                break;
            }
            keep += 1;
        }
        list.truncate(keep);
        Shown { entries: list, total }
    }

    /// Bytes held, roughly: what the finding queue counts.
    fn weight(&self) -> usize {
        self.entries
            .iter()
            .map(|a| {
                let text = |s: &Option<String>| s.as_ref().map_or(0, String::len);
                64 + text(&a.ip)
                    + text(&a.hostname)
                    + a.ports.iter().map(|p| 48 + p.protocol.len() + text(&p.error)).sum::<usize>()
            })
            .sum()
    }
}

/// Equal to a list it was made of whole (nothing cut): what tests compare.
impl PartialEq<Vec<Address>> for Shown {
    fn eq(&self, other: &Vec<Address>) -> bool {
        self.total == other.len() && &self.entries == other
    }
}

impl std::fmt::Display for Shown {
    /// As [`Written`] shows a list: `N entries: a,b…(+M more)` once anything was cut.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        Written { kept: &self.entries, omitted: self.total - self.entries.len() }.fmt(f)
    }
}

/// A governed status write whose addresses differ from the canonical ones, cut to what is shown
/// of it (every caller string bounded, address lists by [`Shown`]) before it is queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What was written: an Ingress or a Gateway.
    pub kind: Kind,
    pub uid: String,
    /// `metadata.uid` of the Ingress or Gateway, so `kubectl describe` finds the Event.
    pub object_uid: Option<String>,
    pub namespace: String,
    pub name: String,
    pub class: Option<String>,
    pub policy: String,
    pub writer: Writer,
    pub attempted: Shown,
    pub canonical: Shown,
    /// A hash of the whole attempted list, so repeats of one value are told apart from
    /// different values that are cut alike ([`summary`]).
    pub attempted_hash: u64,
    pub action: Action,
    pub dry_run: bool,
    /// The field the write tried to change that the API server resets
    /// (`review::Forged::field`): the write was judged under the stored value.
    pub forged: Option<&'static str>,
    /// The metadata keys the write changed, which a status write may not (bounded): put back,
    /// refused or reported, as `action` says.
    pub forged_metadata: Option<String>,
}

impl Finding {
    /// The finding of a review, when its verdict is a mismatch; takes both apart rather than
    /// copy them (fewer allocations on the request path).
    pub fn take(review: Review, verdict: Verdict<'_>) -> Option<Finding> {
        let metadata = review.metadata_verdict(&verdict);
        let forged_metadata = metadata.map(|(m, ..)| truncate(&m.to_string(), usize::MAX, MAX_FIELD));
        let (policy, action, canonical) = match (verdict, metadata) {
            (Verdict::Mismatch { policy, action, canonical }, metadata) => {
                let action = match metadata {
                    Some((_, _, Action::Deny)) => Action::Deny,
                    _ => action,
                };
                (policy, action, Some(canonical))
            }
            // The status is canonical, or its canonical value unknown: the finding is the
            // metadata alone, shown against the status as written.
            (_, Some((_, policy, action))) => (policy, action, None),
            _ => return None,
        };
        let forged = review.forged_field();
        fn parts<K: Governed>(
            s: Status<'_, K::Entry, K::Shape>,
        ) -> (Kind, Option<std::borrow::Cow<'_, str>>, Write<Address>) {
            let w = s.write;
            let addresses = K::shown(w.addresses);
            (
                K::KIND,
                s.object_uid,
                Write { addresses, namespace: w.namespace, name: w.name, class: w.class, omitted: w.omitted },
            )
        }
        let (kind, object_uid, w) = on_status!(review.target, K, s => parts::<K>(s), _ => return None);
        let Write { namespace, name, class, addresses, omitted } = w;
        let canonical = canonical.map_or_else(|| addresses.clone(), std::borrow::Cow::into_owned);
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (kind, &addresses, omitted).hash(&mut hasher);
        Some(Finding {
            kind,
            uid: bounded(review.uid.into_owned(), MAX_UID),
            object_uid: object_uid.map(|uid| bounded(uid.into_owned(), MAX_UID)),
            namespace: bounded(namespace, MAX_NAME),
            name: bounded(name, MAX_NAME),
            class: class.map(|c| bounded(c, MAX_NAME)),
            policy: policy.name.clone(),
            writer: Writer::new(review.user.username.into_owned(), review.user.groups),
            attempted_hash: hasher.finish(),
            attempted: Shown::of(addresses, omitted),
            canonical: Shown::of(canonical, 0),
            action,
            dry_run: review.dry_run,
            forged,
            forged_metadata,
        })
    }

    /// Bytes the finding holds, roughly: the finding queue is bounded by their sum.
    pub fn weight(&self) -> usize {
        let opt = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        let w = &self.writer;
        256 + self.uid.len()
            + opt(&self.object_uid)
            + self.namespace.len()
            + self.name.len()
            + opt(&self.class)
            + self.policy.len()
            + 2 * w.username.len()
            + w.groups.iter().map(|g| 24 + g.len()).sum::<usize>()
            + self.attempted.weight()
            + self.canonical.weight()
            + self.forged_metadata.as_ref().map_or(0, String::len)
    }

    /// What was done, as the `action` label of the rogue-writes metric: a dry run changes
    /// nothing, so it is counted apart from the writes that happened.
    pub fn outcome(&self) -> &'static str {
        if self.dry_run { "dry_run" } else { self.action.result() }
    }

    /// What was done, as a verb for people.
    pub fn verb(&self) -> &'static str {
        match self.action {
            Action::Rewrite => "rewritten",
            Action::Deny => "denied",
            Action::Audit => "allowed (audit mode)",
        }
    }

    /// The message of the Kubernetes Event (at most 1 kB, as the events API requires).
    pub fn note(&self) -> String {
        // First, so that a long list cannot cut it off.
        let mut forged = match &self.forged_metadata {
            Some(keys) => {
                format!("forged_metadata {} (status writes keep metadata): ", truncate(keys, usize::MAX, 256))
            }
            None => String::new(),
        };
        if let Some(field) = self.forged {
            forged.push_str(&format!("forged_spec {field} (the API server keeps the stored value): "));
        }
        let note = format!(
            "{forged}{} wrote {} [{}]; policy {} requires [{}]; {}",
            truncate(&self.writer.username, usize::MAX, 256),
            self.kind.field(),
            self.attempted,
            self.policy,
            self.canonical,
            self.verb()
        );
        truncate(&note, usize::MAX, MAX_NOTE)
    }

    /// One WARN event with every field structured, for log pipelines.
    pub fn log(&self) {
        let (sa_namespace, sa_name) = match &self.writer.service_account {
            Some((ns, name)) => (ns.as_str(), name.as_str()),
            None => ("", ""),
        };
        // One line, its object fields named by kind (`ingress_name`, `gateway_name`, ...).
        crate::kind::rogue_event!(
            self.kind,
            { uid = %self.uid, },
            self.namespace,
            self.name,
            truncate(self.class.as_deref().unwrap_or(""), usize::MAX, MAX_FIELD),
            policy = %self.policy,
            writer = %truncate(&self.writer.username, usize::MAX, MAX_FIELD),
            writer_groups = %truncate(&self.writer.groups.join(","), usize::MAX, MAX_FIELD),
            writer_sa_namespace = sa_namespace,
            writer_sa_name = sa_name,
            attempted = %self.attempted,
            canonical = %self.canonical,
            action = self.action.result(),
            dry_run = self.dry_run,
            forged_spec = self.forged.unwrap_or(""),
            forged_metadata = self.forged_metadata.as_deref().unwrap_or(""),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finding of `writer` on Ingress `namespace/name` (metadata.uid `uid`), writing 10.9.9.9 where
    /// policy `p` wants lb.example: for the tests of the reporter and the summariser.
    pub(crate) fn sample(writer: &str, namespace: &str, name: &str, uid: &str) -> Finding {
        let attempted = vec![Address { ip: Some("10.9.9.9".into()), ..Address::default() }];
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        attempted.hash(&mut hasher);
        Finding {
            kind: Kind::Ingress,
            uid: "review-uid".into(),
            object_uid: Some(uid.into()),
            namespace: namespace.into(),
            name: name.into(),
            class: None,
            policy: "p".into(),
            writer: Writer::new(writer.into(), vec![]),
            attempted_hash: hasher.finish(),
            attempted: Shown::of(attempted, 0),
            canonical: Shown::of(vec![Address::hostname("lb.example")], 0),
            action: Action::Rewrite,
            dry_run: false,
            forged: None,
            forged_metadata: None,
        }
    }

    #[test]
    fn writers() {
        let cases = [
            ("system:serviceaccount:ingress-nginx:ingress-nginx", Some(("ingress-nginx", "ingress-nginx"))),
            ("system:serviceaccount:ns:", None),
            ("system:serviceaccount:ns", None),
            ("system:serviceaccount:ns:a:b", None),
            ("kubernetes-admin", None),
            ("system:node:worker-1", None),
        ];
        for (username, want) in cases {
            let writer = Writer::new(username.to_owned(), vec![]);
            let got = writer.service_account.as_ref().map(|(a, b)| (a.as_str(), b.as_str()));
            assert_eq!(got, want, "{username}");
        }
    }

    #[test]
    fn note_is_bounded() {
        let many: Vec<Address> = (0..200).map(|i| Address::hostname(format!("host-{i}.example.com"))).collect();
        let finding = Finding {
            kind: Kind::Ingress,
            uid: "u".into(),
            object_uid: None,
            namespace: "ns".into(),
            name: "ing".into(),
            class: None,
            policy: "p".into(),
            writer: Writer::new("rogue".into(), vec![]),
            attempted: Shown::of(many, 0),
            canonical: Shown::of(vec![Address::hostname("lb.example")], 0),
            attempted_hash: 0,
            action: Action::Rewrite,
            dry_run: false,
            forged: None,
            forged_metadata: None,
        };
        let note = finding.note();
        assert!(
            note.len() <= 1024
                && note.starts_with("rogue wrote status.loadBalancer.ingress [200 entries: host-0.example.com,")
        );
        let forged = Finding { forged_metadata: Some("metadata.labels[x],".repeat(100)), ..finding.clone() };
        let note = forged.note();
        assert!(note.len() <= 1024 && note.starts_with("forged_metadata metadata.labels[x],"), "{note}");
        assert!(note.contains(" (status writes keep metadata): rogue wrote status.loadBalancer.ingress ["), "{note}");
        let empty = Finding { attempted: Shown::default(), ..finding };
        assert_eq!(
            empty.note(),
            "rogue wrote status.loadBalancer.ingress [<none>]; policy p requires [lb.example]; rewritten"
        );
    }

    #[test]
    fn findings_carry_the_bounded_display_only() {
        let many: Vec<Address> = (0..100_000)
            .map(|i| Address { ip: Some(format!("10.0.{}.{}", i / 256, i % 256)), ..Address::default() })
            .collect();
        let shown = Shown::of(many, 0);
        assert_eq!((shown.entries.len(), shown.total), (MAX_ENTRIES, 100_000));
        let first: Vec<String> = (0..MAX_ENTRIES).map(|i| format!("10.0.0.{i}")).collect();
        let more = 100_000 - MAX_ENTRIES;
        assert_eq!(shown.to_string(), format!("100000 entries: {}…(+{more} more)", first.join(",")));
        let long = Address { hostname: Some("h".repeat(1 << 20)), ..Address::default() };
        let shown = Shown::of(vec![long], 0);
        assert_eq!(shown.entries[0].hostname.as_ref().map(String::len), Some(MAX_NAME));
        let writer = Writer::new("w".repeat(1 << 20), vec!["g".repeat(1 << 20); 1000]);
        assert_eq!(writer.username.len(), MAX_USERNAME);
        assert_eq!(writer.groups.len(), MAX_FIELD / MAX_GROUP, "1 KiB of groups");
        assert!(writer.groups.iter().all(|g| g.len() <= MAX_GROUP));
        let many = Writer::new("w".into(), (0..100).map(|i| format!("g{i}")).collect());
        assert_eq!(many.groups.len(), MAX_GROUPS);
        let mut finding = sample("x", "ns", "web", "uid");
        finding.writer = writer;
        finding.attempted = shown;
        let fat = Address { hostname: Some("h".repeat(253)), ip: Some("i".repeat(64)), ..Address::default() };
        finding.canonical = Shown::of(vec![fat; 100], 0);
        assert_eq!(finding.canonical.entries.len(), 3, "1 KiB of entries is all a list shows");
        assert!(finding.weight() < 8 * 1024, "{}", finding.weight());
        assert!(finding.note().len() <= MAX_NOTE);
    }
}
