//! The Kubernetes client every command that talks to a cluster uses, who this process is in the
//! cluster ([`PodIdentity`]), and the one-shot reads of the commands (a deadline per call,
//! paging, an error that keeps the [`kube::Error`]).

use std::{
    future::Future,
    path::{Path, PathBuf},
    time::Duration,
};

/// The longest wait for the next bytes of a response: kube's default is none, so a stalled
/// connection would hang a Lease renewal, a patch or a list forever. Watches are asked to end
/// sooner ([`crate::sources::follow::WATCH_TIMEOUT_SECS`]), so a quiet watch never hits it.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The deadline of one API call as a whole (patch, get, Lease read or write).
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Implements [`kube::Resource`] for a lean projection (`$ty`, with a `meta` field) of the kind
/// `$kind` in `$group`/`$version` (`$plural`), so kube's `Api` and watcher deliver it directly.
macro_rules! lean_resource {
    ($ty:ty, $scope:ty, $group:expr, $version:expr, $kind:literal, $plural:literal) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                $group.into()
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                $version.into()
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.meta
            }
            fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.meta
            }
        }
    };
}
pub(crate) use lean_resource;

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig { path: PathBuf, source: kube::config::KubeconfigError },
    #[error("no in-cluster config and no usable kubeconfig: {0}")]
    Infer(#[source] kube::config::InferConfigError),
    /// `--context` (or `--all-contexts`) without `--kubeconfig`, and no file in `KUBECONFIG` or
    /// `~/.kube/config` to find it in: an in-cluster config has no contexts.
    #[error("no kubeconfig to find contexts in ({0})")]
    NoKubeconfig(#[source] kube::config::KubeconfigError),
    #[error("context {context:?}: {source}; `kubectl config get-contexts` lists the contexts of the kubeconfig")]
    Context { context: String, source: kube::config::KubeconfigError },
    #[error("cannot build a client from the configuration: {0}")]
    Build(#[source] kube::Error),
}

/// Which cluster, as whom (kubectl's `--kubeconfig` and `--context`). Neither set: the inferred
/// config (in-cluster, then `KUBECONFIG`, then `~/.kube/config`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Target {
    /// One file, or a list joined as `KUBECONFIG` joins them (`a:b`), merged as kubectl merges.
    pub kubeconfig: Option<PathBuf>,
    /// A context of that kubeconfig; default: its `current-context`.
    pub context: Option<String>,
}

pub(crate) async fn connect(target: &Target) -> Result<kube::Client, ClientError> {
    let mut config = match (&target.kubeconfig, &target.context) {
        (None, None) => kube::Config::infer().await.map_err(ClientError::Infer)?,
        (path, context) => {
            let file = read_kubeconfig(path.as_deref())?;
            let options = kube::config::KubeConfigOptions { context: context.clone(), ..Default::default() };
            kube::Config::from_custom_kubeconfig(file, &options).await.map_err(|source| match (context, path) {
                (Some(context), _) => ClientError::Context { context: context.clone(), source },
                (None, Some(path)) => ClientError::Kubeconfig { path: path.clone(), source },
                (None, None) => ClientError::NoKubeconfig(source),
            })?
        }
    };
    config.read_timeout = Some(READ_TIMEOUT);
    kube::Client::try_from(config).map_err(ClientError::Build)
}

/// The names of the contexts of the kubeconfig, in file order (merged files: first file first).
pub(crate) fn context_names(kubeconfig: Option<&Path>) -> Result<Vec<String>, ClientError> {
    Ok(read_kubeconfig(kubeconfig)?.contexts.into_iter().map(|c| c.name).collect())
}

/// Reads `path` (a `KUBECONFIG`-style list of files, merged), else what kubectl reads:
/// `KUBECONFIG`, then `~/.kube/config`.
fn read_kubeconfig(path: Option<&Path>) -> Result<kube::config::Kubeconfig, ClientError> {
    use kube::config::Kubeconfig;
    let Some(path) = path else {
        return Kubeconfig::read().map_err(ClientError::NoKubeconfig);
    };
    // clap hands `KUBECONFIG=a:b` over as one path; kubectl merges the list, and so do we.
    std::env::split_paths(path).filter(|p| !p.as_os_str().is_empty()).try_fold(Kubeconfig::default(), |merged, file| {
        let next =
            Kubeconfig::read_from(&file).map_err(|source| ClientError::Kubeconfig { path: file.clone(), source })?;
        merged.merge(next).map_err(|source| ClientError::Kubeconfig { path: path.to_owned(), source })
    })
}

/// An API call that did not answer within its deadline.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error(transparent)]
    Api(#[from] kube::Error),
}

/// `call` with a deadline of `limit`: a hung call is cancelled and reported, never awaited
/// forever.
pub(crate) async fn within<T>(
    limit: Duration,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, CallError> {
    tokio::time::timeout(limit, call).await.map_err(|_| CallError::Timeout(limit))?.map_err(CallError::Api)
}

/// Runs `write` only if this replica leads when it starts, and cancels it the moment
/// leadership is lost (`None` then), so a deposed leader does not finish a pass it began: the
/// election drops `leading` at the renew deadline, before another replica may take the Lease.
pub(crate) async fn fenced<T>(
    leading: &tokio::sync::watch::Receiver<bool>,
    write: impl Future<Output = T>,
) -> Option<T> {
    let mut lost = leading.clone();
    if !*lost.borrow_and_update() {
        return None;
    }
    tokio::select! {
        biased;
        // A closed channel (the election is gone) is lost leadership too.
        _ = lost.wait_for(|leading| !*leading) => None,
        done = write => Some(done),
    }
}

/// Why a one-shot command could not read (or write) what it needed; keeps the API server's
/// answer ([`kube::Error`]) for callers to match on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestError {
    #[error("cannot build a Kubernetes client: {0}; pass --kubeconfig or run in a cluster")]
    Client(#[from] ClientError),
    #[error(
        "cannot {what}: {}; check --kubeconfig, that the API server is reachable and that this identity may read it",
        describe(.source)
    )]
    Api { what: String, source: kube::Error },
    #[error("cannot {what}: no answer from the API server within {timeout:?} (--request-timeout); is it reachable?")]
    Timeout { what: String, timeout: Duration },
}

