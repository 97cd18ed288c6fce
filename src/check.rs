//! `check` and `explain`: the drift report operators and CI run. Stored objects and their
//! sources are read with one-shot GETs and judged by the webhook's own
//! [`decide`](crate::decision::decide); the async functions here only read and print.

pub(crate) mod admission;
mod explain;
mod fetch;
mod fleet;
mod report;

use std::{process::ExitCode, time::Duration};

pub(crate) use crate::kind::Kind;
use clap::ValueEnum;
use kube::Api;

use crate::{
    client::{RequestError, Target, bounded},
    kind::with_kind,
    policy::Policies,
    sources::{Sources, snapshot},
};
use explain::explain;
use fetch::stored;
pub(crate) use fleet::check_fleet;
use report::Report;
pub(crate) use report::align;

/// What `check` and `explain`, written once here, need of a kind beyond its wire: how a stored
/// object is read and shown in its kind's words. Said per kind in `check/explain/<kind>.rs`.
pub(crate) trait Explained: crate::kind::Governed {
    /// The object as `check` and `explain` read it from the API server.
    type Read: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + serde::de::DeserializeOwned
        + Clone
        + std::fmt::Debug
        + Send
        + Sync
        + 'static;
    /// A stored object as `explain` shows it: its write, and what the wire says beside it.
    type Stored: std::fmt::Debug + Send + Sync;
    /// The objects as a failed list names them (`Ingresses`).
    const LISTED: &'static str;

    /// What `check` and `explain` judge of `object`, its class as the operator wrote it.
    fn stored(object: Self::Read) -> Self::Stored;

    /// The write a stored object stands for.
    fn stored_write(stored: &Self::Stored) -> &crate::kind::Write<Self::Entry>;

    /// The review of a write of the stored value, which `explain` answers.
    fn review_target(stored: &Self::Stored) -> crate::review::Target<'static>;

    /// `explain`'s `Class` line: the class, and where it came from or what it is.
    fn class_shown(stored: &Self::Stored, sources: &dyn crate::sources::Sources) -> String;

    /// What `explain`'s `Policy` line says after a governing policy's mode ("" or `; governs …`).
    fn governs_shown(policy: &crate::policy::Policy) -> String;

    /// `explain`'s `Policy` line when no policy governs: what each policy of the kind governs.
    fn none_shown(policies: &Policies) -> String;

    /// A class rule as `explain`'s `Rule` line says it, in the kind's policy fields.
    fn rule_shown(rule: &crate::policy::ClassRule) -> String;

    /// Whether `check` lists a stored object of this kind (a Service that is not
    /// `type: LoadBalancer` is never governed).
    fn listed(_write: &crate::kind::Write<Self::Entry>) -> bool {
        true
    }
}

/// Objects per list request: bounds what one page holds in memory.
const PAGE_SIZE: u32 = 500;

/// How `check` and `explain` reach the cluster.
#[derive(Debug, Clone)]
pub(crate) struct Cluster {
    pub target: Target,
    /// Longest wait for each request to the API server.
    pub request_timeout: Duration,
    /// `--webhook-configuration`, whose namespaceSelectors scope the objects judged
    /// ([`crate::scope`]); empty: the policies' selectors alone.
    pub webhook_configuration: String,
    /// The guard whose admission policies to read; an empty label (no namespace given): any
    /// owner's objects of its names are read as its own.
    pub owner: crate::admission_policy::desired::Owner,
}

/// How `check` and `explain` print: `table` (`text` is the same: aligned lines for people),
/// or one JSON or YAML document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    #[value(alias = "text")]
    Table,
    Json,
    Yaml,
}

impl Output {
    /// The report as this format (YAML from the JSON).
    pub(crate) fn render(self, json: impl FnOnce() -> String, table: impl FnOnce() -> String) -> String {
        match self {
            Output::Table => table(),
            Output::Json => json(),
            Output::Yaml => serde_json::from_str::<serde_json::Value>(&json())
                .map_err(|e| e.to_string())
                .and_then(|value| serde_norway::to_string(&value).map_err(|e| e.to_string()))
                .unwrap_or_else(|e| format!("error: {e}\n")),
        }
    }
}

/// What `check` reads: a namespace (default: all), a kind (default: both).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Scope<'a> {
    pub namespace: Option<&'a str>,
    pub kind: Option<Kind>,
}

impl Scope<'_> {
    /// Whether objects of `kind` are read: when asked for; else an `always_watched` kind, or
    /// one a policy could govern (an Ingress-only setup needs no right on the others).
    fn reads(&self, kind: Kind, policies: &Policies) -> bool {
        match self.kind {
            Some(asked) => asked == kind,
            None => kind.info().always_watched || policies.of(kind).next().is_some(),
        }
    }
}

/// The one object `explain` is asked about: its kind, its namespace (`None`: `--namespace`,
/// else the context's, as kubectl reads names) and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ObjectRef {
    pub kind: Kind,
    pub namespace: Option<String>,
    pub name: String,
}

