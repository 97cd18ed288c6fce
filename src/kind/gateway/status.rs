//! A Gateway's `status` as the guard reads it, bounded at the wire: `addresses`, validated as the
//! CRD validates them, and the `Programmed` condition. Caller strings are cut to [`MAX_TEXT`]
//! bytes as they are read, so a 1 MiB value costs what a 253-byte one does.

use std::{borrow::Cow, fmt};

use serde::{Deserialize, Deserializer, Serialize, de};

use crate::address::Address;

/// Most entries of `status.addresses`: the CRD's `maxItems`. A canonical set of more is
/// unresolved, and a stored list of more is counted, not kept.
pub(crate) const MAX_ADDRESSES: usize = 16;
/// The CRD's `maxLength` of an entry's `type` and `value` (and of a controller name).
pub(crate) const MAX_VALUE: usize = 253;
/// Bytes kept of any caller string: one more than any valid value, so a cut value stays
/// invalid (it ends in `…`) and displays bounded.
pub(crate) const MAX_TEXT: usize = MAX_VALUE + 3;

/// The address types of the standard channel; any other must be domain-prefixed.
pub(crate) const IP_ADDRESS: &str = "IPAddress";
pub(crate) const HOSTNAME: &str = "Hostname";
const NAMED_ADDRESS: &str = "NamedAddress";

/// One entry of `status.addresses`; serialized as the API writes it (`check -o json`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub(crate) struct GatewayAddress {
    /// `type`, `IPAddress` when absent (the CRD's default).
    #[serde(rename = "type")]
    pub kind: String,
    /// `value`.
    pub value: String,
}

/// Why an entry of `status.addresses` is one the CRD would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatewayAddressError {
    /// `type` is empty, too long, or neither a standard type nor domain-prefixed.
    #[error("type {0:?} is not IPAddress, Hostname, NamedAddress or a domain-prefixed type (example.com/Kind)")]
    Type(String),
    /// `value` is empty or over 253 bytes.
    #[error("value {0:?} must have 1 to 253 characters")]
    Length(String),
    /// An `IPAddress` entry whose value is no IP.
    #[error("IPAddress value {0:?} is not an IPv4 or IPv6 address")]
    Ip(String),
    /// A `Hostname` entry whose value is no (optionally wildcard) DNS-1123 name.
    #[error("Hostname value {0:?} is not a DNS-1123 hostname (optionally starting with *.)")]
    Hostname(String),
}

impl GatewayAddress {
    /// An `IPAddress` entry.
    pub(crate) fn ip(ip: &str) -> Self {
        GatewayAddress { kind: IP_ADDRESS.to_owned(), value: ip.to_owned() }
    }

    /// A `Hostname` entry.
    pub(crate) fn hostname(name: &str) -> Self {
        GatewayAddress { kind: HOSTNAME.to_owned(), value: name.to_owned() }
    }

    /// Checks the entry as the CRD (`sigs.k8s.io/gateway-api` v1.6, `GatewayStatusAddress`) does.
    pub(crate) fn validate(&self) -> Result<(), GatewayAddressError> {
        if !is_address_type(&self.kind) {
            return Err(GatewayAddressError::Type(self.kind.clone()));
        }
        if self.value.is_empty() || self.value.len() > MAX_VALUE {
            return Err(GatewayAddressError::Length(self.value.clone()));
        }
        match self.kind.as_str() {
            IP_ADDRESS if self.value.parse::<std::net::IpAddr>().is_err() => {
                Err(GatewayAddressError::Ip(self.value.clone()))
            }
            HOSTNAME if !is_gateway_hostname(&self.value) => Err(GatewayAddressError::Hostname(self.value.clone())),
            _ => Ok(()),
        }
    }

    /// The Ingress status entry this address stands for (a hostname re-validated as an Ingress's,
    /// which may not be a wildcard); any other type than IPAddress and Hostname is an `Err`.
    pub(crate) fn to_ingress(&self) -> Result<Address, ToIngressError> {
        self.validate().map_err(ToIngressError::Invalid)?;
        let address = match self.kind.as_str() {
            IP_ADDRESS => Address { ip: Some(self.value.clone()), ..Address::default() },
            HOSTNAME => Address::hostname(self.value.clone()),
            other => return Err(ToIngressError::Type(other.to_owned())),
        };
        address.sanitized().map_err(ToIngressError::Ingress)
    }

