//! `serve`: its flags, and the composition root that turns them into a running webhook, in
//! named steps: policies, TLS, the client, watches, the reconciler, findings, then the server.

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use axum_server::tls_rustls::RustlsConfig;
use clap::Args;
use tokio::sync::oneshot;

mod leader_work;
mod probe;

use leader_work::{Leader, start_leader_work};

use super::{
    CliError, client::ClientArgs, client::PodArgs, duration::Seconds, limits::LimitArgs, policy::PolicyArgs,
    reconcile::ReconcileArgs,
};
use crate::{
    admission_policy::{desired, enforced::Enforced, keeper::Keeper, keeper::KeeperMetrics, served},
    audit::events,
    client::{self, PodIdentity},
    kind::{Kind, with_kind},
    metrics::Metrics,
    policy::store::PolicyStore,
    policy::{ClusterNeeds, Policies, SourceList},
    reload,
    reload::policy::{self as policy_reload, PodEvents},
    server::{self, AppState, Listeners, WebhookPort},
    sources::SourceCache,
    sources::known::KnownByKind,
    sources::owned::Tasks,
    sources::watches::ServiceWatches,
    tls::{self, ClientNames, certs, scratch},
};

/// How `serve` enforces at admission (`--admission`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum Admission {
    /// The API server calls the guard's `/mutate`.
    #[default]
    Webhook,
    /// The leader keeps a MutatingAdmissionPolicy (or ValidatingAdmissionPolicy) per policy,
    /// which the API server evaluates in process; `/mutate` is not served.
    Policy,
}

