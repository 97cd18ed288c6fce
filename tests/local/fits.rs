//! The sum of the bounds fits the pod (issue 20): the built binary, started with its default
//! bounds, is flooded at once with more connections than its tables hold, full HTTP/2 stream
//! tables of near-limit header lists with bodies that stall, stalled request heads on the
//! webhook and admin ports, and maximum-size reviews, for two rounds of its read timeouts and until
//! the request bounds refuse (on a busy machine the flooding clients are slow to get there). Its
//! peak RSS (`VmHWM`) growth over idle, plus a release build's idle, must stay under the shipped
//! memory limit, 64 Mi: the debug build under test idles about 15 MiB higher than the image's
//! release build. The flood is bounded in count and time; nothing asserts how long anything took.

use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    process::{Child, Command, Stdio},
    sync::Arc,
    time::Duration,
};

use http_body_util::{Full, StreamBody};
use hyper::body::{Bytes, Frame};
use serde_json::json;
use tokio::{io::AsyncWriteExt, time::Instant};

use crate::{
    fixture::Review,
    pki::{self, ClientTls},
};

/// The memory limit of the shipped Deployment and chart (`resources.limits.memory: 64Mi`).
const POD_LIMIT_KIB: u64 = 64 * 1024;
/// The release build's idle RSS, as docs/security.md's table counts it. The test runs the debug
/// build, whose code and debug sections idle about 15 MiB higher, so what it asserts is the
/// flood's growth over its own idle: that growth plus the release build's idle fits the pod.
const RELEASE_IDLE_KIB: u64 = 15 * 1024;
/// How long the flood lasts at least: two rounds of the 5 s header and body read timeouts.
const FLOOD: Duration = Duration::from_secs(12);
/// How long it may go on, on a machine so busy that the flooding clients (not the guard) are
/// slow to reach the request bounds: the flood lasts until they are reached, within this.
const FLOOD_AT_MOST: Duration = Duration::from_secs(60);
/// Longest any setup step may take.
const BOUND: Duration = Duration::from_secs(30);

/// The binary with its default bounds; only the ports (kernel-chosen) and the address source
/// are given. `FLOOD_EXTRA_ARGS` (split on spaces) adds flags, to measure other settings.
struct Guard {
    child: Child,
    webhook: SocketAddr,
    admin: SocketAddr,
    ca_pem: String,
    _log: tempfile::TempDir,
}

impl Guard {
    fn start() -> Guard {
        let log = tempfile::tempdir().unwrap();
        let log_path = log.path().join("guard.log");
        let extra = std::env::var("FLOOD_EXTRA_ARGS").unwrap_or_default();
        let mut command = Command::new(env!("CARGO_BIN_EXE_ingress-status-guard"));
        command
            .args(["serve", "--listen=127.0.0.1:0", "--admin-listen=127.0.0.1:0", "--probe-listen=127.0.0.1:0"])
            .args(["--publish-status-address=192.0.2.10", "--no-events", "--log-format=json"])
            .args(extra.split_whitespace())
            .env("TMPDIR", log.path())
            .env_remove("KUBECONFIG")
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_path).unwrap());
        // The defaults, not whatever the environment of the test run says.
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("ISG_") {
                command.env_remove(name);
            }
        }
        let child = command.spawn().unwrap();
        let deadline = std::time::Instant::now() + BOUND;
        let (mut webhook, mut admin, mut ca) = (None, None, None);
        while webhook.is_none() {
            assert!(std::time::Instant::now() < deadline, "the guard did not start");
            std::thread::sleep(Duration::from_millis(50));
            let Ok(file) = std::fs::File::open(&log_path) else { continue };
            for line in BufReader::new(file).lines().map_while(Result::ok) {
                let Ok(line) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
                let address = line["address"].as_str().and_then(|a| a.parse::<SocketAddr>().ok());
                match line["message"].as_str() {
                    Some(m) if m.starts_with("admin server listening") => admin = address,
                    Some(m) if m.starts_with("webhook listening") => webhook = address,
                    _ => {}
                }
                if let Some(path) = line["ca_bundle"].as_str() {
                    ca = Some(std::fs::read_to_string(path).unwrap());
                }
            }
        }
        Guard { child, webhook: webhook.unwrap(), admin: admin.unwrap(), ca_pem: ca.unwrap(), _log: log }
    }

    /// Peak resident set size so far, in KiB.
    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc/PID/status")
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Header lists just under the default 8 KiB bound: three fields of 2,500 bytes.
fn big_headers(request: hyper::http::request::Builder) -> hyper::http::request::Builder {
    let pad = "p".repeat(2_500);
    request.header("x-pad-a", &pad).header("x-pad-b", &pad).header("x-pad-c", &pad)
}

