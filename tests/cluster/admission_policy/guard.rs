//! `serve --admission=policy` against a real kube-apiserver: the leader keeps the admission
//! policies current from its caches, and the API server enforces them, also while no guard
//! runs (SIGKILL). The guard runs as a child process with the reconciler on.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::{WAIT, addresses_of, lease_flag, lease_of};
use crate::support::{Class, SENTINEL, SENTINEL_2, TestEnv, Webhook, create_ingress, eventually, stored, write_status};

/// Short Lease timings, so a guard restarted after SIGKILL leads within seconds.
pub(super) const LEASE: [&str; 3] =
    ["--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=1s"];

/// Starts the guard in policy mode with the policy file `config`, leading in `ns` with the
/// test's own Lease ([`lease_of`]), so its objects are named `isg-<ns>-<kind>-<n>`.
pub(super) async fn start_guard(t: &TestEnv, config: &Path) -> Webhook {
    let (config, lease_ns, lease) =
        (format!("--config={}", config.display()), format!("--leader-election-namespace={}", t.ns), lease_flag(&t.ns));
    let mut args = vec!["--admission=policy", "--reconcile", &config, &lease_ns, &lease];
    args.extend(LEASE);
    t.start_webhook(&args).await
}

/// Creates the LoadBalancer Service `<ns>/edge` with `ip` as its load-balancer address.
async fn create_edge(t: &TestEnv, ip: &str) {
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    let svc: Service = serde_json::from_value(
        json!({"metadata": {"name": "edge"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}),
    )
    .unwrap();
    services.create(&PostParams::default(), &svc).await.expect("create Service edge");
    set_edge(t, ip).await;
}

async fn set_edge(t: &TestEnv, ip: &str) {
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}});
    services.patch_status("edge", &PatchParams::default(), &Patch::Merge(&status)).await.expect("set the LB address");
}

/// Rogue writes on `name` (through `rogue`) are stored as `want`; alternates two sentinels so
/// every attempt is a real write.
pub(super) async fn rewritten_to(rogue: &Api<Ingress>, name: &str, want: &[&str], log: &Path) {
    let mut flip = false;
    eventually(&format!("a rogue write on {name} is stored as {want:?} (guard log {})", log.display()), WAIT, || {
        flip = !flip;
        let written = if flip { SENTINEL } else { SENTINEL_2 };
        async move {
            let got = addresses_of(write_status(rogue, name, &[written], false).await.map_err(|e| e.to_string())?);
            if got == want { Ok(()) } else { Err(format!("stored {got:?}")) }
        }
    })
    .await;
}

/// `kubectl get <kind> <name> -o json`, if it exists.
pub(super) fn get_object(t: &TestEnv, kind: &str, name: &str) -> Option<Value> {
    let out =
        t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["get", kind, name, "-o", "json", "--show-managed-fields"]);
    out.success.then(|| serde_json::from_str(&out.stdout).expect("kubectl JSON"))
}

