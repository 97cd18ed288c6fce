//! `check` and `explain`: the drift report operators and CI run. Stored Ingresses and their
//! sources are read with one-shot GETs, then judged by the webhook's own [`decide`] (and, for
//! `explain`, answered by its own [`render`]). Pure report building from values; the I/O is the
//! thin async functions at the end. Nothing is written to the cluster.

use std::{
    collections::{BTreeMap, HashMap},
    fmt::Write as _,
    path::PathBuf,
    process::ExitCode,
    time::Duration,
};

use clap::{Args, ValueEnum};
use k8s_openapi::api::{core::v1::Service, networking::v1::Ingress};
use kube::{Api, Client, api::ListParams};
use serde::Serialize;

use crate::{
    address::{Address, Addresses, PortStatus},
    client::{self, ClientError},
    decision::{StatusWrite, Verdict, decide, subject},
    names::truncate,
    policy::{PodsRef, Policies, Policy, ServiceRef, Source, SourceList},
    review::{ApiVersion, Review, Target, User},
    review::{StatusShape, render},
    sources::nodeip::{self, NodeAddrs, PodFacts},
    sources::service::{self, ServiceError},
    sources::{Sources, Unresolved},
};

const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";
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

/// Where an Ingress's class was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClassFrom {
    Field,
    Annotation,
    Neither,
}

/// A stored Ingress as the decision sees it, plus what `explain` shows about how it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    pub write: StatusWrite,
    pub class_from: ClassFrom,
    pub object_uid: Option<String>,
    pub shape: StatusShape,
}

impl Stored {
    /// Reads an Ingress as the webhook reads a status write of it: the class from
    /// `spec.ingressClassName`, else the legacy annotation.
    pub(crate) fn of(ingress: &Ingress) -> Stored {
        let field = ingress.spec.as_ref().and_then(|s| s.ingress_class_name.clone());
        let annotation = ingress.metadata.annotations.as_ref().and_then(|a| a.get(CLASS_ANNOTATION)).cloned();
        let class_from = match (&field, &annotation) {
            (Some(_), _) => ClassFrom::Field,
            (None, Some(_)) => ClassFrom::Annotation,
            (None, None) => ClassFrom::Neither,
        };
        let lb = ingress.status.as_ref().map(|s| s.load_balancer.as_ref());
        let shape = match lb {
            None => StatusShape::NoStatus,
            Some(None) => StatusShape::NoLoadBalancer,
            Some(Some(lb)) if lb.ingress.is_none() => StatusShape::NoIngressList,
            Some(Some(_)) => StatusShape::IngressList,
        };
        let addresses = lb
            .flatten()
            .and_then(|lb| lb.ingress.as_ref())
            .map(|entries| {
                entries
                    .iter()
                    .map(|e| Address {
                        ip: e.ip.clone(),
                        hostname: e.hostname.clone(),
                        ports: e
                            .ports
                            .iter()
                            .flatten()
                            .map(|p| PortStatus { port: p.port, protocol: p.protocol.clone(), error: p.error.clone() })
                            .collect(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Stored {
            write: StatusWrite {
                namespace: ingress.metadata.namespace.clone().unwrap_or_default(),
                name: ingress.metadata.name.clone().unwrap_or_default(),
                class: field.or(annotation),
                addresses,
            },
            class_from,
            object_uid: ingress.metadata.uid.clone(),
            shape,
        }
    }
}

/// A publish Service as one GET found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fetched {
    Missing,
    /// Its addresses (ports kept, as the watch cache holds them) and the rule that gave them.
    Found {
        addresses: Result<Vec<Address>, ServiceError>,
        rule: String,
    },
}

impl Fetched {
    pub(crate) fn of(svc: Option<&Service>) -> Fetched {
        match svc {
            None => Fetched::Missing,
            Some(svc) => Fetched::Found { addresses: service::addresses(svc, true), rule: service::rule(svc) },
        }
    }
}

/// The publish Services of the policies, and the cluster facts their matching and node-IP
/// sources need, read once: the [`Sources`] `check` and `explain` decide with, in place of the
/// webhook's watch-fed caches.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot(pub BTreeMap<ServiceRef, Fetched>, pub Facts);

/// What is kept of the IngressClasses, Namespaces, controller Pods and Nodes read for the
/// policies (only those some policy needs are read).
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    /// name -> (controller, is the default class)
    pub classes: BTreeMap<String, (String, bool)>,
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// (namespace, selector) of each node-IP source -> its Pods
    pub pods: BTreeMap<(String, String), Vec<PodFacts>>,
    pub nodes: HashMap<String, NodeAddrs>,
}

impl Sources for Snapshot {
    fn service(&self, svc: &ServiceRef) -> Result<Vec<Address>, Unresolved> {
        match self.0.get(svc) {
            Some(Fetched::Found { addresses: Ok(list), .. }) => Ok(list.clone()),
            Some(Fetched::Found { addresses: Err(e), .. }) => Err(Unresolved::Service(svc.clone(), e.clone())),
            Some(Fetched::Missing) => Err(Unresolved::Missing(svc.clone())),
            None => Err(Unresolved::NotSynced(svc.clone())),
        }
    }

    fn pods(&self, pods: &PodsRef) -> Result<Vec<Address>, Unresolved> {
        let list = self.1.pods.get(&pods.watch_key()).ok_or_else(|| Unresolved::PodsNotSynced(pods.to_string()))?;
        nodeip::addresses(list, &self.1.nodes, pods.internal_ip).map_err(|e| Unresolved::Pods(pods.to_string(), e))
    }

    fn ingress_class_controller(&self, class: &str) -> Option<String> {
        self.1.classes.get(class).map(|(controller, _)| controller.clone())
    }

    fn default_ingress_classes(&self) -> Vec<String> {
        self.1.classes.iter().filter(|(_, (_, default))| *default).map(|(name, _)| name.clone()).collect()
    }

    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.1.namespaces.get(namespace).cloned()
    }
}

/// How a governed Ingress's stored status compares with the canonical one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum State {
    Ok,
    Drift,
    Unresolved,
}

impl State {
    fn as_str(self) -> &'static str {
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

impl Row {
    /// The row of a decided write; `None` when no policy governs it.
    fn of(write: &StatusWrite, verdict: &Verdict<'_>, sources: &dyn Sources) -> Option<Row> {
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
        Report { ingresses, summary }
    }

