//! The kubectl plugin through a real `kubectl` (`$KUBECTL` or `kubectl` on PATH): its plugin
//! lookup finds `kubectl-isg` (a symlink to the built binary) on PATH, and `kubectl isg ...`
//! answers exactly as `ingress-status-guard ...` does, against the test API server, with
//! kubectl's `--kubeconfig`, `--context` and `-n`.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;

use support::{Class, TestEnv, create_ingress, kubeconfig, write_status};

const BINARY: &str = env!("CARGO_BIN_EXE_ingress-status-guard");

#[derive(Debug, PartialEq)]
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `program args` with `KUBECONFIG` set to `kubeconfig_env` (or unset) and `PATH` led by
/// `path_dir`, where `kubectl-isg` is.
fn run(program: &str, path_dir: &Path, kubeconfig_env: Option<&Path>, args: &[&str]) -> Run {
    let path = std::env::join_paths(
        std::iter::once(path_dir.to_owned())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .expect("PATH");
    let mut command = Command::new(program);
    command.args(args).env("PATH", path).env_remove("KUBECONFIG");
    if let Some(kc) = kubeconfig_env {
        command.env("KUBECONFIG", kc);
    }
    let out = command.output().unwrap_or_else(|e| panic!("run {program}: {e}"));
    let run = Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    println!("$ {program} {}\n{}{}(exit {:?})\n", args.join(" "), run.stdout, run.stderr, run.code);
    run
}

/// A directory holding `kubectl-isg`, a symlink to the built binary: the install docs/check.md
/// ("The kubectl plugin") describes.
fn plugin_dir(t: &TestEnv) -> PathBuf {
    let dir = t.cluster.scratch_dir("plugin-bin");
    std::os::unix::fs::symlink(BINARY, dir.join("kubectl-isg")).expect("symlink kubectl-isg");
    dir
}

fn kubectl() -> String {
    std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into())
}

#[tokio::test]
async fn kubectl_isg_answers_as_the_binary_with_kubectl_flags() {
    // A control plane of its own: the two runs it compares count every namespace's Ingresses,
    // which other tests create in between.
    let t = TestEnv::private("plugin").await;
    let bin = plugin_dir(&t);
    let class = format!("cls-{}", t.ns);
    let other_ns = t.cluster.namespace(&t.admin, "plugin-b").await;
    let other: Api<Ingress> = Api::namespaced(t.admin.clone(), &other_ns);
    create_ingress(&t.ingresses, "web", Class::Field(&class)).await;
    write_status(&t.ingresses, "web", &["198.51.100.1"], false).await.expect("stale status");
    create_ingress(&other, "api", Class::Field(&class)).await;
    write_status(&other, "api", &["203.0.113.10"], false).await.expect("canonical status");

    // The current-context is a cluster that is down: only `--context` reaches the test one,
    // whose context namespace is the test's (what `explain NAME` falls back to).
    let dir = t.cluster.scratch_dir(&format!("plugin-{}", t.ns));
    let down = kubeconfig::unreachable(t.cluster.admin_kubeconfig(), &t.cluster.server, &dir.join("down.yaml"));
    let kc = kubeconfig::with_contexts(
        &dir.join("kubeconfig.yaml"),
        &[("down", &down, None), ("test", t.cluster.admin_kubeconfig(), Some(&t.ns))],
    );
    let kc_flag = format!("--kubeconfig={}", kc.display());
    let policy = ["--publish-status-address=203.0.113.10".to_owned(), format!("--ingress-class={class}")];
    let with = |head: &[&str], tail: &[&str]| -> Vec<String> {
        head.iter()
            .map(|s| (*s).to_owned())
            .chain(policy.iter().cloned())
            .chain(tail.iter().map(|s| (*s).to_owned()))
            .collect()
    };

    let same = |args: Vec<String>, kubeconfig_env: Option<&Path>, want_code: i32| -> Run {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let direct = run(BINARY, &bin, kubeconfig_env, &args);
        let plugin = run(&kubectl(), &bin, kubeconfig_env, &[&["isg"], &args[..]].concat());
        assert_eq!(plugin, direct, "kubectl isg {args:?} answers as the binary");
        assert_eq!(direct.code, Some(want_code), "{args:?}: {}", direct.stderr);
        direct
    };

    // --context: the test cluster's report, both Ingresses, one drifted.
    let out = same(with(&["check", &kc_flag, "--context=test"], &[]), None, 1);
    assert!(out.stdout.starts_with("INGRESS "), "one cluster: no CLUSTER column:\n{}", out.stdout);
    assert!(out.stdout.contains(&format!("{}/web", t.ns)) && out.stdout.contains(&format!("{other_ns}/api")));
    assert!(
        out.stdout
            .lines()
            .last()
            .unwrap_or_default()
            .starts_with("governed Ingresses: 2 (1 OK, 1 DRIFT, 0 UNRESOLVED); not governed: "),
        "{}",
        out.stdout
    );
    // Without it, the current-context: the cluster that is down.
    let out = same(with(&["check", &kc_flag, "--request-timeout=5"], &[]), None, 2);
    assert!(out.stderr.contains("Connection refused"), "{}", out.stderr);
    // -n, and KUBECONFIG as a list of files (merged as kubectl merges them).
    let list = std::env::join_paths([&down, &kc]).unwrap();
    let out = same(with(&["check", "--context", "test"], &["-n", &other_ns, "-o", "json"]), Some(Path::new(&list)), 0);
    let report: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON report");
    assert_eq!(report["summary"]["governed"], 1, "{report}");
    assert_eq!(report["ingresses"][0]["name"], "api");

    // explain NAME: in the context's namespace, or -n's, or NAMESPACE/NAME.
    let web = same(with(&["explain", "web", &kc_flag, "--context=test"], &[]), None, 1);
    assert!(web.stdout.starts_with(&format!("Ingress:   {}/web\n", t.ns)), "{}", web.stdout);
    let api = same(with(&["explain", "api", "-n", &other_ns, &kc_flag, "--context=test"], &[]), None, 0);
    assert!(api.stdout.starts_with(&format!("Ingress:   {other_ns}/api\n")), "{}", api.stdout);
    let qualified = same(with(&["explain", &format!("{other_ns}/api"), &kc_flag, "--context=test"], &[]), None, 0);
    assert_eq!(qualified.stdout, api.stdout);
    let out =
        same(with(&["explain", &format!("{other_ns}/api"), "-n", &t.ns, &kc_flag, "--context=test"], &[]), None, 2);
    assert!(out.stderr.contains("name two namespaces; pass one"), "{}", out.stderr);

    // resolve needs no cluster.
    let out = same(vec!["resolve".into(), "--publish-status-address=lb.example.test,192.0.2.1".into()], None, 0);
    assert!(out.stdout.contains("192.0.2.1") && out.stdout.contains("lb.example.test"), "{}", out.stdout);

    // Help and usage errors name the command as kubectl users type it.
    let help = run(&kubectl(), &bin, None, &["isg", "--help"]);
    assert_eq!(help.code, Some(0));
    assert!(help.stdout.contains("Usage: kubectl isg [OPTIONS] <COMMAND>"), "{}", help.stdout);
    let help = run(&kubectl(), &bin, None, &["isg", "check", "--help"]);
    assert!(help.stdout.contains("Usage: kubectl isg check [OPTIONS]"), "{}", help.stdout);
    assert!(help.stdout.contains("--context <CONTEXT>") && help.stdout.contains("--kubeconfig <KUBECONFIG>"));
    let bad = run(&kubectl(), &bin, None, &["isg", "check", "--context", "a", "--all-contexts"]);
    assert_eq!(bad.code, Some(2));
    assert!(bad.stderr.contains("Usage: kubectl isg check"), "{}", bad.stderr);
    // Under its own name it keeps its own.
    let help = run(BINARY, &bin, None, &["check", "--help"]);
    assert!(help.stdout.contains("Usage: ingress-status-guard check [OPTIONS]"), "{}", help.stdout);
    // kubectl lists it among its plugins.
    let list = run(&kubectl(), &bin, None, &["plugin", "list", "--name-only"]);
    assert!(list.stdout.lines().any(|l| l.trim() == "kubectl-isg"), "{}", list.stdout);
}

