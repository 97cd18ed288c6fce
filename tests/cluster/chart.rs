//! The Helm chart in `charts/ingress-status-guard`, with the real helm (built pinned from Go
//! modules by tests/helm/build.sh, Helm 3 and Helm 4) and the real API server of `support`:
//!
//! - `helm lint --strict` is clean, and the schema refuses wrong values naming the field;
//! - every rendered object (default values, cert-manager mode, a multi-policy file) passes a
//!   server-side dry run with strict field validation and no Pod Security warning under
//!   `restricted`;
//! - on a fresh API server: `helm install` with the default values, `helm upgrade` to several
//!   policies (their Roles appear) and back (they go), a cert-manager mode release, and
//!   `helm uninstall` leaving nothing behind, the MutatingWebhookConfiguration included;
//! - the chart's RBAC and policy file for a publish Service are all the webhook needs (the built
//!   binary runs as its ServiceAccount and enforces the Service's address);
//! - `admission.mode=policy` renders no webhook machinery, agrees with
//!   `overlays/admission-policy`, and its RBAC is all the guard in that mode needs;
//! - the chart says what the kustomize tree says: RBAC rules, webhook registration,
//!   securityContexts, probes, args, policies (one is checked against the other).

use crate::support;

mod doctor;
mod mode_switch;
mod policy_mode;
mod toolbox;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize as _;
use serde_json::{Value, json};

use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use support::{Class, Cluster, FailurePolicy, TestEnv, Webhook, cluster::KubectlOutput};

const CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/charts/ingress-status-guard");
const RELEASE: &str = "ingress-status-guard";
/// Real installs here have no kubelet to run the doctor hook Job, which helm would wait for.
const NO_HOOK: &str = "doctor.hook.enabled=false";
const NAMESPACE: &str = "ingress-status-guard";
const MULTI_POLICY: &str = r#"
policies:
  - name: nginx
    ingressClasses: [nginx]
    publishService: ingress-nginx/ingress-nginx-controller
    mode: enforce
  - name: nginx-internal
    ingressClasses: [nginx-internal]
    publishService: ingress-nginx/ingress-nginx-internal
    mode: enforce
  - name: traefik
    ingressClasses: [traefik]
    publishService: traefik/traefik
    mode: deny
  - name: static
    ingressClasses: [haproxy]
    publishStatusAddress: "203.0.113.5,lb.example.com"
    mode: audit
"#;

/// Policies that need the optional caches: node IPs (alone and inside `sources`), controller
/// classes and namespace selectors (text and `LabelSelector`).
const NODE_IP_POLICIES: &str = r#"
policies:
  - name: bare-metal
    controllerClasses: [example.com/bare-metal]
    publishPods: {namespace: ingress-bare, selector: "app.kubernetes.io/name=ingress-nginx"}
    reportNodeInternalIp: true
  - name: blue-green
    ingressClasses: [edge]
    namespaceSelector: "team in (payments, search)"
    sources:
      - publishService: edge/blue
      - publishService: edge/green
      - publishPods: {namespace: edge, selector: app=edge}
      - publishStatusAddress: edge.example.com
  - name: labelled
    ingressClasses: [labelled]
    namespaceSelector: {matchLabels: {team: x}, matchExpressions: [{key: env, operator: In, values: [prod]}]}
    publishStatusAddress: 192.0.2.1
"#;

/// The helm command line of one major version, with its own state directories.
struct Helm {
    major: u8,
    bin: PathBuf,
    home: PathBuf,
}

