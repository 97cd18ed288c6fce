//! The certificate the webhook presents, verified as the API server does: a TLS handshake with
//! the caBundle as the only roots. Blocking (std sockets, each step bounded).

use std::{
    net::{TcpStream, ToSocketAddrs},
    sync::Arc,
    time::Duration,
};

use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};

/// Certificates read from one caBundle at most: a bundle is a CA or two across a rotation.
const MAX_ROOTS: usize = 16;

/// What the handshake showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Presented {
    /// The caBundle verifies the certificate served for that name.
    Verified,
    /// The address could not be resolved or reached from here (not a verdict on the certificate).
    Unreachable(String),
    /// A certificate was presented and the caBundle does not verify it (or not for that name).
    Rejected(String),
    /// The caBundle itself is unusable.
    BadBundle(String),
}

/// Handshakes with `host:port` trusting only `ca_pem`; each step within `timeout`.
pub(crate) fn probe(ca_pem: &[u8], host: &str, port: u16, timeout: Duration) -> Presented {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem).take(MAX_ROOTS) {
        match cert {
            Ok(cert) => {
                if let Err(e) = roots.add(cert) {
                    return Presented::BadBundle(format!("a certificate of the caBundle is not a usable CA: {e}"));
                }
            }
            Err(e) => return Presented::BadBundle(format!("the caBundle is not PEM certificates: {e:?}")),
        }
    }
    if roots.is_empty() {
        return Presented::BadBundle("the caBundle holds no certificate".into());
    }
    let Ok(name) = ServerName::try_from(host.to_owned()) else {
        return Presented::Unreachable(format!("{host:?} is not a host name or an IP address"));
    };
    let addr = match (host, port).to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(addr)) => addr,
        Ok(None) => return Presented::Unreachable(format!("{host} resolves to no address")),
        Err(e) => return Presented::Unreachable(format!("cannot resolve {host}: {e}")),
    };
    let mut socket = match TcpStream::connect_timeout(&addr, timeout) {
        Ok(socket) => socket,
        Err(e) => return Presented::Unreachable(format!("cannot connect to {host}:{port}: {e}")),
    };
    let _ = socket.set_read_timeout(Some(timeout));
    let _ = socket.set_write_timeout(Some(timeout));
    let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    let mut connection = match rustls::ClientConnection::new(Arc::new(config), name) {
        Ok(connection) => connection,
        Err(e) => return Presented::Unreachable(format!("cannot start TLS: {e}")),
    };
    while connection.is_handshaking() {
        if let Err(e) = connection.complete_io(&mut socket) {
            return match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
                Some(rustls::Error::InvalidCertificate(why)) => Presented::Rejected(format!(
                    "the caBundle does not verify the certificate {host}:{port} presents ({why:?})"
                )),
                // The server asked for a client certificate (`--client-ca`) after its own was verified.
                Some(rustls::Error::AlertReceived(_)) => Presented::Verified,
                Some(other) => Presented::Unreachable(format!("TLS handshake with {host}:{port} failed: {other}")),
                None => Presented::Unreachable(format!("TLS handshake with {host}:{port} failed: {e}")),
            };
        }
    }
    Presented::Verified
}
