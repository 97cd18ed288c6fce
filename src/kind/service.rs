//! How a LoadBalancer Service is read, once: its class (`spec.loadBalancerClass`; a Service that
//! is not `type: LoadBalancer` has a class no policy can name), its `status.loadBalancer.ingress`
//! entries (an Ingress's plus `ipMode`), and the lean projection the reconciler caches.

use std::{borrow::Cow, collections::HashSet, fmt};

use k8s_openapi::{
    NamespaceResourceScope, api::networking::v1::IngressClass, apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use serde::{Deserialize, Deserializer, Serialize};

use super::ingress::{LoadBalancerStatus, StatusShape, Wire, bounded};
use crate::address::{Address, EntryIn};

/// The `spec.type` the guard governs; any other Service is never governed.
pub(crate) const LOAD_BALANCER: &str = "LoadBalancer";
/// The class kept for a Service that is not `type: LoadBalancer`: not a qualified name, so no
/// `loadBalancerClasses` entry can name it.
pub(crate) const NOT_LOAD_BALANCER: &str = "<not type LoadBalancer>";
/// The class of a LoadBalancer Service without `spec.loadBalancerClass`: the empty string, which
/// no class can be (the API server refuses an empty `loadBalancerClass`).
pub(crate) const NO_CLASS: &str = "";
/// `ipMode` as the API server defaults it for an entry with an IP (1.30+): kube-proxy routes
/// the IP to the Service's endpoints on every node.
pub(crate) const VIP: &str = "VIP";

/// A write of a Service's status, as the decision sees it.
pub(crate) type ServiceWrite = super::Write<LoadBalancerIngress>;

/// The Service's constants.
pub(crate) const INFO: super::Info = super::Info {
    name: "Service",
    with_article: "a Service",
    label: "service",
    api_version: "v1",
    field: "status.loadBalancer.ingress",
    field_of: "a Service's status.loadBalancer.ingress",
    rogue: "rogue Service status write",
    class_field: "spec.loadBalancerClass",
    // `serviceStatusStrategy.PrepareForUpdate` resets only `spec` (measured on 1.23, 1.31 and
    // 1.37: `tests/cluster/service.rs`), as for an Ingress.
    status_keeps_metadata: true,
    plural: "services",
    default_class: false,
    optional_api: None,
    always_watched: false,
    classes: "LoadBalancer classes",
    class_plural: "",
    classes_needed_by: "",
    class_kind: "",
    classes_absent: None,
};

/// LoadBalancer Services: `status.loadBalancer.ingress`, entries `{ip, hostname, ipMode, ports}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Services;

/// One entry of a Service's `status.loadBalancer.ingress`: an Ingress's entry and `ipMode`
/// (`VIP` or `Proxy`, 1.29+), which tells kube-proxy whether to route the IP locally.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize)]
pub(crate) struct LoadBalancerIngress {
    #[serde(flatten)]
    pub(crate) address: Address,
    #[serde(rename = "ipMode", skip_serializing_if = "Option::is_none")]
    pub(crate) ip_mode: Option<String>,
}

impl LoadBalancerIngress {
    /// The `ipMode` kube-proxy acts on: as written, else `VIP` for an entry with an IP (as the
    /// API server defaults it, and as kube-proxy reads an entry without it).
    pub(crate) fn ip_mode(&self) -> Option<&str> {
        self.ip_mode.as_deref().or(self.address.ip.as_ref().map(|_| VIP))
    }
}

/// The entry as an Ingress's reads, and `ipMode` when it is not the default `VIP`.
impl fmt::Display for LoadBalancerIngress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.address.fmt(f)?;
        match self.ip_mode() {
            Some(VIP) | None => Ok(()),
            Some(mode) => {
                f.write_str(" [ipMode ")?;
                crate::names::write_escaped(f, mode)?;
                f.write_str("]")
            }
        }
    }
}

/// `status.loadBalancer.ingress` as written or stored, bounded as an Ingress's is.
pub(crate) type Entries = crate::strict::Bounded<LoadBalancerIngress>;

/// An entry as the wire has it: an Ingress's, and `ipMode`.
#[derive(Deserialize)]
#[serde(expecting = "a LoadBalancerIngress object (ip, hostname, ipMode, ports)")]
pub(crate) struct ServiceEntryIn {
    #[serde(default)]
    ip: Option<String>,
    #[serde(default)]
    hostname: Option<String>,
    #[serde(default, rename = "ipMode")]
    ip_mode: Option<String>,
    #[serde(default)]
    ports: crate::strict::Bounded<crate::address::PortStatus>,
}

