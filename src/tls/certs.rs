//! A private CA and serving certificates signed by it, as PEM (rcgen), and the `certs`
//! subcommand: `generate` writes them to files, [`bootstrap`] keeps them in a Secret.

pub(crate) mod bootstrap;

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, SystemTime},
};

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::{
    client::danger::ServerCertVerifier as _,
    pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject},
};

/// A CA and one serving certificate, all PEM.
#[derive(Debug, Clone)]
pub struct ServingBundle {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("cannot generate certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
    #[error("{what}: {source}")]
    Kube { what: String, source: kube::Error },
    #[error("{0}: kept changing under us; giving up after 5 attempts")]
    Contended(String),
    #[error("{what} not found after {seconds}s")]
    NotFound { what: String, seconds: u64 },
}

/// How long certificates made without an explicit validity last.
pub(crate) const DEFAULT_VALIDITY_DAYS: u32 = 365;

/// A fresh CA named `ca_name` and a serving certificate for `names` (DNS names or IP literals),
/// both valid for `DEFAULT_VALIDITY_DAYS`.
pub fn generate(ca_name: &str, names: &[String]) -> Result<ServingBundle, CertError> {
    generate_with_validity(ca_name, names, days(DEFAULT_VALIDITY_DAYS))
}

/// As [`generate`], valid from an hour ago (clock skew) for `validity`.
pub(crate) fn generate_with_validity(
    ca_name: &str,
    names: &[String],
    validity: Duration,
) -> Result<ServingBundle, CertError> {
    let ca = Ca::new(ca_name, validity)?;
    let (cert_pem, key_pem) = ca.issue(names, validity)?;
    Ok(ServingBundle { ca_pem: ca.pem(), cert_pem, key_pem })
}

fn days(n: u32) -> Duration {
    Duration::from_secs(u64::from(n) * 24 * 3600)
}

fn validity_window(params: &mut CertificateParams, validity: Duration) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + validity;
}

/// A private certificate authority that can issue serving certificates.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    /// A new self-signed CA named `name`, valid for `validity` from now.
    pub fn new(name: &str, validity: Duration) -> Result<Ca, CertError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        validity_window(&mut params, validity);
        Ok(Ca { issuer: CertifiedIssuer::self_signed(params, KeyPair::generate()?)? })
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A serving certificate for `names` and its private key (PKCS#8), both PEM.
    pub fn issue(&self, names: &[String], validity: Duration) -> Result<(String, String), CertError> {
        let mut params = CertificateParams::new(names.to_vec())?;
        params
            .distinguished_name
            .push(DnType::CommonName, names.first().map(String::as_str).unwrap_or("ingress-status-guard"));
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        validity_window(&mut params, validity);
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// The names the API server checks when it calls the webhook through Service `service` in
/// `namespace`: `<service>.<namespace>.svc`, and the fully qualified form.
pub fn service_names(service: &str, namespace: &str) -> Vec<String> {
    vec![format!("{service}.{namespace}.svc"), format!("{service}.{namespace}.svc.cluster.local")]
}

/// A CA name unique to this CA (it is the issuer name clients look up), naming the Service.
pub(crate) fn ca_name(service: &str, namespace: &str) -> String {
    let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    format!("ingress-status-guard CA for {service}.{namespace} {}.{:09}", stamp.as_secs(), stamp.subsec_nanos())
}

/// The `caBundle` value of a webhook configuration: base64 of the PEM.
pub(crate) fn ca_bundle(ca_pem: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(ca_pem)
}

/// Checks that `cert_pem` (leaf first) chains to a CA in `ca_pem`, is valid now, names every one
/// of `names`, and that `key_pem` is its key: what the API server and our TLS stack will check.
/// Returns the earliest expiry among the leaf and the CAs it was checked against.
pub fn verify_serving(cert_pem: &[u8], key_pem: &[u8], ca_pem: &[u8], names: &[String]) -> Result<SystemTime, String> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("tls.crt: invalid PEM: {e}"))?;
    let (leaf, intermediates) = chain.split_first().ok_or("tls.crt: no certificate")?;
    crate::tls::server_config(cert_pem, key_pem, "tls.crt", "tls.key").map_err(|e| e.to_string())?;
    let cas = CertificateDer::pem_slice_iter(ca_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("ca.crt: invalid PEM: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(cas.iter().cloned());
    if added == 0 {
        return Err("ca.crt: no usable CA certificate".to_owned());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| format!("ca.crt: {e}"))?;
    for name in names {
        let server_name = ServerName::try_from(name.as_str()).map_err(|e| format!("{name}: {e}"))?;
        verifier
            .verify_server_cert(leaf, intermediates, &server_name, &[], UnixTime::now())
            .map_err(|e| format!("tls.crt for {name}: {e}"))?;
    }
    cas.iter().map(not_after).try_fold(not_after(leaf)?, |earliest, ca| ca.map(|ca| earliest.min(ca)))
}

pub(crate) fn not_after(der: &CertificateDer<'_>) -> Result<SystemTime, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| format!("unparsable certificate: {e}"))?;
    let secs = cert.validity().not_after.timestamp();
    Ok(SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).unwrap_or(0)))
}

