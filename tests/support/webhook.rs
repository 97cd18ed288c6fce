//! The webhook under test, black box: the built binary started as a child process with its own
//! CA and serving certificate, and its MutatingWebhookConfiguration in the test API server.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::cluster::{Cluster, NAMESPACE_LABEL, free_port};
use super::pki::Ca;
use super::process::{self, Proc};

pub(crate) const BINARY: &str = env!("CARGO_BIN_EXE_ingress-status-guard");

/// A running `ingress-status-guard serve`.
pub(crate) struct Webhook {
    proc: Proc,
    ca_pem: String,
    port: u16,
    admin_port: u16,
}

impl Webhook {
    /// Starts `ingress-status-guard serve` with fresh TLS files, the given kubeconfig and the
    /// policy flags in `args`, and waits until its admin `/readyz` answers 200 (every Service
    /// cache synced). Panics with the webhook's log if it exits or never gets ready.
    ///
    /// The reconciler is off (`--reconcile=false`) unless `args` set `--reconcile`: a test's
    /// reconciler would otherwise patch the Ingresses of every other test in the shared API server.
    /// It has no webhook scope (`--webhook-configuration=`) unless `args` name one.
    pub(crate) async fn start(cluster: &Cluster, name: &str, kubeconfig: &Path, args: &[&str]) -> Webhook {
        Self::start_with_env(cluster, name, kubeconfig, args, &[]).await
    }

