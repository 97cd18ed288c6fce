//! The reconciler at scale: 10,000 Ingresses in 50 namespaces in a real
//! kube-apiserver + etcd (the harness in `tests/support/`), `serve` (the binary cargo built for
//! this bench) watching them; then the publish Service's load balancer moves and every Ingress
//! must follow. Measured, for each `--reconcile-qps`: resident memory of `serve` with the
//! 10k-Ingress cache, time from the Service change to the last Ingress patched, and the
//! reconciler's requests to the API server per converged Ingress (from the API server's audit
//! log).
//!
//! `cargo bench --bench reconcile -- --run [--ingresses N] [--others N] [--namespaces N]
//! [--qps 20,200] [--compare BINARY,...] [--skip-own] [--out FILE]`. `--others` adds Ingresses of a class no policy
//! governs beside them; `--compare` runs older builds too, after the bench's own,
//! against the same objects (`--skip-own` runs only those; each run also measures the first sync: from start to the
//! `Ingress cache synced` line, and VmHWM then). After the heal, a default IngressClass of the
//! policy's class widens the objects kept, and the re-list of every Ingress that follows is
//! measured too: VmHWM (reset first) against the RSS settled before it. Without `--run` (as under a plain `cargo bench`)
//! it only says how to run it. It measures and prints; it asserts nothing about time.

#[allow(dead_code)]
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::{
    core::v1::Service,
    networking::v1::{Ingress, IngressClass},
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
use support::{Cluster, Webhook};

struct Options {
    ingresses: usize,
    others: usize,
    compare: Vec<std::path::PathBuf>,
    /// Only the `--compare` builds (a release binary built elsewhere, say), not the bench's own.
    skip_own: bool,
    namespaces: usize,
    qps: Vec<u32>,
    out: Option<std::path::PathBuf>,
}

fn options() -> Option<Options> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--run") {
        return None;
    }
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    Some(Options {
        ingresses: value("--ingresses").map_or(10_000, |n| n.parse().expect("--ingresses N")),
        others: value("--others").map_or(0, |n| n.parse().expect("--others N")),
        compare: value("--compare").map_or(Vec::new(), |b| b.split(',').map(Into::into).collect()),
        skip_own: args.iter().any(|a| a == "--skip-own"),
        namespaces: value("--namespaces").map_or(50, |n| n.parse().expect("--namespaces N")),
        qps: value("--qps").map_or(vec![20, 200], |q| q.split(',').map(|n| n.parse().expect("--qps N,M")).collect()),
        out: value("--out").map(Into::into),
    })
}

/// `VmRSS` and `VmHWM` (peak) of a process, in KiB.
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Resets the VmHWM of `pid` to its current RSS (`clear_refs`, Linux 4.0 on); whether it could.
fn reset_hwm(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

async fn set_lb(api: &Api<Service>, ip: &str) {
    let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}});
    api.patch_status("edge", &PatchParams::default(), &Patch::Merge(&status)).await.expect("Service status");
}

async fn wait_for(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < timeout, "{what}: not reached within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    started.elapsed()
}

/// The reconciler's status patches in the audit log: (all, distinct Ingresses).
fn audited_patches(cluster: &Cluster, prefix: &str) -> (usize, usize) {
    let log = std::fs::read_to_string(cluster.audit_log()).unwrap_or_default();
    let mut seen = std::collections::HashSet::new();
    let mut all = 0;
    for event in log.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()) {
        let uri = event["requestURI"].as_str().unwrap_or("");
        let ns = event["objectRef"]["namespace"].as_str().unwrap_or("");
        if event["stage"] == "ResponseComplete"
            && event["verb"] == "patch"
            && ns.starts_with(prefix)
            && uri.contains("fieldManager=ingress-status-guard")
        {
            all += 1;
            seen.insert(format!("{ns}/{}", event["objectRef"]["name"].as_str().unwrap_or("")));
        }
    }
    (all, seen.len())
}