impl RequestError {
    pub(crate) fn code(&self) -> Option<u16> {
        match self {
            RequestError::Api { source: kube::Error::Api(status), .. } => Some(status.code),
            _ => None,
        }
    }
}

/// A client for `target` within `timeout`: a kubeconfig's exec credential plugin may hang.
pub(crate) async fn connect_within(target: &Target, timeout: Duration) -> Result<kube::Client, RequestError> {
    let connected = tokio::time::timeout(timeout, connect(target)).await;
    Ok(connected.map_err(|_| RequestError::Timeout { what: "build a Kubernetes client".into(), timeout })??)
}

/// `call` within `timeout` ([`within`]), its failure saying what it was for (`what`, built
/// only on failure).
pub(crate) async fn bounded<T>(
    what: impl Fn() -> String,
    timeout: Duration,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, RequestError> {
    within(timeout, call).await.map_err(|e| match e {
        CallError::Api(source) => RequestError::Api { what: what(), source },
        CallError::Timeout(timeout) => RequestError::Timeout { what: what(), timeout },
    })
}

/// A kube error in one line: the API server's own message, or the causes down to the socket
/// ("client error (Connect)" alone does not say that the connection was refused).
pub(crate) fn describe(e: &kube::Error) -> String {
    if let kube::Error::Api(status) = e {
        return format!("{} (HTTP {} {})", status.message, status.code, status.reason);
    }
    std::iter::successors(std::error::Error::source(e), |e| e.source())
        .map(ToString::to_string)
        .fold(e.to_string(), |text, more| if text.contains(&more) { text } else { format!("{text}: {more}") })
}

/// Lists every object of `api` page by page (`params` sets the page size), keeping only what
/// `keep` makes of each, so at most one page of whole objects is held at a time; each page
/// within `timeout`.
pub(crate) async fn list_all<K, T>(
    api: &kube::Api<K>,
    mut params: kube::api::ListParams,
    what: &str,
    timeout: Duration,
    mut keep: impl FnMut(K) -> T,
) -> Result<Vec<T>, RequestError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let mut kept = Vec::new();
    loop {
        let page = bounded(|| format!("list {what}"), timeout, api.list(&params)).await?;
        kept.extend(page.items.into_iter().map(&mut keep));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(kept),
        }
    }
}

/// As [`list_all`], but `None` when the API server serves no such resource (a 404: no CRD).
pub(crate) async fn list_served<K, T>(
    api: &kube::Api<K>,
    params: kube::api::ListParams,
    what: &str,
    timeout: Duration,
    keep: impl FnMut(K) -> T,
) -> Result<Option<Vec<T>>, RequestError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    match list_all(api, params, what, timeout, keep).await {
        Ok(kept) => Ok(Some(kept)),
        Err(e) if e.code() == Some(404) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The webhook's own Pod, as the Downward API names it (`POD_NAME`, `POD_NAMESPACE`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PodIdentity {
    pub(crate) name: Option<String>,
    pub(crate) namespace: Option<String>,
}

impl PodIdentity {
    /// Empty values (a Downward API field left blank) are treated as absent.
    pub(crate) fn new(name: Option<String>, namespace: Option<String>) -> Self {
        let given = |v: Option<String>| v.filter(|v| !v.is_empty());
        PodIdentity { name: given(name), namespace: given(namespace) }
    }

    /// The instance named in Events: the Pod, else the host.
    pub(crate) fn instance(&self) -> Option<String> {
        self.name.clone().or_else(|| std::env::var("HOSTNAME").ok())
    }
}

/// Whether an API server of this version stores `status.loadBalancer.ingress[].ports` of
/// Ingresses (since 1.20): an older one drops the field from every write, so a policy that keeps
/// ports would patch forever. `minor` may carry a suffix (`"19+"`); unparsable versions count as
/// new.
pub(crate) fn stores_ingress_ports(major: &str, minor: &str) -> bool {
    let number = |s: &str| s.trim_start_matches('v').split(|c: char| !c.is_ascii_digit()).next()?.parse::<u32>().ok();
    match (number(major), number(minor)) {
        (Some(major), Some(minor)) => (major, minor) >= (1, 20),
        _ => true,
    }
}

