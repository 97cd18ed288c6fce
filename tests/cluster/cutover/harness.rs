//! What the tests of `cutover` share: running the binary, the policy ConfigMap and the
//! kubelet's part in it (the module docs of `cutover`), the guard, and waits.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

pub(crate) use super::support::guard::{LEASE_FLAGS, lb_service};
use super::support::{TestEnv, Webhook, addresses, eventually};

pub(crate) const BINARY: &str = env!("CARGO_BIN_EXE_ingress-status-guard");
pub(crate) const A: &str = "203.0.113.1";
pub(crate) const B: &str = "203.0.113.2";
pub(crate) const CONFIG_MAP: &str = "isg-config";
pub(crate) const ANNOTATION: &str = "cutover.ingress-status-guard/previous.config.yaml";

#[derive(Debug, PartialEq)]
pub(crate) struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `program args` off the runtime's threads (the test's kubelet keeps running), with
/// `PATH` led by `path_dir` when given (where `kubectl-isg` is).
pub(crate) async fn run(program: &str, args: &[String], path_dir: Option<&Path>) -> Run {
    let (program, args, path_dir) = (program.to_owned(), args.to_vec(), path_dir.map(Path::to_path_buf));
    tokio::task::spawn_blocking(move || {
        let mut command = Command::new(&program);
        command.args(&args).env_remove("KUBECONFIG");
        if let Some(dir) = path_dir {
            let path = std::env::join_paths(
                std::iter::once(dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
            )
            .expect("PATH");
            command.env("PATH", path);
        }
        let out = command.output().unwrap_or_else(|e| panic!("run {program}: {e}"));
        let run = Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        let shown = if run.stdout.len() > 4000 { format!("{}...\n", &run.stdout[..4000]) } else { run.stdout.clone() };
        println!("$ {program} {}\n{shown}{}(exit {:?})\n", args.join(" "), run.stderr, run.code);
        run
    })
    .await
    .expect("the command's thread")
}

/// `cutover` with the ConfigMap of the test, its policy `edge` and `args`.
pub(crate) fn cutover_args(t: &TestEnv, kubeconfig: &Path, args: &[&str]) -> Vec<String> {
    let mut all = vec![
        "cutover".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--config-map={}/{CONFIG_MAP}", t.ns),
        "--policy=edge".to_owned(),
    ];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    all
}

pub(crate) fn policy_file(class: &str, service: &str) -> String {
    format!(
        "policies:\n  # the edge controller\n  - name: edge\n    ingressClasses: [{class}]\n    publishService: {service}\n"
    )
}

pub(crate) async fn create_config_map(t: &TestEnv, text: &str) {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": CONFIG_MAP},
        "data": {"config.yaml": text}
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).create(&PostParams::default(), &cm).await.unwrap();
}

/// Lays out `dir` as the kubelet lays out a ConfigMap volume: `config.yaml ->
/// ..data/config.yaml`, `..data -> ..v<version>`, the `..data` link swapped by a rename.
pub(crate) fn write_config_volume(dir: &Path, version: u32, text: &str) {
    let target = dir.join(format!("..v{version}"));
    std::fs::create_dir_all(&target).unwrap();
    std::fs::write(target.join("config.yaml"), text).unwrap();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(format!("..v{version}"), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    let link = dir.join("config.yaml");
    if std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink("..data/config.yaml", &link).unwrap();
    }
}

/// The test's stand-in for the kubelet's ConfigMap volume (module docs). With `unresolve`,
/// it first clears that Service's load balancer, so the guard reloads onto a source that
/// gives no address.
pub(crate) struct Kubelet(tokio::task::JoinHandle<()>);

impl Kubelet {
    pub(crate) fn start(t: &TestEnv, dir: PathBuf, unresolve: Option<&str>) -> Kubelet {
        Kubelet::of(&t.admin, &t.ns, CONFIG_MAP, dir, unresolve)
    }

