//! The two controllers of the migration tests, and what the tests count about them: the real
//! Traefik (`tests/traefik/build.sh`), its Kubernetes ingress-nginx provider run outside the
//! cluster with a ServiceAccount token, and the legacy writer standing in for ingress-nginx
//! (which does not build from the Go module proxy); their status writes as the API server's
//! audit log records them, every change of a stored status, and the watch events Traefik's
//! informers receive.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::PostParams;
use kube::runtime::watcher;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::support::cluster::{STATUS_WRITERS, free_port};
use crate::support::process::{self, Proc};
use crate::support::{Class, TestEnv, addresses, create_ingress, entries};

/// The legacy controller's address (ingress-nginx's load balancer) and Traefik's.
pub(crate) const LEGACY_IP: &str = "203.0.113.10";
pub(crate) const TRAEFIK_IP: &str = "203.0.113.20";
/// Their publish Services, in the test's namespace.
pub(crate) const LEGACY_SERVICE: &str = "ingress-nginx-controller";
pub(crate) const TRAEFIK_SERVICE: &str = "traefik";
/// The legacy writer's identity (a client certificate, in the status writers' group).
pub(crate) const LEGACY_USER: &str = "ingress-nginx";
/// How many Ingresses of class `nginx` each test serves with both controllers.
pub(crate) const INGRESSES: usize = 20;

/// The Ingresses' names: half name the class in `spec.ingressClassName` (with the IngressClass
/// `nginx` of controller `k8s.io/ingress-nginx`), half with the legacy annotation; both
/// controllers and the guard read both.
pub(crate) fn names() -> Vec<String> {
    (0..INGRESSES).map(|i| format!("web-{i:02}")).collect()
}

pub(crate) fn class_of(i: usize) -> Class<'static> {
    if i.is_multiple_of(2) { Class::Field("nginx") } else { Class::Annotation("nginx") }
}

/// Creates the `INGRESSES` Ingresses but the first (`skip_first`: a caller made it already).
pub(crate) async fn create_ingresses(t: &TestEnv, skip_first: bool) {
    for (i, name) in names().iter().enumerate().skip(usize::from(skip_first)) {
        create_ingress(&t.ingresses, name, class_of(i)).await;
    }
}

/// The IngressClass `nginx` of controller `k8s.io/ingress-nginx`, as an ingress-nginx install
/// leaves it: cluster-scoped and shared by the tests of this module (created once, never
/// deleted). No other test governs by that controller, and a guard governs by class name.
pub(crate) async fn ensure_nginx_class(admin: &kube::Client) {
    let class: IngressClass = serde_json::from_value(json!({
        "metadata": {"name": "nginx"},
        "spec": {"controller": "k8s.io/ingress-nginx"}
    }))
    .unwrap();
    match Api::<IngressClass>::all(admin.clone()).create(&PostParams::default(), &class).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create IngressClass nginx: {e}"),
    }
}

/// Traefik's ServiceAccount `traefik` in the test's namespace with the RBAC of Traefik's Helm
/// chart for this provider, cut to the namespace (it watches only it): read Ingresses,
/// Services, EndpointSlices, Secrets and ConfigMaps, write `ingresses/status`; and list
/// IngressClasses (cluster-scoped: a ClusterRole named after the namespace).
async fn service_account(t: &TestEnv) -> String {
    let pp = PostParams::default();
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "traefik"}})).unwrap();
    Api::<ServiceAccount>::namespaced(t.admin.clone(), &t.ns).create(&pp, &sa).await.expect("ServiceAccount");
    let subject = json!([{"kind": "ServiceAccount", "name": "traefik", "namespace": t.ns}]);
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "traefik"},
        "rules": [
            {"apiGroups": [""], "resources": ["services", "secrets", "configmaps"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
            {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses/status"], "verbs": ["update"]},
        ]
    }))
    .unwrap();
    Api::<Role>::namespaced(t.admin.clone(), &t.ns).create(&pp, &role).await.expect("Role");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "traefik"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "traefik"},
        "subjects": subject,
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(t.admin.clone(), &t.ns).create(&pp, &binding).await.expect("RoleBinding");
    let name = format!("{}-traefik", t.ns);
    let cluster_role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": name},
        "rules": [{"apiGroups": ["networking.k8s.io"], "resources": ["ingressclasses"], "verbs": ["get", "list", "watch"]}]
    }))
    .unwrap();
    Api::<ClusterRole>::all(t.admin.clone()).create(&pp, &cluster_role).await.expect("ClusterRole");
    let cluster_binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": subject,
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(t.admin.clone()).create(&pp, &cluster_binding).await.expect("ClusterRoleBinding");
    format!("system:serviceaccount:{}:traefik", t.ns)
}