/// [`stores_ingress_ports`] for the cluster `client` talks to; `None` if `/version` fails.
pub(crate) async fn server_stores_ingress_ports(client: &kube::Client) -> Option<(bool, String)> {
    let info = client.apiserver_version().await.ok()?;
    Some((stores_ingress_ports(&info.major, &info.minor), info.git_version))
}

#[cfg(test)]
mod tests {
    use super::fenced;

    #[tokio::test]
    async fn a_fenced_write_runs_only_while_leading_and_is_cancelled_when_leadership_is_lost() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let (tx, rx) = tokio::sync::watch::channel(false);
        let polled = AtomicBool::new(false);
        let write = async { polled.store(true, Ordering::SeqCst) };
        assert_eq!(fenced(&rx, write).await, None, "not leading: not attempted");
        assert!(!polled.load(Ordering::SeqCst), "the write never started");
        tx.send_replace(true);
        assert_eq!(fenced(&rx, async { 7 }).await, Some(7));
        // A write hanging on a stalled connection is dropped when the lead is lost.
        let (started_tx, started) = tokio::sync::oneshot::channel();
        let hung = async {
            let _ = started_tx.send(());
            std::future::pending::<()>().await;
        };
        let lose = async {
            let _ = started.await;
            tx.send_replace(false);
        };
        let (result, ()) = tokio::join!(fenced(&rx, hung), lose);
        assert_eq!(result, None, "cancelled once leadership is lost");
        drop(tx);
        assert_eq!(fenced(&rx, async { 1 }).await, None, "the election gone: not leading");
    }

    fn kubeconfig(dir: &std::path::Path, file: &str, contexts: &[&str], current: &str) -> std::path::PathBuf {
        let mut text = format!("apiVersion: v1\nkind: Config\ncurrent-context: {current}\ncontexts:\n");
        for c in contexts {
            text.push_str(&format!("- name: {c}\n  context: {{cluster: {c}, user: {c}}}\n"));
        }
        text.push_str("clusters:\n");
        for c in contexts {
            text.push_str(&format!("- name: {c}\n  cluster: {{server: 'https://{c}.example.test'}}\n"));
        }
        let path = dir.join(file);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `KUBECONFIG=a:b` as kubectl reads it: both files merged, the first one's entries first
    /// and winning; a context that is in neither is named in the error.
    #[tokio::test]
    async fn a_kubeconfig_list_is_merged_and_its_contexts_listed() {
        let dir = tempfile::tempdir().unwrap();
        let a = kubeconfig(dir.path(), "a", &["eu", "us"], "eu");
        let b = kubeconfig(dir.path(), "b", &["us", "staging"], "staging");
        let list = std::env::join_paths([&a, &b]).unwrap();
        let list = std::path::Path::new(&list);
        assert_eq!(super::context_names(Some(list)).unwrap(), ["eu", "us", "staging"]);
        assert_eq!(super::context_names(Some(&b)).unwrap(), ["us", "staging"]);
        let target = |context: Option<&str>| super::Target {
            kubeconfig: Some(list.to_owned()),
            context: context.map(str::to_owned),
        };
        let client = super::connect(&target(Some("staging"))).await.unwrap();
        assert_eq!(client.default_namespace(), "default");
        let Err(e) = super::connect(&target(Some("nowhere"))).await else { panic!("unknown context accepted") };
        assert!(e.to_string().starts_with("context \"nowhere\": "), "{e}");
        let missing = dir.path().join("missing");
        let Err(e) = super::context_names(Some(&missing)) else { panic!("missing file accepted") };
        assert!(e.to_string().starts_with(&format!("kubeconfig {}: ", missing.display())), "{e}");
    }

    #[test]
    fn kube_errors_read_in_one_line() {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "code": 403, "reason": "Forbidden",
            "message": "ingresses.networking.k8s.io is forbidden: User \"x\" cannot list resource \"ingresses\""
        }))
        .unwrap();
        assert_eq!(
            super::describe(&kube::Error::Api(Box::new(status))),
            "ingresses.networking.k8s.io is forbidden: User \"x\" cannot list resource \"ingresses\" (HTTP 403 Forbidden)"
        );
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "tcp connect error: Connection refused");
        let text = super::describe(&kube::Error::Service(Box::new(io)));
        assert!(text.ends_with("tcp connect error: Connection refused"), "{text}");
        assert_eq!(text.matches("Connection refused").count(), 1, "causes are not repeated: {text}");
    }

    #[test]
    fn ingress_ports_arrived_in_1_20() {
        let cases = [
            ("1", "20", true),
            ("1", "23", true),
            ("1", "33", true),
            ("1", "19", false),
            ("1", "19+", false),
            ("1", "16", false),
            ("1", "20+", true),
            ("2", "0", true),
            ("", "", true),
            ("1", "x", true),
        ];
        for (major, minor, want) in cases {
            assert_eq!(super::stores_ingress_ports(major, minor), want, "{major}.{minor}");
        }
    }
}
