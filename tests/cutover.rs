//! `cutover` end to end (issue 24): the built binary, black box, against the real
//! kube-apiserver + etcd of `support`, with a real guard (`serve --config FILE`, reconciler on)
//! moving the Ingresses.
//!
//! There is no kubelet in the harness, so each test plays the kubelet's ConfigMap-volume role
//! (`Kubelet` below): it reads the policy ConfigMap every 200 ms and, when the key changes,
//! writes the new text into the guard's `--config` directory with the kubelet's `..data`
//! symlink swap (an atomic rename), which `serve` reloads.

#[allow(dead_code)]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use support::{Class, TestEnv, Webhook, addresses, create_ingress, eventually};

const BINARY: &str = env!("CARGO_BIN_EXE_ingress-status-guard");
const A: &str = "203.0.113.1";
const B: &str = "203.0.113.2";
const CONFIG_MAP: &str = "isg-config";
const ANNOTATION: &str = "cutover.ingress-status-guard/previous.config.yaml";
/// Lease timing for tests (client-go's flags, shortened), as in tests/reconcile.rs.
const LEASE_FLAGS: [&str; 3] =
    ["--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=1s"];

#[derive(Debug, PartialEq)]
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `program args` off the runtime's threads (the test's kubelet keeps running), with
/// `PATH` led by `path_dir` when given (where `kubectl-isg` is).
async fn run(program: &str, args: &[String], path_dir: Option<&Path>) -> Run {
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
fn cutover_args(t: &TestEnv, kubeconfig: &Path, args: &[&str]) -> Vec<String> {
    let mut all = vec![
        "cutover".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--config-map={}/{CONFIG_MAP}", t.ns),
        "--policy=edge".to_owned(),
    ];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    all
}

fn policy_file(class: &str, service: &str) -> String {
    format!(
        "policies:\n  # the edge controller\n  - name: edge\n    ingressClasses: [{class}]\n    publishService: {service}\n"
    )
}

/// A LoadBalancer Service whose status publishes `ip`.
async fn lb_service(api: &Api<Service>, name: &str, ip: &str) {
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}
    }))
    .unwrap();
    api.create(&PostParams::default(), &service).await.unwrap_or_else(|e| panic!("create Service {name}: {e}"));
    let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
}

async fn create_config_map(t: &TestEnv, text: &str) {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": CONFIG_MAP},
        "data": {"config.yaml": text}
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).create(&PostParams::default(), &cm).await.unwrap();
}

