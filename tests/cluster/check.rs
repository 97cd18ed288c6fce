//! `check` and `explain` against the real API server (issue 10, test 7): the built binary,
//! black box, run as a read-only identity; stored statuses are written with the admin client.
//! Exit codes: 0 all canonical, 1 drift, 2 any error.

use crate::support;

mod completion;
mod doctor;
mod output;
mod version;

use std::path::Path;
use std::process::{Command, Output};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use support::{Class, Cluster, TestEnv, create_ingress, kubeconfig, stored, write_status};

/// A group that may only read Ingresses, Services and IngressClasses: all `check` and `explain`
/// need for policies that name classes (a class policy may govern class-less Ingresses through
/// the default IngressClass).
const READERS: &str = "isg-e2e:check-readers";
const CANONICAL: [&str; 2] = ["203.0.113.10", "203.0.113.20"];

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Run {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_ingress-status-guard"))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run ingress-status-guard");
    let run = Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    println!("$ ingress-status-guard {}\n{}{}(exit {:?})\n", args.join(" "), run.stdout, run.stderr, run.code);
    run
}

/// Grants `READERS` get/list on Ingresses, get on Services and list on IngressClasses (once per
/// API server) and
/// returns a kubeconfig of a user in that group.
async fn reader_kubeconfig(t: &TestEnv) -> std::path::PathBuf {
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": READERS},
        "rules": [
            {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["get", "list"]},
            {"apiGroups": [""], "resources": ["services"], "verbs": ["get"]},
            {"apiGroups": ["networking.k8s.io"], "resources": ["ingressclasses"], "verbs": ["list"]},
        ]
    }))
    .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": READERS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READERS},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": READERS}]
    }))
    .unwrap();
    let pp = PostParams::default();
    // Tests of this binary share the API server: the first one creates the role.
    for result in [
        Api::<ClusterRole>::all(t.admin.clone()).create(&pp, &role).await.map(|_| ()),
        Api::<ClusterRoleBinding>::all(t.admin.clone()).create(&pp, &binding).await.map(|_| ()),
    ] {
        match result {
            Ok(()) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("grant {READERS}: {e}"),
        }
    }
    t.cluster.kubeconfig_for("isg-check", Some(READERS))
}

/// A LoadBalancer Service `edge` in the test namespace whose canonical addresses are
/// `CANONICAL`: its load-balancer IP, then its externalIP appended.
async fn publish_service(t: &TestEnv) {
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "edge"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}], "externalIPs": ["203.0.113.20"]}
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.expect("create Service edge");
    services
        .patch_status(
            "edge",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}]}}})),
        )
        .await
        .expect("write the Service's load balancer");
}

/// The table line of Ingress `ns/name`, split into columns.
fn row<'a>(table: &'a str, ns: &str, name: &str) -> Option<Vec<&'a str>> {
    let key = format!("{ns}/{name}");
    table.lines().map(|l| l.split_whitespace().collect::<Vec<_>>()).find(|cols| cols.first() == Some(&key.as_str()))
}

