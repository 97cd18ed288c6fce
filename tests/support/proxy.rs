//! A TCP proxy in front of the API server that a test stalls at will (`tests/cluster/fights.rs`,
//! `tests/cluster/leader.rs`): a leader behind it loses its connection without its process dying.

use std::sync::Arc;

/// A TCP proxy the test controls: forwards to `upstream` until `stall` is set, then stops
/// forwarding in both directions, keeping every connection open (a hung API server, as a
/// half-dead node or a black-holing network looks to a client). Bytes read while stalled are
/// never forwarded; connections made after `stall` is cleared again pass.
#[allow(dead_code)] // not every test binary uses it
pub(crate) async fn stalling_proxy(upstream: String, stall: Arc<std::sync::atomic::AtomicBool>) -> u16 {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else { continue };
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            for (mut from, mut to, stall) in [
                (
                    Box::new(cr) as Box<dyn tokio::io::AsyncRead + Send + Unpin>,
                    Box::new(sw) as Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
                    stall.clone(),
                ),
                (Box::new(sr), Box::new(cw), stall.clone()),
            ] {
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        let n = match from.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        if stall.load(Ordering::SeqCst) {
                            std::future::pending::<()>().await;
                        }
                        if to.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        }
    });
    port
}