impl Helm {
    fn new(major: u8, scratch: &Path) -> Helm {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/helm/build.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg(major.to_string())
            .stderr(std::process::Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let bin = stdout.lines().last().unwrap_or("").trim();
        assert!(out.status.success() && !bin.is_empty(), "{} {major} failed", script.display());
        let home = scratch.join(format!("helm{major}"));
        std::fs::create_dir_all(&home).unwrap();
        Helm { major, bin: bin.into(), home }
    }

    fn run(&self, args: &[&str]) -> KubectlOutput {
        let out = Command::new(&self.bin)
            .args(args)
            .env("HELM_CACHE_HOME", self.home.join("cache"))
            .env("HELM_CONFIG_HOME", self.home.join("config"))
            .env("HELM_DATA_HOME", self.home.join("data"))
            .env_remove("KUBECONFIG")
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", self.bin.display()));
        KubectlOutput {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `helm template` of the chart as release `ingress-status-guard` in its namespace.
    fn template(&self, args: &[&str]) -> Vec<Value> {
        let mut all = vec!["template", RELEASE, CHART, "--namespace", NAMESPACE];
        all.extend_from_slice(args);
        let out = self.run(&all);
        assert!(out.success, "helm {} template {args:?}: {}", self.major, out.stderr);
        documents(&out.stdout)
    }
}

fn documents(yaml: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("rendered YAML: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("chart").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, contents: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path.display().to_string()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the rendered objects"))
}

fn kinds(docs: &[Value]) -> Vec<String> {
    let mut kinds: Vec<String> = docs.iter().map(|d| d["kind"].as_str().unwrap().to_owned()).collect();
    kinds.sort();
    kinds
}

fn kustomize(dir: &str) -> Vec<Value> {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let out = Command::new(&kubectl)
        .args(["kustomize", &format!("{}/manifests/{dir}", env!("CARGO_MANIFEST_DIR"))])
        .output()
        .unwrap_or_else(|e| panic!("run {kubectl}: {e}"));
    assert!(out.status.success(), "kubectl kustomize {dir}: {}", String::from_utf8_lossy(&out.stderr));
    documents(&String::from_utf8_lossy(&out.stdout))
}

fn policies(docs: &[Value]) -> ingress_status_guard::Policies {
    let config = docs.iter().find(|d| d["kind"] == "ConfigMap").expect("the policy ConfigMap");
    ingress_status_guard::parse_file("config.yaml", config["data"]["config.yaml"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("the rendered policy file: {e}"))
}

#[test]
fn helm_lint_is_clean_and_the_schema_names_wrong_values() {
    let helm = Helm::new(3, &scratch("lint"));
    let out = helm.run(&["lint", "--strict", CHART]);
    assert!(out.success, "helm lint --strict:\n{}{}", out.stdout, out.stderr);
    assert!(!out.stdout.contains("[WARNING]") && !out.stdout.contains("[ERROR]"), "{}", out.stdout);

    for (set, field) in [
        ("policy.mode=block", "/policy/mode"),
        ("webhook.failurePolicy=Never", "/webhook/failurePolicy"),
        ("webhook.timeoutSeconds=60", "/webhook/timeoutSeconds"),
        ("certificate.mode=vault", "/certificate/mode"),
        ("policy.publishService=just-a-name", "/policy/publishService"),
        ("replicaCount=0", "/replicaCount"),
        ("extraArgs[0]=-v", "/extraArgs/0"),
        ("webhook.clientCA.secretName=Not_A_Name", "/webhook/clientCA/secretName"),
        ("webhook.clientCA.allowedNames={a,}", "/webhook/clientCA/allowedNames/1"),
        ("extraVolumeMounts[0].name=x", "/extraVolumeMounts/0"),
        ("networkPolicy.webhookFrom={everyone}", "/networkPolicy/webhookFrom/0"),
        ("grafanaDashboard.labelKey=not a label", "/grafanaDashboard/labelKey"),
        ("grafanaDashboard.namespace=Monitoring", "/grafanaDashboard/namespace"),
        ("polcy.mode=enforce", "'polcy' not allowed"),
        ("policies[0].name=p,policies[0].publishPods.namespace=n", "/policies/0/publishPods"),
        ("policies[0].name=p,policies[0].publishStatusAddress=a,policies[0].publishService=b/c", "/policies/0"),
        (
            "policies[0].name=p,policies[0].sources[0].publishStatusAddress=a,policies[0].sources[0].publishService=b/c",
            "/policies/0/sources/0",
        ),
    ] {
        let out = helm.run(&["template", RELEASE, CHART, "--set", set]);
        assert!(!out.success, "--set {set} was accepted");
        assert!(out.stderr.contains(field), "--set {set}: the error names {field}: {}", out.stderr);
    }
    // Checks the schema cannot express, with messages saying what to set.
    let out = helm.run(&["template", RELEASE, CHART, "--set", "policy.publishStatusAddress="]);
    assert!(!out.success && out.stderr.contains("set policy.publishStatusAddress"), "{}", out.stderr);
    let out = helm.run(&["template", RELEASE, CHART, "--set", "certificate.mode=existingSecret"]);
    assert!(!out.success && out.stderr.contains("caBundle"), "{}", out.stderr);
    let out = helm.run(&["template", RELEASE, CHART, "--set", "webhook.clientCA.allowedNames={kube-apiserver}"]);
    assert!(!out.success && out.stderr.contains("needs webhook.clientCA.secretName"), "{}", out.stderr);
}

#[test]
fn values_render_what_they_say() {
    let helm = Helm::new(3, &scratch("values"));
    let defaults = helm.template(&[]);
    // No Role outside the release namespace, no monitoring objects, by default.
    assert!(defaults.iter().all(|d| d["metadata"]["namespace"].is_null() || d["metadata"]["namespace"] == NAMESPACE));
    assert!(!defaults.iter().any(|d| ["ServiceMonitor", "PrometheusRule"].contains(&d["kind"].as_str().unwrap())));
    let policy = policies(&defaults);
    assert!(policy.services().is_empty(), "the default policy needs no publish Service");

    // The shorthand with a publish Service: its Role, in its namespace, naming only it.
    let docs = helm.template(&["--set", "policy.publishService=edge/lb", "--set", "policy.mode=enforce"]);
    let role = find(&docs, "Role", "ingress-status-guard-publish-service");
    assert_eq!(role["metadata"]["namespace"], "edge");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": [""], "resources": ["services"], "resourceNames": ["lb"], "verbs": ["list", "watch"]}])
    );
    assert_eq!(find(&docs, "RoleBinding", "ingress-status-guard-publish-service")["metadata"]["namespace"], "edge");

    // A policies list: one Role per namespace, naming each of its Services.
    let dir = scratch("values-multi");
    let docs = helm.template(&["-f", &write(&dir, "multi.yaml", MULTI_POLICY)]);
    assert_eq!(policies(&docs).iter().count(), 4);
    let mut roles: Vec<(String, Value)> = docs
        .iter()
        .filter(|d| d["kind"] == "Role" && d["metadata"]["name"] == "ingress-status-guard-publish-service")
        .map(|d| (d["metadata"]["namespace"].as_str().unwrap().to_owned(), d["rules"][0]["resourceNames"].clone()))
        .collect();
    roles.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        roles,
        [
            ("ingress-nginx".to_owned(), json!(["ingress-nginx-controller", "ingress-nginx-internal"])),
            ("traefik".to_owned(), json!(["traefik"]))
        ]
    );

    // Node-IP sources and namespace selectors: a pods Role in each controller namespace, the
    // Services of a sources list, and Nodes and Namespaces cluster-wide; all list/watch only.
    let docs = helm.template(&["-f", &write(&dir, "node-ips.yaml", NODE_IP_POLICIES)]);
    assert_eq!(policies(&docs).iter().count(), 3);
    let mut pod_roles: Vec<(&str, &Value)> = docs
        .iter()
        .filter(|d| d["kind"] == "Role" && d["metadata"]["name"] == "ingress-status-guard-controller-pods")
        .map(|d| (d["metadata"]["namespace"].as_str().unwrap(), &d["rules"]))
        .collect();
    pod_roles.sort_by_key(|r| r.0);
    let pods_rule = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]);
    assert_eq!(pod_roles, [("edge", &pods_rule), ("ingress-bare", &pods_rule)]);
    let bindings = docs
        .iter()
        .filter(|d| d["kind"] == "RoleBinding" && d["roleRef"]["name"] == "ingress-status-guard-controller-pods");
    assert_eq!(bindings.count(), 2);
    assert_eq!(
        find(&docs, "ClusterRole", "ingress-status-guard-nodes-namespaces")["rules"],
        json!([{"apiGroups": [""], "resources": ["nodes", "namespaces"], "verbs": ["list", "watch"]}])
    );
    assert_eq!(
        find(&docs, "Role", "ingress-status-guard-publish-service")["rules"][0]["resourceNames"],
        json!(["blue", "green"])
    );
    // The same rules as the kustomize extras, which tests/cluster/deploy.rs proves sufficient against
    // a real API server.
    let extras = std::fs::read_to_string("manifests/extras/rbac-node-ips-and-namespaces.yaml").unwrap();
    let extras = documents(&extras);
    assert_eq!(find(&extras, "Role", "ingress-status-guard-controller-pods")["rules"], pods_rule);
    assert_eq!(
        find(&extras, "ClusterRole", "ingress-status-guard-nodes-namespaces")["rules"],
        find(&docs, "ClusterRole", "ingress-status-guard-nodes-namespaces")["rules"]
    );
    // Only what is needed: node IPs without a namespaceSelector need Nodes, not Namespaces...
    let only_pods = "policies:\n  - {name: p, publishPods: {namespace: ctl, selector: a=b}}\n";
    let docs = helm.template(&["-f", &write(&dir, "only-pods.yaml", only_pods)]);
    assert_eq!(
        find(&docs, "ClusterRole", "ingress-status-guard-nodes-namespaces")["rules"][0]["resources"],
        json!(["nodes"])
    );
    // ...and the defaults need neither.
    for name in ["ingress-status-guard-controller-pods", "ingress-status-guard-nodes-namespaces"] {
        assert!(!defaults.iter().any(|d| d["metadata"]["name"] == name), "{name} rendered by default");
    }

    // Webhook settings, log flags and extraArgs.
    let docs = helm.template(&[
        "--set",
        "webhook.failurePolicy=Fail",
        "--set",
        "webhook.timeoutSeconds=7",
        "--set",
        "webhook.namespaceSelector.matchLabels.team=edge",
        "--set",
        "log.level=debug",
        "--set",
        "extraArgs={--max-body-bytes=1048576}",
    ]);
    let webhook = &find(&docs, "MutatingWebhookConfiguration", RELEASE)["webhooks"][0];
    assert_eq!(
        (&webhook["failurePolicy"], &webhook["timeoutSeconds"], &webhook["namespaceSelector"]),
        (&json!("Fail"), &json!(7), &json!({"matchLabels": {"team": "edge"}}))
    );
    let args = &find(&docs, "Deployment", RELEASE)["spec"]["template"]["spec"]["containers"][0]["args"];
    let args: Vec<&str> = args.as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(args.contains(&"--log-level=debug") && args.ends_with(&["--max-body-bytes=1048576"]), "{args:?}");

    // Certificate modes.
    let cert_manager = helm.template(&["--set", "certificate.mode=certManager"]);
    assert_eq!(
        find(&cert_manager, "MutatingWebhookConfiguration", RELEASE)["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "ingress-status-guard/ingress-status-guard-serving"
    );
    // No certgen (doctor's hook Job is the only Job).
    assert!(!cert_manager.iter().any(|d| d["metadata"]["labels"]["app.kubernetes.io/component"] == "certgen"));
    assert!(cert_manager.iter().any(|d| d["kind"] == "Job" && d["metadata"]["name"] == "ingress-status-guard-doctor"));
    let existing = helm.template(&[
        "--set",
        "certificate.mode=existingSecret",
        "--set",
        "certificate.existingSecret.caBundle=QUJD",
        "--set",
        "certificate.secretName=mine",
    ]);
    assert_eq!(
        find(&existing, "MutatingWebhookConfiguration", RELEASE)["webhooks"][0]["clientConfig"]["caBundle"],
        "QUJD"
    );
    // No certgen: the Jobs are hooks, doctor's and the uninstall's removal of admission objects.
    assert_eq!(kinds(&existing).iter().filter(|k| ["Job", "CronJob", "Certificate"].contains(&k.as_str())).count(), 2);
    find(&existing, "Job", "ingress-status-guard-doctor");
    find(&existing, "Job", "ingress-status-guard-remove");
    let volumes = &find(&existing, "Deployment", RELEASE)["spec"]["template"]["spec"]["volumes"];
    assert_eq!(volumes[1]["secret"]["secretName"], "mine");

    // The NetworkPolicy, when asked for: the kustomize component's rules, selecting the pods.
    assert!(!defaults.iter().any(|d| d["kind"] == "NetworkPolicy"));
    let docs = helm.template(&["--set", "networkPolicy.enabled=true"]);
    let policy = find(&docs, "NetworkPolicy", RELEASE);
    let text = std::fs::read_to_string("manifests/components/network-policy/networkpolicy.yaml").unwrap();
    let component = &documents(&text)[0];
    // The same, but for the doctor pods the chart adds as a peer of the webhook port (the
    // kustomize tree has no doctor): they dial the webhook to verify its certificate.
    let doctor_peer = json!({"podSelector": {"matchLabels": {
        "app.kubernetes.io/name": "ingress-status-guard",
        "app.kubernetes.io/instance": RELEASE,
        "app.kubernetes.io/component": "doctor"}}});
    let mut ingress = policy["spec"]["ingress"].clone();
    let peers = ingress[0]["from"].as_array_mut().unwrap();
    assert_eq!(peers.pop(), Some(doctor_peer.clone()), "the doctor pods reach the webhook port");
    assert_eq!(ingress, component["spec"]["ingress"]);
    let without_doctor = helm.template(&["--set", "networkPolicy.enabled=true", "--set", "doctor.enabled=false"]);
    assert_eq!(find(&without_doctor, "NetworkPolicy", RELEASE)["spec"]["ingress"], component["spec"]["ingress"]);
    assert_eq!(policy["spec"]["policyTypes"], component["spec"]["policyTypes"]);
    let pod_labels = &find(&docs, "Deployment", RELEASE)["spec"]["template"]["metadata"]["labels"];
    for (key, value) in policy["spec"]["podSelector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&pod_labels[key], value, "the policy selects the webhook pods by {key}");
    }
    let docs = helm.template(&[
        "--set",
        "networkPolicy.enabled=true",
        "--set",
        "networkPolicy.webhookFrom={10.0.0.0/16}",
        "--set",
        "networkPolicy.adminFrom[0].namespaceSelector.matchLabels.team=mon",
    ]);
    let ingress = &find(&docs, "NetworkPolicy", RELEASE)["spec"]["ingress"];
    assert_eq!(ingress[0]["from"], json!([{"ipBlock": {"cidr": "10.0.0.0/16"}}, doctor_peer]));
    assert_eq!(ingress[1], json!({"ports": [{"port": 8081, "protocol": "TCP"}]}), "the probe port, from any source");
    assert_eq!(
        ingress[2],
        json!({"ports": [{"port": 8080, "protocol": "TCP"}], "from": [{"namespaceSelector": {"matchLabels": {"team": "mon"}}}]})
    );
    assert_eq!(ingress.as_array().unwrap().len(), 3);
    // Narrowed to a CIDR, the policy tells the binary, which then does not warn of an open port;
    // open to any source (the default) or off, it does not.
    let narrowed = json!({"name": "ISG_NETWORK_POLICY_NARROWED", "value": "true"});
    let env =
        |docs: &[Value]| find(docs, "Deployment", RELEASE)["spec"]["template"]["spec"]["containers"][0]["env"].clone();
    assert!(env(&docs).as_array().unwrap().contains(&narrowed));
    for open in [&defaults, &helm.template(&["--set", "networkPolicy.enabled=true"])] {
        assert!(!env(open).as_array().unwrap().contains(&narrowed));
    }
    // Enabled with the default adminFrom ([]): no pod reaches /metrics, the probe port stays open.
    let ingress = &policy["spec"]["ingress"];
    assert!(ingress.as_array().unwrap().iter().all(|rule| rule["ports"][0]["port"] != 8080), "{ingress}");
    assert!(ingress.as_array().unwrap().iter().any(|rule| rule["ports"][0]["port"] == 8081 && rule["from"].is_null()));

    // mTLS: the client CA Secret's ca.crt is mounted and passed with --client-san names; extra
    // volumes and mounts are added as given.
    let docs = helm.template(&[
        "--set",
        "webhook.clientCA.secretName=apiserver-client-ca",
        "--set",
        "webhook.clientCA.allowedNames={kube-apiserver-kubelet-client,apiserver.example.com}",
        "--set",
        "extraVolumes[0].name=scratch",
        "--set",
        "extraVolumes[0].emptyDir.medium=Memory",
        "--set",
        "extraVolumeMounts[0].name=scratch",
        "--set",
        "extraVolumeMounts[0].mountPath=/scratch",
    ]);
    let pod = &find(&docs, "Deployment", RELEASE)["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(
        args.ends_with(&[
            "--client-ca=/etc/ingress-status-guard/client-ca/ca.crt",
            "--client-san=kube-apiserver-kubelet-client",
            "--client-san=apiserver.example.com"
        ]),
        "{args:?}"
    );
    assert_eq!(
        pod["volumes"][2],
        json!({"name": "client-ca", "secret": {"secretName": "apiserver-client-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}})
    );
    assert_eq!(pod["volumes"][3], json!({"name": "scratch", "emptyDir": {"medium": "Memory"}}));
    assert_eq!(
        container["volumeMounts"][2],
        json!({"name": "client-ca", "mountPath": "/etc/ingress-status-guard/client-ca", "readOnly": true})
    );
    assert_eq!(container["volumeMounts"][3], json!({"name": "scratch", "mountPath": "/scratch"}));
    let plain = &find(&defaults, "Deployment", RELEASE)["spec"]["template"]["spec"];
    assert_eq!(plain["volumes"].as_array().unwrap().len(), 2, "no client CA by default");
    assert!(!plain["containers"][0]["args"].to_string().contains("--client-ca"));
    // Probes on their own port.
    let ports = &plain["containers"][0]["ports"];
    assert!(ports.as_array().unwrap().contains(&json!({"name": "probes", "containerPort": 8081, "protocol": "TCP"})));
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(plain["containers"][0][probe]["httpGet"]["port"], "probes", "{probe}");
    }

    // Monitoring, when asked for: the scrape of the admin port, and the alerts of the chart's file.
    let docs = helm.template(&[
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "metrics.prometheusRule.enabled=true",
    ]);
    let monitor = find(&docs, "ServiceMonitor", RELEASE);
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "admin");
    let metrics = find(&docs, "Service", "ingress-status-guard-metrics");
    assert_eq!(metrics["spec"]["ports"][0]["targetPort"], "admin");
    let groups = std::fs::read_to_string(format!("{CHART}/files/prometheus-rules.yaml")).unwrap();
    assert_eq!(find(&docs, "PrometheusRule", RELEASE)["spec"]["groups"], documents(&groups)[0]["groups"]);
}

/// The chart, as release `ingress-status-guard` in namespace `ingress-status-guard`, renders the
/// important fields exactly as the kustomize overlays do.
#[test]
fn the_chart_and_the_kustomize_tree_agree() {
    let helm = Helm::new(3, &scratch("agree"));
    for (overlay, mode) in [("overlays/self-signed", "selfSigned"), ("overlays/cert-manager", "certManager")] {
        let mut chart = helm.template(&["--set", &format!("certificate.mode={mode}")]);
        // doctor's hook Job, test Pod and identity, and the uninstall's removal of admission
        // objects, are the chart's alone (helm runs them).
        chart.retain(|d| {
            !["doctor", "remove"]
                .contains(&d["metadata"]["labels"]["app.kubernetes.io/component"].as_str().unwrap_or_default())
        });
        let kust = kustomize(overlay);

        // The same objects, by kind and name (the chart's Job carries the release revision,
        // and the kustomize ConfigMap a content hash; the Namespace is helm's --namespace).
        let names = |docs: &[Value]| {
            let mut names: Vec<String> = docs
                .iter()
                .filter(|d| d["kind"] != "Namespace")
                .map(|d| {
                    let name = d["metadata"]["name"].as_str().unwrap();
                    let name = match d["kind"].as_str().unwrap() {
                        "Job" => name.trim_end_matches("-1"),
                        "ConfigMap" if name.starts_with("ingress-status-guard-config-") => {
                            "ingress-status-guard-config"
                        }
                        _ => name,
                    };
                    format!(
                        "{}/{}/{name}",
                        d["kind"].as_str().unwrap(),
                        d["metadata"]["namespace"].as_str().unwrap_or("")
                    )
                })
                .collect();
            names.sort();
            names
        };
        assert_eq!(names(&chart), names(&kust), "{overlay}: the same objects");

        // The one difference: the base grants Namespaces to every install (it cannot depend on
        // whether a namespaceSelector is set: docs/deploy.md), the chart only with a selector.
        let namespaces = json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]});
        for kind in ["ClusterRole", "Role"] {
            for k in kust.iter().filter(|d| d["kind"] == kind) {
                let name = k["metadata"]["name"].as_str().unwrap();
                let mut rules = find(&chart, kind, name)["rules"].clone();
                if name == "ingress-status-guard-scope" {
                    assert!(!rules.as_array().unwrap().contains(&namespaces), "{overlay}: {rules}");
                    rules.as_array_mut().unwrap().push(namespaces.clone());
                }
                assert_eq!(rules, k["rules"], "{overlay}: {kind} {name}");
            }
        }
        for kind in ["ClusterRoleBinding", "RoleBinding"] {
            for k in kust.iter().filter(|d| d["kind"] == kind) {
                let name = k["metadata"]["name"].as_str().unwrap();
                let c = find(&chart, kind, name);
                assert_eq!(
                    (&c["roleRef"], &c["subjects"]),
                    (&k["roleRef"], &k["subjects"]),
                    "{overlay}: {kind} {name}"
                );
            }
        }

        let k_hook = find(&kust, "MutatingWebhookConfiguration", RELEASE);
        let c_hook = find(&chart, "MutatingWebhookConfiguration", RELEASE);
        assert_eq!(c_hook["webhooks"], k_hook["webhooks"], "{overlay}: the webhook registration");
        assert_eq!(
            c_hook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            k_hook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "{overlay}"
        );
        let k_svc = &find(&kust, "Service", RELEASE)["spec"];
        let c_svc = &find(&chart, "Service", RELEASE)["spec"];
        assert_eq!((&c_svc["ports"], &c_svc["type"]), (&k_svc["ports"], &k_svc["type"]), "{overlay}");

        let k_pod = &find(&kust, "Deployment", RELEASE)["spec"]["template"]["spec"];
        let c_pod = &find(&chart, "Deployment", RELEASE)["spec"]["template"]["spec"];
        for field in
            ["securityContext", "terminationGracePeriodSeconds", "serviceAccountName", "automountServiceAccountToken"]
        {
            assert_eq!(c_pod[field], k_pod[field], "{overlay}: pod {field}");
        }
        let (k_c, c_c) = (&k_pod["containers"][0], &c_pod["containers"][0]);
        for field in [
            "args",
            "ports",
            "env",
            "livenessProbe",
            "readinessProbe",
            "lifecycle",
            "resources",
            "securityContext",
            "volumeMounts",
            "image",
        ] {
            assert_eq!(c_c[field], k_c[field], "{overlay}: container {field}");
        }
        // Spread: the same constraints; the chart's selector adds the release label.
        let without_selector = |pod: &Value| {
            let mut spread = pod["topologySpreadConstraints"].clone();
            for c in spread.as_array_mut().unwrap() {
                c.as_object_mut().unwrap().remove("labelSelector");
            }
            spread
        };
        assert_eq!(without_selector(c_pod), without_selector(k_pod), "{overlay}: spread");
        assert_eq!(c_pod["volumes"][1], k_pod["volumes"][1], "{overlay}: the TLS Secret volume");
        assert_eq!(
            find(&chart, "PodDisruptionBudget", RELEASE)["spec"]["minAvailable"],
            find(&kust, "PodDisruptionBudget", RELEASE)["spec"]["minAvailable"]
        );
        assert_eq!(policies(&chart), policies(&kust), "{overlay}: the default policy");

        match mode {
            "selfSigned" => {
                let k_job = &find(&kust, "Job", "ingress-status-guard-certgen")["spec"]["template"]["spec"];
                let c_job = &find(&chart, "Job", "ingress-status-guard-certgen-1")["spec"]["template"]["spec"];
                let k_cron = &find(&kust, "CronJob", "ingress-status-guard-certgen")["spec"];
                let c_cron = &find(&chart, "CronJob", "ingress-status-guard-certgen")["spec"];
                assert_eq!(c_cron["schedule"], k_cron["schedule"]);
                for (c, k) in [
                    (c_job, k_job),
                    (
                        &c_cron["jobTemplate"]["spec"]["template"]["spec"],
                        &k_cron["jobTemplate"]["spec"]["template"]["spec"],
                    ),
                ] {
                    assert_eq!(c["securityContext"], k["securityContext"], "certgen pod securityContext");
                    for field in ["args", "securityContext", "resources", "env"] {
                        assert_eq!(c["containers"][0][field], k["containers"][0][field], "certgen {field}");
                    }
                }
            }
            _ => {
                for name in ["ingress-status-guard-serving", "ingress-status-guard-ca"] {
                    assert_eq!(
                        find(&chart, "Certificate", name)["spec"],
                        find(&kust, "Certificate", name)["spec"],
                        "{name}"
                    );
                }
            }
        }
    }
}

