//! `ingress-status-guard certs generate`, black box: its files are served by our TLS stack
//! (`reload::start` + `server::serve`, as `serve --tls-cert --tls-key` does), and a client that
//! trusts only the printed caBundle verifies them for the Service's names.

use std::{net::SocketAddr, path::Path, process::Command};

use base64::Engine as _;
use http_body_util::{BodyExt, Full};
use hyper::{Request, body::Bytes};
use ingress_status_guard::{CERT_POLL_INTERVAL, CertFiles, Reloader, watch_certificates};

use crate::{
    fixture::FIXTURE,
    pki::{self, ClientTls},
    server::LocalServer,
};

const BINARY: &str = env!("CARGO_BIN_EXE_ingress-status-guard");

fn generate(out: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(BINARY)
        .args(["certs", "generate", "--service", "guard", "--namespace", "infra", "--out"])
        .arg(out)
        .args(extra)
        .output()
        .expect("run ingress-status-guard")
}

/// `serve --tls-cert DIR/tls.crt --tls-key DIR/tls.key`, in process.
async fn serve_files(dir: &Path) -> (LocalServer, Reloader) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let files = CertFiles { cert: dir.join("tls.crt"), key: dir.join("tls.key"), client_ca: None };
    let (tls, reloader) = watch_certificates(files, CERT_POLL_INTERVAL).await.expect("our TLS stack loads the files");
    (LocalServer::start(tls), reloader)
}

/// Connects as `name` trusting only `ca_pem` and posts a review over HTTP/2; returns the HTTP
/// status or the TLS error.
async fn post(addr: SocketAddr, ca_pem: &[u8], name: &str) -> Result<u16, String> {
    let config = ClientTls::trusting(ca_pem, b"h2").shared();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let stream = pki::handshake(tcp, &config, name).await.map_err(|e| e.to_string())?;
    let mut sender = pki::http2(stream).await.unwrap();
    let request = Request::post("/mutate")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(FIXTURE.as_bytes())))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(json["response"]["uid"], "0f3cb218-7947-4a5f-839c-6e300a5ae86a");
    Ok(status)
}

#[tokio::test]
async fn generated_files_are_served_and_verified_against_the_printed_ca_bundle() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("certs");
    let run = generate(&out, &["--print-ca-bundle"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));

    let stdout = String::from_utf8(run.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "only the caBundle on stdout: {stdout:?}");
    let bundle = base64::engine::general_purpose::STANDARD.decode(stdout.trim()).expect("the caBundle is base64");
    assert_eq!(bundle, std::fs::read(out.join("ca.crt")).unwrap(), "the caBundle is ca.crt");
    assert!(std::fs::read_to_string(out.join("tls.key")).unwrap().starts_with("-----BEGIN PRIVATE KEY-----"));
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(out.join("tls.key")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the key is private");
    }

    let (server, _reloader) = serve_files(&out).await;
    let addr = server.webhook;
    for name in ["guard.infra.svc", "guard.infra.svc.cluster.local"] {
        assert_eq!(post(addr, &bundle, name).await, Ok(200), "{name}");
    }
    let wrong = post(addr, &bundle, "other.infra.svc").await.unwrap_err();
    assert!(wrong.contains("certificate not valid for name \"other.infra.svc\""), "{wrong}");
    let stranger = tempfile::tempdir().unwrap();
    assert!(generate(stranger.path(), &[]).status.success());
    let untrusted = post(addr, &std::fs::read(stranger.path().join("ca.crt")).unwrap(), "guard.infra.svc").await;
    assert!(untrusted.unwrap_err().contains("UnknownIssuer"));
    server.stop().await;
}

#[test]
fn generate_refuses_to_overwrite_without_force() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(generate(tmp.path(), &[]).status.success());
    let first = std::fs::read(tmp.path().join("tls.key")).unwrap();

    let again = generate(tmp.path(), &[]);
    assert!(!again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("exists; pass --force to replace it"), "{stderr}");
    assert_eq!(std::fs::read(tmp.path().join("tls.key")).unwrap(), first, "nothing replaced");

    assert!(generate(tmp.path(), &["--force"]).status.success());
    assert_ne!(std::fs::read(tmp.path().join("tls.key")).unwrap(), first);
}

#[test]
fn generate_rejects_names_that_are_not_dns() {
    let tmp = tempfile::tempdir().unwrap();
    let run = Command::new(BINARY)
        .args(["certs", "generate", "--service", "Bad_Name", "--namespace", "infra", "--out"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("--service \"Bad_Name\" is not a valid Kubernetes name"), "{stderr}");
}