/// Lays out `dir` as the kubelet lays out a ConfigMap volume: `config.yaml ->
/// ..data/config.yaml`, `..data -> ..v<version>`, the `..data` link swapped by a rename.
fn write_config_volume(dir: &Path, version: u32, text: &str) {
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
struct Kubelet(tokio::task::JoinHandle<()>);

impl Kubelet {
    fn start(t: &TestEnv, dir: PathBuf, unresolve: Option<&str>) -> Kubelet {
        Kubelet::of(&t.admin, &t.ns, CONFIG_MAP, dir, unresolve)
    }

    /// The kubelet of ConfigMap `namespace/name` (and of Service `namespace/unresolve`).
    fn of(admin: &kube::Client, namespace: &str, name: &str, dir: PathBuf, unresolve: Option<&str>) -> Kubelet {
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
async fn start_guard(t: &TestEnv, service: &str, unresolve: Option<&str>) -> (Webhook, Kubelet) {
    create_config_map(t, &policy_file(&t.ns, &format!("{}/{service}", t.ns))).await;
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
async fn await_all(t: &TestEnv, names: &[String], want: &str, webhook: &Webhook) {
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
fn events(stdout: &str) -> Vec<Value> {
    stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON event: {l:?}: {e}"))).collect()
}

fn plugin_dir(t: &TestEnv) -> PathBuf {
    let dir = t.cluster.scratch_dir("cutover-plugin-bin");
    std::os::unix::fs::symlink(BINARY, dir.join("kubectl-isg")).expect("symlink kubectl-isg");
    dir
}

/// 200 Ingresses move from Service A to Service B and back; the plan lists exactly them, the
/// JSON stream parses and ends 200/200, and the rollback's progress bar is drawn on a
/// pseudo-terminal (`script` from util-linux).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_ingresses_move_to_service_b_and_back() {
    let t = TestEnv::new("cutover").await;
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    lb_service(&services, "controller-a", A).await;
    lb_service(&services, "controller-b", B).await;
    let (guard, _kubelet) = start_guard(&t, "controller-a", None).await;
    let names: Vec<String> = (0..200).map(|i| format!("web-{i:03}")).collect();
    for name in &names {
        create_ingress(&t.ingresses, name, Class::Field(&t.ns)).await;
    }
    // An Ingress of another class is not in the plan.
    create_ingress(&t.ingresses, "other", Class::Field("not-governed")).await;
    await_all(&t, &names, A, &guard).await;
    let kc = t.cluster.admin_kubeconfig();
    let to_b = format!("--to-publish-service={}/controller-b", t.ns);

    // The plan: exactly the 200, from A to B, each with its hostname.
    let dry = run(BINARY, &cutover_args(&t, kc, &[&to_b, "--dry-run", "-o", "json"]), None).await;
    assert_eq!(dry.code, Some(0), "{}", dry.stderr);
    let plan = &events(&dry.stdout)[0];
    assert_eq!(plan["event"], "plan");
    let planned: Vec<&str> =
        plan["ingresses"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(planned, names.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        plan["ingresses"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["from"] == json!([{"ip": A}]) && m["to"] == json!([{"ip": B}]))
    );
    assert_eq!(plan["ingresses"][7]["hosts"], json!(["web-007.example.test"]));
    assert_eq!(plan["summary"]["moving"], 200);
    // The text plan, the same through `kubectl isg` (kubectl's plugin lookup on PATH).
    let text = run(BINARY, &cutover_args(&t, kc, &[&to_b, "--dry-run"]), None).await;
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    assert_eq!(text.stdout.lines().count(), 202, "header, 200 rows, summary:\n{}", text.stdout);
    assert!(text.stdout.starts_with("INGRESS "), "{}", text.stdout);
    let summary = text.stdout.lines().last().unwrap();
    assert!(
        summary.contains(&format!(
            "moves from service {}/controller-a to service {}/controller-b [{B}]: 200 Ingresses move, 0 already there",
            t.ns, t.ns
        )),
        "{summary}"
    );
    let bin = plugin_dir(&t);
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    // kubectl's way to name it: NAME and -n.
    let mut plugin_args: Vec<String> =
        std::iter::once("isg".to_owned()).chain(cutover_args(&t, kc, &[&to_b, "--dry-run", "-n", &t.ns])).collect();
    plugin_args[3] = format!("--config-map={CONFIG_MAP}");
    let through_kubectl = run(&kubectl, &plugin_args, Some(&bin)).await;
    assert_eq!(through_kubectl, text, "kubectl isg cutover --dry-run prints the same plan");
    let cm = Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).get(CONFIG_MAP).await.unwrap();
    assert!(!cm.metadata.annotations.unwrap_or_default().contains_key(ANNOTATION), "a dry run writes nothing");

    // Act and follow, as a pipeline reads it.
    let moved = run(BINARY, &cutover_args(&t, kc, &[&to_b, "-o", "json", "--timeout=5m"]), None).await;
    assert_eq!(moved.code, Some(0), "{} (guard log: {})", moved.stderr, guard.log_path().display());
    let stream = events(&moved.stdout);
    let kinds: Vec<&str> = stream.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"plan"));
    assert_eq!(kinds[1], "applied", "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "moved").count(), 200, "{kinds:?}");
    let done = stream.last().unwrap();
    assert_eq!(
        (done["event"].as_str(), done["moved"].as_u64(), done["total"].as_u64()),
        (Some("done"), Some(200), Some(200))
    );
    await_all(&t, &names, B, &guard).await;
    assert_eq!(addresses(&t.ingresses.get("other").await.unwrap()), Vec::<String>::new(), "not governed: untouched");
    let cm = Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).get(CONFIG_MAP).await.unwrap();
    let previous = cm.metadata.annotations.clone().unwrap_or_default().remove(ANNOTATION);
    assert_eq!(
        previous.as_deref(),
        Some(policy_file(&t.ns, &format!("{}/controller-a", t.ns)).as_str()),
        "the previous value, comments and all"
    );
    let managers: Vec<String> = cm.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.clone()).collect();
    assert!(managers.iter().any(|m| m == "ingress-status-guard-cutover"), "{managers:?}");

    // Roll back on a terminal: the progress bar, through a pseudo-terminal.
    let command = std::iter::once(BINARY.to_owned())
        .chain(cutover_args(&t, kc, &["--rollback", "--timeout=5m"]))
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    // A terminal 120 columns wide (script's own pty has the size of none).
    let command = format!("stty cols 120 rows 40; {command}");
    let tty = run("script", &["-q".into(), "-e".into(), "-c".into(), command, "/dev/null".into()], None).await;
    assert_eq!(tty.code, Some(0), "{}{}", tty.stdout, tty.stderr);
    let screen = tty.stdout.replace('\r', "\n");
    assert!(screen.contains("] 200/200 moved, "), "the bar ends at 200/200:\n{screen}");
    assert!(screen.contains("newest: "), "the bar names the newest moved Ingress:\n{screen}");
    assert!(screen.contains("ETA "), "{screen}");
    assert!(screen.contains("done: 200/200 moved in "), "{screen}");
    let frame = t.cluster.scratch_dir("cutover-frames").join("rollback-tty.txt");
    std::fs::write(&frame, &tty.stdout).unwrap();
    println!("the terminal's bytes: {}", frame.display());
    await_all(&t, &names, A, &guard).await;
}

/// The new source unresolved: the plan exits 1 naming it and writes nothing; a source that the
/// guard cannot resolve after the apply makes `--timeout` exit 1 naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unresolved_target_exits_1_naming_it() {
    let t = TestEnv::new("cutover-unresolved").await;
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    lb_service(&services, "controller-a", A).await;
    lb_service(&services, "controller-b", B).await;
    let (guard, _kubelet) = start_guard(&t, "controller-a", Some("controller-b")).await;
    let names: Vec<String> = (0..3).map(|i| format!("app-{i}")).collect();
    for name in &names {
        create_ingress(&t.ingresses, name, Class::Field(&t.ns)).await;
    }
    await_all(&t, &names, A, &guard).await;
    let kc = t.cluster.admin_kubeconfig();

    let missing = format!("--to-publish-service={}/missing", t.ns);
    let out = run(BINARY, &cutover_args(&t, kc, &[&missing]), None).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert_eq!(
        out.stderr.trim(),
        format!("error: the new source of policy edge is unresolved: Service {}/missing not found", t.ns)
    );
    let cm = Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).get(CONFIG_MAP).await.unwrap();
    assert!(cm.data.unwrap()["config.yaml"].contains("controller-a"), "nothing applied");

    // B resolves when the plan is made; the kubelet clears its load balancer before the guard
    // reloads, so the guard never moves anything (an unresolved source never changes a status).
    let to_b = format!("--to-publish-service={}/controller-b", t.ns);
    let out = run(BINARY, &cutover_args(&t, kc, &[&to_b, "--timeout=12s"]), None).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stdout.contains("timeout: 0/3 moved after "), "{}", out.stdout);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.starts_with("error: --timeout 12s passed with 0/3 Ingresses moved: "), "{}", out.stderr);
    let why = format!("3 UNRESOLVED ({ns}/app-0, {ns}/app-1, {ns}/app-2): Service {ns}/controller-b ", ns = t.ns);
    assert!(out.stderr.contains(&why), "one cause, named once: {}", out.stderr);
    for name in &names {
        assert_eq!(addresses(&t.ingresses.get(name).await.unwrap()), [A], "never cleared");
    }
}