#[tokio::test]
async fn check_names_each_drifted_ingress_then_passes_once_statuses_are_canonical() {
    let t = TestEnv::new("check").await;
    let other_ns = t.cluster.namespace(&t.admin, "check-b").await;
    let other: Api<k8s_openapi::api::networking::v1::Ingress> = Api::namespaced(t.admin.clone(), &other_ns);
    publish_service(&t).await;
    let reader = reader_kubeconfig(&t).await;
    // A class of this test only, so Ingresses of tests running alongside are not governed.
    let class = format!("cls-{}", t.ns);

    create_ingress(&t.ingresses, "web", Class::Field(&class)).await;
    write_status(&t.ingresses, "web", &["198.51.100.1"], false).await.expect("stale status");
    create_ingress(&other, "api", Class::Annotation(&class)).await; // no status at all
    create_ingress(&t.ingresses, "ok", Class::Field(&class)).await;
    write_status(&t.ingresses, "ok", &["203.0.113.20", "203.0.113.10"], false).await.expect("canonical status");
    create_ingress(&t.ingresses, "other", Class::Field("someone-else")).await;
    write_status(&t.ingresses, "other", &["198.51.100.9"], false).await.expect("ungoverned status");

    let kubeconfig = format!("--kubeconfig={}", reader.display());
    let publish = format!("--publish-service={}/edge", t.ns);
    let class_flag = format!("--ingress-class={class}");
    let args = ["check", &kubeconfig, &publish, &class_flag];

    let out = run(&args);
    assert_eq!(out.code, Some(1), "drift exits 1: {}", out.stderr);
    let web = row(&out.stdout, &t.ns, "web").unwrap_or_else(|| panic!("web listed:\n{}", out.stdout));
    assert_eq!(
        web[1..],
        ["default", "service", &format!("{}/edge", t.ns), "198.51.100.1", "203.0.113.10,203.0.113.20", "DRIFT"]
    );
    let api = row(&out.stdout, &other_ns, "api").unwrap_or_else(|| panic!("api listed:\n{}", out.stdout));
    assert_eq!(api[4..], ["<none>", "203.0.113.10,203.0.113.20", "DRIFT"]);
    assert_eq!(row(&out.stdout, &t.ns, "ok").map(|r| r[6]), Some("OK"), "{}", out.stdout);
    assert!(row(&out.stdout, &t.ns, "other").is_none(), "ungoverned Ingresses are not listed:\n{}", out.stdout);
    assert!(
        out.stdout.lines().last().unwrap().starts_with("governed Ingresses: 3 (1 OK, 2 DRIFT, 0 UNRESOLVED)"),
        "{}",
        out.stdout
    );

    let out = run(&[&args[..], &["-o", "json"]].concat());
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).expect("-o json prints one JSON document");
    assert_eq!(report["summary"]["drift"], 2);
    assert_eq!(report["summary"]["ok"], 1);
    assert!(report["summary"]["notGoverned"].as_u64() >= Some(1), "{report}");
    let mut drifted: Vec<String> = report["ingresses"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["state"] == "DRIFT")
        .map(|r| format!("{}/{}", r["namespace"].as_str().unwrap(), r["name"].as_str().unwrap()))
        .collect();
    drifted.sort();
    let mut want = vec![format!("{}/web", t.ns), format!("{other_ns}/api")];
    want.sort();
    assert_eq!(drifted, want);
    let web = report["ingresses"].as_array().unwrap().iter().find(|r| r["name"] == "web").unwrap();
    assert_eq!(web["canonical"], json!([{"ip": "203.0.113.10"}, {"ip": "203.0.113.20"}]));
    assert_eq!(web["stored"], json!([{"ip": "198.51.100.1"}]));

    // -n limits the report to one namespace.
    let out = run(&[&args[..], &["-n", &other_ns]].concat());
    assert_eq!(out.code, Some(1));
    assert!(out.stdout.lines().last().unwrap().starts_with("governed Ingresses: 1 (0 OK, 1 DRIFT"), "{}", out.stdout);

    // What a reconciler does, done here with the admin client: write the canonical statuses.
    write_status(&t.ingresses, "web", &CANONICAL, false).await.expect("heal web");
    write_status(&other, "api", &CANONICAL, false).await.expect("heal api");
    let out = run(&args);
    assert_eq!(out.code, Some(0), "all canonical exits 0: {}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.lines().last().unwrap().starts_with("governed Ingresses: 3 (3 OK, 0 DRIFT, 0 UNRESOLVED)"),
        "{}",
        out.stdout
    );

    // Read-only: no status write came from the reader, and the ungoverned one is as written.
    for (ns, name) in [(t.ns.as_str(), "web"), (other_ns.as_str(), "api"), (t.ns.as_str(), "other")] {
        let writers: Vec<String> = t
            .cluster
            .ingress_status_audit(ns, name)
            .iter()
            .map(|e| e["user"]["username"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert!(!writers.iter().any(|u| u == "isg-check"), "{ns}/{name} status written by check: {writers:?}");
    }
    assert_eq!(stored(&t.ingresses, "other").await, ["198.51.100.9"]);
}

/// The check's own source being gone makes every Ingress unresolved, not canonical: exit 1.
#[tokio::test]
async fn check_reports_an_unresolved_source() {
    let t = TestEnv::new("check-unres").await;
    let reader = reader_kubeconfig(&t).await;
    let class = format!("cls-{}", t.ns);
    create_ingress(&t.ingresses, "web", Class::Field(&class)).await;
    write_status(&t.ingresses, "web", &["198.51.100.1"], false).await.expect("status");
    let out = run(&[
        "check",
        &format!("--kubeconfig={}", reader.display()),
        &format!("--publish-service={}/gone", t.ns),
        &format!("--ingress-class={class}"),
    ]);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let web = row(&out.stdout, &t.ns, "web").unwrap_or_else(|| panic!("web listed:\n{}", out.stdout));
    assert_eq!(web[4..], ["198.51.100.1", "?", "UNRESOLVED", "(Service", &format!("{}/gone", t.ns), "not", "found)"]);
}

#[tokio::test]
async fn explain_names_the_policy_the_source_and_the_canonical_value() {
    let t = TestEnv::new("explain").await;
    publish_service(&t).await;
    let reader = reader_kubeconfig(&t).await;
    let class = format!("cls-{}", t.ns);
    create_ingress(&t.ingresses, "web", Class::Annotation(&class)).await;
    write_status(&t.ingresses, "web", &["198.51.100.1"], false).await.expect("stale status");
    create_ingress(&t.ingresses, "plain", Class::None).await;

    // Two policies from a file: ours, and one for a class nobody here uses.
    let config = t.cluster.scratch_dir(&format!("explain-{}", t.ns)).join("policies.yaml");
    std::fs::write(
        &config,
        format!(
            "policies:\n- name: edge\n  ingressClasses: [{class}]\n  publishService: {ns}/edge\n  mode: deny\n\
             - name: fixed\n  ingressClasses: [unused]\n  publishStatusAddress: 192.0.2.10\n",
            ns = t.ns
        ),
    )
    .unwrap();
    let kubeconfig = format!("--kubeconfig={}", reader.display());
    let config_flag = format!("--config={}", config.display());

    let target = format!("{}/web", t.ns);
    let out = run(&["explain", &target, &kubeconfig, &config_flag]);
    assert_eq!(out.code, Some(1), "drift exits 1: {}", out.stderr);
    let line = |label: &str| -> String {
        out.stdout
            .lines()
            .find(|l| l.starts_with(&format!("{label}:")))
            .unwrap_or_else(|| panic!("no {label} line:\n{}", out.stdout))
            .to_owned()
    };
    assert!(line("Class").contains(&format!("{class:?} (from annotation kubernetes.io/ingress.class)")));
    assert!(line("Policy").contains("\"edge\" (mode deny;"), "{}", out.stdout);
    assert!(line("Rule").ends_with("governed because its class is in ingressClasses"), "{}", out.stdout);
    assert!(line("Source").ends_with(&format!("service {}/edge", t.ns)), "{}", out.stdout);
    assert!(
        line("Resolved").ends_with(
            "203.0.113.10,203.0.113.20 (LoadBalancer Service: status ip, externalIPs appended; ports dropped)"
        ),
        "{}",
        out.stdout
    );
    assert!(line("Stored").ends_with("198.51.100.1"), "{}", out.stdout);
    assert!(line("Canonical").ends_with("203.0.113.10,203.0.113.20"), "{}", out.stdout);
    assert!(line("Webhook").contains("refuse it (denied)"), "{}", out.stdout);

    // An Ingress no policy governs says why, and exits 0.
    let out = run(&["explain", &format!("{}/plain", t.ns), &kubeconfig, &config_flag]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("Policy:    none: policy \"edge\" governs classes"), "{}", out.stdout);
    assert!(out.stdout.contains("allow it unchanged (not_governed)"), "{}", out.stdout);

    // Unknown Ingress: exit 2, named.
    let out = run(&["explain", &format!("{}/missing", t.ns), &kubeconfig, &config_flag]);
    assert_eq!(out.code, Some(2));
    assert!(out.stderr.contains(&format!("Ingress {}/missing not found", t.ns)), "{}", out.stderr);
}

#[tokio::test]
async fn errors_exit_2_with_a_message_naming_what_to_fix() {
    let t = TestEnv::new("check-err").await;
    // A kubeconfig for a port nothing listens on.
    let admin = std::fs::read_to_string(t.cluster.admin_kubeconfig()).unwrap();
    let port = support::cluster::free_port();
    let unreachable = t.cluster.scratch_dir(&format!("unreachable-{}", t.ns)).join("kubeconfig");
    std::fs::write(&unreachable, admin.replace(&t.cluster.server, &format!("https://127.0.0.1:{port}"))).unwrap();
    let unreachable = format!("--kubeconfig={}", unreachable.display());
    // An identity with no rights at all.
    let nobody = format!("--kubeconfig={}", t.cluster.kubeconfig_for("isg-nobody", None).display());
    let admin = format!("--kubeconfig={}", t.cluster.admin_kubeconfig().display());
    let missing_config = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-such-policies.yaml");
    let missing_config = format!("--config={}", missing_config.display());

    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "unreachable API server",
            vec!["check", &unreachable, "--publish-status-address=192.0.2.1"],
            "cannot list Ingresses: ServiceError: client error (Connect): tcp connect error: Connection refused",
        ),
        (
            "unreachable, explain",
            vec!["explain", "default/web", &unreachable, "--publish-status-address=192.0.2.1"],
            "cannot get Ingress default/web: ",
        ),
        (
            "forbidden",
            vec!["check", &nobody, "--publish-status-address=192.0.2.1"],
            "cannot list Ingresses: ingresses.networking.k8s.io is forbidden: User \"isg-nobody\" cannot list resource \"ingresses\" in API group \"networking.k8s.io\" at the cluster scope (HTTP 403 Forbidden)",
        ),
        ("no source", vec!["check", &admin], "no address source: pass --publish-service"),
        (
            "bad static list",
            vec!["check", &admin, "--publish-status-address=bad_host"],
            "--publish-status-address \"bad_host\"",
        ),
        ("missing config", vec!["explain", "default/web", &admin, &missing_config], "cannot read config file"),
        (
            "both sources",
            vec!["check", &admin, "--publish-status-address=192.0.2.1", "--publish-service=a/b"],
            "cannot be used with",
        ),
        ("bad output", vec!["check", &admin, "--publish-status-address=192.0.2.1", "-o", "xml"], "invalid value 'xml'"),
        (
            "bad namespace",
            vec!["check", &admin, "--publish-status-address=192.0.2.1", "-n", "Bad"],
            "not a valid namespace name",
        ),
        (
            "bad target",
            vec!["explain", "Web", &admin, "--publish-status-address=192.0.2.1"],
            "must be NAMESPACE/NAME or NAME",
        ),
        (
            "bad timeout",
            vec!["check", &admin, "--publish-status-address=192.0.2.1", "--request-timeout=0"],
            "whole number of seconds",
        ),
    ];
    for (name, args, want) in cases {
        let out = run(&args);
        assert_eq!(out.code, Some(2), "case {name}: {}", out.stderr);
        assert!(out.stderr.contains(want), "case {name}: stderr lacks {want:?}:\n{}", out.stderr);
        assert!(out.stdout.is_empty(), "case {name}: nothing on stdout: {}", out.stdout);
        let errors = out.stderr.lines().filter(|l| l.contains("error")).count();
        assert_eq!(errors, 1, "case {name}: one error line, no log noise:\n{}", out.stderr);
    }
}

