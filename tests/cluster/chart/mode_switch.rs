//! Leaving `admission.mode=policy`: the admission policies a release kept enforce without any
//! guard, so a `helm upgrade` to webhook mode, and an uninstall in webhook mode, must remove
//! every object carrying the release's owner label. The hooks helm would run are read from the
//! release (`helm get hooks`, what helm stored at the last install or upgrade) and run here as
//! helm would, each Job's command as its own ServiceAccount: this control plane runs no Jobs.

use std::time::Duration;

use serde_json::{Value, json};

use super::{CHART, Helm, NO_HOOK};
use crate::support::{TestEnv, eventually};

const RELEASE: &str = "isg-switch";
const FULLNAME: &str = "isg-switch-ingress-status-guard";
/// `isg.ownerLabel`: `<namespace>.<fullname>`, as the guard labels its objects.
const OWNER: &str = "isg-switch.isg-switch-ingress-status-guard";
const KINDS: &str = "mutatingadmissionpolicies,mutatingadmissionpolicybindings,validatingadmissionpolicies,validatingadmissionpolicybindings";

/// Runs the hooks of `event` among `hooks` as helm would: the identity first (applied), then
/// each Job's command as the Job's ServiceAccount; the identity is deleted afterwards
/// (`hook-succeeded`). Returns what the Jobs printed.
fn run_hooks(t: &TestEnv, hooks: &[Value], event: &str) -> String {
    let admin = t.cluster.admin_kubeconfig();
    let of_event: Vec<&Value> = hooks
        .iter()
        .filter(|d| {
            d["metadata"]["annotations"]["helm.sh/hook"].as_str().is_some_and(|h| h.split(',').any(|e| e == event))
        })
        .collect();
    let identity: Vec<&Value> = of_event.iter().copied().filter(|d| d["kind"] != "Job").collect();
    if identity.is_empty() {
        return String::new();
    }
    let file = t.cluster.scratch_dir("chart-switch-hooks").join(format!("{event}.json"));
    std::fs::write(&file, json!({"apiVersion": "v1", "kind": "List", "items": identity}).to_string()).unwrap();
    let applied = t.cluster.kubectl(admin, &["apply", "--server-side", "-f", file.to_str().unwrap()]);
    assert!(applied.success, "{}", applied.stderr);
    let mut printed = String::new();
    for job in of_event.iter().filter(|d| d["kind"] == "Job") {
        let pod = &job["spec"]["template"]["spec"];
        let account = format!(
            "system:serviceaccount:{}:{}",
            job["metadata"]["namespace"].as_str().unwrap(),
            pod["serviceAccountName"].as_str().unwrap()
        );
        let kubeconfig = t.cluster.kubeconfig_for(&account, Some("system:serviceaccounts"));
        let args: Vec<&str> =
            pod["containers"][0]["args"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        let out = std::process::Command::new(crate::support::webhook::BINARY)
            .args(&args)
            .args(["--kubeconfig", kubeconfig.to_str().unwrap()])
            .output()
            .expect("run the binary");
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{event} hook {args:?}: {stdout}{stderr}");
        printed.push_str(&stdout);
    }
    let deleted = t.cluster.kubectl(admin, &["delete", "--wait=false", "-f", file.to_str().unwrap()]);
    assert!(deleted.success, "{}", deleted.stderr);
    printed
}

/// Waits up to 60 s for no admission object to carry the release's owner label; `printed` is
/// what the hooks that should have removed them printed.
async fn none_left(t: &TestEnv, what: &str, printed: &str) {
    eventually(what, Duration::from_secs(60), || async {
        match labelled(t) {
            left if left.is_empty() => Ok(()),
            left => Err(format!("{left:?} left; the hook printed {printed:?}")),
        }
    })
    .await;
}

/// The admission objects carrying the release's owner label.
fn labelled(t: &TestEnv) -> Vec<String> {
    let out = t.cluster.kubectl(
        t.cluster.admin_kubeconfig(),
        &["get", KINDS, "-l", &format!("ingress-status-guard/lease={OWNER}"), "-o", "name"],
    );
    assert!(out.success, "{}", out.stderr);
    out.stdout.lines().map(str::to_owned).collect()
}

/// Writes the release's admission policy and binding as its keeper does: what
/// `render-admission-policy` renders for the release's policy file, with its owner label
/// (tests/cluster/chart/policy_mode.rs runs the keeper itself).
fn keep_objects(t: &TestEnv, config: &str, owner: &str, suffix: &str) {
    let dir = t.cluster.scratch_dir("chart-switch-objects");
    let file = dir.join("config.yaml");
    std::fs::write(&file, config).unwrap();
    let out = std::process::Command::new(crate::support::webhook::BINARY)
        .args(["render-admission-policy", "-o", "json", "--config", file.to_str().unwrap()])
        .args(["--leader-election-lease-name", FULLNAME])
        .output()
        .expect("run the binary");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut list: Value = serde_json::from_slice(&out.stdout).unwrap();
    for item in list["items"].as_array_mut().unwrap() {
        let name = format!("{}{suffix}", item["metadata"]["name"].as_str().unwrap());
        item["metadata"]["name"] = json!(name);
        item["metadata"]["labels"] = json!({"ingress-status-guard/lease": owner});
        if let Some(policy) = item["spec"]["policyName"].as_str() {
            item["spec"]["policyName"] = json!(format!("{policy}{suffix}"));
        }
    }
    let objects = dir.join(format!("objects{suffix}.json"));
    std::fs::write(&objects, list.to_string()).unwrap();
    let created = t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["create", "-f", objects.to_str().unwrap()]);
    assert!(created.success, "{}", created.stderr);
}

