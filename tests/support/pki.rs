//! Certificates for one test run, generated fresh with rcgen: the control plane's CA and its
//! serving, client and service-account keys, and the webhook's own CA and serving certificate.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A certificate and its private key, both PEM.
pub(crate) struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

/// A certificate authority that issues serving and client certificates.
pub(crate) struct Ca {
    pub cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    pub(crate) fn new(common_name: &str) -> Ca {
        let key = KeyPair::generate().expect("generate CA key");
        let mut params = CertificateParams::default();
        params.distinguished_name = name(common_name, None);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let cert = params.self_signed(&key).expect("self-sign CA");
        Ca { cert_pem: cert.pem(), issuer: Issuer::new(params, key) }
    }

    /// A TLS server certificate for the given DNS names and IP literals.
    pub(crate) fn server(&self, common_name: &str, sans: &[&str]) -> Issued {
        let mut params = CertificateParams::new(sans.iter().map(std::string::ToString::to_string).collect::<Vec<_>>())
            .expect("valid subject alternative names");
        params.distinguished_name = name(common_name, None);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(params)
    }

    /// A client certificate: the API server's x509 authenticator reads the user name from the
    /// common name and the group from the organization.
    pub(crate) fn client(&self, user: &str, group: Option<&str>) -> Issued {
        let mut params = CertificateParams::default();
        params.distinguished_name = name(user, group);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(params)
    }

    fn issue(&self, params: CertificateParams) -> Issued {
        let key = KeyPair::generate().expect("generate key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign certificate");
        Issued { cert_pem: cert.pem(), key_pem: key.serialize_pem() }
    }
}

/// An ECDSA P-256 key pair for signing service-account tokens: (private PEM, public PEM).
pub(crate) fn signing_key_pair() -> (String, String) {
    let key = KeyPair::generate().expect("generate service-account key");
    (key.serialize_pem(), key.public_key_pem())
}

fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    if let Some(org) = organization {
        dn.push(DnType::OrganizationName, org);
    }
    dn
}
