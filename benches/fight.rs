//! Two controllers fighting over every Ingress, through a real kube-apiserver + etcd
//! (the harness in `tests/support/`): N Ingresses in M namespaces; controller A writes each
//! one's status with its own address every `--period-a` seconds (ingress-nginx's resync),
//! controller B with another every `--period-b`. Three phases of `--minutes` each, on the same
//! Ingresses:
//! 1. no guard: the reference, and the API server's own write latency;
//! 2. the guard with its webhook registered (as during a migration);
//! 3. the guard with the webhook deregistered, so the reconciler heals alone.
//!
//! Measured per phase: ADDRESS changes a watcher sees, two ways side by side: external-dns's own
//! Ingress source (`benches/external-dns/`: sigs.k8s.io/external-dns's `source` package, its
//! `Endpoints` polled every 200 ms, one count per change of a hostname's DNS targets; the primary
//! figure), and a Kubernetes watch on every Ingress counting status changes; the controllers'
//! writes against their schedule and their write latency as the API
//! server's audit log records it (p50/p99 of `stageTimestamp - requestReceivedTimestamp`),
//! the guard's CPU seconds and peak RSS, its status patches (patches per Ingress per hour), the
//! fights it counted, the Ingresses it held back as contested at the end, its WARN lines per
//! minute, the Kubernetes Events it published per minute, and how long each rogue value lived
//! until a heal brought the canonical value back (`time_to_heal_*`; those never healed within the
//! phase are counted apart), with the machine's load average at the start and end of each phase
//! (the machine is shared).
//!
//! The external-dns watcher is built by `benches/external-dns/build.sh` (Go from the module
//! proxy, cached) when the bench runs with `--run`; `cargo build`, `cargo test` and `.ci/run`
//! never build or run it. `--no-external-dns` leaves it out (the watch count remains).
//!
//! `cargo bench --bench fight -- --run [--ingresses N] [--namespaces N] [--period-a S]
//! [--period-b S] [--minutes M] [--no-external-dns] [--binary PATH] [--out FILE]`. Without `--run` it only says how to run it. It
//! measures and prints; it asserts nothing about time.

#[allow(dead_code)]
#[path = "../tests/support/mod.rs"]
mod support;

use std::{
    collections::HashMap,
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::api::{admissionregistration::v1::MutatingWebhookConfiguration, networking::v1::Ingress};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    runtime::watcher,
};
use serde_json::{Value, json};
use support::{Cluster, Webhook};

const LABEL: &str = "bench.ingress-status-guard.test/fight";
const CANONICAL: &str = "203.0.113.1";
const A: &str = "198.51.100.1";
const B: &str = "198.51.100.2";
/// The guard's Kubernetes Events that reached the API server.
const EVENTS_PUBLISHED: &str = "ingress_status_guard_kubernetes_events_total{result=\"published\"}";

struct Options {
    ingresses: usize,
    namespaces: usize,
    period_a: u64,
    period_b: u64,
    minutes: u64,
    external_dns: bool,
    /// The guard to measure: this bench's own build unless given (a release binary built elsewhere).
    binary: Option<PathBuf>,
    out: Option<PathBuf>,
}

fn options() -> Option<Options> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--run") {
        return None;
    }
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let number = |flag: &str, default: u64| value(flag).map_or(default, |n| n.parse().expect(flag));
    Some(Options {
        ingresses: number("--ingresses", 10_000) as usize,
        namespaces: number("--namespaces", 50) as usize,
        period_a: number("--period-a", 60),
        period_b: number("--period-b", 30),
        minutes: number("--minutes", 10),
        external_dns: !args.iter().any(|a| a == "--no-external-dns"),
        binary: value("--binary").map(Into::into),
        out: value("--out").map(Into::into),
    })
}

/// CPU seconds (user + system) and peak RSS (KiB) of a process.
fn usage(pid: u32) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let ticks: u64 = [11, 12].iter().filter_map(|&i| fields.get(i)?.parse::<u64>().ok()).sum();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    (ticks as f64 / 100.0, hwm)
}

