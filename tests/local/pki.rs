//! TLS for the local tests: a generated CA with a serving certificate for `serve`, clients that
//! trust a CA (with the ALPN protocol, TLS versions and client identity a test asks for), and
//! HTTP/1.1 and HTTP/2 client connections over them.

use std::{error::Error, net::SocketAddr, sync::Arc};

use axum_server::tls_rustls::RustlsConfig;
use hyper::body::Body;
use hyper_util::rt::{TokioExecutor, TokioIo};
use ingress_status_guard::{generate_certificates, tls_server_config};
use rustls::{
    ClientConfig, SupportedProtocolVersion,
    pki_types::{CertificateDer, PrivateKeyDer, ServerName, pem::PemObject},
};

pub(crate) type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// A generated CA and one serving certificate it signed, all PEM.
pub(crate) struct Pki {
    pub(crate) ca_pem: String,
    pub(crate) cert_pem: String,
    pub(crate) key_pem: String,
}

impl Pki {
    /// A CA called `ca_name` and a certificate for `names` (DNS names or IP addresses).
    pub(crate) fn new(ca_name: &str, names: &[&str]) -> Pki {
        let names: Vec<String> = names.iter().map(|&n| n.to_owned()).collect();
        let bundle = generate_certificates(ca_name, &names).unwrap();
        Pki { ca_pem: bundle.ca_pem, cert_pem: bundle.cert_pem, key_pem: bundle.key_pem }
    }

    /// The serving certificate loaded by the production TLS stack, as `serve --tls-cert` loads it.
    pub(crate) fn server_config(&self) -> RustlsConfig {
        let config = tls_server_config(self.cert_pem.as_bytes(), self.key_pem.as_bytes(), "cert", "key").unwrap();
        RustlsConfig::from_config(Arc::new(config))
    }

    /// A client that trusts this CA only and offers `alpn`.
    pub(crate) fn client<'a>(&'a self, alpn: &'a [u8]) -> ClientTls<'a> {
        ClientTls::trusting(self.ca_pem.as_bytes(), alpn)
    }
}

/// A TLS client configuration that trusts the CAs of one PEM bundle and offers one ALPN protocol;
/// TLS versions are rustls's safe defaults unless set.
pub(crate) struct ClientTls<'a> {
    ca_pem: &'a [u8],
    alpn: &'a [u8],
    versions: Option<&'a [&'static SupportedProtocolVersion]>,
    identity: Option<(&'a str, &'a str)>,
}

impl<'a> ClientTls<'a> {
    pub(crate) fn trusting(ca_pem: &'a [u8], alpn: &'a [u8]) -> ClientTls<'a> {
        ClientTls { ca_pem, alpn, versions: None, identity: None }
    }

    /// Offers only these TLS versions.
    pub(crate) fn versions(self, versions: &'a [&'static SupportedProtocolVersion]) -> ClientTls<'a> {
        ClientTls { versions: Some(versions), ..self }
    }

    /// Presents this client certificate (chain PEM) with its private key (PEM), for mTLS.
    pub(crate) fn identity(self, cert_pem: &'a str, key_pem: &'a str) -> ClientTls<'a> {
        ClientTls { identity: Some((cert_pem, key_pem)), ..self }
    }

    pub(crate) fn config(self) -> ClientConfig {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(self.ca_pem) {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider);
        let builder = match self.versions {
            Some(versions) => builder.with_protocol_versions(versions),
            None => builder.with_safe_default_protocol_versions(),
        };
        let builder = builder.unwrap().with_root_certificates(roots);
        let mut config = match self.identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = CertificateDer::pem_slice_iter(cert.as_bytes()).collect::<Result<Vec<_>, _>>().unwrap();
                builder.with_client_auth_cert(chain, PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap()).unwrap()
            }
        };
        config.alpn_protocols = vec![self.alpn.to_vec()];
        config
    }

    pub(crate) fn shared(self) -> Arc<ClientConfig> {
        Arc::new(self.config())
    }
}

/// A TLS session for `name` over an open TCP connection.
pub(crate) async fn handshake(
    tcp: tokio::net::TcpStream,
    config: &Arc<ClientConfig>,
    name: &str,
) -> std::io::Result<Tls> {
    let connector = tokio_rustls::TlsConnector::from(config.clone());
    connector.connect(ServerName::try_from(name.to_owned()).unwrap(), tcp).await
}

/// A new TCP connection to `addr` and a TLS session for `localhost` over it.
pub(crate) async fn connect(addr: SocketAddr, config: &Arc<ClientConfig>) -> std::io::Result<Tls> {
    handshake(tokio::net::TcpStream::connect(addr).await?, config, "localhost").await
}

/// An HTTP/1.1 client over `tls`; a spawned task drives the connection.
pub(crate) async fn http1<B>(tls: Tls) -> hyper::Result<hyper::client::conn::http1::SendRequest<B>>
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn Error + Send + Sync>>,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(conn);
    Ok(sender)
}

/// An HTTP/2 client over `tls`; a spawned task drives the connection.
pub(crate) async fn http2<B>(tls: Tls) -> hyper::Result<hyper::client::conn::http2::SendRequest<B>>
where
    B: Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn Error + Send + Sync>>,
{
    let (sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls)).await?;
    tokio::spawn(conn);
    Ok(sender)
}
