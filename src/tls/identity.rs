//! The client identity `--client-san` requires on top of `--client-ca`: the names a client
//! certificate must carry (a SAN DNS name or the subject CN), and the rustls verifier that
//! checks them after the chain. A CA that signs more than the API server's certificate (the
//! cluster CA signs every kubelet's) would otherwise let all its holders in.

use std::{
    fmt,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme,
    client::danger::HandshakeSignatureValid,
    pki_types::{CertificateDer, UnixTime},
    server::danger::{ClientCertVerified, ClientCertVerifier},
};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family},
};

use crate::names::{escape_control, truncate};

/// The reason label of `client_certificates_refused_total`: a fixed set, whatever clients send.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RefusalLabel {
    reason: &'static str,
}

/// Client certificates refused, by reason: `untrusted` (not signed by `--client-ca`, expired,
/// or otherwise refused by the chain check), `name_not_allowed` (signed, but naming no
/// `--client-san`) or `missing` (none presented: rustls refuses that before any verifier, so
/// the webhook listener counts it, `crate::server::handshake`). Shared by every configuration a
/// reload builds, so counts carry over.
pub(crate) type Refusals = Family<RefusalLabel, Counter>;
pub(crate) const UNTRUSTED: &str = "untrusted";
pub(crate) const NAME_NOT_ALLOWED: &str = "name_not_allowed";
pub(crate) const MISSING: &str = "missing";

/// Longest accepted name: a DNS name's 253 bytes, with room for a CN that is not one.
const MAX_NAME_BYTES: usize = 256;
/// How much of a refused certificate's names one log line shows.
const MAX_SHOWN_BYTES: usize = 1024;
/// At most one refusal line per this long; the refusals in between are counted in the next.
const LOG_INTERVAL: Duration = Duration::from_secs(1);

/// Why a `--client-san` value is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ClientNameError {
    #[error("--client-san: an empty name; give a DNS name or common name of the API server's client certificate")]
    Empty,
    #[error("--client-san {0:?}: longer than {MAX_NAME_BYTES} bytes")]
    TooLong(String),
    #[error("--client-san {0:?}: contains a control character")]
    Control(String),
}

/// The names of which a client certificate must carry one (ignoring ASCII case); empty: any.
#[derive(Debug, Clone, Default)]
pub struct ClientNames(Arc<[String]>, Refusals);

/// Equal when they require the same names (the counters are not configuration).
impl PartialEq for ClientNames {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for ClientNames {}

impl ClientNames {
    /// Validates the `--client-san` values (trimmed; duplicates dropped).
    pub fn new<I: IntoIterator<Item = String>>(names: I) -> Result<ClientNames, ClientNameError> {
        let mut kept: Vec<String> = Vec::new();
        for name in names {
            let name = name.trim();
            if name.is_empty() {
                return Err(ClientNameError::Empty);
            }
            if name.len() > MAX_NAME_BYTES {
                return Err(ClientNameError::TooLong(truncate(name, 64, 64)));
            }
            if name.chars().any(char::is_control) {
                return Err(ClientNameError::Control(name.to_owned()));
            }
            if !kept.iter().any(|k| k.eq_ignore_ascii_case(name)) {
                kept.push(name.to_owned());
            }
        }
        Ok(ClientNames(kept.into(), Refusals::default()))
    }

    /// Whether no name is required.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether one of `presented` is one of these names.
    pub fn accepts(&self, presented: &[String]) -> bool {
        self.0.iter().any(|want| presented.iter().any(|got| got.eq_ignore_ascii_case(want)))
    }

    /// Client certificates refused so far for `reason`.
    pub fn refused(&self, reason: &str) -> u64 {
        [UNTRUSTED, NAME_NOT_ALLOWED, MISSING]
            .into_iter()
            .find(|r| *r == reason)
            .map_or(0, |reason| self.1.get_or_create(&RefusalLabel { reason }).get())
    }

    /// Counts a handshake refused for presenting no certificate.
    pub(crate) fn missing(&self) {
        self.1.get_or_create(&RefusalLabel { reason: MISSING }).inc();
    }

    pub(crate) fn refusals(&self) -> Refusals {
        self.1.clone()
    }

    /// `verifier` (which checks the chain), then these names (any, when empty), counting
    /// refusals of either.
    pub(crate) fn wrap(&self, verifier: Arc<dyn ClientCertVerifier>) -> Arc<dyn ClientCertVerifier> {
        Arc::new(RequireNames { inner: verifier, names: self.clone(), log: LogGate::default() })
    }
}

impl fmt::Display for ClientNames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(","))
    }
}

/// The SAN DNS names and subject common names of a DER certificate, in that order. A
/// certificate that does not parse has none (the chain check has refused it already).
pub(crate) fn certificate_names(der: &[u8]) -> Vec<String> {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return Vec::new();
    };
    let san = cert.subject_alternative_name().ok().flatten();
    let dns = san.iter().flat_map(|san| &san.value.general_names).filter_map(|name| match name {
        x509_parser::extensions::GeneralName::DNSName(dns) => Some((*dns).to_owned()),
        _ => None,
    });
    let cns = cert.subject().iter_common_name().filter_map(|cn| cn.as_str().ok()).map(str::to_owned);
    dns.chain(cns).collect()
}

/// Accepts a client whose certificate the inner verifier accepts and that names one of `names`.
#[derive(Debug)]
struct RequireNames {
    inner: Arc<dyn ClientCertVerifier>,
    names: ClientNames,
    log: LogGate,
}

