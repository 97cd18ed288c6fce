//! What the API server sees: Ingress status writes through a real kube-apiserver + etcd (the
//! end-to-end harness in `tests/support/`), in a namespace where the webhook (the release
//! binary) is registered and in one where it is not, interleaved write by write; plus the API
//! server's own `apiserver_admission_webhook_admission_duration_seconds` histogram.
//!
//! Two more namespaces each have a fixed-response webhook (this executable, re-started with
//! `--fixed-webhook`): the same stack as the webhook (axum, axum-server over rustls,
//! TCP_NODELAY) answering every review with a fixed response without parsing it, only the
//! request's uid copied in (found by a byte search, the API server checks it). One answers as
//! the webhook answers a canonical write (no patch), the other with the very bytes the webhook
//! sends for the rogue write (the same JSON patch, warning and audit annotations). They are the
//! floor of what a webhook costs the API server, with and without a patch.
//!
//! Started by `benches/run.sh`; by hand:
//! `cargo bench --bench apiserver -- --run [--writes N] [--out FILE]`.
//! Without `--run` (as under a plain `cargo bench`) it only says how to run it.
//! It measures and prints; it asserts nothing about time.

#[allow(dead_code)]
#[path = "../tests/support/mod.rs"]
mod support;

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use serde_json::{Value, json};
use support::{
    Class, FailurePolicy, SENTINEL, SENTINEL_2, TestEnv, addresses, create_ingress, entries, eventually,
    pki::Ca,
    process::{self, Proc},
    webhook::register_url,
    write_status,
};

const CANONICAL: [&str; 2] = ["192.0.2.10", "lb.example.com"];
const ROGUE: [&str; 2] = ["198.51.100.1", "198.51.100.2"];
const CLASS: &str = "guarded";
const FIXED_NO_PATCH: &str = "fixed-response webhook: canonical write (no patch)";
const FIXED_PATCH: &str = "fixed-response webhook: rogue write (the same patch)";
const BEFORE_NO_PATCH: &str = "with the --before webhook: canonical write (no patch)";
const BEFORE_PATCH: &str = "with the --before webhook: rogue write (patched to canonical)";
const WARM_UP: usize = 30;
const HISTOGRAM: &str = "apiserver_admission_webhook_admission_duration_seconds";

struct Options {
    writes: usize,
    out: Option<std::path::PathBuf>,
    /// Another build of the webhook, registered in a namespace of its own and measured in the
    /// same rounds (a before/after comparison from one run).
    before: Option<std::path::PathBuf>,
}

fn options() -> Option<Options> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--run") {
        return None;
    }
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    Some(Options {
        writes: value("--writes").map(|n| n.parse().expect("--writes N")).unwrap_or(500),
        out: value("--out").map(Into::into),
        before: value("--before").map(Into::into),
    })
}

/// One kind of write: where it goes and what it writes on iteration `i`.
struct Scenario {
    name: &'static str,
    api: Api<Ingress>,
    ingress: &'static str,
    /// Writes alternate between these (one value: the same write every time).
    values: Vec<&'static [&'static str]>,
    samples: Vec<Duration>,
}

impl Scenario {
    async fn write(&mut self, i: usize, record: bool) {
        let value = self.values[i % self.values.len()];
        let started = Instant::now();
        write_status(&self.api, self.ingress, value, false)
            .await
            .unwrap_or_else(|e| panic!("{}: status write {i} failed: {e}", self.name));
        if record {
            self.samples.push(started.elapsed());
        }
    }
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn millis(samples: &[Duration]) -> Vec<f64> {
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    ms
}

fn summary(ms: &[f64]) -> Value {
    json!({
        "n": ms.len(),
        "p50_ms": quantile(ms, 0.5),
        "p90_ms": quantile(ms, 0.9),
        "p99_ms": quantile(ms, 0.99),
        "mean_ms": ms.iter().sum::<f64>() / ms.len() as f64,
    })
}

/// The buckets (upper bound in seconds -> cumulative count), sum and count of the admission
/// duration histogram series of webhook `name`, summed over its label sets.
#[derive(Debug, Default, Clone)]
struct Histogram {
    buckets: BTreeMap<String, f64>,
    sum: f64,
    count: f64,
}

fn parse_histogram(metrics: &str, name: &str) -> Histogram {
    let mut h = Histogram::default();
    let selector = format!("name=\"{name}\"");
    for line in metrics.lines().filter(|l| l.starts_with(HISTOGRAM) && l.contains(&selector)) {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let value: f64 = value.parse().unwrap_or(0.0);
        if series.starts_with(&format!("{HISTOGRAM}_bucket")) {
            let le = series.split("le=\"").nth(1).and_then(|s| s.split('"').next()).unwrap_or("");
            *h.buckets.entry(le.to_owned()).or_default() += value;
        } else if series.starts_with(&format!("{HISTOGRAM}_sum")) {
            h.sum += value;
        } else if series.starts_with(&format!("{HISTOGRAM}_count")) {
            h.count += value;
        }
    }
    h
}

impl Histogram {
    fn minus(&self, before: &Histogram) -> Histogram {
        Histogram {
            buckets: self
                .buckets
                .iter()
                .map(|(le, n)| (le.clone(), n - before.buckets.get(le).copied().unwrap_or(0.0)))
                .collect(),
            sum: self.sum - before.sum,
            count: self.count - before.count,
        }
    }

