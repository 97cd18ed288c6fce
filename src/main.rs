//! The `ingress-status-guard` binary: everything lives in the library.

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    ingress_status_guard::main()
}
