//! The command line: flags parsed with clap, validated into typed settings once, then handed to
//! `serve` or `resolve`.

mod logging;

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, sync::Arc, time::Duration};

use axum_server::tls_rustls::RustlsConfig;

use clap::{Args, Parser, Subcommand, ValueEnum};
use k8s_openapi::api::core::v1::Service;

use crate::{
    address::{self, Address, AddressError},
    audit::events,
    check,
    client::{self, ClientError},
    metrics::Metrics,
    policy::store::PolicyStore,
    policy::{
        self, ConfigError, Mode, OnUnresolved, PodsSpec, Policies, PolicySpec, ServiceRef, SourceList, SpecError,
    },
    reconcile,
    reconcile::leader,
    reload,
    server::lifecycle::Tasks,
    server::{self, AppState, Listeners},
    sources::SourceCache,
    sources::watches::ServiceWatches,
    sources::{nodeip, service},
    tls::certs,
    tls::scratch,
    tls::{self, TlsError, TlsFile},
};

#[derive(Parser, Debug)]
#[command(
    name = "ingress-status-guard",
    version = crate::metrics::VERSION_LINE,
    about = "Mutating admission webhook that enforces the canonical status.loadBalancer.ingress of Ingresses"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log format: plain text for people, JSON lines for log pipelines.
    #[arg(long, global = true, env = "ISG_LOG_FORMAT", value_enum, default_value_t = LogFormat::Plain)]
    pub log_format: LogFormat,
    /// Log filter, e.g. `info` or `ingress_status_guard=debug,kube=warn`. Overrides RUST_LOG.
    #[arg(long, global = true, env = "ISG_LOG_LEVEL")]
    pub log_level: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    Plain,
    Json,
}

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant, reason = "parsed once per process")]
pub(crate) enum Command {
    /// Run the webhook (HTTPS) and its admin server (plain HTTP).
    Serve(Box<ServeArgs>),
    /// Print the canonical addresses for a source as JSON, without a cluster.
    Resolve(ResolveArgs),
    /// Make serving certificates: into files (`generate`) or, in a cluster, into the serving
    /// Secret and the webhook configuration's caBundle (`bootstrap`).
    Certs(certs::CertsArgs),
    /// Report every governed Ingress whose stored status is off canonical (exit 1), read-only.
    Check {
        #[command(flatten)]
        args: check::CheckArgs,
        #[command(flatten)]
        policy: PolicyInput,
    },
    /// Explain how one Ingress (NAMESPACE/NAME) is governed and what the webhook would do.
    Explain {
        #[command(flatten)]
        args: check::ExplainArgs,
        #[command(flatten)]
        policy: PolicyInput,
    },
}

#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    /// Address of the HTTPS webhook listener.
    #[arg(long, env = "ISG_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Address of the plain-HTTP admin listener (/livez, /readyz, /metrics).
    #[arg(long, env = "ISG_ADMIN_LISTEN", default_value = "0.0.0.0:8080")]
    pub admin_listen: SocketAddr,
    /// Serving certificate chain (PEM). Without it, an ephemeral self-signed certificate is used.
    #[arg(long, env = "ISG_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key of the serving certificate (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "ISG_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require client certificates signed by a CA in this PEM file (mTLS with the API server).
    /// Reloaded, like --tls-cert and --tls-key, when it changes.
    #[arg(long, env = "ISG_CLIENT_CA", requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,
    /// Largest AdmissionReview body accepted, in bytes (the API server caps objects at 3 MiB).
    #[arg(long, env = "ISG_MAX_BODY_BYTES", default_value_t = 3 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Longest wait, in seconds, for in-flight reviews after SIGTERM.
    #[arg(long, env = "ISG_DRAIN_SECONDS", default_value_t = 10)]
    pub drain_seconds: u64,
    /// Seconds to keep serving after SIGTERM while already reporting not ready, so endpoints
    /// drop the pod before its listener closes (set it in a Deployment; 0 for local runs).
    #[arg(long, env = "ISG_SHUTDOWN_DELAY_SECONDS", default_value_t = 0)]
    pub shutdown_delay_seconds: u64,
    /// kubeconfig for watching publish Services; default: in-cluster config, then KUBECONFIG.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Distinct `writer` label values in metrics; further writers are counted as `other`
    /// (and in `writer_labels_folded_total`), so callers cannot grow /metrics without bound.
    #[arg(long, env = "ISG_MAX_WRITER_LABELS", default_value_t = crate::metrics::DEFAULT_MAX_WRITERS)]
    pub max_writer_labels: usize,
    /// Do not write Kubernetes Events about rogue writes (logs, metrics, warnings and audit
    /// annotations still report them).
    #[arg(long, env = "ISG_NO_EVENTS")]
    pub no_events: bool,
    #[command(flatten)]
    pub policy: PolicyInput,
    #[command(flatten)]
    pub reconcile: reconcile::Flags,
    #[command(flatten)]
    pub limits: crate::server::limits::LimitFlags,
}