    /// 0 when every governed Ingress is canonical, 1 when any drifts or cannot be judged.
    pub(crate) fn exit_code(&self) -> u8 {
        u8::from(self.summary.drift + self.summary.unresolved > 0)
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
        let mut lines: Vec<[String; 6]> =
            vec![["INGRESS", "POLICY", "SOURCE", "STORED", "CANONICAL", "STATE"].map(String::from)];
        for row in &self.ingresses {
            let state = match &row.reason {
                Some(reason) => format!("{} ({reason})", row.state.as_str()),
                None => row.state.as_str().to_owned(),
            };
            lines.push([
                format!("{}/{}", row.namespace, row.name),
                row.policy.clone(),
                row.source.clone(),
                Addresses(&row.stored).to_string(),
                row.canonical.as_deref().map_or_else(|| "?".to_owned(), |c| Addresses(c).to_string()),
                state,
            ]);
        }
        let mut out = String::new();
        if !self.ingresses.is_empty() {
            let widths: Vec<usize> =
                (0..6).map(|i| lines.iter().map(|l| l[i].chars().count()).max().unwrap_or(0)).collect();
            for line in &lines {
                let mut text = String::new();
                for (i, cell) in line.iter().enumerate() {
                    if i == 5 {
                        text.push_str(cell);
                    } else {
                        let _ = write!(text, "{cell:<width$}  ", width = widths[i]);
                    }
                }
                out.push_str(text.trim_end());
                out.push('\n');
            }
        }
        out.push_str(&self.summary_line());
        out.push('\n');
        out
    }