/// Grants `group` the reads of a cutover, and not patch on ConfigMaps.
async fn readers_without_patch(t: &TestEnv, group: &str) {
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": group},
        "rules": [
            {"apiGroups": [""], "resources": ["configmaps", "services"], "verbs": ["get"]},
            {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["list", "watch"]},
        ]
    }))
    .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": group},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": group},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]
    }))
    .unwrap();
    Api::<ClusterRole>::all(t.admin.clone()).create(&PostParams::default(), &role).await.unwrap();
    Api::<ClusterRoleBinding>::all(t.admin.clone()).create(&PostParams::default(), &binding).await.unwrap();
}

/// Bad input exits 2 with one line on stderr naming the flag; nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_exits_2_naming_the_flag() {
    let t = TestEnv::new("cutover-bad").await;
    create_config_map(&t, &policy_file(&t.ns, &format!("{}/controller-a", t.ns))).await;
    let kc = t.cluster.admin_kubeconfig().to_path_buf();
    let to_b = format!("--to-publish-service={}/controller-b", t.ns);
    let one_line = |out: &Run, want: &str| {
        assert_eq!(out.code, Some(2), "{}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "one line: {}", out.stderr);
        assert!(out.stderr.starts_with(&format!("error: {want}")), "{}", out.stderr);
    };

    let mut args = cutover_args(&t, &kc, &[&to_b]);
    args[2] = format!("--config-map={}/nope", t.ns);
    one_line(&run(BINARY, &args, None).await, &format!("--config-map {}/nope: ConfigMap not found", t.ns));

    let mut args = cutover_args(&t, &kc, &[&to_b]);
    args[3] = "--policy=contour".into();
    one_line(
        &run(BINARY, &args, None).await,
        "--policy contour: no policy named \"contour\" in the file (it has: \"edge\")",
    );

    one_line(
        &run(BINARY, &cutover_args(&t, &kc, &[&to_b, "--key=policies.yaml"]), None).await,
        &format!(
            "--key policies.yaml: ConfigMap {}/{CONFIG_MAP} has no key \"policies.yaml\" (it has: \"config.yaml\")",
            t.ns
        ),
    );

    one_line(
        &run(BINARY, &cutover_args(&t, &kc, &["--rollback"]), None).await,
        &format!("--rollback: ConfigMap {}/{CONFIG_MAP} has no annotation {ANNOTATION}", t.ns),
    );

    let mut args = cutover_args(&t, &kc, &[&to_b, "-n", "elsewhere"]);
    one_line(
        &run(BINARY, &args, None).await,
        &format!("`--namespace elsewhere` and --config-map {}/{CONFIG_MAP} name two namespaces; pass one", t.ns),
    );
    args[2] = format!("--config-map={CONFIG_MAP}");
    one_line(&run(BINARY, &args, None).await, &format!("--config-map elsewhere/{CONFIG_MAP}: ConfigMap not found"));

    let group = format!("isg-e2e:cutover-readers-{}", t.ns);
    readers_without_patch(&t, &group).await;
    let reader = t.cluster.kubeconfig_for("cutover-reader", Some(&group));
    one_line(
        &run(BINARY, &cutover_args(&t, &reader, &[&to_b]), None).await,
        &format!(
            "--config-map {}/{CONFIG_MAP}: this identity may not patch it (RBAC: cutover needs patch on configmaps",
            t.ns
        ),
    );

    // A previous value that would not fit in the annotations (the API server's 256 KiB for all
    // of them together) is refused before anything is written.
    let big = format!("# {}\n{}", "x".repeat(60 * 1024), policy_file(&t.ns, &format!("{}/controller-a", t.ns)));
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "isg-big", "annotations": {"filler": "y".repeat(200 * 1024)}},
        "data": {"config.yaml": big}
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).create(&PostParams::default(), &cm).await.unwrap();
    let mut args = cutover_args(&t, &kc, &[&to_b]);
    args[2] = format!("--config-map={}/isg-big", t.ns);
    let out = run(BINARY, &args, None).await;
    one_line(&out, &format!("--config-map {}/isg-big: the key's previous value (", t.ns));
    assert!(out.stderr.contains("would not fit in the ConfigMap's annotations"), "{}", out.stderr);

    // A previous value that the guard would refuse is not restored, with the guard's error.
    let broken = json!({"metadata": {"annotations": {ANNOTATION: "policies:\n  - name: edge\n    publishService: not-a-reference\n"}}});
    Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns)
        .patch(CONFIG_MAP, &PatchParams::default(), &Patch::Merge(&broken))
        .await
        .unwrap();
    one_line(
        &run(BINARY, &cutover_args(&t, &kc, &["--rollback"]), None).await,
        &format!(
            "the edited policy file would be refused by the guard, so it is not applied: config file config.yaml of ConfigMap {}/{CONFIG_MAP}: policies[0].publishService: ",
            t.ns
        ),
    );
    let cm = Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).get(CONFIG_MAP).await.unwrap();
    assert!(cm.data.unwrap()["config.yaml"].contains("controller-a"), "nothing applied");
}