/// Where the policies come from: a file, or the flags of one policy. `serve`, `check` and
/// `explain` all take it, so they read the same policies from the same flags.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct PolicyInput {
    /// YAML file with several policies (see README); replaces the policy flags below.
    #[arg(long, env = "ISG_CONFIG", conflicts_with_all = ["publish_service", "publish_status_address", "publish_pods_namespace", "publish_pods_selector", "report_node_internal_ip_address", "ingress_class", "controller_class", "watch_ingress_without_class", "mode", "keep_ports", "on_unresolved"])]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub flags: FlagPolicy,
}

impl PolicyInput {
    /// The validated policies; errors name the file's field or the flag.
    pub(crate) fn policies(&self) -> Result<Policies, CliError> {
        match &self.config {
            Some(path) => Ok(policy::load_file(path)?),
            None => self.flags.policies(),
        }
    }
}

/// The flags that describe one policy (named `default`), named as in ingress-nginx.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct FlagPolicy {
    /// Publish the addresses of this Service (NAMESPACE/NAME), as ingress-nginx does.
    #[arg(long, env = "ISG_PUBLISH_SERVICE", conflicts_with = "publish_status_address")]
    pub publish_service: Option<ServiceRef>,
    /// Publish these addresses (comma-separated IPs and hostnames) instead of a Service's.
    #[arg(long, env = "ISG_PUBLISH_STATUS_ADDRESS", conflicts_with = "publish_pods_namespace")]
    pub publish_status_address: Option<String>,
    /// Publish the IPs of the nodes that run the Running and Ready Pods of this namespace that
    /// match --publish-pods-selector (ingress-nginx without a publish Service).
    #[arg(
        long,
        env = "ISG_PUBLISH_PODS_NAMESPACE",
        requires = "publish_pods_selector",
        conflicts_with = "publish_service"
    )]
    pub publish_pods_namespace: Option<String>,
    /// Label selector (kubectl syntax) of the controller Pods for --publish-pods-namespace.
    #[arg(long, env = "ISG_PUBLISH_PODS_SELECTOR", requires = "publish_pods_namespace")]
    pub publish_pods_selector: Option<String>,
    /// Publish the nodes' InternalIP addresses even where they have ExternalIPs.
    #[arg(long, env = "ISG_REPORT_NODE_INTERNAL_IP_ADDRESS", requires = "publish_pods_namespace")]
    pub report_node_internal_ip_address: bool,
    /// Govern Ingresses of this class (spec.ingressClassName or the kubernetes.io/ingress.class
    /// annotation). Repeatable. Without it, every Ingress is governed.
    #[arg(long, env = "ISG_INGRESS_CLASS", value_delimiter = ',')]
    pub ingress_class: Vec<String>,
    /// Govern Ingresses whose IngressClass has this spec.controller (e.g. k8s.io/ingress-nginx).
    /// Repeatable; with --ingress-class, either match is enough.
    #[arg(long, env = "ISG_CONTROLLER_CLASS", value_delimiter = ',')]
    pub controller_class: Vec<String>,
    /// Also govern Ingresses that name no class.
    #[arg(long, env = "ISG_WATCH_INGRESS_WITHOUT_CLASS")]
    pub watch_ingress_without_class: bool,
    /// What to do with a write that differs from the canonical addresses.
    #[arg(long, env = "ISG_MODE", value_enum, default_value_t = Mode::Enforce)]
    pub mode: Mode,
    /// Keep the `ports` of load-balancer entries (as Contour and Traefik do); dropped by default.
    #[arg(long, env = "ISG_KEEP_PORTS")]
    pub keep_ports: bool,
    /// What to do when the publish Service is missing or has no address yet.
    #[arg(long, env = "ISG_ON_UNRESOLVED", value_enum, default_value_t = OnUnresolved::Allow)]
    pub on_unresolved: OnUnresolved,
}

