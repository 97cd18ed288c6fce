//! The `prometheus` and `promtool` binaries the alert and dashboard tests run: `$PROMETHEUS` or
//! `$PROMTOOL` when set, else the ones `tests/prometheus/build.sh` builds from the pinned Go
//! module (once, cached, under a flock), so `cargo test` needs no Prometheus installed.
//! Included with `#[path]` by `tests/cluster/main.rs` (for `alerts` and `dashboard`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// `prometheus` for the dashboard test.
#[allow(dead_code)] // the alert tests run only `promtool`
pub(crate) fn prometheus() -> PathBuf {
    binary("prometheus", "PROMETHEUS")
}

/// `promtool` for the alert tests.
#[allow(dead_code)] // the dashboard test runs only `prometheus`
pub(crate) fn promtool() -> PathBuf {
    binary("promtool", "PROMTOOL")
}

fn binary(name: &str, env: &str) -> PathBuf {
    match std::env::var_os(env) {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => built_dir().join(name),
    }
}

/// Runs the build script once per test binary; its last stdout line is the directory.
fn built_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/prometheus/build.sh");
        let out = Command::new("bash")
            .arg(&script)
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let dir = stdout.lines().last().unwrap_or("").trim();
        assert!(
            out.status.success() && !dir.is_empty(),
            "{} failed ({}; its log is above): it needs go (the version of tests/prometheus/go.mod) \
             and the Go module proxy the first time; or set PROMETHEUS and PROMTOOL to installed binaries",
            script.display(),
            out.status
        );
        PathBuf::from(dir)
    })
}
