//! The flags of `check` and `explain`: how to reach the cluster, and what to report on.

use std::time::Duration;

use clap::{ArgAction, Args};

use super::{client::ClientArgs, duration::Seconds};
use crate::{
    admission_policy::desired::Owner,
    check::{self, CheckError, Cluster, Kind, ObjectRef, Output, Scope},
    client,
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
    /// The guard's MutatingWebhookConfiguration, which scopes the reconciler: an object outside
    /// the namespaceSelectors of the webhooks whose rules review its kind's status writes is
    /// judged as not governed, as `serve` does. No such configuration
    /// (as with --admission=policy), or empty: the policies' namespaceSelectors alone.
    #[arg(long, env = "ISG_WEBHOOK_CONFIGURATION", default_value = crate::scope::DEFAULT_CONFIGURATION)]
    pub webhook_configuration: String,
    /// The guard's leader Lease (`serve --leader-election-lease-name`; the chart's release
    /// fullname), whose name its admission policies are named by (`--admission=policy`).
    #[arg(long, env = "ISG_LEADER_ELECTION_LEASE_NAME", default_value = crate::admission_policy::DEFAULT_LEASE)]
    pub leader_election_lease_name: String,
    /// Namespace of that Lease (the guard's): then an admission policy of the guard's name
    /// labelled as another Lease's is shown FOREIGN. Not given: any owner's is read as the
    /// guard's.
    #[arg(long, env = "ISG_LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
}

const KUBECONFIG_HELP: &str =
    "kubeconfig to read Ingresses and publish Services with; default: in-cluster config, then KUBECONFIG";

impl ClusterArgs {
    pub(crate) fn cluster(&self) -> Cluster {
        Cluster {
            target: self.client.target(),
            request_timeout: self.request_timeout,
            webhook_configuration: self.webhook_configuration.clone(),
            owner: self.leader_election_namespace.as_deref().map_or_else(
                || Owner { label: String::new(), lease: self.leader_election_lease_name.clone(), legacy: Vec::new() },
                |namespace| Owner::new(namespace, &self.leader_election_lease_name),
            ),
        }
    }
}

#[derive(Args, Debug)]
#[command(mut_arg("context", |a| a.action(ArgAction::Append).help(CONTEXT_HELP)))]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Check every context of the kubeconfig, one cluster each (a fleet).
    #[arg(long, env = "ISG_ALL_CONTEXTS", conflicts_with = "context")]
    pub all_contexts: bool,
    /// Only Ingresses in this namespace; default: all namespaces.
    #[arg(short = 'n', long, env = "ISG_NAMESPACE", value_parser = parse_namespace)]
    pub namespace: Option<String>,
    /// Only objects of this kind: `ingress` or `gateway`; default: Ingresses, and Gateways
    /// when a policy governs Gateways.
    #[arg(long, env = "ISG_KIND", value_enum)]
    pub kind: Option<Kind>,
    /// Output format: an aligned table (`text` is the same), or one JSON or YAML document.
    #[arg(short = 'o', long, env = "ISG_OUTPUT", value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

const CONTEXT_HELP: &str = "Context of the kubeconfig to check; repeat it to check several clusters in one table (with a CLUSTER column); default: its current-context";

/// `--kind`'s values: each kind's label (`ingress`, `gateway`, `service`).
impl clap::ValueEnum for Kind {
    fn value_variants<'a>() -> &'a [Self] {
        &Kind::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.label()))
    }
}

