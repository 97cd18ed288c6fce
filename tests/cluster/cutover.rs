//! `cutover` end to end (issue 24): the built binary, black box, against the real
//! kube-apiserver + etcd of `support`, with a real guard (`serve --config FILE`, reconciler on)
//! moving the Ingresses.
//!
//! There is no kubelet in the harness, so each test plays the kubelet's ConfigMap-volume role
//! (`Kubelet`, in `cutover/harness.rs`): it reads the policy ConfigMap every 200 ms and, when
//! the key changes, writes the new text into the guard's `--config` directory with the
//! kubelet's `..data` symlink swap (an atomic rename), which `serve` reloads.

use crate::support;

pub(crate) mod harness;

mod guide;

mod gateway;

mod rollback;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use harness::*;
use support::{Class, TestEnv, addresses, create_ingress};

/// 200 Ingresses move from Service A to Service B and back; the plan lists exactly them, the
/// JSON stream parses and ends 200/200, and the rollback's progress bar is drawn on a
/// pseudo-terminal (`script` from util-linux).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_ingresses_move_to_service_b_and_back() {
    let t = TestEnv::new("cutover").await;
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    lb_service(&services, "controller-a", A).await;
    lb_service(&services, "controller-b", B).await;
    let (guard, _kubelet) = start_guard(&t, "controller-a", None).await;
    let names: Vec<String> = (0..200).map(|i| format!("web-{i:03}")).collect();
    for name in &names {
        create_ingress(&t.ingresses, name, Class::Field(&t.ns)).await;
    }
    // An Ingress of another class is not in the plan.
    create_ingress(&t.ingresses, "other", Class::Field("not-governed")).await;
    await_all(&t, &names, A, &guard).await;
    let kc = t.cluster.admin_kubeconfig();
    let to_b = format!("--to-publish-service={}/controller-b", t.ns);

    // The plan: exactly the 200, from A to B, each with its hostname.
    let dry = run(BINARY, &cutover_args(&t, kc, &[&to_b, "--dry-run", "-o", "json"]), None).await;
    assert_eq!(dry.code, Some(0), "{}", dry.stderr);
    let plan = &events(&dry.stdout)[0];
    assert_eq!(plan["event"], "plan");
    let planned: Vec<&str> =
        plan["ingresses"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(planned, names.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        plan["ingresses"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["from"] == json!([{"ip": A}]) && m["to"] == json!([{"ip": B}]))
    );
    assert_eq!(plan["ingresses"][7]["hosts"], json!(["web-007.example.test"]));
    assert_eq!(plan["summary"]["moving"], 200);
    // The same plan as a YAML document (`-o yaml`: one document per event).
    let yaml = run(BINARY, &cutover_args(&t, kc, &[&to_b, "--dry-run", "-o", "yaml"]), None).await;
    assert_eq!(yaml.code, Some(0), "{}", yaml.stderr);
    assert!(yaml.stdout.starts_with("---\n"), "{}", yaml.stdout);
    let docs: Vec<serde_json::Value> = serde_norway::Deserializer::from_str(&yaml.stdout)
        .map(|d| serde::Deserialize::deserialize(d).expect("-o yaml: YAML documents"))
        .collect();
    assert_eq!(&docs[0], plan, "-o yaml and -o json print the same plan");
    // A format it does not print: refused, naming the ones it does.
    let xml = run(BINARY, &cutover_args(&t, kc, &[&to_b, "--dry-run", "-o", "xml"]), None).await;
    assert_eq!(xml.code, Some(2), "{}", xml.stderr);
    assert!(xml.stderr.contains("[possible values: text, json, yaml]"), "{}", xml.stderr);
    // The text plan, the same through `kubectl isg` (kubectl's plugin lookup on PATH).
    let text = run(BINARY, &cutover_args(&t, kc, &[&to_b, "--dry-run"]), None).await;
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    assert_eq!(text.stdout.lines().count(), 202, "header, 200 rows, summary:\n{}", text.stdout);
    assert!(text.stdout.starts_with("INGRESS "), "{}", text.stdout);
    let summary = text.stdout.lines().last().unwrap();
    assert!(
        summary.contains(&format!(
            "moves from service {}/controller-a to service {}/controller-b [{B}]: 200 Ingresses move, 0 already there",
            t.ns, t.ns
        )),
        "{summary}"
    );
    let bin = plugin_dir(&t);
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    // kubectl's way to name it: NAME and -n.
    let mut plugin_args: Vec<String> =
        std::iter::once("isg".to_owned()).chain(cutover_args(&t, kc, &[&to_b, "--dry-run", "-n", &t.ns])).collect();
    plugin_args[3] = format!("--config-map={CONFIG_MAP}");
    let through_kubectl = run(&kubectl, &plugin_args, Some(&bin)).await;
    // The same plan, but for the count of other tests' Ingresses, which may be created
    // between the two runs.
    let governed = |run: &Run| {
        let (head, summary) = run.stdout.trim_end().rsplit_once('\n').unwrap_or_default();
        (run.code, head.to_owned(), summary.split_once("; ").map(|(ours, _)| ours.to_owned()), run.stderr.clone())
    };
    assert_eq!(governed(&through_kubectl), governed(&text), "kubectl isg cutover --dry-run prints the same plan");
    let cm = Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).get(CONFIG_MAP).await.unwrap();
    assert!(!cm.metadata.annotations.unwrap_or_default().contains_key(ANNOTATION), "a dry run writes nothing");

    // Act and follow, as a pipeline reads it.
    let moved = run(BINARY, &cutover_args(&t, kc, &[&to_b, "-o", "json", "--timeout=5m"]), None).await;
    assert_eq!(moved.code, Some(0), "{} (guard log: {})", moved.stderr, guard.log_path().display());
    let stream = events(&moved.stdout);
    let kinds: Vec<&str> = stream.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"plan"));
    assert_eq!(kinds[1], "applied", "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "moved").count(), 200, "{kinds:?}");
    let done = stream.last().unwrap();
    assert_eq!(
        (done["event"].as_str(), done["moved"].as_u64(), done["total"].as_u64()),
        (Some("done"), Some(200), Some(200))
    );
    await_all(&t, &names, B, &guard).await;
    assert_eq!(addresses(&t.ingresses.get("other").await.unwrap()), Vec::<String>::new(), "not governed: untouched");
    let cm = Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).get(CONFIG_MAP).await.unwrap();
    let previous = cm.metadata.annotations.clone().unwrap_or_default().remove(ANNOTATION).unwrap_or_default();
    let previous: serde_json::Value = serde_norway::from_str(&previous).unwrap();
    assert_eq!(
        previous["previousSources"]["edge"],
        json!({"before": {"publishService": format!("{}/controller-a", t.ns)}, "after": {"publishService": format!("{}/controller-b", t.ns)}}),
        "the policy's previous source, beside the one the cutover set"
    );
    let managers: Vec<String> = cm.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.clone()).collect();
    assert!(managers.iter().any(|m| m == "ingress-status-guard-cutover"), "{managers:?}");

    // Roll back on a terminal: the progress bar, through a pseudo-terminal.
    let command = std::iter::once(BINARY.to_owned())
        .chain(cutover_args(&t, kc, &["--rollback", "--timeout=5m"]))
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    // A terminal 120 columns wide (script's own pty has the size of none).
    let command = format!("stty cols 120 rows 40; {command}");
    let tty = run("script", &["-q".into(), "-e".into(), "-c".into(), command, "/dev/null".into()], None).await;
    assert_eq!(tty.code, Some(0), "{}{}", tty.stdout, tty.stderr);
    let screen = tty.stdout.replace('\r', "\n");
    assert!(screen.contains("] 200/200 moved, "), "the bar ends at 200/200:\n{screen}");
    assert!(screen.contains("newest: "), "the bar names the newest moved Ingress:\n{screen}");
    assert!(screen.contains("ETA "), "{screen}");
    assert!(screen.contains("done: 200/200 moved in "), "{screen}");
    let frame = t.cluster.scratch_dir("cutover-frames").join("rollback-tty.txt");
    std::fs::write(&frame, &tty.stdout).unwrap();
    println!("the terminal's bytes: {}", frame.display());
    await_all(&t, &names, A, &guard).await;
}

