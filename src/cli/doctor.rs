//! `doctor`: proves that the webhook works, as the API server sees it: its configuration
//! reviews the status writes of every kind the policies govern, its caBundle verifies the
//! certificate the webhook presents, its Service has ready endpoints, and a server-side dry-run
//! status write of a governed Ingress comes back as the policy's mode says. Each check prints
//! what it found and what to do; `--wait` tries again until healthy or the time is up. Exit
//! codes: `0` healthy, `1` a check failed, `2` doctor itself could not run.

mod presented;
mod report;
mod webhook;
mod write;

use std::{
    process::ExitCode,
    time::{Duration, Instant},
};

use clap::Args;

use super::{check::ClusterArgs, duration::Seconds, output::Format};
use crate::policy::Policies;
use report::Report;

/// Pause between two rounds of `--wait`.
const RETRY: Duration = Duration::from_secs(2);

#[derive(Args, Debug)]
pub(crate) struct DoctorArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The Ingress of a governed class to write to (a dry run, nothing is stored); default: the
    /// first Ingress of a governed class in the cluster.
    #[arg(long, env = "ISG_DOCTOR_PROBE", value_name = "NAMESPACE/NAME", value_parser = parse_probe)]
    pub probe: Option<Probe>,
    /// Try again until every check passes or this time is up (`90s`, `2m`); default: once.
    #[arg(long, env = "ISG_DOCTOR_WAIT", default_value = "0", value_parser = Seconds::ANY)]
    pub wait: Duration,
    /// Output format.
    #[arg(short = 'o', long, env = "ISG_OUTPUT", value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// `--probe`'s Ingress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Probe {
    pub namespace: String,
    pub name: String,
}

fn parse_probe(text: &str) -> Result<Probe, String> {
    match text.split_once('/') {
        Some((namespace, name))
            if crate::names::is_dns1123_label(namespace) && crate::names::is_dns1123_subdomain(name) =>
        {
            Ok(Probe { namespace: namespace.to_owned(), name: name.to_owned() })
        }
        _ => Err(format!("{text:?} must be NAMESPACE/NAME of an Ingress, e.g. default/web")),
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
    let mut said = String::new();
    loop {
        let report = examine(&client, &args, policies).await;
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
async fn examine(client: &kube::Client, args: &DoctorArgs, policies: &Policies) -> Report {
    let timeout = args.cluster.request_timeout;
    let name = &args.cluster.webhook_configuration;
    let (found, webhooks) = webhook::configuration(client, name, policies, timeout).await;
    let mut checks = vec![found];
    for reviewing in &webhooks {
        checks.push(webhook::ca_bundle(reviewing, timeout).await);
        checks.push(webhook::endpoints(client, reviewing, timeout).await);
    }
    let probe = args.probe.as_ref().map(|p| (p.namespace.clone(), p.name.clone()));
    checks.push(write::dry_run(client, probe.as_ref(), policies, timeout).await);
    Report::new(checks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_is_namespace_slash_name() {
        assert_eq!(parse_probe("demo/web"), Ok(Probe { namespace: "demo".into(), name: "web".into() }));
        for bad in ["web", "Demo/web", "demo/", "/web", "demo/Web"] {
            assert!(parse_probe(bad).unwrap_err().contains("must be NAMESPACE/NAME"), "{bad}");
        }
    }
}
