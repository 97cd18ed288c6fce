//! kubeconfigs with several contexts, as operators keep them: each test control plane's
//! single-context file (cluster, user and context all named `e2e`) renamed, then merged.

use std::path::{Path, PathBuf};

use kube::config::Kubeconfig;

/// Writes `path`: one context per `(name, kubeconfig)`, its cluster, user and context all
/// called `name`; the first is the current-context. A `namespace` sets the context's namespace.
#[allow(dead_code)] // only tests/cluster/check.rs and tests/cluster/plugin.rs use kubeconfigs of several contexts
pub(crate) fn with_contexts(path: &Path, contexts: &[(&str, &Path, Option<&str>)]) -> PathBuf {
    let mut merged = Kubeconfig::default();
    for (name, file, namespace) in contexts {
        let mut kc = Kubeconfig::read_from(file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
        let name = (*name).to_owned();
        for c in &mut kc.clusters {
            c.name.clone_from(&name);
        }
        for u in &mut kc.auth_infos {
            u.name.clone_from(&name);
        }
        for c in &mut kc.contexts {
            c.name.clone_from(&name);
            if let Some(context) = c.context.as_mut() {
                context.cluster.clone_from(&name);
                context.user = Some(name.clone());
                context.namespace = namespace.map(str::to_owned);
            }
        }
        kc.current_context = Some(name);
        merged = merged.merge(kc).expect("merge kubeconfigs");
    }
    let text = serde_norway::to_string(&merged).expect("serialize the kubeconfig");
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path.to_owned()
}

/// A copy of `kubeconfig` whose server is a port on 127.0.0.1 nothing listens on: a cluster
/// that is down.
#[allow(dead_code)] // only tests/cluster/check.rs and tests/cluster/plugin.rs
pub(crate) fn unreachable(kubeconfig: &Path, server: &str, path: &Path) -> PathBuf {
    let text = std::fs::read_to_string(kubeconfig).expect("read the kubeconfig");
    let dead = format!("https://127.0.0.1:{}", super::cluster::free_port());
    std::fs::write(path, text.replace(server, &dead)).expect("write the unreachable kubeconfig");
    path.to_owned()
}
