//! Certificate rotation without restart: watches `--tls-cert`, `--tls-key` and `--client-ca`
//! ([`crate::reload::fswatch`]) and swaps the listener's rustls configuration in place when their
//! contents change; open connections keep theirs. A new set that does not load is refused with
//! a log line naming the file, and the configuration in use stays.

use std::{
    future::Future,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use axum_server::tls_rustls::RustlsConfig;
use prometheus_client::metrics::gauge::Gauge;
use rustls::{
    ServerConfig,
    pki_types::{CertificateDer, pem::PemObject},
};
use tokio::sync::watch;

use crate::{
    reload::fswatch::{Changes, SETTLE},
    tls::{self, ClientNames, TlsError, TlsFile},
};

/// How often the files are read even without a filesystem event.
pub const POLL_INTERVAL: Duration = Duration::from_secs(10);

/// The files the TLS configuration is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    /// The serving certificate chain (PEM), leaf first.
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// Clients must present a certificate signed by one of these CAs.
    pub client_ca: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Contents {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Option<Vec<u8>>,
}

impl CertFiles {
    async fn read(&self) -> Result<Contents, TlsError> {
        let read = async |file, path: &Path| {
            tokio::fs::read(path).await.map_err(|source| TlsError::Read {
                file,
                path: path.display().to_string(),
                source,
            })
        };
        Ok(Contents {
            cert: read(TlsFile::Cert, &self.cert).await?,
            key: read(TlsFile::Key, &self.key).await?,
            client_ca: match &self.client_ca {
                Some(path) => Some(read(TlsFile::ClientCa, path).await?),
                None => None,
            },
        })
    }

    /// Reads until two reads in a row agree, so a swap between reading the certificate and the
    /// key is not mistaken for a mismatched pair.
    async fn read_settled(&self) -> Result<Contents, TlsError> {
        let mut previous = self.read().await?;
        for _ in 0..5 {
            let current = self.read().await?;
            if current == previous {
                return Ok(current);
            }
            previous = current;
            tokio::time::sleep(SETTLE).await;
        }
        Ok(previous)
    }

    fn build(&self, contents: &Contents, names: &ClientNames) -> Result<ServerConfig, TlsError> {
        let client_ca_path = self.client_ca.as_ref().map(|p| p.display().to_string());
        let client_ca = contents.client_ca.as_deref().zip(client_ca_path.as_deref());
        tls::server_config_with_client_ca(
            &contents.cert,
            &contents.key,
            client_ca,
            names,
            &self.cert.display().to_string(),
            &self.key.display().to_string(),
        )
    }

    fn paths(&self) -> Vec<&Path> {
        [Some(&self.cert), Some(&self.key), self.client_ca.as_ref()]
            .into_iter()
            .flatten()
            .map(PathBuf::as_path)
            .collect()
    }
}

/// The result of the latest look at the files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The files as loaded at start.
    Loaded,
    /// New contents are in use.
    Reloaded,
    /// New contents were refused (the error names the flag and file); the previous stay.
    Refused(String),
}

/// Each outcome with a sequence number, so a watcher can tell two refusals apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub seq: u64,
    pub outcome: Outcome,
}

/// Owns the watch's task: dropping it stops reloading, and `Reloader::supervise` is how
/// `serve` sees it end.
pub struct Reloader {
    task: tokio::task::JoinHandle<()>,
    status: watch::Receiver<Status>,
    expiry: Gauge,
}

impl Reloader {
    fn spawn(watch: impl Future<Output = ()> + Send + 'static, status: watch::Receiver<Status>, expiry: Gauge) -> Self {
        Reloader { task: tokio::spawn(watch), status, expiry }
    }

    /// The notAfter (Unix seconds) of the certificate in use, updated at every reload; 0 if
    /// it cannot be read from the PEM.
    pub fn cert_expiry(&self) -> Gauge {
        self.expiry.clone()
    }

    /// Notified on every reload or refusal.
    pub fn subscribe(&self) -> watch::Receiver<Status> {
        self.status.clone()
    }