    /// Gateway entries for canonical Ingress-style addresses: each IP, then each hostname, of
    /// every entry in order (ports have no place in a Gateway status).
    pub(crate) fn from_addresses(addresses: &[Address]) -> Vec<GatewayAddress> {
        let mut out = Vec::with_capacity(addresses.len());
        for a in addresses {
            out.extend(a.ip.as_deref().map(GatewayAddress::ip));
            out.extend(a.hostname.as_deref().map(GatewayAddress::hostname));
        }
        out
    }
}

impl fmt::Display for GatewayAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !matches!(self.kind.as_str(), IP_ADDRESS | HOSTNAME) {
            crate::names::write_escaped(f, &self.kind)?;
            f.write_str("=")?;
        }
        crate::names::write_escaped(f, &self.value)
    }
}

/// Why a Gateway address cannot be an Ingress status entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToIngressError {
    /// The entry is one the Gateway CRD refuses.
    #[error(transparent)]
    Invalid(GatewayAddressError),
    /// A type other than IPAddress and Hostname.
    #[error("address type {0:?} has no Ingress equivalent (only IPAddress and Hostname do)")]
    Type(String),
    /// A Gateway hostname the Ingress status refuses (a wildcard, or one that reads as an IP).
    #[error("cannot be an Ingress status entry: {0}")]
    Ingress(crate::address::AddressError),
}

/// The CRD's type pattern: a standard type, or `DOMAIN/PATH` with a DNS-1123 domain.
fn is_address_type(kind: &str) -> bool {
    if kind.is_empty() || kind.len() > MAX_VALUE {
        return false;
    }
    if matches!(kind, IP_ADDRESS | HOSTNAME | NAMED_ADDRESS) {
        return true;
    }
    let Some((domain, path)) = kind.split_once('/') else { return false };
    let path_char = |b: u8| b.is_ascii_alphanumeric() || b"/-._~%!$&'()*+,;=:".contains(&b);
    crate::names::is_dns1123_subdomain(domain) && !path.is_empty() && path.bytes().all(path_char)
}

/// The CRD's Hostname rule: an optional `*.` and dot-separated DNS-1123 labels.
fn is_gateway_hostname(value: &str) -> bool {
    let name = value.strip_prefix("*.").unwrap_or(value);
    crate::names::is_dns1123_subdomain(name)
}

/// Whether `name` is a GatewayClass `controllerName`: a domain-prefixed path (the CRD's pattern).
pub(crate) fn is_controller_name(name: &str) -> bool {
    name.len() <= MAX_VALUE && is_address_type(name) && name.contains('/')
}

/// `status.addresses`: the first [`MAX_ADDRESSES`] entries, and a count of the rest; `null` is none.
pub(crate) type Addresses = crate::strict::Bounded<GatewayAddress>;

/// One entry of `status.addresses` as the wire has it, its strings cut as read.
#[derive(Deserialize)]
pub(crate) struct EntryIn {
    #[serde(default, rename = "type", deserialize_with = "bounded_text")]
    kind: Option<String>,
    #[serde(default, deserialize_with = "bounded_text")]
    value: Option<String>,
}

impl crate::strict::Bound for GatewayAddress {
    type In = EntryIn;
    type Budget = ();
    const EXPECTING: &'static str = "a list of {type, value} objects";
    const NULL_IS_EMPTY: bool = true;

    fn keep(entry: EntryIn, kept: usize, (): &mut ()) -> Option<GatewayAddress> {
        (kept < MAX_ADDRESSES).then(|| GatewayAddress {
            kind: entry.kind.unwrap_or_else(|| IP_ADDRESS.to_owned()),
            value: entry.value.unwrap_or_default(),
        })
    }
}

