//! One real control plane (etcd + kube-apiserver on 127.0.0.1) shared by the tests of a test
//! binary, started on first use with freshly generated certificates.
//!
//! Sharing: the processes live in a static and die with the test process (see `process`);
//! an `atexit` hook also stops them and deletes etcd's data when the harness exits normally.
//! Tests isolate themselves by namespace (`Cluster::namespace`). kube-rs clients are bound to
//! the tokio runtime that created them and every `#[tokio::test]` has its own, so the static
//! holds only paths and keys and each test makes its own clients.
//!
//! Files of a run (kubeconfigs, logs, audit log) stay under
//! `target/tmp/e2e/run-<pid>/shared/` (and `fresh-<n>/` for `Cluster::fresh`) until the next run,
//! for post-mortems.

use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};

use super::pki::{self, Ca};
use super::process::{self, Proc};

/// The identity the tests use to write Ingress statuses "behind the controller's back".
pub(crate) const ROGUE_USER: &str = "rogue-controller";
/// Group bound (cluster-wide) to get, list, watch Ingresses and update/patch their status.
pub(crate) const STATUS_WRITERS: &str = "isg-e2e:ingress-status-writers";
/// Label put on every test namespace; its value is the namespace's name, so a webhook's
/// `namespaceSelector` can match exactly one test's namespace.
pub(crate) const NAMESPACE_LABEL: &str = "e2e.ingress-status-guard.test/namespace";

const SERVICE_CIDRS: &str = "10.0.0.0/24,fd00:10::/108";

pub(crate) struct Cluster {
    /// `https://127.0.0.1:<port>`
    pub server: String,
    dir: PathBuf,
    ca: Ca,
    admin_kubeconfig: PathBuf,
    audit_log: PathBuf,
    procs: Mutex<Vec<Proc>>,
    counter: AtomicU32,
    /// How kube-apiserver was started (program and arguments), to start it again.
    #[allow(dead_code)] // only tests/cluster/outage.rs restarts the API server
    apiserver: Vec<String>,
}

static SHARED: tokio::sync::OnceCell<Result<Cluster, String>> = tokio::sync::OnceCell::const_new();