/// How soon a reload renaming a policy (and leaving it unresolved under `allow`) has swept its
/// objects.
const RENAME_SWEPT: Duration = Duration::from_secs(10);

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("policies.yaml");
    // Written whole and renamed, so the reload never reads half a file.
    let tmp = dir.join("policies.yaml.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

/// The property the mode exists for: the guard keeps the MAP current, and the API server
/// enforces it while the guard is SIGKILLed; restarted, the guard follows the publish Service
/// within seconds, the next rogue write gets the new value, and the reconciler heals a stored
/// status nobody wrote again.
#[tokio::test]
async fn the_kept_policy_enforces_while_the_guard_is_down_and_follows_the_service() {
    let t = TestEnv::new("mapg").await;
    let dir = t.cluster.scratch_dir(&format!("mapg-{}", t.ns));
    create_edge(&t, "203.0.113.10").await;
    let cfg = write_config(
        &dir,
        &format!("policies:\n  - name: {ns}\n    ingressClasses: [{ns}]\n    publishService: {ns}/edge\n", ns = t.ns),
    );
    let mut guard = start_guard(&t, &cfg).await;

    // The process that holds the admission-policy rights listens on the admin and probe ports
    // alone: no webhook port, so no network caller reaches more than probes and /metrics.
    let listening = listening_ports(guard.pid());
    assert_eq!(listening.len(), 2, "admin and probe ports only: {listening:?}\n{}", guard.log_tail());
    let admin_port: u16 = guard.admin_addr().rsplit(':').next().unwrap().parse().unwrap();
    assert!(listening.contains(&admin_port), "{listening:?}");
    assert!(guard.log().contains("no webhook port: admission policy mode"), "{}", guard.log_tail());

    create_ingress(&t.ingresses, "web", Class::Field(&t.ns)).await;
    create_ingress(&t.ingresses, "quiet", Class::Field(&t.ns)).await;
    rewritten_to(&t.rogue, "web", &["203.0.113.10"], &guard.log_path()).await;
    rewritten_to(&t.rogue, "quiet", &["203.0.113.10"], &guard.log_path()).await;
    let lease = lease_of(&t.ns);
    let name = format!("{lease}-ingress-0");
    let map = get_object(&t, "mutatingadmissionpolicy", &name).expect("the MAP exists");
    assert_eq!(map["metadata"]["labels"]["ingress-status-guard/lease"], format!("{}.{lease}", t.ns));
    assert_eq!(map["metadata"]["annotations"]["ingress-status-guard/policy"], t.ns.as_str(), "names its policy");
    let managers: Vec<&str> =
        map["metadata"]["managedFields"].as_array().unwrap().iter().filter_map(|m| m["manager"].as_str()).collect();
    let manager = format!("ingress-status-guard-admission-policy/{}.{lease}", t.ns);
    assert_eq!(managers, [manager.as_str()], "one manager, the owner's");
    assert!(get_object(&t, "mutatingadmissionpolicybinding", &name).is_some(), "the binding exists");
    assert!(guard.metric("ingress_status_guard_admission_policy_applies_total{result=\"applied\"}") >= 2.0);
    assert_eq!(guard.metric("ingress_status_guard_admission_policy_lag_seconds"), 0.0);

    // SIGKILL: nothing of the guard runs, and the API server still rewrites.
    guard.stop();
    for written in [SENTINEL, SENTINEL_2] {
        let got = addresses_of(write_status(&t.rogue, "web", &[written], false).await.expect("allowed"));
        assert_eq!(got, ["203.0.113.10"], "rewritten with the guard down");
    }

    // The Service moves while no guard runs: the MAP still enforces the old value, and
    // `check` and `explain` say it lags the sources.
    set_edge(&t, "203.0.113.20").await;
    let got = addresses_of(write_status(&t.rogue, "web", &[SENTINEL], false).await.expect("allowed"));
    assert_eq!(got, ["203.0.113.10"], "the MAP left behind enforces its value");
    let (kubeconfig, config) = (t.cluster.admin_kubeconfig().to_str().unwrap(), cfg.to_str().unwrap());
    let lease = lease_flag(&t.ns);
    let (code, out) = run_cli(&["check", "--kubeconfig", kubeconfig, "--config", config, "-n", &t.ns, &lease]);
    assert_eq!(code, Some(1), "{out}");
    let stale = format!(
        "admission policy: MutatingAdmissionPolicy {name} of policy \"{}\": STALE (the sources give 203.0.113.20 now",
        t.ns
    );
    assert!(out.contains(&stale), "{out}");
    let web = format!("{}/web", t.ns);
    let (code, out) = run_cli(&["explain", &web, "--kubeconfig", kubeconfig, "--config", config, &lease]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains(&format!("Admission: enforced by MutatingAdmissionPolicy {name}")), "{out}");
    assert!(out.contains("STALE"), "{out}");

    // Restarted, the guard follows the Service; the next rogue write gets the new value.
    let guard = start_guard(&t, &cfg).await;
    rewritten_to(&t.rogue, "web", &["203.0.113.20"], &guard.log_path()).await;
    eventually("the MAP carries the new value", WAIT, || async {
        let map = get_object(&t, "mutatingadmissionpolicy", &name).ok_or("no MAP")?;
        let expression = map["spec"]["mutations"][0]["jsonPatch"]["expression"].as_str().unwrap_or_default().to_owned();
        if expression.contains("203.0.113.20") && !expression.contains("203.0.113.10") {
            Ok(())
        } else {
            Err(expression)
        }
    })
    .await;
    // The reconciler heals the Ingress nobody wrote since (its patch passes the new MAP).
    eventually("the reconciler heals the stored status", WAIT, || async {
        match stored(&t.ingresses, "quiet").await {
            got if got == ["203.0.113.20"] => Ok(()),
            got => Err(format!("stored {got:?}; {}", guard.log_tail())),
        }
    })
    .await;
    let (code, out) = run_cli(&["check", "--kubeconfig", kubeconfig, "--config", config, "-n", &t.ns, &lease]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(&format!("MutatingAdmissionPolicy {name} of policy \"{}\": CURRENT", t.ns)), "{out}");
}

/// Runs the binary with `args`: exit code, and stdout then stderr.
fn run_cli(args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(crate::support::webhook::BINARY).args(args).output().expect("run the binary");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

/// A reload that renames the policy: its objects keep their name (its slot, `<lease>-ingress-0`)
/// and are swept while it renders nothing, then applied annotated with the new name; an object
/// of another owner is left alone. `onUnresolved: allow` with the Service gone removes the
/// mutation; `deny` keeps the last value.
#[tokio::test]
async fn reloads_and_unresolved_sources_apply_and_sweep() {
    let t = TestEnv::new("maps").await;
    let dir = t.cluster.scratch_dir(&format!("maps-{}", t.ns));
    create_edge(&t, "203.0.113.30").await;
    let policy = |name: &str, on_unresolved: &str| {
        format!(
            "policies:\n  - name: {name}\n    ingressClasses: [{ns}]\n    publishService: {ns}/edge\n    onUnresolved: {on_unresolved}\n",
            ns = t.ns
        )
    };
    let (first, second) = (format!("{}-a", t.ns), format!("{}-b", t.ns));
    let cfg = write_config(&dir, &policy(&first, "deny"));
    let guard = start_guard(&t, &cfg).await;
    create_ingress(&t.ingresses, "web", Class::Field(&t.ns)).await;
    rewritten_to(&t.rogue, "web", &["203.0.113.30"], &guard.log_path()).await;
    // Named by its slot, whatever the policy is called: a rename keeps the name.
    let name = format!("{}-ingress-0", lease_of(&t.ns));
    let policy_of = |object: &Value| object["metadata"]["annotations"]["ingress-status-guard/policy"].clone();
    // Another owner's object of the same label key: not this guard's to delete.
    let foreign = get_object(&t, "mutatingadmissionpolicy", &name).unwrap();
    assert_eq!(policy_of(&foreign), json!(first), "annotated with its policy's name");
    let mut foreign_copy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": format!("other-{}", t.ns), "labels": {"ingress-status-guard/lease": "elsewhere.lease"}},
        "spec": foreign["spec"].clone(),
    });
    foreign_copy["spec"]["matchConditions"] = json!([{"name": "never", "expression": "false"}]);
    let foreign_file = dir.join("foreign.json");
    std::fs::write(&foreign_file, foreign_copy.to_string()).unwrap();
    let created = t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["create", "-f", foreign_file.to_str().unwrap()]);
    assert!(created.success, "{}", created.stderr);

    // The Service goes: `deny` keeps the last value in force.
    Api::<Service>::namespaced(t.admin.clone(), &t.ns).delete("edge", &Default::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    rewritten_to(&t.rogue, "web", &["203.0.113.30"], &guard.log_path()).await;
    let kept = get_object(&t, "mutatingadmissionpolicy", &name).expect("kept under onUnresolved: deny");
    assert_eq!(policy_of(&kept), json!(first));

    // Renamed, with `allow`: the objects go, and with the Service still gone none come back;
    // writes are stored as written. Within 10 s of the file's rename (the issue's bound,
    // asserted as correctness: the file's directory is watched and a reload runs the keeper at
    // once; only a reload left to the 10 s poll, or a pass not run on it, misses it).
    write_config(&dir, &policy(&second, "allow"));
    eventually("the objects are swept", RENAME_SWEPT, || async {
        let left: Vec<&str> = ["mutatingadmissionpolicy", "mutatingadmissionpolicybinding"]
            .into_iter()
            .filter(|kind| get_object(&t, kind, &name).is_some())
            .collect();
        if left.is_empty() { Ok(()) } else { Err(format!("{left:?} still there; {}", guard.log_tail())) }
    })
    .await;
    assert!(get_object(&t, "mutatingadmissionpolicy", &name).is_none(), "unresolved under allow: no mutation");
    eventually("writes are stored as written", WAIT, || async {
        let got = addresses_of(write_status(&t.rogue, "web", &[SENTINEL], false).await.map_err(|e| e.to_string())?);
        if got == [SENTINEL] { Ok(()) } else { Err(format!("stored {got:?}")) }
    })
    .await;
    // The Service comes back: the renamed policy renders.
    create_edge(&t, "203.0.113.31").await;
    rewritten_to(&t.rogue, "web", &["203.0.113.31"], &guard.log_path()).await;
    let binding = get_object(&t, "mutatingadmissionpolicybinding", &name).expect("the binding is back");
    assert_eq!(policy_of(&binding), json!(second), "annotated with the new name");
    let map = get_object(&t, "mutatingadmissionpolicy", &name).expect("the MAP is back");
    assert_eq!(policy_of(&map), json!(second), "annotated with the new name");
    let other = format!("other-{}", t.ns);
    assert!(get_object(&t, "mutatingadmissionpolicy", &other).is_some(), "another owner's object stays");
    let _ = t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["delete", "mutatingadmissionpolicy", &other]);
}