type Stalling = StreamBody<futures::stream::BoxStream<'static, Result<Frame<Bytes>, std::io::Error>>>;

/// A body that declares 3 MB, sends 64 KiB and then never ends.
fn stalling() -> Stalling {
    use futures::StreamExt as _;
    let first = futures::stream::iter([Ok(Frame::data(Bytes::from(vec![b' '; 64 * 1024])))]);
    StreamBody::new(first.chain(futures::stream::pending()).boxed())
}

/// One HTTP/2 connection with 32 streams (twice the default cap), each posting a near-limit header
/// list and a stalling body, again as soon as it is answered, until `end`.
async fn h2_streams(addr: SocketAddr, config: Arc<rustls::ClientConfig>, end: Instant) {
    let Ok(Ok(tls)) = tokio::time::timeout(BOUND, pki::connect(addr, &config)).await else { return };
    let Ok(sender) = pki::http2::<Stalling>(tls).await else { return };
    let streams = (0..32).map(|_| {
        let mut sender = sender.clone();
        async move {
            while Instant::now() < end {
                let request = big_headers(hyper::Request::post("https://localhost/mutate"))
                    .header("content-type", "application/json")
                    .header("content-length", 3_000_000)
                    .body(stalling())
                    .unwrap();
                if sender.ready().await.is_err() {
                    return;
                }
                // A stream refused before the server's SETTINGS arrived is simply tried again.
                if tokio::time::timeout_at(end, sender.send_request(request)).await.is_err() {
                    return;
                }
            }
        }
    });
    futures::future::join_all(streams).await;
}

/// A request head of 7 KiB that never ends, on a new connection, again when closed, until
/// `end`; over TLS when `config` is given.
async fn stalled_heads(addr: SocketAddr, config: Option<Arc<rustls::ClientConfig>>, end: Instant) {
    let head = format!("POST /mutate HTTP/1.1\r\nhost: localhost\r\nx-pad: {}\r\n", "h".repeat(7 * 1024));
    while Instant::now() < end {
        let sent = async {
            let tcp = tokio::net::TcpStream::connect(addr).await?;
            let mut buf = [0u8; 1024];
            match &config {
                Some(config) => {
                    let mut tls = pki::handshake(tcp, config, "localhost").await?;
                    tls.write_all(head.as_bytes()).await?;
                    tls.flush().await?;
                    while tokio::io::AsyncReadExt::read(&mut tls, &mut buf).await? > 0 {}
                }
                None => {
                    let mut tcp = tcp;
                    tcp.write_all(head.as_bytes()).await?;
                    while tokio::io::AsyncReadExt::read(&mut tcp, &mut buf).await? > 0 {}
                }
            }
            Ok::<_, std::io::Error>(())
        };
        let _ = tokio::time::timeout_at(end, sent).await;
    }
}