impl Cluster {
    /// The control plane of this test binary, started by the first caller.
    pub(crate) async fn shared() -> &'static Cluster {
        let started = SHARED.get_or_init(|| start(Setup::Shared, None)).await;
        match started {
            Ok(cluster) => cluster,
            Err(e) => panic!("the test control plane did not start: {e}"),
        }
    }

    /// A control plane of its own in which nothing has been created yet (no namespace, RBAC or
    /// CRD beyond the API server's own): what an install meets on a new cluster. Stopped, and
    /// its data deleted, when dropped.
    #[allow(dead_code)] // Only the install tests (deploy, chart) need one.
    pub(crate) async fn fresh() -> Cluster {
        start(Setup::Fresh, None).await.unwrap_or_else(|e| panic!("a fresh control plane did not start: {e}"))
    }

    /// A control plane of its own, prepared as the shared one is (the rogue writer's RBAC), for a
    /// test that would disturb the others: one that stops the API server, or creates what every
    /// namespace sees (a default IngressClass). Leaked so that a `TestEnv` can hold it as it holds
    /// the shared one; [`Cluster::stop`] (through `TestEnv`'s drop) ends its processes.
    #[allow(dead_code)] // Only tests/cluster needs one.
    pub(crate) async fn private() -> &'static Cluster {
        let cluster =
            start(Setup::Private, None).await.unwrap_or_else(|e| panic!("a private control plane did not start: {e}"));
        Box::leak(Box::new(cluster))
    }

    /// As [`Cluster::private`], with streaming lists off where the API server serves them (the
    /// WatchList feature gate, 1.27 on): every list of every object is in pages, as on 1.23 and
    /// 1.31, whatever version the suite runs on.
    #[allow(dead_code)] // Only tests/cluster needs one.
    pub(crate) async fn private_in_pages() -> &'static Cluster {
        let cluster = start(Setup::PrivateInPages, None)
            .await
            .unwrap_or_else(|e| panic!("a private control plane in pages did not start: {e}"));
        Box::leak(Box::new(cluster))
    }

    /// As [`Cluster::fresh`], of Kubernetes `version` (as `ISG_K8S_VERSION` takes it, e.g.
    /// `v1.31`) whatever the suite runs on: for what another version must refuse or allow.
    #[allow(dead_code)] // Only tests/cluster/admission_policy.rs needs another version.
    pub(crate) async fn fresh_version(version: &str) -> Cluster {
        start(Setup::Fresh, Some(version))
            .await
            .unwrap_or_else(|e| panic!("a fresh {version} control plane did not start: {e}"))
    }

    /// The CA that signed the API server's serving certificate (PEM file), for a client that
    /// takes a CA file and a bearer token instead of a kubeconfig (Traefik).
    #[allow(dead_code)] // Only tests/cluster/traefik.rs needs it.
    pub(crate) fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// The CA of the client certificate the API server presents to webhooks.
    pub(crate) fn webhook_client_ca(&self) -> PathBuf {
        self.dir.join("webhook-client-ca.crt")
    }

    /// Stops kube-apiserver (SIGKILL, as a crash would); etcd keeps its data.
    #[allow(dead_code)] // only tests/cluster/outage.rs stops the API server
    pub(crate) fn stop_apiserver(&self) {
        self.procs.lock().unwrap_or_else(std::sync::PoisonError::into_inner)[1].kill();
    }

    /// Starts kube-apiserver again, as it was started, and waits until it answers.
    #[allow(dead_code)] // only tests/cluster/outage.rs restarts the API server
    pub(crate) async fn restart_apiserver(&self) {
        let mut command = Command::new(&self.apiserver[0]);
        command.args(&self.apiserver[1..]);
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let log = self.dir.join(format!("kube-apiserver-restart-{n}.log"));
        let proc = process::spawn("kube-apiserver", command, &log).expect("restart kube-apiserver");
        self.procs.lock().unwrap_or_else(std::sync::PoisonError::into_inner)[1] = proc;
        let client = self.admin().await;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let req = hyper::Request::get("/readyz").body(Vec::new()).expect("request");
            match client.request_text(req).await {
                Ok(_) => return,
                Err(e) if Instant::now() > deadline => panic!("kube-apiserver did not come back: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    pub(crate) fn admin_kubeconfig(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// A client with `system:masters` rights.
    pub(crate) async fn admin(&self) -> Client {
        client_from(&self.admin_kubeconfig).await
    }

    /// Writes a kubeconfig that authenticates as `user` (in `group`, if any) with a client
    /// certificate signed by the cluster's CA.
    pub(crate) fn kubeconfig_for(&self, user: &str, group: Option<&str>) -> PathBuf {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let path =
            self.dir.join(format!("kubeconfig-{}-{n}.yaml", user.replace(|c: char| !c.is_ascii_alphanumeric(), "-")));
        let cert = self.ca.client(user, group);
        write_kubeconfig(&path, &self.server, &self.ca.cert_pem, user, &cert);
        path
    }

    /// A client acting as `user` (in `group`, if any).
    pub(crate) async fn client_for(&self, user: &str, group: Option<&str>) -> Client {
        client_from(&self.kubeconfig_for(user, group)).await
    }

    /// A client for the rogue status writer (user `rogue-controller`).
    pub(crate) async fn rogue(&self) -> Client {
        self.client_for(ROGUE_USER, Some(STATUS_WRITERS)).await
    }

    /// A fresh directory for one test's files.
    pub(crate) fn scratch_dir(&self, name: &str) -> PathBuf {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let dir = self.dir.join(format!("{name}-{n}"));
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        dir
    }

    /// Creates a namespace `<prefix>-<n>` carrying `NAMESPACE_LABEL=<its name>`.
    pub(crate) async fn namespace(&self, client: &Client, prefix: &str) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{n}");
        let ns: Namespace = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {NAMESPACE_LABEL: name}}
        }))
        .expect("namespace object");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
        name
    }

    /// Runs kubectl (`$KUBECTL` or `kubectl` on PATH) with the given kubeconfig.
    pub(crate) fn kubectl(&self, kubeconfig: &Path, args: &[&str]) -> KubectlOutput {
        let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
        let out = Command::new(&kubectl)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--cache-dir={}", self.dir.join("kubectl-cache").display()))
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("run {kubectl}: {e}"));
        KubectlOutput {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// The API server's audit events (stage ResponseComplete) for status writes on one Ingress,
    /// oldest first. The audit policy records those at level Request, so mutating webhooks'
    /// `mutation.webhook.admission.k8s.io/*` and `patch.webhook.admission.k8s.io/*`
    /// annotations are present: the API server's own record of what a webhook did.
    pub(crate) fn ingress_status_audit(&self, namespace: &str, name: &str) -> Vec<Value> {
        self.audit_events()
            .into_iter()
            .filter(|e| {
                let r = &e["objectRef"];
                r["resource"] == "ingresses"
                    && r["subresource"] == "status"
                    && r["namespace"] == namespace
                    && r["name"] == name
            })
            .collect()
    }

    /// Every audit event of stage ResponseComplete, oldest first: Ingress status writes (level
    /// Request), lists and watches of Ingresses and writes of admission policies and their
    /// bindings (level Metadata).
    pub(crate) fn audit_events(&self) -> Vec<Value> {
        let log = std::fs::read_to_string(&self.audit_log).unwrap_or_default();
        log.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|e| e["stage"] == "ResponseComplete")
            .collect()
    }

    /// The API server's audit log (Ingress status writes, level Request; Ingress lists and
    /// watches and admission policy writes, level Metadata).
    #[allow(dead_code)] // used by benches/reconcile.rs
    pub(crate) fn audit_log(&self) -> &Path {
        &self.audit_log
    }

    /// The tail of the API server's log, for failure messages.
    pub(crate) fn apiserver_log_tail(&self) -> String {
        let procs = self.procs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        procs.iter().map(|p| p.log_tail(30)).collect::<Vec<_>>().join("\n")
    }

    /// Kills etcd and kube-apiserver and deletes etcd's data.
    pub(crate) fn stop(&self) {
        if let Ok(mut procs) = self.procs.try_lock() {
            for p in procs.iter_mut().rev() {
                p.kill();
            }
        }
        let _ = std::fs::remove_dir_all(self.dir.join("etcd-data"));
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What `start` prepares once the API server answers.
#[derive(Clone, Copy, PartialEq)]
enum Setup {
    /// The shared control plane: also the rogue writer's RBAC, and stopped at exit.
    Shared,
    /// Nothing is created.
    Fresh,
    /// As `Shared`, for one test only; stopped by its `TestEnv`.
    Private,
    /// As `Private`, the WatchList feature gate off where there is one.
    PrivateInPages,
}

pub(crate) struct KubectlOutput {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// A kube-rs client from a kubeconfig file.
pub(crate) async fn client_from(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).unwrap_or_else(|e| panic!("read {}: {e}", kubeconfig.display()));
    let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("load {}: {e}", kubeconfig.display()));
    config.read_timeout = Some(Duration::from_secs(30));
    Client::try_from(config).expect("build kube client")
}

