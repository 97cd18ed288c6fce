//! The dashboard as Grafana reads it: every panel's queries with the template variables
//! substituted as Grafana would, the metric names they reference, and the `label_values`
//! queries of its variables.

use std::collections::BTreeSet;

use serde_json::Value;

/// The chart's dashboard file, the one source of truth (manifests/monitoring holds a copy that
/// tests/cluster/chart.rs keeps identical).
pub(crate) const DASHBOARD: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/charts/ingress-status-guard/dashboards/ingress-status-guard.json"
));

/// Every metric the guard exports starts with this.
pub(crate) const PREFIX: &str = "ingress_status_guard_";

/// One query of one panel.
#[derive(Debug, Clone)]
pub(crate) struct Query {
    pub panel: String,
    pub ref_id: String,
    pub legend: String,
    pub unit: String,
    /// As written, with the template variables in it.
    pub expr: String,
}

/// What Grafana substitutes: a namespace, the policy variable's regex (`.*` for "All") and
/// `$__rate_interval`.
pub(crate) struct Variables<'a> {
    pub namespace: &'a str,
    pub policy: &'a str,
    pub rate_interval: &'a str,
}

/// The panels' queries, in dashboard order. Every panel (but rows) must query the
/// `${datasource}` variable and have at least one non-empty query.
pub(crate) fn queries(dashboard: &Value) -> Result<Vec<Query>, String> {
    let mut out = Vec::new();
    let mut panels: Vec<&Value> = Vec::new();
    for panel in dashboard["panels"].as_array().ok_or("no panels")? {
        panels.push(panel);
        panels.extend(panel["panels"].as_array().into_iter().flatten());
    }
    for panel in panels.into_iter().filter(|p| p["type"] != "row") {
        let title = panel["title"].as_str().ok_or("a panel without a title")?;
        if panel["datasource"]["uid"] != "${datasource}" {
            return Err(format!("panel {title:?}: datasource {} is not ${{datasource}}", panel["datasource"]));
        }
        let targets = panel["targets"].as_array().filter(|t| !t.is_empty());
        for target in targets.ok_or_else(|| format!("panel {title:?} has no query"))? {
            let expr = target["expr"].as_str().filter(|e| !e.trim().is_empty());
            out.push(Query {
                panel: title.to_owned(),
                ref_id: target["refId"].as_str().unwrap_or_default().to_owned(),
                legend: target["legendFormat"].as_str().unwrap_or_default().to_owned(),
                unit: panel["fieldConfig"]["defaults"]["unit"].as_str().unwrap_or("short").to_owned(),
                expr: expr.ok_or_else(|| format!("panel {title:?}: an empty query"))?.to_owned(),
            });
        }
    }
    Ok(out)
}

/// `expr` with the variables substituted; an error for any variable left over (PromQL itself
/// has no `$`).
pub(crate) fn substitute(expr: &str, vars: &Variables) -> Result<String, String> {
    let text = expr
        .replace("$__rate_interval", vars.rate_interval)
        .replace("${namespace}", vars.namespace)
        .replace("$namespace", vars.namespace)
        .replace("${policy}", vars.policy)
        .replace("$policy", vars.policy);
    match text.find('$') {
        Some(at) => Err(format!("{expr}: an unknown variable at {:?}", &text[at..])),
        None => Ok(text),
    }
}

/// The guard's metric names that `expr` references (identifiers starting with [`PREFIX`]).
pub(crate) fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = expr;
    while let Some(at) = rest.find(PREFIX) {
        let tail = &rest[at..];
        let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
        // A label value or a longer identifier that merely contains the prefix does not count.
        let before = rest[..at].chars().last();
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '"') {
            names.insert(tail[..end].to_owned());
        }
        rest = &tail[end..];
    }
    names
}

/// The sample names of a `/metrics` text (`name{labels} value` and `name value` lines).
pub(crate) fn exposed_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

/// Metric names the dashboard (its panels and variables) references that `exposed` lacks.
pub(crate) fn unknown_metrics(dashboard: &Value, exposed: &BTreeSet<String>) -> Result<Vec<String>, String> {
    let mut referenced = BTreeSet::new();
    for query in queries(dashboard)? {
        referenced.extend(metric_names(&query.expr));
    }
    for (_, _, selector) in variables(dashboard)? {
        referenced.extend(metric_names(&selector));
    }
    if referenced.is_empty() {
        return Err("the dashboard references no metric of the guard".into());
    }
    Ok(referenced.into_iter().filter(|name| !exposed.contains(name)).collect())
}

