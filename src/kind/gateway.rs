//! How a Gateway API object is read, once: the lean, bounded projections of Gateways and
//! GatewayClasses the guard keeps (no `gateway-api` crate: its releases pin another kube).

pub(crate) mod status;

use std::{borrow::Cow, collections::HashSet};

use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use serde::{Deserialize, Deserializer};

use status::GatewayAddress;
pub(crate) use status::Programmed;

use super::ingress::Wire;
use crate::address::Address;

/// The Gateway API's group.
pub(crate) const GROUP: &str = "gateway.networking.k8s.io";
/// The version read: `v1`, served by every standard-channel release since v1.0.
pub(crate) const VERSION: &str = "v1";

/// A write of a Gateway's status, as the decision sees it.
pub(crate) type GatewayWrite = super::Write<GatewayAddress>;

/// The Gateway's constants.
pub(crate) const INFO: super::Info = super::Info {
    name: "Gateway",
    with_article: "a Gateway",
    label: "gateway",
    api_version: "gateway.networking.k8s.io/v1",
    field: "status.addresses",
    field_of: "a Gateway's status.addresses",
    rogue: "rogue Gateway status write",
    class_field: "spec.gatewayClassName",
    status_keeps_metadata: false,
    plural: "gateways",
    default_class: false,
    optional_api: Some("the Gateway API CRDs are not installed"),
    always_watched: false,
    classes: "GatewayClasses",
    class_plural: "gatewayclasses",
    classes_needed_by: "GatewayClasses (gatewayControllers)",
    class_kind: "GatewayClass",
    classes_absent: Some(
        "the API server serves no GatewayClasses (the Gateway API CRDs are not installed): gatewayControllers policies match no Gateway until they appear",
    ),
};

/// Gateways: `status.addresses`, entries `{type, value}`, at most [`status::MAX_ADDRESSES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Gateways;

impl super::Entry for GatewayAddress {
    fn pack(&self, out: &mut Vec<u8>) {
        use super::packed::{put_ip_or_str, put_str};
        match self.kind.as_str() {
            status::IP_ADDRESS => out.push(0),
            status::HOSTNAME => out.push(1),
            other => {
                out.push(2);
                put_str(out, other);
            }
        }
        put_ip_or_str(out, &self.value);
    }

    fn unpack(bytes: &mut &[u8]) -> Option<Self> {
        use super::packed::{byte, ip_or_str, str};
        let kind = match byte(bytes)? {
            0 => status::IP_ADDRESS.to_owned(),
            1 => status::HOSTNAME.to_owned(),
            2 => str(bytes)?,
            _ => return None,
        };
        Some(GatewayAddress { kind, value: ip_or_str(bytes)? })
    }
}

impl super::Governed for Gateways {
    const KIND: super::Kind = super::Kind::Gateway;
    type Entry = GatewayAddress;
    type Shape = GatewayShape;
    type Lean = LeanGateway;
    type ClassObject = LeanGatewayClass;

    fn class(class: &LeanGatewayClass) -> super::Class {
        super::Class { controller: class.controller.clone(), default: false }
    }

    fn leaned(lean: LeanGateway) -> Option<super::Leaned<GatewayAddress>> {
        super::Leaned::of(lean.meta, lean.class, lean.addresses, lean.status_managers)
    }

    fn trimmed(_: &GatewayWrite) -> [Option<&'static str>; 2] {
        [None, None]
    }

    /// Each entry's value in the field of its type (`type=value` as a hostname for a type an
    /// Ingress has no field for).
    fn shown(entries: Vec<GatewayAddress>) -> Vec<Address> {
        let shown = |entry: GatewayAddress| match entry.kind.as_str() {
            status::IP_ADDRESS => Address { ip: Some(entry.value), ..Address::default() },
            status::HOSTNAME => Address::hostname(entry.value),
            _ => Address::hostname(format!("{}={}", entry.kind, entry.value)),
        };
        entries.into_iter().map(shown).collect()
    }

    /// An entry as an Ingress-style address; a type an Ingress cannot express reads as a hostname
    /// no canonical address has.
    fn seen(entries: &[GatewayAddress]) -> Cow<'_, [Address]> {
        let view = |entry: &GatewayAddress| {
            entry.to_ingress().unwrap_or_else(|_| Address::hostname(format!("{}={}", entry.kind, entry.value)))
        };
        Cow::Owned(entries.iter().map(view).collect())
    }

    fn patch(shape: GatewayShape, entries: &[GatewayAddress], out: impl std::io::Write) -> serde_json::Result<()> {
        // An entry serializes as the API writes it: `{type, value}`.
        let op = |op, path| super::Op { op, path, value: entries };
        match shape {
            GatewayShape::NoStatus => {
                let value = serde_json::json!({ "addresses": entries });
                serde_json::to_writer(out, &[super::Op { op: "add", path: "/status", value }])
            }
            GatewayShape::NoAddresses => serde_json::to_writer(out, &[op("add", "/status/addresses")]),
            GatewayShape::Addresses => serde_json::to_writer(out, &[op("replace", "/status/addresses")]),
        }
    }

    fn status(entries: &[GatewayAddress]) -> serde_json::Value {
        serde_json::json!({ "addresses": entries })
    }

    fn healed(object: &dyn std::fmt::Display, from: &dyn std::fmt::Display, to: &dyn std::fmt::Display, policy: &str) {
        tracing::info!(gateway = %object, from = %from, to = %to, policy = %policy, "reconciled stored status to the canonical addresses");
    }

    fn entries(canonical: &[Address]) -> Result<Cow<'_, [GatewayAddress]>, super::TooMany> {
        let entries = GatewayAddress::from_addresses(canonical);
        if entries.len() > status::MAX_ADDRESSES {
            return Err(super::TooMany { kind: Self::KIND, entries: entries.len(), max: status::MAX_ADDRESSES });
        }
        Ok(Cow::Owned(entries))
    }

    fn same(written: &[GatewayAddress], canonical: &[GatewayAddress]) -> bool {
        written.iter().collect::<HashSet<_>>() == canonical.iter().collect::<HashSet<_>>()
    }
}