/// What `certs generate` writes, and where.
#[derive(Debug, Clone)]
pub(crate) struct Files {
    pub service: String,
    pub namespace: String,
    pub out: PathBuf,
    pub validity_days: u32,
    /// Replace existing files in `out`.
    pub force: bool,
}

/// `certs generate`: writes `ca.crt`, `tls.crt` and `tls.key` (mode 0600) into `--out`.
pub(crate) fn generate_files(args: &Files) -> Result<ServingBundle, CertError> {
    for (flag, value) in [("--service", &args.service), ("--namespace", &args.namespace)] {
        if !crate::names::is_dns1123_label(value) {
            return Err(CertError::Usage(format!(
                "{flag} {value:?} is not a valid Kubernetes name (lowercase letters, digits and '-')"
            )));
        }
    }
    let names = service_names(&args.service, &args.namespace);
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| CertError::Io { path, source }
    };
    std::fs::create_dir_all(&args.out).map_err(io(&args.out))?;
    let files = ["ca.crt", "tls.crt", "tls.key"].map(|f| args.out.join(f));
    if !args.force
        && let Some(existing) = files.iter().find(|f| f.exists())
    {
        return Err(CertError::Usage(format!("{} exists; pass --force to replace it", existing.display())));
    }
    let bundle = generate_with_validity(&ca_name(&args.service, &args.namespace), &names, days(args.validity_days))?;
    write_file(&files[0], bundle.ca_pem.as_bytes(), 0o644).map_err(io(&files[0]))?;
    write_file(&files[1], bundle.cert_pem.as_bytes(), 0o644).map_err(io(&files[1]))?;
    write_file(&files[2], bundle.key_pem.as_bytes(), 0o600).map_err(io(&files[2]))?;
    let [ca, cert, key] = files.each_ref().map(|f| f.display());
    eprintln!("wrote {ca}, {cert} and {key} for {}", names.join(", "));
    Ok(bundle)
}

fn write_file(path: &Path, contents: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        options.mode(mode);
        // `mode` applies only on creation; --force over an existing file must tighten it too.
        if path.exists() {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
        }
    }
    #[cfg(not(unix))]
    let _ = mode;
    options.open(path)?.write_all(contents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_certificates_verify_for_the_service_names() {
        let names = service_names("isg", "ns");
        assert_eq!(names, ["isg.ns.svc", "isg.ns.svc.cluster.local"]);
        let b = generate_with_validity("ca", &names, days(10)).unwrap();
        let expiry = verify_serving(b.cert_pem.as_bytes(), b.key_pem.as_bytes(), b.ca_pem.as_bytes(), &names).unwrap();
        let left = expiry.duration_since(SystemTime::now()).unwrap();
        assert!(left > days(9) && left <= days(10), "{left:?}");

        let other = generate("other", &names).unwrap();
        let err = |cert: &str, key: &str, ca: &str, names: &[String]| {
            verify_serving(cert.as_bytes(), key.as_bytes(), ca.as_bytes(), names).unwrap_err()
        };
        assert!(err(&b.cert_pem, &b.key_pem, &other.ca_pem, &names).contains("UnknownIssuer"));
        assert!(err(&b.cert_pem, &other.key_pem, &b.ca_pem, &names).contains("does not match"));
        assert!(err(&b.cert_pem, &b.key_pem, &b.ca_pem, &["x.ns.svc".into()]).contains("x.ns.svc"));
        assert!(err(&b.cert_pem, &b.key_pem, "", &names).contains("ca.crt"));
        // A bundle of two CAs (as during a rotation) trusts both.
        let both = format!("{}{}", other.ca_pem, b.ca_pem);
        verify_serving(b.cert_pem.as_bytes(), b.key_pem.as_bytes(), both.as_bytes(), &names).unwrap();
    }
}
