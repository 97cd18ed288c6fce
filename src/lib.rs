//! ingress-status-guard: a mutating admission webhook that enforces the canonical
//! `status.loadBalancer.ingress` of Kubernetes Ingresses.
//!
//! The pure core ([`address`], [`service`], [`config`], [`review`], [`patch`]) takes values and
//! returns values; the edges ([`sources`] watches, [`server`] HTTP and TLS, [`cli`]) do the I/O.

pub mod address;
pub mod audit;
pub mod certs;
pub mod cli;
pub mod config;
pub mod events;
pub mod metrics;
pub mod patch;
pub mod reload;
pub mod review;
pub mod server;
pub mod service;
pub mod sources;
pub mod tls;
