//! `check` and `explain`: the drift report operators and CI run. Stored Ingresses and their
//! sources are read with one-shot GETs, then judged by the webhook's own [`decide`] (and, for
//! `explain`, answered by its own [`render`]). Pure report building from values; the I/O is the
//! thin async functions at the end. Nothing is written to the cluster.

mod explain;
mod fetch;
mod report;
mod snapshot;

use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::{Args, ValueEnum};
use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;

use crate::{
    client::{self, ClientError},
    ingress::Stored,
    policy::Policies,
};
use explain::explain;
use fetch::bounded;
use fetch::snapshot;
use fetch::stored_ingresses;
use report::Report;
/// Ingresses per list request: bounds what one page holds in memory.
const PAGE_SIZE: u32 = 500;
/// A class is shown as read; an annotation value can be anything, so it is cut and quoted.
const MAX_CLASS_CHARS: usize = 80;

/// How `check` and `explain` reach the cluster.
#[derive(Args, Debug)]
pub(crate) struct ClusterArgs {
    /// kubeconfig to read Ingresses and publish Services with; default: in-cluster config, then
    /// KUBECONFIG.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Longest wait for each request to the API server, in seconds (`30` or `30s`).
    #[arg(long, env = "ISG_REQUEST_TIMEOUT", default_value = "30", value_parser = parse_timeout)]
    pub request_timeout: Duration,
}

#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Only Ingresses in this namespace; default: all namespaces.
    #[arg(short = 'n', long, env = "ISG_NAMESPACE", value_parser = parse_namespace)]
    pub namespace: Option<String>,
    /// Output format: an aligned table, or one JSON document.
    #[arg(short = 'o', long, env = "ISG_OUTPUT", value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

#[derive(Args, Debug)]
pub(crate) struct ExplainArgs {
    /// The Ingress to explain, as NAMESPACE/NAME.
    #[arg(value_name = "NAMESPACE/NAME", value_parser = parse_ingress_ref)]
    pub ingress: (String, String),
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    Table,
    Json,
}

fn parse_timeout(text: &str) -> Result<Duration, String> {
    let digits = text.strip_suffix('s').unwrap_or(text);
    match digits.parse::<u64>() {
        Ok(secs @ 1..=3600) => Ok(Duration::from_secs(secs)),
        _ => Err(format!("{text:?} must be a whole number of seconds from 1 to 3600, e.g. 30 or 30s")),
    }
}

fn parse_namespace(text: &str) -> Result<String, String> {
    if crate::names::is_dns1123_label(text) {
        Ok(text.to_owned())
    } else {
        Err(format!("{text:?} is not a valid namespace name (lowercase letters, digits and '-', at most 63)"))
    }
}

fn parse_ingress_ref(text: &str) -> Result<(String, String), String> {
    let shape = || format!("{text:?} must be NAMESPACE/NAME, e.g. default/web");
    let (namespace, name) = text.split_once('/').ok_or_else(shape)?;
    if !crate::names::is_dns1123_label(namespace) {
        return Err(format!("{}: namespace {namespace:?} is not a valid namespace name", shape()));
    }
    if !crate::names::is_dns1123_subdomain(name) {
        return Err(format!("{}: name {name:?} is not a valid Ingress name", shape()));
    }
    Ok((namespace.to_owned(), name.to_owned()))
}

/// What stops `check` or `explain` (exit code 2), each saying what to fix.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CheckError {
    #[error("cannot build a Kubernetes client: {0}; pass --kubeconfig or run in a cluster")]
    Client(#[from] ClientError),
    #[error(
        "cannot {what}: {detail}; check --kubeconfig, that the API server is reachable and that this identity may read it"
    )]
    Api { what: String, detail: String },
    #[error("cannot {what}: no answer from the API server within {timeout:?} (--request-timeout); is it reachable?")]
    Timeout { what: String, timeout: Duration },
    #[error("Ingress {namespace}/{name} not found")]
    NotFound { namespace: String, name: String },
}

// ---- Pure: stored Ingresses, fetched sources, the report ----

/// Runs `check`: prints the report, returns 0, 1 (drift) or an error (2).
pub(crate) async fn check(args: CheckArgs, policies: &Policies) -> Result<u8, CheckError> {
    let timeout = args.cluster.request_timeout;
    let client = client::connect(args.cluster.kubeconfig.as_deref()).await?;
    let sources = snapshot(&client, policies, timeout).await?;
    let stored = stored_ingresses(&client, args.namespace.as_deref(), timeout).await?;
    let report = Report::build(&stored, policies, &sources);
    print!("{}", if args.output == Output::Json { report.json() } else { report.table() });
    Ok(report.exit_code())
}

/// Runs `explain`: prints the explanation, returns 0, 1 (drift or unresolved) or an error (2).
pub(crate) async fn explain_one(args: ExplainArgs, policies: &Policies) -> Result<u8, CheckError> {
    let timeout = args.cluster.request_timeout;
    let (namespace, name) = args.ingress;
    let client = client::connect(args.cluster.kubeconfig.as_deref()).await?;
    let api: Api<Ingress> = Api::namespaced(client.clone(), &namespace);
    let ingress = bounded(|| format!("get Ingress {namespace}/{name}"), timeout, api.get_opt(&name))
        .await?
        .ok_or_else(|| CheckError::NotFound { namespace: namespace.clone(), name: name.clone() })?;
    let sources = snapshot(&client, policies, timeout).await?;
    let explanation = explain(&Stored::of(&ingress), policies, &sources);
    print!("{}", explanation.text());
    Ok(explanation.exit_code)
}

/// The process exit code of `check` or `explain`: every error is 2, as clap's usage errors are.
pub(crate) fn exit(result: Result<u8, CheckError>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests;