impl crate::strict::Bound for LoadBalancerIngress {
    type In = ServiceEntryIn;
    type Budget = <Address as crate::strict::Bound>::Budget;
    const EXPECTING: &'static str = "a sequence";
    const NULL_IS_EMPTY: bool = false;

    /// Kept by the Ingress entry's bounds (entries and ports), `ipMode` beside it.
    fn keep(entry: ServiceEntryIn, kept: usize, ports: &mut Self::Budget) -> Option<Self> {
        let ServiceEntryIn { ip, hostname, ip_mode, ports: written } = entry;
        let address = <Address as crate::strict::Bound>::keep(EntryIn { ip, hostname, ports: written }, kept, ports)?;
        Some(LoadBalancerIngress { address, ip_mode })
    }
}

impl super::Entry for LoadBalancerIngress {
    fn pack(&self, out: &mut Vec<u8>) {
        <Address as super::Entry>::pack(&self.address, out);
        match self.ip_mode.as_deref() {
            None => out.push(0),
            Some(VIP) => out.push(1),
            Some(PROXY) => out.push(2),
            Some(other) => {
                out.push(3);
                super::packed::put_str(out, other);
            }
        }
    }

    fn unpack(bytes: &mut &[u8]) -> Option<Self> {
        let address = <Address as super::Entry>::unpack(bytes)?;
        let ip_mode = match super::packed::byte(bytes)? {
            0 => None,
            1 => Some(VIP.to_owned()),
            2 => Some(PROXY.to_owned()),
            3 => Some(super::packed::str(bytes)?),
            _ => return None,
        };
        Some(LoadBalancerIngress { address, ip_mode })
    }
}

/// `ipMode: Proxy`: kube-proxy leaves the IP to the load balancer.
pub(crate) const PROXY: &str = "Proxy";

/// The class a Service is governed by: [`NOT_LOAD_BALANCER`] unless it is `type: LoadBalancer`;
/// then its `spec.loadBalancerClass` if that is a qualified name (the API server's rule), else
/// [`bounded::INVALID_CLASS`]; [`NO_CLASS`] without one. Every reader of a Service comes here.
pub(crate) fn class(load_balancer: bool, class: Option<&str>) -> String {
    match (load_balancer, class) {
        (false, _) => NOT_LOAD_BALANCER.to_owned(),
        (true, None) => NO_CLASS.to_owned(),
        (true, Some(c)) if crate::names::is_label_key(c) => c.to_owned(),
        (true, Some(_)) => bounded::INVALID_CLASS.to_owned(),
    }
}

impl super::Governed for Services {
    const KIND: super::Kind = super::Kind::Service;
    type Entry = LoadBalancerIngress;
    type Shape = StatusShape;
    type Lean = LeanService;
    /// Never read: a Service has no class objects (`class_plural` is empty).
    type ClassObject = IngressClass;

    fn class(_: &IngressClass) -> super::Class {
        super::Class::default()
    }

    fn leaned(lean: LeanService) -> Option<super::Leaned<LoadBalancerIngress>> {
        super::Leaned::of(lean.meta, Some(lean.class), lean.addresses, lean.status_managers)
    }

    fn trimmed(write: &ServiceWrite) -> [Option<&'static str>; 2] {
        let class = write.class.as_deref() == Some(bounded::INVALID_CLASS);
        [class.then_some("class"), (write.omitted > 0).then_some("addresses")]
    }

