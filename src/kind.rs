//! The governed kinds: what differs between them on the wire, said once per kind ([`Governed`]),
//! and the [`Kind`] value that names a kind everywhere else; the rest is written once over it.

use std::{borrow::Cow, collections::BTreeMap, fmt};

use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kube::Resource;
use serde::{Serialize, de::DeserializeOwned};

use crate::{address::Address, strict::Bounded};

pub(crate) mod gateway;
pub(crate) mod ingress;
pub(crate) mod packed;
pub(crate) mod service;

/// The kind list: one line per governed kind (variant, module and [`Governed`] type, and the log
/// fields docs/audit.md documents); everything that dispatches on a kind is generated from it.
/// `kind_list!(callback, args…)` calls `callback! { args… ; list }`.
macro_rules! kind_list {
    ($callback:ident $(, $($args:tt)*)?) => {
        $callback! { $($($args)*)? ;
            /// `networking.k8s.io/v1` Ingress: `status.loadBalancer.ingress`.
            Ingress: ingress::Ingresses { ingress_namespace, ingress_name, ingress_class },
            /// `gateway.networking.k8s.io/v1` Gateway: `status.addresses`.
            Gateway: gateway::Gateways { gateway_namespace, gateway_name, gateway_class },
            /// `v1` Service of `type: LoadBalancer`: `status.loadBalancer.ingress`.
            Service: service::Services { service_namespace, service_name, load_balancer_class },
        }
    };
}
pub(crate) use kind_list;

/// [`Kind`] and the kind-dispatching macros (`$d` is `$`, so the macros have metavariables).
macro_rules! define_kinds {
    ($d:tt ; $( $(#[$doc:meta])* $V:ident : $module:ident :: $T:ident { $ns:ident, $nm:ident, $class:ident } ),* $(,)?) => {
        /// Which kind of object: the one spelling of it outside `kind/<kind>.rs`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Kind {
            $( $(#[$doc])* $V, )*
        }

        impl Kind {
            /// Every kind, in the order reports list them.
            pub(crate) const ALL: [Kind; [$(Kind::$V),*].len()] = [$(Kind::$V),*];

            /// The kind's constants.
            pub(crate) const fn info(self) -> &'static Info {
                match self {
                    $( Kind::$V => &$module::INFO, )*
                }
            }
        }

        /// Runs `$body` with `$K` the [`Governed`] type of kind value `$kind`.
        macro_rules! with_kind {
            ($d kind:expr, $d K:ident => $d body:expr) => {
                match $d kind {
                    $( $crate::kind::Kind::$V => {
                        type $d K = $crate::kind::$module::$T;
                        $d body
                    } )*
                }
            };
        }

        /// A `tracing` event whose object fields are named by kind, as docs/audit.md names them:
        /// `object_event!(warn, kind, {fields before}, namespace, name, fields after and message)`.
        macro_rules! object_event {
            ($d level:ident, $d kind:expr, { $d ($d before:tt)* }, $d namespace:expr, $d name:expr, $d ($d after:tt)*) => {
                match $d kind {
                    $( $crate::kind::Kind::$V => {
                        tracing::$d level!($d ($d before)* $ns = %$d namespace, $nm = %$d name, $d ($d after)*)
                    } )*
                }
            };
        }

        /// The WARN line of a rogue status write, as docs/audit.md documents it per kind:
        /// `rogue_event!(kind, {fields before}, namespace, name, class, fields after)`.
        macro_rules! rogue_event {
            ($d kind:expr, { $d ($d before:tt)* }, $d namespace:expr, $d name:expr, $d class:expr, $d ($d after:tt)*) => {
                match $d kind {
                    $( $crate::kind::Kind::$V => tracing::warn!(
                        $d ($d before)* $ns = %$d namespace, $nm = %$d name, $class = %$d class,
                        $d ($d after)* "{}", $crate::kind::Kind::$V.info().rogue
                    ), )*
                }
            };
        }
    };
}
kind_list!(define_kinds, $);
#[allow(
    clippy::single_component_path_imports,
    reason = "the macros come from an expansion: this makes them paths"
)]
pub(crate) use {object_event, rogue_event, with_kind};

