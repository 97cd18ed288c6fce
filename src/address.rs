//! Load-balancer address entries: validation against the API server's rules, static lists, and the
//! canonical form (deduplicated, sorted in ingress-nginx's order).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// One entry of `status.loadBalancer.ingress` (`IngressLoadBalancerIngress`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(expecting = "an IngressLoadBalancerIngress object (ip, hostname, ports)")]
pub struct Address {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "crate::strict::objects")]
    pub ports: Vec<PortStatus>,
}

/// One entry of `ports` (`IngressPortStatus`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(expecting = "an IngressPortStatus object (port, protocol, error)")]
pub struct PortStatus {
    pub port: i32,
    pub protocol: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A list of entries as logs, warnings, Events and audit annotations show it: `a,b`, or `<none>`;
/// at most [`MAX_SHOWN`] entries and [`MAX_SHOWN_BYTES`] bytes (a caller chooses how many), then `…(+N more)`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Addresses<'a, E = Address>(pub &'a [E]);

/// A list of which the reader kept the first entries ([`Entries`]): shown as [`Addresses`], or as
/// `N entries: a,b,…(+M more)` when some were left out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Written<'a, E = Address> {
    /// The entries kept, in the order written.
    pub kept: &'a [E],
    /// How many entries followed them.
    pub omitted: usize,
}

/// Most entries shown of a list.
pub(crate) const MAX_SHOWN: usize = 20;
/// Most bytes of entries shown of a list (the `…(+N more)` suffix comes on top).
pub(crate) const MAX_SHOWN_BYTES: usize = 1024;

impl<E: std::fmt::Display> std::fmt::Display for Addresses<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        show(f, self.0, 0)
    }
}

impl<E: std::fmt::Display> std::fmt::Display for Written<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.omitted > 0 {
            write!(f, "{} entries: ", self.kept.len().saturating_add(self.omitted))?;
        }
        show(f, self.kept, self.omitted)
    }
}

/// `list` shown within the bounds of [`Addresses`]; `omitted` entries after it count as more.
fn show(f: &mut std::fmt::Formatter<'_>, list: &[impl std::fmt::Display], omitted: usize) -> std::fmt::Result {
    if list.is_empty() && omitted == 0 {
        return f.write_str("<none>");
    }
    let mut used = 0;
    let mut shown = 0;
    for entry in list.iter().take(MAX_SHOWN) {
        // Formatted only as far as the budget: a 3 MiB hostname costs a kilobyte here.
        let text = Capped::text(entry, MAX_SHOWN_BYTES + 1);
        let separator = usize::from(shown > 0);
        if used + separator + text.len() > MAX_SHOWN_BYTES {
            if shown == 0 {
                // One entry longer than the whole budget: its start still says what it was.
                f.write_str(&crate::names::truncate(&text, usize::MAX, MAX_SHOWN_BYTES))?;
                shown = 1;
            }
            break;
        }
        if separator == 1 {
            f.write_str(",")?;
        }
        f.write_str(&text)?;
        used += separator + text.len();
        shown += 1;
    }
    let more = (list.len() - shown).saturating_add(omitted);
    if more > 0 {
        write!(f, "…(+{more} more)")?;
    }
    Ok(())
}

/// Text formatted up to a byte budget, then cut off on a character boundary: what lies beyond is never copied.
struct Capped {
    text: String,
    room: usize,
}

impl Capped {
    fn text(value: &impl std::fmt::Display, room: usize) -> String {
        use std::fmt::Write as _;
        let mut capped = Capped { text: String::new(), room };
        // An error only means the budget ran out.
        let _ = write!(capped, "{value}");
        capped.text
    }
}

impl std::fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let left = self.room - self.text.len();
        if s.len() <= left {
            self.text.push_str(s);
            return Ok(());
        }
        let cut = (0..=left).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
        self.text.push_str(&s[..cut]);
        self.room = self.text.len();
        Err(std::fmt::Error)
    }
}

/// Why an address cannot be written to an Ingress status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("empty address")]
    Empty,
    #[error(
        "{0:?} is neither an IP address nor a DNS-1123 hostname (lowercase letters, digits, '-' and '.', at most 253 characters)"
    )]
    Invalid(String),
}

