//! The HTTP bounds of `serve` against a hostile client on loopback (issue 12): stalled heads,
//! stalled bodies, idle connections, oversized declarations, connection floods, a shared body
//! budget and a full connection table. Bounds are set small here; every wait is bounded by
//! `BOUND` and no test asserts how long anything took.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use ingress_status_guard::Limits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{
    fixture::{FIXTURE, Review},
    pki::{self, Pki, Tls},
    server::LocalServer,
};

/// Longest any wait of these tests may take before the test fails.
const BOUND: Duration = Duration::from_secs(20);

fn small_limits() -> Limits {
    Limits {
        max_body_bytes: 1 << 20,
        header_read_timeout: Duration::from_secs(1),
        body_read_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(2),
        ..Limits::default()
    }
}

fn start(limits: Limits) -> (LocalServer, Arc<rustls::ClientConfig>) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pki = Pki::new("bounds test CA", &["localhost"]);
    let server = LocalServer::start_with(pki.server_config(), limits);
    (server, pki.client(b"http/1.1").shared())
}

async fn connect(addr: SocketAddr, config: &Arc<rustls::ClientConfig>) -> std::io::Result<Tls> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tokio::time::timeout(BOUND, pki::handshake(tcp, config, "localhost"))
        .await
        .map_err(|_| std::io::Error::other("handshake did not finish"))?
}

/// Reads until the server closes the connection (EOF or reset); what it sent meanwhile.
/// Panics if the connection is still open after `BOUND`.
async fn read_until_closed<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> String {
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => panic!("connection still open after {BOUND:?}; got {:?}", String::from_utf8_lossy(&text)),
            Ok(Ok(0) | Err(_)) => return String::from_utf8_lossy(&text).into_owned(),
            Ok(Ok(n)) => text.extend_from_slice(&buf[..n]),
        }
    }
}

fn head(content_length: usize) -> String {
    format!(
        "POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {content_length}\r\n\r\n"
    )
}

/// `GET /metrics` on the admin port.
async fn metrics(admin: SocketAddr) -> String {
    let mut tcp = tokio::net::TcpStream::connect(admin).await.unwrap();
    tcp.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
    read_until_closed(&mut tcp).await
}

#[tokio::test]
async fn declared_length_over_the_limit_is_refused_before_the_body() {
    let (server, client) = start(small_limits());
    let mut tls = connect(server.webhook, &client).await.unwrap();
    tls.write_all(head((1 << 30) + 1).as_bytes()).await.unwrap();
    let response = read_until_closed(&mut tls).await;
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    assert!(response.contains("exceeds --max-body-bytes"), "{response}");
    server.stop().await;
}

#[tokio::test]
async fn stalled_body_gets_408_and_is_closed() {
    let (server, client) = start(small_limits());
    let mut tls = connect(server.webhook, &client).await.unwrap();
    tls.write_all(head(FIXTURE.len()).as_bytes()).await.unwrap();
    tls.write_all(&FIXTURE.as_bytes()[..FIXTURE.len() - 1]).await.unwrap();
    let response = read_until_closed(&mut tls).await;
    assert!(response.starts_with("HTTP/1.1 408"), "{response}");
    assert!(response.contains("--body-read-timeout-seconds"), "{response}");
    let text = metrics(server.admin).await;
    assert!(text.contains("requests_refused_total{reason=\"body_timeout\"} 1"), "{text}");
    server.stop().await;
}

#[tokio::test]
async fn stalled_heads_and_idle_connections_are_closed_on_both_ports() {
    let (server, client) = start(small_limits());
    // Slowloris: half a request head, then nothing.
    let mut partial = connect(server.webhook, &client).await.unwrap();
    partial.write_all(b"POST /mutate HTTP/1.1\r\nhost: localhost\r\n").await.unwrap();
    // Idle after the TLS handshake, and idle at TCP level before it.
    let mut idle_tls = connect(server.webhook, &client).await.unwrap();
    let mut idle_tcp = tokio::net::TcpStream::connect(server.webhook).await.unwrap();
    // The admin port: a partial head and an idle connection.
    let mut admin_partial = tokio::net::TcpStream::connect(server.admin).await.unwrap();
    admin_partial.write_all(b"GET /livez HTTP/1.1\r\n").await.unwrap();
    let mut admin_idle = tokio::net::TcpStream::connect(server.admin).await.unwrap();
    // Keep-alive after one answered request, then idle.
    let mut keep_alive = connect(server.webhook, &client).await.unwrap();
    keep_alive.write_all(head(FIXTURE.len()).as_bytes()).await.unwrap();
    keep_alive.write_all(FIXTURE.as_bytes()).await.unwrap();

    let (a, b, c, d, e, f) = tokio::join!(
        read_until_closed(&mut partial),
        read_until_closed(&mut idle_tls),
        read_until_closed(&mut idle_tcp),
        read_until_closed(&mut admin_partial),
        read_until_closed(&mut admin_idle),
        read_until_closed(&mut keep_alive),
    );
    assert!(!a.starts_with("HTTP/1.1 2"), "{a}");
    assert!(b.is_empty() && c.is_empty() && e.is_empty(), "{b} {c} {e}");
    assert!(!d.starts_with("HTTP/1.1 2"), "{d}");
    assert!(f.starts_with("HTTP/1.1 200"), "the request itself was answered: {f}");
    server.stop().await;
}