/// mTLS says the same both ways: the chart's `webhook.clientCA` and the kustomize example of the
/// `client-ca` component mount the same Secret and pass the same flags.
#[test]
fn mtls_in_the_chart_and_the_kustomize_component_agree() {
    let helm = Helm::new(3, &scratch("agree-mtls"));
    let chart = helm.template(&[
        "--set",
        "webhook.clientCA.secretName=ingress-status-guard-client-ca",
        "--set",
        "webhook.clientCA.allowedNames={kube-apiserver-webhook-client}",
    ]);
    let kust = kustomize("examples/mtls");
    let c_pod = &find(&chart, "Deployment", RELEASE)["spec"]["template"]["spec"];
    let k_pod = &find(&kust, "Deployment", RELEASE)["spec"]["template"]["spec"];
    for field in ["args", "volumeMounts", "ports", "livenessProbe", "readinessProbe", "env"] {
        assert_eq!(c_pod["containers"][0][field], k_pod["containers"][0][field], "container {field}");
    }
    assert_eq!(c_pod["volumes"][2], k_pod["volumes"][2], "the client CA volume");
    assert_eq!(k_pod["volumes"][2]["secret"]["secretName"], "ingress-status-guard-client-ca");
}

/// The chart's identity, RBAC and policy file for a publish Service are all the webhook needs: the
/// built binary, run as the chart's ServiceAccount with the chart's config file, watches the
/// Service, enforces its address and writes Events, with no forbidden error in its log.
#[tokio::test]
async fn the_charts_rbac_and_policy_file_are_all_the_webhook_needs() {
    let t = TestEnv::private("chart-rbac").await;
    let helm = Helm::new(3, &t.cluster.scratch_dir("chart-rbac-helm"));
    let docs = helm.template(&[
        "--set",
        "policy.publishStatusAddress=",
        "--set",
        "policy.publishService=chart-edge/lb",
        "--set",
        "policy.mode=enforce",
    ]);
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "chart-edge"}}),
    ];
    objects.extend(
        docs.iter()
            .filter(|d| {
                d["metadata"]["labels"]["app.kubernetes.io/component"] == "webhook"
                    && ["ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"]
                        .contains(&d["kind"].as_str().unwrap())
            })
            .cloned(),
    );
    assert_eq!(objects.len(), 15, "namespaces, the webhook's identity and its RBAC");
    let file = t.cluster.scratch_dir("chart-rbac").join("objects.json");
    std::fs::write(&file, json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string()).unwrap();
    // Server-side: the policy-mode test applies the same Namespace and ServiceAccount into this
    // shared API server at the same time, and a client-side apply's get-then-create loses that
    // race with AlreadyExists.
    kubectl_ok(t.cluster, &["apply", "--server-side", "-f", &file.display().to_string()]);

    let services: Api<Service> = Api::namespaced(t.admin.clone(), "chart-edge");
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "lb"},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "https", "port": 443}]}
    }))
    .unwrap();
    services.create(&PostParams::default(), &service).await.unwrap();
    let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.61"}]}}});
    services.patch_status("lb", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();

    let config = find(&docs, "ConfigMap", "ingress-status-guard-config")["data"]["config.yaml"].as_str().unwrap();
    let config_file = t.cluster.scratch_dir("chart-rbac-config").join("config.yaml");
    std::fs::write(&config_file, config).unwrap();
    let config_arg = format!("--config={}", config_file.display());
    let kubeconfig = t.cluster.kubeconfig_for(
        "system:serviceaccount:ingress-status-guard:ingress-status-guard",
        Some("system:serviceaccounts"),
    );
    let webhook = Webhook::start(t.cluster, &t.ns, &kubeconfig, &[&config_arg]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::Field("nginx"), &["203.0.113.61"]).await;
    let event = t.await_event(&webhook, "probe").await;
    assert_eq!(event.regarding.and_then(|r| r.name).as_deref(), Some("probe"));
    // Events are written through events.k8s.io alone: the chart grants no core Events.
    let as_guard = "--as=system:serviceaccount:ingress-status-guard:ingress-status-guard";
    // And the pods that answer the network hold no admissionregistration write (the keeper of
    // admission.mode=policy is the pod that opens no webhook port).
    let admission = ["mutatingadmissionpolicies", "validatingadmissionpolicies", "mutatingwebhookconfigurations"]
        .map(|r| format!("{r}.admissionregistration.k8s.io"));
    let cases = [("create", "events.events.k8s.io", "yes"), ("create", "events", "no")].into_iter().chain(
        admission.iter().flat_map(|r| ["create", "update", "patch", "delete"].map(|verb| (verb, r.as_str(), "no"))),
    );
    for (verb, resource, want) in cases {
        let can = t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["auth", "can-i", verb, resource, "-A", as_guard]);
        assert_eq!(can.stdout.trim(), want, "can-i {verb} {resource}: {}", can.stderr);
    }
    // No namespaceSelector: the guard reads no Namespace, and may not. With one on the webhook
    // configuration, the scope's ClusterRole grants list and watch of them.
    let can_namespaces = |verb: &str| {
        let can = t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["auth", "can-i", verb, "namespaces", as_guard]);
        can.stdout.trim().to_owned()
    };
    assert_eq!((can_namespaces("list").as_str(), can_namespaces("watch").as_str()), ("no", "no"));
    let selecting = helm.template(&[
        "--set",
        "policy.publishStatusAddress=",
        "--set",
        "policy.publishService=chart-edge/lb",
        "--set",
        "webhook.namespaceSelector.matchLabels.team=edge",
    ]);
    let scope = find(&selecting, "ClusterRole", "ingress-status-guard-scope");
    let file = t.cluster.scratch_dir("chart-rbac").join("scope.json");
    std::fs::write(&file, scope.to_string()).unwrap();
    kubectl_ok(t.cluster, &["apply", "--server-side", "-f", &file.display().to_string()]);
    eventually_can(|| (can_namespaces("list"), can_namespaces("watch")), ("yes".to_owned(), "yes".to_owned())).await;
    let log = webhook.log();
    let forbidden = webhook.forbidden_lines();
    assert!(forbidden.is_empty(), "forbidden in the webhook's log: {forbidden:#?}\n{log}");
}