/// The new source unresolved: the plan exits 1 naming it and writes nothing; a source that the
/// guard cannot resolve after the apply makes `--timeout` exit 1 naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unresolved_target_exits_1_naming_it() {
    let t = TestEnv::new("cutover-unresolved").await;
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    lb_service(&services, "controller-a", A).await;
    lb_service(&services, "controller-b", B).await;
    let (guard, _kubelet) = start_guard(&t, "controller-a", Some("controller-b")).await;
    let names: Vec<String> = (0..3).map(|i| format!("app-{i}")).collect();
    for name in &names {
        create_ingress(&t.ingresses, name, Class::Field(&t.ns)).await;
    }
    await_all(&t, &names, A, &guard).await;
    let kc = t.cluster.admin_kubeconfig();

    let missing = format!("--to-publish-service={}/missing", t.ns);
    let out = run(BINARY, &cutover_args(&t, kc, &[&missing]), None).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert_eq!(
        out.stderr.trim(),
        format!("error: the new source of policy edge is unresolved: Service {}/missing not found", t.ns)
    );
    let cm = Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).get(CONFIG_MAP).await.unwrap();
    assert!(cm.data.unwrap()["config.yaml"].contains("controller-a"), "nothing applied");

    // B resolves when the plan is made; the kubelet clears its load balancer before the guard
    // reloads, so the guard never moves anything (an unresolved source never changes a status).
    let to_b = format!("--to-publish-service={}/controller-b", t.ns);
    let out = run(BINARY, &cutover_args(&t, kc, &[&to_b, "--timeout=12s"]), None).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stdout.contains("timeout: 0/3 moved after "), "{}", out.stdout);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.starts_with("error: --timeout 12s passed with 0/3 Ingresses moved: "), "{}", out.stderr);
    let why = format!("3 UNRESOLVED ({ns}/app-0, {ns}/app-1, {ns}/app-2): Service {ns}/controller-b ", ns = t.ns);
    assert!(out.stderr.contains(&why), "one cause, named once: {}", out.stderr);
    for name in &names {
        assert_eq!(addresses(&t.ingresses.get(name).await.unwrap()), [A], "never cleared");
    }
}

