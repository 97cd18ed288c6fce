//! The governed kinds: what differs between an Ingress and a Gateway on the wire, said once per
//! kind ([`Governed`], implemented in `kind/ingress.rs` and `kind/gateway.rs`), and the one
//! [`Kind`] value that names a kind everywhere else (logs, metrics, audit, policies). The review,
//! the decision and the reconciler are written once over [`Governed`], as linkerd2's
//! policy-controller admits every resource through one `admit_spec::<T>` over `Validate<T>`.

use std::{borrow::Cow, fmt};

use serde::Serialize;

use crate::{
    address::Address,
    sources::{Sources, Unresolved},
};

pub(crate) mod gateway;
pub(crate) mod ingress;

/// Which kind of object: the one spelling of it outside `kind/<kind>.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `networking.k8s.io/v1` Ingress: `status.loadBalancer.ingress`.
    Ingress,
    /// `gateway.networking.k8s.io/v1` Gateway: `status.addresses`.
    Gateway,
}

impl Kind {
    /// The kind as the API, logs and `explain` name it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Ingress => "Ingress",
            Kind::Gateway => "Gateway",
        }
    }

    /// The kind as the `kind` label of metrics and `check`'s KIND column name it.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Kind::Ingress => "ingress",
            Kind::Gateway => "gateway",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A write of a governed object's status (from a review, or a stored object), as the decision
/// sees it: which object, its class, and the entries of its status list, bounded.
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
    /// Entries written after `addresses`, counted but not kept: a list past the bound, which is
    /// never canonical.
    pub omitted: usize,
}

impl<E> Default for Write<E> {
    fn default() -> Self {
        Write { namespace: String::new(), name: String::new(), class: None, addresses: Vec::new(), omitted: 0 }
    }
}

/// A bounded list read from a caller: the first entries kept, the rest counted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(dead_code)] // the readers' bounded lists fold into it next
pub(crate) struct Bounded<E> {
    /// The entries kept, in order.
    pub(crate) kept: Vec<E>,
    /// How many more there were.
    pub(crate) omitted: usize,
}

impl<E> Default for Bounded<E> {
    fn default() -> Self {
        Bounded { kept: Vec::new(), omitted: 0 }
    }
}

/// The entry type of a governed kind's status list, naming its kind, so that a [`Write`] says
/// which kind it is and generic code is called without turbofish.
pub trait Entry: Clone + Eq + fmt::Debug + fmt::Display + Serialize + Send + Sync + 'static {
    /// The kind whose status list holds this entry.
    type Of: Governed<Entry = Self>;
}

/// What one governed kind is on the wire. Everything else is written once over it.
pub trait Governed: Sized + Send + Sync + 'static {
    /// Which kind this is.
    const KIND: Kind;
    /// One entry of the kind's status list.
    type Entry: Entry<Of = Self>;
    /// How much of the status path an object has: where a patch must go.
    type Shape: Copy + Eq + fmt::Debug + Send + Sync + 'static;

    /// The canonical entries of this kind for a policy's canonical addresses, or why the kind
    /// cannot hold them.
    fn entries(canonical: &[Address]) -> Result<Cow<'_, [Self::Entry]>, Unresolved>;

    /// Whether `written` holds the same entries as `canonical`, ignoring order.
    fn same(written: &[Self::Entry], canonical: &[Self::Entry]) -> bool;

    /// The controller of class `class`, from the kind's class cache.
    fn class_controller(sources: &dyn Sources, class: &str) -> Option<String>;

    /// The cluster's default classes with their controllers (kinds without a default: none).
    fn default_classes(sources: &dyn Sources) -> Vec<(String, Option<String>)>;
}
