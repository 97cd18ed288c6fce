//! The values Helm users expect of a chart: `image.registry`/`digest` and `global.imageRegistry`,
//! pull secrets (`global.imagePullSecrets` too), an existing ServiceAccount, `extraEnv`,
//! `commonLabels`, `nameOverride`/`namespaceOverride`, the webhook configuration's annotations;
//! each renders what it says, the schema refuses a wrong one naming it, and a release with all of
//! them installs on the real API server (every version the suite runs).

use serde_json::{Value, json};

use super::{CHART, Helm, NAMESPACE, NO_HOOK, RELEASE, find, scratch, write};
use crate::support::TestEnv;

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Every pod spec of the rendered objects (Deployment, Jobs, CronJob, the test Pod), by kind/name.
fn pod_specs(docs: &[Value]) -> Vec<(String, &Value)> {
    docs.iter()
        .filter_map(|d| {
            let spec = match d["kind"].as_str()? {
                "Deployment" | "Job" => &d["spec"]["template"]["spec"],
                "CronJob" => &d["spec"]["jobTemplate"]["spec"]["template"]["spec"],
                "Pod" => &d["spec"],
                _ => return None,
            };
            Some((format!("{}/{}", d["kind"].as_str()?, d["metadata"]["name"].as_str()?), spec))
        })
        .collect()
}

fn images(docs: &[Value]) -> Vec<(String, String)> {
    pod_specs(docs)
        .into_iter()
        .map(|(name, spec)| (name, spec["containers"][0]["image"].as_str().unwrap().to_owned()))
        .collect()
}

