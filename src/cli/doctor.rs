//! `doctor`: proves that admission works as the API server sees it, each check saying what it
//! found and what to do. Exit codes: `0` healthy, `1` a check failed, `2` doctor itself could
//! not run, `130` interrupted (its probe deleted first).

mod access;
mod lease;
mod policies;
mod presented;
mod probe;
mod report;
mod webhook;
mod write;

use std::{
    process::ExitCode,
    time::{Duration, Instant},
};

use clap::Args;

use super::{check::ClusterArgs, duration::Seconds, output::Format, serve::Admission};
use crate::policy::Policies;
use report::{Finding, Report};

/// Pause between two rounds of `--wait`.
const RETRY: Duration = Duration::from_secs(2);

#[derive(Args, Debug)]
pub(crate) struct DoctorArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// How the guard enforces at admission (its `serve --admission`): `webhook` checks the
    /// webhook path, `policy` the guard's admission policies.
    #[arg(long, env = "ISG_ADMISSION", value_enum, default_value_t = Admission::Webhook)]
    pub admission: Admission,
    /// An Ingress of a governed class to write to (a dry run, nothing is stored); default: a
    /// probe Ingress doctor creates in --probe-namespace and deletes.
    #[arg(long, env = "ISG_DOCTOR_PROBE", value_name = "NAMESPACE/NAME", value_parser = parse_probe)]
    pub probe: Option<(String, String)>,
    /// Where doctor creates its probe Ingress (`<lease name>-doctor-probe`); default: the
    /// kubeconfig context's namespace (in a Pod: its own).
    #[arg(long, env = "ISG_DOCTOR_PROBE_NAMESPACE", value_name = "NAMESPACE", value_parser = parse_namespace, conflicts_with = "probe")]
    pub probe_namespace: Option<String>,
    /// The guard's ServiceAccount: whether it may do what its mode needs is asked of the API
    /// server (SubjectAccessReviews); not given: not checked.
    #[arg(long, env = "ISG_DOCTOR_SERVICE_ACCOUNT", value_name = "NAMESPACE/NAME", value_parser = parse_probe)]
    pub service_account: Option<(String, String)>,
    /// Try again until every check passes or this time is up (`90s`, `2m`); default: once.
    #[arg(long, env = "ISG_DOCTOR_WAIT", default_value = "0", value_parser = Seconds::ANY)]
    pub wait: Duration,
    /// Output format.
    #[arg(short = 'o', long, env = "ISG_OUTPUT", value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// `--probe`'s Ingress, `--service-account`'s ServiceAccount: `(namespace, name)`.
fn parse_probe(text: &str) -> Result<(String, String), String> {
    match text.split_once('/') {
        Some((namespace, name))
            if crate::names::is_dns1123_label(namespace) && crate::names::is_dns1123_subdomain(name) =>
        {
            Ok((namespace.to_owned(), name.to_owned()))
        }
        _ => Err(format!("{text:?} must be NAMESPACE/NAME, e.g. default/web")),
    }
}

fn parse_namespace(text: &str) -> Result<String, String> {
    if crate::names::is_dns1123_label(text) {
        Ok(text.to_owned())
    } else {
        Err(format!("{text:?} is not a namespace name (a DNS-1123 label: lowercase letters, digits and '-')"))
    }
}

/// Runs `doctor`: prints the last round's report; its exit code (2 when it could not run).
pub(crate) async fn doctor(args: DoctorArgs, policies: &Policies) -> ExitCode {
    let cluster = args.cluster.cluster();
    let client = match cluster.connect().await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let deadline = Instant::now() + args.wait;
    let leftover = probe::Leftover::default();
    let timeout = args.cluster.request_timeout;
    let mut said = String::new();
    loop {
        // Interrupted (Ctrl-C, or the Job's Pod deleted): the probe is deleted before exiting.
        let report = tokio::select! {
            report = examine(&client, &args, policies, &leftover) => report,
            () = crate::server::shutdown_signal() => {
                if let Some(e) = probe::clean(&client, &leftover, timeout).await {
                    eprintln!("error: {e}");
                }
                return ExitCode::from(130);
            }
        };
        let now = Instant::now();
        if report.healthy || now >= deadline {
            print!("{}", args.output.document(&report, || report.table()));
            return ExitCode::from(report.exit_code());
        }
        if let Some(failed) = report.first_failure() {
            let line = format!("not healthy yet: {}: {}", failed.check, failed.found);
            if line != said {
                eprintln!("{line}; trying again until --wait is up");
                said = line;
            }
        }
        tokio::time::sleep(RETRY.min(deadline - now)).await;
    }
}