/// `serve` with `args` until it exits (killed after a minute): exit code and stderr.
fn serve_until_exit(args: &[&str]) -> (Option<i32>, String) {
    serve_until_exit_after(args, 60)
}

/// As [`serve_until_exit`], killed after `seconds` (then the code is `None`).
fn serve_until_exit_after(args: &[&str], seconds: u64) -> (Option<i32>, String) {
    let mut child = std::process::Command::new(crate::support::webhook::BINARY)
        .args(["serve", "--admin-listen=127.0.0.1:0", "--probe-listen=127.0.0.1:0"])
        // Admission policy mode opens no webhook port, and refuses its flag.
        .args(if args.contains(&"--admission=policy") { None } else { Some("--listen=127.0.0.1:0") })
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the guard");
    let deadline = std::time::Instant::now() + Duration::from_secs(seconds);
    while child.try_wait().expect("wait").is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let out = child.wait_with_output().expect("collect the guard's output");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Kubernetes 1.31 has no MutatingAdmissionPolicy: `--admission=policy` exits 2 at start,
/// naming the server's version and what to turn on, before it binds a port.
#[tokio::test]
async fn a_server_without_mutating_admission_policies_refuses_policy_mode() {
    let old = crate::support::Cluster::fresh_version("v1.31").await;
    let kubeconfig = format!("--kubeconfig={}", old.admin_kubeconfig().display());
    let (code, stderr) = serve_until_exit(&[
        "--admission=policy",
        &kubeconfig,
        "--publish-status-address=192.0.2.1",
        "--reconcile=false",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    for needed in [
        "--admission=policy: the API server (v1.31.",
        "--feature-gates=MutatingAdmissionPolicy=true",
        "--runtime-config=admissionregistration.k8s.io/v1beta1=true",
        "use --admission=webhook",
    ] {
        assert!(stderr.contains(needed), "stderr lacks {needed:?}:\n{stderr}");
    }
    // The same guard in webhook mode starts there (and is stopped by the deadline).
    let (code, stderr) =
        serve_until_exit_after(&[&kubeconfig, "--publish-status-address=192.0.2.1", "--reconcile=false"], 3);
    assert_eq!(code, None, "webhook mode runs on 1.31 until killed: {stderr}");
}

/// The TCP ports process `pid` listens on: its socket inodes (`/proc/<pid>/fd`) found among the
/// LISTEN rows of its network namespace's tables.
fn listening_ports(pid: u32) -> Vec<u16> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("read the guard's file descriptors")
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|link| Some(link.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned()))
        .collect();
    let mut ports = Vec::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for row in text.lines().skip(1) {
            let cols: Vec<&str> = row.split_whitespace().collect();
            // local_address is HEXIP:HEXPORT; st 0A is LISTEN; the inode is the tenth column.
            if cols.len() > 9 && cols[3] == "0A" && inodes.iter().any(|i| i == cols[9]) {
                let port = cols[1].rsplit(':').next().unwrap();
                ports.push(u16::from_str_radix(port, 16).unwrap());
            }
        }
    }
    ports.sort_unstable();
    ports
}