/// The `Programmed` condition of a Gateway's `status.conditions`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Programmed {
    /// No `Programmed` condition.
    #[default]
    Absent,
    /// `status: "True"`.
    True,
    /// `status` `False` or `Unknown` (cut to [`MAX_TEXT`] bytes), with its `reason` (cut to 64 bytes).
    Not {
        /// The condition's status.
        status: String,
        /// The condition's reason.
        reason: String,
    },
    /// `status: "True"`, but for an older generation than `metadata.generation`: the addresses
    /// may be those of the old spec, so not Programmed.
    Stale {
        /// The condition's `observedGeneration`.
        observed: i64,
        /// The Gateway's `metadata.generation`.
        generation: i64,
    },
}

/// The `Programmed` condition as read, before it is judged against the Gateway's generation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ProgrammedCondition {
    pub(crate) programmed: Programmed,
    /// The condition's `observedGeneration`, if it has one.
    pub(crate) observed_generation: Option<i64>,
}

impl ProgrammedCondition {
    /// The condition against the Gateway's `metadata.generation` ([`Programmed::Stale`]); without
    /// either generation, as written.
    pub(crate) fn judged(self, generation: Option<i64>) -> Programmed {
        match (self.programmed, self.observed_generation, generation) {
            (Programmed::True, Some(observed), Some(generation)) if observed < generation => {
                Programmed::Stale { observed, generation }
            }
            (programmed, _, _) => programmed,
        }
    }
}

impl fmt::Display for Programmed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Programmed::Absent => f.write_str("has no Programmed condition"),
            Programmed::True => f.write_str("is Programmed"),
            Programmed::Not { status, reason } => {
                f.write_str("is not Programmed (Programmed: ")?;
                crate::names::write_escaped(f, status)?;
                if !reason.is_empty() {
                    f.write_str(", reason ")?;
                    crate::names::write_escaped(f, reason)?;
                }
                f.write_str(")")
            }
            Programmed::Stale { observed, generation } => write!(
                f,
                "is Programmed only for generation {observed}, not its current generation {generation} (a stale condition)"
            ),
        }
    }
}

impl<'de> Deserialize<'de> for ProgrammedCondition {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct ConditionIn<'a> {
            #[serde(default, rename = "type", borrow)]
            kind: Option<Cow<'a, str>>,
            #[serde(default, deserialize_with = "bounded_text")]
            status: Option<String>,
            #[serde(default, deserialize_with = "bounded_text")]
            reason: Option<String>,
            // An int64 the CRD's schema checks before the API server stores it.
            #[serde(default, rename = "observedGeneration")]
            observed_generation: Option<i64>,
        }
        struct Visit;
        impl<'de> de::Visitor<'de> for Visit {
            type Value = ProgrammedCondition;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of conditions")
            }
            fn visit_unit<E>(self) -> Result<ProgrammedCondition, E> {
                Ok(ProgrammedCondition::default())
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<ProgrammedCondition, A::Error> {
                // Every condition is read, none is held: the first Programmed one counts (the
                // CRD keys the list by type, so a stored Gateway has one at most).
                let mut found = None;
                while let Some(crate::strict::Strict(c)) =
                    seq.next_element::<crate::strict::Strict<ConditionIn<'de>>>()?
                {
                    if found.is_none() && c.kind.as_deref() == Some("Programmed") {
                        let status = c.status.unwrap_or_default();
                        let programmed = if status == "True" {
                            Programmed::True
                        } else {
                            let reason = crate::names::truncate(&c.reason.unwrap_or_default(), usize::MAX, 64);
                            Programmed::Not { status, reason }
                        };
                        found = Some(ProgrammedCondition { programmed, observed_generation: c.observed_generation });
                    }
                }
                Ok(found.unwrap_or_default())
            }
        }
        d.deserialize_any(Visit)
    }
}

/// A string cut to [`MAX_TEXT`] bytes as it is read (`null` is none).
pub(crate) fn bounded_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    struct Visit;
    impl de::Visitor<'_> for Visit {
        type Value = Option<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(crate::names::truncate(v, usize::MAX, MAX_TEXT)))
        }
    }
    d.deserialize_any(Visit)
}