    /// Buckets sorted by bound, `+Inf` last.
    fn sorted(&self) -> Vec<(f64, f64)> {
        let mut b: Vec<(f64, f64)> =
            self.buckets.iter().map(|(le, n)| (le.parse::<f64>().unwrap_or(f64::INFINITY), *n)).collect();
        b.sort_by(|a, b| a.0.total_cmp(&b.0));
        b
    }

    /// As Prometheus's `histogram_quantile`: linear interpolation inside the bucket.
    fn quantile(&self, q: f64) -> f64 {
        let buckets = self.sorted();
        let total = buckets.last().map(|b| b.1).unwrap_or(0.0);
        if total == 0.0 {
            return f64::NAN;
        }
        let rank = q * total;
        let (mut lower, mut below) = (0.0, 0.0);
        for (le, cumulative) in buckets {
            if cumulative >= rank {
                if le.is_infinite() {
                    return lower;
                }
                return lower + (le - lower) * (rank - below) / (cumulative - below).max(f64::MIN_POSITIVE);
            }
            (lower, below) = (le, cumulative);
        }
        lower
    }

    fn to_json(&self) -> Value {
        let buckets: Vec<Value> =
            self.sorted().iter().map(|(le, n)| json!({"le": le.to_string(), "count": n})).collect();
        json!({
            "count": self.count,
            "mean_ms": if self.count > 0.0 { self.sum / self.count * 1e3 } else { f64::NAN },
            "p50_ms_interpolated": self.quantile(0.5) * 1e3,
            "p99_ms_interpolated": self.quantile(0.99) * 1e3,
            "buckets": buckets,
        })
    }
}

async fn scrape(client: &kube::Client) -> String {
    let request = hyper::Request::get("/metrics").body(Vec::new()).expect("request");
    client.request_text(request).await.expect("GET /metrics from the API server")
}

/// The fixed-response webhooks: what they answer, and the server that answers it.
mod fixed {
    use std::{net::SocketAddr, path::Path, sync::Arc};

    use axum::{
        Router,
        body::Bytes,
        extract::{DefaultBodyLimit, State},
        http::header,
        response::{IntoResponse, Response},
        routing::post,
    };
    use axum_server::{accept::NoDelayAcceptor, tls_rustls::RustlsConfig};
    use ingress_status_guard::{Mode, OnUnresolved, PolicySpec, SourceCache, read_review, render};
    use serde_json::{Value, json};

    use super::{CANONICAL, CLASS, ROGUE};

    const FIXTURE: &str = include_str!("../tests/fixtures/ingress-status-update.apiserver-1.24.json");

    /// The webhook's own response to a write of `written` to an Ingress of the governed class,
    /// under the flags the benchmark starts it with (`--ingress-class`, `--publish-status-address`),
    /// split around the request uid: (before the uid, after it).
    pub(crate) fn response(written: &[&str]) -> (Vec<u8>, Vec<u8>) {
        let mut review: Value = serde_json::from_str(FIXTURE).expect("fixture is JSON");
        let uid = review["request"]["uid"].as_str().expect("fixture uid").to_owned();
        for key in ["object", "oldObject"] {
            review["request"][key]["spec"]["ingressClassName"] = json!(CLASS);
        }
        review["request"]["object"]["status"]["loadBalancer"]["ingress"] = super::entries(written);
        let body = serde_json::to_vec(&review).expect("serializes");
        let policies = PolicySpec {
            publish_status_address: Some(CANONICAL.join(",")),
            ingress_classes: vec![CLASS.into()],
            mode: Some(Mode::Enforce),
            on_unresolved: OnUnresolved::Allow,
            ..PolicySpec::default()
        }
        .into_policies()
        .expect("valid policy");
        let sources = SourceCache::new(&policies);
        let review = read_review(&body).expect("valid review");
        let verdict = review.decide(&policies, sources.as_ref());
        let bytes = render(&review, &verdict);
        let at = memchr::memmem::find(&bytes, uid.as_bytes()).expect("the response echoes the uid");
        (bytes[..at].to_vec(), bytes[at + uid.len()..].to_vec())
    }