/// Status patches the API server received from `since` on: latency (ms) per writer, by field
/// manager. kube-apiserver rotates its audit log at 100 MB (`audit.log` is renamed
/// `audit-<time>.log`), which a phase at 160 writes/s reaches in about 10 minutes, so every file
/// of the log written to since then is read, as a stream (a phase is about 100 MB).
fn audited(cluster: &Cluster, since: k8s_openapi::jiff::Timestamp) -> HashMap<String, Vec<f64>> {
    let mut by_manager: HashMap<String, Vec<f64>> = HashMap::new();
    let log = cluster.audit_log();
    let (Some(dir), Some(stem)) = (log.parent(), log.file_stem().and_then(|s| s.to_str())) else { return by_manager };
    let since_system = std::time::SystemTime::from(since);
    let files = std::fs::read_dir(dir).into_iter().flatten().flatten().filter(|entry| {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let written = entry.metadata().and_then(|m| m.modified()).is_ok_and(|t| t >= since_system);
        name.starts_with(stem) && name.ends_with(".log") && written
    });
    for file in files {
        let Ok(file) = std::fs::File::open(file.path()) else { continue };
        for line in BufReader::new(file).lines().map_while(Result::ok) {
            let Ok(event) = serde_json::from_str::<Value>(&line) else { continue };
            let uri = event["requestURI"].as_str().unwrap_or("");
            if event["stage"] != "ResponseComplete" || event["verb"] != "patch" || !uri.contains("/ingresses/") {
                continue;
            }
            let manager = uri.split("fieldManager=").nth(1).and_then(|m| m.split('&').next()).unwrap_or("none");
            let at = |k: &str| event[k].as_str().and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok());
            if let (Some(start), Some(end)) = (at("requestReceivedTimestamp"), at("stageTimestamp"))
                && start >= since
            {
                let ms = end.duration_since(start).as_secs_f64() * 1000.0;
                by_manager.entry(manager.to_owned()).or_default().push(ms);
            }
        }
    }
    by_manager
}

/// The machine's 1-minute load average (the machine is shared; every figure comes with it).
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Builds (once, cached) and locates external-dns's Ingress source watcher.
fn dnswatch_binary() -> PathBuf {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/external-dns/build.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = stdout.lines().last().unwrap_or("").trim();
    assert!(
        out.status.success() && !path.is_empty(),
        "{} failed ({}); pass --no-external-dns to measure with the watch alone",
        script.display(),
        out.status
    );
    PathBuf::from(path)
}

/// external-dns's own Ingress source, polled every 200 ms (benches/external-dns/main.go): the DNS
/// target changes it reports, counted from the last `reset`.
struct DnsWatch {
    child: Child,
    changes: Arc<AtomicU64>,
    total: Arc<Mutex<Option<String>>>,
    reader: std::thread::JoinHandle<()>,
}

impl DnsWatch {
    /// Starts it and waits until its informer has synced and its first poll set the baseline.
    fn start(binary: &std::path::Path, kubeconfig: &std::path::Path, log: PathBuf) -> DnsWatch {
        let stderr = std::fs::File::create(&log).unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
        let mut child = Command::new(binary)
            .arg(format!("-kubeconfig={}", kubeconfig.display()))
            .arg("-ingress-class=bench-fight")
            .arg("-interval=200ms")
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let changes = Arc::new(AtomicU64::new(0));
        let total = Arc::new(Mutex::new(None));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (counted, last) = (changes.clone(), total.clone());
        // A thread, not a task: it must drain stdout however busy the runtime is, or the Go
        // program blocks on a full pipe and stops polling.
        let reader = std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if line.starts_with("change ") {
                    counted.fetch_add(1, Ordering::Relaxed);
                } else if line.starts_with("ready ") {
                    let _ = ready_tx.send(line);
                } else if line.starts_with("total ") {
                    *last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(line);
                }
            }
        });
        let ready = ready_rx
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("external-dns watcher not ready in 120 s; see {}", log.display()));
        eprintln!("external-dns watcher: {ready}");
        DnsWatch { child, changes, total, reader }
    }

    fn reset(&self) {
        self.changes.store(0, Ordering::Relaxed);
    }

    fn changes(&self) -> u64 {
        self.changes.load(Ordering::Relaxed)
    }

    /// Stops it (SIGTERM: it prints its own total) and returns that line and its CPU seconds.
    fn stop(mut self) -> (Option<String>, f64) {
        let cpu = usage(self.child.id()).0;
        #[allow(unsafe_code)] // kill(2) on our own child's pid has no memory effects.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let _ = self.child.wait();
        let _ = self.reader.join();
        let total = self.total.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        (total, cpu)
    }
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    values[((values.len() - 1) as f64 * p).round() as usize]
}