#[derive(Args, Debug)]
#[command(mut_arg("kubeconfig", |a| a.help(KUBECONFIG_HELP)))]
pub(crate) struct ServeArgs {
    /// Address of the HTTPS webhook listener [default: 0.0.0.0:8443]. Not with
    /// `--admission=policy`, which opens no webhook port.
    #[arg(long, env = "ISG_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Address of the plain-HTTP admin listener (/livez, /readyz, /metrics).
    #[arg(long, env = "ISG_ADMIN_LISTEN", default_value = "0.0.0.0:8080")]
    pub admin_listen: SocketAddr,
    /// Address of the plain-HTTP probe listener (/livez, /readyz), for the kubelet's probes:
    /// its own connection table, so a flood of the admin port cannot fail them. Default: in a
    /// Pod (KUBERNETES_SERVICE_HOST set) 0.0.0.0:8081; elsewhere the --admin-listen host, on a
    /// port the OS picks (logged).
    #[arg(long, env = "ISG_PROBE_LISTEN")]
    pub probe_listen: Option<SocketAddr>,
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
    /// With --client-ca: also require this name among the client certificate's SAN DNS names or
    /// its CN (repeatable, or comma-separated), since a CA such as the cluster's signs more
    /// than the API server's certificate.
    #[arg(
        long = "client-san",
        env = "ISG_CLIENT_SAN",
        value_name = "NAME",
        value_delimiter = ',',
        requires = "client_ca"
    )]
    pub client_san: Vec<String>,
    /// Declares that a NetworkPolicy admits only the control plane to --listen (the chart sets it
    /// when it renders one); it only silences the startup warning about an open webhook port.
    #[arg(long, env = "ISG_NETWORK_POLICY_NARROWED", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub network_policy_narrowed: bool,
    /// Largest AdmissionReview body accepted, in bytes (the API server caps objects at 3 MiB).
    #[arg(long, env = "ISG_MAX_BODY_BYTES", default_value_t = 3 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Longest wait, in seconds, for in-flight reviews after SIGTERM.
    #[arg(long, env = "ISG_DRAIN_SECONDS", default_value = "10", value_parser = Seconds::ANY)]
    pub drain_seconds: Duration,
    /// Seconds to keep serving after SIGTERM while already reporting not ready, so endpoints
    /// drop the pod before its listener closes (set it in a Deployment; 0 for local runs).
    #[arg(long, env = "ISG_SHUTDOWN_DELAY_SECONDS", default_value = "0", value_parser = Seconds::ANY)]
    pub shutdown_delay_seconds: Duration,
    /// How writes are enforced at admission: `webhook` (the API server calls POST /mutate) or
    /// `policy` (the leader keeps one MutatingAdmissionPolicy, or ValidatingAdmissionPolicy for
    /// audit and deny, per policy current with the canonical value; the API server enforces it
    /// in process, even while the guard is down; the guard then opens no webhook port, only
    /// the admin and probe ports, and refuses --listen, --tls-cert and --client-ca). `policy` needs
    /// Kubernetes 1.36, or 1.34-1.35 with the MutatingAdmissionPolicy feature gate.
    #[arg(long, env = "ISG_ADMISSION", value_enum, default_value_t = Admission::Webhook)]
    pub admission: Admission,
    /// With `--admission=policy`: how often the leader writes every admission policy and binding
    /// again and sweeps, which repairs what another writer edited or deleted (whole seconds): a
    /// fixed interval from the start, which no change restarts.
    #[arg(long, env = "ISG_ADMISSION_POLICY_RESYNC", default_value = "300", value_parser = Seconds::UP_TO_AN_HOUR)]
    pub admission_policy_resync: Duration,
    #[command(flatten)]
    pub client: ClientArgs,
    /// Distinct `writer` label values in metrics at once; a new writer then takes the label of
    /// the one seen least recently (counted in `writer_labels_evicted_total`), and a label idle
    /// for 10 minutes goes, so callers cannot grow /metrics without bound nor keep a label.
    #[arg(long, env = "ISG_MAX_WRITER_LABELS", default_value_t = crate::metrics::DEFAULT_MAX_WRITERS)]
    pub max_writer_labels: usize,
    /// What the `writer` label shows (/metrics is unauthenticated): `user` (the username),
    /// `serviceaccount` (ServiceAccounts by name, everyone else as `user`) or `hashed` (a short
    /// stable hash of the username).
    #[arg(long, env = "ISG_WRITER_LABELS", value_enum, default_value_t = crate::metrics::WriterLabels::User)]
    pub writer_labels: crate::metrics::WriterLabels,
    /// Repeats of a finding (same writer, Ingress and attempted value) within this interval are
    /// counted and logged once when it ends, with the count; the first is logged in full.
    /// 0 logs every finding in full.
    #[arg(long, env = "ISG_REPEAT_LOG_INTERVAL", default_value = "60", value_parser = Seconds::ANY)]
    pub repeat_log_interval: Duration,
    /// Do not write Kubernetes Events about rogue writes (logs, metrics, warnings and audit
    /// annotations still report them).
    #[arg(long, env = "ISG_NO_EVENTS")]
    pub no_events: bool,
    #[command(flatten)]
    pub policy: PolicyArgs,
    #[command(flatten)]
    pub reconcile: ReconcileArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub pod: PodArgs,
}

const KUBECONFIG_HELP: &str = "kubeconfig for watching publish Services; default: in-cluster config, then KUBECONFIG";

