//! What a status write costs as the API server's client sees it, with the guard's
//! MutatingAdmissionPolicy (`serve --admission=policy`), with its webhook, and with neither:
//! three namespaces of the `tests/support/` harness (a real kube-apiserver + etcd), written
//! interleaved write by write so that load on the machine falls on all three alike.
//!
//! Per namespace two writes: the canonical value again (a no-op everywhere: what admission
//! costs), and rogue values alternating (stored as written without a guard; rewritten to the
//! canonical value, so a no-op, with one).
//!
//! `cargo bench --profile dev --bench admission_policy -- --run [--writes N]`; without `--run`
//! (a plain `cargo bench`) it only says how to run it. It measures and prints; it asserts
//! nothing about time.

#[allow(dead_code)]
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use support::{Class, FailurePolicy, TestEnv, addresses, create_ingress, eventually, write_status};

const CANONICAL: [&str; 1] = ["192.0.2.10"];
const ROGUE: [&str; 2] = ["198.51.100.1", "198.51.100.2"];
const WARM_UP: usize = 30;

struct Scenario {
    name: String,
    api: Api<Ingress>,
    values: Vec<&'static str>,
    samples: Vec<f64>,
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((q * (sorted.len() - 1) as f64).round() as usize).min(sorted.len() - 1)]
}

async fn governed(env: &TestEnv, class: &str) {
    create_ingress(&env.ingresses, "web", Class::Field(class)).await;
    eventually("the guard governs the namespace", Duration::from_secs(60), || async {
        let got = write_status(&env.rogue, "web", &ROGUE[..1], false).await.map_err(|e| e.to_string())?;
        if addresses(&got) == CANONICAL { Ok(()) } else { Err(format!("stored {:?}", addresses(&got))) }
    })
    .await;
}

async fn run(writes: usize) {
    let plain = TestEnv::new("bench-map-none").await;
    let map = TestEnv::new("bench-map-policy").await;
    let hooked = TestEnv::new("bench-map-webhook").await;
    let dir = map.cluster.scratch_dir("bench-map");
    // The MAP's binding selects its namespace only, so the other two never match it.
    let config = dir.join("policies.yaml");
    std::fs::write(
        &config,
        format!(
            "policies:\n  - name: bench-map\n    ingressClasses: [bench]\n    publishStatusAddress: {}\n    namespaceSelector: \"{}={}\"\n",
            CANONICAL[0],
            support::cluster::NAMESPACE_LABEL,
            map.ns
        ),
    )
    .unwrap();
    let (config_flag, lease) =
        (format!("--config={}", config.display()), format!("--leader-election-namespace={}", map.ns));
    let _guard = map.start_webhook(&["--admission=policy", &config_flag, &lease]).await;
    let canonical_flag = format!("--publish-status-address={}", CANONICAL[0]);
    let webhook = hooked.start_webhook(&["--ingress-class=bench", &canonical_flag, "--no-events"]).await;
    webhook.register(&hooked.admin, &hooked.ns, FailurePolicy::Fail).await;
    governed(&map, "bench").await;
    governed(&hooked, "bench").await;
    create_ingress(&plain.ingresses, "web", Class::Field("bench")).await;
    write_status(&plain.ingresses, "web", &CANONICAL, false).await.unwrap();

    let mut scenarios = Vec::new();
    for (label, env) in [("no admission", &plain), ("MutatingAdmissionPolicy", &map), ("webhook", &hooked)] {
        for (what, values) in [("canonical write", vec![CANONICAL[0]]), ("rogue write", ROGUE.to_vec())] {
            scenarios.push(Scenario {
                name: format!("{label}: {what}"),
                api: env.rogue.clone(),
                values,
                samples: Vec::new(),
            });
        }
    }
    let started = Instant::now();
    for i in 0..WARM_UP + writes {
        for s in &mut scenarios {
            let value = s.values[i % s.values.len()];
            let at = Instant::now();
            write_status(&s.api, "web", &[value], false).await.unwrap_or_else(|e| panic!("{}: write {i}: {e}", s.name));
            if i >= WARM_UP {
                s.samples.push(at.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{writes} writes per row after {WARM_UP} warm-up, interleaved, {:.0} s; load average {}",
        started.elapsed().as_secs_f64(),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    println!("| write | p50 ms | p90 ms | p99 ms | mean ms |\n|---|---:|---:|---:|---:|");
    for s in &mut scenarios {
        s.samples.sort_by(f64::total_cmp);
        let mean = s.samples.iter().sum::<f64>() / s.samples.len() as f64;
        let q = |p| quantile(&s.samples, p);
        println!("| {} | {:.2} | {:.2} | {:.2} | {mean:.2} |", s.name, q(0.5), q(0.9), q(0.99));
    }
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--run") {
        println!(
            "benches/admission_policy.rs: run with `cargo bench --profile dev --bench admission_policy -- --run [--writes N]`"
        );
        return std::process::ExitCode::SUCCESS;
    }
    let writes = args
        .iter()
        .position(|a| a == "--writes")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    runtime.block_on(run(writes));
    std::process::ExitCode::SUCCESS
}