async fn run(o: Options) -> Value {
    let cluster = Cluster::shared().await;
    let admin = cluster.admin().await;
    let lb_ns = cluster.namespace(&admin, "bench-lb").await;
    let services: Api<Service> = Api::namespaced(admin.clone(), &lb_ns);
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "edge"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}
    }))
    .unwrap();
    services.create(&PostParams::default(), &service).await.expect("Service");
    set_lb(&services, "203.0.113.1").await;

    let mut namespaces = Vec::new();
    for _ in 0..o.namespaces {
        namespaces.push(cluster.namespace(&admin, "bench-ing").await);
    }
    let started = Instant::now();
    let per_ns = (o.ingresses + o.others).div_ceil(o.namespaces);
    let creates = (0..o.ingresses + o.others).map(|i| {
        let class = if i < o.ingresses { "bench" } else { "bench-other" };
        let api: Api<Ingress> = Api::namespaced(admin.clone(), &namespaces[i / per_ns]);
        async move {
            // A realistic object: annotations (one of them large), a rule, the current address.
            let ingress: Ingress = serde_json::from_value(json!({
                "metadata": {"name": format!("ing-{i}"), "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": "x".repeat(600),
                    "nginx.ingress.kubernetes.io/rewrite-target": "/"}},
                "spec": {"ingressClassName": class, "rules": [{"host": format!("h{i}.example.test"), "http": {"paths": [{
                    "path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "backend", "port": {"number": 80}}}}]}}]}
            }))
            .unwrap();
            api.create(&PostParams::default(), &ingress).await.expect("create Ingress");
            let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.1"}]}}});
            api.patch_status(&format!("ing-{i}"), &PatchParams::default(), &Patch::Merge(&status)).await.expect("status");
        }
    });
    futures::stream::iter(creates).buffer_unordered(16).collect::<Vec<()>>().await;
    let created_in = started.elapsed();
    eprintln!(
        "created {} Ingresses ({} of another class) in {} namespaces in {created_in:?}",
        o.ingresses + o.others,
        o.others,
        o.namespaces
    );

    let classes: Api<IngressClass> = Api::all(admin.clone());
    let default_class: IngressClass = serde_json::from_value(json!({
        "metadata": {"name": "bench", "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}},
        "spec": {"controller": "example.com/bench"}
    }))
    .unwrap();
    let mut results = Vec::new();
    let mut ip = 1;
    let own = std::path::PathBuf::from(support::webhook::BINARY);
    let own = (!o.skip_own).then_some(("this build", own));
    let builds: Vec<(&str, std::path::PathBuf)> =
        own.into_iter().chain(o.compare.iter().map(|b| ("compared", b.clone()))).collect();
    for (qps, (build, binary)) in o.qps.iter().flat_map(|q| builds.iter().map(move |b| (*q, b))) {
        let qps_flag = format!("--reconcile-qps={qps}");
        let publish = format!("--publish-service={lb_ns}/edge");
        let lease_ns = format!("--leader-election-namespace={lb_ns}");
        let args = ["--reconcile=true", &qps_flag, &publish, "--ingress-class=bench", &lease_ns, "--log-level=info"];
        let name = format!("bench-{qps}-{}", build.replace(' ', "-"));
        let started = Instant::now();
        let mut webhook = Webhook::start_binary(cluster, &name, binary, cluster.admin_kubeconfig(), &args, &[]).await;
        wait_for("Ingress cache synced", Duration::from_secs(600), || webhook.log().contains("Ingress cache synced"))
            .await;
        let synced = started.elapsed();
        let (_, hwm_synced) = memory_kib(webhook.pid());
        let drift = "ingress_status_guard_drift_ingresses{policy=\"default\"}";
        let patched = "ingress_status_guard_reconcile_patches_total{policy=\"default\",result=\"patched\"}";
        let metric = |name: &str| webhook.metric(name);
        wait_for("leader", Duration::from_secs(60), || metric("ingress_status_guard_leader") == 1.0).await;
        // Synced: nothing drifts yet, and the cache is full (the watch list has been read).
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (rss_idle, _) = memory_kib(webhook.pid());
        let (before_all, _) = audited_patches(cluster, "bench-ing");

        ip += 1;
        let moved_at = Instant::now();
        set_lb(&services, &format!("203.0.113.{ip}")).await;
        let total = o.ingresses as f64;
        let first = wait_for("first patch", Duration::from_secs(60), || metric(patched) >= 1.0).await;
        let mut peak_rss = 0;
        let converged = loop {
            let (rss, _) = memory_kib(webhook.pid());
            peak_rss = peak_rss.max(rss);
            if metric(patched) >= total && metric(drift) == 0.0 {
                break moved_at.elapsed();
            }
            assert!(moved_at.elapsed() < Duration::from_secs(3600), "no convergence within an hour");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let (_, hwm) = memory_kib(webhook.pid());
        // A re-list (the goal: its peak at most 10 % over the steady state). A default
        // IngressClass of the policy's class makes class-less Ingresses governed, so the kept
        // objects widen and the reconciler lists every Ingress again, all 'ingresses + others'.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (rss_settled, _) = memory_kib(webhook.pid());
        let reset = reset_hwm(webhook.pid());
        let asked = webhook.log().matches("listing them again").count();
        classes.create(&PostParams::default(), &default_class).await.expect("default IngressClass");
        wait_for("re-list", Duration::from_secs(120), || webhook.log().matches("listing them again").count() > asked)
            .await;
        // Sampled for longer than the first list of every object took (both builds; only newer
        // ones log the end of a re-list).
        let relisting = Instant::now();
        let mut relist_rss = 0;
        while relisting.elapsed() < (synced * 3).max(Duration::from_secs(30)) {
            relist_rss = relist_rss.max(memory_kib(webhook.pid()).0);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (_, relist_hwm) = memory_kib(webhook.pid());
        let relisted = webhook.log().contains("Ingress cache listed again");
        let conflicts = metric("ingress_status_guard_reconcile_patches_total{policy=\"default\",result=\"conflict\"}");
        let failed = metric("ingress_status_guard_reconcile_patches_total{policy=\"default\",result=\"failed\"}");
        // The audit log is written as requests complete; give it a moment.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (after_all, distinct) = audited_patches(cluster, "bench-ing");
        let patches = after_all - before_all;
        let result = json!({
            "qps": qps,
            "build": build,
            "binary": binary.display().to_string(),
            "ingresses": o.ingresses,
            "others": o.others,
            "first_sync_s": synced.as_secs_f64(),
            "vm_hwm_at_sync_mib": hwm_synced as f64 / 1024.0,
            "rss_idle_mib": rss_idle as f64 / 1024.0,
            "rss_peak_during_cutover_mib": peak_rss as f64 / 1024.0,
            "vm_hwm_mib": hwm as f64 / 1024.0,
            "rss_settled_mib": rss_settled as f64 / 1024.0,
            "relist_vm_hwm_mib": reset.then_some(relist_hwm as f64 / 1024.0),
            "relist_rss_peak_mib": relist_rss as f64 / 1024.0,
            "relist_peak_over_settled": reset.then_some(relist_hwm as f64 / rss_settled as f64),
            "relist_end_logged": relisted,
            "first_patch_after_s": first.as_secs_f64(),
            "converged_after_s": converged.as_secs_f64(),
            "patches_per_second": total / converged.as_secs_f64(),
            "status_patches_in_audit_log": patches,
            "distinct_ingresses_patched_ever": distinct,
            "patches_per_converged_ingress": patches as f64 / total,
            "conflicts": conflicts,
            "failed": failed,
        });
        eprintln!("{result}");
        results.push(result);
        webhook.terminate(Duration::from_secs(20));
        classes.delete("bench", &Default::default()).await.expect("delete the default IngressClass");
    }
    json!({"created_in_s": created_in.as_secs_f64(), "namespaces": o.namespaces, "runs": results})
}

fn main() {
    let Some(options) = options() else {
        println!("reconcile: pass --run to start a kube-apiserver and measure (see BENCHMARKS.md)");
        return;
    };
    let out = options.out.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let report = runtime.block_on(run(options));
    let text = serde_json::to_string_pretty(&report).expect("json");
    println!("{text}");
    if let Some(path) = out {
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }
}