/// Each value alone renders what it says, in every pod and object it concerns.
#[test]
fn the_toolbox_values_render_what_they_say() {
    let dir = scratch("toolbox-values");
    let helm = Helm::new(3, &dir);
    let defaults = helm.template(&[]);
    let pods = pod_specs(&defaults);
    assert_eq!(
        pods.len(),
        6,
        "Deployment, certgen Job and CronJob, doctor Job, the uninstall's remove Job and test Pod: {pods:?}"
    );
    assert!(
        images(&defaults).iter().all(|(_, image)| image == "ingress-status-guard:0.1.0"),
        "{:?}",
        images(&defaults)
    );

    // Digest: pins every image, the tag is not used.
    let docs = helm.template(&["--set", &format!("image.digest={DIGEST}"), "--set", "image.tag=9.9.9"]);
    let want = format!("ingress-status-guard@{DIGEST}");
    assert!(images(&docs).iter().all(|(_, image)| *image == want), "{:?}", images(&docs));
    // Registry split: image.registry, replaced by global.imageRegistry.
    let docs = helm.template(&["--set", "image.registry=registry.example.com/team/"]);
    assert!(images(&docs).iter().all(|(_, i)| i == "registry.example.com/team/ingress-status-guard:0.1.0"));
    let docs = helm.template(&[
        "--set",
        "image.registry=registry.example.com",
        "--set",
        "global.imageRegistry=mirror.example.org",
        "--set",
        &format!("image.digest={DIGEST}"),
    ]);
    let want = format!("mirror.example.org/ingress-status-guard@{DIGEST}");
    assert!(images(&docs).iter().all(|(_, image)| *image == want), "{:?}", images(&docs));

    // Pull secrets: global ones (names or {name}) and the chart's, on every pod; none by default.
    let docs =
        helm.template(&["--set", "global.imagePullSecrets={shared}", "--set", "imagePullSecrets[0].name=regcred"]);
    for (name, spec) in pod_specs(&docs) {
        assert_eq!(spec["imagePullSecrets"], json!([{"name": "shared"}, {"name": "regcred"}]), "{name}");
    }
    for (name, spec) in pod_specs(&defaults) {
        assert!(spec["imagePullSecrets"].is_null(), "{name}: {}", spec["imagePullSecrets"]);
    }
    let values = write(&dir, "pull.yaml", "global:\n  imagePullSecrets: [{name: shared}]\n");
    let docs = helm.template(&["-f", &values]);
    assert_eq!(
        find(&docs, "Deployment", RELEASE)["spec"]["template"]["spec"]["imagePullSecrets"],
        json!([{"name": "shared"}])
    );

    // An existing ServiceAccount: none rendered for the webhook, the pods run as it and every
    // binding of the webhook's RBAC names it; certgen and doctor keep their own.
    let docs = helm.template(&["--set", "serviceAccount.create=false", "--set", "serviceAccount.name=platform-isg"]);
    assert!(!docs.iter().any(|d| d["kind"] == "ServiceAccount" && d["metadata"]["name"] == RELEASE));
    assert_eq!(find(&docs, "Deployment", RELEASE)["spec"]["template"]["spec"]["serviceAccountName"], "platform-isg");
    let webhook_bindings: Vec<&Value> = docs
        .iter()
        .filter(|d| {
            ["RoleBinding", "ClusterRoleBinding"].contains(&d["kind"].as_str().unwrap())
                && d["metadata"]["labels"]["app.kubernetes.io/component"] == "webhook"
        })
        .collect();
    assert!(webhook_bindings.len() >= 4, "{webhook_bindings:?}");
    for b in webhook_bindings {
        assert_eq!(
            b["subjects"],
            json!([{"kind": "ServiceAccount", "name": "platform-isg", "namespace": NAMESPACE}]),
            "{}",
            b["metadata"]["name"]
        );
    }
    for sa in ["ingress-status-guard-certgen", "ingress-status-guard-doctor"] {
        find(&docs, "ServiceAccount", sa);
    }
    // A created one with its annotations and another name.
    let docs = helm.template(&[
        "--set",
        "serviceAccount.name=isg-pods",
        "--set",
        "serviceAccount.annotations.iam\\.gke\\.io/gcp-service-account=isg@p.iam.gserviceaccount.com",
    ]);
    let sa = find(&docs, "ServiceAccount", "isg-pods");
    assert_eq!(
        sa["metadata"]["annotations"],
        json!({"iam.gke.io/gcp-service-account": "isg@p.iam.gserviceaccount.com"})
    );
    assert_eq!(find(&docs, "Deployment", RELEASE)["spec"]["template"]["spec"]["serviceAccountName"], "isg-pods");
    // create=false without a name fails the render, saying what to set.
    let out = helm.run(&["template", RELEASE, CHART, "--set", "serviceAccount.create=false"]);
    assert!(
        !out.success && out.stderr.contains("serviceAccount.name: with serviceAccount.create=false"),
        "{}",
        out.stderr
    );

    // extraEnv: after the chart's own variables.
    let docs = helm.template(&[
        "--set",
        "extraEnv[0].name=HTTPS_PROXY",
        "--set",
        "extraEnv[0].value=http://proxy:3128",
        "--set",
        "extraEnv[1].name=NODE",
        "--set",
        "extraEnv[1].valueFrom.fieldRef.fieldPath=spec.nodeName",
    ]);
    let env = &find(&docs, "Deployment", RELEASE)["spec"]["template"]["spec"]["containers"][0]["env"];
    let env = env.as_array().unwrap();
    assert_eq!(env[0]["name"], "POD_NAME");
    assert_eq!(
        env[env.len() - 2..],
        [
            json!({"name": "HTTPS_PROXY", "value": "http://proxy:3128"}),
            json!({"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}})
        ]
    );

    // commonLabels: on every object and the pods, never in a selector.
    let docs = helm.template(&["--set", "commonLabels.team=edge", "--set", "certificate.mode=certManager"]);
    for d in &docs {
        assert_eq!(d["metadata"]["labels"]["team"], "edge", "{} {}", d["kind"], d["metadata"]["name"]);
    }
    let deployment = find(&docs, "Deployment", RELEASE);
    assert_eq!(deployment["spec"]["template"]["metadata"]["labels"]["team"], "edge");
    assert!(deployment["spec"]["selector"]["matchLabels"]["team"].is_null());

    // nameOverride and namespaceOverride: the names, the name label, every namespace, and what
    // the binary is told (its Lease and webhook configuration, the doctor's target).
    let docs = helm.template(&["--set", "nameOverride=isg", "--set", "namespaceOverride=platform"]);
    let fullname = "ingress-status-guard-isg";
    let deployment = find(&docs, "Deployment", fullname);
    assert_eq!(deployment["metadata"]["labels"]["app.kubernetes.io/name"], "isg");
    assert_eq!(deployment["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"], "isg");
    for d in &docs {
        let ns = &d["metadata"]["namespace"];
        assert!(ns.is_null() || ns == "platform", "{} {}: {ns}", d["kind"], d["metadata"]["name"]);
    }
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(args.contains(&format!("--leader-election-lease-name={fullname}")), "{args}");
    let webhook = find(&docs, "MutatingWebhookConfiguration", fullname);
    assert_eq!(
        webhook["webhooks"][0]["clientConfig"]["service"],
        json!({"name": fullname, "namespace": "platform", "path": "/mutate", "port": 443})
    );
    for b in docs.iter().filter(|d| d["kind"] == "ClusterRoleBinding") {
        assert_eq!(b["subjects"][0]["namespace"], "platform", "{}", b["metadata"]["name"]);
    }

    // Webhook annotations: AKS's admissions enforcer is told off by default; yours replace the
    // default, and cert-manager's injection annotation is kept beside them.
    let annotations =
        |docs: &[Value]| find(docs, "MutatingWebhookConfiguration", RELEASE)["metadata"]["annotations"].clone();
    assert_eq!(annotations(&defaults), json!({"admissions.enforcer/disabled": "true"}));
    let values = write(&dir, "annotations.yaml", "webhook:\n  annotations:\n    example.com/owner: platform\n");
    let docs = helm.template(&["-f", &values, "--set", "certificate.mode=certManager"]);
    assert_eq!(
        annotations(&docs),
        json!({
            "admissions.enforcer/disabled": "true",
            "example.com/owner": "platform",
            "cert-manager.io/inject-ca-from": "ingress-status-guard/ingress-status-guard-serving"
        })
    );
    let values = write(&dir, "no-annotations.yaml", "webhook:\n  annotations: null\n");
    assert!(annotations(&helm.template(&["-f", &values])).is_null());
}

/// The schema refuses a wrong value of each, naming the field.
#[test]
fn the_schema_names_wrong_toolbox_values() {
    let helm = Helm::new(3, &scratch("toolbox-schema"));
    for (set, field) in [
        ("image.digest=latest", "/image/digest"),
        ("image.registry=reg example", "/image/registry"),
        ("global.imageRegistry=a b", "/global/imageRegistry"),
        ("global.imagePullSecrets[0].nme=x", "/global/imagePullSecrets/0"),
        ("imagePullSecrets[0].nme=regcred", "/imagePullSecrets/0"),
        ("serviceAccount.create=yes", "/serviceAccount/create"),
        ("serviceAccount.name=Not_A_Name", "/serviceAccount/name"),
        ("serviceAccount.annotations.a=1", "/serviceAccount/annotations/a"),
        ("extraEnv[0].value=x", "/extraEnv/0"),
        ("extraEnv[0].name=A,extraEnv[0].valu=x", "/extraEnv/0"),
        ("commonLabels.team=not a value", "/commonLabels/team"),
        ("nameOverride=Upper", "/nameOverride"),
        ("namespaceOverride=a_b", "/namespaceOverride"),
        ("webhook.annotations.a=1", "/webhook/annotations/a"),
        ("doctor.hook.wait=2h", "/doctor/hook/wait"),
        ("doctor.probe=just-a-name", "/doctor/probe"),
        ("doctor.hook.enable=false", "/doctor/hook"),
    ] {
        let out = helm.run(&["template", RELEASE, CHART, "--set", set]);
        assert!(!out.success, "--set {set} was accepted");
        assert!(out.stderr.contains(field), "--set {set}: the error does not name {field}:\n{}", out.stderr);
    }
}

/// A release with every toolbox value set installs on the real API server and its objects say
/// so: the image by digest through the registry, the pull secrets, the existing ServiceAccount
/// bound to the webhook's RBAC, the extra env, the labels and the webhook annotations. Each
/// value set alone passes a server-side dry run (strict field validation) in a namespace that
/// enforces the restricted Pod Security profile.
#[tokio::test]
async fn the_toolbox_values_install_on_the_api_server() {
    let t = TestEnv::new("chart-toolbox").await;
    let dir = t.cluster.scratch_dir("chart-toolbox");
    let helm = Helm::new(3, &dir);
    let admin = t.cluster.admin_kubeconfig();
    let kubectl_ok = |args: &[&str]| {
        let out = t.cluster.kubectl(admin, args);
        assert!(out.success, "kubectl {args:?}: {}", out.stderr);
        out.stdout
    };
    let (release, namespace) = ("toolbox", "chart-toolbox");
    let fullname = "toolbox-ingress-status-guard";
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": {
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/warn": "restricted"}}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "platform-isg", "namespace": namespace}},
    ]});
    kubectl_ok(&["apply", "--server-side", "-f", &write(&dir, "setup.json", &objects.to_string())]);
    // Scoped to one label no namespace has: this API server is shared with other tests.
    let scope = "webhook.namespaceSelector.matchLabels.isg-chart-toolbox=none";
    let digest = format!("image.digest={DIGEST}");
    let sets: [(&str, Vec<&str>); 6] = [
        ("digest", vec![&digest]),
        ("registry split", vec!["image.registry=registry.example.com", "global.imageRegistry=mirror.example.org"]),
        ("pull secrets", vec!["global.imagePullSecrets={shared}", "imagePullSecrets[0].name=regcred"]),
        ("existing ServiceAccount", vec!["serviceAccount.create=false", "serviceAccount.name=platform-isg"]),
        ("extra env", vec!["extraEnv[0].name=HTTPS_PROXY", "extraEnv[0].value=http://proxy:3128"]),
        (
            "webhook annotations and labels",
            vec!["webhook.annotations.example\\.com/owner=platform", "commonLabels.team=edge"],
        ),
    ];
    for (what, set) in &sets {
        let mut args = vec!["template", release, CHART, "--namespace", namespace, "--set", scope];
        for s in set {
            args.extend(["--set", s]);
        }
        let out = helm.run(&args);
        assert!(out.success, "{what}: {}", out.stderr);
        let mut docs = super::documents(&out.stdout);
        // The test Pod's ServiceAccount is not created by a dry run, and the API server refuses a
        // Pod without one; tests/cluster/chart/doctor.rs dry-runs it with its ServiceAccount in place.
        docs.retain(|d| d["kind"] != "Pod");
        let file = write(&dir, "dry-run.json", &json!({"apiVersion": "v1", "kind": "List", "items": docs}).to_string());
        let out = t.cluster.kubectl(admin, &["apply", "--dry-run=server", "--validate=strict", "-f", &file]);
        assert!(out.success, "{what}: the API server refused:\n{}\n{}", out.stderr, out.stdout);
        let accepted = out.stdout.lines().filter(|l| l.ends_with("(server dry run)")).count();
        assert_eq!(accepted, docs.len(), "{what}: every object accepted:\n{}", out.stdout);
        assert!(!out.stderr.contains("PodSecurity"), "{what}: warnings:\n{}", out.stderr);
    }

    let kubeconfig = format!("--kubeconfig={}", admin.display());
    let mut args =
        vec!["install", release, CHART, "--namespace", namespace, &kubeconfig, "--set", scope, "--set", NO_HOOK];
    for (_, set) in &sets {
        for s in set {
            args.extend(["--set", s]);
        }
    }
    let out = helm.run(&args);
    assert!(out.success, "helm install: {}\n{}", out.stderr, out.stdout);

    let deployment: Value =
        serde_json::from_str(&kubectl_ok(&["-n", namespace, "get", "deployment", fullname, "-o", "json"])).unwrap();
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["containers"][0]["image"], format!("mirror.example.org/ingress-status-guard@{DIGEST}"));
    assert_eq!(pod["imagePullSecrets"], json!([{"name": "shared"}, {"name": "regcred"}]));
    assert_eq!(pod["serviceAccountName"], "platform-isg");
    assert!(
        pod["containers"][0]["env"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "HTTPS_PROXY", "value": "http://proxy:3128"}))
    );
    assert_eq!(deployment["metadata"]["labels"]["team"], "edge");
    let annotations =
        kubectl_ok(&["get", "mutatingwebhookconfiguration", fullname, "-o", "jsonpath={.metadata.annotations}"]);
    let annotations: Value = serde_json::from_str(&annotations).unwrap();
    assert_eq!(annotations["admissions.enforcer/disabled"], "true");
    assert_eq!(annotations["example.com/owner"], "platform");
    // The chart made no ServiceAccount of its own for the pods, and its RBAC holds for yours.
    let out = t.cluster.kubectl(admin, &["-n", namespace, "get", "serviceaccount", fullname]);
    assert!(!out.success, "the chart created the pods' ServiceAccount although create=false");
    let me = format!("--as=system:serviceaccount:{namespace}:platform-isg");
    kubectl_ok(&["auth", "can-i", "patch", "ingresses.networking.k8s.io", "--subresource=status", "-A", &me]);
    kubectl_ok(&["auth", "can-i", "get", &format!("mutatingwebhookconfigurations/{fullname}"), &me]);

    // --no-hooks: the post-delete Job that removes admission objects would wait for a kubelet.
    let out = helm.run(&["uninstall", release, "--namespace", namespace, &kubeconfig, "--no-hooks"]);
    assert!(out.success, "helm uninstall: {}", out.stderr);
    kubectl_ok(&["delete", "namespace", namespace, "--wait=false"]);
}