/// The constants of one kind, each kind's in its own file.
#[derive(Debug)]
pub(crate) struct Info {
    /// The kind as the API, logs and `explain` name it.
    pub(crate) name: &'static str,
    /// The name with its indefinite article, as an error's sentence says it.
    pub(crate) with_article: &'static str,
    /// The `kind` label of metrics, `check`'s KIND column and admission objects' names
    /// (`<lease>-<label>-<slot>`): lowercase letters only, so a name read from the right gives
    /// back its Lease.
    pub(crate) label: &'static str,
    /// The object's `apiVersion`, as an Event's `regarding` names it.
    pub(crate) api_version: &'static str,
    /// The status field the guard governs on this kind.
    pub(crate) field: &'static str,
    /// The status field with its kind's possessive (`a Gateway's status.addresses`).
    pub(crate) field_of: &'static str,
    /// The message of the WARN line of a rogue status write of this kind.
    pub(crate) rogue: &'static str,
    /// The spec field naming the object's class, which a status write cannot change.
    pub(crate) class_field: &'static str,
    /// Whether the API server stores the metadata a status write carries (its status strategy
    /// resets only `spec`), so the guard judges by the stored metadata and puts it back.
    pub(crate) status_keeps_metadata: bool,
    /// The resource, as the API's URLs and the `watch` label of metrics name it.
    pub(crate) plural: &'static str,
    /// Whether a class-less object can be governed through the cluster's default class.
    pub(crate) default_class: bool,
    /// For a kind whose API may not be served (a CRD), why not, as logs say it.
    pub(crate) optional_api: Option<&'static str>,
    /// Whether the kind is watched (and `check` lists it) even while no policy governs it; else
    /// a guard that governs none needs no right on it and holds none of it.
    pub(crate) always_watched: bool,
    /// The kind's class objects as logs and failed lists name them (`IngressClasses`).
    pub(crate) classes: &'static str,
    /// The class objects' resource, as the `watch` label of metrics names it.
    pub(crate) class_plural: &'static str,
    /// What needs the class objects read, in the words of the flags and fields that ask for it.
    pub(crate) classes_needed_by: &'static str,
    /// One class object's `kind`, as manifests say it (`IngressClass`).
    pub(crate) class_kind: &'static str,
    /// For a kind whose classes may not be served, what matching loses while they are not.
    pub(crate) classes_absent: Option<&'static str>,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        self.info().name
    }

    pub(crate) fn api_version(self) -> &'static str {
        self.info().api_version
    }

    pub(crate) fn field(self) -> &'static str {
        self.info().field
    }

    pub(crate) fn label(self) -> &'static str {
        self.info().label
    }

    /// The API group, as admission rules name it (`networking.k8s.io`).
    pub(crate) fn group(self) -> &'static str {
        self.api_version().rsplit_once('/').map_or("", |(group, _)| group)
    }

    /// The version the guard reads and writes the kind in, as admission rules name it (`v1`).
    pub(crate) fn version(self) -> &'static str {
        self.api_version().rsplit_once('/').map_or(self.api_version(), |(_, version)| version)
    }

    pub(crate) fn plural(self) -> &'static str {
        self.info().plural
    }

    /// Whether the kind has class objects (IngressClasses, GatewayClasses) to read.
    pub(crate) fn has_class_objects(self) -> bool {
        !self.info().class_plural.is_empty()
    }

    /// The kind's place in [`Kind::ALL`], which per-kind arrays are indexed by.
    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

/// A kind as a policy names it (`kind: Gateway`): its API name.
impl<'de> serde::Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = <Cow<'de, str>>::deserialize(deserializer)?;
        Kind::ALL.into_iter().find(|k| k.name() == name).ok_or_else(|| {
            let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
            serde::de::Error::custom(format_args!("unknown kind {name:?}, expected one of {}", names.join(", ")))
        })
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A write of a governed object's status (from a review or a stored object), as the decision sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write<E> {
    /// The object's namespace.
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The class the object names (an Ingress's by ingress-nginx's precedence).
    pub class: Option<String>,
    /// The status entries as written or stored (empty when absent), at most the kind's bound.
    pub addresses: Vec<E>,
    /// Entries past the bound, counted but not kept (such a list is never canonical).
    pub omitted: usize,
}

impl<E> Default for Write<E> {
    fn default() -> Self {
        Write { namespace: String::new(), name: String::new(), class: None, addresses: Vec::new(), omitted: 0 }
    }
}

/// A stored object as its lean projection holds it: its write, and what the reconciler needs beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Leaned<E> {
    /// The status write the object stands for.
    pub(crate) write: Write<E>,
    /// `metadata.resourceVersion`, which makes a patch conditional.
    pub(crate) resource_version: Option<String>,
    /// `metadata.uid`, which Events name.
    pub(crate) uid: Option<String>,
    /// The field managers that own some of `status`: a fight names them.
    pub(crate) status_managers: Vec<String>,
}

/// What a watch or a one-shot read deserializes.
pub(crate) trait Listed: DeserializeOwned + Clone + fmt::Debug + Send + Sync + 'static {}
impl<T: DeserializeOwned + Clone + fmt::Debug + Send + Sync + 'static> Listed for T {}

