//! Property tests of address normalisation: canonical lists are idempotent and
//! order-insensitive, and nothing the webhook would write is an entry the API server rejects.

use std::net::IpAddr;

use proptest::prelude::*;

use crate::address::{Address, PortStatus, canonicalize, is_canonical, parse_static_list, same_set};
use crate::names::is_dns1123_subdomain;

fn hostname() -> impl Strategy<Value = String> {
    "[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?){0,3}"
}

fn ip() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(|b| IpAddr::from(b).to_string()),
        any::<[u16; 8]>().prop_map(|s| IpAddr::from(s).to_string()),
        // A few values, so duplicates happen.
        (0u8..4).prop_map(|i| format!("10.0.0.{i}")),
    ]
}

fn port() -> impl Strategy<Value = PortStatus> {
    (
        prop_oneof![Just(80), Just(443), any::<i32>()],
        prop_oneof![Just("TCP"), Just("UDP")],
        proptest::option::of("[a-z]{1,4}"),
    )
        .prop_map(|(port, protocol, error)| PortStatus { port, protocol: protocol.to_owned(), error })
}

fn address() -> impl Strategy<Value = Address> {
    (proptest::option::of(ip()), proptest::option::of(hostname()), proptest::collection::vec(port(), 0..2))
        .prop_filter("an entry has an ip or a hostname", |(ip, host, _)| ip.is_some() || host.is_some())
        .prop_map(|(ip, hostname, ports)| Address { ip, hostname, ports })
}

/// What the API server's validation accepts for one entry (ValidateIngressLoadBalancerStatus):
/// an IP in canonical form and/or a DNS-1123 hostname that is not an IP.
fn api_server_accepts(entry: &Address) -> bool {
    let ip_ok = entry.ip.as_deref().is_none_or(|ip| ip.parse::<IpAddr>().is_ok_and(|p| p.to_string() == ip));
    let host_ok = entry.hostname.as_deref().is_none_or(|h| is_dns1123_subdomain(h) && h.parse::<IpAddr>().is_err());
    (entry.ip.is_some() || entry.hostname.is_some()) && ip_ok && host_ok
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn canonical_is_idempotent(entries in proptest::collection::vec(address(), 0..8)) {
        let once = canonicalize(entries);
        prop_assert_eq!(canonicalize(once.clone()), once);
    }

    /// What `Sources::canonical` relies on to lend a static list instead of copying it.
    #[test]
    fn canonical_lists_are_recognized(entries in proptest::collection::vec(address(), 0..8)) {
        prop_assert!(is_canonical(&canonicalize(entries.clone())));
        prop_assert_eq!(is_canonical(&entries), canonicalize(entries.clone()) == entries);
    }

    #[test]
    fn canonical_ignores_order(
        (entries, shuffled) in proptest::collection::vec(address(), 0..8)
            .prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle()))
    ) {
        let canonical = canonicalize(entries);
        prop_assert_eq!(&canonicalize(shuffled.clone()), &canonical);
        prop_assert!(same_set(&shuffled, &canonical));
    }

    #[test]
    fn static_lists_hold_only_what_the_api_server_accepts(
        items in proptest::collection::vec(prop_oneof![hostname(), ip(), "\\PC{0,12}", "[0-9.:]{1,16}"], 0..6)
    ) {
        let list = items.join(",");
        if let Ok(entries) = parse_static_list(&list) {
            prop_assert!(!entries.is_empty());
            for entry in &entries {
                prop_assert!(api_server_accepts(entry), "{:?} from {:?}", entry, list);
            }
            prop_assert_eq!(canonicalize(entries.clone()), entries);
        }
    }

    #[test]
    fn sanitized_entries_are_accepted_and_stable(
        ip in proptest::option::of(prop_oneof![ip(), "\\PC{0,12}"]),
        hostname in proptest::option::of(prop_oneof![hostname(), "\\PC{0,12}"]),
    ) {
        if let Ok(entry) = (Address { ip, hostname, ports: vec![] }).sanitized() {
            prop_assert!(api_server_accepts(&entry), "{:?}", entry);
            prop_assert_eq!(entry.clone().sanitized(), Ok(entry));
        }
    }
}
