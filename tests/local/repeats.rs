//! Repeated findings are summarised, by the built binary: the first of a writer, Ingress and
//! value is logged in full, its repeats within `--repeat-log-interval` once at the interval's end
//! with their count, and the metrics count every one.

use std::{io::BufRead as _, net::SocketAddr, time::Duration};

use http_body_util::{BodyExt, Full};
use hyper::{Request, body::Bytes};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{fixture::Review, pki};

/// Longest any single wait of this test.
const BOUND: Duration = Duration::from_secs(20);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

async fn admin_get(addr: SocketAddr, path: &str) -> String {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut text = String::new();
    tcp.read_to_string(&mut text).await.unwrap();
    text
}

fn sample(metrics: &str, line: &str) -> Option<f64> {
    metrics.lines().find_map(|l| l.strip_prefix(line).and_then(|rest| rest.trim().parse().ok()))
}

#[tokio::test]
async fn repeated_findings_are_counted_and_summarised_once() {
    let (port, admin_port) = (free_port(), free_port());
    let tmp = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ingress-status-guard"))
        .args(["serve", &format!("--listen=127.0.0.1:{port}"), &format!("--admin-listen=127.0.0.1:{admin_port}")])
        .args(["--no-events", "--publish-status-address=192.0.2.10", "--log-format=json", "--repeat-log-interval=2"])
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
    let mut seen: Vec<Value> = Vec::new();
    let mut wait_for = |message: &str| -> Value {
        let deadline = std::time::Instant::now() + BOUND;
        while let Ok(line) = lines.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
            let Ok(json) = serde_json::from_str::<Value>(&line) else { continue };
            seen.push(json.clone());
            if json["message"] == message {
                return json;
            }
        }
        panic!("no log line {message:?} in {seen:?}");
    };
    wait_for("webhook listening (HTTPS, POST /mutate)");
    let ca_dir = std::fs::read_dir(tmp.path()).unwrap().flatten().next().expect("the ephemeral CA directory").path();
    let ca_pem = std::fs::read_to_string(ca_dir.join("ca.crt")).unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = pki::ClientTls::trusting(ca_pem.as_bytes(), b"http/1.1").shared();
    let mut send = pki::http1(pki::connect(([127, 0, 0, 1], port).into(), &config).await.unwrap()).await.unwrap();
    let mut post = async |ip: &str| {
        let body = Review::fixture().username("rogue").addresses(json!([{"ip": ip}])).to_vec();
        let request = Request::post("/mutate")
            .header("content-type", "application/json")
            .header("host", "localhost")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        send.ready().await.unwrap();
        let response = send.send_request(request).await.unwrap();
        assert_eq!(response.status(), 200);
        response.into_body().collect().await.unwrap();
    };
    for _ in 0..10 {
        post("10.7.7.7").await;
    }
    post("10.8.8.8").await;

    let summary = wait_for("rogue status write repeated (after the first, logged in full)");
    assert_eq!(summary["repeats"], 9, "{summary}");
    assert_eq!(summary["attempted"], "10.7.7.7", "{summary}");
    assert_eq!(summary["writer"], "rogue", "{summary}");
    assert_eq!(summary["interval_seconds"], 2, "{summary}");
    let full: Vec<&Value> = seen.iter().filter(|l| l["message"] == "rogue status write").collect();
    assert_eq!(full.len(), 2, "one full line per value: {full:?}");

    let metrics = admin_get(([127, 0, 0, 1], admin_port).into(), "/metrics").await;
    let rogue = "ingress_status_guard_rogue_writes_total{policy=\"default\",writer=\"rogue\",action=\"patched\"}";
    assert_eq!(sample(&metrics, rogue), Some(11.0), "every finding counted: {metrics}");
    let full = "ingress_status_guard_findings_logged_total{line=\"full\"}";
    let repeat = "ingress_status_guard_findings_logged_total{line=\"repeat\"}";
    assert_eq!((sample(&metrics, full), sample(&metrics, repeat)), (Some(2.0), Some(9.0)), "{metrics}");
    let _ = child.kill();
    let _ = child.wait();
}