/// Runs `tests/traefik/build.sh` (or takes `ISG_TRAEFIK`) and returns the binary.
fn binary() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/traefik/build.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = stdout.lines().last().unwrap_or("").trim();
    assert!(out.status.success() && !path.is_empty(), "{} failed ({})", script.display(), out.status);
    PathBuf::from(path)
}

/// A running Traefik: its ingress-nginx provider watching the test's namespace only, with a
/// token of ServiceAccount `traefik`, publishing Service `<ns>/traefik`.
pub(crate) struct Traefik {
    proc: Proc,
    /// `system:serviceaccount:<ns>:traefik`
    pub user: String,
}

impl Traefik {
    pub(crate) async fn start(t: &TestEnv) -> Traefik {
        let user = service_account(t).await;
        let binary = tokio::task::spawn_blocking(binary).await.expect("the build's thread");
        let dir = t.cluster.scratch_dir(&format!("traefik-{}", t.ns));
        let token = t
            .cluster
            .kubectl(t.cluster.admin_kubeconfig(), &["create", "token", "traefik", "-n", &t.ns, "--duration=24h"]);
        assert!(token.success, "kubectl create token: {}", token.stderr);
        let token_file = dir.join("token");
        std::fs::write(&token_file, token.stdout.trim()).expect("write the token");
        let provider = "--providers.kubernetesingressnginx";
        let mut command = Command::new(&binary);
        command
            .arg("--global.checkNewVersion=false")
            .arg("--global.sendAnonymousUsage=false")
            .arg("--log.level=DEBUG")
            .arg(format!("--entryPoints.web.address=127.0.0.1:{}", free_port()))
            .arg(format!("{provider}=true"))
            .arg(format!("{provider}.endpoint={}", t.cluster.server))
            .arg(format!("{provider}.token={}", token_file.display()))
            .arg(format!("{provider}.certAuthFilePath={}", t.cluster.ca_file().display()))
            .arg(format!("{provider}.watchNamespace={}", t.ns))
            .arg(format!("{provider}.publishService={}/{TRAEFIK_SERVICE}", t.ns))
            // A kubeconfig or an in-cluster environment would take precedence over the flags.
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT");
        let log = dir.join("traefik.log");
        let _ = std::fs::write(&log, format!("$ {command:?}\n"));
        let proc = process::spawn("traefik", command, &log).unwrap_or_else(|e| panic!("start traefik: {e}"));
        Traefik { proc, user }
    }

    pub(crate) fn log_path(&self) -> PathBuf {
        self.proc.log_path().to_path_buf()
    }

    /// Panics with its log if Traefik has exited.
    pub(crate) fn assert_running(&mut self) {
        if let Some(status) = self.proc.exited() {
            panic!("traefik exited with {status}\n{}", self.proc.log_tail(40));
        }
    }

    pub(crate) fn stop(&mut self) {
        self.proc.kill();
    }
}

/// The status writes of `user` in `ns`, as the API server's audit log records them.
pub(crate) fn status_writes(t: &TestEnv, user: &str) -> Vec<Value> {
    t.cluster
        .audit_events()
        .into_iter()
        .filter(|e| {
            let r = &e["objectRef"];
            r["resource"] == "ingresses"
                && r["subresource"] == "status"
                && r["namespace"] == t.ns.as_str()
                && e["user"]["username"] == user
                && (e["verb"] == "update" || e["verb"] == "patch")
        })
        .collect()
}

/// The status of what the write asked for (its request body's addresses, short form).
pub(crate) fn written(event: &Value) -> Vec<String> {
    let ingress: Option<Ingress> = serde_json::from_value(event["requestObject"].clone()).ok();
    ingress.map(|i| addresses(&i)).unwrap_or_default()
}