#[derive(Args, Debug)]
pub(crate) struct ResolveArgs {
    /// Addresses as for `serve --publish-status-address`.
    #[arg(long, conflicts_with = "file", required_unless_present = "file")]
    pub publish_status_address: Option<String>,
    /// A Service manifest, YAML or JSON (`-` reads stdin); with --publish-pods-namespace, a List
    /// or multi-document YAML of Pods and Nodes.
    #[arg(short = 'f', long)]
    pub file: Option<PathBuf>,
    /// Resolve the node-IP source over the Pods and Nodes of -f: the Pods' namespace.
    #[arg(long, requires_all = ["publish_pods_selector", "file"])]
    pub publish_pods_namespace: Option<String>,
    /// The controller Pods' label selector (kubectl syntax).
    #[arg(long, requires = "publish_pods_namespace")]
    pub publish_pods_selector: Option<String>,
    /// Publish the nodes' InternalIP addresses even where they have ExternalIPs.
    #[arg(long, requires = "publish_pods_namespace")]
    pub report_node_internal_ip_address: bool,
    /// Keep the `ports` of load-balancer entries.
    #[arg(long)]
    pub keep_ports: bool,
}

/// Everything that can stop a command, each saying what to fix.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(
        "no address source: pass --publish-service NAMESPACE/NAME, --publish-status-address LIST, --publish-pods-namespace NS with --publish-pods-selector SELECTOR, or --config FILE"
    )]
    NoSource,
    #[error("--publish-status-address {value:?}: {source}")]
    StaticFlag { value: String, source: AddressError },
    #[error("--ingress-class: {0}")]
    ClassFlag(SpecError),
    #[error("--controller-class: {0}")]
    ControllerFlag(SpecError),
    #[error("--publish-pods-namespace: {0}")]
    PodsNamespaceFlag(SpecError),
    #[error("--publish-pods-selector {value:?}: {source}")]
    PodsSelectorFlag { value: String, source: SpecError },
    #[error("{}", .0.message(tls_flag))]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Cert(#[from] certs::CertError),
    #[error(
        "cannot build a Kubernetes client, needed to watch {needed_for}: {source}; pass --kubeconfig or run in a cluster"
    )]
    Client { needed_for: String, source: ClientError },
    #[error("{path}: {message}")]
    Manifest { path: String, message: String },
    #[error("{flag} {addr}: cannot listen: {source}")]
    Bind { flag: String, addr: SocketAddr, source: std::io::Error },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Flag(String),
}

/// The flag that names each TLS file.
fn tls_flag(file: TlsFile) -> &'static str {
    match file {
        TlsFile::Cert => "--tls-cert",
        TlsFile::Key => "--tls-key",
        TlsFile::ClientCa => "--client-ca",
    }
}

impl From<&FlagPolicy> for PolicySpec {
    fn from(flags: &FlagPolicy) -> Self {
        PolicySpec {
            name: "default".to_owned(),
            ingress_classes: flags.ingress_class.clone(),
            controller_classes: flags.controller_class.clone(),
            watch_ingress_without_class: flags.watch_ingress_without_class,
            publish_service: flags.publish_service.as_ref().map(ServiceRef::to_string),
            publish_status_address: flags.publish_status_address.clone(),
            publish_pods: flags.publish_pods_namespace.as_ref().map(|namespace| PodsSpec {
                namespace: namespace.clone(),
                selector: flags.publish_pods_selector.clone().unwrap_or_default(),
            }),
            report_node_internal_ip: flags.report_node_internal_ip_address,
            mode: flags.mode,
            keep_ports: flags.keep_ports,
            on_unresolved: flags.on_unresolved,
            ..PolicySpec::default()
        }
    }
}

