//! Issue 33, item 9: `--rollback` restores the named policy's source alone (and refuses when it
//! was edited since), Ctrl-C while following says what stays applied and how to undo it, an
//! Ingress outside the guard's scope is shown as such and not waited for, and a tenant's
//! hostname with escape sequences is printed escaped.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::harness::*;
use super::support::guard::scoping_webhook;
use super::support::{Class, TestEnv, create_ingress, write_status};

fn two_policies(ns: &str) -> String {
    format!(
        "policies:\n  - name: a\n    ingressClasses: [{ns}-a]\n    publishStatusAddress: 192.0.2.1\n  - name: b\n    ingressClasses: [{ns}-b]\n    publishStatusAddress: 192.0.2.2\n"
    )
}

/// `cutover` of policy `policy` with `extra`.
fn args(t: &TestEnv, policy: &str, extra: &[&str]) -> Vec<String> {
    let mut args = cutover_args(t, t.cluster.admin_kubeconfig(), extra);
    args[3] = format!("--policy={policy}");
    args
}

async fn source_of(t: &TestEnv, policy: &str) -> String {
    let cm = Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).get(CONFIG_MAP).await.unwrap();
    let file: serde_json::Value = serde_norway::from_str(&cm.data.unwrap()["config.yaml"]).unwrap();
    let policy = file["policies"].as_array().unwrap().iter().find(|p| p["name"] == policy).unwrap();
    policy["publishStatusAddress"].as_str().unwrap_or_default().to_owned()
}

/// `cutover a`, `cutover b`, `rollback --policy a` used to restore the whole key: b undone, a
/// left moved. Now a is back and b stays moved; a policy edited by hand since its cutover is
/// not rolled back over that edit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_back_one_policy_leaves_the_other_moved() {
    let t = TestEnv::new("cutover-rollback").await;
    create_config_map(&t, &two_policies(&t.ns)).await;
    for (policy, to) in [("a", "192.0.2.11"), ("b", "192.0.2.12")] {
        let out = run(BINARY, &args(&t, policy, &[&format!("--to-publish-status-address={to}")]), None).await;
        assert_eq!(out.code, Some(0), "cutover {policy}: {}", out.stderr);
    }
    let back = run(BINARY, &args(&t, "a", &["--rollback"]), None).await;
    assert_eq!(back.code, Some(0), "{}", back.stderr);
    assert_eq!(source_of(&t, "a").await, "192.0.2.1", "a is back");
    assert_eq!(source_of(&t, "b").await, "192.0.2.12", "b stays moved");
    let again = run(BINARY, &args(&t, "a", &["--rollback"]), None).await;
    assert_eq!(again.code, Some(2), "{}", again.stderr);
    assert!(again.stderr.contains("no source of policy \"a\" is kept"), "{}", again.stderr);

    // b edited by hand since its cutover: its rollback would overwrite that edit.
    let cm = Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).get(CONFIG_MAP).await.unwrap();
    let text = cm.data.unwrap()["config.yaml"].replace("192.0.2.12", "192.0.2.99");
    let patch = json!({"data": {"config.yaml": text}});
    Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns)
        .patch(CONFIG_MAP, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let refused = run(BINARY, &args(&t, "b", &["--rollback"]), None).await;
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("changed since its cutover set it"), "{}", refused.stderr);
    assert!(refused.stderr.contains("192.0.2.99") && refused.stderr.contains("192.0.2.12"), "{}", refused.stderr);
    assert_eq!(source_of(&t, "b").await, "192.0.2.99", "the edit stays");
}

/// Ctrl-C while following: the apply stays, the undo command is printed, exit 130, and the
/// printed command undoes it. No guard runs, so the Ingress never moves and the follow waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_while_following_prints_the_rollback_and_exits_130() {
    let t = TestEnv::new("cutover-sigint").await;
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    lb_service(&services, "controller-a", A).await;
    create_config_map(&t, &policy_file(&t.ns, &format!("{}/controller-a", t.ns))).await;
    create_ingress(&t.ingresses, "web", Class::Field(&t.ns)).await;
    let command = cutover_args(&t, t.cluster.admin_kubeconfig(), &["--to-publish-status-address=192.0.2.50"]);
    let ran = tokio::task::spawn_blocking(move || {
        use std::io::{BufRead as _, Read as _};
        let mut child = std::process::Command::new(BINARY)
            .args(&command)
            .env_remove("KUBECONFIG")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut seen = String::new();
        while !seen.contains("applied: ") {
            if stdout.read_line(&mut seen).unwrap() == 0 {
                break;
            }
        }
        // Following now (no guard moves the Ingress).
        std::thread::sleep(Duration::from_millis(500));
        #[allow(unsafe_code)] // kill(2) on our own child's pid has no memory effects.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGINT)
        };
        let (mut rest, mut stderr) = (String::new(), String::new());
        stdout.read_to_string(&mut rest).unwrap();
        child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
        (child.wait().unwrap(), seen, rest, stderr)
    });
    let (status, seen, rest, stderr) =
        tokio::time::timeout(Duration::from_secs(60), ran).await.expect("cutover exits after SIGINT").unwrap();
    println!("{seen}{rest}\n{stderr}");
    assert_eq!(status.code(), Some(130), "{stderr}");
    let undo = format!(
        "ingress-status-guard cutover --config-map {}/{CONFIG_MAP} --key config.yaml --policy edge --rollback",
        t.ns
    );
    assert!(rest.contains("interrupted: ") && rest.contains(&undo), "{rest}");
    assert!(stderr.starts_with("error: interrupted (SIGINT): ") && stderr.contains(&undo), "{stderr}");
    let cm = Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).get(CONFIG_MAP).await.unwrap();
    assert!(cm.data.unwrap()["config.yaml"].contains("192.0.2.50"), "the apply stays");

    // The printed command undoes it (with this test's kubeconfig, and no follow to wait for).
    let mut words: Vec<String> = undo.split(' ').skip(1).map(str::to_owned).collect();
    words.insert(1, format!("--kubeconfig={}", t.cluster.admin_kubeconfig().display()));
    words.push("--timeout=1s".to_owned());
    let back = run(BINARY, &words, None).await;
    let cm = Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).get(CONFIG_MAP).await.unwrap();
    assert!(cm.data.unwrap()["config.yaml"].contains("controller-a"), "rolled back: {}", back.stderr);
}

