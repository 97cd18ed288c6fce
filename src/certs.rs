//! Certificate generation: a private CA and serving certificates signed by it, as PEM. Used for
//! the ephemeral certificate of `serve` without `--tls-cert`, and by tests.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

/// A CA and one serving certificate, all PEM.
#[derive(Debug, Clone)]
pub struct ServingBundle {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot generate certificate: {0}")]
pub struct CertError(#[from] rcgen::Error);

/// Generates a fresh CA named `ca_name` and a serving certificate for `names` (DNS names or IP
/// literals) signed by it.
pub fn generate(ca_name: &str, names: &[String]) -> Result<ServingBundle, CertError> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.distinguished_name.push(DnType::CommonName, ca_name);
    ca_params.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

    let mut params = CertificateParams::new(names.to_vec())?;
    params
        .distinguished_name
        .push(DnType::CommonName, names.first().map(String::as_str).unwrap_or("ingress-status-guard"));
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &ca)?;
    Ok(ServingBundle { ca_pem: ca.pem(), cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}