    /// What the fixed webhook of `mode` answers: `no-patch` as to a canonical write, `patch` as to
    /// the first rogue write.
    pub(crate) fn response_for(mode: &str) -> (Vec<u8>, Vec<u8>) {
        match mode {
            "no-patch" => response(&CANONICAL),
            "patch" => response(&ROGUE[..1]),
            other => panic!("--fixed-webhook: no-patch or patch, not {other:?}"),
        }
    }

    /// `request.uid` by a byte search, no JSON parse: the API server writes `request` with `uid`
    /// as its first member, so the first `"uid":"` is it (objects' uids come later).
    fn request_uid(body: &[u8]) -> &[u8] {
        const KEY: &[u8] = b"\"uid\":\"";
        let Some(start) = memchr::memmem::find(body, KEY).map(|at| at + KEY.len()) else { return b"" };
        let end = memchr::memchr(b'"', &body[start..]).map_or(start, |n| start + n);
        &body[start..end]
    }

    async fn answer(State(parts): State<Arc<(Vec<u8>, Vec<u8>)>>, body: Bytes) -> Response {
        let uid = request_uid(&body);
        let mut out = Vec::with_capacity(parts.0.len() + uid.len() + parts.1.len());
        out.extend_from_slice(&parts.0);
        out.extend_from_slice(uid);
        out.extend_from_slice(&parts.1);
        ([(header::CONTENT_TYPE, "application/json")], out).into_response()
    }

    /// The server: `--fixed-webhook MODE --listen ADDR --tls-cert FILE --tls-key FILE`.
    pub(crate) fn serve(args: &[String]) -> std::process::ExitCode {
        let value = |flag: &str| {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1))
                .unwrap_or_else(|| panic!("--fixed-webhook needs {flag}"))
                .clone()
        };
        let parts = Arc::new(response_for(&value("--fixed-webhook")));
        let listen: SocketAddr = value("--listen").parse().expect("--listen ADDR");
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = ingress_status_guard::load_tls(Path::new(&value("--tls-cert")), Path::new(&value("--tls-key")))
            .expect("TLS files");
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
        let result: std::io::Result<()> = runtime.block_on(async move {
            let listener = std::net::TcpListener::bind(listen)?;
            listener.set_nonblocking(true)?;
            let app = Router::new()
                .route("/mutate", post(answer))
                .layer(DefaultBodyLimit::max(3 * 1024 * 1024))
                .with_state(parts);
            eprintln!("fixed webhook listening on https://{listen}/mutate");
            axum_server::from_tcp_rustls(listener, RustlsConfig::from_config(Arc::new(config)))?
                .map(|tls| tls.acceptor(NoDelayAcceptor::new()))
                .serve(app.into_make_service())
                .await
        });
        match result {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                std::process::ExitCode::FAILURE
            }
        }
    }
}

/// A fixed-response webhook (`mode`: `no-patch` or `patch`) started as a child process and
/// registered for the namespace of `env`; returns once the API server calls it.
async fn start_fixed(env: &TestEnv, mode: &str) -> Proc {
    let dir = env.cluster.scratch_dir(&format!("fixed-{mode}"));
    let ca = Ca::new(&format!("isg-bench fixed webhook CA ({mode})"));
    let serving = ca.server("fixed-webhook", &["127.0.0.1", "localhost"]);
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, &serving.cert_pem).expect("write cert");
    std::fs::write(&key, &serving.key_pem).expect("write key");
    let exe = std::env::current_exe().expect("this executable");
    for attempt in 1..=3 {
        let port = support::cluster::free_port();
        let mut command = std::process::Command::new(&exe);
        command.args(["--fixed-webhook", mode, "--listen", &format!("127.0.0.1:{port}")]);
        command.arg("--tls-cert").arg(&cert).arg("--tls-key").arg(&key);
        let log = dir.join(format!("fixed-{attempt}.log"));
        let mut proc = process::spawn("fixed webhook", command, &log).expect("start the fixed webhook");
        let started = Instant::now();
        while proc.exited().is_none() && std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(10), "fixed webhook not listening: {}", proc.log_tail(20));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if proc.exited().is_some() {
            eprintln!("fixed webhook attempt {attempt}: {}", proc.log_tail(20));
            continue;
        }
        let url = format!("https://127.0.0.1:{port}/mutate");
        register_url(&env.admin, &env.ns, &url, &ca.cert_pem, FailurePolicy::Fail).await;
        await_called(env, mode).await;
        return proc;
    }
    panic!("the fixed webhook ({mode}) did not start");
}