    pub(crate) fn json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report of strings and numbers always serializes") + "\n"
    }
}

/// What `explain` says about one Ingress: labelled lines, and the exit code of its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Explanation {
    pub lines: Vec<(&'static str, String)>,
    pub exit_code: u8,
}

impl Explanation {
    pub(crate) fn text(&self) -> String {
        // As wide as the longest label, "Canonical:", whichever lines there are.
        let width = "Canonical:".len();
        self.lines.iter().map(|(label, value)| format!("{:<width$} {value}\n", format!("{label}:"))).collect()
    }
}

fn class_shown(stored: &Stored) -> String {
    let class = |c: &str| format!("{:?}", truncate(c, MAX_CLASS_CHARS, usize::MAX));
    match (&stored.write.class, stored.class_from) {
        (Some(c), ClassFrom::Field) => format!("{} (from spec.ingressClassName)", class(c)),
        (Some(c), _) => format!("{} (from annotation {CLASS_ANNOTATION})", class(c)),
        (None, _) => format!("none (neither spec.ingressClassName nor annotation {CLASS_ANNOTATION} is set)"),
    }
}

fn scope_shown(policy: &Policy) -> String {
    let every = policy.scope.classes.is_empty() && policy.scope.controllers.is_empty();
    let mut classes =
        if every { "every class".to_owned() } else { format!("classes {}", policy.scope.classes.join(",")) };
    if !policy.scope.controllers.is_empty() {
        classes.push_str(&format!(" and IngressClasses of controllers {}", policy.scope.controllers.join(",")));
    }
    let without = if every || policy.scope.without_class {
        "and class-less Ingresses"
    } else {
        "and class-less Ingresses only when the default IngressClass is one of them"
    };
    let namespaces =
        policy.namespace_selector.as_ref().map_or_else(String::new, |s| format!(", in Namespaces labelled {s}"));
    format!("{classes} {without}{namespaces}")
}

fn resolved_shown(policy: &Policy, snapshot: &Snapshot, sources: &dyn Sources) -> String {
    let rules: Vec<String> = policy
        .sources
        .iter()
        .map(|source| match source {
            Source::Static(_) => "static list of the policy".to_owned(),
            Source::Service(svc) => match snapshot.0.get(svc) {
                Some(Fetched::Found { rule, .. }) => rule.clone(),
                Some(Fetched::Missing) => "Service not found".to_owned(),
                None => "Service not read".to_owned(),
            },
            Source::Pods(_) => "node IPs of the Running and Ready controller Pods".to_owned(),
        })
        .collect();
    let rule = rules.join("; ");
    let ports = if policy.keep_ports { "ports kept" } else { "ports dropped" };
    match sources.canonical(policy) {
        Ok(list) => format!("{} ({rule}; {ports})", Addresses(&list)),
        Err(reason) => format!("unresolved: {reason} ({rule})"),
    }
}

/// What the webhook answers to a write of `stored`'s status: its own [`render`] of the
/// verdict, read back.
fn webhook_shown(stored: &Stored, verdict: &Verdict<'_>) -> String {
    let review = Review {
        api_version: ApiVersion::V1,
        uid: "explain".into(),
        dry_run: true,
        user: User::default(),
        target: Target::IngressStatus {
            write: stored.write.clone(),
            object_uid: stored.object_uid.as_deref().map(Into::into),
            shape: stored.shape,
        },
    };
    let answer: serde_json::Value =
        serde_json::from_slice(&render(&review, verdict)).expect("render always writes JSON");
    let response = &answer["response"];
    let warnings: Vec<&str> =
        response["warnings"].as_array().into_iter().flatten().filter_map(serde_json::Value::as_str).collect();
    let warned = if warnings.is_empty() { String::new() } else { format!("; warning {:?}", warnings.join("; ")) };
    if response["allowed"] == serde_json::Value::Bool(false) {
        let message = response["status"]["message"].as_str().unwrap_or("");
        return format!("refuse it ({}): {message}", verdict.result());
    }
    let patch = response["patch"].as_str().and_then(|b64| {
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
        String::from_utf8(bytes).ok()
    });
    match patch {
        Some(patch) => format!("rewrite it ({}) with JSON patch {patch}{warned}", verdict.result()),
        None => format!("allow it unchanged ({}){warned}", verdict.result()),
    }
}

/// Explains how the webhook judges `stored`.
pub(crate) fn explain(stored: &Stored, policies: &Policies, snapshot: &Snapshot) -> Explanation {
    let write = &stored.write;
    let verdict = decide(write, policies, snapshot);
    let mut lines = vec![("Ingress", format!("{}/{}", write.namespace, write.name)), ("Class", class_shown(stored))];
    let governing = match &verdict {
        Verdict::Canonical { policy } | Verdict::Mismatch { policy, .. } | Verdict::Unresolved { policy, .. } => {
            Some(*policy)
        }
        Verdict::Ignored(_) | Verdict::NotGoverned => None,
    };
    let exit_code = match governing {
        None => {
            let why: Vec<String> =
                policies.iter().map(|p| format!("policy {:?} governs {}", p.name, scope_shown(p))).collect();
            lines.push(("Policy", format!("none: {}", why.join("; "))));
            0
        }
        Some(policy) => {
            lines
                .push(("Policy", format!("{:?} (mode {}; governs {})", policy.name, policy.mode, scope_shown(policy))));
            if let Some(rule) = policy.matches(&subject(write, policies, snapshot)) {
                lines.push(("Rule", format!("governed because {rule}")));
            }
            lines.push(("Source", SourceList(&policy.sources).to_string()));
            lines.push(("Resolved", resolved_shown(policy, snapshot, snapshot)));
            match &verdict {
                Verdict::Canonical { .. } => 0,
                _ => 1,
            }
        }
    };
    lines.push(("Stored", Addresses(&write.addresses).to_string()));
    if let Some(row) = Row::of(write, &verdict, snapshot) {
        lines.push((
            "Canonical",
            row.canonical
                .as_deref()
                .map_or_else(|| "unknown (source unresolved)".to_owned(), |c| Addresses(c).to_string()),
        ));
        lines.push(("State", row.state.as_str().to_owned()));
    }
    lines.push(("Webhook", format!("a write of the stored value: {}", webhook_shown(stored, &verdict))));
    Explanation { lines, exit_code }
}

// ---- I/O: one-shot reads ----

async fn bounded<T>(
    what: impl Fn() -> String,
    timeout: Duration,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, CheckError> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(CheckError::Api { what: what(), detail: describe(&e) }),
        Err(_) => Err(CheckError::Timeout { what: what(), timeout }),
    }
}

