//! The `ingress-status-guard` binary: everything lives in the library.

fn main() -> std::process::ExitCode {
    ingress_status_guard::cli::main()
}
