//! `serve` over real TLS on loopback: a client that trusts only the generated CA posts a review
//! over HTTP/1.1 and over HTTP/2 (ALPN), with TLS 1.3 and TLS 1.2.

use std::net::SocketAddr;

use http_body_util::{BodyExt, Full};
use hyper::{Request, body::Bytes};
use serde_json::Value;

use crate::{
    fixture::FIXTURE,
    pki::{self, ClientTls, Pki},
    server::LocalServer,
};

/// `serve` with a fresh serving certificate for localhost, and the CA that signed it.
fn start() -> (LocalServer, String) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pki = Pki::new("test CA", &["localhost", "127.0.0.1"]);
    (LocalServer::start(pki.server_config()), pki.ca_pem)
}

/// Posts the fixture review and returns (negotiated ALPN, TLS version, HTTP status, response JSON).
async fn post_review(addr: SocketAddr, config: rustls::ClientConfig) -> (Vec<u8>, rustls::ProtocolVersion, u16, Value) {
    let stream = pki::connect(addr, &config.into()).await.unwrap();
    let (_, session) = stream.get_ref();
    let alpn = session.alpn_protocol().unwrap_or_default().to_vec();
    let version = session.protocol_version().unwrap();
    let request = Request::post("/mutate")
        .header("content-type", "application/json")
        .header("host", "localhost")
        .body(Full::new(Bytes::from_static(FIXTURE.as_bytes())))
        .unwrap();
    let response = if alpn == b"h2" {
        pki::http2(stream).await.unwrap().send_request(request).await.unwrap()
    } else {
        pki::http1(stream).await.unwrap().send_request(request).await.unwrap()
    };
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (alpn, version, status, serde_json::from_slice(&body).unwrap())
}

#[tokio::test]
async fn reviews_over_h1_and_h2_with_tls13_and_tls12() {
    let (server, ca_pem) = start();
    let tls13 = [&rustls::version::TLS13];
    let tls12 = [&rustls::version::TLS12];
    let cases: [(&[u8], &[&'static rustls::SupportedProtocolVersion], rustls::ProtocolVersion); 4] = [
        (b"h2", &tls13, rustls::ProtocolVersion::TLSv1_3),
        (b"http/1.1", &tls13, rustls::ProtocolVersion::TLSv1_3),
        (b"h2", &tls12, rustls::ProtocolVersion::TLSv1_2),
        (b"http/1.1", &tls12, rustls::ProtocolVersion::TLSv1_2),
    ];
    for (alpn, versions, want_version) in cases {
        let name = String::from_utf8_lossy(alpn).into_owned();
        let (negotiated, version, status, json) =
            post_review(server.webhook, ClientTls::trusting(ca_pem.as_bytes(), alpn).versions(versions).config()).await;
        assert_eq!(negotiated, alpn, "{name}: ALPN");
        assert_eq!(version, want_version, "{name}");
        assert_eq!(status, 200, "{name}");
        assert_eq!(json["response"]["uid"], "0f3cb218-7947-4a5f-839c-6e300a5ae86a", "{name}");
        assert_eq!(json["response"]["patchType"], "JSONPatch", "{name}");
    }
    server.stop().await;
}

#[tokio::test]
async fn untrusted_clients_cannot_connect_and_shutdown_stops_serving() {
    let (server, _) = start();
    let stranger = Pki::new("another CA", &["localhost"]);
    let config = stranger.client(b"h2").versions(&[&rustls::version::TLS13]).shared();
    let tcp = tokio::net::TcpStream::connect(server.webhook).await.unwrap();
    let err = pki::handshake(tcp, &config, "localhost").await.unwrap_err();
    assert!(err.to_string().contains("UnknownIssuer"), "{err}");

    let ready = reqwest_like_get(server.admin, "/readyz").await;
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    let webhook = server.webhook;
    server.stop().await;
    assert!(tokio::net::TcpStream::connect(webhook).await.is_err(), "listener closed after shutdown");
}

/// A plain HTTP/1.1 GET on the admin port, returning the raw response text.
async fn reqwest_like_get(addr: SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut text = String::new();
    tcp.read_to_string(&mut text).await.unwrap();
    text
}