impl FlagPolicy {
    /// The policy set of just the policy these flags describe; errors name the flag.
    pub(crate) fn policies(&self) -> Result<Policies, CliError> {
        let value = || self.publish_status_address.clone().unwrap_or_default();
        PolicySpec::from(self).into_policies().map_err(|e| match e {
            SpecError::NoSource => CliError::NoSource,
            SpecError::Static(source) => CliError::StaticFlag { value: value(), source },
            e @ SpecError::EmptyController(_) => CliError::ControllerFlag(e),
            e @ SpecError::PodsNamespace(_) => CliError::PodsNamespaceFlag(e),
            e @ (SpecError::PodsSelector(_) | SpecError::EmptyPodsSelector) => {
                CliError::PodsSelectorFlag { value: self.publish_pods_selector.clone().unwrap_or_default(), source: e }
            }
            // clap already refuses both sources at once and parses --publish-service.
            other => CliError::ClassFlag(other),
        })
    }
}

impl ServeArgs {
    /// The TLS files to serve with and watch, if given.
    fn cert_files(&self) -> Option<reload::CertFiles> {
        let (cert, key) = (self.tls_cert.clone()?, self.tls_key.clone()?);
        Some(reload::CertFiles { cert, key, client_ca: self.client_ca.clone() })
    }

    /// The ephemeral configuration used without --tls-cert/--tls-key, and the private directory
    /// holding its CA certificate (removed when dropped).
    fn tls(&self) -> Result<(rustls::ServerConfig, scratch::CaDir), CliError> {
        let names = ["localhost", "127.0.0.1", "::1"].map(String::from);
        let bundle = certs::generate("ingress-status-guard ephemeral CA", &names)?;
        let dir = scratch::CaDir::create(&std::env::temp_dir(), &bundle.ca_pem)?;
        tracing::warn!(ca_bundle = %dir.ca().display(), "no --tls-cert/--tls-key: serving an ephemeral self-signed certificate for localhost; trust it with curl --cacert");
        let config =
            tls::server_config(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes(), "<ephemeral>", "<ephemeral>")?;
        Ok((config, dir))
    }
}

