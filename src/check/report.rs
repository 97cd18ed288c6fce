//! The drift report: one row per governed Ingress or Gateway, the summary of each kind, and
//! the text and JSON it is printed as. Pure.

use std::fmt::Write as _;

use serde::Serialize;

use super::Kind;
use crate::{
    address::{Address, Addresses},
    decision::{Verdict, decide},
    kind::{Entry, Governed, Write},
    policy::{Policies, Policy, SourceList},
    sources::Sources,
};

/// How a governed object's stored status compares with the canonical one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum State {
    Ok,
    /// Governed by a trusted-writer policy: the stored status stands as its writer wrote it,
    /// with nothing to compare it with.
    Trusted,
    Drift,
    Unresolved,
}

impl State {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            State::Ok => "OK",
            State::Trusted => "TRUSTED",
            State::Drift => "DRIFT",
            State::Unresolved => "UNRESOLVED",
        }
    }
}

/// A status list in its kind's own shape: JSON shows each entry as the API stores it (an
/// Ingress's `{ip, hostname, ports}`, a Gateway's `{type, value}`), the table as logs do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub(crate) struct Entries {
    json: serde_json::Value,
    #[serde(skip)]
    shown: String,
}

impl Entries {
    pub(crate) fn of<E: Entry>(list: &[E]) -> Entries {
        // Plain data with string keys: serializing it cannot fail.
        Entries { json: serde_json::to_value(list).unwrap_or_default(), shown: Addresses(list).to_string() }
    }
}

impl std::fmt::Display for Entries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

/// One governed Ingress or Gateway in the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Row {
    #[serde(serialize_with = "label")]
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    pub class: Option<String>,
    pub policy: String,
    pub mode: String,
    pub source: String,
    pub stored: Entries,
    /// `None` while the source is unresolved.
    pub canonical: Option<Entries>,
    pub state: State,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A stored object as `check` read it: its write, and who wrote its status last.
pub(crate) type Read<E> = (Write<E>, Option<LastWriter>);

/// Who wrote a stored status last, as `managedFields` says: a field manager (what the client
/// calls itself; the API server records no user in an object), the operation and its time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LastWriter {
    manager: String,
    at: String,
}

impl LastWriter {
    /// As `check`'s table says it: `last written by field manager "traefik" (Update at <time>)`.
    pub(crate) fn short(&self) -> String {
        format!("last written by field manager {:?}{}", self.manager, self.at)
    }
}

impl std::fmt::Display for LastWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "field manager {:?}{}; a manager names the writing client, its user agent by default, not the user",
            self.manager, self.at
        )
    }
}

/// The entry of the `status` subresource that owns `f:status` and was written last, its
/// strings cut and escaped.
pub(crate) fn last_status_writer(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<LastWriter> {
    let owns_status = |entry: &&k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry| {
        entry.subresource.as_deref() == Some("status")
            && entry.fields_v1.as_ref().is_some_and(|fields| fields.0.get("f:status").is_some())
    };
    let entries = meta.managed_fields.as_deref().unwrap_or_default();
    // The latest by time; of equal times, the later entry.
    let last = entries.iter().filter(owns_status).enumerate().max_by(|a, b| (&a.1.time, a.0).cmp(&(&b.1.time, b.0)))?.1;
    let cut = |text: &str| crate::names::escape_control(&crate::names::truncate(text, usize::MAX, 128)).into_owned();
    let manager = cut(last.manager.as_deref().unwrap_or(""));
    let operation = cut(last.operation.as_deref().unwrap_or("?"));
    let at = last.time.as_ref().map_or_else(|| format!(" ({operation})"), |t| format!(" ({operation} at {})", t.0));
    Some(LastWriter { manager, at })
}

/// A kind as JSON says it: its label (`ingress`, `gateway`).
fn label<S: serde::Serializer>(kind: &Kind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(kind.label())
}

/// The columns when only Ingresses are reported (kept for the scripts that read the table).
pub(super) const HEADER: [&str; 6] = ["INGRESS", "POLICY", "SOURCE", "STORED", "CANONICAL", "STATE"];
/// The columns when the report covers Gateways: the kind, then the object's name.
pub(super) const HEADER_KINDS: [&str; 7] = ["KIND", "NAME", "POLICY", "SOURCE", "STORED", "CANONICAL", "STATE"];

/// The header of a table with or without the KIND column.
pub(super) fn header(kinds: bool) -> Vec<String> {
    if kinds { HEADER_KINDS.map(String::from).to_vec() } else { HEADER.map(String::from).to_vec() }
}

/// The verdict as a row's policy, state, canonical list (in `shape`) and reason; `None` when
/// no policy governs the object.
type Judged<'p> = (&'p Policy, State, Option<Entries>, Option<String>);

