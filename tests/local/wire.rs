//! The wire bounds of the built binary (issue 20): a review's memory is bounded by what the guard
//! keeps, not by what the caller sent, and no caller string reaches a log line whole. Each test
//! runs `serve` as a child process and reads its peak RSS (`VmHWM`) from `/proc`, so the
//! allocator, hyper's buffers and the blocking pool are all counted, as in a pod.

use std::{
    io::BufRead as _,
    process::{Child, Command, Stdio},
    sync::{Arc, mpsc},
    time::{Duration, Instant},
};

use http_body_util::{BodyExt as _, Full};
use hyper::{Request, body::Bytes};
use serde_json::{Value, json};

use crate::{
    fixture::Review,
    pki::{self, Pki},
};

/// Longest any wait of these tests may take before the test fails.
const BOUND: Duration = Duration::from_secs(60);
/// The memory limit of the shipped Deployment and chart.
const POD_LIMIT: u64 = 64 << 20;
/// `--max-body-bytes`' default.
const MAX_BODY: usize = 3 << 20;

/// `serve` as a child process on loopback, its log lines collected from stderr and stdout.
struct Guard {
    child: Child,
    port: u16,
    admin: u16,
    config: Arc<rustls::ClientConfig>,
    lines: mpsc::Receiver<String>,
    _dir: tempfile::TempDir,
}

impl Guard {
    fn start() -> Guard {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::new("wire test CA", &["localhost"]);
        std::fs::write(dir.path().join("tls.crt"), &pki.cert_pem).unwrap();
        std::fs::write(dir.path().join("tls.key"), &pki.key_pem).unwrap();
        let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let (port, admin) = (free(), free());
        let mut child = Command::new(env!("CARGO_BIN_EXE_ingress-status-guard"))
            .arg("serve")
            .arg(format!("--listen=127.0.0.1:{port}"))
            .arg(format!("--admin-listen=127.0.0.1:{admin}"))
            .arg("--probe-listen=127.0.0.1:0")
            .arg(format!("--tls-cert={}", dir.path().join("tls.crt").display()))
            .arg(format!("--tls-key={}", dir.path().join("tls.key").display()))
            .args(["--publish-status-address=192.0.2.10", "--no-events", "--log-format=plain"])
            // Memory is measured, not time: a debug build on a busy machine may take seconds to
            // read a million entries, and the answer must come from the decision.
            .arg("--decide-timeout-seconds=120")
            .env("RUST_LOG", "debug")
            .env_remove("KUBECONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        for pipe in [
            Box::new(child.stderr.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stdout.take().unwrap()),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                // Split on newlines only: a forged line break would show as a line of its own.
                for line in std::io::BufReader::new(pipe).split(b'\n').map_while(Result::ok) {
                    let _ = tx.send(String::from_utf8_lossy(&line).into_owned());
                }
            });
        }
        let guard = Guard { child, port, admin, config: pki.client(b"http/1.1").shared(), lines, _dir: dir };
        guard.wait_for("webhook listening");
        guard
    }

    /// The log lines printed so far, up to one containing `needle`; panics without one.
    fn wait_for(&self, needle: &str) -> Vec<String> {
        let deadline = Instant::now() + BOUND;
        let mut seen = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            let found = line.contains(needle);
            seen.push(line);
            if found {
                return seen;
            }
        }
        panic!("no log line containing {needle:?}; saw {} lines", seen.len());
    }

    /// Posts `body` on a connection of its own: the status and the answer.
    async fn post(&self, body: Bytes) -> (u16, Value) {
        let exchange = async {
            let tls = pki::connect(([127, 0, 0, 1], self.port).into(), &self.config).await.unwrap();
            let mut sender = pki::http1(tls).await.unwrap();
            let request = Request::post("/mutate")
                .header("content-type", "application/json")
                .header("host", "localhost")
                .body(Full::new(body))
                .unwrap();
            // A review the guard refuses before reading it whole (503 from the body budget) may
            // close the connection while the body is still being sent: status 0 says so.
            let Ok(response) = sender.send_request(request).await else { return (0, Value::Null) };
            let status = response.status().as_u16();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
        };
        tokio::time::timeout(BOUND, exchange).await.expect("the guard answers")
    }

    /// The admin port's `/metrics`.
    async fn metrics(&self) -> String {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let exchange = async {
            let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", self.admin)).await.unwrap();
            tcp.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
            let mut text = String::new();
            tcp.read_to_string(&mut text).await.unwrap();
            text
        };
        tokio::time::timeout(BOUND, exchange).await.expect("the admin port answers")
    }

    /// Peak resident memory of the guard so far, in bytes.
    fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM in /proc/PID/status");
        let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kib << 10
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A review as the API server sends it whose `status.loadBalancer.ingress` is as many `{}` as
/// fit in `--max-body-bytes`: about a million entries of three bytes each.
fn million_empty_entries() -> (Bytes, usize) {
    let review = Review::fixture().username("rogue").addresses(json!(["PLACEHOLDER"])).to_json();
    let room = MAX_BODY - review.len() - 16;
    let entries = room / 3;
    let list = vec!["{}"; entries].join(",");
    let body = review.replacen("\"PLACEHOLDER\"", &list, 1);
    assert!(body.len() <= MAX_BODY && entries > 1_000_000, "{} bytes, {entries} entries", body.len());
    (Bytes::from(body), entries)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

/// The patch an answer carries, decoded.
fn patch(answer: &Value) -> Value {
    use base64::Engine as _;
    let text = answer["response"]["patch"].as_str().unwrap_or_else(|| panic!("no patch in {answer}"));
    serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(text).unwrap()).unwrap()
}

