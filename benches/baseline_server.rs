//! The baseline of the HTTPS benchmarks: the webhook's own stack (tokio multi-threaded runtime,
//! axum router with the same body limit, axum-server over rustls with the webhook's TLS
//! configuration and TCP_NODELAY) answering `POST /mutate` with a fixed AdmissionReview
//! response. It reads the body but never parses it: the upper limit of what the webhook can reach.
//!
//! Started by `benches/run.sh`:
//! `baseline_server --listen 127.0.0.1:PORT --tls-cert tls.crt --tls-key tls.key`.

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use axum::{
    Router,
    body::Bytes,
    extract::DefaultBodyLimit,
    http::header,
    response::{IntoResponse, Response},
    routing::post,
};
use axum_server::{accept::NoDelayAcceptor, tls_rustls::RustlsConfig};
use clap::Parser;
use ingress_status_guard::load_tls;

/// What the webhook answers to the benchmark's no-patch review, byte for byte.
const RESPONSE: &[u8] = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"0f3cb218-7947-4a5f-839c-6e300a5ae86a","allowed":true}}"#;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    listen: SocketAddr,
    #[arg(long)]
    tls_cert: PathBuf,
    #[arg(long)]
    tls_key: PathBuf,
    /// As the webhook's `--max-body-bytes` default.
    #[arg(long, default_value_t = 3 * 1024 * 1024)]
    max_body_bytes: usize,
}

async fn mutate(body: Bytes) -> Response {
    drop(body);
    ([(header::CONTENT_TYPE, "application/json")], RESPONSE).into_response()
}

fn main() -> std::process::ExitCode {
    let raw: Vec<String> = std::env::args().collect();
    if raw.iter().any(|a| a == "--bench") && !raw.iter().any(|a| a == "--listen") {
        println!("baseline_server is the reference server of benches/run.sh; it has nothing to run on its own");
        return std::process::ExitCode::SUCCESS;
    }
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = match load_tls(&args.tls_cert, &args.tls_key) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let result: std::io::Result<()> = runtime.block_on(async move {
        let listener = std::net::TcpListener::bind(args.listen)?;
        listener.set_nonblocking(true)?;
        let app = Router::new().route("/mutate", post(mutate)).layer(DefaultBodyLimit::max(args.max_body_bytes));
        eprintln!("baseline listening on https://{}/mutate", listener.local_addr()?);
        // As `server::serve`: TCP_NODELAY on every connection.
        axum_server::from_tcp_rustls(listener, RustlsConfig::from_config(Arc::new(config)))?
            .map(|tls| tls.acceptor(NoDelayAcceptor::new()))
            .serve(app.into_make_service())
            .await
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