/// The guard's webhook configuration selects only this test's Namespace: an Ingress of the
/// policy in another Namespace is listed OUT OF SCOPE and not waited for (the one in scope is
/// already there, so the cutover ends at once, exit 0, the other still off). Its external-dns
/// hostname, a tenant's text, carries an escape sequence: the plan prints it escaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_scope_ingresses_are_not_waited_for_and_hostnames_are_escaped() {
    let t = TestEnv::new("cutover-scope").await;
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    lb_service(&services, "controller-a", A).await;
    create_config_map(&t, &policy_file(&t.ns, &format!("{}/controller-a", t.ns))).await;
    let key = format!("isg-scope-{}", t.ns);
    let label = json!({"metadata": {"labels": {key.as_str(): "in"}}});
    Api::<Namespace>::all(t.admin.clone()).patch(&t.ns, &PatchParams::default(), &Patch::Merge(&label)).await.unwrap();
    let outside = t.cluster.namespace(&t.admin, "cutover-scope-out").await;
    let name = format!("isg-{}", t.ns);
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": name},
        "webhooks": [scoping_webhook(
            "scope.cutover.ingress-status-guard.test",
            "ingresses",
            json!({"matchLabels": {key.as_str(): "in"}}),
        )]
    }))
    .unwrap();
    let configs: Api<MutatingWebhookConfiguration> = Api::all(t.admin.clone());
    configs.create(&PostParams::default(), &config).await.unwrap();
    let to = "192.0.2.60";
    create_ingress(&t.ingresses, "in", Class::Field(&t.ns)).await;
    write_status(&t.rogue, "in", &[to], false).await.unwrap();
    let out: Api<Ingress> = Api::namespaced(t.admin.clone(), &outside);
    create_ingress(&out, "out", Class::Field(&t.ns)).await;
    let rogue_out: Api<Ingress> = Api::namespaced(t.cluster.rogue().await, &outside);
    write_status(&rogue_out, "out", &["198.51.100.7"], false).await.unwrap();
    // A tenant's hostname annotation: external-dns's, free text, an ESC in it.
    let host = json!({"metadata": {"annotations": {"external-dns.alpha.kubernetes.io/hostname": "shop\u{1b}[2J\u{1b}]0;owned\u{7}.example.test"}}});
    t.ingresses.patch("in", &PatchParams::default(), &Patch::Merge(&host)).await.unwrap();
    write_status(&t.rogue, "in", &["198.51.100.8"], false).await.unwrap();

    let scope = format!("--webhook-configuration={name}");
    let dry = run(
        BINARY,
        &cutover_args(
            &t,
            t.cluster.admin_kubeconfig(),
            &[&format!("--to-publish-status-address={to}"), &scope, "--dry-run"],
        ),
        None,
    )
    .await;
    assert_eq!(dry.code, Some(0), "{}", dry.stderr);
    assert!(
        !dry.stdout.contains('\u{1b}') && !dry.stdout.contains('\u{7}'),
        "no raw control character: {:?}",
        dry.stdout
    );
    assert!(
        dry.stdout.contains("shop\\u{1b}[2J\\u{1b}]0;owned\\u{7}.example.test"),
        "the hostname, escaped:\n{}",
        dry.stdout
    );
    let line = format!(
        "OUT OF SCOPE (the guard's webhook configuration does not select their Namespace; the reconciler leaves them as they are): {outside}/out"
    );
    assert!(dry.stdout.contains(&line), "{}", dry.stdout);
    assert!(dry.stdout.contains("1 outside the guard's scope (not moved, not waited for)"), "{}", dry.stdout);

    // In scope, "in" is put back to the new value before the cutover: nothing left to wait for.
    write_status(&t.rogue, "in", &[to], false).await.unwrap();
    let to_flag = format!("--to-publish-status-address={to}");
    let args = [to_flag.as_str(), scope.as_str(), "-o", "json", "--timeout=30s"];
    let moved = run(BINARY, &cutover_args(&t, t.cluster.admin_kubeconfig(), &args), None).await;
    assert_eq!(moved.code, Some(0), "not waited for: {}", moved.stderr);
    let stream = events(&moved.stdout);
    assert_eq!(stream[0]["outOfScope"], json!([format!("{outside}/out")]), "{}", moved.stdout);
    assert_eq!(stream[0]["summary"]["outOfScope"], 1);
    assert_eq!(stream.last().unwrap()["event"], "done", "{}", moved.stdout);
    assert_eq!(super::support::addresses(&out.get("out").await.unwrap()), ["198.51.100.7"], "left alone");
    configs.delete(&name, &DeleteParams::default()).await.unwrap();
}
