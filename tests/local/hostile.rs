//! Hostile callers of `serve` on loopback (issue 12): whatever reaches the webhook port can post
//! a forged review, and must not be able to forge metrics or log lines, grow memory through
//! labels, or make the webhook write unbounded text. Every run is bounded in count and time.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use http_body_util::{BodyExt, Full};
use hyper::{Request, body::Bytes};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{
    fixture::Review,
    pki::{self, ClientTls, Pki},
    server::LocalServer,
};

/// Longest any single exchange of these tests may take before the test fails.
const BOUND: Duration = Duration::from_secs(20);

fn start() -> (LocalServer, Arc<rustls::ClientConfig>) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pki = Pki::new("hostile test CA", &["localhost"]);
    let server = LocalServer::start(pki.server_config());
    (server, pki.client(b"http/1.1").shared())
}

/// An HTTP/1.1 connection that posts reviews one after another.
struct Poster(hyper::client::conn::http1::SendRequest<Full<Bytes>>);

impl Poster {
    async fn open(addr: SocketAddr, config: &Arc<rustls::ClientConfig>) -> Poster {
        Poster(pki::http1(pki::connect(addr, config).await.unwrap()).await.unwrap())
    }

    async fn post(&mut self, body: Vec<u8>) -> (u16, Value) {
        let request = Request::post("/mutate")
            .header("content-type", "application/json")
            .header("host", "localhost")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        let exchange = async {
            self.0.ready().await.unwrap();
            let response = self.0.send_request(request).await.unwrap();
            let status = response.status().as_u16();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
        };
        tokio::time::timeout(BOUND, exchange).await.expect("the webhook answers")
    }
}

/// `GET path` on the plain-HTTP admin port.
async fn admin_get(addr: SocketAddr, path: &str) -> String {
    let exchange = async {
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        tcp.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes()).await.unwrap();
        let mut text = String::new();
        tcp.read_to_string(&mut text).await.unwrap();
        text
    };
    tokio::time::timeout(BOUND, exchange).await.expect("the admin port answers")
}

#[tokio::test]
async fn usernames_cannot_forge_metrics_or_grow_them() {
    let (server, client) = start();
    let mut poster = Poster::open(server.webhook, &client).await;
    let forged = "evil\"} 1\ningress_status_guard_admission_requests_total{result=\"patched\"} 1e9\n# x";
    let (status, _) =
        poster.post(Review::fixture().username(forged).addresses(json!([{"ip": "10.7.7.7"}])).to_vec()).await;
    assert_eq!(status, 200);
    // 60 distinct writers of 64 KiB each, against the default cap of 50 writer labels.
    for i in 0..60 {
        let writer = format!("{i}-{}", "u".repeat(64 * 1024));
        let (status, _) =
            poster.post(Review::fixture().username(&writer).addresses(json!([{"ip": "10.7.7.7"}])).to_vec()).await;
        assert_eq!(status, 200);
    }
    let metrics = admin_get(server.admin, "/metrics").await;
    // Every result label exists from the start (at 0); only the real one counted, nothing forged.
    let requests: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("ingress_status_guard_admission_requests_total") && !l.ends_with(" 0"))
        .collect();
    assert_eq!(requests, ["ingress_status_guard_admission_requests_total{result=\"patched\"} 61"], "{metrics}");
    let series = metrics.lines().filter(|l| l.starts_with("ingress_status_guard_rogue_writes_total{")).count();
    assert_eq!(series, 50, "the 50 writers seen most recently have a label, the rest were pushed out");
    assert!(metrics.contains("ingress_status_guard_writer_labels_evicted_total 11"), "{metrics}");
    assert!(metrics.len() < 64 * 1024, "/metrics is {} bytes", metrics.len());
    server.stop().await;
}

#[tokio::test]
async fn attempted_addresses_are_bounded_everywhere() {
    let (server, client) = start();
    let mut poster = Poster::open(server.webhook, &client).await;
    let many: Vec<Value> = (0..10_000).map(|i| json!({"hostname": format!("host-{i}.example.test")})).collect();
    let (status, response) =
        poster.post(Review::fixture().username("rogue").addresses(Value::Array(many)).to_vec()).await;
    assert_eq!(status, 200);
    let attempted = response["response"]["auditAnnotations"]["attempted"].as_str().unwrap();
    // Past the 256 entries the reader keeps, the count comes first.
    assert!(attempted.len() <= 1024 + 40, "attempted annotation is {} bytes", attempted.len());
    assert!(
        attempted.starts_with("10000 entries: host-0.example.test,") && attempted.ends_with("more)"),
        "{attempted}"
    );
    let warning = response["response"]["warnings"][0].as_str().unwrap();
    assert!(warning.chars().count() <= 120, "{warning}");

    let forged = json!([{"hostname": "a\nINFO forged line\r\u{1b}[2K"}]);
    let (status, response) = poster.post(Review::fixture().username("rogue").addresses(forged).to_vec()).await;
    assert_eq!(status, 200);
    let attempted = response["response"]["auditAnnotations"]["attempted"].as_str().unwrap();
    assert_eq!(attempted, r"a\nINFO forged line\r\u{1b}[2K");
    server.stop().await;
}

