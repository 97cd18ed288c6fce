//! ingress-status-guard: a mutating admission webhook, and a reconciler, that keep the status
//! address of governed Kubernetes objects canonical: `status.loadBalancer.ingress` of Ingresses
//! and `status.addresses` of Gateway API Gateways.
//!
//! One folder per concern (docs/architecture.md has the map and the import order). What differs
//! between the governed kinds is said once per kind in `kind/<kind>.rs` (the `Governed` trait);
//! everything else is written once over it. A review is read by `review`, judged by `decide`
//! (in `decision`) over `policy` and `sources`, and answered by [`render`]; the reconciler
//! (`reconcile`) and `check` call the same `decide`. The pure core takes values and returns
//! values; the I/O is at the edges (`server`, `sources::follow`, `reload`, `audit::events`, `cli`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod address;
mod admission_policy;
mod audit;
mod check;
mod cli;
mod client;
mod cutover;
mod decision;
mod kind;
mod metrics;
mod names;
mod policy;
mod reconcile;
mod reload;
mod review;
mod scope;
mod server;
mod sources;
mod strict;
mod tls;

// What the binary, the integration tests and the benchmarks use; everything else is private to
// the crate, so the compiler reports what nothing uses.
pub use cli::main;
pub use kind::Kind;
pub use policy::{Mode, OnUnresolved, PodsSpec, Policies, PolicySpec, SelectorSpec, SourceSpec, SpecError, parse_file};
/// The reconciler's cache of Ingresses (and of Services) and its per-object bookkeeping, for the memory tests
/// of their bytes per object: test support, built only with the `test-support` feature (which
/// the tests' own dev-dependency on this crate turns on).
#[cfg(feature = "test-support")]
#[doc(hidden)]
pub use reconcile::{Bookkeeping, IngressCache, ServiceCache};
pub use reload::{
    CertFiles, Outcome as ReloadOutcome, POLL_INTERVAL as CERT_POLL_INTERVAL, Reloader, start as watch_certificates,
    start_requiring as watch_certificates_requiring,
};
pub use review::{Review, read as read_review, render};
pub use server::{
    AppState, Limits, Listeners, Tasks, WebhookPort, admin_router, serve, webhook_router, webhook_router_with,
};
/// What the node-IP source keeps of a Node, for the memory benchmark of its cache.
#[doc(hidden)]
pub use sources::NodeAddrs;
pub use sources::{SourceCache, Sources};
pub use tls::certs::{Ca, generate as generate_certificates, service_names, verify_serving};
pub use tls::{ClientNames, load as load_tls, server_config as tls_server_config};
