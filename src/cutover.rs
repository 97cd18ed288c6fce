//! `cutover`: moves one policy's source in the policy ConfigMap the guard reloads. Plan (the
//! webhook's own `decide` over the edited file), act (one server-side apply, the previous source
//! kept in an annotation: `previous`), follow (a watch of the Ingresses until each is canonical,
//! or `--timeout`). `--rollback` is the same three steps back to the policy's kept source.

mod edit;
mod follow;
mod plan;
mod previous;
mod show;
mod track;

use std::{collections::BTreeMap, io::IsTerminal as _, time::Duration};

use clap::ValueEnum;
use k8s_openapi::api::{
    authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec},
    core::v1::ConfigMap,
};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};

pub(crate) use edit::NewSource;
use edit::{EditError, SizeError};
use plan::{Plan, Seen};

use crate::{
    check::Cluster,
    client::{RequestError, bounded, list_all},
    kind::Kind,
    policy::{ConfigError, Mode, Policies, Policy},
    sources::snapshot,
};

/// The field manager of the ConfigMap's key and annotation after a cutover.
pub(crate) const FIELD_MANAGER: &str = "ingress-status-guard-cutover";
/// The key the manifests and the chart give the policy file.
pub(crate) const DEFAULT_KEY: &str = "config.yaml";
/// Ingresses per list request, as `check` reads them.
const PAGE_SIZE: u32 = 500;

/// How `cutover` prints: text (a table, then a bar or lines), one JSON event per line, or one
/// YAML document per event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    /// `table` too: the same flag value every other command takes.
    #[value(alias = "table")]
    Text,
    Json,
    Yaml,
}

/// `NAMESPACE/NAME` of the policy ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigMapRef {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for ConfigMapRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What the cutover changes the policy to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    To(NewSource),
    /// Back to the value kept in the annotation.
    Rollback,
}

/// A validated `cutover` command line.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub cluster: Cluster,
    /// The ConfigMap's namespace (`None`: the context's, as kubectl reads names) and name.
    pub config_map: (Option<String>, String),
    pub key: String,
    pub policy: String,
    pub change: Change,
    pub dry_run: bool,
    pub output: Output,
    pub timeout: Duration,
    /// How this program is run, for the undo command printed at SIGINT: `kubectl isg` or
    /// `ingress-status-guard`.
    pub invoked_as: String,
}

/// What stops a cutover: bad input and API errors exit 2, an unresolved source or a timeout 1.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CutoverError {
    #[error(transparent)]
    Cluster(#[from] RequestError),
    #[error(transparent)]
    Scope(#[from] crate::scope::ReadError),
    #[error("--config-map {0}: ConfigMap not found")]
    NoConfigMap(ConfigMapRef),
    #[error("--key {key}: ConfigMap {config_map} has no key {key:?} (it has: {known})")]
    NoKey { config_map: ConfigMapRef, key: String, known: String },
    #[error("--policy {policy}: {source}")]
    Policy { policy: String, source: EditError },
    #[error("--config-map {config_map}: key {key}: {source}")]
    File { config_map: ConfigMapRef, key: String, source: EditError },
    #[error(
        "--policy {policy}: it governs {kind}s, and cutover moves Ingress policies only (its plan and its follow read Ingresses): edit its source in the policy file", kind = kind.info().name
    )]
    NotIngress { policy: String, kind: Kind },
    #[error(
        "--policy {0}: its mode is audit, and audit policies are measured, never patched: nothing would move; set mode: enforce first"
    )]
    Audit(String),
    #[error("the edited policy file would be refused by the guard, so it is not applied: {0}")]
    Invalid(ConfigError),
    #[error("--config-map {config_map}: {source}")]
    Size { config_map: ConfigMapRef, source: SizeError },
    #[error(
        "--config-map {0}: this identity may not patch it (RBAC: cutover needs patch on configmaps {name} in namespace {namespace}, list/watch on ingresses, get on services)", name = .0.name, namespace = .0.namespace
    )]
    Forbidden(ConfigMapRef),
    #[error(
        "--rollback: ConfigMap {config_map} has no annotation {annotation}: nothing to roll back to (cutover keeps the previous value there when it applies)"
    )]
    NothingToRollBack { config_map: ConfigMapRef, annotation: String },
    #[error("--config-map {0}: changed since cutover read it; run cutover again")]
    Conflict(ConfigMapRef),
    #[error("{0}")]
    Unresolved(String),
    #[error("--timeout {timeout:?} passed with {moved}/{total} Ingresses moved: {not_moved}")]
    Timeout { timeout: Duration, moved: usize, total: usize, not_moved: String },
    #[error("interrupted (SIGINT): {}", interrupted(applied.as_deref(), undo))]
    Interrupted { applied: Option<String>, undo: String },
}

