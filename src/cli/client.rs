//! The flags that say how to reach the cluster and who this process is in it, shared by every
//! command that talks to a cluster.

use std::path::PathBuf;

use clap::{ArgAction, Args};

use crate::client::{PodIdentity, Target};

/// How to reach the cluster, with kubectl's names; each command's help says what it uses the
/// cluster for (`mut_arg`), so the flags are declared once.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct ClientArgs {
    /// kubeconfig; default: in-cluster config, then KUBECONFIG.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the kubeconfig to use; default: its current-context.
    // A list so that `check` can take several (it makes the flag repeatable with `mut_arg`);
    // `Set` makes clap refuse a second one everywhere else.
    #[arg(long, env = "ISG_CONTEXT", value_name = "CONTEXT", action = ArgAction::Set)]
    pub context: Vec<String>,
}

impl ClientArgs {
    /// The one cluster of a command that talks to one (clap lets through at most one context).
    pub(crate) fn target(&self) -> Target {
        Target { kubeconfig: self.kubeconfig.clone(), context: self.context.first().cloned() }
    }
}

/// The Downward API's view of the Pod `serve` runs in (hidden: set by the Deployment).
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
