//! `completion`: every script is generated, the bash one and the kubectl helper parse
//! (`bash -n`, `sh -n`), and completions run in bash (sourcing the script, as a shell does on
//! Tab) and through a real `kubectl` (its plugin completion runs `kubectl_complete-isg`): a
//! subcommand, flag values, and namespaces and Ingress names read from the API server.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::run;
use crate::support::{Class, TestEnv, create_ingress};

const BINARY: &str = env!("CARGO_BIN_EXE_ingress-status-guard");

/// A directory with `kubectl-isg` (the binary) and the `kubectl_complete-isg` helper, and the
/// bash script, as docs/check.md installs them.
fn install(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let _ = std::fs::remove_file(dir.join("kubectl-isg"));
    std::os::unix::fs::symlink(BINARY, dir.join("kubectl-isg")).expect("symlink kubectl-isg");
    let helper = run(&["completion", "kubectl"]);
    assert_eq!(helper.code, Some(0), "{}", helper.stderr);
    let path = dir.join("kubectl_complete-isg");
    std::fs::write(&path, &helper.stdout).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bash = run(&["completion", "bash"]);
    assert_eq!(bash.code, Some(0), "{}", bash.stderr);
    let script = dir.join("isg.bash");
    std::fs::write(&script, &bash.stdout).unwrap();
    script
}

fn path_with(dir: &Path) -> String {
    let binary_dir = Path::new(BINARY).parent().unwrap();
    format!("{}:{}:{}", dir.display(), binary_dir.display(), std::env::var("PATH").unwrap_or_default())
}

