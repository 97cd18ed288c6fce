//! The Grafana dashboard (charts/ingress-status-guard/dashboards/ingress-status-guard.json),
//! proven against a real Prometheus rather than only parsed: Prometheus (`$PROMETHEUS`, else
//! the one tests/prometheus/build.sh builds from its pinned Go module) scrapes the built guard
//! every second while it runs a real scenario against the test kube-apiserver: stale statuses healed at
//! start-up, rogue writes patched and audited, an unresolved source, a fight with the
//! reconciler, a forged, a malformed and an oversized review, a refused and two accepted
//! reloads of the policy file. Then every panel's query, with
//! the template variables substituted as Grafana would, goes through Prometheus's HTTP API and
//! must return a series, with the values the scenario implies where they are knowable; every
//! metric name the dashboard names must be one the guard exposes, so a renamed metric fails.
//!
//! `ISG_DASHBOARD_SNAPSHOT=FILE` also writes every query's range over the run to FILE (JSON),
//! which `scripts/dashboard-png.py` draws into docs/dashboard.png.

use crate::support;

mod panels;
mod prometheus;
mod scenario;

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use serde_json::{Value, json};

use panels::{Query, Variables};
use prometheus::{Prometheus, Sample};
use scenario::{fight, forged, lb_service, post, stale_ingress};
use support::{Class, FailurePolicy, SENTINEL, SENTINEL_2, TestEnv, create_ingress, eventually, stored, write_status};

const CANONICAL: &str = "203.0.113.10";
const SHADOW: &str = "192.0.2.40";
const STALE: &str = "198.51.100.1";
const POD: &str = "ingress-status-guard-0";
use support::guard::LEASE_FLAGS;
/// How long Prometheus may take to show what the guard counted: a few scrapes, under load.
const SCRAPED: Duration = Duration::from_secs(60);
/// The scenario's bodies stay far below it; the oversized one is above.
const MAX_BODY_BYTES: usize = 64 << 10;