/// The query variables as (name, label, series selector), from `label_values(SELECTOR,
/// LABEL)`; the `datasource` variable must exist and be of Prometheus.
pub(crate) fn variables(dashboard: &Value) -> Result<Vec<(String, String, String)>, String> {
    let list = dashboard["templating"]["list"].as_array().ok_or("no templating list")?;
    let datasource = list.iter().find(|v| v["name"] == "datasource").ok_or("no datasource variable")?;
    if datasource["type"] != "datasource" || datasource["query"] != "prometheus" {
        return Err(format!("the datasource variable is not a Prometheus one: {datasource}"));
    }
    let mut out = Vec::new();
    for var in list.iter().filter(|v| v["type"] == "query") {
        let name = var["name"].as_str().ok_or("a variable without a name")?;
        let query = var["query"]["query"].as_str().or(var["query"].as_str()).unwrap_or_default();
        let inner = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            .ok_or_else(|| format!("variable {name}: {query:?} is not label_values(SELECTOR, LABEL)"))?;
        let (selector, label) =
            inner.rsplit_once(',').ok_or_else(|| format!("variable {name}: no label in {query:?}"))?;
        out.push((name.to_owned(), label.trim().to_owned(), selector.trim().to_owned()));
    }
    Ok(out)
}

#[test]
fn metric_names_are_found_where_they_are_metrics() {
    let expr = r#"sum by (le) (rate(ingress_status_guard_a_bucket{x="ingress_status_guard_no"}[5m])) / ingress_status_guard_b"#;
    let names: Vec<String> = metric_names(expr).into_iter().collect();
    assert_eq!(names, ["ingress_status_guard_a_bucket", "ingress_status_guard_b"]);
    let text = "# TYPE a counter\na_total{x=\"1\"} 2\nb 1\n# EOF\n";
    assert_eq!(exposed_names(text).into_iter().collect::<Vec<_>>(), ["a_total", "b"]);
}

/// What Grafana needs beyond valid queries: unique panel ids, a title and a description on each
/// panel (operators read them as tooltips), unique query ids per panel, and panels on the
/// 24-column grid that do not overlap.
#[test]
fn the_dashboard_is_laid_out_for_grafana() {
    let dashboard: Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    assert!(dashboard["uid"].as_str().is_some_and(|u| !u.is_empty() && u.len() <= 40), "a uid Grafana accepts");
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut ids = BTreeSet::new();
    let mut cells: Vec<(String, [i64; 4])> = Vec::new();
    for panel in panels {
        let title = panel["title"].as_str().unwrap_or_default().to_owned();
        assert!(!title.is_empty(), "a panel without a title: {panel}");
        assert!(ids.insert(panel["id"].as_i64().expect("a numeric id")), "panel {title:?}: a duplicate id");
        let grid = &panel["gridPos"];
        let [x, y, w, h] = ["x", "y", "w", "h"].map(|k| grid[k].as_i64().unwrap_or(-1));
        assert!(x >= 0 && y >= 0 && w > 0 && h > 0 && x + w <= 24, "panel {title:?}: gridPos {grid}");
        for (other, [ox, oy, ow, oh]) in &cells {
            let apart = x + w <= *ox || *ox + ow <= x || y + h <= *oy || *oy + oh <= y;
            assert!(apart, "panels {title:?} and {other:?} overlap");
        }
        cells.push((title.clone(), [x, y, w, h]));
        if panel["type"] == "row" {
            continue;
        }
        assert!(panel["description"].as_str().is_some_and(|d| d.len() > 20), "panel {title:?}: no description");
        let refs: Vec<&str> =
            panel["targets"].as_array().into_iter().flatten().filter_map(|t| t["refId"].as_str()).collect();
        let unique: BTreeSet<&str> = refs.iter().copied().collect();
        assert_eq!(unique.len(), refs.len(), "panel {title:?}: refIds {refs:?}");
    }
    assert!(queries(&dashboard).expect("queries").len() >= 13, "every panel of the issue has its query");
}