/// What bash offers for `line` (the cursor at its end): COMP_* set as bash sets them on Tab
/// (`=` a word of its own, as COMP_WORDBREAKS makes it), then the script's function.
fn bash_complete(script: &Path, dir: &Path, line: &str) -> Vec<String> {
    let driver = r#"
source "$1"
COMP_LINE=$2
COMP_POINT=${#COMP_LINE}
read -ra COMP_WORDS <<< "${COMP_LINE//=/ = }"
[[ $COMP_LINE == *' ' ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMPREPLY=()
_ingress_status_guard
printf '%s\n' "${COMPREPLY[@]}"
"#;
    let out = Command::new("bash")
        .args(["-c", driver, "bash"])
        .arg(script)
        .arg(line)
        .env("PATH", path_with(dir))
        .env_remove("KUBECONFIG")
        .output()
        .expect("run bash");
    assert!(out.status.success(), "bash: {}", String::from_utf8_lossy(&out.stderr));
    let offered: Vec<String> =
        String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.is_empty()).map(str::to_owned).collect();
    println!("bash: {line:?} -> {offered:?}");
    offered
}

#[tokio::test]
async fn completion_scripts_parse_and_complete_names_from_the_cluster() {
    let t = TestEnv::new("completion").await;
    create_ingress(&t.ingresses, "web-frontend", Class::Field("nobody")).await;
    let dir = t.cluster.scratch_dir(&format!("completion-{}", t.ns));
    let script = install(&dir);

    for (shell, marker) in [
        ("zsh", "#compdef ingress-status-guard"),
        ("fish", "complete -c ingress-status-guard"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let out = run(&["completion", shell]);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        assert!(out.stdout.contains(marker) && out.stdout.contains("__complete"), "{shell}:\n{}", out.stdout);
    }
    let out = run(&["completion", "tcsh"]);
    assert_eq!(out.code, Some(2));
    assert!(out.stderr.contains("[possible values: bash, zsh, fish, powershell, kubectl]"), "{}", out.stderr);
    let parsed = Command::new("bash").arg("-n").arg(&script).output().unwrap();
    assert!(parsed.status.success(), "bash -n: {}", String::from_utf8_lossy(&parsed.stderr));
    let parsed = Command::new("sh").arg("-n").arg(dir.join("kubectl_complete-isg")).output().unwrap();
    assert!(parsed.status.success(), "sh -n: {}", String::from_utf8_lossy(&parsed.stderr));

    // Without a cluster: a subcommand, a flag, an enumerated value (after `=` too, which bash
    // splits into words of its own).
    assert_eq!(bash_complete(&script, &dir, "ingress-status-guard expl"), ["explain"]);
    assert_eq!(bash_complete(&script, &dir, "ingress-status-guard doctor --wai"), ["--wait"]);
    assert_eq!(bash_complete(&script, &dir, "ingress-status-guard check -o "), ["table", "json", "yaml"]);
    assert_eq!(bash_complete(&script, &dir, "ingress-status-guard version --output=ya"), ["yaml"]);
    assert_eq!(bash_complete(&script, &dir, "kubectl-isg completion k"), ["kubectl"]);

    // From the cluster: namespaces, and the Ingress `explain` takes.
    let kubeconfig = t.cluster.admin_kubeconfig().display().to_string();
    let ns_prefix = &t.ns[..t.ns.len() - 1];
    let namespaces =
        bash_complete(&script, &dir, &format!("ingress-status-guard check --kubeconfig {kubeconfig} -n {ns_prefix}"));
    assert!(namespaces.contains(&t.ns), "{namespaces:?}");
    assert!(namespaces.iter().all(|n| n.starts_with(ns_prefix)), "{namespaces:?}");
    let names = bash_complete(
        &script,
        &dir,
        &format!("ingress-status-guard explain --kubeconfig {kubeconfig} -n {} web", t.ns),
    );
    assert_eq!(names, ["web-frontend"]);
    let qualified =
        bash_complete(&script, &dir, &format!("ingress-status-guard explain --kubeconfig {kubeconfig} {}/", t.ns));
    assert_eq!(qualified, [format!("{}/web-frontend", t.ns)]);

    // Through kubectl: `kubectl isg ...` completes by the helper on PATH.
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let out = Command::new(&kubectl)
        .args(["__complete", "isg", "explain", "-n", &t.ns, ""])
        .env("PATH", path_with(&dir))
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .expect("run kubectl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("kubectl __complete isg explain -n {} '' ->\n{stdout}{}", t.ns, String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.first(), Some(&"web-frontend"), "{stdout}");
    assert_eq!(lines.last(), Some(&":4"), "no file names: {stdout}");
}

/// Whether `shell` is on PATH: the zsh and fish runs need them (Debian's `zsh` and `fish`).
fn have(shell: &str) -> bool {
    Command::new(shell).arg("-c").arg("exit 0").output().is_ok_and(|o| o.status.success())
}

/// What zsh offers for `line`: the script sourced with `compadd` and `_files` as stubs that
/// print, `words` and `CURRENT` set as zsh's completion system sets them.
fn zsh_complete(script: &Path, dir: &Path, line: &str) -> Vec<String> {
    let driver = r#"
compdef() { : }
compadd() { [[ $1 == -- ]] && shift; print -rl -- "$@" }
_files() { print -r -- '<files>' }
source "$1"
words=(${(z)2})
[[ $2 == *' ' ]] && words+=('')
CURRENT=${#words}
_ingress_status_guard
"#;
    let out = Command::new("zsh")
        .args(["-f", "-c", driver, "zsh"])
        .arg(script)
        .arg(line)
        .env("PATH", path_with(dir))
        .env_remove("KUBECONFIG")
        .output()
        .expect("run zsh");
    assert!(out.status.success(), "zsh: {}", String::from_utf8_lossy(&out.stderr));
    let offered: Vec<String> =
        String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.is_empty()).map(str::to_owned).collect();
    println!("zsh: {line:?} -> {offered:?}");
    offered
}

/// What fish offers for `line`: `complete -C`, fish's own way to ask its completions.
fn fish_complete(script: &Path, dir: &Path, line: &str) -> Vec<String> {
    let out = Command::new("fish")
        .args(["--no-config", "-c", "source $argv[1]; complete -C $argv[2]"])
        .arg(script)
        .arg(line)
        .env("PATH", path_with(dir))
        .env_remove("KUBECONFIG")
        .output()
        .expect("run fish");
    assert!(out.status.success(), "fish: {}", String::from_utf8_lossy(&out.stderr));
    let offered: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.split('\t').next().unwrap_or_default().to_owned())
        .collect();
    println!("fish: {line:?} -> {offered:?}");
    offered
}

/// zsh, fish and PowerShell complete from the cluster as bash does: each script asks
/// `__complete`. zsh and fish parse (`zsh -n`, `fish --no-execute`) and run where they are
/// installed; PowerShell's script is generated and read for its parts (no pwsh here).
#[tokio::test]
async fn zsh_fish_and_powershell_scripts_complete_from_the_cluster_too() {
    let t = TestEnv::new("completion-shells").await;
    create_ingress(&t.ingresses, "web-backend", Class::Field("nobody")).await;
    let dir = t.cluster.scratch_dir(&format!("completion-shells-{}", t.ns));
    install(&dir);
    let kubeconfig = t.cluster.admin_kubeconfig().display().to_string();
    let write = |shell: &str| {
        let out = run(&["completion", shell]);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        assert!(out.stdout.contains("ingress-status-guard __complete") || out.stdout.contains("__complete --"));
        let path = dir.join(format!("isg.{shell}"));
        std::fs::write(&path, &out.stdout).unwrap();
        path
    };
    let powershell = std::fs::read_to_string(write("powershell")).unwrap();
    assert!(powershell.contains("& $program __complete -- @rest"), "{powershell}");

    let explain = format!("ingress-status-guard explain --kubeconfig {kubeconfig} -n {} web", t.ns);
    let namespaces = format!("ingress-status-guard check --kubeconfig {kubeconfig} -n {}", &t.ns[..t.ns.len() - 1]);
    if have("zsh") {
        let script = write("zsh");
        let parsed = Command::new("zsh").arg("-n").arg(&script).output().unwrap();
        assert!(parsed.status.success(), "zsh -n: {}", String::from_utf8_lossy(&parsed.stderr));
        assert_eq!(zsh_complete(&script, &dir, "ingress-status-guard expl"), ["explain"]);
        assert_eq!(zsh_complete(&script, &dir, "ingress-status-guard check -o "), ["table", "json", "yaml"]);
        assert_eq!(zsh_complete(&script, &dir, "ingress-status-guard version --output=ya"), ["--output=yaml"]);
        assert_eq!(zsh_complete(&script, &dir, "ingress-status-guard check --kubeconfig "), ["<files>"]);
        assert_eq!(zsh_complete(&script, &dir, &explain), ["web-backend"]);
        assert!(zsh_complete(&script, &dir, &namespaces).contains(&t.ns));
    } else {
        println!("zsh is not installed: its script is generated only");
    }
    if have("fish") {
        let script = write("fish");
        let parsed = Command::new("fish").arg("--no-execute").arg(&script).output().unwrap();
        assert!(parsed.status.success(), "fish --no-execute: {}", String::from_utf8_lossy(&parsed.stderr));
        assert_eq!(fish_complete(&script, &dir, "ingress-status-guard expl"), ["explain"]);
        // fish sorts what it offers.
        assert_eq!(fish_complete(&script, &dir, "kubectl-isg check -o "), ["json", "table", "yaml"]);
        assert_eq!(fish_complete(&script, &dir, &explain), ["web-backend"]);
        assert!(fish_complete(&script, &dir, &namespaces).contains(&t.ns));
    } else {
        println!("fish is not installed: its script is generated only");
    }
}