    fn seen(entries: &[LoadBalancerIngress]) -> Cow<'_, [Address]> {
        Cow::Owned(entries.iter().map(|e| e.address.clone()).collect())
    }

    fn patch(shape: StatusShape, entries: &[LoadBalancerIngress], out: impl std::io::Write) -> serde_json::Result<()> {
        super::ingress::load_balancer_patch(shape, entries, out)
    }

    fn status(entries: &[LoadBalancerIngress]) -> serde_json::Value {
        serde_json::json!({"loadBalancer": {"ingress": entries}})
    }

    fn shown(entries: Vec<LoadBalancerIngress>) -> Vec<Address> {
        entries.into_iter().map(|e| e.address).collect()
    }

    fn healed(object: &dyn fmt::Display, from: &dyn fmt::Display, to: &dyn fmt::Display, policy: &str) {
        tracing::info!(service = %object, from = %from, to = %to, policy = %policy, "reconciled stored status to the canonical addresses");
    }

    /// The canonical addresses, an IP's with `ipMode: VIP` as the API server defaults it: said
    /// in the patch, because the API server defaults it only when the written `spec.type` is
    /// `LoadBalancer` and then requires it (1.30+), so a write that also forges the spec would
    /// be refused after the patch; an API server without the field drops it.
    fn entries(canonical: &[Address]) -> Result<Cow<'_, [LoadBalancerIngress]>, super::TooMany> {
        let entry =
            |a: &Address| LoadBalancerIngress { address: a.clone(), ip_mode: a.ip.as_ref().map(|_| VIP.to_owned()) };
        Ok(Cow::Owned(canonical.iter().map(entry).collect()))
    }

    /// The same entries ignoring order and duplicates, each with the `ipMode` kube-proxy acts
    /// on, so that the API server's default `VIP` equals an absent one.
    fn same(written: &[LoadBalancerIngress], canonical: &[LoadBalancerIngress]) -> bool {
        fn set(list: &[LoadBalancerIngress]) -> HashSet<(&Address, Option<&str>)> {
            list.iter().map(|e| (&e.address, e.ip_mode())).collect()
        }
        set(written) == set(canonical)
    }
}

/// A Service as the guard reads it, bounded; everything else is skipped unparsed.
#[derive(Clone, Debug, Default)]
pub(crate) struct LeanService {
    /// Namespace, name, uid and resourceVersion only.
    pub(crate) meta: ObjectMeta,
    /// [`class`]: [`NOT_LOAD_BALANCER`] for a Service of another type.
    pub(crate) class: String,
    /// `status.loadBalancer.ingress` as stored, bounded.
    pub(crate) addresses: Entries,
    /// Where a patch of the list must go.
    pub(crate) shape: StatusShape,
    /// The field managers that own some of `status` ([`bounded::status_managers`]).
    pub(crate) status_managers: Vec<String>,
}

crate::client::lean_resource!(LeanService, NamespaceResourceScope, "", "v1", "Service", "services");

impl<'de> Deserialize<'de> for LeanService {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct WireMeta {
            name: Option<String>,
            namespace: Option<String>,
            resource_version: Option<String>,
            uid: Option<String>,
            #[serde(default, deserialize_with = "bounded::status_managers")]
            managed_fields: Vec<String>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct WireSpec {
            #[serde(default, rename = "type", deserialize_with = "is_load_balancer")]
            load_balancer: bool,
            #[serde(default, deserialize_with = "class_field")]
            load_balancer_class: Option<String>,
        }
        let wire = Wire::<WireMeta, WireSpec, LoadBalancerStatus<Entries>>::deserialize(d)?;
        let (load_balancer, written_class) =
            wire.spec.map_or((false, None), |s| (s.load_balancer, s.load_balancer_class));
        let lb = wire.status.map(|s| s.load_balancer.map(|lb| lb.ingress));
        let shape = StatusShape::of(lb.as_ref().map(|lb| lb.as_ref().map(Option::as_ref)));
        let addresses = lb.flatten().flatten().unwrap_or_default();
        let (name, namespace, resource_version, uid, status_managers) = match wire.metadata {
            Some(m) => (m.name, m.namespace, m.resource_version, m.uid, m.managed_fields),
            None => Default::default(),
        };
        let meta = ObjectMeta { name, namespace, resource_version, uid, ..ObjectMeta::default() };
        // A Service that is not a load balancer keeps no entries: it is never governed.
        let addresses = if load_balancer { addresses } else { Entries::default() };
        Ok(LeanService {
            meta,
            class: class(load_balancer, written_class.as_deref()),
            addresses,
            shape,
            status_managers,
        })
    }
}

/// Whether `spec.type` is `LoadBalancer`, read without keeping the value.
fn is_load_balancer<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<Cow<'de, str>>::deserialize(d)?.is_some_and(|t| t == LOAD_BALANCER))
}

/// `spec.loadBalancerClass`, kept only when it is a qualified name (else a marker that no
/// policy names), so a cached Service holds at most a class name.
fn class_field<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let written = Option::<Cow<'de, str>>::deserialize(d)?;
    Ok(written.map(|c| class(true, Some(&c))))
}

#[cfg(test)]
mod tests;