/// A fleet: the shared API server (context `alpha`) and one of its own (`beta`) in one
/// kubeconfig. One table with a CLUSTER column and a summary per cluster; once `beta` is
/// stopped it is a row with its error and the exit code follows `alpha`'s drift; only when every
/// cluster fails is it 2.
#[tokio::test]
async fn check_reads_a_fleet_of_clusters_into_one_table() {
    let t = TestEnv::new("fleet").await;
    let beta = Cluster::fresh().await;
    let beta_admin = beta.admin().await;
    let class = format!("cls-{}", t.ns);
    create_ingress(&t.ingresses, "web", Class::Field(&class)).await;
    write_status(&t.ingresses, "web", &["198.51.100.1"], false).await.expect("stale status");
    let beta_ns = beta.namespace(&beta_admin, "fleet").await;
    let beta_ingresses: Api<k8s_openapi::api::networking::v1::Ingress> = Api::namespaced(beta_admin, &beta_ns);
    create_ingress(&beta_ingresses, "web", Class::Field(&class)).await;
    write_status(&beta_ingresses, "web", &["203.0.113.10"], false).await.expect("canonical status");

    let dir = t.cluster.scratch_dir(&format!("fleet-{}", t.ns));
    let gamma = kubeconfig::unreachable(t.cluster.admin_kubeconfig(), &t.cluster.server, &dir.join("gamma.yaml"));
    let two = kubeconfig::with_contexts(
        &dir.join("fleet.yaml"),
        &[("alpha", t.cluster.admin_kubeconfig(), None), ("beta", beta.admin_kubeconfig(), None)],
    );
    let three = kubeconfig::with_contexts(
        &dir.join("fleet-3.yaml"),
        &[
            ("alpha", t.cluster.admin_kubeconfig(), None),
            ("beta", beta.admin_kubeconfig(), None),
            ("gamma", &gamma, None),
        ],
    );
    let kc = format!("--kubeconfig={}", two.display());
    let policy = ["--publish-status-address=203.0.113.10", &format!("--ingress-class={class}"), "--request-timeout=5"];
    let fleet = [&["check", &kc, "--context=alpha", "--context", "beta"][..], &policy[..]].concat();
    let alpha_web = [
        "alpha",
        &format!("{}/web", t.ns),
        "default",
        "static",
        "[203.0.113.10]",
        "198.51.100.1",
        "203.0.113.10",
        "DRIFT",
    ];
    let beta_web = [
        "beta",
        &format!("{beta_ns}/web"),
        "default",
        "static",
        "[203.0.113.10]",
        "203.0.113.10",
        "203.0.113.10",
        "OK",
    ];
    let lines = |stdout: &str| -> Vec<Vec<String>> {
        stdout.lines().map(|l| l.split_whitespace().map(str::to_owned).collect()).collect()
    };

    let out = run(&fleet);
    assert_eq!(out.code, Some(1), "alpha drifts: {}", out.stderr);
    let table = lines(&out.stdout);
    assert_eq!(table[0], ["CLUSTER", "INGRESS", "POLICY", "SOURCE", "STORED", "CANONICAL", "STATE"], "{}", out.stdout);
    assert_eq!(table[1], alpha_web, "{}", out.stdout);
    assert_eq!(table[2], beta_web, "{}", out.stdout);
    // Tests running alongside add Ingresses of other classes to alpha: "not governed" varies.
    let governed = |stdout: &str| -> Vec<String> {
        stdout.lines().map(|l| l.split("; not governed").next().unwrap_or_default().to_owned()).collect()
    };
    assert_eq!(
        governed(&out.stdout)[3..],
        [
            "cluster alpha: governed Ingresses: 1 (0 OK, 1 DRIFT, 0 UNRESOLVED)",
            "cluster beta: governed Ingresses: 1 (1 OK, 0 DRIFT, 0 UNRESOLVED)",
        ],
        "{}",
        out.stdout
    );
    // --all-contexts: every context of the file, the same report.
    let all = run(&[&["check", &kc, "--all-contexts"][..], &policy[..]].concat());
    assert_eq!((all.code, governed(&all.stdout)), (Some(1), governed(&out.stdout)));
    let json = run(&[&fleet[..], &["-o", "json"]].concat());
    let doc: Value = serde_json::from_str(&json.stdout).expect("one JSON document");
    let clusters: Vec<&str> =
        doc["ingresses"].as_array().unwrap().iter().map(|r| r["cluster"].as_str().unwrap()).collect();
    assert_eq!(clusters, ["alpha", "beta"], "{doc}");
    assert_eq!(doc["clusters"][1]["summary"]["ok"], 1, "{doc}");

    // Halfway: beta goes down. Its row names the error; alpha's drift still decides the exit.
    beta.stop_apiserver();
    let out = run(&fleet);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let table = lines(&out.stdout);
    assert_eq!(table[1], alpha_web, "{}", out.stdout);
    assert_eq!(table[2][..7], ["beta", "-", "-", "-", "-", "-", "ERROR"], "{}", out.stdout);
    assert!(out.stdout.contains("Connection refused"), "{}", out.stdout);
    assert!(out.stdout.contains("\ncluster beta: not read (ERROR row above)\n"), "{}", out.stdout);
    write_status(&t.ingresses, "web", &["203.0.113.10"], false).await.expect("heal alpha");
    let out = run(&fleet);
    assert_eq!(out.code, Some(0), "alpha canonical, beta down: 0\n{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("cluster alpha: governed Ingresses: 1 (1 OK, 0 DRIFT"), "{}", out.stdout);

    // Every cluster down: 2, each with its row, and one error line.
    let kc3 = format!("--kubeconfig={}", three.display());
    let out = run(&[&["check", &kc3, "--context=beta", "--context=gamma"][..], &policy[..]].concat());
    assert_eq!(out.code, Some(2), "{}", out.stdout);
    let errors: Vec<&str> = lines(&out.stdout)
        .iter()
        .filter(|l| l.get(6).map(String::as_str) == Some("ERROR"))
        .map(|l| if l[0] == "beta" { "beta" } else { "gamma" })
        .collect();
    assert_eq!(errors, ["beta", "gamma"], "{}", out.stdout);
    assert_eq!(out.stderr.trim(), "error: no cluster could be read: every context failed (rows above)");
    // An unknown context is that cluster's error, not the fleet's.
    let out = run(&[&["check", &kc3, "--context=alpha", "--context=nowhere"][..], &policy[..]].concat());
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("ERROR (cannot build a Kubernetes client: context \"nowhere\": "), "{}", out.stdout);
}

/// One scope: with `--webhook-configuration` naming a configuration whose `namespaceSelector`
/// leaves a namespace out, `check` and `explain` judge that namespace's Ingresses as not
/// governed, as the reconciler leaves them alone; without it (or as an identity that may not
/// read it, told so in one warning) the policies alone scope the report.
#[tokio::test]
async fn check_and_explain_judge_within_the_webhook_configurations_scope() {
    use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
    let t = TestEnv::new("check-scope").await;
    let outside_ns = t.cluster.namespace(&t.admin, "check-scope-out").await;
    let outside: Api<k8s_openapi::api::networking::v1::Ingress> = Api::namespaced(t.admin.clone(), &outside_ns);
    let class = format!("cls-{}", t.ns);
    for api in [&t.ingresses, &outside] {
        create_ingress(api, "web", Class::Field(&class)).await;
        write_status(api, "web", &["198.51.100.1"], false).await.expect("stale status");
    }
    // Its webhook is unreachable (Ignore): its rules and namespaceSelector are what is read.
    let name = format!("isg-scope-{}", t.ns);
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": name},
        "webhooks": [{
            "name": "scope.check.ingress-status-guard.test",
            "clientConfig": {"url": "https://127.0.0.1:1/mutate"},
            "rules": [support::webhook::status_rule("ingresses")],
            "namespaceSelector": {"matchLabels": {support::cluster::NAMESPACE_LABEL: t.ns}},
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
        }]
    }))
    .unwrap();
    Api::<MutatingWebhookConfiguration>::all(t.admin.clone()).create(&PostParams::default(), &config).await.unwrap();

    let admin = format!("--kubeconfig={}", t.cluster.admin_kubeconfig().display());
    let class_flag = format!("--ingress-class={class}");
    let scope_flag = format!("--webhook-configuration={name}");
    let base = ["check", &admin, "--publish-status-address=192.0.2.1", &class_flag];
    let out = run(&[&base[..], &[&scope_flag]].concat());
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert_eq!(row(&out.stdout, &t.ns, "web").map(|r| r[6]), Some("DRIFT"), "{}", out.stdout);
    assert!(row(&out.stdout, &outside_ns, "web").is_none(), "outside the scope: not governed\n{}", out.stdout);
    let explain = |target: String| {
        run(&["explain", &target, &admin, "--publish-status-address=192.0.2.1", &class_flag, &scope_flag]).code
    };
    assert_eq!(explain(format!("{}/web", t.ns)), Some(1), "inside: drift");
    assert_eq!(explain(format!("{outside_ns}/web")), Some(0), "outside: not governed");

    // No such configuration (the default name, here): the policies alone scope it.
    let out = run(&base);
    assert_eq!(row(&out.stdout, &outside_ns, "web").map(|r| r[6]), Some("DRIFT"), "{}", out.stdout);
    // A reader that may not see the configuration: one warning, the policies alone.
    let reader = format!("--kubeconfig={}", reader_kubeconfig(&t).await.display());
    let out = run(&["check", &reader, "--publish-status-address=192.0.2.1", &class_flag, &scope_flag]);
    assert_eq!(row(&out.stdout, &outside_ns, "web").map(|r| r[6]), Some("DRIFT"), "{}", out.stdout);
    assert!(
        out.stderr.contains(&format!("cannot read MutatingWebhookConfiguration {name} (forbidden)")),
        "{}",
        out.stderr
    );
    Api::<MutatingWebhookConfiguration>::all(t.admin.clone()).delete(&name, &Default::default()).await.unwrap();
}