    /// Runs until the watch of the files ends, which it does only by panicking: the panic is
    /// raised again here, so the owning task ends with it (and `serve` stops being ready).
    pub(crate) async fn supervise(mut self) {
        if let Err(e) = (&mut self.task).await
            && e.is_panic()
        {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}

impl Drop for Reloader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Loads the files and starts watching them (inside a tokio runtime): the returned
/// configuration is updated in place. Fails, naming the file, if the files do not load now.
pub async fn start(files: CertFiles, poll: Duration) -> Result<(RustlsConfig, Reloader), TlsError> {
    start_requiring(files, ClientNames::default(), poll).await
}

/// As [`start`]; with `--client-ca`, a client certificate must also carry one of `names`
/// (`--client-san`), in every configuration built from the files, reloads included.
pub async fn start_requiring(
    files: CertFiles,
    names: ClientNames,
    poll: Duration,
) -> Result<(RustlsConfig, Reloader), TlsError> {
    let contents = files.read_settled().await?;
    let config = RustlsConfig::from_config(Arc::new(files.build(&contents, &names)?));
    log_certificate("serving certificate loaded", &files.cert, &contents.cert);
    let expiry = Gauge::default();
    expiry.set(expiry_seconds(&contents.cert).unwrap_or(0));

    let changes = Changes::watch(&files.paths(), poll, "certificate");
    let (status_tx, status_rx) = watch::channel(Status { seq: 0, outcome: Outcome::Loaded });
    let watch = watch_files(files, names, config.clone(), expiry.clone(), contents, changes, status_tx);
    Ok((config, Reloader::spawn(watch, status_rx, expiry)))
}

async fn watch_files(
    files: CertFiles,
    names: ClientNames,
    config: RustlsConfig,
    expiry: Gauge,
    mut current: Contents,
    mut changes: Changes,
    status: watch::Sender<Status>,
) {
    // What was last refused, so a broken set is logged once, not at every poll.
    let mut refused: Option<(Option<Contents>, String)> = None;
    let mut seq = 0;
    loop {
        changes.next().await;

        let loaded = match files.read_settled().await {
            Ok(contents) if contents == current => {
                refused = None;
                continue;
            }
            Ok(contents) => {
                files.build(&contents, &names).map(|c| (c, contents.clone())).map_err(|e| (Some(contents), e))
            }
            Err(e) => Err((None, e)),
        };
        match loaded {
            Ok((new_config, contents)) => {
                seq += 1;
                config.reload_from_config(Arc::new(new_config));
                log_certificate("serving certificate reloaded", &files.cert, &contents.cert);
                expiry.set(expiry_seconds(&contents.cert).unwrap_or(0));
                current = contents;
                refused = None;
                status.send_replace(Status { seq, outcome: Outcome::Reloaded });
            }
            Err((contents, e)) => {
                let message = e.to_string();
                let key = (contents, message.clone());
                if refused.as_ref() != Some(&key) {
                    seq += 1;
                    tracing::error!(
                        error = %message,
                        cert = %files.cert.display(),
                        key = %files.key.display(),
                        "refused the new TLS files; still serving the previous certificate"
                    );
                    refused = Some(key);
                    status.send_replace(Status { seq, outcome: Outcome::Refused(message) });
                }
            }
        }
    }
}

/// The notAfter of the first certificate in `pem` (the leaf), in Unix seconds.
fn expiry_seconds(pem: &[u8]) -> Option<i64> {
    let leaf = CertificateDer::pem_slice_iter(pem).next()?.ok()?;
    let not_after = crate::tls::certs::not_after(&leaf).ok()?;
    i64::try_from(not_after.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs()).ok()
}

fn log_certificate(message: &str, path: &Path, pem: &[u8]) {
    let leaf = CertificateDer::pem_slice_iter(pem).next().and_then(Result::ok);
    let parsed = leaf.as_ref().and_then(|der| x509_parser::parse_x509_certificate(der).ok());
    match parsed {
        Some((_, cert)) => tracing::info!(
            file = %path.display(),
            subject = %cert.subject(),
            serial = %cert.raw_serial_as_string(),
            not_after = %cert.validity().not_after,
            "{message}"
        ),
        None => tracing::info!(file = %path.display(), "{message}"),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use super::*;

    #[test]
    fn expiry_is_the_leafs() {
        let names = ["svc.ns.svc".to_owned()];
        let bundle =
            crate::tls::certs::generate_with_validity("test CA", &names, Duration::from_secs(20 * 86400)).unwrap();
        // The leaf first, then its CA: the leaf's expiry counts.
        let chain = format!("{}{}", bundle.cert_pem, bundle.ca_pem);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
        let left = expiry_seconds(chain.as_bytes()).unwrap() - now;
        assert!((19 * 86400..=20 * 86400 + 60).contains(&left), "{left}");
        assert_eq!(expiry_seconds(b"not a certificate"), None);
    }

    fn reloader(watch: impl Future<Output = ()> + Send + 'static) -> Reloader {
        let (_, status) = watch::channel(Status { seq: 0, outcome: Outcome::Loaded });
        Reloader::spawn(watch, status, Gauge::default())
    }

    /// A watch of the files that panics ends the task `serve` supervises it in: logged by
    /// name, and `/readyz` false.
    #[test]
    fn a_panicking_watch_is_logged_and_makes_the_process_not_ready() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let log = crate::server::tests::logged(|| {
            runtime.block_on(async {
                let readiness = crate::server::lifecycle::Readiness::default();
                let mut tasks = crate::server::Tasks::default();
                let watch = reloader(async { panic!("deliberately") });
                tasks.spawn_until_shutdown("serving certificate reload", watch.supervise());
                crate::server::lifecycle::watch(&mut tasks, &readiness).await;
                assert_eq!(readiness.failed().as_deref(), Some("serving certificate reload"));
            });
        });
        assert!(log.contains("task panicked; not ready") && log.contains("deliberately"), "{log}");
    }

    #[tokio::test]
    async fn dropping_the_reloader_stops_its_watch() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let watch = reloader(async move {
            let _tx = tx;
            std::future::pending::<()>().await;
        });
        drop(watch);
        assert!(rx.await.is_err(), "the watch was dropped, and its sender with it");
    }
}