/// Runs `serve` until shutdown.
pub(crate) async fn serve(args: ServeArgs) -> Result<(), CliError> {
    // Caught from here on: a SIGTERM while starting (the ephemeral CA already on disk) must end
    // in the orderly shutdown that removes it, not the default action that kills the process.
    let first_signal = server::shutdown_signal();
    let client_names = ClientNames::new(args.client_san)?;
    let client_refusals = client_names.refusals();
    let counted_names = args.client_ca.is_some().then(|| client_names.clone());
    let pod = PodIdentity::from(args.pod);
    let (reconcile_settings, leader_settings) = args.reconcile.settings(&pod)?;
    let policy_mode = args.admission == Admission::Policy;
    if policy_mode {
        let given = [
            ("--listen", args.listen.is_some()),
            ("--tls-cert", args.tls_cert.is_some()),
            ("--client-ca", args.client_ca.is_some()),
        ];
        // No webhook port opens: a flag (or its variable) that configures one is a mistake to
        // name, not to ignore (the operator expects a port that is not there).
        if let Some(&(flag, _)) = given.iter().find(|(_, given)| *given) {
            return Err(CliError::NoWebhookPort { flag });
        }
    }
    let policies = load_policies(&args.policy)?;
    if policy_mode {
        // Every policy takes one of its kind's fixed object names, or the guard does not start.
        crate::admission_policy::object_names(&policies, &leader_settings.lease_name)?;
    }
    let client_ca_set = args.client_ca.is_some();
    // The process that holds the admission-policy rights answers no network caller: no
    // review reaches it, so it opens no webhook port (docs/security.md, "Rights by mode").
    // `_ca_dir` lives until `serve` returns, then removes the ephemeral CA's directory.
    let (tls, reloader, _ca_dir) = if policy_mode {
        (None, None, None)
    } else {
        // Without mTLS or a NetworkPolicy, any pod can post reviews: bounded, but worth knowing.
        if !client_ca_set && !args.network_policy_narrowed {
            tracing::warn!(
                "the webhook port accepts any caller: neither --client-ca (mTLS from the API server) nor a narrowed NetworkPolicy (--network-policy-narrowed) is on; see docs/deploy.md, \"Lock the webhook down to the API server\""
            );
        }
        let (tls, reloader, dir) = build_tls(args.tls_cert, args.tls_key, args.client_ca, client_names).await?;
        (Some(tls), reloader, dir)
    };
    let cache = SourceCache::new(&policies);
    // No review reaches the guard in policy mode, so there is nothing to make Events of.
    let no_events = args.no_events || policy_mode;
    let wants_client = !no_events || args.reconcile.reconcile || args.policy.config.is_some();
    let needs = policies.cluster_needs();
    let needed_for = if policy_mode {
        Some("the sources and keep the admission policies (--admission=policy)".to_owned())
    } else {
        needs.any().then(|| needs_in_flag_words(needs).join(", "))
    };
    let client = connect_client(&args.client.target(), needed_for, wants_client).await?;
    let admission_api = match (&client, policy_mode) {
        (Some(client), true) => Some(served::discover(client).await?),
        _ => None,
    };
    // An API server older than Ingress status ports drops them; a policy that keeps them
    // would then patch every write in a loop. Checked once; reloads apply the same rule.
    let drops_ports = match &client {
        Some(client)
            if args.policy.config.is_some() || policies.of(crate::kind::Kind::Ingress).any(|p| p.keep_ports) =>
        {
            server_drops_ports(client).await
        }
        _ => false,
    };
    let policies = if drops_ports { policies.without_ports() } else { policies };
    let mut tasks = Tasks::default();
    let mut metrics = Metrics::with_writer_labels(args.max_writer_labels, args.writer_labels);
    cache.count_watch_errors(metrics.watch_errors());
    let watches = client.as_ref().map(|c| ServiceWatches::start(c.clone(), cache.clone(), &policies, tasks.failures()));
    let store = PolicyStore::new(policies);
    if client_ca_set {
        metrics.register_client_refusals(client_refusals);
    }
    if let Some(reloader) = reloader {
        metrics.register_tls_cert_expiry(reloader.cert_expiry());
        tasks.spawn_until_shutdown("serving certificate reload", reloader.supervise());
    }
    let keeper = match (&client, admission_api) {
        (Some(client), Some(api)) => Some(Keeper {
            client: client.clone(),
            policies: store.clone(),
            sources: cache.clone(),
            api,
            owner: desired::Owner::new(&leader_settings.namespace, &leader_settings.lease_name),
            metrics: KeeperMetrics::register(&mut metrics),
            resync: args.admission_policy_resync,
            enforced: Enforced::new(cache.clone()),
        }),
        _ => None,
    };
    let metrics = Arc::new(metrics);
    let pod_events = client.clone().and_then(|client| PodEvents::new(client, &pod));
    start_watches(&mut tasks, args.policy.config, watches, &store, &metrics, pod_events, drops_ports);
    let leader_client = client.clone().filter(|_| args.reconcile.reconcile || keeper.is_some());
    let leader = leader_client.map(|client| Leader {
        client,
        settings: leader_settings,
        reconcile: args.reconcile.reconcile.then_some(reconcile_settings),
        webhook_configuration: args.reconcile.webhook_configuration,
        keeper,
    });
    // Events only about Ingresses the guard's watch has seen: the reconciler's, when it runs
    // (one list of every Ingress per replica), else a watch for the index alone.
    let events_client = client.filter(|_| !no_events);
    let known = events_client.as_ref().map(|_| crate::sources::known::by_kind());
    let reconciles = leader.as_ref().is_some_and(|l| l.reconcile.is_some());
    if let (Some(client), Some(known), false) = (&events_client, &known, reconciles) {
        start_known_objects(&mut tasks, client, known, &store);
    }
    let stop_reconciler = start_leader_work(&mut tasks, leader, &store, &cache, &metrics, known.clone());
    // Findings are logged and turned into Events by one background task, off the request path.
    let publisher = events_client.zip(known).map(|(client, known)| events::Publisher { client, known });
    let settings = events::Settings { repeat_interval: args.repeat_log_interval, ..events::Settings::default() };
    let (events, reporter) =
        events::start(publisher, pod.instance(), metrics.clone(), settings, tasks.shutdown_token());
    tasks.spawn("finding reporter (log, Kubernetes Events)", reporter);
    let state = AppState::with(store, cache, metrics, Some(events));
    let probe_listen = probe::address(args.probe_listen, args.admin_listen, probe::in_pod());
    let webhook = tls.map(|tls| {
        let listener = bind(args.listen.unwrap_or(SocketAddr::from(([0, 0, 0, 0], 8443))), "--listen", "ISG_LISTEN")?;
        Ok::<_, CliError>(WebhookPort { listener, tls, client_names: counted_names })
    });
    let listeners = Listeners {
        webhook: webhook.transpose()?,
        admin: bind(args.admin_listen, "--admin-listen", "ISG_ADMIN_LISTEN")?,
        probe: bind(probe_listen, "--probe-listen", "ISG_PROBE_LISTEN")?,
        limits: args.limits.limits(args.max_body_bytes),
        drain: args.drain_seconds,
    };
    let shutdown = shutdown(first_signal, state.clone(), stop_reconciler, args.shutdown_delay_seconds);
    Ok(server::serve(state, listeners, tasks, shutdown).await?)
}