/// Waits until `ask` answers `want` (the authorizer's cache follows a new grant within moments).
async fn eventually_can(ask: impl Fn() -> (String, String), want: (String, String)) {
    support::eventually("the grant is in force", std::time::Duration::from_secs(10), || {
        let got = ask();
        let want = want.clone();
        async move { if got == want { Ok(()) } else { Err(format!("{got:?}")) } }
    })
    .await;
}

/// Applies with `kubectl apply --dry-run=server --validate=strict`; returns kubectl's output.
fn dry_run(cluster: &Cluster, docs: &[Value]) -> KubectlOutput {
    let file = cluster.scratch_dir("chart-dry-run").join("objects.json");
    std::fs::write(&file, json!({"apiVersion": "v1", "kind": "List", "items": docs}).to_string()).unwrap();
    cluster.kubectl(
        cluster.admin_kubeconfig(),
        &["apply", "--dry-run=server", "--validate=strict", "-f", &file.display().to_string()],
    )
}

fn kubectl_ok(cluster: &Cluster, args: &[&str]) -> String {
    let out = cluster.kubectl(cluster.admin_kubeconfig(), args);
    assert!(out.success, "kubectl {args:?}: {}", out.stderr);
    out.stdout
}

/// Everything of a release still in the cluster: objects carrying its instance label, and
/// webhook configurations by name.
fn leftovers(cluster: &Cluster, release: &str) -> Vec<String> {
    let kinds = "deployments,services,serviceaccounts,configmaps,secrets,roles,rolebindings,poddisruptionbudgets,jobs,cronjobs,clusterroles,clusterrolebindings,mutatingwebhookconfigurations,issuers.cert-manager.io,certificates.cert-manager.io";
    let selector = format!("app.kubernetes.io/instance={release}");
    let mut left: Vec<String> =
        kubectl_ok(cluster, &["get", kinds, "-A", "-l", &selector, "-o", "name"]).lines().map(String::from).collect();
    let webhooks = kubectl_ok(cluster, &["get", "mutatingwebhookconfigurations", "-o", "name"]);
    left.extend(webhooks.lines().filter(|l| l.contains(release)).map(String::from));
    left.sort();
    left.dedup();
    left
}

