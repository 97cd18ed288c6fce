//! Certificate rotation without restart, through the production `server::serve` and
//! `reload::start` on loopback. The certificate lives in a directory laid out as the kubelet lays
//! out a Secret volume (`tls.crt -> ..data/tls.crt`, `..data -> ..<timestamp>`) and is replaced
//! as the kubelet replaces it: a new timestamped directory, then a rename of a new `..data`
//! symlink over the old one.
//!
//! Waits are "until the state is reached, or fail after a generous deadline"; nothing asserts
//! how long anything took.

use std::{
    future::Future,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use http_body_util::{BodyExt, Full};
use hyper::{Request, body::Bytes};
use ingress_status_guard::{Ca, CertFiles, ReloadOutcome as Outcome, Reloader, watch_certificates};
use rustls::pki_types::{CertificateDer, pem::PemObject};

use crate::{
    fixture::{FIXTURE, UID},
    pki::{self, ClientTls},
    server::LocalServer,
};

const DAY: Duration = Duration::from_secs(86400);
/// Long enough that only a filesystem event can explain a reload within a test.
const NO_POLL: Duration = Duration::from_secs(3600);

/// A directory that the kubelet would call a Secret volume.
struct SecretDir {
    root: PathBuf,
    generation: u32,
}

impl SecretDir {
    fn new(root: &Path, files: &[(&str, &str)]) -> SecretDir {
        let mut dir = SecretDir { root: root.to_path_buf(), generation: 0 };
        let data = dir.write_generation(files);
        std::os::unix::fs::symlink(&data, root.join("..data")).unwrap();
        for (name, _) in files {
            std::os::unix::fs::symlink(format!("..data/{name}"), root.join(name)).unwrap();
        }
        dir
    }

    fn write_generation(&mut self, files: &[(&str, &str)]) -> String {
        self.generation += 1;
        let name = format!("..2026_01_01_00_00_{:02}.{:09}", self.generation, self.generation);
        let path = self.root.join(&name);
        std::fs::create_dir(&path).unwrap();
        for (file, contents) in files {
            std::fs::write(path.join(file), contents).unwrap();
        }
        name
    }

    /// The kubelet's atomic update: new directory, `..data_tmp` symlink, rename over `..data`,
    /// remove the old directory.
    fn swap(&mut self, files: &[(&str, &str)]) {
        let old = std::fs::read_link(self.root.join("..data")).unwrap();
        let new = self.write_generation(files);
        let tmp = self.root.join("..data_tmp");
        std::os::unix::fs::symlink(&new, &tmp).unwrap();
        std::fs::rename(&tmp, self.root.join("..data")).unwrap();
        std::fs::remove_dir_all(self.root.join(old)).unwrap();
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
}

struct Pair {
    cert: String,
    key: String,
}

impl Pair {
    fn der(&self) -> Vec<u8> {
        CertificateDer::pem_slice_iter(self.cert.as_bytes()).next().unwrap().unwrap().as_ref().to_vec()
    }
}

fn issue(ca: &Ca) -> Pair {
    let (cert, key) = ca.issue(&["localhost".into()], DAY).unwrap();
    Pair { cert, key }
}

/// `serve` with its certificate reloader.
struct Running {
    addr: SocketAddr,
    reloader: Reloader,
    server: LocalServer,
}

impl Running {
    async fn stop(self) {
        drop(self.reloader);
        self.server.stop().await;
    }
}

async fn start(files: CertFiles, poll: Duration) -> Running {
    let (tls, reloader) = watch_certificates(files, poll).await.unwrap();
    let server = LocalServer::start(tls);
    Running { addr: server.webhook, reloader, server }
}

fn review_request() -> Request<Full<Bytes>> {
    Request::post("/mutate")
        .header("content-type", "application/json")
        .header("host", "localhost")
        .body(Full::new(Bytes::from_static(FIXTURE.as_bytes())))
        .unwrap()
}

/// Checks one response: HTTP 200 with our review's uid.
async fn check(response: hyper::Response<hyper::body::Incoming>) -> Result<(), String> {
    let status = response.status();
    let body = response.into_body().collect().await.map_err(|e| format!("body: {e}"))?.to_bytes();
    let json: serde_json::Value = serde_json::from_slice(&body).map_err(|e| format!("json: {e}"))?;
    if status != 200 || json["response"]["uid"] != UID {
        return Err(format!("HTTP {status}: {json}"));
    }
    Ok(())
}

/// Posts a review over a new HTTP/1.1 connection; returns the certificate the server presented.
async fn post_new_connection(addr: SocketAddr, client: &Arc<rustls::ClientConfig>) -> Result<Vec<u8>, String> {
    let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("connect: {e}"))?;
    let stream = pki::handshake(tcp, client, "localhost").await.map_err(|e| format!("handshake: {e}"))?;
    let peer = stream.get_ref().1.peer_certificates().and_then(|c| c.first()).map(|c| c.as_ref().to_vec());
    let mut sender = pki::http1(stream).await.map_err(|e| format!("http1: {e}"))?;
    let response = sender.send_request(review_request()).await.map_err(|e| format!("request: {e}"))?;
    check(response).await?;
    peer.ok_or_else(|| "no peer certificate".to_owned())
}

async fn eventually<T, F, Fut>(what: &str, mut attempt: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match attempt().await {
            Ok(value) => return value,
            Err(e) if Instant::now() > deadline => panic!("{what}: not reached; last: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Waits for the reloader's next outcome after `seq`.
async fn next_outcome(reloader: &Reloader, after: u64) -> (u64, Outcome) {
    let mut status = reloader.subscribe();
    let waited = tokio::time::timeout(Duration::from_secs(30), status.wait_for(|s| s.seq > after)).await;
    let status = waited.expect("the reloader reported nothing").expect("reloader stopped").clone();
    (status.seq, status.outcome)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlink_swap_rotates_the_certificate_without_failing_a_request() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = Ca::new("rotation CA", DAY).unwrap();
    let (a, b) = (issue(&ca), issue(&ca));
    let mut dir = SecretDir::new(tmp.path(), &[("tls.crt", &a.cert), ("tls.key", &a.key)]);
    let files = CertFiles { cert: dir.path("tls.crt"), key: dir.path("tls.key"), client_ca: None };
    let server = start(files, NO_POLL).await;
    let (addr, ca_pem) = (server.addr, ca.pem());

    // Client 1: a new connection per review, noting which certificate each one saw.
    // Client 2: one HTTP/2 connection for all its reviews, opened before the swap.
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let fresh = tokio::spawn({
        let (stop, done, client) =
            (stop.clone(), done.clone(), ClientTls::trusting(ca_pem.as_bytes(), b"http/1.1").shared());
        async move {
            let mut seen = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                seen.push(post_new_connection(addr, &client).await);
                done.fetch_add(1, Ordering::Relaxed);
            }
            seen
        }
    });
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let h2 = ClientTls::trusting(ca_pem.as_bytes(), b"h2").shared();
    let stream = pki::handshake(tcp, &h2, "localhost").await.unwrap();
    let kept_peer = stream.get_ref().1.peer_certificates().unwrap()[0].as_ref().to_vec();
    let sender = pki::http2(stream).await.unwrap();
    let kept = tokio::spawn({
        let stop = stop.clone();
        async move {
            let (mut sender, mut results) = (sender, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                let result = match sender.send_request(review_request()).await {
                    Ok(response) => check(response).await,
                    Err(e) => Err(format!("h2 request: {e}")),
                };
                results.push(result);
            }
            results
        }
    });

    eventually("reviews flowing before the swap", || {
        let n = done.load(Ordering::Relaxed);
        async move { if n >= 5 { Ok(()) } else { Err(format!("{n} reviews")) } }
    })
    .await;
    dir.swap(&[("tls.crt", &b.cert), ("tls.key", &b.key)]);

    let client = ClientTls::trusting(ca_pem.as_bytes(), b"http/1.1").shared();
    eventually("a new connection gets the new certificate", || async {
        let peer = post_new_connection(server.addr, &client).await?;
        if peer == b.der() { Ok(()) } else { Err("still the old certificate".to_owned()) }
    })
    .await;
    let after_swap = done.load(Ordering::Relaxed);
    eventually("more reviews after the swap", || {
        let n = done.load(Ordering::Relaxed);
        async move { if n >= after_swap + 20 { Ok(()) } else { Err(format!("{n} reviews")) } }
    })
    .await;
    stop.store(true, Ordering::Relaxed);

    let seen = fresh.await.unwrap();
    let failures: Vec<&String> = seen.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(failures.is_empty(), "{} of {} reviews failed: {failures:?}", failures.len(), seen.len());
    let with_new = seen.iter().filter(|r| r.as_deref() == Ok(b.der().as_slice())).count();
    let with_old = seen.iter().filter(|r| r.as_deref() == Ok(a.der().as_slice())).count();
    assert!(with_old >= 5 && with_new >= 20, "old {with_old}, new {with_new} of {}", seen.len());
    assert_eq!(with_old + with_new, seen.len());

    let kept = kept.await.unwrap();
    let failures: Vec<&String> = kept.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(!kept.is_empty() && failures.is_empty(), "open connection: {failures:?} of {}", kept.len());
    assert_eq!(kept_peer, a.der(), "the open connection was made with the old certificate");
    server.stop().await;
}

#[tokio::test]
async fn a_broken_pair_is_refused_and_the_old_certificate_stays() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = Ca::new("rotation CA", DAY).unwrap();
    let (a, b) = (issue(&ca), issue(&ca));
    let mut dir = SecretDir::new(tmp.path(), &[("tls.crt", &a.cert), ("tls.key", &a.key)]);
    let files = CertFiles { cert: dir.path("tls.crt"), key: dir.path("tls.key"), client_ca: None };
    let server = start(files.clone(), NO_POLL).await;
    let ca_pem = ca.pem();
    let client = ClientTls::trusting(ca_pem.as_bytes(), b"http/1.1").shared();
    let cert_path = files.cert.display().to_string();
    let key_path = files.key.display().to_string();

    // The new certificate with the old key.
    dir.swap(&[("tls.crt", &b.cert), ("tls.key", &a.key)]);
    let (seq, outcome) = next_outcome(&server.reloader, 0).await;
    let Outcome::Refused(message) = outcome else { panic!("expected a refusal, got {outcome:?}") };
    assert!(
        message.starts_with(&format!("certificate {cert_path} / private key {key_path}: the key does not match")),
        "{message}"
    );
    assert_eq!(post_new_connection(server.addr, &client).await.unwrap(), a.der(), "the old pair stays");

    // Not PEM at all.
    dir.swap(&[("tls.crt", "not a certificate"), ("tls.key", &b.key)]);
    let (seq, outcome) = next_outcome(&server.reloader, seq).await;
    assert_eq!(
        outcome,
        Outcome::Refused(format!(
            "certificate {cert_path}: no PEM certificate found (expected -----BEGIN CERTIFICATE-----)"
        ))
    );
    assert_eq!(post_new_connection(server.addr, &client).await.unwrap(), a.der(), "the old pair stays");

    // A good pair again is taken.
    dir.swap(&[("tls.crt", &b.cert), ("tls.key", &b.key)]);
    let (_, outcome) = next_outcome(&server.reloader, seq).await;
    assert_eq!(outcome, Outcome::Reloaded);
    assert_eq!(post_new_connection(server.addr, &client).await.unwrap(), b.der());
    server.stop().await;
}

#[tokio::test]
async fn polling_finds_changes_the_directory_watch_cannot_see() {
    // tls.crt and tls.key are symlinks into a directory that is not watched; only the poll
    // can notice that the files there were replaced.
    let tmp = tempfile::tempdir().unwrap();
    let (watched, elsewhere) = (tmp.path().join("watched"), tmp.path().join("elsewhere"));
    std::fs::create_dir_all(&watched).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let ca = Ca::new("rotation CA", DAY).unwrap();
    let (a, b) = (issue(&ca), issue(&ca));
    let write = |pair: &Pair| {
        for (name, contents) in [("tls.crt", &pair.cert), ("tls.key", &pair.key)] {
            std::fs::write(elsewhere.join(format!("{name}.tmp")), contents).unwrap();
            std::fs::rename(elsewhere.join(format!("{name}.tmp")), elsewhere.join(name)).unwrap();
        }
    };
    write(&a);
    for name in ["tls.crt", "tls.key"] {
        std::os::unix::fs::symlink(elsewhere.join(name), watched.join(name)).unwrap();
    }
    let files = CertFiles { cert: watched.join("tls.crt"), key: watched.join("tls.key"), client_ca: None };
    let server = start(files, Duration::from_millis(200)).await;
    assert_eq!(post_new_connection_h1(&server, &ca).await, a.der());

    write(&b);
    let (_, outcome) = next_outcome(&server.reloader, 0).await;
    assert_eq!(outcome, Outcome::Reloaded);
    assert_eq!(post_new_connection_h1(&server, &ca).await, b.der());
    server.stop().await;
}

async fn post_new_connection_h1(server: &Running, ca: &Ca) -> Vec<u8> {
    post_new_connection(server.addr, &ClientTls::trusting(ca.pem().as_bytes(), b"http/1.1").shared()).await.unwrap()
}

/// A client CA and a client certificate it signed (rcgen directly: `certs` issues serving
/// certificates only).
fn client_identity(name: &str) -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.distinguished_name.push(DnType::CommonName, format!("{name} client CA"));
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, format!("{name} kube-apiserver"));
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

#[tokio::test]
async fn client_ca_requires_verified_client_certificates_and_is_reloaded() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = Ca::new("serving CA", DAY).unwrap();
    let serving = issue(&ca);
    let (ca1, cert1, key1) = client_identity("first");
    let (ca2, cert2, key2) = client_identity("second");
    let mut dir =
        SecretDir::new(tmp.path(), &[("tls.crt", &serving.cert), ("tls.key", &serving.key), ("client-ca.crt", &ca1)]);
    let files =
        CertFiles { cert: dir.path("tls.crt"), key: dir.path("tls.key"), client_ca: Some(dir.path("client-ca.crt")) };
    let server = start(files, NO_POLL).await;
    let serving_ca = ca.pem();
    let client = || ClientTls::trusting(serving_ca.as_bytes(), b"http/1.1");
    let anonymous = client().shared();
    let first = client().identity(&cert1, &key1).shared();
    let second = client().identity(&cert2, &key2).shared();

    assert!(post_new_connection(server.addr, &first).await.is_ok());
    let refused = post_new_connection(server.addr, &anonymous).await.unwrap_err();
    assert!(!refused.is_empty());
    assert!(post_new_connection(server.addr, &second).await.is_err(), "a client CA not configured");

    dir.swap(&[("tls.crt", &serving.cert), ("tls.key", &serving.key), ("client-ca.crt", &ca2)]);
    let (seq, outcome) = next_outcome(&server.reloader, 0).await;
    assert_eq!(outcome, Outcome::Reloaded);
    assert!(post_new_connection(server.addr, &second).await.is_ok());
    assert!(post_new_connection(server.addr, &first).await.is_err(), "the replaced client CA no longer counts");

    // An unusable client CA is refused like a broken pair; the configured one stays.
    dir.swap(&[("tls.crt", &serving.cert), ("tls.key", &serving.key), ("client-ca.crt", "")]);
    let (_, outcome) = next_outcome(&server.reloader, seq).await;
    let Outcome::Refused(message) = outcome else { panic!("expected a refusal, got {outcome:?}") };
    let path = dir.path("client-ca.crt").display().to_string();
    assert!(message.starts_with(&format!("client CA {path}: no usable CA certificate")), "{message}");
    assert!(post_new_connection(server.addr, &second).await.is_ok());
    server.stop().await;
}
