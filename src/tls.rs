//! TLS for the webhook listener: rustls with TLS 1.2 and 1.3, ALPN h2 and http/1.1, from PEM files
//! or from an ephemeral self-signed certificate.

use std::{path::Path, sync::Arc};

use rustls::{
    RootCertStore, ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::WebPkiClientVerifier,
};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("--tls-cert {path}: cannot read: {source}")]
    ReadCert { path: String, source: std::io::Error },
    #[error("--tls-key {path}: cannot read: {source}")]
    ReadKey { path: String, source: std::io::Error },
    #[error("--tls-cert {path}: no PEM certificate found (expected -----BEGIN CERTIFICATE-----)")]
    NoCert { path: String },
    #[error("--tls-cert {path}: invalid PEM: {message}")]
    BadCert { path: String, message: String },
    #[error("--tls-key {path}: no PEM private key found (expected PKCS#8, PKCS#1 or SEC1)")]
    NoKey { path: String },
    #[error(
        "--tls-cert {cert_path} / --tls-key {key_path}: the key does not match the certificate, or is unusable: {source}"
    )]
    Mismatch { cert_path: String, key_path: String, source: rustls::Error },
    #[error("--client-ca {path}: cannot read: {source}")]
    ReadClientCa { path: String, source: std::io::Error },
    #[error("--client-ca {path}: no usable CA certificate: {message}")]
    BadClientCa { path: String, message: String },
}

/// Builds the server configuration from a PEM certificate chain and private key.
pub fn server_config(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert_path: &str,
    key_path: &str,
) -> Result<ServerConfig, TlsError> {
    server_config_with_client_ca(cert_pem, key_pem, None, cert_path, key_path)
}

/// As [`server_config`]; with `client_ca` (PEM and its path), every client must present a
/// certificate that chains to one of its CAs (mTLS).
pub(crate) fn server_config_with_client_ca(
    cert_pem: &[u8],
    key_pem: &[u8],
    client_ca: Option<(&[u8], &str)>,
    cert_path: &str,
    key_path: &str,
) -> Result<ServerConfig, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::BadCert { path: cert_path.to_owned(), message: e.to_string() })?;
    if chain.is_empty() {
        return Err(TlsError::NoCert { path: cert_path.to_owned() });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|_| TlsError::NoKey { path: key_path.to_owned() })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client_verifier = match client_ca {
        None => WebPkiClientVerifier::no_client_auth(),
        Some((pem, path)) => {
            let bad = |message: String| TlsError::BadClientCa { path: path.to_owned(), message };
            let mut roots = RootCertStore::empty();
            for ca in CertificateDer::pem_slice_iter(pem) {
                roots.add(ca.map_err(|e| bad(e.to_string()))?).map_err(|e| bad(e.to_string()))?;
            }
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| bad(e.to_string()))?
        }
    };
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .expect("ring supports TLS 1.2 and 1.3")
        .with_client_cert_verifier(client_verifier)
        .with_single_cert(chain, key)
        .map_err(|source| TlsError::Mismatch {
            cert_path: cert_path.to_owned(),
            key_path: key_path.to_owned(),
            source,
        })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Reads `--tls-cert` and `--tls-key` and builds the server configuration.
pub fn load(cert: &Path, key: &Path) -> Result<ServerConfig, TlsError> {
    let (cert_path, key_path) = (cert.display().to_string(), key.display().to_string());
    let cert_pem = std::fs::read(cert).map_err(|source| TlsError::ReadCert { path: cert_path.clone(), source })?;
    let key_pem = std::fs::read(key).map_err(|source| TlsError::ReadKey { path: key_path.clone(), source })?;
    server_config(&cert_pem, &key_pem, &cert_path, &key_path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_material_names_the_flag() {
        let bundle = crate::certs::generate("test-ca", &["localhost".into()]).unwrap();
        let other = crate::certs::generate("test-ca", &["localhost".into()]).unwrap();
        let ok = server_config(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes(), "c.pem", "k.pem").unwrap();
        assert_eq!(ok.alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);

        let err = |cert: &str, key: &str| {
            server_config(cert.as_bytes(), key.as_bytes(), "c.pem", "k.pem").unwrap_err().to_string()
        };
        assert!(err("", &bundle.key_pem).starts_with("--tls-cert c.pem: no PEM certificate"));
        assert!(err(&bundle.key_pem, &bundle.key_pem).starts_with("--tls-cert c.pem: no PEM certificate"));
        assert!(err(&bundle.cert_pem, "garbage").starts_with("--tls-key k.pem: no PEM private key"));
        assert!(
            err(&bundle.cert_pem, &other.key_pem)
                .starts_with("--tls-cert c.pem / --tls-key k.pem: the key does not match")
        );
        assert!(
            load(Path::new("/nonexistent/c.pem"), Path::new("k.pem"))
                .unwrap_err()
                .to_string()
                .starts_with("--tls-cert /nonexistent/c.pem: cannot read")
        );
    }
}