#[tokio::test]
async fn a_full_table_evicts_the_idle_and_refuses_only_when_all_are_busy() {
    let limits = Limits { max_connections: 3, body_read_timeout: Duration::from_secs(10), ..small_limits() };
    let (server, client) = start(limits);
    // Three connections, each with a review in flight (its body not complete).
    let mut busy = Vec::new();
    for _ in 0..3 {
        let mut tls = connect(server.webhook, &client).await.unwrap();
        tls.write_all(head(FIXTURE.len()).as_bytes()).await.unwrap();
        tls.write_all(&FIXTURE.as_bytes()[..10]).await.unwrap();
        tls.flush().await.unwrap();
        busy.push(tls);
    }
    // The fourth is accepted by the kernel, then closed by the webhook before TLS (once the
    // three requests have reached the handler: until then they count as idle).
    let mut refused = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if connect(server.webhook, &client).await.is_err() {
            refused = true;
            break;
        }
    }
    assert!(refused, "with every connection busy, a fourth must not get a TLS session");
    let text = metrics(server.admin).await;
    assert!(text.contains("connections_refused_total{listener=\"webhook\"}"), "{text}");
    drop(busy);

    // Three idle connections: a fourth evicts the one silent longest, and is served.
    let mut idle = Vec::new();
    for _ in 0..3 {
        let mut held = None;
        for _ in 0..100 {
            if let Ok(tls) = connect(server.webhook, &client).await {
                held = Some(tls);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        idle.push(held.expect("slots come back when connections end"));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut tls = connect(server.webhook, &client).await.expect("a full table of idle connections admits");
    tls.write_all(head(FIXTURE.len()).as_bytes()).await.unwrap();
    tls.write_all(FIXTURE.as_bytes()).await.unwrap();
    let mut buf = [0u8; 12];
    tokio::time::timeout(BOUND, tls.read_exact(&mut buf)).await.unwrap().unwrap();
    assert_eq!(&buf, b"HTTP/1.1 200");
    assert!(read_until_closed(&mut idle[0]).await.is_empty(), "the oldest idle connection was closed");
    let text = metrics(server.admin).await;
    assert!(text.contains("connections_evicted_total{listener=\"webhook\"} 1"), "{text}");
    server.stop().await;
}

#[tokio::test]
async fn bytes_buffered_across_requests_are_capped() {
    let limits =
        Limits { max_buffered_body_bytes: 100 * 1024, body_read_timeout: Duration::from_secs(10), ..small_limits() };
    let (server, client) = start(limits);
    // One caller holds 40 KiB of a 200 KiB body (its buffer, at most twice that, is what the
    // budget pays for)...
    let mut hog = connect(server.webhook, &client).await.unwrap();
    hog.write_all(head(200 * 1024).as_bytes()).await.unwrap();
    hog.write_all(&vec![b' '; 40 * 1024]).await.unwrap();
    hog.flush().await.unwrap();
    // ...so another's 60 KiB review does not fit the 100 KiB budget, and gets 503, while a small
    // review still fits.
    let mut refused = None;
    for _ in 0..50 {
        let padded = format!("{}{}", " ".repeat(60 * 1024), FIXTURE);
        let mut tls = connect(server.webhook, &client).await.unwrap();
        tls.write_all(head(padded.len()).as_bytes()).await.unwrap();
        tls.write_all(padded.as_bytes()).await.unwrap();
        let mut status = [0u8; 12];
        tokio::time::timeout(BOUND, tls.read_exact(&mut status)).await.unwrap().unwrap();
        if &status == b"HTTP/1.1 503" {
            refused = Some(());
            break;
        }
        // The hog's bytes may not all have arrived yet.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(refused.is_some(), "a review over the shared budget must get 503");
    let mut small = connect(server.webhook, &client).await.unwrap();
    small.write_all(head(FIXTURE.len()).as_bytes()).await.unwrap();
    small.write_all(FIXTURE.as_bytes()).await.unwrap();
    let mut status = [0u8; 12];
    tokio::time::timeout(BOUND, small.read_exact(&mut status)).await.unwrap().unwrap();
    assert_eq!(&status, b"HTTP/1.1 200");
    let text = metrics(server.admin).await;
    assert!(text.contains("requests_refused_total{reason=\"buffered_bytes\"}"), "{text}");
    drop(hog);
    server.stop().await;
}

#[tokio::test]
async fn large_reviews_are_answered_from_the_blocking_pool() {
    let limits = Limits { blocking_threshold_bytes: 1024, ..small_limits() };
    let (server, client) = start(limits);
    let body = Review::fixture()
        .set(&["request", "object", "metadata", "annotations"], serde_json::json!({"pad": "x".repeat(512 * 1024)}))
        .to_vec();
    let mut tls = connect(server.webhook, &client).await.unwrap();
    tls.write_all(head(body.len()).as_bytes()).await.unwrap();
    tls.write_all(&body).await.unwrap();
    let mut status = [0u8; 12];
    tokio::time::timeout(BOUND, tls.read_exact(&mut status)).await.unwrap().unwrap();
    assert_eq!(&status, b"HTTP/1.1 200");
    server.stop().await;
}

#[tokio::test]
async fn stalled_http2_streams_get_408() {
    use http_body_util::{BodyExt as _, StreamBody};
    use hyper::body::{Bytes, Frame};
    let (server, client) = start(small_limits());
    let mut h2 = (*client).clone();
    h2.alpn_protocols = vec![b"h2".to_vec()];
    let tls = connect(server.webhook, &Arc::new(h2)).await.unwrap();
    let sender = pki::http2(tls).await.unwrap();
    let mut streams = Vec::new();
    let mut feeds = Vec::new();
    // As many as the stream cap allows (more would be refused before the server's SETTINGS).
    for _ in 0..Limits::default().http2_max_concurrent_streams {
        let (feed, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(1);
        feed.send(Ok(Frame::data(Bytes::from_static(&FIXTURE.as_bytes()[..100])))).await.unwrap();
        feeds.push(feed); // held open: the body never ends
        let mut rx = rx;
        let body = StreamBody::new(futures_poll(move |cx| rx.poll_recv(cx)));
        let request = hyper::Request::post("https://localhost/mutate")
            .header("content-type", "application/json")
            .header("content-length", FIXTURE.len())
            .body(body)
            .unwrap();
        let mut sender = sender.clone();
        streams.push(tokio::spawn(async move {
            let response = sender.send_request(request).await.unwrap();
            let status = response.status().as_u16();
            let _ = response.into_body().collect().await;
            status
        }));
    }
    for stream in streams {
        let status = tokio::time::timeout(BOUND, stream).await.expect("answered within the bound").unwrap();
        assert_eq!(status, 408);
    }
    drop(feeds);
    server.stop().await;
}

/// A stream from a poll function (futures' `poll_fn` without the extra dependency feature).
fn futures_poll<T>(
    f: impl FnMut(&mut std::task::Context<'_>) -> std::task::Poll<Option<T>> + Unpin,
) -> impl futures::Stream<Item = T> + Unpin {
    futures::stream::poll_fn(f)
}

#[tokio::test]
async fn oversized_heads_are_refused_on_both_ports() {
    let (server, client) = start(small_limits());
    let big = format!("x-pad: {}\r\n", "a".repeat(70 * 1024));
    let mut tls = connect(server.webhook, &client).await.unwrap();
    let request = format!("POST /mutate HTTP/1.1\r\nhost: localhost\r\n{big}content-length: 2\r\n\r\n{{}}");
    let _ = tls.write_all(request.as_bytes()).await;
    let response = read_until_closed(&mut tls).await;
    assert!(response.is_empty() || response.starts_with("HTTP/1.1 431"), "{response}");

    let mut admin = tokio::net::TcpStream::connect(server.admin).await.unwrap();
    let _ = admin.write_all(format!("GET /livez HTTP/1.1\r\nhost: x\r\n{big}\r\n").as_bytes()).await;
    let response = read_until_closed(&mut admin).await;
    assert!(response.is_empty() || response.starts_with("HTTP/1.1 431"), "{response}");
    server.stop().await;
}