/// The debug binary idles at about 27 MiB of RSS (its code pages; the release binary at about
/// 15 MiB), so the first bound is on what the review adds to one as the API server sends it; every run's peak is under the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_entries_cost_what_the_guard_keeps() {
    let guard = Guard::start();
    let (body, entries) = million_empty_entries();
    // Warmed by one review as the API server sends it: the code and buffers every review uses.
    let (status, _) = guard.post(Bytes::from_static(crate::fixture::FIXTURE.as_bytes())).await;
    assert_eq!(status, 200);
    let idle = guard.peak_rss();
    let (status, answer) = guard.post(body.clone()).await;
    assert_eq!(status, 200, "{answer}");
    let response = &answer["response"];
    assert_eq!(response["allowed"], true, "{answer}");
    // Never canonical, and the patch replaces the whole list.
    assert_eq!(
        patch(&answer),
        json!([{"op": "replace", "path": "/status/loadBalancer/ingress", "value": [{"ip": "192.0.2.10"}]}])
    );
    let attempted = response["auditAnnotations"]["attempted"].as_str().unwrap();
    assert!(attempted.starts_with(&format!("{entries} entries: <empty>,<empty>,")), "{attempted}");
    assert!(attempted.len() <= 1100 && attempted.ends_with(&format!("(+{} more)", entries - 20)), "{attempted}");
    let one = guard.peak_rss();
    eprintln!("peak RSS: after a fixture review {:.1} MiB, after a million entries {:.1} MiB", mib(idle), mib(one));
    assert!(one - idle < POD_LIMIT / 4, "one review added {:.1} MiB of peak RSS", mib(one - idle));
    assert!(one < POD_LIMIT, "one review: peak RSS {:.1} MiB", mib(one));
    drop(guard);

    // Eight at once, on a fresh process: the body budget refuses what does not fit (503, or the
    // connection closed while the body was still being sent: 0).
    let guard = Guard::start();
    let idle = guard.peak_rss();
    let posts = (0..8).map(|_| guard.post(body.clone()));
    let statuses: Vec<u16> = futures::future::join_all(posts).await.into_iter().map(|(status, _)| status).collect();
    assert!(statuses.iter().all(|s| [200, 503, 0].contains(s)) && statuses.contains(&200), "{statuses:?}");
    let eight = guard.peak_rss();
    eprintln!("peak RSS: idle {:.1} MiB, after eight at once {:.1} MiB ({statuses:?})", mib(idle), mib(eight));
    assert!(eight < POD_LIMIT, "eight reviews: peak RSS {:.1} MiB", mib(eight));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caller_strings_never_reach_a_log_line_whole() {
    let guard = Guard::start();
    let huge = "u".repeat(1 << 20);
    let fixture = || Review::fixture().addresses(json!([{"ip": "10.7.7.7"}]));

    // A uid no API server sends: no response could echo it, so an HTTP error that says why.
    let (status, answer) =
        guard.post(fixture().username(&huge).set(&["request", "uid"], json!(huge)).to_vec().into()).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(
        answer["error"],
        format!("request.uid is {} bytes, over the limit of 128: the API server sends a UUID", huge.len())
    );

    // A long username is the authenticator's: cut, and the write is still judged.
    let (status, answer) = guard.post(fixture().username(&huge).to_vec().into()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["response"]["uid"], crate::fixture::UID);
    assert_eq!(answer["response"]["patchType"], "JSONPatch", "{answer}");

    // Fields only a forged review breaks: allowed as written, the uid echoed, the bound named.
    for (path, value, field) in [
        (&["request", "namespace"][..], json!(huge), "request.namespace"),
        (&["request", "name"][..], json!(huge), "request.name"),
        (&["request", "oldObject", "metadata", "uid"][..], json!(huge), "request.oldObject.metadata.uid"),
    ] {
        let (status, answer) = guard.post(fixture().username(&huge).set(path, value).to_vec().into()).await;
        assert_eq!(status, 200, "{answer}");
        let response = &answer["response"];
        assert_eq!((&response["uid"], &response["allowed"]), (&json!(crate::fixture::UID), &json!(true)));
        assert!(response.get("patch").is_none(), "{answer}");
        let warning = response["warnings"][0].as_str().unwrap();
        assert!(warning.contains(field) && warning.chars().count() <= 120, "{warning}");
    }
    // Not an Ingress status write, with every part the caller's.
    let other = fixture().set(&["request", "kind"], json!({"group": huge, "version": "v1", "kind": huge}));
    let (status, answer) = guard.post(other.to_vec().into()).await;
    assert_eq!((status, &answer["response"]["allowed"]), (200, &json!(true)), "{answer}");

    let metrics = guard.metrics().await;
    assert!(metrics.contains("requests_refused_total{reason=\"out_of_bounds\"} 4\n"), "{metrics}");
    let mut lines = guard.wait_for("is not an Ingress status UPDATE");
    // Findings are logged by a background task: whatever follows in the next second too.
    lines.extend(std::iter::from_fn(|| guard.lines.recv_timeout(Duration::from_secs(1)).ok()));
    let longest = lines.iter().map(String::len).max().unwrap_or(0);
    eprintln!("{} log lines, the longest {longest} bytes", lines.len());
    for needle in ["request.uid is 1048576 bytes", "rogue status write", "review out of bounds"] {
        assert!(lines.iter().any(|l| l.contains(needle)), "no line with {needle:?}");
    }
    assert!(lines.iter().all(|l| l.len() <= 8 << 10), "a log line of {longest} bytes");
}
