//! The command line: clap `*Args` structs parsed and validated once into the typed settings of
//! the modules that own the behaviour; then `main` runs the command and maps its exit code.

mod admission;
mod certs;
mod check;
mod client;
mod completion;
mod cutover;
mod doctor;
mod duration;
mod limits;
mod logging;
mod output;
mod plugin;
mod policy;
mod reconcile;
mod render;
mod resolve;
mod serve;
mod version;

use std::{net::SocketAddr, process::ExitCode};

use clap::{Parser, Subcommand};

use crate::{
    address::AddressError,
    client::ClientError,
    policy::{ConfigError, SpecError},
    tls::{TlsError, TlsFile},
};
use logging::LogFormat;

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

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant, reason = "parsed once per process")]
pub(crate) enum Command {
    /// Run the webhook (HTTPS) and its admin server (plain HTTP).
    Serve(Box<serve::ServeArgs>),
    /// Print the canonical addresses for a source as JSON, without a cluster.
    Resolve(resolve::ResolveArgs),
    /// Print the admission policies (MutatingAdmissionPolicy or ValidatingAdmissionPolicy, with
    /// bindings) that enforce the policies' current canonical addresses, computed offline from
    /// -f manifests; the output goes stale when the sources change.
    RenderAdmissionPolicy(render::RenderArgs),
    /// Make serving certificates: into files (`generate`) or, in a cluster, into the serving
    /// Secret and the webhook configuration's caBundle (`bootstrap`).
    Certs(certs::CertsArgs),
    /// Report every governed Ingress whose stored status is off canonical (exit 1), read-only.
    Check {
        #[command(flatten)]
        args: check::CheckArgs,
        #[command(flatten)]
        policy: policy::PolicyArgs,
    },
    /// Explain how one Ingress (NAMESPACE/NAME) is governed and what the webhook would do.
    Explain {
        #[command(flatten)]
        args: check::ExplainArgs,
        #[command(flatten)]
        policy: policy::PolicyArgs,
    },
    /// Prove that the webhook works: its configuration, caBundle and Service, and a dry-run
    /// status write that must come back as the policy's mode says (exit 1 names what is broken).
    Doctor {
        #[command(flatten)]
        args: doctor::DoctorArgs,
        #[command(flatten)]
        policy: policy::PolicyArgs,
    },
    /// Move one policy's source in the policy ConfigMap (or --rollback): print the plan, apply
    /// the ConfigMap, and follow the Ingresses until every one is canonical for the new source.
    Cutover(Box<cutover::CutoverArgs>),
    /// The admission policies of `--admission=policy`: `remove` deletes one guard's, and nobody
    /// else's.
    AdmissionPolicy(admission::AdmissionPolicyArgs),
    /// Print this binary's version and revision and the guard versions running in the cluster
    /// (its Deployments' images, its leader's Lease), warning when they differ by a minor version.
    Version(version::VersionArgs),
    /// Print a shell completion script: bash, zsh, fish, powershell, or `kubectl` for the
    /// `kubectl_complete-isg` helper that completes `kubectl isg`.
    Completion(completion::CompletionArgs),
    /// The candidates for the last of the words given (what the completion scripts call).
    #[command(name = "__complete", hide = true)]
    Complete(completion::CompleteArgs),
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
    /// `--reconcile-qps` out of range.
    #[error(transparent)]
    ReconcileFlag(#[from] crate::reconcile::QpsError),
    /// A `--leader-election-*` flag, or the order of the three lease timings.
    #[error(transparent)]
    LeaderElectionFlag(#[from] crate::reconcile::leader::SettingsError),
    #[error("{}", .0.message(tls_flag))]
    Tls(#[from] TlsError),
    #[error(transparent)]
    ClientSan(#[from] crate::tls::ClientNameError),
    #[error(transparent)]
    Cert(#[from] crate::tls::certs::CertError),
    #[error(
        "cannot build a Kubernetes client, needed to watch {needed_for}: {source}; pass --kubeconfig or run in a cluster"
    )]
    Client { needed_for: String, source: ClientError },
    #[error("policy {policy:?} is unresolved: {reason}; give its sources' objects with -f")]
    Unresolved { policy: String, reason: crate::sources::Unresolved },
    #[error(transparent)]
    Render(#[from] crate::admission_policy::RenderError),
    #[error(transparent)]
    NotRemoved(#[from] crate::admission_policy::keeper::NotRemoved),
    /// `--admission=policy` against an API server without admission policies: a usage error.
    #[error(transparent)]
    AdmissionPolicy(#[from] crate::admission_policy::served::NotServed),
    #[error("{path}: {message}")]
    Manifest { path: String, message: String },
    #[error("{flag} {addr}: cannot listen: {source}; pass another address with {flag} or {env}")]
    Bind { flag: &'static str, env: &'static str, addr: SocketAddr, source: std::io::Error },
    /// A webhook port's flag with `--admission=policy`, which opens none: a usage error.
    #[error(
        "{flag}: --admission=policy opens no webhook port (no review reaches the guard; the API server enforces the admission policies): remove {flag}, or its variable"
    )]
    NoWebhookPort { flag: &'static str },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The flag that names each TLS file.
fn tls_flag(file: TlsFile) -> &'static str {
    match file {
        TlsFile::Cert => "--tls-cert",
        TlsFile::Key => "--tls-key",
        TlsFile::ClientCa => "--client-ca",
    }
}

/// Entry point for `main`: parses flags, runs the command, returns the process exit code.
pub fn main() -> ExitCode {
    let cli = plugin::parse_from(std::env::args_os());
    // kube's client and our listener share one TLS stack; pick its crypto once for the process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // The reporting commands print on stdout and their errors in one line on stderr (kube's
    // own log lines would only repeat those errors); they tell what they found by their exit
    // code (0 canonical, 1 drift), so any error of theirs is 2, as clap's usage errors are.
    let reports = matches!(
        cli.command,
        Command::Check { .. }
            | Command::Explain { .. }
            | Command::Doctor { .. }
            | Command::Cutover(_)
            | Command::Version(_)
    );
    let default_level = match cli.command {
        _ if reports => "warn,kube_client=off",
        // A log line would land among the shell's completions.
        Command::Complete(_) => "off",
        _ => "info",
    };
    logging::init_logging(cli.log_format, cli.log_level.as_deref(), default_level);
    let failure = if reports { ExitCode::from(2) } else { ExitCode::FAILURE };
    // One runtime for every command; `resolve` and `certs generate` simply do not await. Its
    // blocking pool is the reviews' (`server::limits`), and small, as each may hold a body.
    let result = match tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(crate::server::limits::BLOCKING_THREADS)
        .enable_all()
        .build()
    {
        Err(e) => Err(CliError::Io(e)),
        Ok(runtime) => runtime.block_on(async {
            let done = |()| ExitCode::SUCCESS;
            match cli.command {
                Command::Resolve(args) => {
                    resolve::resolve(&args).map(|json| print!("{}", resolve::shown(&json, args.output))).map(done)
                }
                Command::RenderAdmissionPolicy(args) => render::render(&args).map(|yaml| print!("{yaml}")).map(done),
                Command::Certs(args) => certs::run(args).await.map_err(CliError::from).map(done),
                Command::Serve(args) => serve::serve(*args).await.map(done),
                Command::Check { args, policy } => Ok(check::check(args, &policy.policies()?).await),
                Command::Explain { args, policy } => Ok(check::explain(args, &policy.policies()?).await),
                Command::Doctor { args, policy } => Ok(doctor::doctor(args, &policy.policies()?).await),
                Command::Cutover(args) => Ok(cutover::cutover(*args).await),
                Command::AdmissionPolicy(args) => admission::run(args).await.map(done),
                Command::Version(args) => Ok(version::version(args).await),
                Command::Completion(args) => {
                    print!("{}", completion::script(args.shell));
                    Ok(ExitCode::SUCCESS)
                }
                Command::Complete(args) => {
                    completion::complete(args).await;
                    Ok(ExitCode::SUCCESS)
                }
            }
        }),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            // A mode the cluster cannot run is the operator's to change, like a usage error.
            let usage = matches!(e, CliError::AdmissionPolicy(_) | CliError::NoWebhookPort { .. });
            if usage { ExitCode::from(2) } else { failure }
        }
    }
}