/// What stops `check` or `explain` (exit code 2), each saying what to fix.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CheckError {
    /// The client could not be built, or a request failed.
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error("`--namespace {flag}` and {namespace}/{name} name two namespaces; pass one")]
    TwoNamespaces { flag: String, namespace: String, name: String },
    #[error("the kubeconfig has no contexts for --all-contexts; `kubectl config get-contexts` lists them")]
    NoContexts,
    #[error("no cluster could be read: every context failed (rows above)")]
    EveryClusterFailed,
    /// An optional kind (a CRD) may be missing because its API is not served.
    #[error("{kind} {namespace}/{name} not found{}", unserved(*kind))]
    NotFound { kind: Kind, namespace: String, name: String },
    #[error(transparent)]
    Scope(#[from] crate::scope::ReadError),
}

/// Runs `check`: prints the report, returns 0, 1 (drift) or an error (2).
pub(crate) async fn check(
    cluster: &Cluster,
    scope: Scope<'_>,
    output: Output,
    policies: &Policies,
) -> Result<u8, CheckError> {
    let report = report(cluster, scope, policies).await?;
    print!("{}", output.render(|| report.json(), || report.table()));
    Ok(report.exit_code())
}

/// Reads one cluster and judges every stored Ingress and Gateway in `scope`.
async fn report(cluster: &Cluster, scope: Scope<'_>, policies: &Policies) -> Result<Report, CheckError> {
    let timeout = cluster.request_timeout;
    let client = cluster.connect().await?;
    // The lists come first: their errors (unreachable, forbidden) are the ones to show.
    type Judge = Box<dyn FnOnce(&mut Report, &Policies, &dyn Sources) + Send>;
    let mut lists: Vec<Judge> = Vec::new();
    for kind in Kind::ALL.into_iter().filter(|kind| scope.reads(*kind, policies)) {
        lists.push(with_kind!(kind, K => {
            let stored = stored::<K>(&client, scope.namespace, timeout).await?;
            Box::new(move |report: &mut Report, policies: &Policies, sources: &dyn Sources| {
                report.add_read::<K>(stored.as_deref(), policies, sources);
            })
        }));
    }
    let policies = &scoped(&client, cluster, policies).await?;
    let sources = snapshot::read(&client, policies, timeout).await?;
    let mut report = Report::default();
    for judge in lists {
        judge(&mut report, policies, &sources);
    }
    let found = admission::fetch(&client, policies, &cluster.owner, timeout).await?;
    report.admission_policies = admission::compare(policies, &cluster.owner, &sources, &found);
    Ok(report)
}

/// The policies as the reconciler applies them: narrowed to the Namespaces the guard's
/// webhook configuration selects, when there is one.
async fn scoped(client: &kube::Client, cluster: &Cluster, policies: &Policies) -> Result<Policies, CheckError> {
    let scope = crate::scope::read(client, &cluster.webhook_configuration, cluster.request_timeout, policies).await?;
    Ok(scope.map_or_else(|| policies.clone(), |scope| scope.narrow(policies)))
}

impl Cluster {
    /// The client, within `--request-timeout` ([`crate::client::connect_within`]).
    pub(crate) async fn connect(&self) -> Result<kube::Client, RequestError> {
        crate::client::connect_within(&self.target, self.request_timeout).await
    }
}

/// Runs `explain`: prints the explanation, returns 0, 1 (drift or unresolved) or an error (2).
/// Without a namespace, the object is looked up in the context's namespace, as kubectl does.
pub(crate) async fn explain_one(
    cluster: &Cluster,
    object: ObjectRef,
    policies: &Policies,
    output: Output,
) -> Result<u8, CheckError> {
    with_kind!(object.kind, K => explain_of::<K>(cluster, object, policies, output).await)
}

/// [`explain_one`] of an object of kind `K`.
async fn explain_of<K: Explained>(
    cluster: &Cluster,
    object: ObjectRef,
    policies: &Policies,
    output: Output,
) -> Result<u8, CheckError> {
    let ObjectRef { kind, namespace, name } = object;
    let timeout = cluster.request_timeout;
    let client = cluster.connect().await?;
    let namespace = namespace.unwrap_or_else(|| client.default_namespace().to_owned());
    let api: Api<K::Read> = Api::namespaced(client.clone(), &namespace);
    let object = bounded(|| format!("get {kind} {namespace}/{name}"), timeout, api.get_opt(&name))
        .await?
        .ok_or_else(|| CheckError::NotFound { kind, namespace: namespace.clone(), name: name.clone() })?;
    let last_writer = report::last_status_writer(kube::Resource::meta(&object));
    let stored = K::stored(object);
    let write = K::stored_write(&stored);
    let policies = &scoped(&client, cluster, policies).await?;
    let sources = snapshot::read(&client, policies, timeout).await?;
    let found = admission::fetch(&client, policies, &cluster.owner, timeout).await?;
    let mut explanation = explain::<K>(&stored, last_writer.as_ref(), policies, &sources);
    let governing = crate::decision::decide::<K>(write, policies, &sources)
        .policy()
        .and_then(|p| Some((p, crate::admission_policy::object_name_in(&cluster.owner.lease, policies, p).ok()?)));
    explain::add_admission(&mut explanation, governing, policies, &cluster.owner, &sources, &found);
    print!("{}", output.render(|| explanation.json(), || explanation.text()));
    Ok(explanation.exit_code)
}

/// What a missing object of an optional kind may mean: ` (or the API server serves no …)`.
fn unserved(kind: Kind) -> String {
    match kind.info().optional_api {
        None => String::new(),
        Some(_) => with_kind!(kind, K => format!(" (or the API server serves no {})", K::LISTED)),
    }
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