/// Install, upgrade, uninstall with one Helm major version, on a fresh API server.
async fn lifecycle(major: u8) {
    let cluster = Cluster::fresh().await;
    let dir = cluster.scratch_dir("chart");
    let helm = Helm::new(major, &dir);
    let kubeconfig = format!("--kubeconfig={}", cluster.admin_kubeconfig().display());
    let multi = write(&dir, "multi.yaml", MULTI_POLICY);

    // The namespace an operator creates for it, at the restricted Pod Security level (helm's
    // --create-namespace would make one without labels). ingress-nginx and traefik stand for
    // the controllers the multi-policy file names; cert-manager's API is a fixture.
    let namespaces = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": {
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "latest",
            "pod-security.kubernetes.io/warn": "restricted"}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ingress-nginx"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "traefik"}},
    ]});
    let file = write(&dir, "namespaces.json", &namespaces.to_string());
    kubectl_ok(&cluster, &["apply", "-f", &file]);
    let crds = format!("{}/tests/fixtures/deploy/cert-manager-crds.yaml", env!("CARGO_MANIFEST_DIR"));
    kubectl_ok(&cluster, &["apply", "--server-side", "-f", &crds]);
    kubectl_ok(
        &cluster,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/issuers.cert-manager.io",
            "crd/certificates.cert-manager.io",
        ],
    );

    // Every object of every mode passes the API server's own validation and Pod Security.
    for (what, args) in [
        ("default values", vec![]),
        ("cert-manager mode", vec!["--set", "certificate.mode=certManager"]),
        ("multi-policy values", vec!["-f", multi.as_str()]),
        ("monitoring", vec!["--set", "metrics.serviceMonitor.enabled=true", "--set", "grafanaDashboard.enabled=true"]),
        (
            "mTLS and extra volumes",
            vec![
                "--set",
                "webhook.clientCA.secretName=apiserver-client-ca",
                "--set",
                "webhook.clientCA.allowedNames={kube-apiserver-webhook-client}",
                "--set",
                "extraVolumes[0].name=scratch",
                "--set",
                "extraVolumes[0].emptyDir.medium=Memory",
                "--set",
                "extraVolumeMounts[0].name=scratch",
                "--set",
                "extraVolumeMounts[0].mountPath=/scratch",
            ],
        ),
        (
            "network policy",
            vec![
                "--set",
                "networkPolicy.enabled=true",
                "--set",
                "networkPolicy.adminFrom[0].namespaceSelector.matchLabels.team=mon",
            ],
        ),
    ] {
        let mut docs = helm.template(&args);
        // The `helm test` Pod's ServiceAccount is not created by a dry run, and the API server
        // refuses a Pod without one: tests/cluster/chart/doctor.rs dry-runs it with its ServiceAccount.
        docs.retain(|d| d["kind"] != "Pod");
        if what == "monitoring" {
            // The ServiceMonitor's CRD is not installed here; its Service is checked.
            docs.retain(|d| d["kind"] != "ServiceMonitor");
        }
        let out = dry_run(&cluster, &docs);
        assert!(out.success, "helm {major}, {what}: the API server refused:\n{}\n{}", out.stderr, out.stdout);
        let accepted = out.stdout.lines().filter(|l| l.ends_with("(server dry run)")).count();
        assert_eq!(accepted, docs.len(), "helm {major}, {what}: every object accepted:\n{}", out.stdout);
        assert!(!out.stderr.contains("PodSecurity"), "helm {major}, {what}: warnings:\n{}", out.stderr);
    }

    // NOTES.txt warns of an open webhook port unless mTLS or a narrowed NetworkPolicy is on, and
    // says when the NetworkPolicy admits nobody to /metrics.
    const OPEN: &str = "WARNING: any pod that reaches port 8443 can post reviews";
    const NO_METRICS: &str = "The NetworkPolicy admits no pod to /metrics";
    for (what, set, open, no_metrics) in [
        ("mTLS", vec!["webhook.clientCA.secretName=apiserver-client-ca"], false, false),
        (
            "a narrowed NetworkPolicy",
            vec!["networkPolicy.enabled=true", "networkPolicy.webhookFrom={10.0.0.0/24}"],
            false,
            true,
        ),
        ("an open NetworkPolicy", vec!["networkPolicy.enabled=true"], true, true),
        (
            "a NetworkPolicy with adminFrom",
            vec!["networkPolicy.enabled=true", "networkPolicy.adminFrom[0].namespaceSelector.matchLabels.team=mon"],
            true,
            false,
        ),
    ] {
        let mut args = vec!["install", RELEASE, CHART, "--namespace", NAMESPACE, &kubeconfig, "--dry-run=server"];
        for s in &set {
            args.extend(["--set", s]);
        }
        let out = helm.run(&args);
        assert!(out.success, "helm {major} install --dry-run, {what}: {}", out.stderr);
        assert_eq!(out.stdout.contains(OPEN), open, "helm {major}, {what}: the open-port warning:\n{}", out.stdout);
        assert_eq!(out.stdout.contains(NO_METRICS), no_metrics, "helm {major}, {what}:\n{}", out.stdout);
    }

    // Install with the default values.
    // No kubelet here runs a Pod, and helm waits for a hook Job: the doctor hook is off in real
    // installs (tests/cluster/chart/doctor.rs proves its Job and Pod against the API server instead).
    let install = helm.run(&["install", RELEASE, CHART, "--namespace", NAMESPACE, &kubeconfig, "--set", NO_HOOK]);
    assert!(install.success, "helm {major} install: {}\n{}", install.stderr, install.stdout);
    assert!(install.stdout.contains(OPEN), "helm {major}: NOTES warn of the open port:\n{}", install.stdout);
    assert!(!install.stderr.contains("PodSecurity"), "{}", install.stderr);
    let installed = leftovers(&cluster, RELEASE);
    assert!(
        installed
            .contains(&"mutatingwebhookconfiguration.admissionregistration.k8s.io/ingress-status-guard".to_owned())
    );
    assert!(installed.contains(&"job.batch/ingress-status-guard-certgen-1".to_owned()), "{installed:?}");
    let roles = kubectl_ok(
        &cluster,
        &["get", "roles", "-A", "--field-selector", "metadata.name=ingress-status-guard-publish-service", "-o", "name"],
    );
    assert_eq!(roles, "", "no publish-Service Role for a fixed-address policy");
    let config = kubectl_ok(
        &cluster,
        &["-n", NAMESPACE, "get", "configmap", "ingress-status-guard-config", "-o", "jsonpath={.data.config\\.yaml}"],
    );
    assert!(config.contains("mode: audit") && config.contains("192.0.2.10"), "{config}");

    // Upgrade to several policies: their Roles appear, the policy file changes in place (the pods
    // reload it), a new certgen Job runs.
    let upgrade =
        helm.run(&["upgrade", RELEASE, CHART, "--namespace", NAMESPACE, &kubeconfig, "-f", &multi, "--set", NO_HOOK]);
    assert!(upgrade.success, "helm {major} upgrade: {}\n{}", upgrade.stderr, upgrade.stdout);
    let roles = kubectl_ok(
        &cluster,
        &[
            "get",
            "roles",
            "-A",
            "--field-selector",
            "metadata.name=ingress-status-guard-publish-service",
            "-o",
            "jsonpath={range .items[*]}{.metadata.namespace}:{.rules[0].resourceNames}{\"\\n\"}{end}",
        ],
    );
    let mut roles: Vec<&str> = roles.lines().collect();
    roles.sort();
    assert_eq!(
        roles,
        [r#"ingress-nginx:["ingress-nginx-controller","ingress-nginx-internal"]"#, r#"traefik:["traefik"]"#]
    );
    let config = kubectl_ok(
        &cluster,
        &["-n", NAMESPACE, "get", "configmap", "ingress-status-guard-config", "-o", "jsonpath={.data.config\\.yaml}"],
    );
    assert!(config.contains("publishService: traefik/traefik"), "{config}");
    let jobs = kubectl_ok(&cluster, &["-n", NAMESPACE, "get", "jobs", "-o", "name"]);
    assert_eq!(jobs.trim(), "job.batch/ingress-status-guard-certgen-2", "the upgrade's Job replaces the install's");

    // And back to one fixed-address policy, enforcing: the Roles go.
    let upgrade = helm.run(&[
        "upgrade",
        RELEASE,
        CHART,
        "--namespace",
        NAMESPACE,
        &kubeconfig,
        "--set",
        NO_HOOK,
        "--set",
        "policy.publishStatusAddress=203.0.113.10",
        "--set",
        "policy.mode=enforce",
    ]);
    assert!(upgrade.success, "helm {major} upgrade: {}\n{}", upgrade.stderr, upgrade.stdout);
    let roles = kubectl_ok(
        &cluster,
        &["get", "roles", "-A", "--field-selector", "metadata.name=ingress-status-guard-publish-service", "-o", "name"],
    );
    assert_eq!(roles, "", "the publish-Service Roles are removed with their policies");
    let config = kubectl_ok(
        &cluster,
        &["-n", NAMESPACE, "get", "configmap", "ingress-status-guard-config", "-o", "jsonpath={.data.config\\.yaml}"],
    );
    assert!(config.contains("mode: enforce") && config.contains("203.0.113.10"), "{config}");

    // Uninstall: nothing left, the webhook configuration first of all. --no-hooks: no kubelet
    // here runs the post-delete Job that removes admission objects, which helm would wait for
    // (tests/cluster/chart/mode_switch.rs runs it).
    let uninstall = helm.run(&["uninstall", RELEASE, "--namespace", NAMESPACE, &kubeconfig, "--no-hooks"]);
    assert!(uninstall.success, "helm {major} uninstall: {}", uninstall.stderr);
    assert_eq!(leftovers(&cluster, RELEASE), Vec::<String>::new(), "helm {major}: left behind by uninstall");

    // A cert-manager mode release, under another name, installs and uninstalls cleanly too.
    let release = "guard";
    let install = helm.run(&[
        "install",
        release,
        CHART,
        "--namespace",
        NAMESPACE,
        &kubeconfig,
        "--set",
        NO_HOOK,
        "--set",
        "certificate.mode=certManager",
    ]);
    assert!(install.success, "helm {major} install (cert-manager): {}\n{}", install.stderr, install.stdout);
    let certificates = kubectl_ok(&cluster, &["-n", NAMESPACE, "get", "certificates.cert-manager.io", "-o", "name"]);
    assert_eq!(certificates.lines().count(), 2, "{certificates}");
    let webhook = kubectl_ok(
        &cluster,
        &[
            "get",
            "mutatingwebhookconfiguration",
            "guard-ingress-status-guard",
            "-o",
            "jsonpath={.metadata.annotations.cert-manager\\.io/inject-ca-from}",
        ],
    );
    assert_eq!(webhook, "ingress-status-guard/guard-ingress-status-guard-serving");
    let uninstall = helm.run(&["uninstall", release, "--namespace", NAMESPACE, &kubeconfig, "--no-hooks"]);
    assert!(uninstall.success, "helm {major} uninstall (cert-manager): {}", uninstall.stderr);
    assert_eq!(leftovers(&cluster, release), Vec::<String>::new(), "helm {major}: left behind by uninstall");
}

