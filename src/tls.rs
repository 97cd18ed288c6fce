//! TLS for the webhook listener: the rustls server configuration (TLS 1.2 and 1.3, ALPN h2 and
//! http/1.1, optionally mTLS) with errors naming the file at fault; the certificates it serves
//! ([`certs`], [`scratch`]), and the client names `--client-san` requires ([`identity`]).

pub(crate) mod certs;
pub(crate) mod identity;
pub(crate) mod scratch;

pub(crate) use identity::ClientNameError;
pub use identity::ClientNames;

use std::{path::Path, sync::Arc};

use rustls::{
    RootCertStore, ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::WebPkiClientVerifier,
};

/// The files a TLS configuration is built from ([`TlsError::message`] names them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsFile {
    Cert,
    Key,
    ClientCa,
}

impl TlsFile {
    /// How the file reads in a message without flags.
    pub fn role(self) -> &'static str {
        match self {
            TlsFile::Cert => "certificate",
            TlsFile::Key => "private key",
            TlsFile::ClientCa => "client CA",
        }
    }
}

/// Why a TLS configuration cannot be built. `Display` names the files by role.
#[derive(Debug, thiserror::Error)]
#[error("{}", self.message(TlsFile::role))]
pub enum TlsError {
    Read { file: TlsFile, path: String, source: std::io::Error },
    NoCert { path: String },
    BadCert { path: String, message: String },
    NoKey { path: String },
    Mismatch { cert_path: String, key_path: String, source: rustls::Error },
    BadClientCa { path: String, message: String },
}

impl TlsError {
    /// The message, with each file named by `name` (a role, or the flag that gave it).
    pub fn message(&self, name: impl Fn(TlsFile) -> &'static str) -> String {
        use TlsFile::{Cert, ClientCa, Key};
        match self {
            TlsError::Read { file, path, source } => format!("{} {path}: cannot read: {source}", name(*file)),
            TlsError::NoCert { path } => {
                format!("{} {path}: no PEM certificate found (expected -----BEGIN CERTIFICATE-----)", name(Cert))
            }
            TlsError::BadCert { path, message } => format!("{} {path}: invalid PEM: {message}", name(Cert)),
            TlsError::NoKey { path } => {
                format!("{} {path}: no PEM private key found (expected PKCS#8, PKCS#1 or SEC1)", name(Key))
            }
            TlsError::Mismatch { cert_path, key_path, source } => format!(
                "{} {cert_path} / {} {key_path}: the key does not match the certificate, or is unusable: {source}",
                name(Cert),
                name(Key)
            ),
            TlsError::BadClientCa { path, message } => {
                format!("{} {path}: no usable CA certificate: {message}", name(ClientCa))
            }
        }
    }
}

/// Builds the server configuration from a PEM certificate chain and private key.
pub fn server_config(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert_path: &str,
    key_path: &str,
) -> Result<ServerConfig, TlsError> {
    server_config_with_client_ca(cert_pem, key_pem, None, &ClientNames::default(), cert_path, key_path)
}

/// As [`server_config`]; with `client_ca` (PEM and its path), every client must present a
/// certificate that chains to one of its CAs and, unless `names` is empty, carries one of them.
pub(crate) fn server_config_with_client_ca(
    cert_pem: &[u8],
    key_pem: &[u8],
    client_ca: Option<(&[u8], &str)>,
    names: &ClientNames,
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
            let chain = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| bad(e.to_string()))?;
            names.wrap(chain)
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
    let read = |file, path: &Path, shown: &String| {
        std::fs::read(path).map_err(|source| TlsError::Read { file, path: shown.clone(), source })
    };
    let cert_pem = read(TlsFile::Cert, cert, &cert_path)?;
    let key_pem = read(TlsFile::Key, key, &key_path)?;
    server_config(&cert_pem, &key_pem, &cert_path, &key_path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_material_names_the_flag() {
        let bundle = crate::tls::certs::generate("test-ca", &["localhost".into()]).unwrap();
        let other = crate::tls::certs::generate("test-ca", &["localhost".into()]).unwrap();
        let ok = server_config(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes(), "c.pem", "k.pem").unwrap();
        assert_eq!(ok.alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);

        let err = |cert: &str, key: &str| {
            server_config(cert.as_bytes(), key.as_bytes(), "c.pem", "k.pem").unwrap_err().to_string()
        };
        assert!(err("", &bundle.key_pem).starts_with("certificate c.pem: no PEM certificate"));
        assert!(err(&bundle.key_pem, &bundle.key_pem).starts_with("certificate c.pem: no PEM certificate"));
        assert!(err(&bundle.cert_pem, "garbage").starts_with("private key k.pem: no PEM private key"));
        assert!(
            err(&bundle.cert_pem, &other.key_pem)
                .starts_with("certificate c.pem / private key k.pem: the key does not match")
        );
        let missing = load(Path::new("/nonexistent/c.pem"), Path::new("k.pem")).unwrap_err();
        assert!(missing.to_string().starts_with("certificate /nonexistent/c.pem: cannot read"), "{missing}");
        let flags = |f| match f {
            TlsFile::Cert => "--tls-cert",
            TlsFile::Key => "--tls-key",
            TlsFile::ClientCa => "--client-ca",
        };
        assert!(missing.message(flags).starts_with("--tls-cert /nonexistent/c.pem: cannot read"));
    }
}