/// Chart.yaml carries what Artifact Hub reads, and the release's packaging step
/// (scripts/release-chart.sh) turns the CHANGELOG's newest entry into `artifacthub.io/changes`;
/// a CHANGELOG whose newest entry is not the chart's version is refused, naming both.
#[test]
fn the_packaged_chart_carries_the_changelogs_newest_entry() {
    let dir = scratch("toolbox-package");
    let helm = Helm::new(3, &dir);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/release-chart.sh");
    let package = |chart: &str, dest: &str| {
        std::process::Command::new("bash").args([script, helm.bin.to_str().unwrap(), chart, dest]).output().unwrap()
    };
    let out = package(CHART, dir.join("out").to_str().unwrap());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tgz = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let shown = helm.run(&["show", "chart", &tgz]);
    assert!(shown.success, "{}", shown.stderr);
    let chart = &super::documents(&shown.stdout)[0];
    let annotations = &chart["annotations"];
    assert_eq!(annotations["artifacthub.io/license"], "Apache-2.0");
    assert!(!annotations["artifacthub.io/category"].is_null() && !annotations["artifacthub.io/links"].is_null());
    assert!(chart["icon"].as_str().unwrap().starts_with("https://"));
    assert!(!chart["maintainers"][0]["name"].is_null());
    let changes = &super::documents(annotations["artifacthub.io/changes"].as_str().expect("artifacthub.io/changes"))[0];
    let version = chart["version"].as_str().unwrap();
    let changelog = std::fs::read_to_string(format!("{CHART}/CHANGELOG.md")).unwrap();
    let newest = changelog.split(&format!("## {version}\n")).nth(1).expect("an entry for the chart's version");
    let newest = newest.split("\n## ").next().unwrap();
    let items: Vec<&str> = newest.lines().filter_map(|l| l.strip_prefix("- ")).collect();
    assert!(!items.is_empty());
    let described: Vec<&str> = changes.as_array().unwrap().iter().map(|c| c["description"].as_str().unwrap()).collect();
    assert_eq!(described, items, "one change per item of the newest entry, in order");
    assert!(changes.as_array().unwrap().iter().all(|c| c["kind"] == "added"
        || c["kind"] == "changed"
        || c["kind"] == "fixed"
        || c["kind"] == "removed"
        || c["kind"] == "deprecated"
        || c["kind"] == "security"));
    // The source Chart.yaml is left as it was.
    assert!(!std::fs::read_to_string(format!("{CHART}/Chart.yaml")).unwrap().contains("artifacthub.io/changes:"));

    // A newest entry of another version is refused.
    let copy = dir.join("ingress-status-guard");
    let cp = std::process::Command::new("cp").args(["-r", CHART, dir.to_str().unwrap()]).status().unwrap();
    assert!(cp.success());
    let log = copy.join("CHANGELOG.md");
    let text = std::fs::read_to_string(&log).unwrap().replacen(
        &format!("## {version}\n"),
        "## 9.9.9\n\n### Fixed\n\n- x\n\n## 0.0.1\n",
        1,
    );
    std::fs::write(&log, text).unwrap();
    let out = package(copy.to_str().unwrap(), dir.join("bad").to_str().unwrap());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("'9.9.9', not the chart's version '0.1.0'"), "{stderr}");
}