#[tokio::test]
async fn helm_3_installs_upgrades_and_uninstalls_cleanly_on_a_fresh_cluster() {
    lifecycle(3).await;
}

#[tokio::test]
async fn helm_4_installs_upgrades_and_uninstalls_cleanly_on_a_fresh_cluster() {
    lifecycle(4).await;
}

/// One scope: `webhook.namespaceSelector` selects the namespaces the webhook reviews, and the
/// reconciler reads it from the webhook configuration (its RBAC names that one object, and a
/// release of another name passes `--webhook-configuration`), so the policies render as
/// written. With `admission.mode=policy` there is no webhook configuration: the selector is
/// added to every policy's `namespaceSelector` instead, and the rendered file still loads.
#[test]
fn webhook_namespace_selector_is_the_one_scope() {
    let dir = scratch("one-scope");
    let helm = Helm::new(3, &dir);
    let values = write(
        &dir,
        "values.yaml",
        r#"
webhook:
  namespaceSelector: {matchLabels: {team: edge}, matchExpressions: [{key: env, operator: NotIn, values: [dev]}]}
policies:
  - name: open
    ingressClasses: [nginx]
    publishStatusAddress: 192.0.2.1
  - name: narrowed
    ingressClasses: [other]
    namespaceSelector: {matchLabels: {tier: web}}
    publishStatusAddress: 192.0.2.2
"#,
    );
    let config_of = |docs: &[Value]| -> Value {
        let text = find(docs, "ConfigMap", "ingress-status-guard-config")["data"]["config.yaml"].as_str().unwrap();
        serde_norway::from_str(text).unwrap()
    };
    let args_of = |docs: &[Value]| -> Vec<String> {
        let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
        let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
        args.as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()).collect()
    };
    let scope = serde_json::json!({"matchLabels": {"team": "edge"}, "matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]});

    // Webhook mode: the webhook configuration carries it, the policies do not.
    let docs = helm.template(&["-f", &values]);
    assert_eq!(find(&docs, "MutatingWebhookConfiguration", RELEASE)["webhooks"][0]["namespaceSelector"], scope);
    let file = config_of(&docs);
    assert!(file["policies"][0]["namespaceSelector"].is_null(), "{file:?}");
    assert_eq!(file["policies"][1]["namespaceSelector"], serde_json::json!({"matchLabels": {"tier": "web"}}));
    assert_eq!(
        find(&docs, "ClusterRole", "ingress-status-guard-scope")["rules"][0]["resourceNames"],
        serde_json::json!([RELEASE]),
        "the reconciler may read its own webhook configuration, by name"
    );
    assert_eq!(
        find(&docs, "ClusterRole", "ingress-status-guard-scope")["rules"][1],
        serde_json::json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]}),
        "the reconciler watches the Namespaces the selector selects"
    );
    assert!(!args_of(&docs).iter().any(|a| a.starts_with("--webhook-configuration")), "the default name");
    let other = helm.template(&["-f", &values, "--set", "fullnameOverride=isg-edge"]);
    assert!(args_of(&other).contains(&"--webhook-configuration=isg-edge".to_owned()), "{:?}", args_of(&other));
    assert_eq!(
        find(&other, "ClusterRole", "isg-edge-scope")["rules"][0]["resourceNames"],
        serde_json::json!(["isg-edge"])
    );

    // Policy mode: no webhook configuration, so every policy gets the scope.
    let docs = helm.template(&["-f", &values, "--set", "admission.mode=policy"]);
    assert!(docs.iter().all(|d| d["kind"] != "MutatingWebhookConfiguration"));
    assert!(!args_of(&docs).iter().any(|a| a.starts_with("--webhook-configuration")));
    assert!(
        docs.iter().all(|d| d["metadata"]["name"] != "ingress-status-guard-scope"),
        "no webhook configuration to read"
    );
    let file = config_of(&docs);
    assert_eq!(file["policies"][0]["namespaceSelector"], scope, "a policy without a selector gets the scope");
    assert_eq!(
        file["policies"][1]["namespaceSelector"],
        serde_json::json!({"matchLabels": {"tier": "web"}, "matchExpressions": [
            {"key": "env", "operator": "NotIn", "values": ["dev"]},
            {"key": "team", "operator": "In", "values": ["edge"]},
        ]}),
        "one with its own selector keeps it, narrowed by the scope"
    );
    assert_eq!(policies(&docs).iter().count(), 2, "the rendered file loads");
    // A text selector cannot be combined: the render says what to write instead.
    let text = write(
        &dir,
        "text.yaml",
        "admission: {mode: policy}\nwebhook: {namespaceSelector: {matchLabels: {team: edge}}}\npolicies: [{name: t, ingressClasses: [x], namespaceSelector: 'tier=web', publishStatusAddress: 192.0.2.1}]\n",
    );
    let out = helm.run(&["template", RELEASE, CHART, "-f", &text]);
    assert!(!out.success && out.stderr.contains("policies[0] (t): namespaceSelector is text"), "{}", out.stderr);
    // An Ingress policy gateway-web and a Gateway policy web (whose per-policy names were
    // alike) render in policy mode, as the guard loads them: the objects are named by kind and
    // slot; kind: is accepted on each policy. 17 policies of a kind are refused, naming the 17th.
    let alike = write(
        &dir,
        "alike.yaml",
        "admission: {mode: policy}\npolicies: [{name: gateway-web, ingressClasses: [x], publishStatusAddress: 192.0.2.1}, {name: web, kind: Gateway, gatewayClasses: [eg], publishStatusAddress: 192.0.2.2}]\n",
    );
    let out = helm.run(&["template", RELEASE, CHART, "-f", &alike]);
    assert!(out.success, "{}", out.stderr);
    let many: String = (0..17)
        .map(|i| format!("{{name: p{i}, ingressClasses: [c{i}], publishStatusAddress: 192.0.2.1}}"))
        .collect::<Vec<_>>()
        .join(", ");
    let many = write(&dir, "many.yaml", &format!("admission: {{mode: policy}}\npolicies: [{many}]\n"));
    let out = helm.run(&["template", RELEASE, CHART, "-f", &many]);
    let why = "the Ingress policy \"p16\" is number 17 of its kind, and admission.mode=policy keeps at most 16 policies of a kind";
    assert!(!out.success && out.stderr.contains(why), "{}", out.stderr);
    // Without a scope, policies render as written, and no Namespace is read or granted.
    let defaults = helm.template(&[]);
    assert_eq!(
        find(&defaults, "ClusterRole", "ingress-status-guard-scope")["rules"].as_array().map(Vec::len),
        Some(1),
        "the webhook configuration only"
    );
    let mut guards = defaults.iter().filter(|d| d["metadata"]["labels"]["app.kubernetes.io/component"] == "webhook");
    assert!(!guards.any(|d| d["rules"].to_string().contains("namespaces")), "no grant of Namespaces");
    let config = find(&defaults, "ConfigMap", "ingress-status-guard-config")["data"]["config.yaml"].as_str().unwrap();
    assert!(!config.contains("namespaceSelector"), "{config}");
}