impl Address {
    pub fn ip(ip: IpAddr) -> Self {
        Address { ip: Some(ip.to_string()), ..Default::default() }
    }

    pub fn hostname(name: impl Into<String>) -> Self {
        Address { hostname: Some(name.into()), ..Default::default() }
    }

    /// An address from a string that is either an IP literal or a hostname, as
    /// `--publish-status-address` items and `ExternalName` values are.
    pub fn parse(item: &str) -> Result<Self, AddressError> {
        if item.is_empty() {
            return Err(AddressError::Empty);
        }
        // Rust's parser is strict: no leading zeros, no zone, no surrounding brackets.
        if let Ok(ip) = item.parse() {
            return Ok(Address::ip(ip));
        }
        if is_valid_hostname(item) {
            return Ok(Address::hostname(item));
        }
        Err(AddressError::Invalid(item.to_owned()))
    }

    /// Re-validates an entry taken from another object (a Service status) and puts its IP in
    /// canonical text form, so it cannot make the API server reject our patch.
    pub fn sanitized(self) -> Result<Self, AddressError> {
        let ip = match self.ip.as_deref().filter(|s| !s.is_empty()) {
            Some(text) => Some(text.parse::<IpAddr>().map_err(|_| AddressError::Invalid(text.to_owned()))?),
            None => None,
        };
        let hostname = match self.hostname.filter(|s| !s.is_empty()) {
            Some(name) if is_valid_hostname(&name) => Some(name),
            Some(name) => return Err(AddressError::Invalid(name)),
            None => None,
        };
        if ip.is_none() && hostname.is_none() {
            return Err(AddressError::Empty);
        }
        Ok(Address { ip: ip.map(|ip| ip.to_string()), hostname, ports: self.ports })
    }

    fn sort_key(&self) -> (&str, &str) {
        (self.hostname.as_deref().unwrap_or(""), self.ip.as_deref().unwrap_or(""))
    }
}

/// `hostname (ip)`, `hostname` or `ip`: how an entry reads in logs and warnings. An entry read
/// from a review is unvalidated, so control characters are escaped: a written hostname must not
/// be able to start a new log line or move a terminal's cursor.
impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = |f: &mut std::fmt::Formatter<'_>, v: &str| crate::names::write_escaped(f, v);
        match (&self.hostname, &self.ip) {
            (Some(h), Some(i)) => {
                text(f, h)?;
                f.write_str(" (")?;
                text(f, i)?;
                f.write_str(")")
            }
            (Some(h), None) => text(f, h),
            (None, Some(i)) => text(f, i),
            (None, None) => f.write_str("<empty>"),
        }
    }
}

/// What the API server accepts as `hostname`: a DNS-1123 subdomain that Go's lenient IP parser
/// would not read as an IPv4 address (it allows leading zeros, so `010.0.0.1` is an IP to it).
fn is_valid_hostname(name: &str) -> bool {
    crate::names::is_dns1123_subdomain(name) && !looks_like_ipv4(name)
}

fn looks_like_ipv4(name: &str) -> bool {
    let parts: Vec<&str> = name.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|p| {
            (1..=3).contains(&p.len())
                && p.bytes().all(|b| b.is_ascii_digit())
                && p.parse::<u16>().is_ok_and(|v| v <= 255)
        })
}

/// Parses a `--publish-status-address` value: comma separated, spaces trimmed, empty items
/// dropped. Errors carry the offending item.
pub(crate) fn parse_static_list(list: &str) -> Result<Vec<Address>, AddressError> {
    let entries = list
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(Address::parse)
        .collect::<Result<Vec<_>, _>>()?;
    if entries.is_empty() {
        return Err(AddressError::Empty);
    }
    Ok(canonicalize(entries))
}

/// Drops duplicates and sorts by hostname then IP string (ingress-nginx's
/// `lessLoadBalancerIngress`), so IP-only entries come first.
pub(crate) fn canonicalize(mut entries: Vec<Address>) -> Vec<Address> {
    entries.sort_by(canonical_order);
    entries.dedup();
    entries
}

/// Whether `entries` is what [`canonicalize`] makes of it: strictly in its order.
pub(crate) fn is_canonical(entries: &[Address]) -> bool {
    entries.windows(2).all(|pair| canonical_order(&pair[0], &pair[1]) == std::cmp::Ordering::Less)
}