impl<E> Leaned<E> {
    /// A lean object's parts; `None` without a namespace and name.
    fn of(meta: ObjectMeta, class: Option<String>, list: Bounded<E>, status_managers: Vec<String>) -> Option<Self> {
        let (namespace, name) = (meta.namespace?, meta.name?);
        let write = Write { namespace, name, class, addresses: list.kept, omitted: list.omitted };
        Some(Leaned { write, resource_version: meta.resource_version, uid: meta.uid, status_managers })
    }
}

/// One operation of a JSON patch; only `add` and `replace` are ever needed.
#[derive(Serialize)]
struct Op<V> {
    op: &'static str,
    path: &'static str,
    value: V,
}

/// The entry type of a governed kind's status list.
pub(crate) trait Entry:
    Clone + Eq + std::hash::Hash + fmt::Debug + fmt::Display + Serialize + Send + Sync + 'static
{
    /// Appends the entry's compact bytes ([`packed`]), which the cache keeps.
    fn pack(&self, out: &mut Vec<u8>);

    /// Takes an entry [`Entry::pack`] appended; `None` for bytes it did not write.
    fn unpack(bytes: &mut &[u8]) -> Option<Self>;
}

/// What one governed kind is on the wire. Everything else is written once over it.
pub(crate) trait Governed: Sized + Send + Sync + 'static {
    /// Which kind this is.
    const KIND: Kind;
    /// One entry of the kind's status list.
    type Entry: Entry;
    /// How much of the status path an object has: where a patch must go.
    type Shape: Copy + Eq + fmt::Debug + Send + Sync + 'static;

    /// The lean projection that watches and one-shot reads deserialize: bounded, validated fields only.
    type Lean: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Listed;

    /// The kind's class objects. A kind without any says so with an empty `Info::class_plural`
    /// ([`Kind::has_class_objects`]): this type is then never read, so any cluster-scoped type does.
    type ClassObject: Resource<DynamicType = (), Scope = ClusterResourceScope> + Listed;

    /// What is kept of a class object.
    fn class(object: &Self::ClassObject) -> Class;

    /// What a lean object holds; `None` without a namespace and name.
    fn leaned(lean: Self::Lean) -> Option<Leaned<Self::Entry>>;

    /// Which bounds of the lean projection `write` hit (`class`, `addresses`), for the trimmed counter.
    fn trimmed(write: &Write<Self::Entry>) -> [Option<&'static str>; 2];

    /// The entries as Ingress-style addresses, as the reconciler compares them.
    fn seen(entries: &[Self::Entry]) -> Cow<'_, [Address]>;

    /// The JSON patch (RFC 6902) that sets the status list of an object of `shape` to
    /// `entries`, one operation touching nothing else, serialized straight into `out`. It
    /// applies to the object exactly as the API server sent it, whichever parents are absent:
    /// `add` onto an existing member replaces it (RFC 6902 section 4.1), so `add` at the deepest
    /// parent that exists is right whether the member below is absent or `null`; `replace` is
    /// used when the list is there, so the API server's audit log reads as a replacement.
    fn patch(shape: Self::Shape, entries: &[Self::Entry], out: impl std::io::Write) -> serde_json::Result<()>;

    /// The `status` members of a merge patch that sets the status list to `entries` alone.
    fn status(entries: &[Self::Entry]) -> serde_json::Value;

    /// The entries as a finding shows them: as Ingress-style addresses.
    fn shown(entries: Vec<Self::Entry>) -> Vec<Address>;

    /// Logs that the reconciler healed `object`'s stored status `from` → `to` under `policy`.
    fn healed(object: &dyn fmt::Display, from: &dyn fmt::Display, to: &dyn fmt::Display, policy: &str);

    /// The canonical entries for a policy's canonical addresses, or [`TooMany`].
    fn entries(canonical: &[Address]) -> Result<Cow<'_, [Self::Entry]>, TooMany>;

    /// Whether `written` holds the same entries as `canonical`, ignoring order.
    fn same(written: &[Self::Entry], canonical: &[Self::Entry]) -> bool;
}

// What a higher layer names per kind is said there, in a trait over `Governed`
// (`admission_policy::Admitted`): this module imports only the modules above it.

/// More canonical entries than a kind's status list may hold; the sources call it unresolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the canonical set has {entries} entries, more than the {max} {} holds (each IP and each hostname is one entry)",
    kind.info().field_of
)]
pub struct TooMany {
    /// The kind whose status list is too short.
    pub kind: Kind,
    /// The canonical entries.
    pub entries: usize,
    /// The most the kind's status list holds.
    pub max: usize,
}

/// What is kept of one class object (an IngressClass, a GatewayClass).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Class {
    /// The class's controller (`spec.controller`, `spec.controllerName`), if it names one.
    pub controller: Option<String>,
    /// Annotated as the cluster's default class (never, for a kind without a default).
    pub default: bool,
}

/// One kind's classes by name, as the sources hold them.
pub(crate) type Classes = BTreeMap<String, Class>;