/// The Grafana dashboard: off by default; when on, one ConfigMap with the sidecar's label (key
/// and value as set), in the namespace and with the annotations asked for, holding the chart's
/// dashboard file verbatim. manifests/monitoring generates the same ConfigMap from a copy of that
/// file, which must stay identical (tests/cluster/dashboard.rs proves the file's queries).
#[test]
fn the_grafana_dashboard_configmap_in_the_chart_and_kustomize_agree() {
    const DASHBOARD: &str = "ingress-status-guard-dashboard";
    let file = std::fs::read_to_string(format!("{CHART}/dashboards/ingress-status-guard.json")).unwrap();
    let copy = format!("{}/manifests/monitoring/dashboards/ingress-status-guard.json", env!("CARGO_MANIFEST_DIR"));
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), file, "{copy} differs from the chart's: copy it over");
    let parsed: Value = serde_json::from_str(&file).expect("the dashboard is JSON");

    let helm = Helm::new(3, &scratch("dashboard"));
    assert!(!helm.template(&[]).iter().any(|d| d["metadata"]["name"] == DASHBOARD), "off by default");
    let docs = helm.template(&["--set", "grafanaDashboard.enabled=true"]);
    let map = find(&docs, "ConfigMap", DASHBOARD);
    assert_eq!(map["metadata"]["namespace"], NAMESPACE);
    assert_eq!(map["metadata"]["labels"]["grafana_dashboard"], "1");
    assert!(map["metadata"].get("annotations").is_none(), "{map}");
    let json = map["data"]["ingress-status-guard.json"].as_str().expect("the JSON key");
    assert_eq!(json.trim_end(), file.trim_end(), "the chart's file, verbatim");

    let docs = helm.template(&[
        "--set",
        "grafanaDashboard.enabled=true",
        "--set",
        "grafanaDashboard.namespace=monitoring",
        "--set",
        "grafanaDashboard.labelKey=example.com/dashboard",
        "--set-string",
        "grafanaDashboard.labelValue=yes",
        "--set",
        "grafanaDashboard.annotations.grafana_folder=Ingress",
    ]);
    let map = find(&docs, "ConfigMap", DASHBOARD);
    assert_eq!(map["metadata"]["namespace"], "monitoring");
    assert_eq!(map["metadata"]["labels"]["example.com/dashboard"], "yes");
    assert!(map["metadata"]["labels"].get("grafana_dashboard").is_none(), "the label key is replaced: {map}");
    assert_eq!(map["metadata"]["annotations"], json!({"grafana_folder": "Ingress"}));

    let kustomized = kustomize("monitoring");
    let map = find(&kustomized, "ConfigMap", DASHBOARD);
    assert_eq!(map["metadata"]["namespace"], NAMESPACE);
    assert_eq!(map["metadata"]["labels"]["grafana_dashboard"], "1");
    let json = map["data"]["ingress-status-guard.json"].as_str().expect("the JSON key");
    assert_eq!(serde_json::from_str::<Value>(json).unwrap(), parsed, "kustomize holds the same dashboard");
    assert_eq!(kinds(&kustomized), ["ConfigMap", "PrometheusRule"]);
}

