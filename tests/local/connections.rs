//! Connections that a hostile client holds (issue 20): probes on a port of their own answer
//! while the admin port is flooded, a full table serves the newcomer by evicting an idle
//! connection, no connection outlives its maximum age however busy it keeps itself, and a
//! review decided after its answer went out is reported as what happened. Every wait is bounded
//! by `BOUND`; no test asserts how long anything took.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use ingress_status_guard::Limits;
use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::{
    fixture::Review,
    h2frames::{self, END_HEADERS, END_STREAM, HEADERS},
    pki::{self, Pki},
    server::LocalServer,
};

/// Longest any single wait of these tests may take before the test fails.
const BOUND: Duration = Duration::from_secs(20);

fn start(limits: Limits) -> (LocalServer, Pki) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pki = Pki::new("connections test CA", &["localhost"]);
    let server = LocalServer::start_with(pki.server_config(), Limits { max_body_bytes: 3 << 20, ..limits });
    (server, pki)
}

/// Reads one response to `GET /livez` (whose body is `ok\n`); `false` if the connection ended
/// first.
async fn read_livez(tcp: &mut TcpStream) -> bool {
    let mut text = Vec::new();
    let mut buf = [0u8; 1024];
    while !text.ends_with(b"ok\n") {
        match tcp.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => text.extend_from_slice(&buf[..n]),
        }
    }
    assert!(text.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&text));
    true
}

/// A new connection's `GET path` with `connection: close`: the whole answer.
async fn get_once(addr: SocketAddr, path: &str) -> String {
    let exchange = async {
        let mut tcp = TcpStream::connect(addr).await?;
        tcp.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes()).await?;
        let mut text = String::new();
        tcp.read_to_string(&mut text).await?;
        Ok::<_, std::io::Error>(text)
    };
    match tokio::time::timeout(BOUND, exchange).await {
        Ok(Ok(text)) => text,
        Ok(Err(e)) => format!("<failed: {e}>"),
        Err(_) => format!("<no answer within {BOUND:?}>"),
    }
}

