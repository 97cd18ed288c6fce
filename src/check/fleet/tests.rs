use serde_json::{Value, json};

use super::{Fleet, Outcome};
use crate::{
    address::parse_static_list,
    check::{
        Kind,
        report::{ByKind, Entries, Report, Row, State, Summary},
    },
};

fn row(ns: &str, name: &str, stored: &str, state: State) -> Row {
    let canonical = parse_static_list("203.0.113.10").unwrap();
    Row {
        kind: Kind::Ingress,
        namespace: ns.into(),
        name: name.into(),
        class: Some("nginx".into()),
        policy: "default".into(),
        mode: "enforce".into(),
        source: "service edge/lb".into(),
        stored: Entries::of(&if stored.is_empty() { Vec::new() } else { parse_static_list(stored).unwrap() }),
        canonical: (state != State::Unresolved).then(|| Entries::of(&canonical)),
        state,
        reason: (state == State::Unresolved).then(|| "Service edge/lb not found".into()),
    }
}

fn report(rows: Vec<Row>, not_governed: usize) -> Report {
    let count = |s: State| rows.iter().filter(|r| r.state == s).count();
    let summary = Summary {
        governed: rows.len(),
        ok: count(State::Ok),
        drift: count(State::Drift),
        unresolved: count(State::Unresolved),
        not_governed,
    };
    Report { ingresses: rows, summary, by_kind: ByKind([Some(summary), None, None]), ..Report::default() }
}

fn ok(cluster: &str, report: Report) -> Outcome {
    Outcome { cluster: cluster.into(), result: Ok(report) }
}

fn failed(cluster: &str, error: &str) -> Outcome {
    Outcome { cluster: cluster.into(), result: Err(error.into()) }
}

/// Two clusters read, one not: every row carries its cluster, the error row comes last, and
/// each cluster has its summary line, in the order the contexts were given.
fn fleet() -> Fleet {
    Fleet(vec![
        ok("prod-eu", report(vec![row("web", "shop", "203.0.113.10", State::Ok)], 2)),
        failed("prod-us", "cannot list Ingresses: connection refused"),
        ok(
            "staging",
            report(vec![row("web", "shop", "198.51.100.1", State::Drift), row("api", "v1", "", State::Unresolved)], 0),
        ),
    ])
}

#[test]
fn the_table_has_a_cluster_column_error_rows_and_a_summary_per_cluster() {
    let want = "\
CLUSTER  INGRESS   POLICY   SOURCE           STORED        CANONICAL     STATE
prod-eu  web/shop  default  service edge/lb  203.0.113.10  203.0.113.10  OK
staging  web/shop  default  service edge/lb  198.51.100.1  203.0.113.10  DRIFT
staging  api/v1    default  service edge/lb  <none>        ?             UNRESOLVED (Service edge/lb not found)
prod-us  -         -        -                -             -             ERROR (cannot list Ingresses: connection refused)
cluster prod-eu: governed Ingresses: 1 (1 OK, 0 DRIFT, 0 UNRESOLVED); not governed: 2
cluster prod-us: not read (ERROR row above)
cluster staging: governed Ingresses: 2 (0 OK, 1 DRIFT, 1 UNRESOLVED); not governed: 0
";
    assert_eq!(fleet().table(), want);
}

#[test]
fn clusters_without_governed_ingresses_print_only_their_summaries() {
    let fleet = Fleet(vec![ok("a", report(Vec::new(), 3)), ok("b", report(Vec::new(), 0))]);
    assert_eq!(
        fleet.table(),
        "cluster a: governed Ingresses: 0 (0 OK, 0 DRIFT, 0 UNRESOLVED); not governed: 3\n\
         cluster b: governed Ingresses: 0 (0 OK, 0 DRIFT, 0 UNRESOLVED); not governed: 0\n"
    );
    // Every cluster failing still shows each error, as rows and summaries.
    let fleet = Fleet(vec![failed("a", "timeout"), failed("b", "forbidden")]);
    let table = fleet.table();
    assert!(table.starts_with("CLUSTER  INGRESS  POLICY  SOURCE  STORED  CANONICAL  STATE\na        -"), "{table}");
    assert!(table.contains("\nb        -        -       -       -       -          ERROR (forbidden)\n"), "{table}");
    assert!(
        table.ends_with("cluster a: not read (ERROR row above)\ncluster b: not read (ERROR row above)\n"),
        "{table}"
    );
}

