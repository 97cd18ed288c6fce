//! The flags of `check` and `explain`: how to reach the cluster, and what to report on.

use std::time::Duration;

use clap::Args;

use super::{client::ClientArgs, duration::Seconds};
use crate::{
    check::{self, Cluster, Output},
    policy::Policies,
};

/// How `check` and `explain` reach the cluster.
#[derive(Args, Debug)]
#[command(mut_arg("kubeconfig", |a| a.help(KUBECONFIG_HELP)))]
pub(crate) struct ClusterArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Longest wait for each request to the API server, in seconds (`30` or `30s`).
    #[arg(long, env = "ISG_REQUEST_TIMEOUT", default_value = "30", value_parser = Seconds::UP_TO_AN_HOUR)]
    pub request_timeout: Duration,
}

const KUBECONFIG_HELP: &str =
    "kubeconfig to read Ingresses and publish Services with; default: in-cluster config, then KUBECONFIG";

impl ClusterArgs {
    pub(crate) fn cluster(&self) -> Cluster {
        Cluster { kubeconfig: self.client.kubeconfig.clone(), request_timeout: self.request_timeout }
    }
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

/// Runs `check` with its validated policies; the exit code is the report's (or 2 on error).
pub(crate) async fn check(args: CheckArgs, policies: &Policies) -> std::process::ExitCode {
    let CheckArgs { cluster, namespace, output } = args;
    check::exit(check::check(&cluster.cluster(), namespace.as_deref(), output, policies).await)
}

/// Runs `explain` with its validated policies; the exit code is the explanation's (or 2).
pub(crate) async fn explain(args: ExplainArgs, policies: &Policies) -> std::process::ExitCode {
    let ExplainArgs { ingress, cluster } = args;
    check::exit(check::explain_one(&cluster.cluster(), ingress, policies).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_values() {
        let parse_timeout = |text: &str| Seconds::UP_TO_AN_HOUR.duration("--request-timeout", text);
        assert_eq!(parse_timeout("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_timeout("5s"), Ok(Duration::from_secs(5)));
        // The one duration syntax of every flag: minutes are accepted here too now.
        assert_eq!(parse_timeout("1m"), Ok(Duration::from_secs(60)));
        for bad in ["0", "-1", "", "3601"] {
            assert!(parse_timeout(bad).unwrap_err().to_string().contains("whole number of seconds"), "{bad}");
        }
        assert_eq!(parse_namespace("team-a"), Ok("team-a".into()));
        for bad in ["", "Team", "a/b", "../x"] {
            assert!(parse_namespace(bad).unwrap_err().contains("not a valid namespace name"), "{bad}");
        }
        assert_eq!(parse_ingress_ref("default/web"), Ok(("default".into(), "web".into())));
        for (bad, want) in [
            ("web", "must be NAMESPACE/NAME"),
            ("Default/web", "namespace \"Default\""),
            ("default/", "name \"\""),
            ("a/b/c", "name \"b/c\""),
        ] {
            assert!(parse_ingress_ref(bad).unwrap_err().contains(want), "{bad}");
        }
    }
}