fn interrupted(applied: Option<&str>, undo: &str) -> String {
    match applied {
        Some(applied) => format!("{applied} stays applied; to undo it: {undo}"),
        None => "nothing was written by this run".to_owned(),
    }
}

impl CutoverError {
    /// 1 when the cutover could not finish (the new source unresolved, the timeout), 2 for
    /// everything that is wrong with the input or the cluster access.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            CutoverError::Unresolved(_) | CutoverError::Timeout { .. } => 1,
            // 128 + SIGINT, as a shell reports a process Ctrl-C ended.
            CutoverError::Interrupted { .. } => 130,
            _ => 2,
        }
    }
}

/// Runs a cutover (plan, then unless `--dry-run` act and follow); `Ok` is exit 0.
pub(crate) async fn run(settings: &Settings) -> Result<(), CutoverError> {
    let timeout = settings.cluster.request_timeout;
    let client = settings.cluster.connect().await?;
    let (namespace, name) = &settings.config_map;
    let namespace = namespace.clone().unwrap_or_else(|| client.default_namespace().to_owned());
    let cm_ref = &ConfigMapRef { namespace, name: name.clone() };
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &cm_ref.namespace);
    let config_map = bounded(|| format!("get ConfigMap {cm_ref}"), timeout, api.get_opt(&cm_ref.name))
        .await
        // A 403 reading the ConfigMap is the same missing right as one patching it.
        .map_err(|e| if e.code() == Some(403) { CutoverError::Forbidden(cm_ref.clone()) } else { e.into() })?
        .ok_or_else(|| CutoverError::NoConfigMap(cm_ref.clone()))?;
    let data = config_map.data.clone().unwrap_or_default();
    let current = data.get(&settings.key).ok_or_else(|| CutoverError::NoKey {
        config_map: cm_ref.clone(),
        key: settings.key.clone(),
        known: known_keys(&data),
    })?;
    let annotation = edit::previous_annotation(&settings.key)
        .map_err(|source| CutoverError::Size { config_map: cm_ref.clone(), source })?;
    let shown = format!("{} of ConfigMap {cm_ref}", settings.key);
    // The policies as the guard runs them now (the same parser and error as its reload). A
    // policy of another kind is refused before its source is edited: nothing would follow it.
    let before = crate::policy::parse_file(&shown, current).ok();
    if let Some(now) = &before {
        target(now, &settings.policy)?;
    }
    let (edited, kept) = edited_text(settings, cm_ref, &config_map, current, &annotation)?;
    let policies = crate::policy::parse_file(&shown, &edited).map_err(CutoverError::Invalid)?;
    let target = target(&policies, &settings.policy)?;
    if target.mode == Mode::Audit {
        return Err(CutoverError::Audit(settings.policy.clone()));
    }
    if !settings.dry_run {
        may_patch(&client, cm_ref, timeout).await?;
    }
    let unchanged = edited == *current || before.as_ref() == Some(&policies);
    // What the apply would be refused for is bad input: said before the plan, dry run or not.
    if !unchanged {
        check_size(&config_map, cm_ref, &settings.key, &annotation, &edited, &kept)?;
    }
    let from = before.as_ref().and_then(|p| p.of(Kind::Ingress).find(|p| p.name == settings.policy));
    // The guard's scope, as `check` reads it, so the plan can tell an Ingress outside it.
    let scope = crate::scope::read(&client, &settings.cluster.webhook_configuration, timeout, &policies).await?;
    let scoped = scope.as_ref().map(|scope| scope.narrow(&policies));
    let sources = snapshot::read(&client, scoped.as_ref().unwrap_or(&policies), timeout).await?;
    let stored = stored(&client, timeout).await?;
    let plan =
        Plan::build(&stored, &policies, &sources, &settings.policy, from, scope.as_ref().map(|s| s.of(Kind::Ingress)));
    let mut show = show::Show::new(settings.output, std::io::stdout().is_terminal());
    show.plan(&plan);
    if let Some(message) = plan::unresolved_message(&plan) {
        return Err(CutoverError::Unresolved(message));
    }
    if settings.dry_run {
        return Ok(());
    }
    if unchanged {
        // The guard already runs these policies (the text may differ, as the edit rewrites
        // the YAML); applying would only overwrite the kept previous value with this one.
        show.unchanged(&cm_ref.to_string(), &settings.key);
        return interruptible(&client, settings, cm_ref, &policies, &plan, &mut show, None).await;
    }
    let applied = apply(&api, cm_ref, &config_map, settings, &annotation, &edited, &kept).await?;
    show.applied(&cm_ref.to_string(), &settings.key, &annotation, &applied);
    let applied = format!("ConfigMap {cm_ref} key {} (resourceVersion {applied})", settings.key);
    interruptible(&client, settings, cm_ref, &policies, &plan, &mut show, Some(applied)).await
}