/// The rogue values of one phase as a watcher saw them: seconds from leaving the canonical
/// value to coming back to it, and the Ingresses still off it.
#[derive(Default)]
struct Heals {
    rogue_since: HashMap<(String, String), Instant>,
    healed: Vec<f64>,
}

impl Heals {
    fn seen(&mut self, key: (String, String), canonical: bool) {
        if canonical {
            if let Some(since) = self.rogue_since.remove(&key) {
                self.healed.push(since.elapsed().as_secs_f64());
            }
        } else {
            self.rogue_since.entry(key).or_insert_with(Instant::now);
        }
    }
}

/// Writes of one controller in flight at most: enough to keep its schedule while the API server
/// is slow (at 10,000 Ingresses every 30 s, 333 writes/s: 8 in flight would need every write to
/// take under 24 ms), so that the phases' write counts (and so their change counts) compare.
const CONTROLLER_IN_FLIGHT: usize = 32;

/// One controller: writes `ip` to every Ingress once per `period`, spread evenly.
async fn controller(
    cluster: &'static Cluster,
    manager: &'static str,
    ip: &'static str,
    names: Arc<Vec<(String, String)>>,
    period: Duration,
) {
    let client = cluster.rogue().await;
    let params = PatchParams { field_manager: Some(manager.to_owned()), ..PatchParams::default() };
    let status = Arc::new(json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}}));
    let mut tick = tokio::time::interval(period / u32::try_from(names.len()).unwrap_or(1).max(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut in_flight = tokio::task::JoinSet::new();
    for (ns, name) in names.iter().cycle() {
        tick.tick().await;
        while in_flight.len() >= CONTROLLER_IN_FLIGHT {
            in_flight.join_next().await;
        }
        let api: Api<Ingress> = Api::namespaced(client.clone(), ns);
        let (name, params, status) = (name.clone(), params.clone(), status.clone());
        in_flight.spawn(async move {
            let _ = api.patch_status(&name, &params, &Patch::Merge(&*status)).await;
        });
    }
}

async fn phase(
    cluster: &'static Cluster,
    o: &Options,
    names: &Arc<Vec<(String, String)>>,
    guard: Option<&Webhook>,
    dnswatch: Option<&std::path::Path>,
    label: &str,
) -> Value {
    let admin = cluster.admin().await;
    let slug: String = label.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    let dns = dnswatch.map(|bin| {
        DnsWatch::start(
            bin,
            cluster.admin_kubeconfig(),
            cluster.scratch_dir("fight").join(format!("dnswatch-{slug}.log")),
        )
    });
    // Every status change of a bench Ingress, as a watcher (external-dns) sees it.
    let changes = Arc::new(AtomicU64::new(0));
    let counted = changes.clone();
    // When each Ingress last left the canonical value (from this phase's start), and how long
    // each rogue value lived until it was healed.
    let heals = Arc::new(Mutex::new(Heals::default()));
    let healing = heals.clone();
    let api: Api<Ingress> = Api::all(admin.clone());
    let watch = tokio::spawn(async move {
        let mut last: HashMap<(String, String), String> = HashMap::new();
        let mut events = std::pin::pin!(watcher(api, watcher::Config::default().labels(LABEL)));
        while let Some(event) = events.next().await {
            let Ok(watcher::Event::Apply(ing) | watcher::Event::InitApply(ing)) = event else { continue };
            let key =
                (ing.metadata.namespace.clone().unwrap_or_default(), ing.metadata.name.clone().unwrap_or_default());
            let now = support::addresses(&ing).join(",");
            if last.insert(key.clone(), now.clone()).is_some_and(|old| old != now) {
                counted.fetch_add(1, Ordering::Relaxed);
                healing.lock().unwrap_or_else(std::sync::PoisonError::into_inner).seen(key, now == CANONICAL);
            }
        }
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    // Where this phase's audit events begin.
    let log_from = k8s_openapi::jiff::Timestamp::now();
    let before = guard.map(|g| (usage(g.pid()).0, g.log().lines().filter(|l| l.contains("\"WARN\"")).count()));
    let fights_before =
        guard.map_or(0.0, |g| g.metric("ingress_status_guard_reconcile_fights_total{policy=\"default\"}"));
    let events_before = guard.map_or(0.0, |g| g.metric(EVENTS_PUBLISHED));
    let load_at_start = load_average();
    changes.store(0, Ordering::Relaxed);
    if let Some(dns) = &dns {
        dns.reset();
    }
    *heals.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Heals::default();
    let duration = Duration::from_secs(o.minutes * 60);
    let started = Instant::now();
    let a = tokio::spawn(controller(cluster, "controller-a", A, names.clone(), Duration::from_secs(o.period_a)));
    let b = tokio::spawn(controller(cluster, "controller-b", B, names.clone(), Duration::from_secs(o.period_b)));
    tokio::time::sleep(duration).await;
    a.abort();
    b.abort();
    let elapsed = started.elapsed().as_secs_f64();
    let seen = changes.load(Ordering::Relaxed);
    let dns_seen = dns.as_ref().map(DnsWatch::changes);
    let load_at_end = load_average();
    let heals = std::mem::take(&mut *heals.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    tokio::time::sleep(Duration::from_secs(3)).await;
    watch.abort();
    let dns_stopped = dns.map(DnsWatch::stop);
    let mut latency = audited(cluster, log_from);
    let by_controller: HashMap<&str, usize> =
        ["controller-a", "controller-b"].iter().map(|m| (*m, latency.get(*m).map_or(0, Vec::len))).collect();
    let mut writes: Vec<f64> =
        ["controller-a", "controller-b"].iter().flat_map(|m| latency.remove(*m).unwrap_or_default()).collect();
    let guard_patches = latency.remove("ingress-status-guard").map_or(0, |v| v.len());
    let hours = elapsed / 3600.0;
    let scheduled = o.ingresses as f64 * elapsed * (1.0 / o.period_a as f64 + 1.0 / o.period_b as f64);
    let mut result = json!({
        "phase": label,
        "seconds": elapsed,
        "load_average_1m_start_end": [load_at_start, load_at_end],
        "external_dns_target_changes": dns_seen,
        "external_dns_watcher_total_line": dns_stopped.as_ref().and_then(|(t, _)| t.clone()),
        "external_dns_watcher_cpu_seconds": dns_stopped.as_ref().map(|(_, cpu)| *cpu),
        "watch_status_changes": seen,
        "controller_writes": writes.len(),
        "controller_writes_scheduled": scheduled.round(),
        "controller_writes_by_manager": by_controller,
        "controller_write_p50_ms": percentile(&mut writes, 0.5),
        "controller_write_p99_ms": percentile(&mut writes, 0.99),
        "guard_patches": guard_patches,
        "guard_patches_per_ingress_per_hour": guard_patches as f64 / o.ingresses as f64 / hours,
        "rogue_values_healed": heals.healed.len(),
        "rogue_values_unhealed_at_end": heals.rogue_since.len(),
        "time_to_heal_p50_s": percentile(&mut heals.healed.clone(), 0.5),
        "time_to_heal_p99_s": percentile(&mut heals.healed.clone(), 0.99),
        "time_to_heal_max_s": heals.healed.iter().copied().fold(0.0, f64::max),
    });
    if let (Some(g), Some((cpu0, warn0))) = (guard, before) {
        let (cpu, hwm) = usage(g.pid());
        let warns = g.log().lines().filter(|l| l.contains("\"WARN\"")).count() - warn0;
        result["guard_cpu_seconds"] = json!(cpu - cpu0);
        result["guard_vm_hwm_mib"] = json!(hwm as f64 / 1024.0);
        result["guard_warn_lines_per_minute"] = json!(warns as f64 / (elapsed / 60.0));
        result["guard_events_published_per_minute"] =
            json!((g.metric(EVENTS_PUBLISHED) - events_before) / (elapsed / 60.0));
        result["fights_counted"] =
            json!(g.metric("ingress_status_guard_reconcile_fights_total{policy=\"default\"}") - fights_before);
        result["contested_at_end"] =
            json!(g.metric("ingress_status_guard_reconcile_contested_ingresses{policy=\"default\"}"));
    }
    eprintln!("{result}");
    result
}

async fn register(admin: &kube::Client, webhook: &Webhook) {
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": "isg-bench-fight"},
        "webhooks": [{
            "name": "fight.bench.ingress-status-guard.test",
            "clientConfig": {"url": webhook.url(), "caBundle": base64_encode(webhook.ca_pem())},
            "rules": [{"apiGroups": ["networking.k8s.io"], "apiVersions": ["v1"], "operations": ["UPDATE"],
                       "resources": ["ingresses/status"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchLabels": {LABEL: "true"}},
            "admissionReviewVersions": ["v1"], "sideEffects": "NoneOnDryRun",
            "failurePolicy": "Ignore", "timeoutSeconds": 5,
        }]
    }))
    .unwrap();
    Api::<MutatingWebhookConfiguration>::all(admin.clone())
        .create(&PostParams::default(), &config)
        .await
        .expect("register");
    // Let the API server pick the registration up.
    tokio::time::sleep(Duration::from_secs(5)).await;
}

fn base64_encode(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

async fn run(o: Options) -> Value {
    // Built before the cluster starts, so that a missing `go` fails at once.
    let dnswatch = o.external_dns.then(dnswatch_binary);
    let dnswatch = dnswatch.as_deref();
    let cluster = Cluster::shared().await;
    let admin = cluster.admin().await;
    let mut namespaces = Vec::new();
    for _ in 0..o.namespaces {
        let ns = cluster.namespace(&admin, "bench-fight").await;
        let label = json!({"metadata": {"labels": {LABEL: "true"}}});
        Api::<k8s_openapi::api::core::v1::Namespace>::all(admin.clone())
            .patch(&ns, &PatchParams::default(), &Patch::Merge(&label))
            .await
            .expect("label namespace");
        namespaces.push(ns);
    }
    let per_ns = o.ingresses.div_ceil(o.namespaces);
    let names: Arc<Vec<(String, String)>> =
        Arc::new((0..o.ingresses).map(|i| (namespaces[i / per_ns].clone(), format!("ing-{i}"))).collect());
    let creates = names.iter().cloned().map(|(ns, name)| {
        let api: Api<Ingress> = Api::namespaced(admin.clone(), &ns);
        async move {
            let ingress: Ingress = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {LABEL: "true"}},
                "spec": {"ingressClassName": "bench-fight", "rules": [{"host": format!("{name}.example.test"), "http": {"paths": [{
                    "path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "backend", "port": {"number": 80}}}}]}}]}
            }))
            .unwrap();
            api.create(&PostParams::default(), &ingress).await.expect("create Ingress");
        }
    });
    futures::stream::iter(creates).buffer_unordered(16).collect::<Vec<()>>().await;
    eprintln!("created {} Ingresses in {} namespaces", o.ingresses, o.namespaces);

    let mut phases = vec![phase(cluster, &o, &names, None, dnswatch, "no guard").await];
    let lease_ns = format!("--leader-election-namespace={}", namespaces[0]);
    let address = format!("--publish-status-address={CANONICAL}");
    let args = ["--reconcile=true", &address, "--ingress-class=bench-fight", &lease_ns];
    let own = PathBuf::from(support::webhook::BINARY);
    let binary = o.binary.clone().unwrap_or(own);
    let mut guard =
        Webhook::start_binary(cluster, "bench-fight", &binary, cluster.admin_kubeconfig(), &args, &[]).await;
    register(&admin, &guard).await;
    phases.push(phase(cluster, &o, &names, Some(&guard), dnswatch, "guard, webhook registered").await);
    Api::<MutatingWebhookConfiguration>::all(admin.clone())
        .delete("isg-bench-fight", &DeleteParams::default())
        .await
        .expect("deregister");
    tokio::time::sleep(Duration::from_secs(5)).await;
    phases.push(
        phase(cluster, &o, &names, Some(&guard), dnswatch, "guard, webhook deregistered (reconciler alone)").await,
    );
    guard.terminate(Duration::from_secs(20));
    json!({
        "ingresses": o.ingresses, "namespaces": o.namespaces,
        "period_a_s": o.period_a, "period_b_s": o.period_b, "minutes_per_phase": o.minutes,
        "profile": if o.binary.is_some() { "given binary" } else if cfg!(debug_assertions) { "dev" } else { "release" },
        "binary": binary.display().to_string(),
        "external_dns_watcher": dnswatch.map(|p| p.display().to_string()),
        "phases": phases,
    })
}

fn main() {
    let Some(options) = options() else {
        println!("fight: pass --run to start a kube-apiserver and measure (see BENCHMARKS.md)");
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
