//! mTLS settings of `serve`. `--client-san` through the production TLS stack
//! (`reload::start_requiring` + `server::serve`) on loopback: of the certificates one client CA
//! signed, only those naming a required name (a SAN DNS name or the CN) get an answer, and the
//! requirement survives a reload of the CA. The binary refuses `--client-san` without
//! `--client-ca`, and warns at startup while neither mTLS nor a narrowed NetworkPolicy is on.

use std::{net::SocketAddr, path::Path, time::Duration};

use http_body_util::{BodyExt, Full};
use hyper::{Request, body::Bytes};
use ingress_status_guard::{CertFiles, ClientNames, ReloadOutcome, watch_certificates_requiring};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};

use crate::{
    fixture::{FIXTURE, UID},
    pki::{self, ClientTls, Pki},
    server::LocalServer,
};

/// A client CA that signs client certificates with the names a test asks for.
struct ClientCa {
    pem: String,
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl ClientCa {
    fn new(name: &str) -> ClientCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.distinguished_name.push(DnType::CommonName, name);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        ClientCa { pem: issuer.pem(), issuer }
    }

    /// A client certificate with these SAN DNS names and CN: (certificate PEM, key PEM).
    fn client(&self, sans: &[&str], cn: &str) -> (String, String) {
        let mut params = CertificateParams::new(sans.iter().map(|&s| s.to_owned()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// Posts the fixture review on a new connection presenting `identity`: the HTTP status, or the
/// TLS error (in TLS 1.3 the server's refusal may arrive only after the client's handshake).
async fn post(addr: SocketAddr, serving_ca: &str, identity: Option<&(String, String)>) -> Result<u16, String> {
    let client = ClientTls::trusting(serving_ca.as_bytes(), b"http/1.1");
    let config = match identity {
        Some((cert, key)) => client.identity(cert, key).shared(),
        None => client.shared(),
    };
    let attempt = async {
        let tls = pki::connect(addr, &config).await.map_err(|e| e.to_string())?;
        let mut sender = pki::http1(tls).await.map_err(|e| e.to_string())?;
        let request = Request::post("/mutate")
            .header("content-type", "application/json")
            .header("host", "localhost")
            .body(Full::new(Bytes::from_static(FIXTURE.as_bytes())))
            .unwrap();
        let response = sender.send_request(request).await.map_err(|e| format!("{e:?}"))?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        assert_eq!(json["response"]["uid"], UID);
        Ok(status)
    };
    tokio::time::timeout(Duration::from_secs(30), attempt).await.expect("answered or refused within the bound")
}

fn write(path: &Path, contents: &str) {
    // A rename, as the kubelet's swap is atomic: the reloader never reads half a file.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[tokio::test]
async fn only_client_certificates_naming_a_client_san_are_answered_also_after_a_ca_reload() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tmp = tempfile::tempdir().unwrap();
    let serving = Pki::new("serving CA", &["localhost"]);
    let first = ClientCa::new("first client CA");
    let (cert, key, ca) = (tmp.path().join("tls.crt"), tmp.path().join("tls.key"), tmp.path().join("client-ca.crt"));
    write(&cert, &serving.cert_pem);
    write(&key, &serving.key_pem);
    write(&ca, &first.pem);

    let names =
        ClientNames::new(["kube-apiserver-webhook-client".to_owned(), "apiserver.example.com".to_owned()]).unwrap();
    let files = CertFiles { cert, key, client_ca: Some(ca.clone()) };
    let (tls, reloader) = watch_certificates_requiring(files, names.clone(), Duration::from_millis(100)).await.unwrap();
    let limits = ingress_status_guard::Limits { max_body_bytes: 1 << 20, ..Default::default() };
    let server = LocalServer::start_counting(tls, limits, Some(names.clone()));
    let addr = server.webhook;
    let ca_pem = serving.ca_pem.as_str();

    let by_cn = first.client(&[], "kube-apiserver-webhook-client");
    let by_san = first.client(&["node.example.com", "APISERVER.example.com"], "someone");
    let kubelet = first.client(&["node-1.example.com"], "system:node:node-1");
    let near_miss = first.client(&["apiserver.example.com.evil.test"], "kube-apiserver-webhook-client-2");
    assert_eq!(post(addr, ca_pem, Some(&by_cn)).await, Ok(200), "the CN names a --client-san");
    assert_eq!(post(addr, ca_pem, Some(&by_san)).await, Ok(200), "a SAN DNS name does, ignoring case");
    for (what, identity) in [("another holder of the CA", &kubelet), ("a near miss", &near_miss)] {
        let refused = post(addr, ca_pem, Some(identity)).await.expect_err(what);
        assert!(refused.to_lowercase().contains("access"), "{what}: refused with access_denied: {refused}");
    }
    // Counted by reason (client_certificates_refused_total); a handshake without any
    // certificate never reaches the verifier: the listener counts it as `missing`.
    assert_eq!(names.refused("missing"), 0, "none refused for a missing certificate yet");
    let anonymous = post(addr, ca_pem, None).await.expect_err("no client certificate");
    assert!(anonymous.to_lowercase().contains("certificate"), "{anonymous}");
    assert_eq!(names.refused("name_not_allowed"), 2);
    assert_eq!(names.refused("untrusted"), 0);
    // The server's side of the refused handshake may end just after the client's.
    let counted = async {
        while names.refused("missing") == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), counted).await.expect("the missing certificate is counted");
    assert_eq!(names.refused("missing"), 1);
    let stranger = ClientCa::new("a stranger's CA").client(&["apiserver.example.com"], "x");
    assert!(post(addr, ca_pem, Some(&stranger)).await.is_err(), "a CA that is not --client-ca");
    assert_eq!(names.refused("untrusted"), 1);
    assert_eq!(names.refused("no-such-reason"), 0);

    // A new client CA: the names are still required of the certificates it signs.
    let second = ClientCa::new("second client CA");
    write(&ca, &second.pem);
    let mut status = reloader.subscribe();
    let outcome = tokio::time::timeout(Duration::from_secs(60), status.wait_for(|s| s.seq > 0))
        .await
        .expect("the new client CA is seen")
        .unwrap()
        .outcome
        .clone();
    assert_eq!(outcome, ReloadOutcome::Reloaded);
    let renamed = second.client(&["apiserver.example.com"], "x");
    let other = second.client(&["node-2.example.com"], "system:node:node-2");
    assert_eq!(post(addr, ca_pem, Some(&renamed)).await, Ok(200));
    assert!(post(addr, ca_pem, Some(&other)).await.is_err(), "the names outlive the reload");
    assert!(post(addr, ca_pem, Some(&by_cn)).await.is_err(), "the replaced CA no longer counts");
    // The counts carry over the reload: one more of each.
    assert_eq!((names.refused("name_not_allowed"), names.refused("untrusted")), (3, 2));
    assert_eq!(names.refused("missing"), 1, "only the handshake without a certificate");
    drop(reloader);
    server.stop().await;
}

#[test]
fn client_san_without_client_ca_is_refused_at_startup_naming_both_flags() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ingress-status-guard"))
        .args(["serve", "--publish-status-address=192.0.2.10", "--client-san=kube-apiserver"])
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--client-ca <CLIENT_CA>") && stderr.contains("--client-san <NAME>"), "{stderr}");
}

/// The first lines `serve` logs, up to its ephemeral certificate (logged after the checks of
/// its TLS flags), then stops it.
fn startup_log(args: &[&str], env: &[(&str, &str)]) -> String {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ingress-status-guard"))
        .args([
            "serve",
            "--listen=127.0.0.1:0",
            "--admin-listen=127.0.0.1:0",
            "--probe-listen=127.0.0.1:0",
            "--publish-status-address=192.0.2.10",
        ])
        .args(args)
        .envs(env.iter().copied())
        .env_remove("KUBECONFIG")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = String::new();
    for line in std::io::BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        log.push_str(&line);
        log.push('\n');
        if line.contains("ephemeral self-signed certificate") {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    log
}

#[test]
fn startup_warns_while_neither_mtls_nor_a_narrowed_network_policy_is_on() {
    const WARNING: &str = "the webhook port accepts any caller: neither --client-ca";
    let open = startup_log(&[], &[]);
    assert!(open.contains(WARNING) && open.contains("WARN"), "{open}");
    for (args, env) in
        [(&["--network-policy-narrowed"][..], &[][..]), (&[][..], &[("ISG_NETWORK_POLICY_NARROWED", "true")][..])]
    {
        let narrowed = startup_log(args, env);
        assert!(
            narrowed.contains("ephemeral self-signed") && !narrowed.contains(WARNING),
            "{args:?} {env:?}: {narrowed}"
        );
    }
}