/// Follows until done or SIGINT (then says how to undo what stays applied); the handler is
/// installed only here, so a Ctrl-C before anything is applied ends the process as usual.
async fn interruptible(
    client: &Client,
    settings: &Settings,
    cm_ref: &ConfigMapRef,
    policies: &Policies,
    plan: &Plan,
    show: &mut show::Show,
    applied: Option<String>,
) -> Result<(), CutoverError> {
    let followed = tokio::select! {
        result = follow::follow(client, settings, policies, plan, show) => Some(result),
        // A handler that cannot be installed disables this branch: the follow goes on.
        Ok(()) = tokio::signal::ctrl_c() => None,
    };
    if let Some(result) = followed {
        return result;
    }
    let undo = undo_command(settings, cm_ref);
    show.interrupted(applied.as_deref(), &undo);
    Err(CutoverError::Interrupted { applied, undo })
}

/// The command that undoes this run: `--rollback` of the policy after a cutover; after a
/// rollback, another cutover to where it had moved.
fn undo_command(settings: &Settings, cm_ref: &ConfigMapRef) -> String {
    let base = format!(
        "{} cutover --config-map {cm_ref} --key {} --policy {}",
        settings.invoked_as,
        shell_word(&settings.key),
        shell_word(&settings.policy)
    );
    match &settings.change {
        Change::To(_) => format!("{base} --rollback"),
        Change::Rollback => format!("{base} --to-... (this was the rollback: cut over again to where it had moved)"),
    }
}

/// `word` as one shell word: as it is when plain, else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=@".contains(c));
    if plain { word.to_owned() } else { format!("'{}'", word.replace('\'', "'\\''")) }
}

/// The key's new text, the current one with the policy's source replaced (or, for
/// `--rollback`, put back to the one kept for it), and the annotation's new text.
fn edited_text(
    settings: &Settings,
    cm_ref: &ConfigMapRef,
    config_map: &ConfigMap,
    current: &str,
    annotation: &str,
) -> Result<(String, String), CutoverError> {
    let kept = config_map.metadata.annotations.as_ref().and_then(|a| a.get(annotation));
    let edited = match &settings.change {
        Change::To(source) => previous::cut_over(current, &settings.policy, source, kept.map(String::as_str)),
        Change::Rollback => {
            let kept = kept.ok_or_else(|| CutoverError::NothingToRollBack {
                config_map: cm_ref.clone(),
                annotation: annotation.to_owned(),
            })?;
            previous::roll_back(current, &settings.policy, kept)
        }
    };
    edited.map_err(|e| match e {
        e @ (EditError::NoSuchPolicy { .. } | EditError::NothingKept { .. } | EditError::ChangedSince { .. }) => {
            CutoverError::Policy { policy: settings.policy.clone(), source: e }
        }
        e => CutoverError::File { config_map: cm_ref.clone(), key: settings.key.clone(), source: e },
    })
}

/// Whether the ConfigMap, with `edited` as `key` and `kept` in `annotation`, is one the
/// API server stores (its bounds on data and on annotations).
fn check_size(
    config_map: &ConfigMap,
    cm_ref: &ConfigMapRef,
    key: &str,
    annotation: &str,
    edited: &str,
    kept: &str,
) -> Result<(), CutoverError> {
    let others = |map: &Option<BTreeMap<String, String>>, skip: &str| {
        map.iter().flatten().filter(|(k, _)| *k != skip).map(|(k, v)| k.len() + v.len()).sum::<usize>()
    };
    let binary: usize = config_map.binary_data.iter().flatten().map(|(k, v)| k.len() + v.0.len()).sum();
    let (other_data, other_annotations) =
        (others(&config_map.data, key) + binary, others(&config_map.metadata.annotations, annotation));
    edit::check_fits(key, annotation, edited, kept, other_data, other_annotations)
        .map_err(|source| CutoverError::Size { config_map: cm_ref.clone(), source })
}

/// One server-side apply of the key and the annotation, as [`FIELD_MANAGER`], forced (the
/// key was written by whoever installed the file: a cutover deliberately takes it over) and
/// conditional on the resourceVersion that was read, so an edit in between is not lost.
async fn apply(
    api: &Api<ConfigMap>,
    cm_ref: &ConfigMapRef,
    read: &ConfigMap,
    settings: &Settings,
    annotation: &str,
    edited: &str,
    kept: &str,
) -> Result<String, CutoverError> {
    let body = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": cm_ref.name,
            "namespace": cm_ref.namespace,
            "resourceVersion": read.metadata.resource_version,
            "annotations": {annotation: kept},
        },
        "data": {settings.key.as_str(): edited},
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let timeout = settings.cluster.request_timeout;
    let patch = Patch::Apply(&body);
    let call = api.patch(&cm_ref.name, &params, &patch);
    match bounded(|| format!("apply ConfigMap {cm_ref}"), timeout, call).await {
        Ok(cm) => Ok(cm.metadata.resource_version.unwrap_or_default()),
        Err(e) if e.code() == Some(403) => Err(CutoverError::Forbidden(cm_ref.clone())),
        Err(e) if e.code() == Some(409) => Err(CutoverError::Conflict(cm_ref.clone())),
        Err(e) => Err(e.into()),
    }
}

