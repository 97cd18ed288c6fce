//! The flags that say how to reach the cluster and who this process is in it, shared by every
//! command that talks to a cluster.

use std::path::PathBuf;

use clap::Args;

use crate::client::PodIdentity;

/// How to reach the cluster. Each command says in its own help what it uses the cluster for
/// (`mut_arg` on the command), so the flag is declared once.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct ClientArgs {
    /// kubeconfig; default: in-cluster config, then KUBECONFIG.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
}

/// The Downward API's view of the Pod `serve` runs in. Hidden: set by the Deployment's env,
/// not by people.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct PodArgs {
    #[arg(long, env = "POD_NAME", hide = true)]
    pub pod_name: Option<String>,
    #[arg(long, env = "POD_NAMESPACE", hide = true)]
    pub pod_namespace: Option<String>,
}

impl From<PodArgs> for PodIdentity {
    fn from(args: PodArgs) -> Self {
        PodIdentity::new(args.pod_name, args.pod_namespace)
    }
}
