//! The Prometheus alerts (charts/ingress-status-guard/files/prometheus-rules.yaml, and the same
//! groups in manifests/monitoring/): `promtool check rules` accepts them, and
//! `promtool test rules` runs tests/alerts/alerts_test.yaml, in which each alert has input
//! series that fire it and series that must not. promtool is `$PROMTOOL`, else the one
//! tests/prometheus/build.sh builds from its pinned Go module (once, cached).

use crate::prometheus_build;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize as _;
use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn chart_rules() -> PathBuf {
    root().join("charts/ingress-status-guard/files/prometheus-rules.yaml")
}

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    Value::deserialize(serde_norway::Deserializer::from_str(&text))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs `promtool <args>` in `dir`; returns (success, stdout + stderr).
fn promtool(dir: &Path, args: &[&str]) -> (bool, String) {
    let promtool = prometheus_build::promtool();
    let out = Command::new(&promtool)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", promtool.display()));
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// A directory holding the test file and `rules.yaml` = `rules`.
fn workdir(name: &str, rules: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("alerts").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("rules.yaml"), rules).unwrap();
    std::fs::copy(root().join("tests/alerts/alerts_test.yaml"), dir.join("alerts_test.yaml")).unwrap();
    dir
}

#[test]
fn the_alerts_are_valid_and_fire_exactly_when_their_tests_say() {
    let rules = std::fs::read_to_string(chart_rules()).unwrap();
    let dir = workdir("as-shipped", &rules);
    let (ok, out) = promtool(&dir, &["check", "rules", "rules.yaml"]);
    assert!(ok, "promtool check rules:\n{out}");
    let (ok, out) = promtool(&dir, &["test", "rules", "alerts_test.yaml"]);
    assert!(ok, "promtool test rules:\n{out}");
    assert!(out.contains("SUCCESS"), "{out}");

    // Every alert has a test, and a runbook paragraph in docs/alerts.md.
    let tests = std::fs::read_to_string(root().join("tests/alerts/alerts_test.yaml")).unwrap();
    let runbooks = std::fs::read_to_string(root().join("docs/alerts.md")).unwrap();
    let groups = yaml(&chart_rules());
    let alerts: Vec<&str> =
        groups["groups"][0]["rules"].as_array().unwrap().iter().map(|r| r["alert"].as_str().unwrap()).collect();
    assert_eq!(alerts.len(), 10, "{alerts:?}");
    for alert in alerts {
        assert!(tests.contains(&format!("alertname: {alert}")), "no promtool test for {alert}");
        assert!(runbooks.contains(&format!("## {alert}")), "no runbook for {alert} in docs/alerts.md");
    }

    // The tests have teeth: with the sustained-writes alert waiting 45 minutes, its test fails.
    let slower = rules.replacen("for: 15m", "for: 45m", 1);
    assert_ne!(slower, rules);
    let (ok, out) = promtool(&workdir("slower", &slower), &["test", "rules", "alerts_test.yaml"]);
    assert!(!ok && out.contains("IngressStatusGuardRogueWritesSustained"), "{out}");
}

#[test]
fn the_kustomize_prometheus_rule_has_the_charts_groups() {
    let rule = yaml(&root().join("manifests/monitoring/prometheusrule.yaml"));
    assert_eq!(rule["kind"], "PrometheusRule");
    assert_eq!(rule["spec"]["groups"], yaml(&chart_rules())["groups"]);
}