/// Asks the API server (a SelfSubjectAccessReview) whether this identity may patch the
/// ConfigMap, so a cutover without the right is refused before anything is planned as if it
/// would happen. The apply maps a 403 to the same error, should the review be wrong.
async fn may_patch(client: &Client, cm_ref: &ConfigMapRef, timeout: Duration) -> Result<(), CutoverError> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(cm_ref.namespace.clone()),
                verb: Some("patch".to_owned()),
                resource: Some("configmaps".to_owned()),
                name: Some(cm_ref.name.clone()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let answer = bounded(
        || "ask whether this identity may patch the ConfigMap".to_owned(),
        timeout,
        api.create(&PostParams::default(), &review),
    )
    .await?;
    if answer.status.is_some_and(|s| s.allowed) { Ok(()) } else { Err(CutoverError::Forbidden(cm_ref.clone())) }
}

/// Every Ingress, page by page, as the plan keeps it.
async fn stored(client: &Client, timeout: Duration) -> Result<Vec<Seen>, RequestError> {
    let api: Api<k8s_openapi::api::networking::v1::Ingress> = Api::all(client.clone());
    list_all(&api, ListParams::default().limit(PAGE_SIZE), "Ingresses", timeout, |i| Seen::of(&i)).await
}

fn known_keys(data: &BTreeMap<String, String>) -> String {
    if data.is_empty() {
        return "no keys".to_owned();
    }
    let mut keys: Vec<String> =
        data.keys().take(10).map(|k| format!("{:?}", crate::names::truncate(k, 63, 253))).collect();
    if data.len() > 10 {
        keys.push(format!("and {} more", data.len() - 10));
    }
    keys.join(", ")
}

/// Policy `name` of `policies`, which must govern Ingresses: the plan lists and the follow
/// watches Ingresses only.
fn target<'p>(policies: &'p Policies, name: &str) -> Result<&'p Policy, CutoverError> {
    match policies.iter().find(|p| p.name == name) {
        Some(policy) if policy.kind == Kind::Ingress => Ok(policy),
        Some(policy) => Err(CutoverError::NotIngress { policy: name.to_owned(), kind: policy.kind }),
        None => {
            let known = policies.of(Kind::Ingress).map(|p| format!("{:?}", p.name)).collect::<Vec<_>>().join(", ");
            let source = EditError::NoSuchPolicy { name: name.to_owned(), known };
            Err(CutoverError::Policy { policy: name.to_owned(), source })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{CutoverError, shell_word, target};
    use crate::kind::Kind;

    /// A Gateway policy is refused by name, with what to do instead, and exits 2 (bad input);
    /// an Ingress policy of the same file is the target, and an unknown name says which exist.
    #[test]
    fn a_gateway_policy_is_refused_by_name() {
        let file = "policies:\n- name: edge\n  publishStatusAddress: 192.0.2.10\n- name: gw\n  kind: Gateway\n  gatewayClasses: [cilium]\n  publishStatusAddress: 192.0.2.20\n";
        let policies = crate::policy::parse_file("f", file).unwrap();
        assert_eq!(target(&policies, "edge").unwrap().kind, Kind::Ingress);
        let refused = target(&policies, "gw").unwrap_err();
        assert!(matches!(refused, CutoverError::NotIngress { kind: Kind::Gateway, .. }), "{refused:?}");
        assert_eq!(
            refused.to_string(),
            "--policy gw: it governs Gateways, and cutover moves Ingress policies only (its plan and its follow read Ingresses): edit its source in the policy file"
        );
        assert_eq!(refused.exit_code(), 2);
        let unknown = target(&policies, "nope").unwrap_err().to_string();
        assert!(unknown.contains("no policy named \"nope\"") && unknown.contains("\"edge\""), "{unknown}");
    }

    #[test]
    fn the_undo_command_quotes_what_a_shell_would_split() {
        assert_eq!(shell_word("config.yaml"), "config.yaml");
        assert_eq!(shell_word("my policy"), "'my policy'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word("$(rm -rf ~)"), "'$(rm -rf ~)'");
    }
}