/// Without --tls-cert, `serve` writes its ephemeral CA to a private directory with a random
/// name, and removes it on exit (before: `$TMPDIR/ingress-status-guard-<pid>`, 0755, written
/// through a planted symlink, never removed).
#[test]
fn ephemeral_ca_directory_is_private_and_removed() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ingress-status-guard"))
        .args([
            "serve",
            "--listen=127.0.0.1:0",
            "--admin-listen=127.0.0.1:0",
            "--probe-listen=127.0.0.1:0",
            "--no-events",
        ])
        .args(["--publish-status-address=192.0.2.10"])
        .env("TMPDIR", tmp.path())
        .env_remove("KUBECONFIG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + BOUND;
    let dir = loop {
        let found = std::fs::read_dir(tmp.path()).unwrap().flatten().find(|e| e.path().join("ca.crt").exists());
        if let Some(entry) = found {
            break entry.path();
        }
        assert!(std::time::Instant::now() < deadline, "no CA directory appeared in {}", tmp.path().display());
        std::thread::sleep(Duration::from_millis(50));
    };
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    assert_ne!(name, format!("ingress-status-guard-{}", child.id()), "name must not be predictable");
    assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700, "{name}");
    let status = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let deadline = std::time::Instant::now() + BOUND;
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve did not stop after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "{exit}");
    assert!(!dir.exists(), "{} is removed on exit", dir.display());
}

/// A long --shutdown-delay-seconds is cut short by a second SIGTERM.
#[test]
fn second_sigterm_ends_the_shutdown_delay() {
    use std::io::BufRead as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ingress-status-guard"))
        .args([
            "serve",
            "--listen=127.0.0.1:0",
            "--admin-listen=127.0.0.1:0",
            "--probe-listen=127.0.0.1:0",
            "--no-events",
        ])
        .args(["--publish-status-address=192.0.2.10", "--shutdown-delay-seconds=600"])
        .env_remove("KUBECONFIG")
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let wait_for = |needle: &str| {
        let deadline = std::time::Instant::now() + BOUND;
        while let Ok(line) = lines.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
            if line.contains(needle) {
                return;
            }
        }
        panic!("no log line containing {needle:?}");
    };
    let term = || {
        assert!(
            std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success()
        );
    };
    wait_for("webhook listening");
    term();
    wait_for("serving on until endpoints drop this pod");
    term();
    let deadline = std::time::Instant::now() + BOUND;
    loop {
        if let Some(exit) = child.try_wait().unwrap() {
            assert!(exit.success(), "{exit}");
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("still in the 600 s shutdown delay after a second SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The plain log format of the binary keeps a forged hostname on its one line (before: a `\n`
/// in a status write started a whole forged log line).
#[tokio::test]
async fn forged_hostnames_stay_on_one_plain_log_line() {
    use std::io::BufRead as _;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let tmp = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ingress-status-guard"))
        .args([
            "serve",
            &format!("--listen=127.0.0.1:{port}"),
            "--admin-listen=127.0.0.1:0",
            "--probe-listen=127.0.0.1:0",
            "--no-events",
        ])
        .args(["--publish-status-address=192.0.2.10", "--log-format=plain"])
        .env("TMPDIR", tmp.path())
        .env("RUST_LOG", "info")
        .env_remove("KUBECONFIG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let mut seen = Vec::new();
    let mut wait_for = |needle: &str| -> String {
        let deadline = std::time::Instant::now() + BOUND;
        while let Ok(line) = lines.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
            seen.push(line.clone());
            if line.contains(needle) {
                return line;
            }
        }
        panic!("no log line containing {needle:?} in {seen:?}");
    };
    wait_for("webhook listening");
    let ca_dir = std::fs::read_dir(tmp.path()).unwrap().flatten().next().expect("the ephemeral CA directory").path();
    let ca_pem = std::fs::read_to_string(ca_dir.join("ca.crt")).unwrap();

    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = ClientTls::trusting(ca_pem.as_bytes(), b"http/1.1").shared();
    let mut poster = Poster::open(([127, 0, 0, 1], port).into(), &config).await;
    let forged = json!([{"hostname": "a\nINFO ingress_status_guard: forged line\r\u{1b}[2K"}]);
    let (status, _) = poster.post(Review::fixture().username("rogue").addresses(forged).to_vec()).await;
    assert_eq!(status, 200);
    let line = wait_for("rogue status write");
    assert!(line.contains(r"a\nINFO ingress_status_guard: forged line\r\u{1b}[2K"), "{line}");
    let _ = child.kill();
    let _ = child.wait();
    // Nothing after the finding's line may be the forged one.
    while let Ok(line) = lines.recv_timeout(Duration::from_millis(200)) {
        assert!(!line.contains("forged line") || line.contains("rogue status write"), "{line}");
    }
}
