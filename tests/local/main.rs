//! The hermetic integration tests, one binary: the production router and `serve` in process,
//! over real TLS on loopback, and the built binary as a child process. Nothing here needs a
//! cluster; the suites that start kube-apiserver, helm or promtool keep binaries of their own.
//!
//! The modules share one process, so nothing in them may change process-wide state other than
//! installing the ring crypto provider (every module installs the same one, and a second
//! install is a no-op); environment variables are only set on child processes.

mod fixture;
mod pki;
mod server;

mod bounds;
mod certs;
mod cli;
mod fuzz_reader;
mod h2frames;
mod hostile;
mod props;
mod rotation;
mod router;
mod shutdown;
mod tls;
