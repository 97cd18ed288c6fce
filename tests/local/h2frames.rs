//! HTTP/2 abuse at the frame level (issue 12), with a hand-written frame client over TLS:
//! rapid reset (HEADERS then RST_STREAM, over and over) and a CONTINUATION flood (a header block
//! that never ends). The webhook must end such connections (GOAWAY or close) within a bounded
//! time and keep serving everyone else.

use std::{sync::Arc, time::Duration};

use ingress_status_guard::Limits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{
    pki::{self, Pki, Tls},
    server::LocalServer,
};

const BOUND: Duration = Duration::from_secs(20);
pub(crate) const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
pub(crate) const GOAWAY: u8 = 7;
const CONTINUATION: u8 = 9;
pub(crate) const END_STREAM: u8 = 0x1;
/// GOAWAY error code for a peer that generates excessive load (RFC 9113, section 7).
const ENHANCE_YOUR_CALM: u32 = 0xb;
pub(crate) const END_HEADERS: u8 = 0x4;

pub(crate) fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut out = vec![len[1], len[2], len[3], kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// `GET /livez` for `localhost`, HPACK without the dynamic table: indexed `:method GET`,
/// `:scheme https`, `:path /`, and a literal `:authority`.
pub(crate) fn request_block() -> Vec<u8> {
    let mut block = vec![0x82, 0x87, 0x84, 0x01, 9];
    block.extend_from_slice(b"localhost");
    block
}

pub(crate) struct Conn {
    pub(crate) tls: Tls,
}

impl Conn {
    pub(crate) async fn open(server: &LocalServer, config: &Arc<rustls::ClientConfig>) -> Conn {
        let mut tls = pki::connect(server.webhook, config).await.unwrap();
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.unwrap();
        tls.write_all(&frame(SETTINGS, 0, 0, &[])).await.unwrap();
        Conn { tls }
    }

    /// Reads frames until the server closes the connection or sends GOAWAY; the frame types
    /// seen and the GOAWAY's error code. Panics if neither happens within `BOUND`.
    pub(crate) async fn frames_until_goaway_or_close(&mut self) -> (Vec<u8>, Option<u32>) {
        let mut kinds = Vec::new();
        let mut buf = Vec::new();
        let deadline = tokio::time::Instant::now() + BOUND;
        loop {
            while buf.len() >= 9 {
                let len = usize::from(buf[0]) << 16 | usize::from(buf[1]) << 8 | usize::from(buf[2]);
                if buf.len() < 9 + len {
                    break;
                }
                kinds.push(buf[3]);
                if buf[3] == GOAWAY && len >= 8 {
                    return (kinds, Some(u32::from_be_bytes(buf[13..17].try_into().unwrap())));
                }
                buf.drain(..9 + len);
            }
            let mut chunk = [0u8; 16384];
            match tokio::time::timeout_at(deadline, self.tls.read(&mut chunk)).await {
                Err(_) => panic!("neither GOAWAY nor close within {BOUND:?}; frame types {kinds:?}"),
                Ok(Ok(0) | Err(_)) => return (kinds, None),
                Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

fn start() -> (LocalServer, Arc<rustls::ClientConfig>) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pki = Pki::new("h2 frames test CA", &["localhost"]);
    let server = LocalServer::start_with(pki.server_config(), Limits::default());
    (server, pki.client(b"h2").shared())
}

/// A well-behaved request on a fresh connection still gets its HEADERS back.
async fn still_serving(server: &LocalServer, config: &Arc<rustls::ClientConfig>) {
    let mut conn = Conn::open(server, config).await;
    conn.tls.write_all(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &request_block())).await.unwrap();
    let mut buf = Vec::new();
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let mut chunk = [0u8; 16384];
        let n = tokio::time::timeout_at(deadline, conn.tls.read(&mut chunk)).await.expect("an answer").unwrap();
        assert!(n > 0, "closed without answering");
        buf.extend_from_slice(&chunk[..n]);
        let mut at = 0;
        while buf.len() >= at + 9 {
            let len = usize::from(buf[at]) << 16 | usize::from(buf[at + 1]) << 8 | usize::from(buf[at + 2]);
            if buf[at + 3] == HEADERS && u32::from_be_bytes(buf[at + 5..at + 9].try_into().unwrap()) == 1 {
                return;
            }
            at += 9 + len;
        }
    }
}

#[tokio::test]
async fn rapid_reset_gets_goaway() {
    let (server, client) = start();
    let mut conn = Conn::open(&server, &client).await;
    let block = request_block();
    let mut burst = Vec::new();
    // 5,000 streams opened and cancelled at once, in one write per 100.
    let writer = async {
        for batch in 0..50u32 {
            burst.clear();
            for i in 0..100u32 {
                let stream = 2 * (batch * 100 + i) + 1;
                burst.extend(frame(HEADERS, END_STREAM | END_HEADERS, stream, &block));
                burst.extend(frame(RST_STREAM, 0, stream, &8u32.to_be_bytes()));
            }
            if conn.tls.write_all(&burst).await.is_err() {
                break;
            }
        }
        conn
    };
    let mut conn = tokio::time::timeout(BOUND, writer).await.expect("writes end or fail within the bound");
    let (kinds, goaway) = conn.frames_until_goaway_or_close().await;
    assert_eq!(goaway, Some(ENHANCE_YOUR_CALM), "frame types {kinds:?}");
    still_serving(&server, &client).await;
    server.stop().await;
}

#[tokio::test]
async fn continuation_flood_is_cut_off() {
    let (server, client) = start();
    let mut conn = Conn::open(&server, &client).await;
    let mut block = request_block();
    // A header that never ends: a literal whose value spans 100 CONTINUATION frames of 16 KiB,
    // far past the 64 KiB header list the webhook allows.
    block.extend_from_slice(&[0x00, 0x05]);
    block.extend_from_slice(b"x-pad");
    let flood = async {
        conn.tls.write_all(&frame(HEADERS, END_STREAM, 1, &block)).await?;
        let junk = vec![b'a'; 16384];
        for _ in 0..100 {
            conn.tls.write_all(&frame(CONTINUATION, 0, 1, &junk)).await?;
        }
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(BOUND, flood).await.expect("writes end or fail within the bound");
    let (kinds, goaway) = conn.frames_until_goaway_or_close().await;
    assert!(!kinds.contains(&HEADERS), "no response to an endless header block: {kinds:?}");
    assert!(goaway.is_some(), "the connection is ended with GOAWAY: {kinds:?}");
    still_serving(&server, &client).await;
    server.stop().await;
}