/// Two replicas: only the leader applies; SIGKILL it, and the other takes the Lease and follows
/// the next change of the Service.
#[tokio::test]
async fn a_second_replica_takes_over_keeping_the_policy() {
    let t = TestEnv::new("mapr").await;
    let dir = t.cluster.scratch_dir(&format!("mapr-{}", t.ns));
    create_edge(&t, "203.0.113.50").await;
    let cfg = write_config(
        &dir,
        &format!("policies:\n  - name: {ns}\n    ingressClasses: [{ns}]\n    publishService: {ns}/edge\n", ns = t.ns),
    );
    let first = start_guard(&t, &cfg).await;
    let second = start_guard(&t, &cfg).await;
    create_ingress(&t.ingresses, "web", Class::Field(&t.ns)).await;
    rewritten_to(&t.rogue, "web", &["203.0.113.50"], &first.log_path()).await;
    let leader = "ingress_status_guard_leader";
    let first_leads = eventually("one replica leads", WAIT, || async {
        let gauges = (first.metric(leader), second.metric(leader));
        if gauges == (1.0, 0.0) || gauges == (0.0, 1.0) {
            Ok(gauges.0 == 1.0)
        } else {
            Err(format!("leader gauges {gauges:?}"))
        }
    })
    .await;
    let (mut leading, survivor) = if first_leads { (first, second) } else { (second, first) };
    let applied = "ingress_status_guard_admission_policy_applies_total{result=\"applied\"}";
    assert!(leading.metric(applied) >= 2.0, "the leader applied the MAP and its binding");
    assert_eq!(survivor.metric(applied), 0.0, "the replica that does not lead applies nothing");
    // SIGKILL the leader: the other takes the Lease once it expires, and follows the Service.
    leading.stop();
    eventually("the other replica leads", WAIT, || async {
        if survivor.metric(leader) == 1.0 { Ok(()) } else { Err(survivor.log_tail()) }
    })
    .await;
    set_edge(&t, "203.0.113.51").await;
    rewritten_to(&t.rogue, "web", &["203.0.113.51"], &survivor.log_path()).await;
}