fn canonical_order(a: &Address, b: &Address) -> std::cmp::Ordering {
    // Ports break ties completely (not only by count), so the result does not depend on the
    // order the entries came in (found by the property tests).
    a.sort_key().cmp(&b.sort_key()).then_with(|| a.ports.len().cmp(&b.ports.len())).then_with(|| a.ports.cmp(&b.ports))
}

/// Whether a written list equals the canonical one, ignoring order and duplicates. The written
/// entries are compared by reference: nothing is copied.
pub(crate) fn same_set(written: &[Address], canonical: &[Address]) -> bool {
    if written.len() == canonical.len() && written == canonical {
        return true;
    }
    let mut sorted: Vec<&Address> = written.iter().collect();
    sorted.sort_by(|a, b| canonical_order(a, b));
    sorted.dedup();
    sorted.len() == canonical.len() && sorted.iter().zip(canonical).all(|(a, b)| *a == b)
}

mod entries;
#[cfg(test)]
pub(crate) use entries::MAX_PORTS;
pub(crate) use entries::{Entries, EntryIn, MAX_ENTRIES};

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Address {
        Address::ip(s.parse().unwrap())
    }
    fn host(s: &str) -> Address {
        Address::hostname(s)
    }

    #[test]
    fn static_lists() {
        let cases: &[(&str, &str, Result<Vec<Address>, AddressError>)] = &[
            ("single ip", "10.0.0.1", Ok(vec![ip("10.0.0.1")])),
            ("spaces and trailing comma", " 10.0.0.2 , 10.0.0.1 ,", Ok(vec![ip("10.0.0.1"), ip("10.0.0.2")])),
            ("empty items dropped", "10.0.0.1,,  ,", Ok(vec![ip("10.0.0.1")])),
            ("hostname after ips", "lb.example.com,10.0.0.1", Ok(vec![ip("10.0.0.1"), host("lb.example.com")])),
            ("ipv6 canonical form", "2001:DB8:0::1", Ok(vec![ip("2001:db8::1")])),
            ("duplicates dropped", "10.0.0.1,10.0.0.1", Ok(vec![ip("10.0.0.1")])),
            ("only commas", " , ,", Err(AddressError::Empty)),
            ("empty", "", Err(AddressError::Empty)),
            ("uppercase hostname", "LB.example.com", Err(AddressError::Invalid("LB.example.com".into()))),
            ("underscore", "a_b.example", Err(AddressError::Invalid("a_b.example".into()))),
            ("leading zeros: neither ip nor hostname", "010.0.0.1", Err(AddressError::Invalid("010.0.0.1".into()))),
            ("digits that are not an ip are a hostname", "1.2.3.4.example", Ok(vec![host("1.2.3.4.example")])),
            ("cidr", "10.0.0.0/8", Err(AddressError::Invalid("10.0.0.0/8".into()))),
            ("url", "http://lb", Err(AddressError::Invalid("http://lb".into()))),
        ];
        for (name, input, want) in cases {
            assert_eq!(&parse_static_list(input), want, "case {name}");
        }
    }

    #[test]
    fn sorting_follows_ingress_nginx() {
        // ingress-nginx status_test.go TestStandardizeLoadBalancerIngresses: hostname first, then IP.
        let sorted = canonicalize(vec![
            host("b.example"),
            ip("10.0.0.2"),
            Address { ip: Some("10.0.0.9".into()), hostname: Some("a.example".into()), ports: vec![] },
            ip("10.0.0.10"),
            host("a.example"),
        ]);
        let shown: Vec<String> = sorted.iter().map(Address::to_string).collect();
        assert_eq!(shown, ["10.0.0.10", "10.0.0.2", "a.example", "a.example (10.0.0.9)", "b.example"]);
    }

    #[test]
    fn equality_ignores_order_and_duplicates() {
        let canonical = canonicalize(vec![ip("10.0.0.1"), host("a.example")]);
        assert!(same_set(&[host("a.example"), ip("10.0.0.1")], &canonical));
        assert!(same_set(&[ip("10.0.0.1"), host("a.example"), ip("10.0.0.1")], &canonical));
        assert!(!same_set(&[ip("10.0.0.1")], &canonical));
        assert!(!same_set(&[], &canonical));
        let with_port =
            Address { ports: vec![PortStatus { port: 80, protocol: "TCP".into(), error: None }], ..ip("10.0.0.1") };
        assert!(!same_set(&[with_port, host("a.example")], &canonical), "ports count as a difference");
    }

    #[test]
    fn sanitized_rejects_what_the_api_server_rejects() {
        assert_eq!(Address { ip: Some("2001:DB8::1".into()), ..Default::default() }.sanitized(), Ok(ip("2001:db8::1")));
        assert_eq!(Address::default().sanitized(), Err(AddressError::Empty));
        assert_eq!(
            Address { ip: Some("None".into()), ..Default::default() }.sanitized(),
            Err(AddressError::Invalid("None".into()))
        );
        assert_eq!(host("10.0.0.1").sanitized(), Err(AddressError::Invalid("10.0.0.1".into())));
        assert_eq!(host("Bad_Host").sanitized(), Err(AddressError::Invalid("Bad_Host".into())));
    }

    #[test]
    fn lists_shown_are_bounded() {
        let many: Vec<Address> = (0..10_000).map(|i| host(&format!("h{i}.example"))).collect();
        let text = Addresses(&many).to_string();
        assert!(text.starts_with("h0.example,h1.example,"), "{text}");
        assert!(text.ends_with("…(+9980 more)"), "{text}");
        assert_eq!(text.matches(',').count(), MAX_SHOWN - 1);

        let long: Vec<Address> = (0..100).map(|i| host(&format!("{i}-{}", "a".repeat(200)))).collect();
        let text = Addresses(&long).to_string();
        assert!(text.len() <= MAX_SHOWN_BYTES + "…(+100 more)".len(), "{} bytes", text.len());
        assert!(text.ends_with("…(+95 more)"), "{text}");

        let huge = [host(&"b".repeat(1 << 20)), ip("10.0.0.1")];
        let text = Addresses(&huge).to_string();
        assert!(text.len() <= MAX_SHOWN_BYTES + 20 && text.ends_with("…(+1 more)"), "{text}");

        assert_eq!(Addresses(&many[..2]).to_string(), "h0.example,h1.example");
        assert_eq!(Addresses::<Address>(&[]).to_string(), "<none>");
    }

    #[test]
    fn lists_past_the_reader_bound_say_how_many() {
        let kept = [ip("10.0.0.1"), Address::default()];
        assert_eq!(Written { kept: &kept, omitted: 0 }.to_string(), "10.0.0.1,<empty>");
        assert_eq!(Written { kept: &kept, omitted: 5 }.to_string(), "7 entries: 10.0.0.1,<empty>…(+5 more)");
        assert_eq!(Written::<Address> { kept: &[], omitted: 3 }.to_string(), "3 entries: …(+3 more)");
        // A huge entry is formatted only as far as it is shown.
        let huge = [host(&format!("{}\n", "h".repeat(3 << 20)))];
        let text = Addresses(&huge).to_string();
        assert!(text.len() <= MAX_SHOWN_BYTES && text.starts_with("hhh") && text.ends_with('…'), "{}", text.len());
    }

    #[test]
    fn same_set_needs_no_copy_and_agrees_with_canonicalize() {
        let canonical = canonicalize(vec![ip("10.0.0.2"), host("a.example"), ip("10.0.0.1")]);
        let lists = [
            vec![host("a.example"), ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.1")],
            vec![ip("10.0.0.1"), ip("10.0.0.2")],
            vec![ip("10.0.0.1"), ip("10.0.0.2"), host("a.example"), host("b.example")],
            vec![],
        ];
        for list in lists {
            assert_eq!(same_set(&list, &canonical), canonicalize(list.clone()) == canonical, "{list:?}");
        }
    }

    #[test]
    fn control_characters_are_escaped_when_shown() {
        let forged =
            Address { hostname: Some("a\nINFO forged\r\x1b[31m".into()), ip: Some("1\t".into()), ports: vec![] };
        assert_eq!(forged.to_string(), "a\\nINFO forged\\r\\u{1b}[31m (1\\t)");
    }
}