/// How much of `status.addresses` a Gateway object has: where a patch must go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum GatewayShape {
    /// No `status` (or `null`).
    #[default]
    NoStatus,
    /// A `status` without `addresses` (or with `null`).
    NoAddresses,
    /// A `status.addresses` list.
    Addresses,
}

impl GatewayShape {
    /// The shape of an object whose `status` and its `addresses` are as given (`None`: absent or `null`).
    pub(crate) fn of<A>(status: Option<Option<A>>) -> GatewayShape {
        match status {
            None => GatewayShape::NoStatus,
            Some(None) => GatewayShape::NoAddresses,
            Some(Some(_)) => GatewayShape::Addresses,
        }
    }
}

/// A Gateway as the guard reads it, bounded; everything else is skipped unparsed.
#[derive(Clone, Debug, Default)]
pub(crate) struct LeanGateway {
    /// Namespace, name, uid, resourceVersion and generation only.
    pub(crate) meta: ObjectMeta,
    /// `spec.gatewayClassName` if it is a valid class name, else a value that matches nothing.
    pub(crate) class: Option<String>,
    /// `status.addresses` as stored, bounded.
    pub(crate) addresses: status::Addresses,
    /// Whether `status` and `status.addresses` are there, as a write of it would patch them.
    pub(crate) shape: GatewayShape,
    /// The `Programmed` condition of `status.conditions`, judged against `metadata.generation`
    /// (a `True` for an older generation is [`Programmed::Stale`]).
    pub(crate) programmed: Programmed,
    /// The field managers that own some of `status` ([`crate::kind::ingress::bounded::status_managers`]).
    pub(crate) status_managers: Vec<String>,
}

crate::client::lean_resource!(LeanGateway, NamespaceResourceScope, GROUP, VERSION, "Gateway", "gateways");

impl<'de> Deserialize<'de> for LeanGateway {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct WireSpec {
            #[serde(default, deserialize_with = "crate::kind::ingress::bounded::class_field")]
            gateway_class_name: Option<String>,
        }
        #[derive(Deserialize)]
        struct WireStatus {
            #[serde(default)]
            addresses: Option<status::Addresses>,
            #[serde(default)]
            conditions: Option<status::ProgrammedCondition>,
        }
        let wire = Wire::<WireMeta, WireSpec, WireStatus>::deserialize(d)?;
        let status = wire.status;
        let shape = GatewayShape::of(status.as_ref().map(|s| s.addresses.as_ref()));
        let (addresses, condition) = match status {
            Some(s) => (s.addresses.unwrap_or_default(), s.conditions.unwrap_or_default()),
            None => Default::default(),
        };
        let (status_managers, meta) = match wire.metadata {
            Some(mut m) => (std::mem::take(&mut m.status_managers), m.into_meta()),
            None => Default::default(),
        };
        let programmed = condition.judged(meta.generation);
        Ok(LeanGateway {
            meta,
            status_managers,
            class: wire.spec.and_then(|s| s.gateway_class_name),
            addresses,
            shape,
            programmed,
        })
    }
}

/// A GatewayClass as the guard reads it: its name and `spec.controllerName`.
#[derive(Clone, Debug, Default)]
pub(crate) struct LeanGatewayClass {
    /// Name, uid and resourceVersion only.
    pub(crate) meta: ObjectMeta,
    /// `spec.controllerName` if it is a valid controller name, else `None`.
    pub(crate) controller: Option<String>,
}

crate::client::lean_resource!(LeanGatewayClass, ClusterResourceScope, GROUP, VERSION, "GatewayClass", "gatewayclasses");

impl<'de> Deserialize<'de> for LeanGatewayClass {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct WireSpec {
            #[serde(default, deserialize_with = "status::bounded_text")]
            controller_name: Option<String>,
        }
        // A GatewayClass's status is skipped as any unknown field is.
        let wire = Wire::<WireMeta, WireSpec, serde::de::IgnoredAny>::deserialize(d)?;
        Ok(LeanGatewayClass {
            meta: wire.metadata.map(WireMeta::into_meta).unwrap_or_default(),
            controller: wire.spec.and_then(|s| s.controller_name).filter(|c| status::is_controller_name(c)),
        })
    }
}

/// The metadata kept of a Gateway API object, bounded; of managedFields only the status writers' names.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    #[serde(default, deserialize_with = "status::bounded_text")]
    name: Option<String>,
    #[serde(default, deserialize_with = "status::bounded_text")]
    namespace: Option<String>,
    #[serde(default, deserialize_with = "status::bounded_text")]
    resource_version: Option<String>,
    #[serde(default, deserialize_with = "status::bounded_text")]
    uid: Option<String>,
    generation: Option<i64>,
    #[serde(default, rename = "managedFields", deserialize_with = "crate::kind::ingress::bounded::status_managers")]
    status_managers: Vec<String>,
}

impl WireMeta {
    fn into_meta(self) -> ObjectMeta {
        ObjectMeta {
            name: self.name,
            namespace: self.namespace,
            resource_version: self.resource_version,
            uid: self.uid,
            generation: self.generation,
            ..ObjectMeta::default()
        }
    }
}

#[cfg(test)]
mod tests;
