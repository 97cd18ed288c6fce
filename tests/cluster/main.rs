//! The tests that need a real control plane, one binary: kube-apiserver + etcd started once per
//! run and shared (`support::Cluster::shared`), each test in namespaces of its own
//! (`support::TestEnv`). A test that stops the API server, needs another Kubernetes version or
//! changes what every namespace sees (a default IngressClass) starts a control plane of its own
//! (`Cluster::fresh`, `Cluster::fresh_version`, `TestEnv::private`).
//!
//! Cluster-scoped objects a test creates carry its namespace's name (or a name no other test
//! uses), since every module's tests run side by side against the same API server. Suites that
//! measure the process's allocations (`alloc`, `books_memory`, `cache_memory`, `cache_api`,
//! `stream_list`), the long soak and the hermetic `docs`, `imports` and `local` keep binaries of
//! their own.

// Items only the other binaries and the benches use (the allocation suites, the soak).
#[allow(dead_code)]
#[path = "../support/mod.rs"]
mod support;

#[path = "../support/prometheus_build.rs"]
mod prometheus_build;

mod admission_policy;
mod alerts;
mod audit;
mod chart;
mod check;
mod churn;
mod cutover;
mod dashboard;
mod deploy;
mod e2e;
mod fights;
mod forged;
mod gateway;
mod leader;
mod matching;
mod metallb;
mod outage;
mod pages;
mod plugin;
mod reconcile;
mod scope;
mod service;
mod traefik;
mod trusted;