    /// The kubelet of ConfigMap `namespace/name` (and of Service `namespace/unresolve`).
    pub(crate) fn of(
        admin: &kube::Client,
        namespace: &str,
        name: &str,
        dir: PathBuf,
        unresolve: Option<&str>,
    ) -> Kubelet {
        let configmaps: Api<ConfigMap> = Api::namespaced(admin.clone(), namespace);
        let services: Api<Service> = Api::namespaced(admin.clone(), namespace);
        let (name, unresolve) = (name.to_owned(), unresolve.map(str::to_owned));
        Kubelet(tokio::spawn(async move {
            let mut last: Option<String> = None;
            for version in 1.. {
                loop {
                    let text = configmaps.get(&name).await.ok().and_then(|cm| cm.data?.remove("config.yaml"));
                    if text.is_some() && text != last {
                        if let (Some(_), Some(svc)) = (&last, &unresolve) {
                            let status = json!({"status": {"loadBalancer": {"ingress": null}}});
                            services.patch_status(svc, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
                        }
                        write_config_volume(&dir, version, text.as_deref().unwrap_or_default());
                        last = text;
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }))
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The guard of one test: its ConfigMap (with `service` as the source), the volume the test's
/// kubelet keeps, and `serve` with the reconciler on and this test's Lease.
pub(crate) async fn start_guard(t: &TestEnv, service: &str, unresolve: Option<&str>) -> (Webhook, Kubelet) {
    start_guard_with(t, &policy_file(&t.ns, &format!("{}/{service}", t.ns)), unresolve).await
}

/// As [`start_guard`], with the policy file `text` in the ConfigMap.
pub(crate) async fn start_guard_with(t: &TestEnv, text: &str, unresolve: Option<&str>) -> (Webhook, Kubelet) {
    create_config_map(t, text).await;
    let dir = t.cluster.scratch_dir(&format!("volume-{}", t.ns));
    let kubelet = Kubelet::start(t, dir.clone(), unresolve);
    eventually("the kubelet lays out the volume", Duration::from_secs(30), || async {
        if dir.join("config.yaml").exists() { Ok(()) } else { Err("no config.yaml yet".to_owned()) }
    })
    .await;
    let config = format!("--config={}", dir.join("config.yaml").display());
    let lease = format!("--leader-election-namespace={}", t.ns);
    let args = [
        config.as_str(),
        "--reconcile=true",
        "--reconcile-qps=50",
        &lease,
        LEASE_FLAGS[0],
        LEASE_FLAGS[1],
        LEASE_FLAGS[2],
    ];
    (t.start_webhook(&args).await, kubelet)
}

/// Waits until every Ingress of `names` stores `want`.
pub(crate) async fn await_all(t: &TestEnv, names: &[String], want: &str, webhook: &Webhook) {
    eventually(
        &format!("{} Ingresses store {want} (guard log: {})", names.len(), webhook.log_path().display()),
        Duration::from_secs(120),
        || async {
            let list = t.ingresses.list(&Default::default()).await.map_err(|e| e.to_string())?;
            let off: Vec<String> = list
                .items
                .iter()
                .filter(|i| names.contains(i.metadata.name.as_ref().unwrap()) && addresses(i) != [want])
                .map(|i| i.metadata.name.clone().unwrap_or_default())
                .collect();
            if off.is_empty() { Ok(()) } else { Err(format!("{} off, e.g. {:?}", off.len(), off.first())) }
        },
    )
    .await;
}

/// The JSON events of `-o json`, every line one.
pub(crate) fn events(stdout: &str) -> Vec<Value> {
    stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON event: {l:?}: {e}"))).collect()
}

pub(crate) fn plugin_dir(t: &TestEnv) -> PathBuf {
    let dir = t.cluster.scratch_dir("cutover-plugin-bin");
    std::os::unix::fs::symlink(BINARY, dir.join("kubectl-isg")).expect("symlink kubectl-isg");
    dir
}
