//! The compact bytes the reconciler's cache keeps a status list as (IPs as 4 or 16 bytes, text as
//! a length and its bytes): deterministic, so equal lists are equal bytes and share one copy.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::Entry;

/// `entries` and the count of entries written after them, packed.
pub(crate) fn pack<E: Entry>(entries: &[E], omitted: usize) -> Vec<u8> {
    let mut out = Vec::new();
    put_len(&mut out, omitted);
    for entry in entries {
        entry.pack(&mut out);
    }
    out
}

/// The entries and omitted count [`pack`] packed. The bytes are only ever [`pack`]'s, so an
/// undecodable entry cannot occur; if one did, the list ends before it.
pub(crate) fn unpack<E: Entry>(mut bytes: &[u8]) -> (Vec<E>, usize) {
    let omitted = len(&mut bytes).unwrap_or(0);
    let mut entries = Vec::new();
    while !bytes.is_empty() {
        let Some(entry) = E::unpack(&mut bytes) else {
            debug_assert!(false, "a packed list that does not unpack");
            break;
        };
        entries.push(entry);
    }
    (entries, omitted)
}

/// Appends `n` in LEB128 (7 bits a byte, low first).
pub(crate) fn put_len(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Takes a length [`put_len`] appended.
pub(crate) fn len(bytes: &mut &[u8]) -> Option<usize> {
    let mut n = 0usize;
    for shift in (0..usize::BITS).step_by(7) {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        n |= usize::from(b & 0x7f).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some(n);
        }
    }
    None
}

/// Takes `n` bytes.
pub(crate) fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if bytes.len() < n {
        return None;
    }
    let (head, rest) = bytes.split_at(n);
    *bytes = rest;
    Some(head)
}

/// Takes one byte.
pub(crate) fn byte(bytes: &mut &[u8]) -> Option<u8> {
    take(bytes, 1).map(|b| b[0])
}

/// Appends `s` as its length and bytes.
pub(crate) fn put_str(out: &mut Vec<u8>, s: &str) {
    put_len(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

/// Takes a string [`put_str`] appended.
pub(crate) fn str(bytes: &mut &[u8]) -> Option<String> {
    let n = len(bytes)?;
    String::from_utf8(take(bytes, n)?.to_vec()).ok()
}

const TEXT: u8 = 0;
const V4: u8 = 4;
const V6: u8 = 6;

/// Appends `s` as 4 or 16 bytes when it is an IP spelled as the IP prints (so that it reads
/// back the same), else as text.
pub(crate) fn put_ip_or_str(out: &mut Vec<u8>, s: &str) {
    match s.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) if ip.to_string() == s => {
            out.push(V4);
            out.extend_from_slice(&ip.octets());
        }
        Ok(IpAddr::V6(ip)) if ip.to_string() == s => {
            out.push(V6);
            out.extend_from_slice(&ip.octets());
        }
        _ => {
            out.push(TEXT);
            put_str(out, s);
        }
    }
}

/// Takes a string [`put_ip_or_str`] appended.
pub(crate) fn ip_or_str(bytes: &mut &[u8]) -> Option<String> {
    match byte(bytes)? {
        V4 => Some(Ipv4Addr::from(<[u8; 4]>::try_from(take(bytes, 4)?).ok()?).to_string()),
        V6 => Some(Ipv6Addr::from(<[u8; 16]>::try_from(take(bytes, 16)?).ok()?).to_string()),
        TEXT => str(bytes),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::{Address, PortStatus};
    use crate::kind::gateway::status::GatewayAddress;

    #[test]
    fn lists_read_back_as_written_and_ips_take_their_bytes() {
        let a = |ip: Option<&str>, host: Option<&str>, ports: Vec<PortStatus>| Address {
            ip: ip.map(Into::into),
            hostname: host.map(Into::into),
            ports,
        };
        let port = |port, protocol: &str, error: Option<&str>| PortStatus {
            port,
            protocol: protocol.into(),
            error: error.map(Into::into),
        };
        let list = vec![
            a(Some("192.0.2.1"), None, vec![]),
            a(Some("2001:db8::1"), None, vec![]),
            a(Some("2001:DB8::1"), None, vec![]),
            a(Some("010.0.0.1"), None, vec![]),
            a(Some("::ffff:192.0.2.1"), Some("lb.example.com"), vec![port(-1, "TCP", Some("x")), port(443, "", None)]),
            a(None, Some(&"h".repeat(300)), vec![]),
            a(None, None, vec![]),
        ];
        for omitted in [0, 1, 300, usize::MAX] {
            assert_eq!(unpack::<Address>(&pack(&list, omitted)), (list.clone(), omitted));
        }
        // The omitted count, then the entry: what it has, the IP's tag and its 4 bytes.
        assert_eq!(pack(&list[..1], 0).len(), 1 + 1 + 1 + 4);
        let gw = |kind: &str, value: &str| GatewayAddress { kind: kind.into(), value: value.into() };
        let list =
            vec![gw("IPAddress", "192.0.2.1"), gw("Hostname", "a.example"), gw("example.com/x", "v"), gw("", "")];
        assert_eq!(unpack::<GatewayAddress>(&pack(&list, 2)), (list, 2));
    }
}