/// The validated policies, logged, with a warning for each pair that may govern one Ingress.
fn load_policies(policy: &PolicyArgs) -> Result<Policies, CliError> {
    let policies = policy.policies()?;
    policies.iter().for_each(crate::policy::Policy::warn_if_kind_inferred);
    for p in policies.iter() {
        let classes = if p.scope.classes.is_empty() { "*".to_owned() } else { p.scope.classes.join(",") };
        let namespaces = p.namespace_selector.as_ref().map_or_else(|| "*".to_owned(), ToString::to_string);
        tracing::info!(policy = %p.name, kind = %p.kind, classes = %classes, controllers = %p.scope.controllers.join(","), without_class = p.scope.without_class, namespaces = %namespaces, sources = %SourceList(&p.sources), mode = %p.mode, "{} policy loaded", p.kind);
    }
    for (first, second) in policies.possible_overlaps() {
        tracing::warn!(
            first,
            second,
            "policies govern a common class and their namespaceSelectors may both match a Namespace; such Ingresses are governed by the first and counted in policy_overlaps_total"
        );
    }
    Ok(policies)
}

/// The serving configuration: the given files, reloaded, or an ephemeral certificate (and CA).
async fn build_tls(
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    client_ca: Option<PathBuf>,
    client_names: ClientNames,
) -> Result<(RustlsConfig, Option<reload::Reloader>, Option<scratch::CaDir>), CliError> {
    if let (Some(cert), Some(key)) = (cert, key) {
        if !client_names.is_empty() {
            tracing::info!(names = %client_names, "client certificates must also name one of --client-san");
        }
        let files = reload::CertFiles { cert, key, client_ca };
        let (tls, reloader) = reload::start_requiring(files, client_names, reload::POLL_INTERVAL).await?;
        return Ok((tls, Some(reloader), None));
    }
    let names = ["localhost", "127.0.0.1", "::1"].map(String::from);
    let bundle = certs::generate("ingress-status-guard ephemeral CA", &names)?;
    let dir = scratch::CaDir::create(&std::env::temp_dir(), &bundle.ca_pem)?;
    tracing::warn!(ca_bundle = %dir.ca().display(), "no --tls-cert/--tls-key: serving an ephemeral self-signed certificate for localhost; trust it with curl --cacert");
    let config =
        tls::server_config(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes(), "<ephemeral>", "<ephemeral>")?;
    Ok((RustlsConfig::from_config(Arc::new(config)), None, Some(dir)))
}

