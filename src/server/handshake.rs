//! A client that presents no certificate while `--client-ca` requires one: rustls refuses it
//! before any verifier runs, so [`CountMissing`] wraps the TLS acceptor to count it in
//! `client_certificates_refused_total{reason="missing"}`.

use std::{future::Future, io, pin::Pin};

use axum_server::accept::Accept;

use crate::tls::ClientNames;

/// An acceptor that counts the missing certificates in `names` (`None` without `--client-ca`).
#[derive(Clone, Debug)]
pub(crate) struct CountMissing<A> {
    pub(crate) inner: A,
    pub(crate) names: Option<ClientNames>,
}

/// Whether a failed handshake's `error` is rustls's refusal of a client without certificate.
pub(crate) fn is_missing_certificate(error: &io::Error) -> bool {
    error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|e| matches!(e, rustls::Error::NoCertificatesPresented))
}

impl<A, I, S> Accept<I, S> for CountMissing<A>
where
    A: Accept<I, S>,
    A::Future: Send + 'static,
{
    type Stream = A::Stream;
    type Service = A::Service;
    type Future = Pin<Box<dyn Future<Output = io::Result<(A::Stream, A::Service)>> + Send>>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        let handshake = self.inner.accept(stream, service);
        let names = self.names.clone();
        Box::pin(async move {
            let result = handshake.await;
            if let (Err(error), Some(names)) = (&result, &names)
                && is_missing_certificate(error)
            {
                names.missing();
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_rustlss_no_certificate_refusal_is_missing() {
        let missing = io::Error::new(io::ErrorKind::InvalidData, rustls::Error::NoCertificatesPresented);
        assert!(is_missing_certificate(&missing));
        let untrusted = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        for other in [untrusted, io::Error::from(io::ErrorKind::TimedOut), io::Error::other("eof")] {
            assert!(!is_missing_certificate(&other), "{other}");
        }
    }
}