/// `helm upgrade --set admission.mode=webhook` of a policy-mode release removes its admission
/// objects (a post-upgrade hook, once the policy-mode grants are gone), and an uninstall in
/// webhook mode removes any that came back (the post-delete hook runs in every mode); so does
/// the post-upgrade hook of a `helm template` render (Argo CD); another owner's object stays.
#[tokio::test]
async fn leaving_policy_mode_and_uninstalling_leave_no_admission_object() {
    let t = TestEnv::new("chart-switch").await;
    let admin = t.cluster.admin_kubeconfig();
    let resources = t.cluster.kubectl(admin, &["api-resources", "--api-group=admissionregistration.k8s.io"]);
    if !resources.stdout.contains("mutatingadmissionpolicies") {
        eprintln!("the API server serves no MutatingAdmissionPolicy: policy mode cannot run here");
        return;
    }
    let dir = t.cluster.scratch_dir("chart-switch-helm");
    let helm = Helm::new(3, &dir);
    let kubeconfig = format!("--kubeconfig={}", admin.display());
    let helm_ok = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--namespace", RELEASE, &kubeconfig]);
        let out = helm.run(&all);
        assert!(out.success, "helm {args:?}: {}", out.stderr);
        out.stdout
    };
    let class = format!("{}-class", t.ns);
    let values = dir.join("values.yaml");
    std::fs::write(
        &values,
        format!(
            "doctor: {{hook: {{enabled: false}}}}\npolicies:\n- {{name: edge, ingressClasses: [{class}], publishStatusAddress: 192.0.2.81, mode: enforce}}\n"
        ),
    )
    .unwrap();
    let values = values.to_str().unwrap();
    let hooks = || super::documents(&helm_ok(&["get", "hooks", RELEASE]));

    // Policy mode, and the objects its keeper keeps; another owner's object beside them.
    // --no-hooks: the hooks are run below, as helm runs them.
    let policy_mode = ["-f", values, "--set", "admission.mode=policy"];
    helm_ok(&[&["install", RELEASE, CHART, "--create-namespace", "--no-hooks"][..], &policy_mode].concat());
    let rendered = helm.run(&[&["template", RELEASE, CHART, "--namespace", RELEASE][..], &policy_mode].concat());
    assert!(rendered.success, "{}", rendered.stderr);
    let docs = super::documents(&rendered.stdout);
    let file = super::find(&docs, "ConfigMap", &format!("{FULLNAME}-config"))["data"]["config.yaml"]
        .as_str()
        .unwrap()
        .to_owned();
    keep_objects(&t, &file, OWNER, "");
    keep_objects(&t, &file, "elsewhere.isg-switch-ingress-status-guard", "-x");
    let kept = labelled(&t);
    assert_eq!(kept.len(), 2, "a MutatingAdmissionPolicy and its binding: {kept:?}");

    // To webhook mode: the upgrade's hooks remove them.
    helm_ok(&[
        "upgrade",
        RELEASE,
        CHART,
        "-f",
        values,
        "--set",
        "admission.mode=webhook",
        "--set",
        NO_HOOK,
        "--no-hooks",
    ]);
    let printed = run_hooks(&t, &hooks(), "post-upgrade");
    none_left(&t, "no admission object of the release after the switch", &printed).await;

    // One comes back (an old policy-mode pod during the rollout, or a hand-applied render):
    // the uninstall in webhook mode removes it too.
    keep_objects(&t, &file, OWNER, "");
    assert_eq!(labelled(&t).len(), 2);
    let stored = hooks();
    helm_ok(&["uninstall", RELEASE, "--no-hooks"]);
    let printed = run_hooks(&t, &stored, "post-delete");
    none_left(&t, "no admission object of the release after the uninstall", &printed).await;
    let other =
        t.cluster.kubectl(admin, &["get", "mutatingadmissionpolicybinding", &format!("{FULLNAME}-ingress-0-x")]);
    assert!(other.success, "another owner's object stays: {}", other.stderr);

    // The same switch under a GitOps render (`helm template`, as Argo CD renders, which runs
    // post-install and post-upgrade hooks as PostSync): no lookup can see the objects, so the
    // webhook-mode render carries the removal after every sync, and it removes them.
    keep_objects(&t, &file, OWNER, "");
    assert_eq!(labelled(&t).len(), 2);
    let out = helm.run(&["template", RELEASE, CHART, "--namespace", RELEASE, "-f", values, "--set", NO_HOOK]);
    assert!(out.success, "{}", out.stderr);
    let rendered = super::documents(&out.stdout);
    let printed = run_hooks(&t, &rendered, "post-upgrade");
    none_left(&t, "no admission object of the release after a GitOps switch", &printed).await;
    // Installed by helm, which can look: with nothing labelled as the release's, the removal
    // runs at uninstall only, not after every upgrade.
    helm_ok(&["install", RELEASE, CHART, "-f", values, "--set", NO_HOOK, "--no-hooks"]);
    let remove =
        hooks().into_iter().find(|d| d["kind"] == "Job" && d["metadata"]["name"] == format!("{FULLNAME}-remove"));
    assert_eq!(remove.expect("the removal Job")["metadata"]["annotations"]["helm.sh/hook"], "post-delete");
    helm_ok(&["uninstall", RELEASE, "--no-hooks"]);
    let other =
        t.cluster.kubectl(admin, &["get", "mutatingadmissionpolicybinding", &format!("{FULLNAME}-ingress-0-x")]);
    assert!(other.success, "another owner's object stays: {}", other.stderr);
    for kind in ["mutatingadmissionpolicy", "mutatingadmissionpolicybinding"] {
        let _ = t.cluster.kubectl(admin, &["delete", kind, &format!("{FULLNAME}-ingress-0-x")]);
    }
    let _ = t.cluster.kubectl(admin, &["delete", "namespace", RELEASE, "--wait=false"]);
}
