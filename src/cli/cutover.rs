//! The flags of `cutover`: the policy ConfigMap and the policy in it, the new source (in the
//! shapes of `serve`'s source flags, `--to-` in front), or `--rollback`; how to follow.

use std::{process::ExitCode, time::Duration};

use clap::Args;

use super::{
    check::{ClusterArgs, parse_namespace, parse_ref},
    duration::Seconds,
};
use crate::{
    cutover::{self, Change, NewSource, Output, Settings},
    policy::{GatewayRef, ServiceRef},
};

// Exactly one change; each `--to-` flag maps to its `NewSource` variant in `settings`, and the
// rest of `cutover` does not name source kinds.
#[derive(Args, Debug)]
#[command(mut_arg("kubeconfig", |a| a.help(KUBECONFIG_HELP)))]
#[command(group(clap::ArgGroup::new("change").required(true).args(["to_publish_service", "to_publish_status_address", "to_publish_gateway", "rollback"])))]
pub(crate) struct CutoverArgs {
    /// The policy ConfigMap the guard's Deployment mounts and reloads: NAMESPACE/NAME, or NAME
    /// in --namespace (default: the context's namespace, as kubectl does).
    #[arg(long, env = "ISG_CONFIG_MAP", value_name = "[NAMESPACE/]NAME", value_parser = parse_config_map)]
    pub config_map: (Option<String>, String),
    /// Namespace of the ConfigMap, when --config-map is given as NAME.
    // No env: `ISG_NAMESPACE` is `check`'s Ingress namespace, and a ConfigMap given as
    // NAMESPACE/NAME must not clash with it.
    #[arg(short = 'n', long, value_parser = parse_namespace)]
    pub namespace: Option<String>,
    /// The ConfigMap's key that holds the policy file.
    #[arg(long, env = "ISG_CONFIG_MAP_KEY", default_value = cutover::DEFAULT_KEY)]
    pub key: String,
    /// The policy (its `name:`) whose source moves.
    #[arg(long, env = "ISG_POLICY", value_parser = parse_policy)]
    pub policy: String,
    /// The new source: this Service's addresses (NAMESPACE/NAME), as `--publish-service`.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = ServiceRef::service)]
    pub to_publish_service: Option<ServiceRef>,
    /// The new source: these addresses (comma-separated IPs and hostnames), as
    /// `--publish-status-address`.
    #[arg(long, value_name = "LIST", value_parser = parse_status_address)]
    pub to_publish_status_address: Option<NewSource>,
    /// The new source: this Gateway's `status.addresses` (NAMESPACE/NAME), as a policy's
    /// `publishGateway`; unresolved until it is Programmed and has addresses.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = GatewayRef::gateway)]
    pub to_publish_gateway: Option<GatewayRef>,
    /// Put --policy's source back to the one before its last cutover (kept in an annotation);
    /// the other policies stay as they are.
    #[arg(long)]
    pub rollback: bool,
    /// Print the plan and stop: nothing is written.
    #[arg(long)]
    pub dry_run: bool,
    /// How long to follow the Ingresses after the apply before giving up (exit 1).
    #[arg(long, env = "ISG_CUTOVER_TIMEOUT", default_value = "10m", value_parser = Seconds::UP_TO_AN_HOUR)]
    pub timeout: Duration,
    /// Output: a table and a progress bar (or lines off a terminal; `table` is the same), one
    /// JSON event per line, or one YAML document per event.
    // Its own env: a shared `ISG_OUTPUT=table` would fit, but a cutover's JSON stream is not
    // the one document `check -o json` prints, and a pipeline set up for one must not get the other.
    #[arg(short = 'o', long, env = "ISG_CUTOVER_OUTPUT", value_enum, default_value_t = Output::Text)]
    pub output: Output,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

const KUBECONFIG_HELP: &str = "kubeconfig to read and patch the policy ConfigMap, and read Ingresses and publish Services with; default: in-cluster config, then KUBECONFIG";

fn parse_config_map(text: &str) -> Result<(Option<String>, String), String> {
    parse_ref(text, "ConfigMap", "ingress-status-guard/ingress-status-guard-config")
}

/// `kubectl isg` when run as the kubectl plugin, else the binary's own name.
fn invoked_as() -> String {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    if super::plugin::is_plugin(std::path::Path::new(&argv0)) { "kubectl isg" } else { "ingress-status-guard" }
        .to_owned()
}

fn parse_policy(text: &str) -> Result<String, String> {
    // Policy names are free text in the file; a bound keeps messages and annotations small.
    if text.is_empty() || text.len() > 253 || text.chars().any(char::is_control) {
        return Err(format!("{text:?}: a policy name is 1 to 253 characters without control characters"));
    }
    Ok(text.to_owned())
}

fn parse_status_address(text: &str) -> Result<NewSource, String> {
    NewSource::status_address(text).map_err(|e| e.to_string())
}

impl CutoverArgs {
    fn settings(self) -> Result<Settings, String> {
        let (in_ref, name) = self.config_map;
        let namespace = match (in_ref, self.namespace) {
            (Some(a), Some(b)) if a != b => {
                return Err(format!("`--namespace {b}` and --config-map {a}/{name} name two namespaces; pass one"));
            }
            (a, b) => a.or(b),
        };
        // The `change` group lets at most one of them through.
        let change = match (self.to_publish_service, self.to_publish_status_address, self.to_publish_gateway) {
            (Some(svc), _, _) => Change::To(NewSource::Service(svc)),
            (None, Some(list), _) => Change::To(list),
            (None, None, Some(gw)) => Change::To(NewSource::Gateway(gw)),
            (None, None, None) => Change::Rollback,
        };
        Ok(Settings {
            cluster: self.cluster.cluster(),
            config_map: (namespace, name),
            key: self.key,
            policy: self.policy,
            change,
            dry_run: self.dry_run,
            output: self.output,
            timeout: self.timeout,
            invoked_as: invoked_as(),
        })
    }
}

/// Runs `cutover`: 0 moved (or planned), 1 unresolved or timed out, 2 bad input.
pub(crate) async fn cutover(args: CutoverArgs) -> ExitCode {
    let ran = match args.settings() {
        Ok(settings) => cutover::run(&settings).await.map_err(|e| (e.to_string(), e.exit_code())),
        Err(e) => Err((e, 2)),
    };
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err((e, code)) => {
            eprintln!("error: {e}");
            ExitCode::from(code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_values() {
        assert_eq!(parse_config_map("isg/isg-config"), Ok((Some("isg".into()), "isg-config".into())));
        assert_eq!(parse_config_map("isg-config"), Ok((None, "isg-config".into())));
        assert!(parse_namespace("Bad").is_err());
        for (bad, want) in
            [("Isg", "must be NAMESPACE/NAME or NAME"), ("Isg/x", "namespace \"Isg\""), ("isg/", "name \"\"")]
        {
            assert!(parse_config_map(bad).unwrap_err().contains(want), "{bad}");
        }
        assert!(parse_policy("").is_err() && parse_policy("a\nb").is_err() && parse_policy(&"p".repeat(254)).is_err());
        assert!(parse_status_address("192.0.2.1,lb.example.com").is_ok());
        assert!(parse_status_address("192.0.2.1,not a host").unwrap_err().contains("not a host"));
    }

    #[test]
    fn exactly_one_change_is_required() {
        use clap::Parser as _;
        let parse = |extra: &[&str]| {
            let base = ["isg", "cutover", "--config-map", "a/b", "--policy", "p"];
            super::super::Cli::try_parse_from(base.iter().chain(extra))
        };
        assert!(parse(&[]).unwrap_err().to_string().contains("--to-publish-service"));
        assert!(parse(&["--rollback", "--to-publish-service", "a/b"]).is_err());
        assert!(parse(&["--to-publish-status-address", "192.0.2.1"]).is_ok());
        assert!(parse(&["--to-publish-gateway", "edge/public"]).is_ok());
        assert!(parse(&["--to-publish-gateway", "public"]).unwrap_err().to_string().contains("--to-publish-gateway"));
        assert!(parse(&["--to-publish-gateway", "a/b", "--to-publish-service", "a/b"]).is_err());
        assert!(parse(&["--rollback", "--timeout", "2h"]).unwrap_err().to_string().contains("--timeout"));
    }
}