#[test]
fn exit_codes_count_the_clusters_that_were_read_and_fail_only_when_none_was() {
    assert_eq!(fleet().exit_code().ok(), Some(1), "drift in one cluster");
    let clean = report(vec![row("web", "shop", "203.0.113.10", State::Ok)], 0);
    assert_eq!(Fleet(vec![ok("a", clean.clone()), failed("b", "down")]).exit_code().ok(), Some(0));
    assert_eq!(Fleet(vec![ok("a", clean.clone()), ok("b", clean)]).exit_code().ok(), Some(0));
    let err = Fleet(vec![failed("a", "down"), failed("b", "down")]).exit_code().unwrap_err();
    assert!(err.to_string().contains("no cluster could be read"), "{err}");
}

#[test]
fn json_rows_carry_their_cluster_and_each_cluster_its_summary_or_error() {
    let doc: Value = serde_json::from_str(&fleet().json()).unwrap();
    let rows = doc["ingresses"].as_array().unwrap();
    let clusters: Vec<&str> = rows.iter().map(|r| r["cluster"].as_str().unwrap()).collect();
    assert_eq!(clusters, ["prod-eu", "staging", "staging"]);
    // The single-cluster row, unchanged, beside its cluster.
    assert_eq!(rows[1]["namespace"], "web");
    assert_eq!(rows[1]["state"], "DRIFT");
    assert_eq!(rows[1]["stored"], json!([{"ip": "198.51.100.1"}]));
    assert_eq!(rows[2]["canonical"], Value::Null);
    assert_eq!(
        doc["clusters"],
        json!([
            {"cluster": "prod-eu", "summary": {"governed": 1, "ok": 1, "drift": 0, "unresolved": 0, "notGoverned": 2},
             "byKind": {"ingress": {"governed": 1, "ok": 1, "drift": 0, "unresolved": 0, "notGoverned": 2}}},
            {"cluster": "prod-us", "error": "cannot list Ingresses: connection refused"},
            {"cluster": "staging", "summary": {"governed": 2, "ok": 0, "drift": 1, "unresolved": 1, "notGoverned": 0},
             "byKind": {"ingress": {"governed": 2, "ok": 0, "drift": 1, "unresolved": 1, "notGoverned": 0}}},
        ])
    );
}

/// With Gateway policies the fleet table has the KIND column too, and each cluster a summary
/// line per kind.
#[test]
fn a_fleet_with_gateways_has_the_kind_column_and_a_summary_line_per_kind() {
    let mut with_gateways = report(vec![row("web", "api", "198.51.100.1", State::Drift)], 0);
    with_gateways.by_kind.0[crate::kind::Kind::Gateway.index()] = Some(Summary::default());
    let fleet = Fleet(vec![ok("a", with_gateways), failed("b", "down")]);
    let table = fleet.table();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>()[..3], ["CLUSTER", "KIND", "NAME"], "{table}");
    assert!(lines[1].starts_with("a        ingress  web/api"), "{table}");
    assert_eq!(
        lines[2].split_whitespace().filter(|c| *c == "-").count(),
        6,
        "an error row fills every column: {table}"
    );
    assert!(table.contains("cluster a: governed Ingresses: 1 (0 OK, 1 DRIFT, 0 UNRESOLVED); not governed: 0\n"));
    assert!(table.contains("cluster a: governed Gateways: 0 (0 OK, 0 DRIFT, 0 UNRESOLVED); not governed: 0\n"));
}
