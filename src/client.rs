//! The Kubernetes client every command that talks to a cluster uses: from a kubeconfig file, or
//! inferred (in-cluster service account, then `KUBECONFIG`, then `~/.kube/config`).

use std::path::{Path, PathBuf};

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
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .map_err(|source| ClientError::Read { path: path.to_owned(), source })?;
            kube::Config::from_custom_kubeconfig(file, &Default::default())
                .await
                .map_err(|source| ClientError::Load { path: path.to_owned(), source })?
        }
        None => kube::Config::infer().await.map_err(ClientError::Infer)?,
    };
    kube::Client::try_from(config).map_err(ClientError::Build)
}