/// Grants `group` the reads of a cutover, and not patch on ConfigMaps.
async fn readers_without_patch(t: &TestEnv, group: &str) {
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": group},
        "rules": [
            {"apiGroups": [""], "resources": ["configmaps", "services"], "verbs": ["get"]},
            {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["list", "watch"]},
        ]
    }))
    .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": group},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": group},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]
    }))
    .unwrap();
    Api::<ClusterRole>::all(t.admin.clone()).create(&PostParams::default(), &role).await.unwrap();
    Api::<ClusterRoleBinding>::all(t.admin.clone()).create(&PostParams::default(), &binding).await.unwrap();
}

/// Bad input exits 2 with one line on stderr naming the flag; nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_exits_2_naming_the_flag() {
    let t = TestEnv::new("cutover-bad").await;
    create_config_map(&t, &policy_file(&t.ns, &format!("{}/controller-a", t.ns))).await;
    let kc = t.cluster.admin_kubeconfig().to_path_buf();
    let to_b = format!("--to-publish-service={}/controller-b", t.ns);
    let one_line = |out: &Run, want: &str| {
        assert_eq!(out.code, Some(2), "{}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "one line: {}", out.stderr);
        assert!(out.stderr.starts_with(&format!("error: {want}")), "{}", out.stderr);
    };

    let mut args = cutover_args(&t, &kc, &[&to_b]);
    args[2] = format!("--config-map={}/nope", t.ns);
    one_line(&run(BINARY, &args, None).await, &format!("--config-map {}/nope: ConfigMap not found", t.ns));

    let mut args = cutover_args(&t, &kc, &[&to_b]);
    args[3] = "--policy=contour".into();
    one_line(
        &run(BINARY, &args, None).await,
        "--policy contour: no policy named \"contour\" in the file (it has: \"edge\")",
    );

    one_line(
        &run(BINARY, &cutover_args(&t, &kc, &[&to_b, "--key=policies.yaml"]), None).await,
        &format!(
            "--key policies.yaml: ConfigMap {}/{CONFIG_MAP} has no key \"policies.yaml\" (it has: \"config.yaml\")",
            t.ns
        ),
    );

    one_line(
        &run(BINARY, &cutover_args(&t, &kc, &["--rollback"]), None).await,
        &format!("--rollback: ConfigMap {}/{CONFIG_MAP} has no annotation {ANNOTATION}", t.ns),
    );

    let mut args = cutover_args(&t, &kc, &[&to_b, "-n", "elsewhere"]);
    one_line(
        &run(BINARY, &args, None).await,
        &format!("`--namespace elsewhere` and --config-map {}/{CONFIG_MAP} name two namespaces; pass one", t.ns),
    );
    args[2] = format!("--config-map={CONFIG_MAP}");
    one_line(&run(BINARY, &args, None).await, &format!("--config-map elsewhere/{CONFIG_MAP}: ConfigMap not found"));

    let group = format!("isg-e2e:cutover-readers-{}", t.ns);
    readers_without_patch(&t, &group).await;
    let reader = t.cluster.kubeconfig_for("cutover-reader", Some(&group));
    one_line(
        &run(BINARY, &cutover_args(&t, &reader, &[&to_b]), None).await,
        &format!(
            "--config-map {}/{CONFIG_MAP}: this identity may not patch it (RBAC: cutover needs patch on configmaps",
            t.ns
        ),
    );

    // Kept sources that would not fit in the annotations (the API server's 256 KiB for all of
    // them together) are refused before anything is written.
    let big = policy_file(&t.ns, &format!("{}/controller-a", t.ns));
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "isg-big", "annotations": {"filler": "y".repeat(256 * 1024 - 64)}},
        "data": {"config.yaml": big}
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).create(&PostParams::default(), &cm).await.unwrap();
    let mut args = cutover_args(&t, &kc, &[&to_b]);
    args[2] = format!("--config-map={}/isg-big", t.ns);
    let out = run(BINARY, &args, None).await;
    one_line(&out, &format!("--config-map {}/isg-big: the previous sources kept for --rollback (", t.ns));
    assert!(out.stderr.contains("would not fit in the ConfigMap's annotations"), "{}", out.stderr);

    // A Gateway policy is refused by name: the plan and the follow read Ingresses only.
    let gateways =
        "policies:\n- name: gw\n  kind: Gateway\n  gatewayClasses: [cilium]\n  publishStatusAddress: 192.0.2.20\n";
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "isg-gw"}, "data": {"config.yaml": gateways}})).unwrap();
    Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).create(&PostParams::default(), &cm).await.unwrap();
    let mut args = cutover_args(&t, &kc, &[&to_b]);
    args[2] = format!("--config-map={}/isg-gw", t.ns);
    args[3] = "--policy=gw".into();
    one_line(
        &run(BINARY, &args, None).await,
        "--policy gw: it governs Gateways, and cutover moves Ingress policies only (its plan and its follow read Ingresses): edit its source in the policy file",
    );
    let cm = Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).get("isg-gw").await.unwrap();
    assert_eq!(cm.data.unwrap()["config.yaml"], gateways, "nothing applied");

    // A previous value that the guard would refuse is not restored, with the guard's error.
    let broken = json!({"metadata": {"annotations": {ANNOTATION: "policies:\n  - name: edge\n    publishService: not-a-reference\n"}}});
    Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns)
        .patch(CONFIG_MAP, &PatchParams::default(), &Patch::Merge(&broken))
        .await
        .unwrap();
    one_line(
        &run(BINARY, &cutover_args(&t, &kc, &["--rollback"]), None).await,
        &format!(
            "the edited policy file would be refused by the guard, so it is not applied: config file config.yaml of ConfigMap {}/{CONFIG_MAP}: policies[0].publishService: ",
            t.ns
        ),
    );
    let cm = Api::<ConfigMap>::namespaced(t.admin.clone(), &t.ns).get(CONFIG_MAP).await.unwrap();
    assert!(cm.data.unwrap()["config.yaml"].contains("controller-a"), "nothing applied");
}

