//! A status list as a caller wrote it, read by a bounded visitor: the first entries up to a
//! bound, and a count of the rest, so what a review holds never grows with what it sent.

use serde::Deserialize;

use super::{Address, PortStatus};

/// Most entries of `status.loadBalancer.ingress` kept from a review. Far above any load
/// balancer (a cloud LB has a few; ingress-nginx's node-IP fallback, one per node it runs on);
/// a longer list is counted, not stored, and never canonical. The one cost: a node-IP policy
/// on more than 256 nodes would see every write as a mismatch (and patch it to the same list).
pub(crate) const MAX_ENTRIES: usize = 256;
/// Most `ports` kept across those entries: four per entry, so that ports cannot make the kept
/// entries cost more than the entries themselves.
pub(crate) const MAX_PORTS: usize = 4 * MAX_ENTRIES;

/// `status.loadBalancer.ingress` as a review wrote it, read by a bounded visitor: the first
/// entries, up to [`MAX_ENTRIES`] entries and [`MAX_PORTS`] ports, and how many followed. Every
/// entry is still read and checked as an [`Address`] is (an invalid one is an error wherever it
/// is); those past the bound are dropped as they are read, so memory is bounded by the bound,
/// whatever the caller sent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Entries {
    /// The entries kept, in the order written.
    pub(crate) kept: Vec<Address>,
    /// Entries after the kept ones, not stored.
    pub(crate) omitted: usize,
}

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Entries, A::Error> {
                // No size hint is trusted: the list grows to the bound at most.
                let mut entries = Entries::default();
                let mut ports = 0;
                while let Some(crate::strict::Strict(entry)) = seq.next_element::<crate::strict::Strict<EntryIn>>()? {
                    ports += entry.ports.kept.len();
                    let fits = entries.omitted == 0
                        && entries.kept.len() < MAX_ENTRIES
                        && entry.ports.omitted == 0
                        && ports <= MAX_PORTS;
                    if fits {
                        entries.kept.push(Address { ip: entry.ip, hostname: entry.hostname, ports: entry.ports.kept });
                    } else {
                        entries.omitted += 1;
                    }
                }
                Ok(entries)
            }
        }
        d.deserialize_seq(Visit)
    }
}

/// An entry as [`Address`] reads it, with `ports` bounded.
#[derive(Deserialize)]
#[serde(expecting = "an IngressLoadBalancerIngress object (ip, hostname, ports)")]
struct EntryIn {
    #[serde(default)]
    ip: Option<String>,
    #[serde(default)]
    hostname: Option<String>,
    #[serde(default)]
    ports: Ports,
}

/// `ports` as `crate::strict::objects` reads it, keeping at most [`MAX_PORTS`].
#[derive(Default)]
struct Ports {
    kept: Vec<PortStatus>,
    omitted: usize,
}

impl<'de> Deserialize<'de> for Ports {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Ports;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of objects")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Ports, A::Error> {
                let mut ports = Ports::default();
                while let Some(crate::strict::Strict(port)) = seq.next_element::<crate::strict::Strict<PortStatus>>()? {
                    if ports.kept.len() < MAX_PORTS {
                        ports.kept.push(port);
                    } else {
                        ports.omitted += 1;
                    }
                }
                Ok(ports)
            }
        }
        d.deserialize_seq(Visit)
    }
}