/// Runs `serve` until shutdown.
pub(crate) async fn serve(args: ServeArgs) -> Result<(), CliError> {
    let (reconcile_settings, leader_settings) = args.reconcile.settings().map_err(CliError::Flag)?;
    let policies = args.policy.policies()?;
    for p in policies.iter() {
        let classes = if p.scope.classes.is_empty() { "*".to_owned() } else { p.scope.classes.join(",") };
        let namespaces = p.namespace_selector.as_ref().map_or_else(|| "*".to_owned(), ToString::to_string);
        tracing::info!(policy = %p.name, classes = %classes, controllers = %p.scope.controllers.join(","), without_class = p.scope.without_class, namespaces = %namespaces, sources = %SourceList(&p.sources), mode = %p.mode, "policy loaded");
    }
    for (first, second) in policies.possible_overlaps() {
        tracing::warn!(
            first,
            second,
            "policies govern a common class and their namespaceSelectors may both match a Namespace; such Ingresses are governed by the first and counted in policy_overlaps_total"
        );
    }
    // `_ca_dir` lives until `serve` returns, then removes the ephemeral CA's directory.
    let (tls, reloader, _ca_dir) = match args.cert_files() {
        Some(files) => reload::start(files, reload::POLL_INTERVAL).await.map(|(tls, r)| (tls, Some(r), None))?,
        None => {
            let (config, dir) = args.tls()?;
            (RustlsConfig::from_config(Arc::new(config)), None, Some(dir))
        }
    };
    let cache = SourceCache::new(&policies);
    // A Service or node-IP source, IngressClasses and Namespaces need a cluster; Events, the
    // reconciler and reloads that add a Service use one when there is one to use.
    let needed_for = cluster_needs(&policies);
    let optional = !args.no_events || args.reconcile.reconcile || args.policy.config.is_some();
    let client = if !needed_for.is_empty() {
        let connected = client::connect(args.kubeconfig.as_deref()).await;
        Some(connected.map_err(|source| CliError::Client { needed_for: needed_for.join(", "), source })?)
    } else if !optional {
        None
    } else {
        client::connect(args.kubeconfig.as_deref())
            .await
            .inspect_err(|e| tracing::info!(reason = %e, "no Kubernetes client: Events and the reconciler are off"))
            .ok()
    };
    // An API server older than Ingress status ports drops them; a policy that keeps them
    // would then patch every write in a loop. Checked once; reloads apply the same rule.
    let drops_ports = match &client {
        Some(client) if args.policy.config.is_some() || policies.iter().any(|p| p.keep_ports) => {
            server_drops_ports(client).await
        }
        _ => false,
    };
    let policies = if drops_ports { policies.without_ports() } else { policies };
    let mut tasks = Tasks::default();
    let watches = client.as_ref().map(|c| ServiceWatches::start(c.clone(), cache.clone(), &policies));
    let store = PolicyStore::new(policies);
    let mut metrics = Metrics::with_max_writers(args.max_writer_labels);
    if let Some(reloader) = &reloader {
        metrics.register_tls_cert_expiry(reloader.cert_expiry());
    }
    let metrics = Arc::new(metrics);
    // One task owns the Service watches (they start and stop with the policies) and, with
    // --config, the reload of the policy file.
    let token = tasks.shutdown_token();
    match args.policy.config.clone() {
        Some(path) => {
            let reload = reload::policy::Reload {
                path,
                poll: reload::policy::POLL_INTERVAL,
                store: store.clone(),
                watches,
                metrics: metrics.clone(),
                pod_events: client.clone().and_then(reload::policy::PodEvents::from_env),
                drops_ports,
            };
            tasks.spawn("policy reload and publish Service watches", async move {
                tokio::select! {
                    () = reload.run() => {}
                    () = token.cancelled() => {}
                }
            });
        }
        None => tasks.spawn("publish Service watches", async move {
            token.cancelled().await;
            drop(watches);
        }),
    }
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    match (&client, args.reconcile.reconcile) {
        (Some(client), true) => {
            tracing::info!(qps = reconcile_settings.qps, lease = %format!("{}/{}", leader_settings.namespace, leader_settings.lease_name), identity = %leader_settings.identity, "reconciler on: the leader patches stored statuses that are off canonical");
            let leadership = leader::start(client.clone(), leader_settings, metrics.clone());
            let running = reconcile::start(
                client.clone(),
                store.clone(),
                cache.clone(),
                cache.subscribe(),
                leadership.subscribe(),
                metrics.clone(),
                reconcile_settings,
            );
            // At SIGTERM (not only when tasks stop, after the drain): stop patching, then hand
            // the Lease over at once.
            let token = tasks.shutdown_token();
            tasks.spawn("reconciler and leader election", async move {
                tokio::select! {
                    _ = stop_rx => {}
                    () = token.cancelled() => {}
                }
                drop(running);
                leadership.release().await;
                // Ending before the other tasks stop would read as a failure.
                token.cancelled().await;
            });
        }
        _ => tracing::info!("reconciler off (--reconcile=false or no Kubernetes client)"),
    }
    // Findings are logged and turned into Events by one background task, off the request path.
    let instance = std::env::var("POD_NAME").ok().or_else(|| std::env::var("HOSTNAME").ok());
    let events_client = client.clone().filter(|_| !args.no_events);
    let (events, reporter) = events::start(events_client, instance, metrics.clone(), tasks.shutdown_token());
    tasks.spawn("finding reporter (log, Kubernetes Events)", reporter);
    let events = Some(events);
    let state = AppState::with(store, cache, metrics, events);
    let bind = |addr: SocketAddr, flag: &str| {
        std::net::TcpListener::bind(addr).map_err(|e| CliError::Bind { flag: flag.to_owned(), addr, source: e })
    };
    let listeners = Listeners {
        webhook: bind(args.listen, "--listen")?,
        admin: bind(args.admin_listen, "--admin-listen")?,
        tls,
        limits: crate::server::limits::Limits::new(&args.limits, args.max_body_bytes),
        drain: Duration::from_secs(args.drain_seconds),
    };
    let delay = Duration::from_secs(args.shutdown_delay_seconds);
    let shutdown_state = state.clone();
    let first_signal = server::shutdown_signal();
    let shutdown = async move {
        first_signal.await;
        let _ = stop_tx.send(());
        if !delay.is_zero() {
            let second_signal = server::shutdown_signal();
            shutdown_state.readiness.drain();
            tracing::info!(
                delay_seconds = delay.as_secs(),
                "SIGTERM: not ready; serving on until endpoints drop this pod (a second SIGTERM ends the delay)"
            );
            // An operator who sends SIGTERM again (or Ctrl-C twice) wants out now.
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = second_signal => tracing::info!("second signal: shutdown delay cut short"),
            }
        }
    };
    Ok(server::serve(state, listeners, tasks, shutdown).await?)
}