fn judged<'p>(
    verdict: &Verdict<'p>,
    sources: &dyn Sources,
    stored: &Entries,
    shape: impl Fn(&[Address]) -> Entries,
) -> Option<Judged<'p>> {
    Some(match verdict {
        Verdict::Ignored(_) | Verdict::NotGoverned => return None,
        // The same lookup `decide` compared with; stored equals it as a set.
        Verdict::Canonical { policy } => {
            (*policy, State::Ok, Some(sources.canonical(policy).map_or_else(|_| stored.clone(), |c| shape(&c))), None)
        }
        Verdict::Trusted { policy } => (*policy, State::Trusted, None, None),
        Verdict::Mismatch { policy, canonical, .. } => (*policy, State::Drift, Some(shape(canonical)), None),
        Verdict::Unresolved { policy, reason, .. } => (*policy, State::Unresolved, None, Some(reason.to_string())),
    })
}

impl Row {
    /// The row's table cells, under [`header`] (`kinds`: with the KIND column).
    pub(super) fn cells(&self, kinds: bool) -> Vec<String> {
        let state = match &self.reason {
            Some(reason) => format!("{} ({reason})", self.state.as_str()),
            None => self.state.as_str().to_owned(),
        };
        let mut cells = Vec::with_capacity(HEADER_KINDS.len());
        if kinds {
            cells.push(self.kind.label().to_owned());
        }
        cells.extend([
            format!("{}/{}", self.namespace, self.name),
            self.policy.clone(),
            self.source.clone(),
            self.stored.to_string(),
            self.canonical.as_ref().map_or_else(|| "?".to_owned(), ToString::to_string),
            state,
        ]);
        cells
    }

    /// The row of a stored object's decided status; `None` when no policy governs it.
    pub(super) fn of<K: Governed>(
        write: &Write<K::Entry>,
        verdict: &Verdict<'_>,
        sources: &dyn Sources,
    ) -> Option<Row> {
        let stored = Entries::of(&write.addresses);
        // A canonical set the kind cannot hold is unresolved, never compared: no row shows it.
        let shape = |c: &[Address]| K::entries(c).map_or_else(|_| Entries::of::<K::Entry>(&[]), |e| Entries::of(&e));
        let (policy, state, canonical, reason) = judged(verdict, sources, &stored, shape)?;
        Some(Row {
            kind: K::KIND,
            namespace: write.namespace.clone(),
            name: write.name.clone(),
            class: write.class.clone(),
            policy: policy.name.clone(),
            mode: policy.mode.to_string(),
            source: SourceList(&policy.sources).to_string(),
            stored,
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

impl Summary {
    fn count(&mut self, state: State) {
        self.governed += 1;
        match state {
            // Nothing to be off from: the stored status is what its trusted writer wrote.
            State::Ok | State::Trusted => self.ok += 1,
            State::Drift => self.drift += 1,
            State::Unresolved => self.unresolved += 1,
        }
    }

    fn add(&mut self, other: &Summary) {
        self.governed += other.governed;
        self.ok += other.ok;
        self.drift += other.drift;
        self.unresolved += other.unresolved;
        self.not_governed += other.not_governed;
    }
}

/// The summary of each kind the report covers ([`Kind::index`]); a kind not read is absent.
/// JSON names each by its label: `{"ingress": {...}, "gateway": {...}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ByKind(pub [Option<Summary>; Kind::ALL.len()]);

impl ByKind {
    /// The summary of `kind`, if it was read.
    pub(crate) fn of(&self, kind: Kind) -> Option<&Summary> {
        self.0[kind.index()].as_ref()
    }
}

impl Serialize for ByKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(Kind::ALL.into_iter().filter_map(|k| Some((k.label(), self.of(k)?))))
    }
}

/// Said when Gateway policies are configured and the API server serves no Gateways.
pub(crate) const GATEWAYS_INACTIVE: &str =
    "inactive: the API server serves no Gateways (the Gateway API CRDs are not installed)";

/// The drift report of `check`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Report {
    /// Every governed object, each row with its `kind` (the name is the wire's).
    pub ingresses: Vec<Row>,
    /// Over every kind read: with Ingresses only, the Ingress summary.
    pub summary: Summary,
    pub by_kind: ByKind,
    /// [`GATEWAYS_INACTIVE`] when it applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway_policies: Option<&'static str>,
    /// The admission policies found in the cluster for the policies, when there are any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub admission_policies: Vec<super::admission::Row>,
}

impl Report {
    /// Adds the stored objects of one kind, each decided as the webhook would decide a write
    /// of its stored status (a trusted-writer policy's rows say who wrote it last); `None`: the
    /// API server does not serve the kind (a CRD), which the report says.
    pub(crate) fn add_read<K: Governed>(
        &mut self,
        stored: Option<&[Read<K::Entry>]>,
        policies: &Policies,
        sources: &dyn Sources,
    ) {
        let kind = K::KIND;
        let summary = match stored {
            None => {
                if policies.of(kind).next().is_some() {
                    self.gateway_policies = Some(GATEWAYS_INACTIVE);
                }
                Summary::default()
            }
            Some(stored) => {
                let mut summary = Summary::default();
                let mut governed: Vec<Row> = stored
                    .iter()
                    .filter_map(|(write, writer)| {
                        let Some(mut row) = Row::of::<K>(write, &decide::<K>(write, policies, sources), sources) else {
                            summary.not_governed += 1;
                            return None;
                        };
                        if row.state == State::Trusted {
                            row.reason = writer.as_ref().map(LastWriter::short);
                        }
                        Some(row)
                    })
                    .collect();
                governed.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
                governed.iter().for_each(|row| summary.count(row.state));
                self.ingresses.extend(governed);
                self.summary.add(&summary);
                summary
            }
        };
        self.by_kind.0[kind.index()] = Some(summary);
    }

