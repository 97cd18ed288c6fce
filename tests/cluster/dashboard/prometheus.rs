//! A real Prometheus (`$PROMETHEUS`, else the one tests/prometheus/build.sh builds from its
//! pinned Go module) on loopback, with its
//! own storage directory, scraping one target every second, and its HTTP API (`/api/v1/*`) read
//! over plain HTTP/1.0 (one request per connection, no chunked bodies to decode).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::cluster::free_port;
use crate::support::process::{self, Proc};

/// Longest answer read from the API: the dashboard's queries return a few series each.
const MAX_RESPONSE_BYTES: u64 = 16 << 20;

/// One series of an instant query: its labels and value.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

pub(crate) struct Prometheus {
    proc: Proc,
    port: u16,
}

impl Prometheus {
    /// Starts Prometheus scraping `/metrics` of `target` (`host:port`), adding `labels` to every
    /// series as prometheus-operator's ServiceMonitor adds `namespace` and `pod`; waits until
    /// `/-/ready` answers 200.
    pub(crate) async fn start(dir: &Path, target: &str, labels: &[(&str, &str)]) -> Prometheus {
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}: {v:?}")).collect();
        // A scrape every second, so a run of a minute has many samples.
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: ingress-status-guard\n    static_configs:\n\
             \x20     - targets: [{target:?}]\n        labels: {{{}}}\n",
            labels.join(", ")
        );
        let config_path = dir.join("prometheus.yml");
        std::fs::write(&config_path, config).expect("write prometheus.yml");
        let binary = crate::prometheus_build::prometheus();
        for attempt in 1..=3 {
            let port = free_port();
            let mut command = Command::new(&binary);
            command
                .arg(format!("--config.file={}", config_path.display()))
                .arg(format!("--storage.tsdb.path={}", dir.join(format!("data-{attempt}")).display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--storage.tsdb.retention.time=1h")
                .arg("--log.level=warn");
            let log = dir.join(format!("prometheus-{attempt}.log"));
            let proc =
                process::spawn("prometheus", command, &log).unwrap_or_else(|e| panic!("run {}: {e}", binary.display()));
            let mut prometheus = Prometheus { proc, port };
            let deadline = Instant::now() + Duration::from_secs(60);
            while prometheus.proc.exited().is_none() && Instant::now() < deadline {
                if get(port, "/-/ready").is_ok_and(|(status, _)| status == 200) {
                    return prometheus;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            let tail = prometheus.proc.log_tail(20);
            if !tail.contains("address already in use") {
                panic!("Prometheus did not get ready:\n{tail}");
            }
        }
        panic!("Prometheus found no free port in 3 attempts");
    }

    pub(crate) fn log_tail(&self) -> String {
        self.proc.log_tail(20)
    }

    /// `/api/v1/query`: the instant vector `expr` evaluates to now, or the API's error.
    pub(crate) fn query(&self, expr: &str) -> Result<Vec<Sample>, String> {
        let data = self.api(&format!("/api/v1/query?query={}", encode(expr)))?;
        if data["resultType"] != "vector" {
            return Err(format!("{expr}: a {} result, not a vector", data["resultType"]));
        }
        let result = data["result"].as_array().ok_or("no result array")?;
        result.iter().map(|s| Ok(Sample { labels: labels(&s["metric"]), value: number(&s["value"][1])? })).collect()
    }

    /// `/api/v1/query_range` from `start` to `end` (Unix seconds) every `step` seconds: each
    /// series' labels and its (time, value) points.
    pub(crate) fn query_range(
        &self,
        expr: &str,
        start: f64,
        end: f64,
        step: f64,
    ) -> Result<Vec<(BTreeMap<String, String>, Vec<(f64, f64)>)>, String> {
        let path = format!("/api/v1/query_range?query={}&start={start:.3}&end={end:.3}&step={step}", encode(expr));
        let data = self.api(&path)?;
        let result = data["result"].as_array().ok_or("no result array")?;
        result
            .iter()
            .map(|s| {
                let points = s["values"].as_array().ok_or("no values")?;
                let points = points
                    .iter()
                    .map(|p| Ok((p[0].as_f64().ok_or("no time")?, number(&p[1])?)))
                    .collect::<Result<Vec<_>, String>>()?;
                Ok((labels(&s["metric"]), points))
            })
            .collect()
    }

    /// `/api/v1/label/<label>/values?match[]=<selector>`: what a Grafana `label_values`
    /// variable offers.
    pub(crate) fn label_values(&self, label: &str, selector: &str) -> Result<Vec<String>, String> {
        let data = self.api(&format!("/api/v1/label/{label}/values?match[]={}", encode(selector)))?;
        let values = data.as_array().ok_or("no values array")?;
        Ok(values.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
    }

    /// Calls the API; its `data`, or the error it answered.
    fn api(&self, path: &str) -> Result<Value, String> {
        let (status, body) = get(self.port, path)?;
        let answer: Value =
            serde_json::from_str(&body).map_err(|e| format!("HTTP {status}, not JSON ({e}): {body}"))?;
        if answer["status"] != "success" {
            return Err(format!("HTTP {status}: {} {}", answer["errorType"], answer["error"]));
        }
        Ok(answer["data"].clone())
    }
}

fn labels(metric: &Value) -> BTreeMap<String, String> {
    metric
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect())
        .unwrap_or_default()
}

/// A sample value: Prometheus sends them as strings ("1", "NaN", "+Inf").
fn number(value: &Value) -> Result<f64, String> {
    let text = value.as_str().ok_or_else(|| format!("value {value} is not a string"))?;
    text.parse().map_err(|e| format!("value {text:?}: {e}"))
}

/// Percent-encodes a query parameter: everything but RFC 3986's unreserved characters.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// One HTTP/1.0 GET on 127.0.0.1:`port`: the status code and body (at most
/// `MAX_RESPONSE_BYTES`, within 10 s).
fn get(port: u16, path: &str) -> Result<(u16, String), String> {
    let timeout = Duration::from_secs(10);
    let addr = ([127, 0, 0, 1], port).into();
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect: {e}"))?;
    stream.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n").map_err(|e| format!("send: {e}"))?;
    let mut text = String::new();
    stream.take(MAX_RESPONSE_BYTES).read_to_string(&mut text).map_err(|e| format!("read: {e}"))?;
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or("no status line")?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Ok((status, body))
}
