//! The drift report: one row per governed Ingress, its summary, and the text and JSON it is
//! printed as. Pure.

use std::fmt::Write as _;

use serde::Serialize;

use crate::{
    address::{Address, Addresses},
    decision::{Verdict, decide},
    ingress::StatusWrite,
    policy::{Policies, SourceList},
    sources::Sources,
};

/// How a governed Ingress's stored status compares with the canonical one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum State {
    Ok,
    Drift,
    Unresolved,
}

impl State {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            State::Ok => "OK",
            State::Drift => "DRIFT",
            State::Unresolved => "UNRESOLVED",
        }
    }
}

/// One governed Ingress in the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Row {
    pub namespace: String,
    pub name: String,
    pub class: Option<String>,
    pub policy: String,
    pub mode: String,
    pub source: String,
    pub stored: Vec<Address>,
    /// `None` while the source is unresolved.
    pub canonical: Option<Vec<Address>>,
    pub state: State,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The columns of the table, one per [`Row::cells`].
pub(super) const HEADER: [&str; 6] = ["INGRESS", "POLICY", "SOURCE", "STORED", "CANONICAL", "STATE"];

impl Row {
    /// The row's table cells, under [`HEADER`].
    pub(super) fn cells(&self) -> [String; 6] {
        let state = match &self.reason {
            Some(reason) => format!("{} ({reason})", self.state.as_str()),
            None => self.state.as_str().to_owned(),
        };
        [
            format!("{}/{}", self.namespace, self.name),
            self.policy.clone(),
            self.source.clone(),
            Addresses(&self.stored).to_string(),
            self.canonical.as_deref().map_or_else(|| "?".to_owned(), |c| Addresses(c).to_string()),
            state,
        ]
    }

    /// The row of a decided write; `None` when no policy governs it.
    pub(super) fn of(write: &StatusWrite, verdict: &Verdict<'_>, sources: &dyn Sources) -> Option<Row> {
        let (policy, state, canonical, reason) = match verdict {
            Verdict::Ignored(_) | Verdict::NotGoverned => return None,
            // The same lookup `decide` compared with; stored equals it as a set.
            Verdict::Canonical { policy } => (
                policy,
                State::Ok,
                Some(sources.canonical(policy).map_or_else(|_| write.addresses.clone(), std::borrow::Cow::into_owned)),
                None,
            ),
            Verdict::Mismatch { policy, canonical, .. } => (policy, State::Drift, Some(canonical.to_vec()), None),
            Verdict::Unresolved { policy, reason, .. } => (policy, State::Unresolved, None, Some(reason.to_string())),
        };
        Some(Row {
            namespace: write.namespace.clone(),
            name: write.name.clone(),
            class: write.class.clone(),
            policy: policy.name.clone(),
            mode: policy.mode.to_string(),
            source: SourceList(&policy.sources).to_string(),
            stored: write.addresses.clone(),
            canonical,
            state,
            reason,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Summary {
    pub governed: usize,
    pub ok: usize,
    pub drift: usize,
    pub unresolved: usize,
    pub not_governed: usize,
}

/// The drift report of `check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Report {
    pub ingresses: Vec<Row>,
    pub summary: Summary,
    /// The admission policies found in the cluster for the policies, when there are any.
    #[serde(rename = "admissionPolicies", skip_serializing_if = "Vec::is_empty")]
    pub admission_policies: Vec<super::admission::Row>,
}

impl Report {
    /// Decides every stored Ingress, as the webhook would decide a write of its stored status.
    pub(crate) fn build(stored: &[StatusWrite], policies: &Policies, sources: &dyn Sources) -> Report {
        let mut summary = Summary::default();
        let mut ingresses: Vec<Row> = stored
            .iter()
            .filter_map(|write| {
                let row = Row::of(write, &decide(write, policies, sources), sources);
                if row.is_none() {
                    summary.not_governed += 1;
                }
                row
            })
            .collect();
        ingresses.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        for row in &ingresses {
            match row.state {
                State::Ok => summary.ok += 1,
                State::Drift => summary.drift += 1,
                State::Unresolved => summary.unresolved += 1,
            }
        }
        summary.governed = ingresses.len();
        Report { ingresses, summary, admission_policies: Vec::new() }
    }

    /// 0 when every governed Ingress is canonical, 1 when any drifts or cannot be judged, or
    /// an admission policy lags the sources.
    pub(crate) fn exit_code(&self) -> u8 {
        let stale = self.admission_policies.iter().any(|r| r.state == super::admission::State::Stale);
        u8::from(self.summary.drift + self.summary.unresolved > 0 || stale)
    }

    pub(crate) fn summary_line(&self) -> String {
        let s = &self.summary;
        format!(
            "governed Ingresses: {} ({} OK, {} DRIFT, {} UNRESOLVED); not governed: {}",
            s.governed, s.ok, s.drift, s.unresolved, s.not_governed
        )
    }

    /// An aligned table, one line per governed Ingress, then the summary line.
    pub(crate) fn table(&self) -> String {
        let mut out = String::new();
        if !self.ingresses.is_empty() {
            let header = HEADER.map(String::from).to_vec();
            out = align(std::iter::once(header).chain(self.ingresses.iter().map(|row| row.cells().to_vec())));
        }
        out.push_str(&self.summary_line());
        out.push('\n');
        for row in &self.admission_policies {
            out.push_str(&format!("admission policy: {}\n", row.shown()));
        }
        out
    }

    pub(crate) fn json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report of strings and numbers always serializes") + "\n"
    }
}

/// Lines of cells in columns two spaces apart, each padded to its widest cell but the last
/// (free text such as a reason or an error), one line each, trailing spaces trimmed.
pub(crate) fn align(lines: impl IntoIterator<Item = Vec<String>>) -> String {
    let lines: Vec<Vec<String>> = lines.into_iter().collect();
    let columns = lines.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| lines.iter().filter_map(|l| l.get(i)).map(|c| c.chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for line in &lines {
        let mut text = String::new();
        for (i, cell) in line.iter().enumerate() {
            if i + 1 == line.len() {
                text.push_str(cell);
            } else {
                let _ = write!(text, "{cell:<width$}  ", width = widths[i]);
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}