    /// Whether the table has a KIND column: the report covers Gateways.
    pub(crate) fn kinds(&self) -> bool {
        self.by_kind.of(Kind::Gateway).is_some()
    }

    /// 0 when every governed object is canonical, 1 when any drifts or cannot be judged, or
    /// an admission policy lags the sources.
    pub(crate) fn exit_code(&self) -> u8 {
        let stale = self
            .admission_policies
            .iter()
            .any(|r| matches!(r.state, super::admission::State::Stale | super::admission::State::Foreign));
        u8::from(self.summary.drift + self.summary.unresolved > 0 || stale)
    }

    /// One line per kind read, then the line saying Gateway policies are inactive, if they are.
    pub(crate) fn summary_lines(&self) -> Vec<String> {
        let line = |what: &str, s: &Summary| {
            format!(
                "governed {what}: {} ({} OK, {} DRIFT, {} UNRESOLVED); not governed: {}",
                s.governed, s.ok, s.drift, s.unresolved, s.not_governed
            )
        };
        let mut lines = Vec::new();
        for kind in Kind::ALL {
            let listed = crate::kind::with_kind!(kind, K => <K as super::Explained>::LISTED);
            lines.extend(self.by_kind.of(kind).map(|s| line(listed, s)));
        }
        lines.extend(self.gateway_policies.map(|note| format!("Gateway policies: {note}")));
        lines
    }

    /// An aligned table, one line per governed object, then the summary lines.
    pub(crate) fn table(&self) -> String {
        let mut out = String::new();
        if !self.ingresses.is_empty() {
            let kinds = self.kinds();
            out = align(std::iter::once(header(kinds)).chain(self.ingresses.iter().map(|row| row.cells(kinds))));
        }
        out.extend(self.summary_lines().into_iter().map(|line| line + "\n"));
        out.extend(self.admission_policies.iter().map(|row| format!("admission policy: {}\n", row.shown())));
        out
    }

    pub(crate) fn json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report of strings and numbers always serializes") + "\n"
    }
}

/// Lines of cells in columns two spaces apart, each padded to its widest cell but the last
/// (free text such as a reason or an error), one line each, trailing spaces trimmed.
pub(crate) fn align(lines: impl IntoIterator<Item = Vec<String>>) -> String {
    // A cell may hold text a tenant chose (a hostname annotation, a writer's name): a control
    // character in it is written as an escape, so a line break cannot print a row of its own.
    let escaped = |line: Vec<String>| line.into_iter().map(|c| crate::names::escape_control(&c).into_owned()).collect();
    let lines: Vec<Vec<String>> = lines.into_iter().map(escaped).collect();
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