/// The Kubernetes client: required when something is `needed_for` it (the error says what),
/// tried when `wanted` (its absence only turns features off), else none.
async fn connect_client(
    target: &client::Target,
    needed_for: Option<String>,
    wanted: bool,
) -> Result<Option<kube::Client>, CliError> {
    match needed_for {
        Some(needed_for) => {
            Ok(Some(client::connect(target).await.map_err(|source| CliError::Client { needed_for, source })?))
        }
        None if wanted => Ok(client::connect(target)
            .await
            .inspect_err(|e| tracing::info!(reason = %e, "no Kubernetes client: Events and the reconciler are off"))
            .ok()),
        None => Ok(None),
    }
}

/// What the policies need a cluster for, in the words of the flags and fields that ask for it.
fn needs_in_flag_words(needs: ClusterNeeds) -> Vec<&'static str> {
    let ClusterNeeds { services, gateways, classes, pods, namespaces } = needs;
    let words = [
        (services, "the publish Service (--publish-service)"),
        (gateways, "the publish Gateway (publishGateway)"),
        (pods, "the controller Pods and Nodes (--publish-pods-namespace/--publish-pods-selector)"),
        (namespaces, "Namespaces (namespaceSelector)"),
    ];
    let classes = Kind::ALL.into_iter().map(|kind| (classes[kind.index()], kind.info().classes_needed_by));
    words.into_iter().chain(classes).filter_map(|(needed, words)| needed.then_some(words)).collect()
}

/// Whether the API server is older than the Ingress `ports` field (it would drop them); logged.
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

/// One task owns the Service watches and, with --config, the reload of the policy file.
fn start_watches(
    tasks: &mut Tasks,
    config: Option<PathBuf>,
    watches: Option<ServiceWatches>,
    store: &Arc<PolicyStore>,
    metrics: &Arc<Metrics>,
    pod_events: Option<PodEvents>,
    drops_ports: bool,
) {
    match config {
        Some(path) => {
            let reload = policy_reload::Reload {
                path,
                poll: policy_reload::POLL_INTERVAL,
                store: store.clone(),
                watches,
                metrics: metrics.clone(),
                pod_events,
                drops_ports,
            };
            tasks.spawn_until_shutdown("policy reload and publish Service watches", reload.run());
        }
        None => tasks.spawn_until_shutdown("publish Service watches", async move {
            match watches {
                Some(mut watches) => loop {
                    watches.ended().await;
                },
                None => std::future::pending().await,
            }
        }),
    }
}

/// The watches of each governed kind's objects that tell real Event targets from forged ones.
fn start_known_objects(
    tasks: &mut Tasks,
    client: &kube::Client,
    known: &KnownByKind,
    policies: &Arc<crate::policy::store::PolicyStore>,
) {
    let watches = Kind::ALL.map(|kind| {
        let (client, index, policies) = (client.clone(), known[kind.index()].clone(), policies.clone());
        with_kind!(kind, K => futures::FutureExt::boxed(crate::sources::known::watch::<K>(client, index, policies)))
    });
    // Each runs until shutdown: the first to end ends the task, which is then reported.
    tasks.spawn_until_shutdown("known-object watches (Event targets)", async move {
        futures::future::select_all(watches).await;
    });
}

/// Binds one listener; a failure names the flag and the environment variable that set it.
fn bind(addr: SocketAddr, flag: &'static str, env: &'static str) -> Result<std::net::TcpListener, CliError> {
    std::net::TcpListener::bind(addr).map_err(|source| CliError::Bind { flag, env, addr, source })
}

/// Resolves at `first_signal`, after stopping the reconciler and the shutdown delay, not ready.
async fn shutdown(
    first_signal: impl Future<Output = ()> + Send + 'static,
    state: Arc<AppState>,
    stop_reconciler: oneshot::Sender<()>,
    delay: Duration,
) {
    first_signal.await;
    let _ = stop_reconciler.send(());
    if delay.is_zero() {
        return;
    }
    let second_signal = server::shutdown_signal();
    state.readiness.drain();
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