/// The webhook's verdict on a write, from the audit annotation
/// `mutation.webhook.admission.k8s.io/*`: `Some(true)` when its patch changed the write,
/// `Some(false)` when it let the write through as written, `None` when it was not called.
/// The API server records it also for a write it then refuses (a stale resourceVersion: 409).
pub(crate) fn webhook_verdict(event: &Value) -> Option<bool> {
    let annotations = event["annotations"].as_object()?;
    let (_, text) = annotations.iter().find(|(k, _)| k.starts_with("mutation.webhook.admission.k8s.io/"))?;
    let verdict: Value = serde_json::from_str(text.as_str()?).ok()?;
    verdict["mutated"].as_bool()
}

/// Whether the webhook's patch changed the write.
pub(crate) fn patched_by_webhook(event: &Value) -> bool {
    webhook_verdict(event) == Some(true)
}

/// ingress-nginx's part, played by the test: every `period` (its status sync, 60 s in
/// ingress-nginx, shortened here) it lists the Ingresses of class `nginx` in the namespace and,
/// for each whose stored status is not its address, writes it with a PUT of the status
/// (`UpdateStatus`), as `ingress-nginx`. It counts its sweeps and its writes.
pub(crate) struct LegacyWriter {
    task: tokio::task::JoinHandle<()>,
    pub sweeps: Arc<AtomicU64>,
    pub writes: Arc<AtomicU64>,
}