#[derive(Args, Debug)]
pub(crate) struct ExplainArgs {
    /// The Ingress to explain: NAMESPACE/NAME, or NAME in --namespace (default: the context's
    /// namespace, as kubectl does); or an object of a kind: KIND/NAMESPACE/NAME, with KIND
    /// `gateway`, `service` or `ingress`.
    #[arg(value_name = "[gateway/][NAMESPACE/]NAME", value_parser = parse_explain_ref)]
    pub object: ObjectRef,
    /// Namespace of the Ingress, when it is given as NAME.
    #[arg(short = 'n', long, env = "ISG_NAMESPACE", value_parser = parse_namespace)]
    pub namespace: Option<String>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Output format: labelled lines (`table` or `text`), or one JSON or YAML document
    /// (`{"lines": [{"label", "value"}], "exitCode"}`).
    #[arg(short = 'o', long, env = "ISG_OUTPUT", value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// A `--namespace` value (also `cutover`'s).
pub(super) fn parse_namespace(text: &str) -> Result<String, String> {
    if crate::names::is_dns1123_label(text) {
        Ok(text.to_owned())
    } else {
        Err(format!("{text:?} is not a valid namespace name (lowercase letters, digits and '-', at most 63)"))
    }
}

/// `<kind>/NAMESPACE/NAME` with a kind's label (`gateway/edge/gw`) is an object of that kind;
/// anything else an Ingress reference (`gateway/NAME` is Ingress NAME in namespace `gateway`).
fn parse_explain_ref(text: &str) -> Result<ObjectRef, String> {
    let of_kind = |kind: &Kind| Some((*kind, text.strip_prefix(kind.label())?.strip_prefix('/')?));
    let (kind, text) = match Kind::ALL.iter().find_map(of_kind).filter(|(_, rest)| rest.contains('/')) {
        Some(found) => found,
        None => (Kind::ALL[0], text),
    };
    parse_ingress_ref(text).map(|(namespace, name)| ObjectRef { kind, namespace, name })
}

fn parse_ingress_ref(text: &str) -> Result<(Option<String>, String), String> {
    parse_ref(text, "Ingress", "default/web")
}

/// `NAMESPACE/NAME` or `NAME` of an object of kind `kind`; errors show `example`.
pub(super) fn parse_ref(text: &str, kind: &str, example: &str) -> Result<(Option<String>, String), String> {
    let shape = || format!("{text:?} must be NAMESPACE/NAME or NAME, e.g. {example}");
    let (namespace, name) = match text.split_once('/') {
        Some((namespace, name)) => (Some(namespace), name),
        None => (None, text),
    };
    if let Some(namespace) = namespace.filter(|ns| !crate::names::is_dns1123_label(ns)) {
        return Err(format!("{}: namespace {namespace:?} is not a valid namespace name", shape()));
    }
    if !crate::names::is_dns1123_subdomain(name) {
        return Err(format!("{}: name {name:?} is not a valid {kind} name", shape()));
    }
    Ok((namespace.map(str::to_owned), name.to_owned()))
}

/// Runs `check`: one cluster's report, or several contexts' (or `--all-contexts`) fleet report;
/// the exit code is the report's (or 2 on error).
pub(crate) async fn check(args: CheckArgs, policies: &Policies) -> std::process::ExitCode {
    let CheckArgs { cluster, all_contexts, namespace, kind, output } = args;
    let scope = Scope { namespace: namespace.as_deref(), kind };
    let contexts = if all_contexts {
        match client::context_names(cluster.client.kubeconfig.as_deref()) {
            Ok(names) => names,
            Err(e) => return check::exit(Err(client::RequestError::from(e).into())),
        }
    } else {
        let mut given = cluster.client.context.clone();
        // `--context a --context a` is one cluster, checked once.
        let mut seen = std::collections::HashSet::new();
        given.retain(|c| seen.insert(c.clone()));
        if given.len() < 2 {
            let one = ClusterArgs { client: ClientArgs { context: given, ..cluster.client }, ..cluster };
            return check::exit(check::check(&one.cluster(), scope, output, policies).await);
        }
        given
    };
    check::exit(check::check_fleet(contexts, &cluster.cluster(), scope, output, policies).await)
}

/// Runs `explain` with its validated policies; the exit code is the explanation's (or 2).
pub(crate) async fn explain(args: ExplainArgs, policies: &Policies) -> std::process::ExitCode {
    let ExplainArgs { object: ObjectRef { kind, namespace: in_ref, name }, namespace, cluster, output } = args;
    let namespace = match (in_ref, namespace) {
        (Some(a), Some(b)) if a != b => {
            return check::exit(Err(CheckError::TwoNamespaces { flag: b, namespace: a, name }));
        }
        (a, b) => a.or(b),
    };
    check::exit(check::explain_one(&cluster.cluster(), ObjectRef { kind, namespace, name }, policies, output).await)
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
        assert_eq!(parse_ingress_ref("default/web"), Ok((Some("default".into()), "web".into())));
        assert_eq!(parse_ingress_ref("web"), Ok((None, "web".into())));
        for (bad, want) in [
            ("Web", "must be NAMESPACE/NAME or NAME"),
            ("", "name \"\""),
            ("Default/web", "namespace \"Default\""),
            ("default/", "name \"\""),
            ("a/b/c", "name \"b/c\""),
        ] {
            assert!(parse_ingress_ref(bad).unwrap_err().contains(want), "{bad}");
        }
        let object = |kind, namespace: Option<&str>, name: &str| ObjectRef {
            kind,
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        };
        assert_eq!(parse_explain_ref("gateway/edge/gw"), Ok(object(Kind::Gateway, Some("edge"), "gw")));
        assert_eq!(parse_explain_ref("default/web"), Ok(object(Kind::Ingress, Some("default"), "web")));
        assert_eq!(parse_explain_ref("ingress/shop/web"), Ok(object(Kind::Ingress, Some("shop"), "web")));
        // One slash: Ingress `web` in namespace `gateway`, as before Gateways.
        assert_eq!(parse_explain_ref("gateway/web"), Ok(object(Kind::Ingress, Some("gateway"), "web")));
    }
}
