//! The one reader of an Ingress: its class, how much of `status.loadBalancer.ingress` it has, and
//! the [`StatusWrite`] the decision takes, whether it arrives in a review, as a stored k8s-openapi
//! Ingress ([`Stored::of`]) or as the reconciler's lean projection ([`LeanIngress`]).

use std::{borrow::Cow, fmt};

use k8s_openapi::{
    NamespaceResourceScope,
    api::networking::v1::{Ingress, IngressClass, IngressLoadBalancerIngress, IngressPortStatus},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use serde::{Deserialize, Deserializer, de};

use crate::address::{Address, PortStatus};

/// The legacy class annotation, read when `spec.ingressClassName` is not set.
pub(crate) const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
/// The annotation that marks the cluster's default IngressClass (`"true"`).
pub(crate) const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";

/// A write of `status.loadBalancer.ingress`, or a stored one, as the decision sees it.
pub(crate) type StatusWrite = super::Write<Address>;

/// The Ingress's constants.
pub(crate) const INFO: super::Info = super::Info {
    name: "Ingress",
    with_article: "an Ingress",
    label: "ingress",
    api_version: "networking.k8s.io/v1",
    field: "status.loadBalancer.ingress",
    field_of: "an Ingress's status.loadBalancer.ingress",
    rogue: "rogue status write",
    class_field: "spec.ingressClassName",
    status_keeps_metadata: true,
    plural: "ingresses",
    default_class: true,
    optional_api: None,
    always_watched: true,
    classes: "IngressClasses",
    class_plural: "ingressclasses",
    classes_needed_by: "IngressClasses (--controller-class, or --ingress-class without --watch-ingress-without-class, \
        which also governs class-less Ingresses when the default IngressClass is one of the classes)",
    class_kind: "IngressClass",
    classes_absent: None,
};

/// Ingresses: `status.loadBalancer.ingress`, entries `{ip, hostname, ports}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ingresses;

impl super::Entry for Address {
    fn pack(&self, out: &mut Vec<u8>) {
        use super::packed::{put_ip_or_str, put_len, put_str};
        let ports = !self.ports.is_empty();
        out.push(u8::from(self.ip.is_some()) | u8::from(self.hostname.is_some()) << 1 | u8::from(ports) << 2);
        if let Some(ip) = &self.ip {
            put_ip_or_str(out, ip);
        }
        if let Some(hostname) = &self.hostname {
            put_str(out, hostname);
        }
        if ports {
            put_len(out, self.ports.len());
        }
        for port in &self.ports {
            out.extend_from_slice(&port.port.to_le_bytes());
            put_str(out, &port.protocol);
            out.push(u8::from(port.error.is_some()));
            if let Some(error) = &port.error {
                put_str(out, error);
            }
        }
    }

    fn unpack(bytes: &mut &[u8]) -> Option<Self> {
        use super::packed::{byte, ip_or_str, len, str, take};
        let present = byte(bytes)?;
        let ip = if present & 1 != 0 { Some(ip_or_str(bytes)?) } else { None };
        let hostname = if present & 2 != 0 { Some(str(bytes)?) } else { None };
        let count = if present & 4 != 0 { len(bytes)? } else { 0 };
        let mut ports = Vec::with_capacity(count.min(bytes.len()));
        for _ in 0..count {
            let port = i32::from_le_bytes(take(bytes, 4)?.try_into().ok()?);
            let protocol = str(bytes)?;
            let error = if byte(bytes)? != 0 { Some(str(bytes)?) } else { None };
            ports.push(PortStatus { port, protocol, error });
        }
        Some(Address { ip, hostname, ports })
    }
}

impl super::Governed for Ingresses {
    const KIND: super::Kind = super::Kind::Ingress;
    type Entry = Address;
    type Shape = StatusShape;
    type Lean = LeanIngress;
    type ClassObject = IngressClass;

    fn class(class: &IngressClass) -> super::Class {
        super::Class {
            controller: class.spec.as_ref().and_then(|s| s.controller.clone()),
            default: is_default_class(class),
        }
    }

    fn leaned(lean: LeanIngress) -> Option<super::Leaned<Address>> {
        let status_managers = lean.status_managers.clone();
        let uid = lean.meta.uid.clone();
        let (write, resource_version) = lean.into_write()?;
        Some(super::Leaned { write, resource_version, uid, status_managers })
    }

    fn trimmed(write: &StatusWrite) -> [Option<&'static str>; 2] {
        let class = write.class.as_deref() == Some(bounded::INVALID_CLASS);
        [class.then_some("class"), (write.omitted > 0).then_some("addresses")]
    }

    fn shown(entries: Vec<Address>) -> Vec<Address> {
        entries
    }

    fn seen(entries: &[Address]) -> Cow<'_, [Address]> {
        Cow::Borrowed(entries)
    }

    fn patch(shape: StatusShape, canonical: &[Address], out: impl std::io::Write) -> serde_json::Result<()> {
        load_balancer_patch(shape, canonical, out)
    }

    fn status(entries: &[Address]) -> serde_json::Value {
        serde_json::json!({"loadBalancer": {"ingress": entries}})
    }

    fn healed(object: &dyn std::fmt::Display, from: &dyn std::fmt::Display, to: &dyn std::fmt::Display, policy: &str) {
        tracing::info!(ingress = %object, from = %from, to = %to, policy = %policy, "reconciled stored status to the canonical addresses");
    }

    fn entries(canonical: &[Address]) -> Result<Cow<'_, [Address]>, super::TooMany> {
        Ok(Cow::Borrowed(canonical))
    }

    fn same(written: &[Address], canonical: &[Address]) -> bool {
        crate::address::same_set(written, canonical)
    }
}