/// scripts/plugin-archive.sh: the archive holds exactly `LICENSE` and `kubectl-isg`, regular
/// files (krew unpacks no symlinks), and the manifest it writes from dist/krew/isg.yaml is YAML naming
/// that file, the archive's URL and its sha256. Any executable shows the layout; a small one
/// keeps the test quick (the binary's own plugin behaviour is tested above).
#[test]
fn the_plugin_archive_has_the_layout_the_krew_manifest_names() {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-archive");
    let _ = std::fs::remove_dir_all(&out);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/plugin-archive.sh");
    let run = Command::new("bash")
        .arg(&script)
        .arg("https://example.test/releases")
        .env("ISG_PLUGIN_OUT", &out)
        .env("ISG_PLUGIN_BINARY", "/bin/true")
        .output()
        .expect("run scripts/plugin-archive.sh");
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let stdout = String::from_utf8_lossy(&run.stdout);
    let mut printed = stdout.lines();
    let (archive, manifest) = (PathBuf::from(printed.next().unwrap()), PathBuf::from(printed.next().unwrap()));

    let listing = Command::new("tar").arg("-tvzf").arg(&archive).output().expect("tar -t");
    let listing = String::from_utf8_lossy(&listing.stdout);
    let entries: Vec<(&str, &str)> = listing
        .lines()
        .map(|l| (l.split_whitespace().next().unwrap_or(""), l.split_whitespace().last().unwrap_or("")))
        .collect();
    assert_eq!(entries.len(), 2, "{listing}");
    assert_eq!(entries[0].1, "LICENSE", "{listing}");
    assert!(entries[0].0.starts_with("-rw-"), "a regular file: {listing}");
    assert_eq!(entries[1].1, "kubectl-isg", "{listing}");
    assert!(entries[1].0.starts_with("-rwx"), "a regular executable file: {listing}");

    let sha = Command::new("sha256sum").arg(&archive).output().expect("sha256sum");
    let sha = String::from_utf8_lossy(&sha.stdout).split_whitespace().next().unwrap_or("").to_owned();
    let doc: serde_json::Value =
        serde_norway::from_str(&std::fs::read_to_string(&manifest).unwrap()).expect("the manifest is YAML");
    assert_eq!(doc["kind"], "Plugin");
    assert_eq!(doc["metadata"]["name"], "isg", "`kubectl isg`: the plugin name is the command");
    let platform = &doc["spec"]["platforms"][0];
    assert_eq!(platform["bin"], "kubectl-isg");
    assert_eq!(platform["files"][0]["from"], "kubectl-isg");
    assert_eq!(platform["files"][1]["from"], "LICENSE");
    assert_eq!(platform["sha256"], sha.as_str());
    let name = archive.file_name().unwrap().to_str().unwrap();
    assert_eq!(platform["uri"], format!("https://example.test/releases/{name}").as_str());
    assert_eq!(doc["spec"]["version"], format!("v{}", env!("CARGO_PKG_VERSION")).as_str());
    std::fs::remove_dir_all(&out).unwrap();
}