#[test]
fn a_service_policy_registers_services_status_and_grants_services_and_nothing_else_does() {
    let helm = Helm::new(3, &scratch("values-service"));
    let dir = scratch("values-service-policies");
    let rules = |docs: &[Value]| {
        find(docs, "MutatingWebhookConfiguration", "ingress-status-guard")["webhooks"][0]["rules"].clone()
    };
    let cluster_wide_services = |docs: &[Value]| {
        docs.iter().any(|d| {
            d["kind"] == "ClusterRole"
                && d["rules"].as_array().into_iter().flatten().any(|r| {
                    r["apiGroups"] == json!([""])
                        && r["resources"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|x| x == "services" || x == "services/status")
                })
        })
    };
    // An Ingress policy following a publish Service reads that one Service: no services/status
    // rule, no cluster-wide Service right.
    let ingress_only = "policies:\n  - {name: a, ingressClasses: [nginx], publishService: edge/lb}\n";
    let docs = helm.template(&["-f", &write(&dir, "ingress.yaml", ingress_only)]);
    assert_eq!(rules(&docs).as_array().map(Vec::len), Some(1), "no services/status rule without a Service policy");
    assert!(!cluster_wide_services(&docs), "no cluster-wide Service right without a Service policy");
    assert!(!cluster_wide_services(&helm.template(&[])), "none by default");

    let governing = "policies:\n  - {name: metallb, kind: Service, loadBalancerClasses: [''], publishStatusAddress: 192.0.2.7, acknowledgeKubeProxyImpact: true, mode: enforce}\n";
    let docs = helm.template(&["-f", &write(&dir, "service.yaml", governing)]);
    assert_eq!(
        rules(&docs)[1],
        json!({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["services/status"], "scope": "Namespaced"})
    );
    let policy = policies(&docs);
    assert_eq!(
        policy.of(ingress_status_guard::Kind::Service).count(),
        1,
        "the chart's file validates as a Service policy"
    );
    let reconciler = json!([
        {"apiGroups": [""], "resources": ["services"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["services/status"], "verbs": ["patch"]}
    ]);
    assert_eq!(find(&docs, "ClusterRole", "ingress-status-guard-services")["rules"], reconciler);
    assert_eq!(
        find(&docs, "ClusterRoleBinding", "ingress-status-guard-services")["roleRef"]["name"],
        "ingress-status-guard-services"
    );

    // The kustomize component grants the same, and only with it.
    let kust = kustomize("examples/service-policies");
    assert_eq!(rules(&kust), rules(&docs), "kustomize's service-policies component registers the same rules");
    assert_eq!(
        find(&kust, "ClusterRole", "ingress-status-guard-services")["rules"],
        find(&docs, "ClusterRole", "ingress-status-guard-services")["rules"]
    );
    assert!(!cluster_wide_services(&kustomize("examples/ingress-nginx")), "not without the component");
}

#[test]
fn a_publish_gateway_gets_gateway_rbac_and_nothing_else_does() {
    let helm = Helm::new(3, &scratch("values-gateway"));
    let no_gateway = |docs: &[Value]| {
        !docs
            .iter()
            .any(|d| serde_json::to_string(&d["rules"]).unwrap_or_default().contains("gateway.networking.k8s.io"))
    };
    assert!(no_gateway(&helm.template(&[])), "no Gateway API RBAC by default");
    let dir = scratch("values-gateway-policies");
    let text = "policies:\n  - {name: cutover, ingressClasses: [nginx], publishGateway: gateway/public}\n  - name: union\n    ingressClasses: [edge]\n    sources: [{publishGateway: gateway/internal.v2}, {publishGateway: infra/edge}, {publishService: edge/lb}]\n";
    let docs = helm.template(&["-f", &write(&dir, "gateways.yaml", text)]);
    let policy = policies(&docs);
    assert_eq!(policy.iter().count(), 2, "the policy file carries publishGateway as written");
    let mut roles: Vec<(String, Value)> = docs
        .iter()
        .filter(|d| d["kind"] == "Role" && d["metadata"]["name"] == "ingress-status-guard-publish-gateway")
        .map(|d| (d["metadata"]["namespace"].as_str().unwrap().to_owned(), d["rules"].clone()))
        .collect();
    roles.sort_by(|a, b| a.0.cmp(&b.0));
    let rule = |names: Value| json!([{"apiGroups": ["gateway.networking.k8s.io"], "resources": ["gateways"], "resourceNames": names, "verbs": ["list", "watch"]}]);
    assert_eq!(
        roles,
        [("gateway".to_owned(), rule(json!(["public", "internal.v2"]))), ("infra".to_owned(), rule(json!(["edge"])))]
    );
    let bindings = docs
        .iter()
        .filter(|d| d["kind"] == "RoleBinding" && d["roleRef"]["name"] == "ingress-status-guard-publish-gateway");
    assert_eq!(bindings.count(), 2);
    let without = "policies:\n  - {name: a, ingressClasses: [nginx], publishService: edge/lb}\n";
    assert!(no_gateway(&helm.template(&["-f", &write(&dir, "services.yaml", without)])));

    // Gateway policies: the webhook also gets gateways/status, and GatewayClasses only for
    // gatewayControllers.
    let rules = |docs: &[Value]| {
        find(docs, "MutatingWebhookConfiguration", "ingress-status-guard")["webhooks"][0]["rules"].clone()
    };
    assert_eq!(
        rules(&docs).as_array().map(Vec::len),
        Some(1),
        "publishGateway alone does not register gateways/status"
    );
    let governing = "policies:\n  - {name: eg, gatewayClasses: [eg], publishService: gw/envoy, mode: enforce}\n";
    let docs = helm.template(&["-f", &write(&dir, "governing.yaml", governing)]);
    assert_eq!(
        rules(&docs)[1],
        json!({"apiGroups": ["gateway.networking.k8s.io"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["gateways/status"], "scope": "Namespaced"})
    );
    assert_eq!(policies(&docs).of(ingress_status_guard::Kind::Gateway).count(), 1);
    assert!(
        !docs.iter().any(|d| d["metadata"]["name"] == "ingress-status-guard-gatewayclasses"),
        "no controller matching"
    );
    // The reconciler of Gateway policies lists and watches Gateways and patches their status.
    let reconciler = json!([
        {"apiGroups": ["gateway.networking.k8s.io"], "resources": ["gateways"], "verbs": ["list", "watch"]},
        {"apiGroups": ["gateway.networking.k8s.io"], "resources": ["gateways/status"], "verbs": ["patch"]}
    ]);
    assert_eq!(find(&docs, "ClusterRole", "ingress-status-guard-gateways")["rules"], reconciler);
    assert_eq!(
        find(&docs, "ClusterRoleBinding", "ingress-status-guard-gateways")["roleRef"]["name"],
        "ingress-status-guard-gateways"
    );
    let by_controller = "policies:\n  - {name: eg, gatewayControllers: [gateway.envoyproxy.io/gatewayclass-controller], publishStatusAddress: 192.0.2.1}\n";
    let docs = helm.template(&["-f", &write(&dir, "by-controller.yaml", by_controller)]);
    assert_eq!(
        find(&docs, "ClusterRole", "ingress-status-guard-gatewayclasses")["rules"],
        json!([{"apiGroups": ["gateway.networking.k8s.io"], "resources": ["gatewayclasses"], "verbs": ["list", "watch"]}])
    );
    assert_eq!(rules(&docs).as_array().map(Vec::len), Some(2));
    let kust = kustomize("examples/gateway-policies");
    assert_eq!(rules(&kust), rules(&docs), "kustomize's gateway-policies component registers the same rules");
    for role in ["ingress-status-guard-gatewayclasses", "ingress-status-guard-gateways"] {
        assert_eq!(find(&kust, "ClusterRole", role)["rules"], find(&docs, "ClusterRole", role)["rules"], "{role}");
    }

    // The kustomize component grants the same, and only with it.
    assert!(no_gateway(&kustomize("examples/ingress-nginx")), "the kustomize tree has no Gateway RBAC without it");
    let kust = kustomize("examples/gateway-cutover");
    let role = find(&kust, "Role", "ingress-status-guard-publish-gateway");
    assert_eq!((role["metadata"]["namespace"].as_str(), &role["rules"]), (Some("gateway"), &rule(json!(["public"]))));
    assert_eq!(policies(&kust).gateways().iter().map(ToString::to_string).collect::<Vec<_>>(), ["gateway/public"]);
}
