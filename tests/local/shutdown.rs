//! Graceful shutdown under load (issue 12): the release path of `serve` as a child process,
//! ~500 reviews a second over one HTTP/2 connection, SIGTERM in the middle, `--drain-seconds 5`.
//! Every review the webhook accepted is answered 200, and the process exits 0; a review it did
//! not accept (refused by GOAWAY or REFUSED_STREAM, which HTTP/2 defines as not processed and
//! safe to retry, or never sent because the connection was closing) is not a loss. A bounded
//! run, not a benchmark: no rate or latency is asserted.

use std::{
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;

use crate::{
    fixture::FIXTURE,
    pki::{self, Pki},
};

const BOUND: Duration = Duration::from_secs(30);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_http2_load_answers_every_review_sent_before_it() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let bundle = Pki::new("shutdown test CA", &["localhost"]);
    std::fs::write(dir.path().join("tls.crt"), &bundle.cert_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), &bundle.key_pem).unwrap();
    let (port, admin) = (free_port(), free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_ingress-status-guard"))
        .arg("serve")
        .arg(format!("--listen=127.0.0.1:{port}"))
        .arg(format!("--admin-listen=127.0.0.1:{admin}"))
        .arg("--probe-listen=127.0.0.1:0")
        .arg(format!("--tls-cert={}", dir.path().join("tls.crt").display()))
        .arg(format!("--tls-key={}", dir.path().join("tls.key").display()))
        .args(["--publish-status-address=192.0.2.10", "--no-events", "--drain-seconds=5", "--log-level=warn"])
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();

    let config = bundle.client(b"h2").shared();
    let deadline = Instant::now() + BOUND;
    let tcp = loop {
        match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            Ok(tcp) => break tcp,
            Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("serve never listened on {port}: {e}"),
        }
    };
    let tls = pki::handshake(tcp, &config, "localhost").await.unwrap();
    let sender = pki::http2(tls).await.unwrap();

    let terminated = Arc::new(AtomicBool::new(false));
    let mut requests = Vec::new();
    let mut ticker = tokio::time::interval(Duration::from_millis(2));
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(3) {
        ticker.tick().await;
        if !terminated.load(Ordering::SeqCst) && started.elapsed() >= Duration::from_secs(1) {
            let pid = child.id().to_string();
            assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
            terminated.store(true, Ordering::SeqCst);
        }
        let before_term = !terminated.load(Ordering::SeqCst);
        let mut sender = sender.clone();
        let request = hyper::Request::post("https://localhost/mutate")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from_static(FIXTURE.as_bytes())))
            .unwrap();
        requests.push(tokio::spawn(async move {
            let result = async {
                let response = sender.send_request(request).await.map_err(Outcome::of)?;
                let status = response.status().as_u16();
                response.into_body().collect().await.map_err(Outcome::of)?;
                Ok::<_, Outcome>(status)
            }
            .await;
            (before_term, result)
        }));
    }
    let (mut before, mut after_ok, mut not_accepted, mut lost) = (0, 0, 0, Vec::new());
    for request in requests {
        let (before_term, result) = tokio::time::timeout(BOUND, request).await.expect("answered or failed").unwrap();
        match (before_term, result) {
            (true, Ok(200)) => before += 1,
            (false, Ok(200)) => after_ok += 1,
            (_, Err(Outcome::NotAccepted)) => not_accepted += 1,
            (_, Err(Outcome::Failed(e))) => lost.push(format!("sent before SIGTERM: {before_term}: {e}")),
            (_, Ok(status)) => lost.push(format!("sent before SIGTERM: {before_term}: status {status}")),
        }
    }
    println!(
        "answered 200: {before} sent before SIGTERM, {after_ok} after; {not_accepted} not accepted (refused or never sent)"
    );
    assert!(lost.is_empty(), "accepted reviews that failed: {lost:?}");
    assert!(before > 50, "the load ran: {before} reviews answered before SIGTERM");

    let deadline = Instant::now() + BOUND;
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve did not exit after SIGTERM and the drain");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "{exit}");
}

/// How a request that got no 200 ended.
#[derive(Debug)]
enum Outcome {
    /// Refused by the server (GOAWAY, REFUSED_STREAM) or never sent: not processed.
    NotAccepted,
    /// Anything else: an accepted review lost.
    Failed(String),
}

impl Outcome {
    fn of(e: hyper::Error) -> Outcome {
        let h2 = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<h2::Error>());
        let refused = h2.is_some_and(|h2| h2.is_go_away() || h2.reason() == Some(h2::Reason::REFUSED_STREAM));
        // DispatchGone: the connection had ended before the request reached it (hyper has no
        // predicate for it, only its Debug name).
        let never_sent = e.is_canceled() || format!("{e:?}").contains("DispatchGone");
        if never_sent || refused { Outcome::NotAccepted } else { Outcome::Failed(format!("{e:?}")) }
    }
}
