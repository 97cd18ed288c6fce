//! The Kubernetes client every command that talks to a cluster uses: from a kubeconfig file, or
//! inferred (in-cluster service account, then `KUBECONFIG`, then `~/.kube/config`); and what the
//! API server's version tells about the fields it stores; and who this process is in the
//! cluster ([`PodIdentity`]).

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

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("kubeconfig {path}: {source}")]
    Read { path: PathBuf, source: kube::config::KubeconfigError },
    #[error("kubeconfig {path}: {source}")]
    Load { path: PathBuf, source: kube::config::KubeconfigError },
    #[error("no in-cluster config and no usable kubeconfig: {0}")]
    Infer(#[source] kube::config::InferConfigError),
    #[error("cannot build a client from the configuration: {0}")]
    Build(#[source] kube::Error),
}

/// A client for the cluster `kubeconfig` names, or the inferred one.
pub(crate) async fn connect(kubeconfig: Option<&Path>) -> Result<kube::Client, ClientError> {
    let mut config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .map_err(|source| ClientError::Read { path: path.to_owned(), source })?;
            kube::Config::from_custom_kubeconfig(file, &Default::default())
                .await
                .map_err(|source| ClientError::Load { path: path.to_owned(), source })?
        }
        None => kube::Config::infer().await.map_err(ClientError::Infer)?,
    };
    config.read_timeout = Some(READ_TIMEOUT);
    kube::Client::try_from(config).map_err(ClientError::Build)
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
    match tokio::time::timeout(limit, call).await {
        Ok(result) => result.map_err(CallError::Api),
        Err(_) => Err(CallError::Timeout(limit)),
    }
}

/// The webhook's own Pod, as the Downward API names it (`POD_NAME`, `POD_NAMESPACE`); read once
/// by the command line, an empty value counting as absent. Leader election takes its identity
/// and default namespace from it, Events their reporting instance and the Pod they are about.
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
/// Ingresses: the field arrived in Kubernetes 1.20 (k8s.io/api v0.20), and 1.23 stores it
/// (`tests/matching.rs` on `ISG_K8S_VERSION=v1.23`). An older one drops the field from every
/// write, so a policy that keeps ports would find every write off canonical and patch it
/// forever. `minor` may carry a suffix (`"19+"` on some distributions); unparsable versions count as
/// new, the common case.
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