/// Two guards whose Leases share a name in two namespaces, both with a policy `default` of
/// another address each, both reconciling: their objects' names are one. The second finds the
/// first's owner label on them and writes nothing (a reload and more passes later still), says
/// so once per object, counts them and its lag grows, and `check` as the second shows FOREIGN; its reconciler
/// never patches an Ingress of that policy (a rogue write, a new Ingress with no status: the
/// API server's audit log holds no write of the second's value); the first's value stays
/// enforced.
#[tokio::test]
async fn a_guard_leaves_another_guards_objects_of_its_names_alone() {
    let t = TestEnv::new("mapo").await;
    let dir = t.cluster.scratch_dir(&format!("mapo-{}", t.ns));
    let other_dir = t.cluster.scratch_dir(&format!("mapo-b-{}", t.ns));
    let policy = |ip: &str| {
        format!("policies:\n  - name: default\n    ingressClasses: [{ns}]\n    publishStatusAddress: {ip}\n", ns = t.ns)
    };
    let lease = format!("--leader-election-lease-name=isg-{}", t.ns);
    let name = format!("isg-{}-ingress-0", t.ns);
    let first_cfg = write_config(&dir, &policy("192.0.2.81"));
    let (config, lease_ns) =
        (format!("--config={}", first_cfg.display()), format!("--leader-election-namespace={}", t.ns));
    let mut args = vec!["--admission=policy", "--reconcile", &config, &lease_ns, &lease];
    args.extend(LEASE);
    let first = t.start_webhook(&args).await;
    create_ingress(&t.ingresses, "web", Class::Field(&t.ns)).await;
    rewritten_to(&t.rogue, "web", &["192.0.2.81"], &first.log_path()).await;

    let other_ns = t.cluster.namespace(&t.admin, "mapo-b").await;
    let second_cfg = write_config(&other_dir, &policy("192.0.2.82"));
    let (config, lease_ns) =
        (format!("--config={}", second_cfg.display()), format!("--leader-election-namespace={other_ns}"));
    let mut args = vec!["--admission=policy", "--reconcile", &config, &lease_ns, &lease];
    args.extend(LEASE);
    let second =
        crate::support::Webhook::start(t.cluster, &format!("{}-b", t.ns), t.cluster.admin_kubeconfig(), &args).await;
    let foreign = "ingress_status_guard_admission_policy_foreign_objects";
    eventually("the second guard finds both objects held", WAIT, || async {
        if second.metric(foreign) == 2.0 { Ok(()) } else { Err(second.log_tail()) }
    })
    .await;
    eventually("the second guard leads", WAIT, || async {
        if second.metric("ingress_status_guard_leader") == 1.0 { Ok(()) } else { Err(second.log_tail()) }
    })
    .await;
    // Its policy is not enforced by its own objects: that counts as lag, which grows.
    let lag = "ingress_status_guard_admission_policy_lag_seconds";
    eventually("the second guard's lag grows", WAIT, || async {
        if second.metric(lag) >= 1.0 {
            Ok(())
        } else {
            Err(format!("lag {}: {}", second.metric(lag), second.log_tail()))
        }
    })
    .await;
    // Statuses the second guard's value (.82) is not: a rogue write (stored as the first's
    // value), and an Ingress with none yet (which the first's reconciler fills).
    rewritten_to(&t.rogue, "web", &["192.0.2.81"], &first.log_path()).await;
    create_ingress(&t.ingresses, "web2", Class::Field(&t.ns)).await;
    // More passes of the second: a reload with another value.
    write_config(&other_dir, &policy("192.0.2.83"));
    eventually("the second guard reloads", WAIT, || async {
        if second.log().contains("192.0.2.83")
            || second.metric("ingress_status_guard_config_reloads_total{result=\"success\"}") >= 1.0
        {
            Ok(())
        } else {
            Err(second.log_tail())
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    rewritten_to(&t.rogue, "web", &["192.0.2.81"], &first.log_path()).await;
    eventually("the first guard fills web2", WAIT, || async {
        let got = stored(&t.ingresses, "web2").await;
        if got == ["192.0.2.81"] { Ok(()) } else { Err(format!("stored {got:?}")) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    for ingress in ["web", "web2"] {
        let writes = t.cluster.ingress_status_audit(&t.ns, ingress);
        assert!(!writes.is_empty(), "the audit log records {ingress}'s status writes");
        let theirs = writes.iter().filter(|e| {
            let body = e["requestObject"].to_string();
            body.contains("192.0.2.82") || body.contains("192.0.2.83")
        });
        assert_eq!(theirs.count(), 0, "the second guard never patches {ingress}:\n{}", second.log());
    }
    let patches = second.metrics();
    let patches = patches.lines().filter(|l| l.starts_with("ingress_status_guard_reconcile_patches_total"));
    assert_eq!(patches.count(), 0, "no patch tried:\n{}", second.metrics());
    let warn = second.log().lines().find(|l| l.contains("admission policy held by another guard")).map(str::to_owned);
    assert!(
        warn.as_deref().is_some_and(|l| l.contains("\"policy\":\"default\"")),
        "the WARN names the policy: {warn:?}"
    );
    let map = get_object(&t, "mutatingadmissionpolicy", &name).expect("the first guard's MAP");
    assert_eq!(map["metadata"]["labels"]["ingress-status-guard/lease"], format!("{}.isg-{}", t.ns, t.ns));
    let warned = second.log().matches("admission policy held by another guard").count();
    assert_eq!(warned, 2, "once per object:\n{}", second.log());
    assert!(second.log().contains(&format!("{}.isg-{}", t.ns, t.ns)), "the WARN names the owner");
    assert_eq!(second.metric("ingress_status_guard_admission_policy_applies_total{result=\"applied\"}"), 0.0);

    let kubeconfig = t.cluster.admin_kubeconfig().to_str().unwrap();
    let owner =
        [format!("--leader-election-lease-name=isg-{}", t.ns), format!("--leader-election-namespace={other_ns}")];
    let config = second_cfg.to_str().unwrap();
    let (code, out) =
        run_cli(&["check", "--kubeconfig", kubeconfig, "--config", config, "-n", &t.ns, &owner[0], &owner[1]]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!("MutatingAdmissionPolicy {name} of policy \"default\": FOREIGN (held by another guard")),
        "{out}"
    );
    // As the first guard, check reads it as its own.
    let mine = format!("--leader-election-namespace={}", t.ns);
    let (_, out) = run_cli(&[
        "check",
        "--kubeconfig",
        kubeconfig,
        "--config",
        first_cfg.to_str().unwrap(),
        "-n",
        &t.ns,
        &owner[0],
        &mine,
    ]);
    assert!(out.contains(&format!("MutatingAdmissionPolicy {name} of policy \"default\": CURRENT")), "{out}");
}

/// The resync repairs on a fixed interval, whatever else changes: a deleted binding comes back
/// and another writer's `matchResources` on the other one goes, while a Namespace is created and
/// deleted all along (each a change of the sources, which restarted the repair timer before);
/// `check` shows the foreign field STALE meanwhile.
#[tokio::test]
async fn the_resync_repairs_a_deleted_binding_and_a_foreign_field_under_churn() {
    let t = TestEnv::new("mapy").await;
    let dir = t.cluster.scratch_dir(&format!("mapy-{}", t.ns));
    let (a, b) = (format!("{}-a", t.ns), format!("{}-b", t.ns));
    let cfg = write_config(
        &dir,
        &format!(
            "policies:\n  - name: {a}\n    ingressClasses: [{a}]\n    publishStatusAddress: 192.0.2.91\n    namespaceSelector: \"kubernetes.io/metadata.name!=nowhere\"\n\
             \x20 - name: {b}\n    ingressClasses: [{b}]\n    publishStatusAddress: 192.0.2.92\n"
        ),
    );
    let (config, lease_ns) = (format!("--config={}", cfg.display()), format!("--leader-election-namespace={}", t.ns));
    let lease = lease_flag(&t.ns);
    let mut args = vec!["--admission=policy", &config, &lease_ns, &lease, "--admission-policy-resync=4"];
    args.extend(LEASE);
    let guard = t.start_webhook(&args).await;
    // Named by their places in the file.
    let (name_a, name_b) = (format!("{}-ingress-0", lease_of(&t.ns)), format!("{}-ingress-1", lease_of(&t.ns)));
    eventually("both bindings exist", WAIT, || async {
        let both = get_object(&t, "mutatingadmissionpolicybinding", &name_a).is_some()
            && get_object(&t, "mutatingadmissionpolicybinding", &name_b).is_some();
        if both { Ok(()) } else { Err(guard.log_tail()) }
    })
    .await;
    // Churn: a Namespace created and deleted every second, each a change the keeper runs on.
    let churn = {
        let admin = t.admin.clone();
        let prefix = t.ns.clone();
        tokio::spawn(async move {
            let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin);
            for i in 0.. {
                let name = format!("{prefix}-churn-{i}");
                let ns = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
                let _ = namespaces.create(&PostParams::default(), &ns).await;
                tokio::time::sleep(Duration::from_millis(500)).await;
                let _ = namespaces.delete(&name, &Default::default()).await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    let admin = t.cluster.admin_kubeconfig();
    let deleted = t.cluster.kubectl(admin, &["delete", "mutatingadmissionpolicybinding", &name_b]);
    assert!(deleted.success, "{}", deleted.stderr);
    let selector = r#"{"spec":{"matchResources":{"namespaceSelector":{"matchLabels":{"foreign":"yes"}}}}}"#;
    let patched =
        t.cluster.kubectl(admin, &["patch", "mutatingadmissionpolicybinding", &name_a, "--type=merge", "-p", selector]);
    assert!(patched.success, "{}", patched.stderr);
    let (kubeconfig, config) = (admin.to_str().unwrap(), cfg.to_str().unwrap());
    let (code, out) = run_cli(&["check", "--kubeconfig", kubeconfig, "--config", config, "-n", &t.ns, &lease]);
    let (stale_a, stale_b) = (
        format!("MutatingAdmissionPolicy {name_a} of policy \"{a}\": STALE (its binding's spec.matchResources"),
        format!("MutatingAdmissionPolicy {name_b} of policy \"{b}\": STALE (its binding is missing"),
    );
    // Unless the resync came between the edits and the check.
    if !out.contains(&format!("{name_a} of policy \"{a}\": CURRENT")) {
        assert_eq!(code, Some(1), "{out}");
        assert!(out.contains(&stale_a), "{out}");
    }
    if !out.contains(&format!("{name_b} of policy \"{b}\": CURRENT")) {
        assert!(out.contains(&stale_b), "{out}");
    }
    eventually("the resync repairs both", WAIT, || async {
        let binding = get_object(&t, "mutatingadmissionpolicybinding", &name_a).ok_or("no binding a")?;
        let selector = &binding["spec"]["matchResources"]["namespaceSelector"];
        let repaired = selector.to_string().contains("nowhere") && !selector.to_string().contains("foreign");
        let recreated = get_object(&t, "mutatingadmissionpolicybinding", &name_b).is_some();
        if repaired && recreated { Ok(()) } else { Err(format!("binding a {selector}; b there: {recreated}")) }
    })
    .await;
    churn.abort();
    let (code, out) = run_cli(&["check", "--kubeconfig", kubeconfig, "--config", config, "-n", &t.ns, &lease]);
    assert!(out.contains(&format!("{name_a} of policy \"{a}\": CURRENT")), "{code:?} {out}");
    assert!(out.contains(&format!("{name_b} of policy \"{b}\": CURRENT")), "{out}");
}