/// What the policies need a cluster for, in the words of the flags and fields that ask for it;
/// empty when they need none.
fn cluster_needs(policies: &Policies) -> Vec<&'static str> {
    let mut needs = Vec::new();
    if !policies.services().is_empty() {
        needs.push("the publish Service (--publish-service)");
    }
    if !policies.pod_watches().is_empty() {
        needs.push("the controller Pods and Nodes (--publish-pods-namespace/--publish-pods-selector)");
    }
    if policies.need_ingress_classes() {
        needs.push(
            "IngressClasses (--controller-class, or --ingress-class without --watch-ingress-without-class, \
             which also governs class-less Ingresses when the default IngressClass is one of the classes)",
        );
    }
    if policies.need_namespaces() {
        needs.push("Namespaces (namespaceSelector)");
    }
    needs
}

/// Whether the API server is older than the Ingress `ports` field (it would drop them from
/// every write, which would then never be canonical); logged when it is.
async fn server_drops_ports(client: &kube::Client) -> bool {
    match client::server_stores_ingress_ports(client).await {
        Some((false, version)) => {
            tracing::warn!(server_version = %version, "the API server predates status.loadBalancer.ingress[].ports (Kubernetes 1.20) and drops them; keepPorts is ignored so that writes are not patched in a loop");
            true
        }
        Some((true, _)) => false,
        None => {
            tracing::warn!("cannot read the API server's version; keepPorts applies as configured");
            false
        }
    }
}

/// Runs `resolve`: the canonical addresses as a JSON array.
pub(crate) fn resolve(args: &ResolveArgs) -> Result<String, CliError> {
    let addresses: Vec<Address> = match (&args.publish_status_address, &args.file) {
        (Some(list), _) => {
            address::parse_static_list(list).map_err(|source| CliError::StaticFlag { value: list.clone(), source })?
        }
        (None, Some(path)) => {
            let shown = if path.as_os_str() == "-" { "<stdin>".to_owned() } else { path.display().to_string() };
            let text = if path.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())?
            } else {
                std::fs::read_to_string(path)
                    .map_err(|e| CliError::Manifest { path: shown.clone(), message: e.to_string() })?
            };
            let manifest = |message: String| CliError::Manifest { path: shown.clone(), message };
            if let Some(namespace) = &args.publish_pods_namespace {
                let flags = FlagPolicy {
                    publish_pods_namespace: Some(namespace.clone()),
                    publish_pods_selector: args.publish_pods_selector.clone(),
                    report_node_internal_ip_address: args.report_node_internal_ip_address,
                    ..FlagPolicy::default()
                };
                let policies = flags.policies()?;
                let Some(policy::Source::Pods(pods)) = policies.iter().next().and_then(|p| p.sources.first()) else {
                    unreachable!("the pods flags build one node-IP source")
                };
                return node_ips(&text, pods).map_err(manifest);
            }
            let value: serde_json::Value =
                serde_norway::from_str(&text).map_err(|e| manifest(format!("not YAML or JSON: {e}")))?;
            match value.get("kind").and_then(|k| k.as_str()) {
                Some("Service") | None => {}
                Some(other) => return Err(manifest(format!("kind is {other:?}; expected a Service"))),
            }
            let svc: Service =
                serde_json::from_value(value).map_err(|e| manifest(format!("not a valid Service: {e}")))?;
            let name = svc.metadata.name.clone().unwrap_or_else(|| "<unnamed>".to_owned());
            service::addresses(&svc, args.keep_ports).map_err(|e| manifest(format!("Service {name} {e}")))?
        }
        (None, None) => unreachable!("clap requires --publish-status-address or -f"),
    };
    Ok(serde_json::to_string_pretty(&addresses).expect("addresses always serialize"))
}