    /// As [`Webhook::start`], with extra environment variables.
    pub(crate) async fn start_with_env(
        cluster: &Cluster,
        name: &str,
        kubeconfig: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Webhook {
        Self::start_binary(cluster, name, Path::new(BINARY), kubeconfig, args, env).await
    }

    /// As [`Webhook::start_with_env`], with another build of the webhook (the benchmarks
    /// compare two in one run).
    pub(crate) async fn start_binary(
        cluster: &Cluster,
        name: &str,
        binary: &Path,
        kubeconfig: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Webhook {
        let dir = cluster.scratch_dir(&format!("webhook-{name}"));
        let ca = Ca::new(&format!("isg-e2e webhook CA ({name})"));
        let serving = ca.server("ingress-status-guard", &["127.0.0.1", "localhost"]);
        let cert = dir.join("tls.crt");
        let key = dir.join("tls.key");
        std::fs::write(&cert, &serving.cert_pem).expect("write webhook cert");
        std::fs::write(&key, &serving.key_pem).expect("write webhook key");

        let mut failures = Vec::new();
        for attempt in 1..=3 {
            let (port, admin_port) = (free_port(), free_port());
            let mut command = Command::new(binary);
            command.arg("serve");
            // Admission policy mode opens no webhook port, and refuses its flags.
            if !args.contains(&"--admission=policy") {
                command.arg(format!("--listen=127.0.0.1:{port}"));
                command.arg(format!("--tls-cert={}", cert.display())).arg(format!("--tls-key={}", key.display()));
            }
            command
                .arg(format!("--admin-listen=127.0.0.1:{admin_port}"))
                .arg("--probe-listen=127.0.0.1:0")
                .arg(format!("--kubeconfig={}", kubeconfig.display()))
                .arg("--log-format=json")
                .args(args)
                .envs(env.iter().copied())
                .env("RUST_LOG", "info");
            if !args.iter().any(|a| *a == "--reconcile" || a.starts_with("--reconcile=")) {
                command.arg("--reconcile=false");
            }
            // No webhook scope unless a test asks for one: the shared API server holds no
            // configuration by the default name, and with one unknown the reconciler patches
            // nothing.
            if !args.iter().any(|a| a.starts_with("--webhook-configuration")) {
                command.arg("--webhook-configuration=");
            }
            let log = dir.join(format!("webhook-{attempt}.log"));
            let _ = std::fs::write(&log, format!("$ {command:?}\n"));
            let proc = process::spawn("ingress-status-guard", command, &log)
                .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
            let mut webhook = Webhook { proc, ca_pem: ca.cert_pem.clone(), port, admin_port };
            match webhook.wait_ready(Duration::from_secs(30)).await {
                Ok(()) => return webhook,
                Err(e) => {
                    let tail = webhook.proc.log_tail(40);
                    let port_taken = tail.contains("in use");
                    failures.push(format!("attempt {attempt}: {e}\n{tail}"));
                    if !port_taken {
                        break;
                    }
                }
            }
        }
        panic!("webhook {name} did not get ready:\n{}", failures.join("\n"));
    }

    async fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let mut last = None;
        loop {
            if let Some(status) = self.proc.exited() {
                return Err(format!("exited with {status}"));
            }
            last = http_get_status(self.admin_port, "/readyz").or(last);
            if last == Some(200) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "GET /readyz on 127.0.0.1:{} did not answer 200 within {timeout:?} (last status: {last:?})",
                    self.admin_port
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The CA that signed the webhook's serving certificate.
    pub(crate) fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// `https://127.0.0.1:<port>/mutate`
    pub(crate) fn url(&self) -> String {
        format!("https://127.0.0.1:{}/mutate", self.port)
    }

    /// `127.0.0.1:<port>` of the admin listener (`/metrics`), for a scraper.
    #[allow(dead_code)] // only tests/cluster/dashboard.rs has Prometheus scrape it
    pub(crate) fn admin_addr(&self) -> String {
        format!("127.0.0.1:{}", self.admin_port)
    }

    /// The status of `GET /readyz` on the admin port, if it answers.
    #[allow(dead_code)] // not every test binary probes readiness
    pub(crate) fn readyz(&self) -> Option<u16> {
        http_get_status(self.admin_port, "/readyz")
    }

    /// The status and body of `GET /readyz` on the admin port, if it answers.
    #[allow(dead_code)] // not every test binary reads the readiness text
    pub(crate) fn readyz_text(&self) -> Option<(u16, String)> {
        http_get(self.admin_port, "/readyz")
    }

    /// The admin port's Prometheus text (`GET /metrics`).
    pub(crate) fn metrics(&self) -> String {
        http_get(self.admin_port, "/metrics").map(|(_, body)| body).unwrap_or_default()
    }

    /// The value of one sample line of `/metrics` (`name{labels}`), 0 when absent.
    pub(crate) fn metric(&self, sample: &str) -> f64 {
        let text = self.metrics();
        text.lines().find_map(|line| line.strip_prefix(sample).and_then(|rest| rest.trim().parse().ok())).unwrap_or(0.0)
    }

    /// Kills the webhook (SIGKILL): the API server's calls then fail to connect.
    pub(crate) fn stop(&mut self) {
        self.proc.kill();
    }

    /// The webhook's process id.
    #[allow(dead_code)] // used by benches/reconcile.rs
    pub(crate) fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// Stops the webhook as the kubelet does (SIGTERM) and waits up to `timeout` for it to exit.
    #[allow(dead_code)] // not every test binary uses it
    pub(crate) fn terminate(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        self.proc.terminate(timeout)
    }

    pub(crate) fn log(&self) -> String {
        self.proc.log()
    }

    pub(crate) fn log_path(&self) -> PathBuf {
        self.proc.log_path().to_path_buf()
    }

    pub(crate) fn log_tail(&self) -> String {
        self.proc.log_tail(40)
    }

    /// The lines of its log that say it was forbidden something: an RBAC denial, or any other
    /// 403. Not the line saying the API server refused a streaming list (1.23 forbids
    /// `resourceVersionMatch` on a watch, 1.27 to 1.33 `sendInitialEvents` unless WatchList is
    /// on): the guard lists in pages then, and needs no other right for it.
    pub(crate) fn forbidden_lines(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter(|line| line.to_lowercase().contains("forbidden"))
            .filter(|line| !line.contains("the API server refused the streaming list"))
            .map(str::to_owned)
            .collect()
    }

    /// Registers this webhook for Ingress status updates in exactly one namespace (selected by
    /// `NAMESPACE_LABEL`), so parallel tests never call each other's webhooks. Returns the
    /// MutatingWebhookConfiguration's name. The API server picks it up asynchronously: wait
    /// for a probe write to be mutated before relying on it.
    pub(crate) async fn register(&self, admin: &Client, namespace: &str, failure_policy: FailurePolicy) -> String {
        register_url(admin, namespace, &self.url(), &self.ca_pem, failure_policy).await
    }
}

/// The rule of the guard's own webhook for `resource`'s status writes (`ingresses`, in
/// `networking.k8s.io`; `gateways`, in `gateway.networking.k8s.io`). A configuration that
/// only scopes a reconciler (its webhook at an unreachable URL, `failurePolicy: Ignore`) needs
/// it too: the guard's scope counts only the webhooks the API server calls for its write.
pub(crate) fn status_rule(resource: &str) -> serde_json::Value {
    let group = if resource == "gateways" { "gateway.networking.k8s.io" } else { "networking.k8s.io" };
    json!({
        "apiGroups": [group],
        "apiVersions": ["v1"],
        "operations": ["UPDATE"],
        "resources": [format!("{resource}/status")],
        "scope": "Namespaced",
    })
}

/// Registers the webhook at `url` (serving a certificate signed by `ca_pem`) as
/// [`Webhook::register`] does: for Ingress status updates in namespace `namespace` only.
pub(crate) async fn register_url(
    admin: &Client,
    namespace: &str,
    url: &str,
    ca_pem: &str,
    failure_policy: FailurePolicy,
) -> String {
    let name = format!("isg-e2e-{namespace}");
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": name},
        "webhooks": [{
            "name": format!("{namespace}.e2e.ingress-status-guard.test"),
            "clientConfig": {"url": url, "caBundle": BASE64.encode(ca_pem)},
            "rules": [status_rule("ingresses")],
            "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: namespace}},
            "admissionReviewVersions": ["v1"],
            "sideEffects": "NoneOnDryRun",
            "matchPolicy": "Equivalent",
            "failurePolicy": failure_policy.as_str(),
            "timeoutSeconds": 5,
        }]
    }))
    .expect("MutatingWebhookConfiguration object");
    Api::<MutatingWebhookConfiguration>::all(admin.clone())
        .create(&PostParams::default(), &config)
        .await
        .unwrap_or_else(|e| panic!("create MutatingWebhookConfiguration {name}: {e}"));
    name
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum FailurePolicy {
    Fail,
    Ignore,
}

impl FailurePolicy {
    fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
    }
}

/// A plain HTTP/1.1 GET on 127.0.0.1, returning the status code.
fn http_get_status(port: u16, path: &str) -> Option<u16> {
    http_get(port, path).map(|(status, _)| status)
}

/// A plain HTTP/1.1 GET on 127.0.0.1, returning the status code and body.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let timeout = Duration::from_secs(2);
    let addr = ([127, 0, 0, 1], port).into();
    let mut stream = TcpStream::connect_timeout(&addr, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    // "HTTP/1.1 200 OK\r\n...\r\n\r\nbody"
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Some((status, body))
}