/// The JSON patch that sets `status.loadBalancer.ingress` (an Ingress's or a Service's) to `entries`.
pub(crate) fn load_balancer_patch<E: serde::Serialize>(
    shape: StatusShape,
    entries: &[E],
    out: impl std::io::Write,
) -> serde_json::Result<()> {
    use super::Op;
    use serde::Serialize;
    #[derive(Serialize)]
    struct LoadBalancer<'a, E> {
        ingress: &'a [E],
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Status<'a, E> {
        load_balancer: LoadBalancer<'a, E>,
    }
    let lb = LoadBalancer { ingress: entries };
    match shape {
        StatusShape::NoStatus => {
            serde_json::to_writer(out, &[Op { op: "add", path: "/status", value: Status { load_balancer: lb } }])
        }
        StatusShape::NoLoadBalancer => {
            serde_json::to_writer(out, &[Op { op: "add", path: "/status/loadBalancer", value: lb }])
        }
        StatusShape::NoIngressList => {
            serde_json::to_writer(out, &[Op { op: "add", path: "/status/loadBalancer/ingress", value: entries }])
        }
        StatusShape::IngressList => {
            serde_json::to_writer(out, &[Op { op: "replace", path: "/status/loadBalancer/ingress", value: entries }])
        }
    }
}

/// How much of `status.loadBalancer.ingress` an object has (`null` is absent): where a patch goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum StatusShape {
    #[default]
    NoStatus,
    NoLoadBalancer,
    NoIngressList,
    IngressList,
}

impl StatusShape {
    /// The shape of a status whose `loadBalancer` and its `ingress` are as given (`None`: absent
    /// or `null`): one rule for every reader.
    pub(crate) fn of<L>(status: Option<Option<Option<L>>>) -> StatusShape {
        match status {
            None => StatusShape::NoStatus,
            Some(None) => StatusShape::NoLoadBalancer,
            Some(Some(None)) => StatusShape::NoIngressList,
            Some(Some(Some(_))) => StatusShape::IngressList,
        }
    }
}

/// Where an Ingress's class was read from; `explain` says so, because an annotation that is
/// overridden by the field is a common surprise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClassFrom {
    Field,
    Annotation,
    Neither,
}

/// The class precedence of ingress-nginx's store: `spec.ingressClassName`, else the
/// [`CLASS_ANNOTATION`]; and which it was. Every reader comes here, so all agree that a value
/// which is not a class name ([`bounded::valid_class`]) is no class: the API server does not
/// validate an annotation, and a class the webhook enforced but the reconciler did not know
/// would never be healed.
pub(crate) fn class(field: Option<String>, annotation: Option<String>) -> (Option<String>, ClassFrom) {
    match (field, annotation) {
        (Some(field), _) => (Some(bounded::valid_class(field)), ClassFrom::Field),
        (None, Some(annotation)) => (Some(bounded::valid_class(annotation)), ClassFrom::Annotation),
        (None, None) => (None, ClassFrom::Neither),
    }
}

/// Whether `class` is marked the cluster's default IngressClass.
pub(crate) fn is_default_class(class: &IngressClass) -> bool {
    class.metadata.annotations.as_ref().and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION)).is_some_and(|v| v == "true")
}

/// The [`CLASS_ANNOTATION`] out of `metadata.annotations` read as `T` (`null` is none); every
/// other annotation (often large, such as `kubectl.kubernetes.io/last-applied-configuration`)
/// is skipped unparsed. The one reader of the annotation map.
pub(crate) fn class_annotation<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    struct Visit<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> de::Visitor<'de> for Visit<T> {
        type Value = Option<T>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of annotations")
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut class = None;
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                if key == CLASS_ANNOTATION {
                    class = Some(map.next_value::<T>()?);
                } else {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
            Ok(class)
        }
    }
    d.deserialize_any(Visit(std::marker::PhantomData))
}

/// A stored Ingress as the decision sees it, plus what `explain` shows about how it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    pub write: StatusWrite,
    pub class_from: ClassFrom,
    /// The class as written when it is not a class name (the write's class is then
    /// [`bounded::INVALID_CLASS`]), for `explain` to show what it read.
    pub not_a_class: Option<String>,
    pub object_uid: Option<String>,
    pub shape: StatusShape,
}