/// The hostile client of the issue: holds a keep-alive connection to `addr` with one
/// `GET /livez` every 2 s, and reconnects a second after losing it.
async fn hold(addr: SocketAddr, stop: Arc<AtomicBool>, connects: Arc<AtomicUsize>) {
    while !stop.load(Ordering::Relaxed) {
        if let Ok(mut tcp) = TcpStream::connect(addr).await {
            connects.fetch_add(1, Ordering::Relaxed);
            while !stop.load(Ordering::Relaxed) {
                if tcp.write_all(b"GET /livez HTTP/1.1\r\nhost: x\r\n\r\n").await.is_err() {
                    break;
                }
                if !matches!(tokio::time::timeout(BOUND, read_livez(&mut tcp)).await, Ok(true)) {
                    break;
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_are_answered_while_200_connections_hold_the_admin_port() {
    let (server, _pki) = start(Limits::default());
    let stop = Arc::new(AtomicBool::new(false));
    let connects = Arc::new(AtomicUsize::new(0));
    let holders: Vec<_> = (0..200).map(|_| tokio::spawn(hold(server.admin, stop.clone(), connects.clone()))).collect();
    // Every holder has connected at least once: the admin port (64 slots) is over-full.
    let deadline = tokio::time::Instant::now() + BOUND;
    while connects.load(Ordering::Relaxed) < 200 {
        assert!(tokio::time::Instant::now() < deadline, "only {} holders connected", connects.load(Ordering::Relaxed));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for attempt in 1..=5 {
        let ready = get_once(server.probe, "/readyz").await;
        assert!(ready.starts_with("HTTP/1.1 200") && ready.ends_with("ok\n"), "probe {attempt}: {ready}");
        // The admin port at its cap serves a newcomer too, by evicting an idle holder.
        let live = get_once(server.admin, "/livez").await;
        assert!(live.starts_with("HTTP/1.1 200"), "admin {attempt}: {live}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let metrics = get_once(server.admin, "/metrics").await;
    let evicted = metrics
        .lines()
        .find_map(|l| l.strip_prefix("ingress_status_guard_connections_evicted_total{listener=\"admin\"} "))
        .and_then(|n| n.parse::<u64>().ok());
    assert!(evicted.is_some_and(|n| n > 0), "{metrics}");
    // The probe port only serves probes.
    assert!(get_once(server.probe, "/metrics").await.starts_with("HTTP/1.1 404"));
    stop.store(true, Ordering::Relaxed);
    for holder in holders {
        holder.abort();
    }
    server.stop().await;
}

#[tokio::test]
async fn a_busy_http1_connection_is_closed_at_its_maximum_age() {
    let limits = Limits { max_connection_age: Duration::from_secs(1), ..Limits::default() };
    let (server, _pki) = start(limits);
    let mut tcp = TcpStream::connect(server.admin).await.unwrap();
    let mut answered = 0;
    let closed = async {
        loop {
            // Busier than any idle timeout: only the age can end it.
            if tcp.write_all(b"GET /livez HTTP/1.1\r\nhost: x\r\n\r\n").await.is_err() || !read_livez(&mut tcp).await {
                return;
            }
            answered += 1;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(BOUND, closed).await.expect("closed once past its age");
    assert!(answered >= 1, "requests before the age were answered in full");
    // A new connection is served as usual.
    assert!(get_once(server.admin, "/livez").await.starts_with("HTTP/1.1 200"));
    server.stop().await;
}

#[tokio::test]
async fn an_http2_connection_gets_goaway_at_its_maximum_age() {
    let limits = Limits { max_connection_age: Duration::from_secs(1), ..Limits::default() };
    let (server, pki) = start(limits);
    let client = pki.client(b"h2").shared();
    let mut conn = h2frames::Conn::open(&server, &client).await;
    let request = h2frames::frame(HEADERS, END_STREAM | END_HEADERS, 1, &h2frames::request_block());
    conn.tls.write_all(&request).await.unwrap();
    let (kinds, goaway) = conn.frames_until_goaway_or_close().await;
    assert!(kinds.contains(&HEADERS), "the request was answered first: {kinds:?}");
    assert_eq!(goaway, Some(0), "GOAWAY with NO_ERROR, not a dropped connection: {kinds:?}");
    server.stop().await;
}

#[tokio::test]
async fn a_review_decided_after_its_answer_reports_timed_out_not_rewritten() {
    let limits = Limits { blocking_threshold_bytes: 1024, decide_timeout: Duration::ZERO, ..Limits::default() };
    let (server, pki) = start(limits);
    // A rogue write the policy (192.0.2.10) would rewrite, large enough for the blocking pool.
    let body = Review::fixture()
        .username("rogue")
        .addresses(json!([{"ip": "10.7.7.7"}]))
        .set(&["request", "object", "metadata", "annotations"], json!({"pad": "x".repeat(2 << 20)}))
        .to_vec();
    let tls = pki::connect(server.webhook, &pki.client(b"http/1.1").shared()).await.unwrap();
    let mut sender = pki::http1(tls).await.unwrap();
    let request = hyper::Request::post("/mutate")
        .header("content-type", "application/json")
        .header("host", "localhost")
        .body(http_body_util::Full::new(hyper::body::Bytes::from(body)))
        .unwrap();
    let response = tokio::time::timeout(BOUND, sender.send_request(request)).await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    let bytes = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
    let answer: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let review = &answer["response"];
    assert_eq!(review["allowed"], true, "{answer}");
    assert!(review.get("patch").is_none() && review.get("patchType").is_none(), "allowed unchanged: {answer}");
    assert!(review["warnings"][0].as_str().unwrap().contains("not decided"), "{answer}");
    // The decision still comes, later: counted as timed out, never as patched.
    let deadline = tokio::time::Instant::now() + BOUND;
    let metrics = loop {
        let metrics = get_once(server.admin, "/metrics").await;
        if metrics.contains("action=\"timed_out\"} 1") {
            break metrics;
        }
        assert!(tokio::time::Instant::now() < deadline, "the late decision was not counted: {metrics}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let rogue: Vec<&str> =
        metrics.lines().filter(|l| l.starts_with("ingress_status_guard_rogue_writes_total{")).collect();
    assert_eq!(rogue.len(), 1, "{rogue:?}");
    assert!(rogue[0].contains("writer=\"rogue\",action=\"timed_out\"} 1"), "{rogue:?}");
    assert!(metrics.contains("ingress_status_guard_admission_requests_total{result=\"timed_out\"} 1"), "{metrics}");
    assert!(metrics.contains("ingress_status_guard_admission_requests_total{result=\"patched\"} 0"), "{metrics}");
    assert!(metrics.contains("requests_refused_total{reason=\"decide_timeout\"} 1"), "{metrics}");
    server.stop().await;
}

#[tokio::test]
async fn reviews_over_the_in_flight_cap_get_503() {
    let limits = Limits { max_requests_in_flight: 1, body_read_timeout: Duration::from_secs(10), ..Limits::default() };
    let (server, pki) = start(limits);
    let config = pki.client(b"http/1.1").shared();
    // One review in flight: its body never completes.
    let mut hog = pki::connect(server.webhook, &config).await.unwrap();
    let head =
        "POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{";
    hog.write_all(head.as_bytes()).await.unwrap();
    hog.flush().await.unwrap();
    let mut refused = None;
    for _ in 0..50 {
        let mut tls = pki::connect(server.webhook, &config).await.unwrap();
        let review = crate::fixture::FIXTURE;
        let request = format!(
            "POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{review}",
            review.len()
        );
        tls.write_all(request.as_bytes()).await.unwrap();
        let mut text = String::new();
        let _ = tokio::time::timeout(BOUND, tls.read_to_string(&mut text)).await.expect("answered");
        if text.starts_with("HTTP/1.1 503") {
            refused = Some(text);
            break;
        }
        // The hog's head may not have been read yet.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let refused = refused.expect("a review over the in-flight cap gets 503");
    assert!(refused.contains("--max-requests-in-flight 1"), "{refused}");
    let metrics = get_once(server.admin, "/metrics").await;
    assert!(metrics.contains("requests_refused_total{reason=\"in_flight\"}"), "{metrics}");
    drop(hog);
    server.stop().await;
}
