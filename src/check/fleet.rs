//! `check` across clusters: one kubeconfig context per cluster, read concurrently, reported as
//! one table with a CLUSTER column, a summary line per cluster, and a row naming the error of
//! each cluster that could not be read. Rendering is pure; the I/O is [`check_fleet`].

use futures::StreamExt as _;
use serde::Serialize;

use super::{
    CheckError, Cluster, Output, Scope,
    report::{self, ByKind, Report, Row, Summary},
};
use crate::{client::Target, policy::Policies};

/// Clusters read at the same time: enough for a fleet to finish in about one slow cluster's
/// time, few enough that a kubeconfig of hundreds of contexts does not open hundreds of
/// connections (and hold as many reports half-built) at once.
const PARALLEL_CLUSTERS: usize = 16;

/// What was found in one cluster: its report, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// The kubeconfig context the cluster was reached through.
    pub cluster: String,
    pub result: Result<Report, String>,
}

/// The reports of several clusters, in the order their contexts were given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fleet(pub Vec<Outcome>);

/// A row of the JSON report: the single-cluster row with the cluster it is in.
#[derive(Serialize)]
struct FleetRow<'a> {
    cluster: &'a str,
    #[serde(flatten)]
    row: &'a Row,
}

/// A cluster's entry in the JSON report: its summary, or its error.
#[derive(Serialize)]
struct ClusterEntry<'a> {
    cluster: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<&'a Summary>,
    #[serde(rename = "byKind", skip_serializing_if = "Option::is_none")]
    by_kind: Option<&'a ByKind>,
    #[serde(rename = "gatewayPolicies", skip_serializing_if = "Option::is_none")]
    gateway_policies: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

#[derive(Serialize)]
struct FleetJson<'a> {
    ingresses: Vec<FleetRow<'a>>,
    clusters: Vec<ClusterEntry<'a>>,
}

impl Fleet {
    /// As for one cluster (0 canonical, 1 drift or unresolved) over the clusters that could be
    /// read; an error (exit 2) only when none could.
    pub(crate) fn exit_code(&self) -> Result<u8, CheckError> {
        let reports: Vec<&Report> = self.0.iter().filter_map(|o| o.result.as_ref().ok()).collect();
        if reports.is_empty() {
            return Err(CheckError::EveryClusterFailed);
        }
        Ok(reports.iter().map(|r| r.exit_code()).max().unwrap_or(0))
    }

    /// One table: the rows of every cluster, then a row per cluster that failed (STATE
    /// `ERROR`, then the error), then one summary line per cluster, in the order given.
    pub(crate) fn table(&self) -> String {
        // The same policies in every cluster: if one report covers Gateways, all read do.
        let kinds = self.0.iter().any(|o| o.result.as_ref().is_ok_and(Report::kinds));
        let header = report::header(kinds);
        let mut lines = Vec::new();
        let mut summaries = String::new();
        for Outcome { cluster, result } in &self.0 {
            match result {
                Ok(report) => {
                    for row in &report.ingresses {
                        lines.push(std::iter::once(cluster.clone()).chain(row.cells(kinds)).collect());
                    }
                    summaries.extend(report.summary_lines().iter().map(|line| format!("cluster {cluster}: {line}\n")));
                }
                // The error is in the cluster's row; said once is enough.
                Err(_) => summaries.push_str(&format!("cluster {cluster}: not read (ERROR row above)\n")),
            }
        }
        // Error rows after every report's rows, so a reader scanning the table sees them last.
        for Outcome { cluster, result } in &self.0 {
            if let Err(error) = result {
                let mut line = vec![cluster.clone()];
                line.extend(std::iter::repeat_n("-".to_owned(), header.len() - 1));
                line.push(format!("ERROR ({error})"));
                lines.push(line);
            }
        }
        let mut out = String::new();
        if !lines.is_empty() {
            let header = std::iter::once("CLUSTER".to_owned()).chain(header).collect();
            out = report::align(std::iter::once(header).chain(lines));
        }
        out.push_str(&summaries);
        out
    }

    /// One JSON document: every cluster's rows with a `cluster` field, and each cluster's
    /// summary or error.
    pub(crate) fn json(&self) -> String {
        let ingresses = self
            .0
            .iter()
            .filter_map(|o| Some((o.cluster.as_str(), o.result.as_ref().ok()?)))
            .flat_map(|(cluster, report)| report.ingresses.iter().map(move |row| FleetRow { cluster, row }))
            .collect();
        let clusters = self
            .0
            .iter()
            .map(|o| ClusterEntry {
                cluster: &o.cluster,
                summary: o.result.as_ref().ok().map(|r| &r.summary),
                by_kind: o.result.as_ref().ok().map(|r| &r.by_kind),
                gateway_policies: o.result.as_ref().ok().and_then(|r| r.gateway_policies),
                error: o.result.as_ref().err().map(String::as_str),
            })
            .collect();
        serde_json::to_string_pretty(&FleetJson { ingresses, clusters })
            .expect("a report of strings and numbers always serializes")
            + "\n"
    }
}

/// Runs `check` in each context of `base`'s kubeconfig, concurrently (an unreachable cluster
/// costs the fleet one `--request-timeout`), prints one report and returns its exit code.
pub(crate) async fn check_fleet(
    contexts: Vec<String>,
    base: &Cluster,
    scope: Scope<'_>,
    output: Output,
    policies: &Policies,
) -> Result<u8, CheckError> {
    if contexts.is_empty() {
        return Err(CheckError::NoContexts);
    }
    let outcomes = futures::stream::iter(contexts)
        .map(|context| async move {
            let cluster = Cluster {
                target: Target { kubeconfig: base.target.kubeconfig.clone(), context: Some(context.clone()) },
                request_timeout: base.request_timeout,
                webhook_configuration: base.webhook_configuration.clone(),
                owner: base.owner.clone(),
            };
            let result = super::report(&cluster, scope, policies).await.map_err(|e| e.to_string());
            Outcome { cluster: context, result }
        })
        .buffered(PARALLEL_CLUSTERS)
        .collect()
        .await;
    let fleet = Fleet(outcomes);
    print!("{}", output.render(|| fleet.json(), || fleet.table()));
    fleet.exit_code()
}

#[cfg(test)]
mod tests;