/// The node-IP source over the Pods and Nodes of a manifest (a List, or YAML documents that
/// are objects or Lists), as JSON; errors say which document is wrong.
fn node_ips(text: &str, pods: &policy::PodsRef) -> Result<String, String> {
    use std::collections::HashMap;

    use serde::Deserialize as _;
    let mut objects = Vec::new();
    for (i, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        let value =
            serde_json::Value::deserialize(doc).map_err(|e| format!("document {}: not YAML or JSON: {e}", i + 1))?;
        match value.get("kind").and_then(|k| k.as_str()) {
            _ if value.is_null() => {}
            Some(kind) if kind.ends_with("List") => {
                objects.extend(value.get("items").and_then(|v| v.as_array()).cloned().unwrap_or_default());
            }
            _ => objects.push(value),
        }
    }
    let (mut facts, mut nodes) = (Vec::new(), HashMap::new());
    for (i, object) in objects.into_iter().enumerate() {
        let what = |e: serde_json::Error| format!("object {}: {e}", i + 1);
        match object.get("kind").and_then(|k| k.as_str()) {
            Some("Pod") => {
                let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(object).map_err(what)?;
                let labels = pod.metadata.labels.clone().unwrap_or_default();
                let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
                if ns == pods.namespace && pods.selector.matches(&labels) {
                    facts.push(nodeip::PodFacts::of(&pod));
                }
            }
            Some("Node") => {
                let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(object).map_err(what)?;
                nodes.insert(node.metadata.name.clone().unwrap_or_default(), nodeip::NodeAddrs::of(&node));
            }
            other => {
                return Err(format!("object {}: kind is {:?}; expected Pod or Node", i + 1, other.unwrap_or_default()));
            }
        }
    }
    let addresses = nodeip::addresses(&facts, &nodes, pods.internal_ip).map_err(|e| format!("{pods}: {e}"))?;
    Ok(serde_json::to_string_pretty(&addresses).expect("addresses always serialize"))
}

/// Installs the global tracing subscriber; `default` applies without --log-level and RUST_LOG.
pub(crate) fn init_logging(format: LogFormat, level: Option<&str>, default: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = match level {
        Some(level) => EnvFilter::new(level),
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default)),
    };
    // Colour codes only for a person at a terminal, never in a file or a container log.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match format {
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(false).init(),
        LogFormat::Plain => builder.fmt_fields(logging::plain_fields()).init(),
    }
}

/// Entry point for `main`: parses flags, runs the command, returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // kube's client and our listener share one TLS stack; pick its crypto once for the process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // `check` and `explain` report on stdout and their errors in one line on stderr; kube's
    // own log lines would only repeat those errors.
    let default_level = match cli.command {
        Command::Check { .. } | Command::Explain { .. } => "warn,kube_client=off",
        _ => "info",
    };
    init_logging(cli.log_format, cli.log_level.as_deref(), default_level);
    // `check` and `explain` tell what they found by their exit code (0 canonical, 1 drift) and
    // print their own errors; any error of theirs is 2, as clap's usage errors are.
    let failure = match cli.command {
        Command::Check { .. } | Command::Explain { .. } => ExitCode::from(2),
        _ => ExitCode::FAILURE,
    };
    // One runtime for every command; `resolve` and `certs generate` simply do not await.
    let result = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Err(e) => Err(CliError::Io(e)),
        Ok(runtime) => runtime.block_on(async {
            let done = |()| ExitCode::SUCCESS;
            match cli.command {
                Command::Resolve(args) => resolve(&args).map(|json| println!("{json}")).map(done),
                Command::Certs(args) => certs::run(args).await.map_err(CliError::from).map(done),
                Command::Serve(args) => serve(*args).await.map(done),
                Command::Check { args, policy } => match policy.policies() {
                    Ok(policies) => Ok(check::exit(check::check(args, &policies).await)),
                    Err(e) => Err(e),
                },
                Command::Explain { args, policy } => match policy.policies() {
                    Ok(policies) => Ok(check::exit(check::explain_one(args, &policies).await)),
                    Err(e) => Err(e),
                },
            }
        }),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            failure
        }
    }
}