/// Waits until the API server calls the webhook registered for `env`'s namespace. The patch
/// one shows it: a rogue write is stored canonical. The no-patch one changes nothing a client
/// can see; it is registered before the patch one and the API server takes configurations in
/// the order it watches them, so the wait for the patch one covers it, and the 30 warm-up
/// rounds come after. Its calls are counted in the API server's histogram after the run.
async fn await_called(env: &TestEnv, mode: &str) {
    if mode != "patch" {
        return;
    }
    create_ingress(&env.ingresses, "probe", Class::Field(CLASS)).await;
    let mut flip = false;
    eventually(
        &format!("a rogue status write in {} is patched by the fixed webhook", env.ns),
        Duration::from_secs(30),
        || {
            flip = !flip;
            let written = if flip { SENTINEL } else { SENTINEL_2 };
            async move {
                let stored = write_status(&env.rogue, "probe", &[written], false).await.map_err(|e| e.to_string())?;
                let stored = addresses(&stored);
                if stored == CANONICAL { Ok(()) } else { Err(format!("stored {stored:?}")) }
            }
        },
    )
    .await;
}

async fn run(options: Options) -> Value {
    let plain = TestEnv::new("bench-plain").await;
    let hooked = TestEnv::new("bench-hooked").await;
    let fixed_plain = TestEnv::new("bench-fixed-no-patch").await;
    let fixed_patch = TestEnv::new("bench-fixed-patch").await;
    let canonical_flag = format!("--publish-status-address={}", CANONICAL.join(","));
    let class_flag = format!("--ingress-class={CLASS}");
    let webhook = hooked.start_webhook(&[&class_flag, &canonical_flag, "--no-events"]).await;
    hooked.register(&webhook, FailurePolicy::Fail, Class::Field(CLASS), &CANONICAL).await;
    let before_env = match &options.before {
        Some(_) => Some(TestEnv::new("bench-before").await),
        None => None,
    };
    let before_webhook = match (&options.before, &before_env) {
        (Some(binary), Some(env)) => {
            let args = [class_flag.as_str(), canonical_flag.as_str(), "--no-events"];
            let kubeconfig = env.cluster.admin_kubeconfig();
            let webhook = support::Webhook::start_binary(env.cluster, &env.ns, binary, kubeconfig, &args, &[]).await;
            env.register(&webhook, FailurePolicy::Fail, Class::Field(CLASS), &CANONICAL).await;
            create_ingress(&env.ingresses, "web", Class::Field(CLASS)).await;
            Some(webhook)
        }
        _ => None,
    };
    let fixed_no_patch_server = start_fixed(&fixed_plain, "no-patch").await;
    let fixed_patch_server = start_fixed(&fixed_patch, "patch").await;
    let hook_name = |env: &TestEnv| format!("{}.e2e.ingress-status-guard.test", env.ns);
    let webhook_name = hook_name(&hooked);

    for (env, name, class) in [
        (&plain, "web", Class::Field(CLASS)),
        (&plain, "free", Class::Field("other")),
        (&hooked, "web", Class::Field(CLASS)),
        (&hooked, "free", Class::Field("other")),
        (&fixed_plain, "web", Class::Field(CLASS)),
        (&fixed_patch, "web", Class::Field(CLASS)),
    ] {
        create_ingress(&env.ingresses, name, class).await;
    }
    let canonical: &'static [&'static str] = &CANONICAL;
    let rogue: Vec<&'static [&'static str]> = vec![&ROGUE[..1], &ROGUE[1..]];
    let scenario = |name, env: &TestEnv, ingress, values| Scenario {
        name,
        api: env.rogue.clone(),
        ingress,
        values,
        samples: Vec::new(),
    };
    // Pairs share what the store does: canonical writes are no-op updates after the first
    // (the webhook's patch makes the rogue writes canonical too); alternating writes to a
    // class the webhook does not govern are real updates with or without it.
    let mut scenarios = vec![
        scenario("without webhook: canonical write", &plain, "web", vec![canonical]),
        scenario("with webhook: canonical write (no patch)", &hooked, "web", vec![canonical]),
        scenario("with webhook: rogue write (patched to canonical)", &hooked, "web", rogue.clone()),
        scenario("without webhook: changing write", &plain, "free", rogue.clone()),
        scenario("with webhook: changing write, class not governed", &hooked, "free", rogue.clone()),
        scenario(FIXED_NO_PATCH, &fixed_plain, "web", vec![canonical]),
        scenario(FIXED_PATCH, &fixed_patch, "web", rogue.clone()),
    ];
    if let Some(env) = &before_env {
        scenarios.push(scenario(BEFORE_NO_PATCH, env, "web", vec![canonical]));
        scenarios.push(scenario(BEFORE_PATCH, env, "web", rogue));
    }

    let admin = hooked.admin.clone();
    let mut order: Vec<usize> = (0..scenarios.len()).collect();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut names = vec![webhook_name.clone(), hook_name(&fixed_plain), hook_name(&fixed_patch)];
    names.extend(before_env.as_ref().map(hook_name));
    let mut before = vec![Histogram::default(); names.len()];
    let started = Instant::now();
    for i in 0..WARM_UP + options.writes {
        if i == WARM_UP {
            let text = scrape(&admin).await;
            before = names.iter().map(|n| parse_histogram(&text, n)).collect();
        }
        // A fresh order each round, so no scenario always follows another.
        for k in (1..order.len()).rev() {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            order.swap(k, (seed >> 33) as usize % (k + 1));
        }
        for &s in &order {
            scenarios[s].write(i, i >= WARM_UP).await;
        }
    }
    let elapsed = started.elapsed();
    let text = scrape(&admin).await;
    let histograms: Vec<Histogram> =
        names.iter().zip(&before).map(|(n, before)| parse_histogram(&text, n).minus(before)).collect();

    let results: Vec<(String, Vec<f64>)> = scenarios.iter().map(|s| (s.name.to_owned(), millis(&s.samples))).collect();
    let by_name = |n: &str| &results.iter().find(|(name, _)| name == n).expect("scenario").1;
    let added = |with: &str, without: &str| {
        let (w, wo) = (by_name(with), by_name(without));
        json!({
            "with": with, "without": without,
            "added_p50_ms": quantile(w, 0.5) - quantile(wo, 0.5),
            "added_p99_ms": quantile(w, 0.99) - quantile(wo, 0.99),
        })
    };
    let mut comparisons = vec![
        added("with webhook: canonical write (no patch)", "without webhook: canonical write"),
        added("with webhook: rogue write (patched to canonical)", "without webhook: canonical write"),
        added("with webhook: changing write, class not governed", "without webhook: changing write"),
        added(FIXED_NO_PATCH, "without webhook: canonical write"),
        added(FIXED_PATCH, "without webhook: canonical write"),
        added("with webhook: canonical write (no patch)", FIXED_NO_PATCH),
        added("with webhook: rogue write (patched to canonical)", FIXED_PATCH),
    ];
    if before_env.is_some() {
        comparisons.push(added(BEFORE_NO_PATCH, "without webhook: canonical write"));
        comparisons.push(added(BEFORE_PATCH, "without webhook: canonical write"));
        comparisons.push(added(BEFORE_NO_PATCH, FIXED_NO_PATCH));
        comparisons.push(added(BEFORE_PATCH, FIXED_PATCH));
    }
    drop(before_webhook);
    drop(webhook);
    drop(fixed_no_patch_server);
    drop(fixed_patch_server);
    let (fixed_no_patch, fixed_patch) = (fixed::response_for("no-patch"), fixed::response_for("patch"));
    let shown =
        |(a, b): (Vec<u8>, Vec<u8>)| format!("{}<uid>{}", String::from_utf8_lossy(&a), String::from_utf8_lossy(&b));
    json!({
        "writes_per_scenario": options.writes,
        "warm_up_rounds": WARM_UP,
        "elapsed_s": elapsed.as_secs_f64(),
        "scenarios": results.iter().map(|(name, ms)| json!({"name": name, "summary": summary(ms)})).collect::<Vec<_>>(),
        "added": comparisons,
        "apiserver_histogram": histograms[0].to_json(),
        "apiserver_histogram_fixed_no_patch": histograms[1].to_json(),
        "apiserver_histogram_fixed_patch": histograms[2].to_json(),
        "apiserver_histogram_before": histograms.get(3).map(Histogram::to_json),
        "fixed_responses": {"no_patch": shown(fixed_no_patch), "patch": shown(fixed_patch)},
    })
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--fixed-webhook") {
        return fixed::serve(&args);
    }
    let Some(options) = options() else {
        println!("apiserver: pass --run to start a kube-apiserver and measure (benches/run.sh does)");
        return std::process::ExitCode::SUCCESS;
    };
    let out = options.out.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let report = runtime.block_on(run(options));
    let text = serde_json::to_string_pretty(&report).expect("json");
    println!("{text}");
    if let Some(path) = out {
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }
    std::process::ExitCode::SUCCESS
}