/// The old controller still running: it writes its address back whenever the guard moves an
/// Ingress (the webhook is not registered, so its writes are stored). The Ingress moves, is put
/// back, and `--timeout` names it as a fight with the other writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_puts_the_old_address_back_is_named_as_a_fight() {
    let t = TestEnv::new("cutover-fight").await;
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    lb_service(&services, "controller-a", A).await;
    lb_service(&services, "controller-b", B).await;
    let (guard, _kubelet) = start_guard(&t, "controller-a", None).await;
    let names = vec!["contested".to_owned()];
    create_ingress(&t.ingresses, "contested", Class::Field(&t.ns)).await;
    await_all(&t, &names, A, &guard).await;
    let rogue = t.rogue.clone();
    let old_controller = tokio::spawn(async move {
        loop {
            if let Ok(ingress) = rogue.get("contested").await
                && addresses(&ingress) != [A]
            {
                let _ = support::write_status(&rogue, "contested", &[A], false).await;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let to_b = format!("--to-publish-service={}/controller-b", t.ns);
    let out = run(BINARY, &cutover_args(&t, t.cluster.admin_kubeconfig(), &[&to_b, "--timeout=15s"]), None).await;
    old_controller.abort();
    assert_eq!(out.code, Some(1), "{} (guard log: {})", out.stderr, guard.log_path().display());
    let why =
        format!("1 FIGHT ({}/contested): moved, then written back: stored {A}, canonical {B}, status writers", t.ns);
    assert!(out.stderr.contains(&why), "{}", out.stderr);
    assert!(out.stderr.contains(support::ROGUE_USER), "the other writer is named: {}", out.stderr);
}
