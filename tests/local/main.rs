//! The hermetic integration tests, one binary: the production router and `serve` in process,
//! over real TLS on loopback, and the built binary as a child process. Nothing here needs a
//! cluster; the suites that start kube-apiserver, run helm or promtool keep binaries of their own.
//!
//! The modules share one process and run on parallel threads, so none may change process-wide
//! state beyond installing the ring crypto provider (all install the same one; a second install
//! is a no-op). Environment variables are set only on child processes, and no module has a
//! global allocator or measures the process's memory, which would need a binary of its own
//! (`fits` measures the peak RSS of a child process, the built binary).

mod fixture;
mod pki;
mod server;

mod bounds;
mod certs;
mod cli;
mod connections;
mod fits;
mod fuzz_reader;
mod h2frames;
mod hostile;
mod mtls;
mod probe;
mod props;
mod repeats;
mod rotation;
mod router;
mod shutdown;
mod tls;
mod wire;
