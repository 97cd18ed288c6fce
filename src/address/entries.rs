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

/// `status.loadBalancer.ingress` as a review wrote it: the first entries, up to [`MAX_ENTRIES`]
/// entries and [`MAX_PORTS`] ports, and how many followed.
pub(crate) type Entries = crate::strict::Bounded<Address>;

impl crate::strict::Bound for Address {
    type In = EntryIn;
    /// Ports kept so far.
    type Budget = usize;
    const EXPECTING: &'static str = "a sequence";
    const NULL_IS_EMPTY: bool = false;

    fn keep(entry: EntryIn, kept: usize, ports: &mut usize) -> Option<Address> {
        *ports += entry.ports.kept.len();
        let fits = kept < MAX_ENTRIES && entry.ports.omitted == 0 && *ports <= MAX_PORTS;
        fits.then_some(Address { ip: entry.ip, hostname: entry.hostname, ports: entry.ports.kept })
    }
}

/// An entry as [`Address`] reads it, with `ports` bounded.
#[derive(Deserialize)]
#[serde(expecting = "an IngressLoadBalancerIngress object (ip, hostname, ports)")]
pub(crate) struct EntryIn {
    #[serde(default)]
    pub(crate) ip: Option<String>,
    #[serde(default)]
    pub(crate) hostname: Option<String>,
    #[serde(default)]
    pub(crate) ports: crate::strict::Bounded<PortStatus>,
}

/// `ports` as `crate::strict::objects` reads it, keeping at most [`MAX_PORTS`].
impl crate::strict::Bound for PortStatus {
    type In = PortStatus;
    type Budget = ();
    const EXPECTING: &'static str = "a list of objects";
    const NULL_IS_EMPTY: bool = false;

    fn keep(port: PortStatus, kept: usize, (): &mut ()) -> Option<PortStatus> {
        (kept < MAX_PORTS).then_some(port)
    }
}