/// docs/migration.md, steps 4 and 5, with `cutover`: the guide's names (controller A is
/// ingress-nginx publishing 203.0.113.10, B is Traefik publishing 203.0.113.20, the Ingresses
/// shop/web, shop/api and blog/www of class nginx) and its commands, off a terminal. The
/// output goes to `target/tmp/e2e/run-*/shared/cutover-guide-*/transcript.md`, which is where
/// the guide's output comes from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_migration_guide_cuts_over_with_cutover() {
    use k8s_openapi::api::core::v1::Namespace;
    let t = TestEnv::new("cutover-guide").await;
    // Fixed names, as in the guide: this test is the only one in this binary using them.
    for ns in ["ingress-nginx", "traefik", "shop", "blog", "ingress-status-guard"] {
        let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(t.admin.clone()).create(&PostParams::default(), &namespace).await.unwrap();
    }
    lb_service(&Api::namespaced(t.admin.clone(), "ingress-nginx"), "ingress-nginx-controller", "203.0.113.10").await;
    lb_service(&Api::namespaced(t.admin.clone(), "traefik"), "traefik", "203.0.113.20").await;
    let text = "policies:\n  - name: ingress-nginx\n    ingressClasses: [nginx]\n    publishService: ingress-nginx/ingress-nginx-controller\n";
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "ingress-status-guard-config"},
        "data": {"config.yaml": text}
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(t.admin.clone(), "ingress-status-guard")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let dir = t.cluster.scratch_dir("cutover-guide-volume");
    let _kubelet = Kubelet::of(&t.admin, "ingress-status-guard", "ingress-status-guard-config", dir.clone(), None);
    eventually("the kubelet lays out the volume", Duration::from_secs(30), || async {
        if dir.join("config.yaml").exists() { Ok(()) } else { Err("no config.yaml yet".to_owned()) }
    })
    .await;
    let config = format!("--config={}", dir.join("config.yaml").display());
    let args = [
        config.as_str(),
        "--reconcile=true",
        "--leader-election-namespace=ingress-status-guard",
        LEASE_FLAGS[0],
        LEASE_FLAGS[1],
        LEASE_FLAGS[2],
    ];
    let guard = t.start_webhook(&args).await;
    let ingresses = [("shop", "web"), ("shop", "api"), ("blog", "www")];
    for (ns, name) in ingresses {
        create_ingress(&Api::namespaced(t.admin.clone(), ns), name, Class::Field("nginx")).await;
    }
    let stored_all = |want: &'static str| {
        let admin = t.admin.clone();
        let log = guard.log_path();
        async move {
            eventually(
                &format!("the guide's Ingresses store {want} (guard log: {})", log.display()),
                Duration::from_secs(60),
                || async {
                    for (ns, name) in ingresses {
                        let got = addresses(
                            &Api::<k8s_openapi::api::networking::v1::Ingress>::namespaced(admin.clone(), ns)
                                .get(name)
                                .await
                                .map_err(|e| e.to_string())?,
                        );
                        if got != [want] {
                            return Err(format!("{ns}/{name}: {got:?}"));
                        }
                    }
                    Ok(())
                },
            )
            .await;
        }
    };
    stored_all("203.0.113.10").await;

    let kc = t.cluster.admin_kubeconfig();
    let mut transcript = String::new();
    let flags = ["--config-map=ingress-status-guard/ingress-status-guard-config", "--policy=ingress-nginx"];
    for (extra, want) in [
        (&["--to-publish-service=traefik/traefik", "--dry-run"][..], None),
        (&["--to-publish-service=traefik/traefik"][..], Some("203.0.113.20")),
        (&["--rollback"][..], Some("203.0.113.10")),
    ] {
        let args: Vec<String> = std::iter::once("cutover".to_owned())
            .chain(std::iter::once(format!("--kubeconfig={}", kc.display())))
            .chain(flags.iter().chain(extra).map(|a| (*a).to_owned()))
            .collect();
        let out = run(BINARY, &args, None).await;
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        let shown: Vec<&str> = args.iter().map(String::as_str).filter(|a| !a.starts_with("--kubeconfig")).collect();
        transcript.push_str(&format!("$ ingress-status-guard {}\n{}{}\n", shown.join(" "), out.stdout, out.stderr));
        assert!(out.stdout.contains("plan: policy ingress-nginx moves from service "), "{}", out.stdout);
        if let Some(want) = want {
            assert!(out.stdout.contains("done: 3/3 moved in "), "{}", out.stdout);
            stored_all(want).await;
        } else {
            assert_eq!(out.stdout.lines().count(), 5, "header, 3 Ingresses, summary: {}", out.stdout);
        }
    }
    // The source it already has: nothing is written, and the kept previous value stays.
    let cms: Api<ConfigMap> = Api::namespaced(t.admin.clone(), "ingress-status-guard");
    let before = cms.get("ingress-status-guard-config").await.unwrap();
    let mut args = vec!["cutover".to_owned(), format!("--kubeconfig={}", kc.display())];
    args.extend(flags.iter().map(|a| (*a).to_owned()));
    args.push("--to-publish-service=ingress-nginx/ingress-nginx-controller".to_owned());
    let out = run(BINARY, &args, None).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("0 Ingresses move, 3 already there"), "{}", out.stdout);
    assert!(
        out.stdout.contains(
            "unchanged: ConfigMap ingress-status-guard/ingress-status-guard-config key config.yaml already says this"
        ),
        "{}",
        out.stdout
    );
    assert!(out.stdout.lines().last().unwrap_or_default().starts_with("done: 0/0 moved in "), "{}", out.stdout);
    let after = cms.get("ingress-status-guard-config").await.unwrap();
    assert_eq!(after.metadata.resource_version, before.metadata.resource_version, "nothing written");

    let file = t.cluster.scratch_dir("cutover-guide").join("transcript.md");
    std::fs::write(&file, &transcript).unwrap();
    println!("{transcript}\nwritten to {}", file.display());
}