/// One round of every check.
async fn examine(client: &kube::Client, args: &DoctorArgs, policies: &Policies, leftover: &probe::Leftover) -> Report {
    let timeout = args.cluster.request_timeout;
    let cluster = args.cluster.cluster();
    let policy_mode = args.admission == Admission::Policy;
    let mut checks = Vec::new();
    let mut reach = None;
    let mut scope_selects_namespaces = false;
    if policy_mode {
        checks.push(policies::admission_policies(client, policies, &cluster.owner, timeout).await);
    } else {
        let name = &args.cluster.webhook_configuration;
        let (found, webhooks) = webhook::configuration(client, name, policies, timeout).await;
        checks.push(found);
        for reviewing in &webhooks {
            checks.push(webhook::ca_bundle(reviewing, timeout).await);
            checks.push(webhook::endpoints(client, reviewing, timeout).await);
        }
        reach = probe::reaches(name, &webhooks).map(|r| r.of(crate::kind::Kind::Ingress).clone());
        scope_selects_namespaces = access::scope_selects_namespaces(name, &webhooks);
    }
    checks.push(dry_run(client, args, policies, reach.as_ref(), leftover).await);
    let lease = &args.cluster.leader_election_lease_name;
    let lease_namespace = args.cluster.leader_election_namespace.as_deref();
    checks.push(match (&args.service_account, lease_namespace) {
        (Some(sa), Some(lease_namespace)) => {
            let guard = access::Guard {
                policy_mode,
                lease_namespace,
                lease,
                webhook_configuration: &args.cluster.webhook_configuration,
                scope_selects_namespaces,
            };
            let needs = access::needs(policies, &guard);
            access::permissions(client, sa, &needs, timeout).await
        }
        (Some(_), None) => Finding::skip(
            "permissions",
            "not checked: the guard's Lease namespace is not known",
            "pass --leader-election-namespace (the guard's namespace)",
        ),
        (None, _) => Finding::skip("permissions", "not checked", "pass --service-account NAMESPACE/NAME of the guard"),
    });
    checks.push(match lease_namespace {
        Some(namespace) => lease::live_holder(client, namespace, lease, timeout).await,
        None => Finding::skip("lease", "not checked", "pass --leader-election-namespace (the guard's namespace)"),
    });
    Report::new(checks)
}

/// The dry-run status write: to `--probe`, or to a probe doctor creates and deletes.
async fn dry_run(
    client: &kube::Client,
    args: &DoctorArgs,
    policies: &Policies,
    reach: Option<&crate::scope::Reach>,
    leftover: &probe::Leftover,
) -> Finding {
    let timeout = args.cluster.request_timeout;
    if let Some(skipped) = write::skipped(policies) {
        return skipped;
    }
    if let Some(p) = &args.probe {
        return match write::named(client, p, policies, timeout).await {
            Ok((ingress, mode)) => write::dry_run(client, &ingress, mode, timeout).await,
            Err(finding) => finding,
        };
    }
    let namespace = args.probe_namespace.clone().unwrap_or_else(|| client.default_namespace().to_owned());
    let name = match probe::name(&args.cluster.leader_election_lease_name) {
        Ok(name) => name,
        Err(e) => return Finding::fail("dry-run-write", e, "pass --probe NAMESPACE/NAME"),
    };
    let (ingress, mode) = match probe::create(client, &namespace, &name, policies, reach, timeout, leftover).await {
        Ok(created) => created,
        Err(finding) => return finding,
    };
    let mut finding = write::dry_run(client, &ingress, mode, timeout).await;
    // Deleted whatever the write proved; a probe left behind is a failure of doctor's to say.
    if let Some(e) = probe::clean(client, leftover, timeout).await {
        finding = Finding::fail("dry-run-write", format!("{}; then {e}", finding.found), "delete it by hand");
    }
    finding
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_is_namespace_slash_name() {
        assert_eq!(parse_probe("demo/web"), Ok(("demo".into(), "web".into())));
        for bad in ["web", "Demo/web", "demo/", "/web", "demo/Web"] {
            assert!(parse_probe(bad).unwrap_err().contains("must be NAMESPACE/NAME"), "{bad}");
        }
        assert_eq!(parse_namespace("isg"), Ok("isg".into()));
        assert!(parse_namespace("Not_one").unwrap_err().contains("is not a namespace name"));
    }
}
