//! What the API server sees: Ingress status writes through a real kube-apiserver + etcd (the
//! end-to-end harness in `tests/support/`), in a namespace where the webhook (the release
//! binary) is registered and in one where it is not, interleaved write by write; plus the API
//! server's own `apiserver_admission_webhook_admission_duration_seconds` histogram.
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
use support::{Class, FailurePolicy, TestEnv, create_ingress, write_status};

const CANONICAL: [&str; 2] = ["192.0.2.10", "lb.example.com"];
const ROGUE: [&str; 2] = ["198.51.100.1", "198.51.100.2"];
const WARM_UP: usize = 30;
const HISTOGRAM: &str = "apiserver_admission_webhook_admission_duration_seconds";

struct Options {
    writes: usize,
    out: Option<std::path::PathBuf>,
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

async fn run(options: Options) -> Value {
    let plain = TestEnv::new("bench-plain").await;
    let hooked = TestEnv::new("bench-hooked").await;
    let canonical_flag = format!("--publish-status-address={}", CANONICAL.join(","));
    let webhook = hooked.start_webhook(&["--ingress-class=guarded", &canonical_flag, "--no-events"]).await;
    hooked.register(&webhook, FailurePolicy::Fail, Class::Field("guarded"), &CANONICAL).await;
    let webhook_name = format!("{}.e2e.ingress-status-guard.test", hooked.ns);

    for (env, name, class) in [
        (&plain, "web", Class::Field("guarded")),
        (&plain, "free", Class::Field("other")),
        (&hooked, "web", Class::Field("guarded")),
        (&hooked, "free", Class::Field("other")),
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
    let mut scenarios = [
        scenario("without webhook: canonical write", &plain, "web", vec![canonical]),
        scenario("with webhook: canonical write (no patch)", &hooked, "web", vec![canonical]),
        scenario("with webhook: rogue write (patched to canonical)", &hooked, "web", rogue.clone()),
        scenario("without webhook: changing write", &plain, "free", rogue.clone()),
        scenario("with webhook: changing write, class not governed", &hooked, "free", rogue),
    ];

    let admin = hooked.admin.clone();
    let mut order: Vec<usize> = (0..scenarios.len()).collect();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut before = Histogram::default();
    let started = Instant::now();
    for i in 0..WARM_UP + options.writes {
        if i == WARM_UP {
            before = parse_histogram(&scrape(&admin).await, &webhook_name);
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
    let after = parse_histogram(&scrape(&admin).await, &webhook_name);
    let histogram = after.minus(&before);

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
    let comparisons = vec![
        added("with webhook: canonical write (no patch)", "without webhook: canonical write"),
        added("with webhook: rogue write (patched to canonical)", "without webhook: canonical write"),
        added("with webhook: changing write, class not governed", "without webhook: changing write"),
    ];
    drop(webhook);
    json!({
        "writes_per_scenario": options.writes,
        "warm_up_rounds": WARM_UP,
        "elapsed_s": elapsed.as_secs_f64(),
        "scenarios": results.iter().map(|(name, ms)| json!({"name": name, "summary": summary(ms)})).collect::<Vec<_>>(),
        "added": comparisons,
        "apiserver_histogram": histogram.to_json(),
    })
}

fn main() {
    let Some(options) = options() else {
        println!("apiserver: pass --run to start a kube-apiserver and measure (benches/run.sh does)");
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