/// Picks a free TCP port on 127.0.0.1. Another process may take it before we bind it again,
/// so callers retry their start when the port turns out to be taken.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("bind an ephemeral port").port()
}

fn write_kubeconfig(path: &Path, server: &str, ca_pem: &str, user: &str, cert: &pki::Issued) {
    let text = format!(
        r#"apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: "{user}"
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: e2e
  context:
    cluster: e2e
    user: "{user}"
current-context: e2e
"#,
        ca = BASE64.encode(ca_pem),
        cert = BASE64.encode(&cert.cert_pem),
        key = BASE64.encode(&cert.key_pem),
    );
    write(path, &text);
}

fn write(path: &Path, contents: &str) {
    std::fs::write(path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// Runs tests/k8s/build.sh and returns the directory holding kube-apiserver and etcd.
/// The binaries of `version`, or of `ISG_K8S_VERSION` (else the default) when `None`.
fn binaries(version: Option<&str>) -> Result<PathBuf, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/k8s/build.sh");
    let mut command = Command::new("bash");
    if let Some(version) = version {
        command.env("ISG_K8S_VERSION", version);
    }
    let out = command
        .arg(&script)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("run {}: {e}", script.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = stdout.lines().last().unwrap_or("").trim();
    if !out.status.success() || dir.is_empty() {
        return Err(format!("{} failed ({})", script.display(), out.status));
    }
    Ok(PathBuf::from(dir))
}

/// `target/tmp/e2e/run-<pid>`, after deleting the directories of runs that are gone (once per
/// process: the shared and fresh control planes of one test binary live side by side in it).
fn run_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(clean_run_dir).clone()
}

fn clean_run_dir() -> PathBuf {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("e2e");
    if let Ok(entries) = std::fs::read_dir(&base) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("run-")).and_then(|p| p.parse::<i32>().ok())
            else {
                continue;
            };
            // SAFETY: kill with signal 0 only checks whether the process exists.
            #[allow(unsafe_code)] // kill(pid, 0) only probes whether the process exists.
            let alive = unsafe { libc::kill(pid, 0) } == 0;
            if !alive || pid == std::process::id() as i32 {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    let dir = base.join(format!("run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the run directory");
    dir
}

extern "C" fn stop_at_exit() {
    if let Some(Ok(cluster)) = SHARED.get() {
        cluster.stop();
    }
}

async fn start(setup: Setup, version: Option<&str>) -> Result<Cluster, String> {
    let bin = binaries(version)?;
    let dir = match setup {
        Setup::Shared => run_dir().join("shared"),
        Setup::Fresh | Setup::Private | Setup::PrivateInPages => {
            static FRESH: AtomicU32 = AtomicU32::new(0);
            run_dir().join(format!("fresh-{}", FRESH.fetch_add(1, Ordering::Relaxed)))
        }
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;

    let ca = Ca::new("isg-e2e cluster CA");
    let serving = ca.server("kube-apiserver", &["127.0.0.1", "localhost", "10.0.0.1"]);
    let (sa_key, sa_pub) = pki::signing_key_pair();
    let admin_cert = ca.client("isg-e2e-admin", Some("system:masters"));
    // The API server's client certificate for webhooks, from its own CA, named in an
    // AdmissionConfiguration as docs/deploy.md shows: a webhook started with
    // `--client-ca <dir>/webhook-client-ca.crt` accepts only the API server.
    let webhook_client_ca = Ca::new("isg-e2e webhook client CA");
    let webhook_client = webhook_client_ca.client("kube-apiserver-webhook-client", None);
    for (file, contents) in [
        ("ca.crt", &ca.cert_pem),
        ("apiserver.crt", &serving.cert_pem),
        ("apiserver.key", &serving.key_pem),
        ("sa.key", &sa_key),
        ("sa.pub", &sa_pub),
        ("webhook-client-ca.crt", &webhook_client_ca.cert_pem),
        ("webhook-client.crt", &webhook_client.cert_pem),
        ("webhook-client.key", &webhook_client.key_pem),
    ] {
        write(&dir.join(file), contents);
    }
    // `*`: every webhook gets the certificate; those without --client-ca never ask for it.
    write(
        &dir.join("webhook-client-kubeconfig.yaml"),
        &format!(
            "apiVersion: v1\nkind: Config\nusers:\n- name: \"*\"\n  user:\n    client-certificate: {}\n    client-key: {}\n",
            dir.join("webhook-client.crt").display(),
            dir.join("webhook-client.key").display()
        ),
    );
    write(
        &dir.join("admission-config.yaml"),
        &format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: MutatingAdmissionWebhook\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: {}\n",
            dir.join("webhook-client-kubeconfig.yaml").display()
        ),
    );
    // Ingress status writes are audited, with their request bodies and annotations; lists and
    // watches of Ingresses by who and when only (tests/cluster/churn.rs: how often the reconciler
    // lists them all); writes of admission policies and their bindings by who and when only
    // (tests/cluster/leader.rs: a deposed leader writes none).
    write(
        &dir.join("audit-policy.yaml"),
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n\
         - level: Request\n  resources:\n  - group: networking.k8s.io\n    resources: [ingresses/status]\n\
         - level: Metadata\n  verbs: [list, watch]\n  resources:\n  - group: networking.k8s.io\n    resources: [ingresses]\n\
         - level: Metadata\n  verbs: [create, update, patch, delete]\n  resources:\n  - group: admissionregistration.k8s.io\n\
         \x20   resources: [mutatingadmissionpolicies, mutatingadmissionpolicybindings, validatingadmissionpolicies, validatingadmissionpolicybindings]\n\
         - level: None\n",
    );
    let audit_log = dir.join("audit.log");
    let admin_kubeconfig = dir.join("kubeconfig-admin.yaml");

    let extra = match setup {
        Setup::PrivateInPages if has_watch_list(&bin)? => vec!["--feature-gates=WatchList=false".to_owned()],
        _ => vec![],
    };
    let mut last_error = String::new();
    for attempt in 1..=3 {
        match start_processes(&bin, &dir, &ca, &admin_cert, &admin_kubeconfig, &audit_log, &extra).await {
            Ok((server, procs, apiserver)) => {
                let cluster = Cluster {
                    server,
                    dir,
                    ca,
                    admin_kubeconfig,
                    audit_log,
                    procs: Mutex::new(procs),
                    counter: AtomicU32::new(0),
                    apiserver,
                };
                if setup == Setup::Shared {
                    // SAFETY: registering a plain extern "C" function has no preconditions.
                    #[allow(unsafe_code)] // registers a plain `extern "C" fn()`; nothing else is touched.
                    unsafe {
                        libc::atexit(stop_at_exit)
                    };
                }
                prepare(&cluster, setup).await?;
                return Ok(cluster);
            }
            Err(e) => last_error = format!("attempt {attempt}: {e}"),
        }
    }
    Err(last_error)
}

/// Whether the kube-apiserver in `bin` has the WatchList feature gate (1.27 on; an older one
/// refuses to start with a gate it does not know), from its version.
fn has_watch_list(bin: &Path) -> Result<bool, String> {
    let out = Command::new(bin.join("kube-apiserver"))
        .arg("--version")
        .output()
        .map_err(|e| format!("kube-apiserver --version: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "Kubernetes v1.37.2"
    let minor = text.split_whitespace().last().and_then(|v| v.split('.').nth(1)).and_then(|m| m.parse::<u32>().ok());
    minor.map(|minor| minor >= 27).ok_or_else(|| format!("kube-apiserver --version: {text:?}"))
}

async fn start_processes(
    bin: &Path,
    dir: &Path,
    ca: &Ca,
    admin_cert: &pki::Issued,
    admin_kubeconfig: &Path,
    audit_log: &Path,
    extra: &[String],
) -> Result<(String, Vec<Proc>, Vec<String>), String> {
    let etcd_port = free_port();
    let api_port = free_port();
    let etcd_url = format!("http://127.0.0.1:{etcd_port}");
    let data = dir.join("etcd-data");
    let _ = std::fs::remove_dir_all(&data);

    let mut etcd = Command::new(bin.join("etcd"));
    etcd.args([
        &format!("--data-dir={}", data.display()),
        &format!("--listen-client-urls={etcd_url}"),
        &format!("--advertise-client-urls={etcd_url}"),
        // Port 0: no fixed peer port to collide with; a single member never dials its peers
        // (as controller-runtime's envtest does).
        "--listen-peer-urls=http://127.0.0.1:0",
        "--unsafe-no-fsync=true",
        "--log-level=warn",
    ]);
    let etcd = process::spawn("etcd", etcd, &dir.join("etcd.log")).map_err(|e| format!("start etcd: {e}"))?;

    let file = |name: &str| dir.join(name).display().to_string();
    let apiserver_args: Vec<String> = vec![
        format!("--etcd-servers={etcd_url}"),
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        format!("--secure-port={api_port}"),
        format!("--cert-dir={}", file("apiserver-certs")),
        format!("--tls-cert-file={}", file("apiserver.crt")),
        format!("--tls-private-key-file={}", file("apiserver.key")),
        format!("--client-ca-file={}", file("ca.crt")),
        format!("--service-account-key-file={}", file("sa.pub")),
        format!("--service-account-signing-key-file={}", file("sa.key")),
        "--service-account-issuer=https://kubernetes.default.svc".into(),
        format!("--service-cluster-ip-range={SERVICE_CIDRS}"),
        "--authorization-mode=RBAC".into(),
        // No endpoints for the `kubernetes` Service: 127.0.0.1 is not a valid endpoint.
        "--endpoint-reconciler-type=none".into(),
        format!("--audit-policy-file={}", file("audit-policy.yaml")),
        format!("--audit-log-path={}", audit_log.display()),
        // Never rotated: the tests and benchmarks read one file, and the API server's default
        // (100 MB) is reached by a benchmark's 200,000 status writes.
        "--audit-log-maxsize=1000000".into(),
        format!("--admission-control-config-file={}", file("admission-config.yaml")),
        "--profiling=false".into(),
    ];
    let apiserver_args: Vec<String> = apiserver_args.into_iter().chain(extra.iter().cloned()).collect();
    let mut apiserver = Command::new(bin.join("kube-apiserver"));
    apiserver.args(&apiserver_args);
    let apiserver_command =
        std::iter::once(bin.join("kube-apiserver").display().to_string()).chain(apiserver_args).collect();
    let apiserver = process::spawn("kube-apiserver", apiserver, &dir.join("kube-apiserver.log"))
        .map_err(|e| format!("start kube-apiserver: {e}"))?;
    let mut procs = vec![etcd, apiserver];

    let server = format!("https://127.0.0.1:{api_port}");
    write_kubeconfig(admin_kubeconfig, &server, &ca.cert_pem, "isg-e2e-admin", admin_cert);
    let client = client_from(admin_kubeconfig).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        for p in &mut procs {
            if let Some(status) = p.exited() {
                return Err(format!("exited with {status}\n{}", p.log_tail(40)));
            }
        }
        let req = hyper::Request::get("/readyz?verbose").body(Vec::new()).expect("request");
        let last = match client.request_text(req).await {
            Ok(_) => return Ok((server, procs, apiserver_command)),
            Err(e) => e.to_string(),
        };
        if Instant::now() > deadline {
            let mut msg = format!("kube-apiserver not ready after 120s: {last}\n");
            for p in &procs {
                let _ = writeln!(msg, "{}", p.log_tail(40));
            }
            return Err(msg);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// What every test relies on once the API server answers: Services get cluster IPs (with the
/// ServiceCIDR allocator, only once the default ServiceCIDR is ready; probed with a dry-run
/// create so any API server version works, and so nothing is created), and for the shared
/// control plane the rogue writer's RBAC.
async fn prepare(cluster: &Cluster, setup: Setup) -> Result<(), String> {
    let client = cluster.admin().await;
    let services = Api::<Service>::namespaced(client.clone(), "default");
    let probe: Service = serde_json::from_value(json!({
        "metadata": {"name": "isg-e2e-allocation-probe"},
        "spec": {"type": "ClusterIP", "ipFamilyPolicy": "RequireDualStack", "ports": [{"port": 80}]}
    }))
    .map_err(|e| e.to_string())?;
    let dry_run = PostParams { dry_run: true, ..PostParams::default() };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match services.create(&dry_run, &probe).await {
            Ok(_) => break,
            Err(e) if Instant::now() > deadline => {
                return Err(format!("Services still get no cluster IPs: {e}\n{}", cluster.apiserver_log_tail()));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    if setup == Setup::Fresh {
        return Ok(());
    }

    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": STATUS_WRITERS},
        "rules": [
            {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses/status"],
             "verbs": ["get", "update", "patch"]},
        ]
    }))
    .map_err(|e| e.to_string())?;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": STATUS_WRITERS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": STATUS_WRITERS},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                      "name": STATUS_WRITERS}]
    }))
    .map_err(|e| e.to_string())?;
    let pp = PostParams::default();
    Api::<ClusterRole>::all(client.clone()).create(&pp, &role).await.map_err(|e| format!("create ClusterRole: {e}"))?;
    Api::<ClusterRoleBinding>::all(client)
        .create(&pp, &binding)
        .await
        .map_err(|e| format!("create ClusterRoleBinding: {e}"))?;
    Ok(())
}