/// Maximum-size reviews (a rogue write padded to 3 MB), one after another on one HTTP/1.1
/// connection, until `end`.
async fn full_reviews(addr: SocketAddr, config: Arc<rustls::ClientConfig>, body: Bytes, end: Instant) {
    while Instant::now() < end {
        let Ok(Ok(tls)) = tokio::time::timeout(BOUND, pki::connect(addr, &config)).await else { continue };
        let Ok(mut sender) = pki::http1::<Full<Bytes>>(tls).await else { continue };
        while Instant::now() < end {
            let request = hyper::Request::post("/mutate")
                .header("host", "localhost")
                .header("content-type", "application/json")
                .body(Full::new(body.clone()))
                .unwrap();
            if sender.ready().await.is_err() {
                break;
            }
            match tokio::time::timeout_at(end, sender.send_request(request)).await {
                Ok(Ok(response)) => {
                    let _ = http_body_util::BodyExt::collect(response.into_body()).await;
                }
                _ => break,
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_defaults_fit_the_pod_under_a_flood() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let guard = Guard::start();
    let idle_kib = guard.peak_rss_kib();
    let h2 = ClientTls::trusting(guard.ca_pem.as_bytes(), b"h2").shared();
    let h1 = ClientTls::trusting(guard.ca_pem.as_bytes(), b"http/1.1").shared();
    let pad = "x".repeat(3_000_000);
    let review = Review::fixture()
        .username("flood")
        .addresses(json!([{"ip": "10.7.7.7"}]))
        .set(&["request", "object", "metadata", "annotations"], json!({ "pad": pad }))
        .to_vec();
    assert!(review.len() <= 3 * 1024 * 1024, "within the default --max-body-bytes");
    let review = Bytes::from(review);

    let start = Instant::now();
    let end = start + FLOOD_AT_MOST;
    let mut flood = tokio::task::JoinSet::new();
    // More HTTP/2 connections than the webhook's 64 slots, each with a full stream table.
    for _ in 0..200 {
        flood.spawn(h2_streams(guard.webhook, h2.clone(), end));
    }
    for _ in 0..100 {
        flood.spawn(stalled_heads(guard.webhook, Some(h1.clone()), end));
        flood.spawn(stalled_heads(guard.admin, None, end));
    }
    for _ in 0..8 {
        flood.spawn(full_reviews(guard.webhook, h1.clone(), review.clone(), end));
    }
    let mut peak_kib = idle_kib;
    let mut counted = Vec::new();
    let mut reached = false;
    while Instant::now() < end && !(reached && start.elapsed() >= FLOOD) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        peak_kib = guard.peak_rss_kib();
        eprintln!("guard VmHWM {peak_kib} KiB");
        if !reached && start.elapsed() >= FLOOD {
            // The admin port is flooded too: a scrape that does not get through is tried again.
            if let Some(metrics) = scrape(guard.admin).await {
                counted = refusals(&metrics);
                reached = counted
                    .iter()
                    .any(|l| l.contains("reason=\"in_flight\"") || l.contains("reason=\"buffered_bytes\""));
            }
        }
    }
    let flooded_for = start.elapsed();
    flood.abort_all();
    while flood.join_next().await.is_some() {}
    // Still serving, and still itself.
    let metrics = scrape(guard.admin).await.expect("the admin port answers once the flood ends");
    if !reached {
        counted = refusals(&metrics);
    }
    let peak_kib = peak_kib.max(guard.peak_rss_kib());
    let growth_kib = peak_kib.saturating_sub(idle_kib);
    eprintln!(
        "guard peak RSS: idle {idle_kib} KiB, flooded {peak_kib} KiB (+{growth_kib} KiB) over {flooded_for:?}; {counted:#?}"
    );
    assert!(reached, "the flood reached the request bounds within {FLOOD_AT_MOST:?}: {counted:#?}");
    assert!(
        RELEASE_IDLE_KIB + growth_kib < POD_LIMIT_KIB,
        "the flood grew the RSS by {growth_kib} KiB (idle {idle_kib}, peak {peak_kib}); with a release build's \
         {RELEASE_IDLE_KIB} KiB idle that is over the pod's 64 MiB limit"
    );
}

/// `GET /metrics` on a connection of its own, or `None` if the answer is not a 200 in time.
async fn scrape(admin: SocketAddr) -> Option<String> {
    let read = async {
        let mut tcp = tokio::net::TcpStream::connect(admin).await.ok()?;
        tcp.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.ok()?;
        let mut metrics = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut tcp, &mut metrics).await.ok()?;
        Some(metrics)
    };
    let metrics = tokio::time::timeout(BOUND, read).await.ok()??;
    metrics.starts_with("HTTP/1.1 200").then_some(metrics)
}

/// The non-zero refusal, eviction and result counters of a scrape.
fn refusals(metrics: &str) -> Vec<String> {
    metrics
        .lines()
        .filter(|l| l.contains("refused_total{") || l.contains("evicted_total{") || l.contains("requests_total{result"))
        .filter(|l| !l.ends_with(" 0"))
        .map(str::to_owned)
        .collect()
}