impl Stored {
    /// Reads an Ingress as the webhook reads a status write of it.
    pub(crate) fn of(ingress: &Ingress) -> Stored {
        let field = ingress.spec.as_ref().and_then(|s| s.ingress_class_name.clone());
        let annotation = ingress.metadata.annotations.as_ref().and_then(|a| a.get(CLASS_ANNOTATION)).cloned();
        let written = field.clone().or_else(|| annotation.clone());
        let (class, class_from) = class(field, annotation);
        let not_a_class = written.filter(|_| class.as_deref() == Some(bounded::INVALID_CLASS));
        let lb = ingress.status.as_ref().map(|s| s.load_balancer.as_ref());
        let shape = StatusShape::of(lb.map(|lb| lb.map(|lb| lb.ingress.as_ref())));
        let port =
            |p: &IngressPortStatus| PortStatus { port: p.port, protocol: p.protocol.clone(), error: p.error.clone() };
        let entry = |e: &IngressLoadBalancerIngress| {
            let ports = e.ports.iter().flatten().map(port).collect();
            Address { ip: e.ip.clone(), hostname: e.hostname.clone(), ports }
        };
        let list = lb.flatten().and_then(|lb| lb.ingress.as_ref());
        let addresses = list.map(|list| list.iter().map(entry).collect()).unwrap_or_default();
        Stored {
            write: StatusWrite {
                namespace: ingress.metadata.namespace.clone().unwrap_or_default(),
                name: ingress.metadata.name.clone().unwrap_or_default(),
                class,
                addresses,
                omitted: 0,
            },
            class_from,
            not_a_class,
            object_uid: ingress.metadata.uid.clone(),
            shape,
        }
    }
}

/// An Ingress as the reconciler reads it from the watch stream: [`StatusWrite`]'s fields and the
/// resourceVersion, each bounded by [`bounded`]; everything else is skipped unparsed.
#[derive(Clone, Debug)]
pub(crate) struct LeanIngress {
    pub(crate) meta: ObjectMeta,
    pub(crate) class: Option<String>,
    pub(crate) addresses: Vec<Address>,
    /// Entries stored after `addresses`, counted but not kept ([`crate::address::Entries`]).
    pub(crate) omitted: usize,
    /// The field managers that own some of `status` ([`bounded::status_managers`]).
    pub(crate) status_managers: Vec<String>,
}

impl LeanIngress {
    /// The status write and the resourceVersion it was read at; `None` without a namespace or name.
    pub(crate) fn into_write(self) -> Option<(StatusWrite, Option<String>)> {
        let namespace = self.meta.namespace?;
        let name = self.meta.name?;
        Some((
            StatusWrite { namespace, name, class: self.class, addresses: self.addresses, omitted: self.omitted },
            self.meta.resource_version,
        ))
    }
}

crate::client::lean_resource!(LeanIngress, NamespaceResourceScope, "networking.k8s.io", "v1", "Ingress", "ingresses");

impl<'de> Deserialize<'de> for LeanIngress {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct WireMeta {
            name: Option<String>,
            namespace: Option<String>,
            resource_version: Option<String>,
            uid: Option<String>,
            #[serde(default, deserialize_with = "bounded::class_annotation")]
            annotations: Option<String>,
            #[serde(default, deserialize_with = "bounded::status_managers")]
            managed_fields: Vec<String>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct WireSpec {
            #[serde(default, deserialize_with = "bounded::class_field")]
            ingress_class_name: Option<String>,
        }
        let wire = Wire::<WireMeta, WireSpec, LoadBalancerStatus<crate::address::Entries>>::deserialize(d)?;
        let (name, namespace, resource_version, uid, annotation, status_managers) = match wire.metadata {
            Some(m) => (m.name, m.namespace, m.resource_version, m.uid, m.annotations, m.managed_fields),
            None => (None, None, None, None, None, Vec::new()),
        };
        let entries = wire.status.and_then(|s| s.load_balancer).and_then(|lb| lb.ingress).unwrap_or_default();
        Ok(LeanIngress {
            meta: ObjectMeta { name, namespace, resource_version, uid, ..ObjectMeta::default() },
            class: class(wire.spec.and_then(|s| s.ingress_class_name), annotation).0,
            addresses: entries.kept,
            omitted: entries.omitted,
            status_managers,
        })
    }
}

/// The parts of an object a lean reader takes; everything else is skipped unparsed.
#[derive(Deserialize)]
pub(super) struct Wire<M, S, T> {
    pub(super) metadata: Option<M>,
    pub(super) spec: Option<S>,
    pub(super) status: Option<T>,
}

/// `status.loadBalancer.ingress` of an Ingress or a Service, its entries read as `E`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct LoadBalancerStatus<E> {
    pub(super) load_balancer: Option<LoadBalancer<E>>,
}

#[derive(Deserialize)]
pub(super) struct LoadBalancer<E> {
    pub(super) ingress: Option<E>,
}

pub(crate) mod bounded;

#[cfg(test)]
mod tests;