/// What the scenario implies for one series of one query: its labels include `labels`, and
/// its value is `want` (for `rate` panels: the rate times the window, i.e. the increase).
struct Expect {
    panel: &'static str,
    ref_id: &'static str,
    labels: Vec<(&'static str, String)>,
    want: Want,
}

fn expect(panel: &'static str, ref_id: &'static str, labels: &[(&'static str, &str)], want: Want) -> Expect {
    Expect { panel, ref_id, labels: labels.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(), want }
}

#[derive(Clone, Copy, Debug)]
enum Want {
    Equals(f64),
    /// An increase over the window of at least this much (rate × window).
    Increase(f64),
    /// A latency: above 0, at most the largest finite bucket (0.25 s).
    Latency,
    /// A finite value of at least 0.
    NonNegative,
    /// No series with these labels.
    Absent,
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or_default()
}

fn dashboard() -> Value {
    serde_json::from_str(panels::DASHBOARD).expect("the dashboard is JSON")
}

/// The sum of every sample of `name` in a `/metrics` text.
fn guard_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn every_panel_shows_what_a_real_run_did() {
    let t = TestEnv::new("dash").await;
    let (edge, shadow, pending) = (format!("{}-edge", t.ns), format!("{}-shadow", t.ns), format!("{}-pending", t.ns));
    lb_service(&Api::<Service>::namespaced(t.admin.clone(), &t.ns), "edge", CANONICAL).await;
    // Before the guard runs: statuses it will heal (edge) or only measure (shadow, audit mode),
    // and one in a namespace the webhook is not registered for, which only the reconciler sees.
    for name in ["stale-0", "stale-1", "stale-2"] {
        stale_ingress(&t.ingresses, &t.rogue, name, &edge, STALE).await;
    }
    for name in ["shadow-0", "shadow-1"] {
        stale_ingress(&t.ingresses, &t.rogue, name, &shadow, STALE).await;
    }
    let outside = t.cluster.namespace(&t.admin, "dash-outside").await;
    let outside_rogue: Api<Ingress> = Api::namespaced(t.cluster.rogue().await, &outside);
    stale_ingress(&Api::namespaced(t.admin.clone(), &outside), &outside_rogue, "contested", &edge, STALE).await;

    let dir = t.cluster.scratch_dir("dashboard");
    let config = dir.join("policies.yaml");
    // The pending policy's Service is renamed at each reload: a real change of the policies,
    // and still unresolved.
    let policies = |missing: &str| {
        format!(
            "policies:\n\
             - {{name: edge, ingressClasses: [{edge}], publishService: {ns}/edge}}\n\
             - {{name: shadow, ingressClasses: [{shadow}], publishStatusAddress: {SHADOW:?}, mode: audit}}\n\
             - {{name: pending, ingressClasses: [{pending}], publishService: {ns}/{missing}}}\n",
            ns = t.ns
        )
    };
    replace_file(&config, &policies("not-there-yet"));
    let mut args = vec![
        format!("--config={}", config.display()),
        "--reconcile=true".into(),
        format!("--leader-election-namespace={}", t.ns),
        format!("--max-body-bytes={MAX_BODY_BYTES}"),
    ];
    args.extend(LEASE_FLAGS.iter().map(ToString::to_string));
    let webhook = t.start_webhook(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let prom = Prometheus::start(&dir, &webhook.admin_addr(), &[("namespace", &t.ns), ("pod", POD)]).await;
    let started = unix_now();

    // Phase 1: every kind of event once, so that every series exists.
    t.register(&webhook, FailurePolicy::Fail, Class::Field(&edge), &[CANONICAL]).await;
    for name in ["stale-0", "stale-1", "stale-2"] {
        eventually(&format!("{name} healed"), SCRAPED, || async {
            let got = stored(&t.ingresses, name).await;
            if got == [CANONICAL] { Ok(()) } else { Err(format!("{got:?}")) }
        })
        .await;
    }
    let audited = write_status(&t.rogue, "shadow-0", &[SENTINEL], false).await.expect("audited write");
    assert_eq!(support::addresses(&audited), [SENTINEL], "audit mode stores the write");
    create_ingress(&t.ingresses, "waiting", Class::Field(&pending)).await;
    write_status(&t.rogue, "waiting", &[SENTINEL], false).await.expect("a write with its source unresolved");
    direct_requests(&webhook, &t.ns, &edge, 1).await;
    fight(&webhook, &outside_rogue, "contested", CANONICAL, 1.0).await;
    await_counted(&webhook, FORGED, 1.0).await;
    replace_file(&config, "policies: [{name: broken");
    await_counted(&webhook, RELOAD_FAILED, 1.0).await;
    let mut missing = "not-there-either";
    replace_file(&config, &policies(missing));
    await_counted(&webhook, RELOADED, 1.0).await;
    let mut reloads = 1.0;

    // Every metric the dashboard names is one the guard exposes now that each kind of event
    // happened once; renaming one breaks this.
    let dash = dashboard();
    let queries = panels::queries(&dash).expect("the dashboard's queries");
    let exposed = panels::exposed_names(&webhook.metrics());
    let unknown = panels::unknown_metrics(&dash, &exposed).expect("the dashboard's metrics");
    assert!(unknown.is_empty(), "the dashboard names metrics the guard does not expose: {unknown:?}");
    let vars = |rate_interval| Variables { namespace: &t.ns, policy: ".*", rate_interval };
    eventually("every panel's query returns a series in Prometheus", SCRAPED, || async {
        let empty: Vec<String> = queries
            .iter()
            .filter(|q| run(&prom, q, &vars("1m")).map_or(true, |series| series.is_empty()))
            .map(|q| format!("{} ({})", q.panel, q.ref_id))
            .collect();
        if empty.is_empty() { Ok(()) } else { Err(format!("empty: {empty:?}")) }
    })
    .await;

    // Phase 2, with every series scraped: the increases the rate panels must show. One round
    // for the test; a snapshot for the picture in docs/deploy.md runs rounds for two minutes, so its
    // lines have a shape (the same acts, more of them).
    let snapshot_to = std::env::var_os("ISG_DASHBOARD_SNAPSHOT");
    let rounds = if snapshot_to.is_some() { 24 } else { 1 };
    let phase_two = Instant::now();
    let contested_query =
        queries.iter().find(|q| q.panel == "Fights (Ingresses backed off)" && q.ref_id == "B").unwrap();
    let contested_expr = panels::substitute(&contested_query.expr, &vars("1m")).unwrap();
    // The contested gauge's peak since phase 2 began, at a resolution finer than the scrapes,
    // so that no scraped sample falls between two steps.
    let contested_peak =
        |since: Instant| format!("max_over_time(({contested_expr})[{}s:100ms])", since.elapsed().as_secs() + 1);
    let mut fights = 1.0_f64;
    for round in 0..rounds {
        for i in 0..3 {
            let name = format!("rogue-{round}-{i}");
            create_ingress(&t.ingresses, &name, Class::Field(&edge)).await;
            let got = write_status(&t.rogue, &name, &[SENTINEL], false).await.expect("rogue write");
            assert_eq!(support::addresses(&got), [CANONICAL], "patched at admission");
        }
        for value in [SENTINEL, SENTINEL_2] {
            write_status(&t.rogue, "shadow-1", &[value], false).await.expect("audited write");
        }
        let other = if round % 2 == 0 { SENTINEL_2 } else { SENTINEL };
        write_status(&t.rogue, "waiting", &[other], false).await.expect("a write with its source unresolved");
        direct_requests(&webhook, &t.ns, &edge, round + 2).await;
        // Holds double with each fight (1 s, 2 s, 4 s, ...): only the first rounds fight.
        if round < 3 {
            fights = fights.max(2.0 + round as f64);
            fights = fight_until_scraped(&webhook, &prom, &outside_rogue, fights, &contested_peak(phase_two)).await;
            // The reconciler patches it again once the hold is over: a patch within phase 2.
            eventually("the contested Ingress patched after its hold", SCRAPED, || async {
                let got = support::addresses(&outside_rogue.get("contested").await.map_err(|e| e.to_string())?);
                if got == [CANONICAL] { Ok(()) } else { Err(format!("{got:?}")) }
            })
            .await;
        }
        // The pending policy moves back to its first Service at the end of phase 2 (and, in a
        // snapshot, every 8 rounds): its old Service's cache age must then go.
        if round % 8 == 7 || round + 1 == rounds && missing != "not-there-yet" {
            missing = if missing == "not-there-yet" { "not-there-either" } else { "not-there-yet" };
            replace_file(&config, &policies(missing));
            reloads += 1.0;
            await_counted(&webhook, RELOADED, reloads).await;
        }
        if rounds > 1 {
            tokio::time::sleep(Duration::from_secs(4)).await;
        }
    }
    await_counted(&webhook, FORGED, 1.0 + rounds as f64).await;

    // Prometheus has scraped what the guard counted, for every counter the dashboard shows.
    let counters: std::collections::BTreeSet<String> =
        queries.iter().flat_map(|q| panels::metric_names(&q.expr)).filter(|n| n.ends_with("_total")).collect();
    eventually("Prometheus has the guard's counts", SCRAPED, || async {
        let text = webhook.metrics();
        for name in &counters {
            let scraped = prom.query(&format!("sum({name})"))?.first().map_or(0.0, |s| s.value);
            if scraped != guard_sum(&text, name) {
                return Err(format!("{name}: {scraped} scraped, {} counted", guard_sum(&text, name)));
            }
        }
        Ok(())
    })
    .await;

    // A window from before phase 2 to now, as Grafana's $__rate_interval would be when zoomed out.
    let window = phase_two.elapsed().as_secs() + 5;
    let rate_interval = format!("{window}s");
    let vars = vars(&rate_interval);
    let results: Vec<(Query, Vec<Sample>)> = queries
        .iter()
        .map(|q| {
            let series = run(&prom, q, &vars).unwrap_or_else(|e| panic!("{} ({}): {e}", q.panel, q.ref_id));
            assert!(!series.is_empty(), "{} ({}) returns no series: {}", q.panel, q.ref_id, q.expr);
            (q.clone(), series)
        })
        .collect();
    let failures = check(&results, window as f64, &t.ns);
    assert!(failures.is_empty(), "the dashboard disagrees with the run:\n{}", failures.join("\n"));
    // A scrape caught a hold of phase 2 (fight_until_scraped): the panel showed 1 for edge.
    let peak = prom.query(&contested_peak(phase_two)).expect("the contested peak");
    assert_eq!(edge_value(&peak), Some(1.0), "contested Ingresses of edge during phase 2: {peak:?}");

    // The variables offer what the run has.
    for (name, label, selector) in panels::variables(&dash).expect("the variables") {
        let selector = selector.replace("$namespace", &t.ns);
        let values = prom.label_values(&label, &selector).unwrap_or_else(|e| panic!("variable {name}: {e}"));
        let want: &[&str] = if name == "policy" { &["edge", "pending", "shadow"] } else { &[&t.ns] };
        assert_eq!(values, want, "variable {name} ({selector})");
    }

    // A renamed metric is caught: by name, and by its empty panel.
    let renamed: Value = serde_json::from_str(
        &panels::DASHBOARD.replace("ingress_status_guard_drift_objects", "ingress_status_guard_drifting_objects"),
    )
    .unwrap();
    let unknown = panels::unknown_metrics(&renamed, &exposed).unwrap();
    assert_eq!(unknown, ["ingress_status_guard_drifting_objects"], "a renamed metric is caught");
    let drift = panels::queries(&renamed).unwrap().into_iter().find(|q| q.panel == "ADDRESS drift per policy").unwrap();
    assert!(run(&prom, &drift, &vars).unwrap().is_empty(), "and its panel is empty");

    if let Some(path) = snapshot_to {
        let snapshot = snapshot(&prom, &queries, &t.ns, started, unix_now());
        std::fs::write(&path, serde_json::to_string_pretty(&snapshot).unwrap()).expect("write the snapshot");
        eprintln!("dashboard snapshot written to {}", std::path::Path::new(&path).display());
    }
    drop(prom);
}

/// Straight to `/mutate`, as anyone who reaches the port can: a forged review about an Ingress
/// that does not exist (a finding, but no Event), a malformed one (an error) and one over
/// `--max-body-bytes` (refused from its declared length).
async fn direct_requests(webhook: &support::Webhook, ns: &str, class: &str, n: usize) {
    assert_eq!(post(webhook, &forged(ns, &format!("ghost-{n}"), class, n)).await, 200, "a forged review is answered");
    assert_eq!(post(webhook, b"{not json").await, 400, "a malformed review");
    let status = post(webhook, &vec![b' '; MAX_BODY_BYTES + 1]).await;
    assert!(status == 413 || status == 0, "an oversized review is refused (status {status})");
}

/// Fights over the contested Ingress until the guard has counted `fights`, then until a scrape
/// of Prometheus has caught the hold that follows (`peak`, which must reach 1 for edge). A hold
/// is seconds long and a loaded machine can miss a scrape or two, so a hold no scrape caught
/// is fought again, each hold twice the last. Returns the fights counted.
async fn fight_until_scraped(
    webhook: &support::Webhook,
    prom: &Prometheus,
    rogue: &kube::Api<Ingress>,
    mut fights: f64,
    peak: &str,
) -> f64 {
    const CONTESTED: &str = "ingress_status_guard_reconcile_contested_ingresses{policy=\"edge\"}";
    let scraped = || prom.query(peak).ok().and_then(|p| edge_value(&p)) == Some(1.0);
    for _ in 0..5 {
        fight(webhook, rogue, "contested", CANONICAL, fights).await;
        while webhook.metric(CONTESTED) >= 1.0 {
            if scraped() {
                return fights;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // The last scrapes of the hold may not be queryable yet.
        tokio::time::sleep(Duration::from_secs(2)).await;
        if scraped() {
            return fights;
        }
        fights += 1.0;
    }
    panic!("no scrape caught a hold of the contested Ingress in 5 fights ({peak})");
}

fn edge_value(samples: &[Sample]) -> Option<f64> {
    samples.iter().find(|s| s.labels.get("policy").map(String::as_str) == Some("edge")).map(|s| s.value)
}

/// Forged reviews counted as Events skipped (findings are reported off the request path).
const FORGED: &str = "ingress_status_guard_events_skipped_total{reason=\"unknown_object\"}";
const RELOADED: &str = "ingress_status_guard_config_reloads_total{result=\"success\"}";
const RELOAD_FAILED: &str = "ingress_status_guard_config_reloads_total{result=\"failed\"}";

/// Waits until the guard's sample `sample` is at least `n`.
async fn await_counted(webhook: &support::Webhook, sample: &str, n: f64) {
    eventually(&format!("{sample} reaches {n} ({})", webhook.log_path().display()), SCRAPED, || async {
        match webhook.metric(sample) {
            counted if counted >= n => Ok(()),
            counted => Err(format!("{counted}")),
        }
    })
    .await;
}

/// Replaces `path` by a rename, as the kubelet swaps a ConfigMap volume: the watcher never
/// reads half a file.
fn replace_file(path: &std::path::Path, text: &str) {
    let next = path.with_extension("next");
    std::fs::write(&next, text).expect("write the policy file");
    std::fs::rename(&next, path).expect("replace the policy file");
}

fn run(prom: &Prometheus, query: &Query, vars: &Variables) -> Result<Vec<Sample>, String> {
    prom.query(&panels::substitute(&query.expr, vars)?).map_err(|e| format!("{e}\n{}", prom.log_tail()))
}

/// What the scenario implies, checked against the results; every expectation must name a
/// query of the dashboard (a renamed panel fails here rather than going unchecked).
fn check(results: &[(Query, Vec<Sample>)], window: f64, ns: &str) -> Vec<String> {
    let (service, pending_now, pending_before) =
        (format!("{ns}/edge"), format!("{ns}/not-there-yet"), format!("{ns}/not-there-either"));
    let expectations = [
        expect("ADDRESS drift per policy", "A", &[("policy", "shadow"), ("kind", "ingress")], Want::Equals(2.0)),
        expect("ADDRESS drift per policy", "A", &[("policy", "edge"), ("kind", "ingress")], Want::NonNegative),
        expect(
            "Rogue writes by writer and action",
            "A",
            &[("policy", "edge"), ("writer", "rogue-controller"), ("action", "patched")],
            Want::Increase(3.0),
        ),
        expect(
            "Rogue writes by writer and action",
            "A",
            &[("policy", "shadow"), ("writer", "rogue-controller"), ("action", "audited")],
            Want::Increase(2.0),
        ),
        expect("Unresolved sources", "A", &[("policy", "pending")], Want::Increase(1.0)),
        expect("Reconciler patches by result", "A", &[("policy", "edge"), ("result", "patched")], Want::Increase(1.0)),
        expect("Fights (Ingresses backed off)", "A", &[("policy", "edge")], Want::Increase(1.0)),
        // The contested Ingress was patched after its last hold: none is left alone at the end.
        expect("Fights (Ingresses backed off)", "B", &[("policy", "edge")], Want::Equals(0.0)),
        expect("Leader and readiness", "A", &[("pod", POD)], Want::Equals(1.0)),
        expect("Leader and readiness", "B", &[("pod", POD)], Want::Equals(1.0)),
        expect("Admission latency", "A", &[], Want::Latency),
        expect("Admission latency", "B", &[], Want::Latency),
        expect("Admission latency", "C", &[], Want::Latency),
        expect("Admission reviews by result", "A", &[("result", "patched")], Want::Increase(3.0)),
        expect("Admission reviews by result", "A", &[("result", "audited")], Want::Increase(2.0)),
        expect("Errors and refusals", "A", &[("result", "error")], Want::Increase(1.0)),
        expect("Errors and refusals", "B", &[("reason", "body_too_large")], Want::Increase(1.0)),
        expect("Source cache age", "A", &[("service", &service)], Want::NonNegative),
        expect("Source cache age", "A", &[("service", &pending_now)], Want::NonNegative),
        expect("Source cache age", "A", &[("service", &pending_before)], Want::Absent),
        expect("Events about rogue writes", "A", &[("result", "published")], Want::Increase(1.0)),
        expect("Findings without an Event", "A", &[("reason", "unknown_object")], Want::Increase(1.0)),
        expect("Findings without an Event", "B", &[], Want::Equals(0.0)),
        expect("Versions running", "A", &[("version", env!("CARGO_PKG_VERSION"))], Want::Equals(1.0)),
        expect("Policy reloads and watch errors", "A", &[("result", "success")], Want::Increase(1.0)),
        expect("Policy reloads and watch errors", "A", &[("result", "failed")], Want::NonNegative),
        expect("Policy reloads and watch errors", "B", &[("watch", "ingresses")], Want::Equals(0.0)),
        expect("Policy reloads and watch errors", "B", &[("watch", "gateways")], Want::Equals(0.0)),
    ];
    let mut failures = Vec::new();
    for e in &expectations {
        let Some((query, series)) = results.iter().find(|(q, _)| q.panel == e.panel && q.ref_id == e.ref_id) else {
            failures.push(format!("no query {} of panel {:?} in the dashboard", e.ref_id, e.panel));
            continue;
        };
        let matching: Vec<&Sample> =
            series.iter().filter(|s| e.labels.iter().all(|(k, v)| s.labels.get(*k) == Some(v))).collect();
        if matches!(e.want, Want::Absent) {
            if !matching.is_empty() {
                failures.push(format!("{} ({}): a series with {:?}: {matching:?}", e.panel, e.ref_id, e.labels));
            }
            continue;
        }
        if matching.is_empty() {
            failures.push(format!("{} ({}): no series with {:?} in {series:?}", e.panel, e.ref_id, e.labels));
            continue;
        }
        for s in matching {
            let ok = match e.want {
                Want::Equals(want) => s.value == want,
                // rate() is the extrapolated increase divided by the window, and the
                // extrapolation only ever adds: at least the increments within the window.
                Want::Increase(want) => s.value * window >= want * 0.999,
                Want::Latency => s.value > 0.0 && s.value <= 0.25,
                Want::NonNegative => s.value.is_finite() && s.value >= 0.0,
                Want::Absent => false, // handled above
            };
            if !ok {
                failures.push(format!(
                    "{} ({}): {:?} is {} (×{window} s window: {}), want {:?}\n  {}",
                    e.panel,
                    e.ref_id,
                    s.labels,
                    s.value,
                    s.value * window,
                    e.want,
                    query.expr
                ));
            }
        }
    }
    failures
}

/// Every query's range over the run at a 1 s step, for scripts/dashboard-png.py. Rates are over
/// 15 s: Grafana's `$__rate_interval` for this range (4 scrapes, 4 s) draws every single write
/// as a spike.
fn snapshot(prom: &Prometheus, queries: &[Query], namespace: &str, start: f64, end: f64) -> Value {
    const RATE_INTERVAL: &str = "15s";
    let vars = Variables { namespace, policy: ".*", rate_interval: RATE_INTERVAL };
    let mut panels: Vec<(String, String, Vec<Value>)> = Vec::new();
    for q in queries {
        let expr = panels::substitute(&q.expr, &vars).expect("substituted");
        let series = prom.query_range(&expr, start, end, 1.0).unwrap_or_else(|e| panic!("{}: {e}", q.panel));
        let series: Vec<Value> = series
            .into_iter()
            .map(|(labels, points)| {
                let labels: BTreeMap<String, String> = labels;
                let points: Vec<[f64; 2]> =
                    points.into_iter().filter(|(_, v)| v.is_finite()).map(|(t, v)| [t - start, v]).collect();
                json!({"labels": labels, "points": points})
            })
            .collect();
        let query = json!({"refId": q.ref_id, "legend": q.legend, "expr": expr, "series": series});
        match panels.iter_mut().find(|(title, _, _)| *title == q.panel) {
            Some(panel) => panel.2.push(query),
            None => panels.push((q.panel.clone(), q.unit.clone(), vec![query])),
        }
    }
    json!({
        "made_by": "cargo test --test dashboard (tests/cluster/dashboard.rs) with ISG_DASHBOARD_SNAPSHOT",
        "kubernetes": std::env::var("ISG_K8S_VERSION").unwrap_or_else(|_| "v1.37".into()),
        "seconds": end - start,
        "rate_interval": RATE_INTERVAL,
        "panels": panels.into_iter().map(|(title, unit, queries)| json!({"title": title, "unit": unit, "queries": queries})).collect::<Vec<_>>(),
    })
}