impl LegacyWriter {
    pub(crate) async fn start(t: &TestEnv, period: Duration) -> LegacyWriter {
        let client = t.cluster.client_for(LEGACY_USER, Some(STATUS_WRITERS)).await;
        let api: Api<Ingress> = Api::namespaced(client, &t.ns);
        let (sweeps, writes) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (swept, wrote) = (sweeps.clone(), writes.clone());
        let task = tokio::spawn(async move {
            loop {
                if let Ok(list) = api.list(&Default::default()).await {
                    for mut ingress in list.items.into_iter().filter(is_nginx) {
                        if addresses(&ingress) == [LEGACY_IP] {
                            continue;
                        }
                        let name = ingress.metadata.name.clone().unwrap_or_default();
                        ingress.status =
                            serde_json::from_value(json!({"loadBalancer": {"ingress": entries(&[LEGACY_IP])}})).ok();
                        if api.replace_status(&name, &PostParams::default(), &ingress).await.is_ok() {
                            wrote.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                swept.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(period).await;
            }
        });
        LegacyWriter { task, sweeps, writes }
    }

    /// Waits until `more` sweeps have run from now.
    pub(crate) async fn await_sweeps(&self, more: u64) {
        let until = self.sweeps.load(Ordering::Relaxed) + more;
        while self.sweeps.load(Ordering::Relaxed) < until {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for LegacyWriter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Class `nginx`, by field or annotation (as ingress-nginx reads it).
fn is_nginx(ingress: &Ingress) -> bool {
    let field = ingress.spec.as_ref().and_then(|s| s.ingress_class_name.as_deref());
    let annotation =
        ingress.metadata.annotations.as_ref().and_then(|a| a.get("kubernetes.io/ingress.class")).map(String::as_str);
    field.or(annotation) == Some("nginx")
}

/// Every change of a stored status in the namespace after the watch's first list, as
/// `(Ingress, addresses)`: for the whole run, not sampled.
pub(crate) struct StatusWatch {
    task: tokio::task::JoinHandle<()>,
    pub changes: Arc<std::sync::Mutex<Vec<(String, Vec<String>)>>>,
    listed: Arc<AtomicU64>,
}

impl StatusWatch {
    pub(crate) fn start(t: &TestEnv) -> StatusWatch {
        let api: Api<Ingress> = Api::namespaced(t.admin.clone(), &t.ns);
        let changes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (log, listed) = (changes.clone(), Arc::new(AtomicU64::new(0)));
        let done = listed.clone();
        let task = tokio::spawn(async move {
            let mut last = std::collections::HashMap::<String, Vec<String>>::new();
            let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
            while let Some(event) = events.next().await {
                if let Ok(watcher::Event::InitDone) = event {
                    done.store(1, Ordering::Relaxed);
                }
                let Ok(watcher::Event::Apply(ing) | watcher::Event::InitApply(ing)) = event else { continue };
                let name = ing.metadata.name.clone().unwrap_or_default();
                let now = addresses(&ing);
                if last.insert(name.clone(), now.clone()).is_some_and(|before| before != now) {
                    log.lock().unwrap().push((name, now));
                }
            }
        });
        StatusWatch { task, changes, listed }
    }

    /// Whether the first list is done (changes are seen from then on).
    pub(crate) fn synced(&self) -> bool {
        self.listed.load(Ordering::Relaxed) == 1
    }

    pub(crate) fn changes(&self) -> Vec<(String, Vec<String>)> {
        self.changes.lock().unwrap().clone()
    }
}

impl Drop for StatusWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The watch events Traefik's informers receive, counted by watches of the same kinds: in the
/// namespace, Ingresses, Services, EndpointSlices, Secrets and ConfigMaps; IngressClasses in
/// the whole cluster (other tests' too). Each event that changes an object's resourceVersion
/// may make Traefik rebuild its configuration and write every Ingress whose cached status is
/// not its own. A write rewritten to the stored value changes no field, but the first one of
/// each writer still adds its entry to `managedFields`, which is an event: `bookkeeping` counts
/// the Ingress events that changed nothing else (not even the status).
pub(crate) struct EventCount {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    pub events: Arc<AtomicU64>,
    pub bookkeeping: Arc<AtomicU64>,
    listed: Arc<AtomicU64>,
}

impl EventCount {
    pub(crate) fn start(t: &TestEnv) -> EventCount {
        let (events, bookkeeping) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let listed = Arc::new(AtomicU64::new(0));
        let ns = t.ns.as_str();
        let admin = &t.admin;
        let c = || Counters { events: events.clone(), bookkeeping: None, listed: listed.clone() };
        let tasks = vec![
            count(
                Api::<Ingress>::namespaced(admin.clone(), ns),
                Counters { bookkeeping: Some(bookkeeping.clone()), ..c() },
            ),
            count(Api::<Service>::namespaced(admin.clone(), ns), c()),
            count(Api::<EndpointSlice>::namespaced(admin.clone(), ns), c()),
            count(Api::<Secret>::namespaced(admin.clone(), ns), c()),
            count(Api::<ConfigMap>::namespaced(admin.clone(), ns), c()),
            count(Api::<IngressClass>::all(admin.clone()), c()),
        ];
        EventCount { tasks, events, bookkeeping, listed }
    }

    /// Whether every watch has listed.
    pub(crate) fn synced(&self) -> bool {
        self.listed.load(Ordering::Relaxed) == self.tasks.len() as u64
    }

    pub(crate) fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }
}

impl Drop for EventCount {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// What one counting watch adds to.
struct Counters {
    events: Arc<AtomicU64>,
    bookkeeping: Option<Arc<AtomicU64>>,
    listed: Arc<AtomicU64>,
}

/// Counts every object a watch lists and every change of one (a new resourceVersion), and with
/// `bookkeeping` those changes that left everything but `managedFields` as it was.
fn count<K>(api: Api<K>, counters: Counters) -> tokio::task::JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug + Send + 'static,
{
    let Counters { events, bookkeeping, listed } = counters;
    tokio::spawn(async move {
        let mut seen = std::collections::HashMap::<String, (String, Value)>::new();
        let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()));
        let mut first_list = true;
        while let Some(event) = stream.next().await {
            let object = match event {
                Ok(watcher::Event::InitDone) if first_list => {
                    first_list = false;
                    listed.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o,
                Ok(watcher::Event::Delete(_)) => {
                    events.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                _ => continue,
            };
            let meta = object.meta();
            let key =
                format!("{}/{}", meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default());
            let version = meta.resource_version.clone().unwrap_or_default();
            let mut rest = serde_json::to_value(&object).unwrap_or_default();
            if let Some(meta) = rest.get_mut("metadata").and_then(Value::as_object_mut) {
                for volatile in ["resourceVersion", "managedFields", "generation"] {
                    meta.remove(volatile);
                }
            }
            match seen.insert(key, (version.clone(), rest.clone())) {
                Some((before, _)) if before == version => {}
                Some((_, before_rest)) => {
                    events.fetch_add(1, Ordering::Relaxed);
                    if before_rest == rest
                        && let Some(bookkeeping) = &bookkeeping
                    {
                        bookkeeping.fetch_add(1, Ordering::Relaxed);
                    }
                }
                None => {
                    events.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    })
}