/// Lets one log line through per [`LOG_INTERVAL`]: a holder of a certificate of the CA can
/// open handshakes as fast as it likes, and each must not cost a line.
#[derive(Debug, Default)]
struct LogGate(Mutex<Gate>);

#[derive(Debug, Default)]
struct Gate {
    last: Option<Instant>,
    held_back: u64,
}

impl LogGate {
    /// `Some(refusals held back since the last line)` when a line may be written at `now`.
    fn admit(&self, now: Instant) -> Option<u64> {
        let mut gate = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if gate.last.is_some_and(|last| now.saturating_duration_since(last) < LOG_INTERVAL) {
            gate.held_back += 1;
            return None;
        }
        gate.last = Some(now);
        Some(std::mem::take(&mut gate.held_back))
    }
}

impl ClientCertVerifier for RequireNames {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let refused = |reason| self.names.1.get_or_create(&RefusalLabel { reason }).inc();
        let verified = self.inner.verify_client_cert(end_entity, intermediates, now).inspect_err(|_| {
            refused(UNTRUSTED);
        })?;
        if self.names.is_empty() {
            return Ok(verified);
        }
        let presented = certificate_names(end_entity);
        if self.names.accepts(&presented) {
            return Ok(verified);
        }
        refused(NAME_NOT_ALLOWED);
        // The certificate is genuine (its CA signed it), so this is a misconfiguration or a
        // holder of another certificate of that CA: worth a line, within the gate. Its names
        // are bounded, since whoever holds the CA chose them.
        if let Some(held_back) = self.log.admit(Instant::now()) {
            let shown = truncate(&escape_control(&presented.join(",")), MAX_SHOWN_BYTES, MAX_SHOWN_BYTES);
            tracing::warn!(
                presented = %if shown.is_empty() { "<none>" } else { shown.as_str() },
                required = %self.names,
                refused_since_last_line = held_back,
                "refused a client certificate signed by --client-ca: none of its SAN DNS names or CN is a --client-san name"
            );
        }
        Err(rustls::Error::InvalidCertificate(CertificateError::ApplicationVerificationFailure))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, DnType, KeyPair};

    use super::*;

    fn names(list: &[&str]) -> ClientNames {
        ClientNames::new(list.iter().map(|&n| n.to_owned())).unwrap()
    }

    fn certificate(sans: &[&str], cn: Option<&str>) -> Vec<u8> {
        let mut params = CertificateParams::new(sans.iter().map(|&s| s.to_owned()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        params.self_signed(&KeyPair::generate().unwrap()).unwrap().der().to_vec()
    }

    #[test]
    fn names_come_from_san_dns_names_then_the_cn() {
        let der = certificate(&["api.example.com", "10.0.0.1", "other.example.com"], Some("kube-apiserver"));
        assert_eq!(certificate_names(&der), ["api.example.com", "other.example.com", "kube-apiserver"]);
        assert_eq!(certificate_names(&certificate(&[], None)), Vec::<String>::new());
        assert_eq!(certificate_names(b"not DER"), Vec::<String>::new());
    }

    #[test]
    fn one_matching_name_is_enough_and_case_does_not_count() {
        let required = names(&["kube-apiserver-webhook-client", "API.example.com"]);
        let cases: [(&[&str], bool); 6] = [
            (&["kube-apiserver-webhook-client"], true),
            (&["system:node:n1", "api.example.com"], true),
            (&["KUBE-APISERVER-WEBHOOK-CLIENT"], true),
            (&["system:node:n1"], false),
            (&["kube-apiserver-webhook-client.evil"], false),
            (&[], false),
        ];
        for (presented, want) in cases {
            let presented: Vec<String> = presented.iter().map(|&p| p.to_owned()).collect();
            assert_eq!(required.accepts(&presented), want, "{presented:?}");
        }
        // A wildcard SAN is a name like any other, not a pattern.
        assert!(!names(&["api.example.com"]).accepts(&["*.example.com".to_owned()]));
        assert!(ClientNames::default().is_empty());
    }

    #[test]
    fn refusals_log_one_line_per_interval_counting_the_rest() {
        let gate = LogGate::default();
        let t0 = Instant::now();
        assert_eq!(gate.admit(t0), Some(0));
        assert_eq!(gate.admit(t0 + Duration::from_millis(10)), None);
        assert_eq!(gate.admit(t0 + Duration::from_millis(999)), None);
        assert_eq!(gate.admit(t0 + LOG_INTERVAL), Some(2));
        assert_eq!(gate.admit(t0 + LOG_INTERVAL * 3), Some(0));
    }

    #[test]
    fn flag_values_are_validated_naming_the_flag() {
        assert_eq!(names(&[" a ", "A", "b"]).to_string(), "a,b");
        assert_eq!(ClientNames::new(["a".to_owned(), " ".to_owned()]), Err(ClientNameError::Empty));
        let long = ClientNames::new(["x".repeat(300)]).unwrap_err().to_string();
        assert!(long.starts_with("--client-san \"xxx") && long.ends_with("longer than 256 bytes"), "{long}");
        let control = ClientNames::new(["a\nb".to_owned()]).unwrap_err().to_string();
        assert_eq!(control, "--client-san \"a\\nb\": contains a control character");
        assert!(ClientNameError::Empty.to_string().starts_with("--client-san: an empty name"));
    }
}