/// A kube error in one line: the API server's own message, or the causes down to the socket
/// ("client error (Connect)" alone does not say that the connection was refused).
fn describe(e: &kube::Error) -> String {
    if let kube::Error::Api(status) = e {
        return format!("{} (HTTP {} {})", status.message, status.code, status.reason);
    }
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    text
}

/// Lists every object of `api` matching `params`, page by page.
async fn list_all<K>(api: &Api<K>, mut params: ListParams, what: &str, timeout: Duration) -> Result<Vec<K>, CheckError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let mut items = Vec::new();
    loop {
        let page = bounded(|| format!("list {what}"), timeout, api.list(&params)).await?;
        items.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(items),
        }
    }
}

/// Reads every publish Service the policies name, once, and the IngressClasses, Namespaces,
/// controller Pods and Nodes that some policy needs.
async fn snapshot(client: &Client, policies: &Policies, timeout: Duration) -> Result<Snapshot, CheckError> {
    use k8s_openapi::api::{
        core::v1::{Namespace, Node, Pod},
        networking::v1::IngressClass,
    };
    use kube::ResourceExt as _;

    let mut fetched = BTreeMap::new();
    for svc in policies.services() {
        let api: Api<Service> = Api::namespaced(client.clone(), &svc.namespace);
        let found = bounded(|| format!("get publish Service {svc}"), timeout, api.get_opt(&svc.name)).await?;
        fetched.insert(svc, Fetched::of(found.as_ref()));
    }
    let mut facts = Facts::default();
    let pages = ListParams::default().limit(PAGE_SIZE);
    if policies.need_ingress_classes() {
        let api: Api<IngressClass> = Api::all(client.clone());
        for class in list_all(&api, pages.clone(), "IngressClasses", timeout).await? {
            let controller = class.spec.as_ref().and_then(|s| s.controller.clone()).unwrap_or_default();
            let default = class.annotations().get(DEFAULT_CLASS_ANNOTATION).is_some_and(|v| v == "true");
            facts.classes.insert(class.name_any(), (controller, default));
        }
    }
    if policies.need_namespaces() {
        let api: Api<Namespace> = Api::all(client.clone());
        for ns in list_all(&api, pages.clone(), "Namespaces", timeout).await? {
            facts.namespaces.insert(ns.name_any(), ns.labels().clone());
        }
    }
    let watches = policies.pod_watches();
    for (namespace, selector) in &watches {
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let what = format!("Pods in {namespace} matching {selector}");
        let pods = list_all(&api, pages.clone().labels(selector), &what, timeout).await?;
        facts.pods.insert((namespace.clone(), selector.clone()), pods.iter().map(PodFacts::of).collect());
    }
    if !watches.is_empty() {
        let api: Api<Node> = Api::all(client.clone());
        // Only addresses are kept; small pages bound what one page of Nodes holds.
        for node in list_all(&api, ListParams::default().limit(100), "Nodes", timeout).await? {
            facts.nodes.insert(node.name_any(), NodeAddrs::of(&node));
        }
    }
    Ok(Snapshot(fetched, facts))
}

/// Lists Ingresses page by page, keeping only what the decision reads.
async fn stored_ingresses(
    client: &Client,
    namespace: Option<&str>,
    timeout: Duration,
) -> Result<Vec<StatusWrite>, CheckError> {
    let api: Api<Ingress> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut writes = Vec::new();
    let mut params = ListParams::default().limit(PAGE_SIZE);
    loop {
        let page = bounded(|| "list Ingresses".to_owned(), timeout, api.list(&params)).await?;
        writes.extend(page.items.iter().map(|ingress| Stored::of(ingress).write));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(writes),
        }
    }
}

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