/// The old controller still running: it writes its address back whenever the guard moves an
/// Ingress (the webhook is not registered, so its writes are stored). The Ingress moves, is put
/// back, and `--timeout` names it as a fight with the other writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_puts_the_old_address_back_is_named_as_a_fight() {
    let t = TestEnv::new("cutover-fight").await;
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    lb_service(&services, "controller-a", A).await;
    lb_service(&services, "controller-b", B).await;
    let (guard, _kubelet) = start_guard(&t, "controller-a", None).await;
    let names = vec!["contested".to_owned()];
    create_ingress(&t.ingresses, "contested", Class::Field(&t.ns)).await;
    await_all(&t, &names, A, &guard).await;
    let rogue = t.rogue.clone();
    let old_controller = tokio::spawn(async move {
        loop {
            if let Ok(ingress) = rogue.get("contested").await
                && addresses(&ingress) != [A]
            {
                let _ = support::write_status(&rogue, "contested", &[A], false).await;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let to_b = format!("--to-publish-service={}/controller-b", t.ns);
    let out = run(BINARY, &cutover_args(&t, t.cluster.admin_kubeconfig(), &[&to_b, "--timeout=15s"]), None).await;
    old_controller.abort();
    assert_eq!(out.code, Some(1), "{} (guard log: {})", out.stderr, guard.log_path().display());
    let why =
        format!("1 FIGHT ({}/contested): moved, then written back: stored {A}, canonical {B}, status writers", t.ns);
    assert!(out.stderr.contains(&why), "{}", out.stderr);
    assert!(out.stderr.contains(support::ROGUE_USER), "the other writer is named: {}", out.stderr);
}
