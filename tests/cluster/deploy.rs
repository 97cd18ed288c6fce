//! The deployment in `manifests/`, checked with kubectl and the real API server of `support`:
//!
//! - every kustomization renders, and the API server accepts it (server-side dry run, strict
//!   field validation, no Pod Security warnings for the namespace's `restricted` level);
//! - the rendered objects say what docs/deploy.md promises (webhook registration, pod security,
//!   probes, drain, names that agree between files);
//! - the manifests' RBAC is all the webhook needs: the built binary runs as the manifests'
//!   ServiceAccount with exactly their Roles and ClusterRoles, watches its publish Service,
//!   takes its Lease, reconciles a stale Ingress status and writes Events, with no forbidden
//!   error in its log; and nothing more (no spec patch, no status update, no other Lease);
//!   scoped by the manifests' own webhook configuration (one scope): nothing is patched while
//!   it does not exist, a namespace its `namespaceSelector` leaves out is never patched, and
//!   widening the selector heals it without a restart;
//! - with `manifests/extras/rbac-node-ips-and-namespaces.yaml` too, a policy with a node-IP
//!   source, a controller class and a namespaceSelector needs nothing more, and gets only
//!   list/watch;
//! - `certs bootstrap`, run with the self-signed overlay's Job arguments as its ServiceAccount,
//!   creates the serving Secret, patches the caBundle, leaves both alone when valid, and renews;
//! - with the Gateway API components and the real CRDs, their RBAC is all a `publishGateway`
//!   source and Gateway policies need (`deploy/gateway.rs`).

use crate::support;

mod gateway;

use std::{collections::BTreeMap, path::Path, process::Command};

use k8s_openapi::api::{
    admissionregistration::v1::MutatingWebhookConfiguration,
    coordination::v1::Lease,
    core::v1::{Secret, Service},
    networking::v1::Ingress,
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use serde::Deserialize as _;
use serde_json::{Value, json};

use support::{
    Class, Cluster, FailurePolicy, TestEnv, Webhook, cluster::KubectlOutput, create_ingress, webhook::BINARY,
    write_status,
};

const NAMESPACE: &str = "ingress-status-guard";
const WEBHOOK_SA: &str = "system:serviceaccount:ingress-status-guard:ingress-status-guard";
const CERTGEN_SA: &str = "system:serviceaccount:ingress-status-guard:ingress-status-guard-certgen";
const KUSTOMIZATIONS: [&str; 5] =
    ["base", "overlays/cert-manager", "overlays/self-signed", "examples/ingress-nginx", "examples/mtls"];

fn manifests(dir: &str) -> String {
    format!("{}/manifests/{dir}", env!("CARGO_MANIFEST_DIR"))
}

fn kubectl(args: &[&str]) -> KubectlOutput {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let out = Command::new(&kubectl).args(args).output().unwrap_or_else(|e| panic!("run {kubectl}: {e}"));
    KubectlOutput {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `kubectl kustomize manifests/<dir>`, as JSON values.
fn render(dir: &str) -> Vec<Value> {
    let out = kubectl(&["kustomize", &manifests(dir)]);
    assert!(out.success, "kubectl kustomize {dir}: {}", out.stderr);
    serde_norway::Deserializer::from_str(&out.stdout)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{dir}: rendered YAML: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"].as_str().is_some_and(|n| n == name))
        .unwrap_or_else(|| panic!("no {kind} {name} in the rendered manifests"))
}

fn find_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

/// Applies `objects` for real, as the administrator.
fn apply(cluster: &Cluster, objects: &[Value]) {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    let file = cluster.scratch_dir("deploy-apply").join("objects.json");
    std::fs::write(&file, list.to_string()).unwrap();
    let out = cluster.kubectl(cluster.admin_kubeconfig(), &["apply", "-f", &file.display().to_string()]);
    assert!(out.success, "kubectl apply: {}\n{}", out.stderr, out.stdout);
}

static PREREQUISITES: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();

/// The manifests' MutatingWebhookConfiguration `ingress-status-guard` is one object in the
/// shared API server: the tests that create it hold this while they use it, and delete it
/// when done; the tests that dry-run apply it hold it too, so they never see another's. A test
/// that creates the base's ServiceAccount and RBAC holds it while it does: a dry-run apply
/// that finds none and then races that create is refused (`AlreadyExists`).
static WEBHOOK_CONFIGURATION: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Deletes the MutatingWebhookConfiguration `ingress-status-guard` if it exists.
async fn delete_webhook_configuration(admin: &kube::Client) {
    let name = "ingress-status-guard";
    match Api::<MutatingWebhookConfiguration>::all(admin.clone()).delete(name, &Default::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => panic!("delete MutatingWebhookConfiguration {name}: {e}"),
    }
}

/// What the shared cluster has before the tests below: the namespace of the publish Service of
/// examples/ingress-nginx, the manifests' Namespace (a server-side dry run cannot create a
/// namespace for the objects in it), and cert-manager's API (a fixture: see
/// tests/fixtures/deploy/).
async fn prerequisites(cluster: &'static Cluster) {
    PREREQUISITES
        .get_or_init(|| async {
            let crds = format!("{}/tests/fixtures/deploy/cert-manager-crds.yaml", env!("CARGO_MANIFEST_DIR"));
            let admin = cluster.admin_kubeconfig();
            let out = cluster.kubectl(admin, &["apply", "--server-side", "-f", &crds]);
            assert!(out.success, "install the cert-manager CRDs: {}", out.stderr);
            let namespace = find(&render("base"), "Namespace", NAMESPACE).clone();
            apply(
                cluster,
                &[namespace, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ingress-nginx"}})],
            );
            let out = cluster.kubectl(
                admin,
                &[
                    "wait",
                    "--for=condition=Established",
                    "--timeout=60s",
                    "crd/issuers.cert-manager.io",
                    "crd/certificates.cert-manager.io",
                ],
            );
            assert!(out.success, "cert-manager CRDs established: {}", out.stderr);
        })
        .await;
}

#[tokio::test]
async fn every_kustomization_renders_and_the_api_server_accepts_it() {
    let cluster = Cluster::shared().await;
    prerequisites(cluster).await;
    // A dry-run apply of an object another test has created is a patch of it, not a create.
    let _configuration = WEBHOOK_CONFIGURATION.lock().await;
    // overlays/admission-policy has no webhook to check below, only objects to accept (and
    // tests/cluster/chart.rs compares it with the chart's admission.mode=policy).
    for dir in KUSTOMIZATIONS.into_iter().chain(["overlays/admission-policy"]) {
        let objects = render(dir).len();
        // What an operator types: kubectl runs kustomize itself.
        let out = cluster.kubectl(
            cluster.admin_kubeconfig(),
            &["apply", "--dry-run=server", "--validate=strict", "-k", &manifests(dir)],
        );
        assert!(out.success, "{dir}: the API server refused it:\n{}\n{}", out.stderr, out.stdout);
        let accepted = out.stdout.lines().filter(|l| l.ends_with("(server dry run)")).count();
        assert_eq!(accepted, objects, "{dir}: every object accepted:\n{}", out.stdout);
        // Pod Security admission warns about workloads whose pods the namespace would refuse.
        assert!(!out.stderr.contains("PodSecurity"), "{dir}: warnings:\n{}", out.stderr);
    }

    // That check has teeth: the same Deployment without its container securityContext is
    // warned about.
    let mut weaker = find(&render("base"), "Deployment", "ingress-status-guard").clone();
    weaker["spec"]["template"]["spec"]["containers"][0].as_object_mut().unwrap().remove("securityContext");
    let file = cluster.scratch_dir("deploy-weaker").join("deployment.json");
    std::fs::write(&file, weaker.to_string()).unwrap();
    let out =
        cluster.kubectl(cluster.admin_kubeconfig(), &["apply", "--dry-run=server", "-f", &file.display().to_string()]);
    assert!(out.stderr.contains("would violate PodSecurity \"restricted:latest\""), "{}", out.stderr);
}

/// `dir` relative to `from` (kustomize refuses absolute paths), both absolute.
fn relative(dir: &Path, from: &Path) -> String {
    let (dir, from): (Vec<_>, Vec<_>) = (dir.components().collect(), from.components().collect());
    let common = dir.iter().zip(&from).take_while(|(a, b)| a == b).count();
    let mut path: Vec<String> = from[common..].iter().map(|_| "..".to_owned()).collect();
    path.extend(dir[common..].iter().map(|c| c.as_os_str().to_string_lossy().into_owned()));
    path.join("/")
}

/// An overlay of the self-signed overlay with both opt-in components, the NetworkPolicy and the
/// client CA, as docs/deploy.md adds them: the API server accepts it, and the policy admits the
/// webhook port, the probe port and nothing else (/metrics only from peers an overlay adds).
#[tokio::test]
async fn the_network_policy_and_client_ca_components_apply_together() {
    let cluster = Cluster::shared().await;
    prerequisites(cluster).await;
    // A dry-run apply of an object another test has created is a patch of it, not a create:
    // the RBAC test's configuration (a url clientConfig) plus this one's service is invalid.
    let _configuration = WEBHOOK_CONFIGURATION.lock().await;
    let dir = cluster.scratch_dir("deploy-components");
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests");
    let up = relative(&base, &dir);
    let kustomization = format!(
        "resources: [{up}/overlays/self-signed]\ncomponents: [{up}/components/network-policy, {up}/components/client-ca]\n"
    );
    std::fs::write(dir.join("kustomization.yaml"), kustomization).unwrap();
    let path = dir.display().to_string();
    let out = kubectl(&["kustomize", &path]);
    assert!(out.success, "kubectl kustomize: {}", out.stderr);
    let docs: Vec<Value> = serde_norway::Deserializer::from_str(&out.stdout)
        .map(|doc| Value::deserialize(doc).unwrap())
        .filter(|v| !v.is_null())
        .collect();
    let out =
        cluster.kubectl(cluster.admin_kubeconfig(), &["apply", "--dry-run=server", "--validate=strict", "-k", &path]);
    assert!(out.success, "the API server refused it:\n{}\n{}", out.stderr, out.stdout);
    assert_eq!(out.stdout.lines().filter(|l| l.ends_with("(server dry run)")).count(), docs.len(), "{}", out.stdout);

    let policy = find(&docs, "NetworkPolicy", "ingress-status-guard");
    assert_eq!(
        policy["spec"]["ingress"],
        json!([
            {"ports": [{"port": 8443, "protocol": "TCP"}], "from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}]},
            {"ports": [{"port": 8081, "protocol": "TCP"}]},
        ]),
        "no rule for the admin port: no pod reaches /metrics until an overlay names one"
    );
    let pod = &find(&docs, "Deployment", "ingress-status-guard")["spec"]["template"];
    for (key, value) in policy["spec"]["podSelector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&pod["metadata"]["labels"][key], value, "the policy selects the webhook pods by {key}");
    }
    let container = &pod["spec"]["containers"][0];
    assert!(
        container["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--client-ca=/etc/ingress-status-guard/client-ca/ca.crt"))
    );
    // The shipped policy is open on 8443, so it does not claim to be narrowed.
    assert!(!container["env"].to_string().contains("ISG_NETWORK_POLICY_NARROWED"));
}

/// What an operator types on a new cluster, against a fresh API server in which nothing was
/// created first (no `ingress-nginx` namespace, nothing of ours): `kubectl apply -k` creates every
/// object in one command, and `kubectl delete -k` removes them all again, the webhook
/// configuration first among them (a leftover one would intercept status writes cluster-wide).
async fn install_on_a_fresh_cluster(dir: &str) {
    let cluster = Cluster::fresh().await;
    let admin = cluster.admin_kubeconfig();
    let out = cluster.kubectl(admin, &["get", "namespaces", "-o", "name"]);
    assert!(out.success, "{}", out.stderr);
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        ["namespace/default", "namespace/kube-node-lease", "namespace/kube-public", "namespace/kube-system"],
        "a fresh cluster"
    );
    if dir == "overlays/cert-manager" {
        // cert-manager itself is the prerequisite of this overlay: its API (a fixture).
        let crds = format!("{}/tests/fixtures/deploy/cert-manager-crds.yaml", env!("CARGO_MANIFEST_DIR"));
        let out = cluster.kubectl(admin, &["apply", "--server-side", "-f", &crds]);
        assert!(out.success, "install the cert-manager CRDs: {}", out.stderr);
        let out = cluster.kubectl(
            admin,
            &[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                "crd/issuers.cert-manager.io",
                "crd/certificates.cert-manager.io",
            ],
        );
        assert!(out.success, "cert-manager CRDs established: {}", out.stderr);
    }

    let rendered = render(dir);
    let out = cluster.kubectl(admin, &["apply", "--validate=strict", "-k", &manifests(dir)]);
    assert!(out.success, "{dir}: kubectl apply -k on a fresh cluster:\n{}\n{}", out.stderr, out.stdout);
    let created = out.stdout.lines().filter(|l| l.ends_with(" created")).count();
    assert_eq!(created, rendered.len(), "{dir}: every object created:\n{}", out.stdout);
    assert!(!out.stderr.contains("PodSecurity"), "{dir}: warnings:\n{}", out.stderr);
    let out = cluster.kubectl(admin, &["get", "mutatingwebhookconfiguration", "ingress-status-guard", "-o", "name"]);
    assert!(out.success, "{dir}: the webhook is registered: {}", out.stderr);

    // No controller-manager runs here, so the Namespace stays Terminating (in a real cluster its
    // controller then deletes what is left in it); everything else is deleted by kubectl itself.
    let out = cluster.kubectl(admin, &["delete", "--wait=false", "-k", &manifests(dir)]);
    assert!(out.success, "{dir}: kubectl delete -k:\n{}\n{}", out.stderr, out.stdout);
    let file = cluster.scratch_dir("fresh-rendered").join("rendered.json");
    std::fs::write(&file, json!({"apiVersion": "v1", "kind": "List", "items": rendered}).to_string()).unwrap();
    let out = cluster.kubectl(admin, &["get", "--ignore-not-found", "-o", "name", "-f", &file.display().to_string()]);
    assert!(out.success, "{}", out.stderr);
    let left: Vec<&str> = out.stdout.lines().filter(|l| *l != format!("namespace/{NAMESPACE}")).collect();
    assert!(left.is_empty(), "{dir}: left behind after kubectl delete -k: {left:?}");
    let out = cluster.kubectl(admin, &["get", "mutatingwebhookconfigurations", "-o", "name"]);
    assert_eq!((out.success, out.stdout.as_str()), (true, ""), "{dir}: no webhook configuration left");
    let out = cluster.kubectl(admin, &["get", "namespace", NAMESPACE, "-o", "jsonpath={.status.phase}"]);
    assert!(!out.success || out.stdout == "Terminating", "{dir}: the namespace is going: {}", out.stdout);
}

#[tokio::test]
async fn the_self_signed_overlay_installs_on_a_fresh_cluster_and_deletes_cleanly() {
    install_on_a_fresh_cluster("overlays/self-signed").await;
}

#[tokio::test]
async fn the_cert_manager_overlay_installs_on_a_fresh_cluster_and_deletes_cleanly() {
    install_on_a_fresh_cluster("overlays/cert-manager").await;
}

#[test]
fn the_rendered_objects_are_what_the_docs_promise() {
    for dir in KUSTOMIZATIONS {
        let docs = render(dir);
        let webhook = &find(&docs, "MutatingWebhookConfiguration", "ingress-status-guard")["webhooks"];
        assert_eq!(webhook.as_array().unwrap().len(), 1, "{dir}");
        let webhook = &webhook[0];
        assert_eq!(
            webhook["rules"],
            json!([{"apiGroups": ["networking.k8s.io"], "apiVersions": ["v1"], "operations": ["UPDATE"],
                    "resources": ["ingresses/status"], "scope": "Namespaced"}]),
            "{dir}: only Ingress status updates"
        );
        assert_eq!(webhook["matchPolicy"], "Equivalent", "{dir}");
        assert_eq!(webhook["admissionReviewVersions"], json!(["v1"]), "{dir}");
        assert_eq!(webhook["sideEffects"], "NoneOnDryRun", "{dir}");
        assert!(webhook["timeoutSeconds"].as_i64().is_some_and(|t| (1..=5).contains(&t)), "{dir}");
        assert!(["Ignore", "Fail"].contains(&webhook["failurePolicy"].as_str().unwrap()), "{dir}");
        let client = &webhook["clientConfig"]["service"];
        assert_eq!((client["path"].as_str(), client["port"].as_i64()), (Some("/mutate"), Some(443)), "{dir}");
        let service = find(&docs, "Service", client["name"].as_str().unwrap());
        assert_eq!(service["metadata"]["namespace"], client["namespace"], "{dir}");
        assert_eq!(
            service["spec"]["ports"],
            json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": "https"}])
        );

        let deployment = find(&docs, "Deployment", "ingress-status-guard");
        let spec = &deployment["spec"]["template"]["spec"];
        assert!(deployment["spec"]["replicas"].as_i64().unwrap() >= 2, "{dir}");
        assert_eq!(spec["securityContext"]["runAsNonRoot"], true, "{dir}");
        assert_eq!(spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault", "{dir}");
        let spread = spec["topologySpreadConstraints"].as_array().unwrap();
        assert!(spread.iter().any(|c| c["topologyKey"] == "kubernetes.io/hostname"), "{dir}: spread across nodes");
        let container = &spec["containers"][0];
        let sc = &container["securityContext"];
        assert_eq!(
            (&sc["readOnlyRootFilesystem"], &sc["allowPrivilegeEscalation"], &sc["capabilities"]["drop"]),
            (&json!(true), &json!(false), &json!(["ALL"])),
            "{dir}"
        );
        assert!(
            container["resources"]["requests"]["memory"].is_string()
                && container["resources"]["limits"]["memory"].is_string()
        );
        let ports: BTreeMap<&str, i64> = container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["name"].as_str().unwrap(), p["containerPort"].as_i64().unwrap()))
            .collect();
        assert_eq!(ports, BTreeMap::from([("admin", 8080), ("https", 8443), ("probes", 8081)]), "{dir}");
        // The probes have a port of their own, which no caller of the admin port can starve.
        assert_eq!(container["livenessProbe"]["httpGet"], json!({"path": "/livez", "port": "probes"}), "{dir}");
        assert_eq!(container["readinessProbe"]["httpGet"], json!({"path": "/readyz", "port": "probes"}), "{dir}");

        // The flags point at the mounted files, and a pod gets time to drain before SIGKILL.
        let args: Vec<&str> = container["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        assert_eq!(args[0], "serve");
        let flag = |name: &str| {
            args.iter().find_map(|a| a.strip_prefix(&format!("--{name}="))).unwrap_or_else(|| panic!("{dir}: --{name}"))
        };
        let drain: i64 = flag("drain-seconds").parse().unwrap();
        let pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"].as_i64().unwrap_or(0);
        assert!(spec["terminationGracePeriodSeconds"].as_i64().unwrap() > pre_stop + drain, "{dir}");
        let mounted = |file: &str, volume: &str| {
            let mount = container["volumeMounts"].as_array().unwrap().iter().find(|m| m["name"] == volume).unwrap();
            assert!(mount["subPath"].is_null(), "{dir}: {volume} must be a directory mount to see updates");
            Path::new(file).parent().unwrap() == Path::new(mount["mountPath"].as_str().unwrap())
        };
        assert!(mounted(flag("tls-cert"), "tls") && mounted(flag("tls-key"), "tls"), "{dir}");
        assert!(mounted(flag("config"), "config"), "{dir}");
        if dir == "examples/mtls" {
            // The client CA component: the Secret's ca.crt, mounted as a directory, is --client-ca.
            assert!(mounted(flag("client-ca"), "client-ca"), "{dir}");
            assert!(flag("client-ca").ends_with("/ca.crt"), "{dir}");
            assert_eq!(flag("client-san"), "kube-apiserver-webhook-client", "{dir}");
            let volume = spec["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "client-ca").unwrap();
            assert_eq!(
                volume["secret"],
                json!({"secretName": "ingress-status-guard-client-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}),
                "{dir}: only the CA certificate"
            );
        } else {
            assert!(!args.iter().any(|a| a.starts_with("--client-ca")), "{dir}: no mTLS unless asked for");
        }
        let volumes = spec["volumes"].as_array().unwrap();
        let tls_secret = volumes.iter().find(|v| v["name"] == "tls").unwrap()["secret"]["secretName"].as_str().unwrap();
        let config_map = volumes.iter().find(|v| v["name"] == "config").unwrap()["configMap"]["name"].as_str().unwrap();

        // The policy file parses, and the webhook may watch exactly its publish Services.
        let config = find(&docs, "ConfigMap", config_map);
        let policies = ingress_status_guard::parse_file("config.yaml", config["data"]["config.yaml"].as_str().unwrap())
            .unwrap_or_else(|e| panic!("{dir}: {e}"));
        let foreign: Vec<_> =
            docs.iter().filter_map(|d| d["metadata"]["namespace"].as_str()).filter(|ns| *ns != NAMESPACE).collect();
        if dir == "examples/ingress-nginx" {
            assert!(!policies.services().is_empty(), "{dir}: the component's policy reads ingress-nginx's Service");
        } else {
            assert!(foreign.is_empty(), "{dir}: installs on a cluster without other namespaces: {foreign:?}");
        }
        for svc in policies.services() {
            let role = docs
                .iter()
                .find(|d| d["kind"] == "Role" && d["metadata"]["namespace"] == svc.namespace.as_str())
                .unwrap_or_else(|| panic!("{dir}: no Role in {} for publish Service {svc}", svc.namespace));
            assert_eq!(
                role["rules"],
                json!([{"apiGroups": [""], "resources": ["services"], "resourceNames": [svc.name], "verbs": ["list", "watch"]}]),
                "{dir}"
            );
        }
        assert_eq!(
            find_kind(&docs, "Role").len() + find_kind(&docs, "ClusterRole").len(),
            match dir {
                "overlays/self-signed" | "examples/mtls" => 7,
                "examples/ingress-nginx" => 8,
                _ => 5,
            },
            "{dir}: no RBAC beyond what is listed"
        );
        // The reconciler's scope: its own webhook configuration, by name, and Namespaces.
        let scope = find(&docs, "ClusterRole", "ingress-status-guard-scope");
        assert_eq!(
            scope["rules"],
            json!([
                {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["mutatingwebhookconfigurations"],
                 "resourceNames": ["ingress-status-guard"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
            ]),
            "{dir}"
        );
        let classes = find(&docs, "ClusterRole", "ingress-status-guard-ingressclasses");
        assert_eq!(
            classes["rules"],
            json!([{"apiGroups": ["networking.k8s.io"], "resources": ["ingressclasses"], "verbs": ["list", "watch"]}]),
            "{dir}"
        );

        match dir {
            "overlays/cert-manager" => {
                let mwc = find(&docs, "MutatingWebhookConfiguration", "ingress-status-guard");
                let from = mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].as_str().unwrap();
                let (ns, name) = from.split_once('/').unwrap();
                let certificate = find(&docs, "Certificate", name);
                assert_eq!(certificate["metadata"]["namespace"], ns);
                assert_eq!(certificate["spec"]["secretName"], tls_secret, "the mounted Secret is the Certificate's");
                let names = ingress_status_guard::service_names(
                    client["name"].as_str().unwrap(),
                    client["namespace"].as_str().unwrap(),
                );
                assert_eq!(certificate["spec"]["dnsNames"], json!(names));
            }
            "overlays/self-signed" | "examples/ingress-nginx" | "examples/mtls" => {
                for job in [
                    find(&docs, "Job", "ingress-status-guard-certgen"),
                    &find(&docs, "CronJob", "ingress-status-guard-certgen")["spec"]["jobTemplate"],
                ] {
                    let args = &job["spec"]["template"]["spec"]["containers"][0]["args"];
                    let args: Vec<&str> = args.as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
                    assert_eq!(&args[..2], ["certs", "bootstrap"]);
                    assert!(args.contains(&format!("--secret={tls_secret}").as_str()), "{args:?}");
                    assert!(
                        args.contains(&format!("--service={}", client["name"].as_str().unwrap()).as_str()),
                        "{args:?}"
                    );
                    assert!(args.contains(&"--webhook-configuration=ingress-status-guard"), "{args:?}");
                }
            }
            _ => {}
        }
    }
}

/// The certgen Job's container arguments, as rendered.
fn certgen_args() -> Vec<String> {
    let docs = render("overlays/self-signed");
    let job = find(&docs, "Job", "ingress-status-guard-certgen");
    job["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

/// Runs `ingress-status-guard` with the Job's arguments (some replaced) as the certgen
/// ServiceAccount; returns its log.
fn run_bootstrap(kubeconfig: &Path, replace: &[(&str, &str)]) -> String {
    let args: Vec<String> = certgen_args()
        .into_iter()
        .map(|a| match replace.iter().find(|(flag, _)| a.starts_with(&format!("{flag}="))) {
            Some((flag, value)) => format!("{flag}={value}"),
            None => a,
        })
        .collect();
    let out = Command::new(BINARY)
        .args(&args)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .env("POD_NAMESPACE", NAMESPACE)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "certs bootstrap {args:?} failed:\n{log}");
    log
}

fn ca_bundle(mwc: &MutatingWebhookConfiguration) -> Vec<u8> {
    mwc.webhooks.as_ref().unwrap()[0].client_config.ca_bundle.clone().map(|b| b.0).unwrap_or_default()
}

fn secret_data(secret: &Secret, key: &str) -> Vec<u8> {
    secret.data.as_ref().unwrap()[key].0.clone()
}

#[tokio::test]
async fn certs_bootstrap_creates_the_secret_patches_the_ca_bundle_and_renews() {
    let cluster = Cluster::shared().await;
    prerequisites(cluster).await;
    let admin = cluster.admin().await;
    let _configuration = WEBHOOK_CONFIGURATION.lock().await;
    let docs = render("overlays/self-signed");
    let mut objects: Vec<Value> = docs
        .iter()
        .filter(|d| {
            d["metadata"]["labels"]["app.kubernetes.io/component"] == "certgen"
                && ["ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"]
                    .contains(&d["kind"].as_str().unwrap())
        })
        .cloned()
        .collect();
    assert_eq!(objects.len(), 5, "the certgen identity and its RBAC");
    // The real registration, except that it selects no namespace: nothing in this test cluster
    // serves it, and the other tests' status writes must not wait for it.
    let mut mwc = find(&docs, "MutatingWebhookConfiguration", "ingress-status-guard").clone();
    mwc["webhooks"][0]["namespaceSelector"] = json!({"matchLabels": {"e2e.ingress-status-guard.test/never": "true"}});
    objects.push(mwc);
    apply(cluster, &objects);

    let kubeconfig = cluster.kubeconfig_for(CERTGEN_SA, Some("system:serviceaccounts"));
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NAMESPACE);
    let configs: Api<MutatingWebhookConfiguration> = Api::all(admin.clone());
    let names = ingress_status_guard::service_names("ingress-status-guard", NAMESPACE);

    // 1. Install: the Secret is created and its CA becomes the caBundle.
    let log = run_bootstrap(&kubeconfig, &[]);
    assert!(log.contains("created the serving Secret"), "{log}");
    let secret = secrets.get("ingress-status-guard-tls").await.unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let ca = secret_data(&secret, "ca.crt");
    let expiry = ingress_status_guard::verify_serving(
        &secret_data(&secret, "tls.crt"),
        &secret_data(&secret, "tls.key"),
        &ca,
        &names,
    )
    .expect("the Secret serves the Service's names under its CA");
    let days_left = expiry.duration_since(std::time::SystemTime::now()).unwrap().as_secs() / 86400;
    assert!((363..=365).contains(&days_left), "--validity-days=365: {days_left}");
    let config = configs.get("ingress-status-guard").await.unwrap();
    assert_eq!(ca_bundle(&config), ca, "caBundle is the Secret's CA");

    // 2. Again: all valid, nothing written.
    let log = run_bootstrap(&kubeconfig, &[]);
    assert!(log.contains("the serving Secret is valid; kept it"), "{log}");
    let again = secrets.get("ingress-status-guard-tls").await.unwrap();
    assert_eq!(again.metadata.resource_version, secret.metadata.resource_version);
    let config_again = configs.get("ingress-status-guard").await.unwrap();
    assert_eq!(config_again.metadata.resource_version, config.metadata.resource_version);

    // 3. Inside the renewal window: a new CA and certificate; the caBundle trusts both the new
    //    CA and the old one until every pod has reloaded.
    let log = run_bootstrap(&kubeconfig, &[("--renew-before-days", "400")]);
    assert!(log.contains("renewed the serving Secret"), "{log}");
    let renewed = secrets.get("ingress-status-guard-tls").await.unwrap();
    let new_ca = secret_data(&renewed, "ca.crt");
    assert_ne!(new_ca, ca);
    let bundle = String::from_utf8(ca_bundle(&configs.get("ingress-status-guard").await.unwrap())).unwrap();
    assert_eq!(
        bundle,
        format!("{}\n{}\n", String::from_utf8_lossy(&new_ca).trim_end(), String::from_utf8_lossy(&ca).trim_end())
    );
    assert_eq!(renewed.metadata.labels, secret.metadata.labels);

    // 4. Someone empties the caBundle (say, a tool re-applying an older manifest): put back.
    let patch = json!({"webhooks": [{"name": "ingress-status-guard.ingress-status-guard.svc", "clientConfig": {"caBundle": null}}]});
    configs.patch("ingress-status-guard", &PatchParams::default(), &Patch::Strategic(&patch)).await.unwrap();
    let log = run_bootstrap(&kubeconfig, &[]);
    assert!(log.contains("the serving Secret is valid; kept it"), "{log}");
    assert_eq!(ca_bundle(&configs.get("ingress-status-guard").await.unwrap()), new_ca);

    // The identity can do nothing else with Secrets.
    let narrow = support::cluster::client_from(&kubeconfig).await;
    let other = Api::<Secret>::namespaced(narrow.clone(), NAMESPACE).get("another-secret").await.unwrap_err();
    assert!(matches!(&other, kube::Error::Api(s) if s.code == 403), "{other:?}");
    let list = Api::<Secret>::namespaced(narrow, NAMESPACE).list(&Default::default()).await.unwrap_err();
    assert!(matches!(&list, kube::Error::Api(s) if s.code == 403), "{list:?}");
    delete_webhook_configuration(&admin).await;
}

#[tokio::test]
async fn the_manifests_rbac_is_all_the_webhook_needs() {
    let t = TestEnv::new("deploy-rbac").await;
    prerequisites(t.cluster).await;
    let _configuration = WEBHOOK_CONFIGURATION.lock().await;
    delete_webhook_configuration(&t.admin).await;
    let docs = render("examples/ingress-nginx");
    let objects: Vec<Value> = docs
        .iter()
        .filter(|d| {
            d["metadata"]["labels"]["app.kubernetes.io/component"] == "webhook"
                && ["ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"]
                    .contains(&d["kind"].as_str().unwrap())
        })
        .cloned()
        .collect();
    assert_eq!(objects.len(), 13, "the webhook's identity and its RBAC");
    apply(t.cluster, &objects);

    // The publish Service of the manifests' policy file, with a load balancer address.
    let services: Api<Service> = Api::namespaced(t.admin.clone(), "ingress-nginx");
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "ingress-nginx-controller"},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "https", "port": 443}]}
    }))
    .unwrap();
    match services.create(&PostParams::default(), &service).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create the publish Service: {e}"),
    }
    let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.60"}]}}});
    services.patch_status("ingress-nginx-controller", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();

    // The identity is as narrow as the manifests say.
    let kubeconfig = t.cluster.kubeconfig_for(WEBHOOK_SA, Some("system:serviceaccounts"));
    let narrow = support::cluster::client_from(&kubeconfig).await;
    let all = Api::<Service>::namespaced(narrow.clone(), "ingress-nginx").list(&Default::default()).await.unwrap_err();
    assert!(matches!(&all, kube::Error::Api(s) if s.code == 403), "only the named Service: {all:?}");
    let elsewhere = Api::<Service>::namespaced(narrow.clone(), &t.ns).list(&Default::default()).await.unwrap_err();
    assert!(matches!(&elsewhere, kube::Error::Api(s) if s.code == 403), "{elsewhere:?}");
    // The reconciler patches status only (never the spec, never a whole update), and touches
    // only its own Lease in its own namespace.
    let forbidden = |r: Result<_, kube::Error>, what: &str| match r {
        Err(kube::Error::Api(s)) if s.code == 403 => {}
        other => panic!("{what} must be forbidden, got {other:?}"),
    };
    create_ingress(&t.ingresses, "stale", Class::Field("nginx")).await;
    write_status(&t.rogue, "stale", &["198.51.100.1"], false).await.expect("a stale status, no webhook yet");
    // The same in a namespace the webhook configuration will leave out at first.
    let excluded = t.cluster.namespace(&t.admin, "deploy-rbac-out").await;
    let outside: Api<Ingress> = Api::namespaced(t.admin.clone(), &excluded);
    create_ingress(&outside, "stale", Class::Field("nginx")).await;
    let rogue_outside: Api<Ingress> = Api::namespaced(t.cluster.rogue().await, &excluded);
    write_status(&rogue_outside, "stale", &["198.51.100.1"], false).await.expect("a stale status outside");
    let as_webhook: Api<Ingress> = Api::namespaced(narrow.clone(), &t.ns);
    let spec_patch = json!({"spec": {"ingressClassName": "other"}});
    forbidden(
        as_webhook.patch("stale", &PatchParams::default(), &Patch::Merge(&spec_patch)).await.map(|_| ()),
        "patching an Ingress",
    );
    let current = t.ingresses.get("stale").await.unwrap();
    forbidden(
        as_webhook.replace_status("stale", &PostParams::default(), &current).await.map(|_| ()),
        "updating ingresses/status",
    );
    let leases = |ns: &str| Api::<Lease>::namespaced(narrow.clone(), ns);
    forbidden(leases(&t.ns).list(&Default::default()).await.map(|_| ()), "listing Leases");
    forbidden(leases(NAMESPACE).get("someone-elses-lease").await.map(|_| ()), "reading another Lease");

    // The built binary, as that identity, with the manifests' policy file.
    let deployment = find(&docs, "Deployment", "ingress-status-guard");
    let volumes = deployment["spec"]["template"]["spec"]["volumes"].as_array().unwrap();
    let config_map = volumes.iter().find(|v| v["name"] == "config").unwrap()["configMap"]["name"].as_str().unwrap();
    let config = find(&docs, "ConfigMap", config_map)["data"]["config.yaml"].as_str().unwrap().to_owned();
    let config_file = t.cluster.scratch_dir("deploy-rbac-config").join("config.yaml");
    std::fs::write(&config_file, config).unwrap();
    let config_arg = format!("--config={}", config_file.display());
    // The reconciler on, its Lease where the Deployment puts it (POD_NAMESPACE), scoped by the
    // manifests' webhook configuration (the default name; the harness passes none otherwise).
    let args = [
        config_arg.as_str(),
        "--reconcile=true",
        "--webhook-configuration=ingress-status-guard",
        "--leader-election-lease-duration=4s",
        "--leader-election-renew-deadline=3s",
        "--leader-election-retry-period=1s",
    ];
    let env = [("POD_NAMESPACE", NAMESPACE), ("POD_NAME", "ingress-status-guard-test")];
    let webhook = Webhook::start_with_env(t.cluster, &t.ns, &kubeconfig, &args, &env).await;
    // Fail closed: no webhook configuration yet, so no scope, so no patch.
    support::eventually("the reconciler says its scope is unknown", std::time::Duration::from_secs(20), || async {
        let log = webhook.log();
        if log.contains("the reconciler's scope is unknown") && log.contains("does not exist") {
            Ok(())
        } else {
            Err(webhook.log_tail())
        }
    })
    .await;
    assert_eq!(support::stored(&t.ingresses, "stale").await, ["198.51.100.1"], "nothing patched while unknown");
    assert_eq!(webhook.metric("ingress_status_guard_reconcile_scope_known"), 0.0);
    // The manifests' webhook configuration, pointed at this webhook, its namespaceSelector (the
    // one scope setting) selecting the test's namespace only; the policy file has none.
    let scope = |namespaces: &[&str]| json!({"matchExpressions": [{"key": support::cluster::NAMESPACE_LABEL, "operator": "In", "values": namespaces}]});
    let mut mwc = find(&docs, "MutatingWebhookConfiguration", "ingress-status-guard").clone();
    mwc["webhooks"][0]["clientConfig"] = json!({"url": webhook.url(), "caBundle": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, webhook.ca_pem())});
    mwc["webhooks"][0]["namespaceSelector"] = scope(&[&t.ns]);
    let mwcs: Api<MutatingWebhookConfiguration> = Api::all(t.admin.clone());
    mwcs.create(&PostParams::default(), &serde_json::from_value(mwc).unwrap()).await.unwrap();
    support::eventually("the stale status healed by the reconciler", std::time::Duration::from_secs(30), || async {
        let got = support::stored(&t.ingresses, "stale").await;
        if got == ["203.0.113.60"] { Ok(()) } else { Err(format!("{got:?}")) }
    })
    .await;
    assert_eq!(webhook.metric("ingress_status_guard_reconcile_scope_known"), 1.0);
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(
        support::stored(&outside, "stale").await,
        ["198.51.100.1"],
        "outside the webhook's scope: never patched"
    );
    // Widening the webhook's selector brings the other namespace in, without a restart.
    let widen = json!({"webhooks": [{"name": "ingress-status-guard.ingress-status-guard.svc", "namespaceSelector": scope(&[&t.ns, &excluded])}]});
    mwcs.patch("ingress-status-guard", &PatchParams::default(), &Patch::Strategic(&widen)).await.unwrap();
    support::eventually("the widened scope healed", std::time::Duration::from_secs(30), || async {
        let got = support::stored(&outside, "stale").await;
        if got == ["203.0.113.60"] { Ok(()) } else { Err(format!("{got:?}")) }
    })
    .await;
    assert_eq!(webhook.metric("ingress_status_guard_leader"), 1.0, "it holds the Lease");
    t.register(&webhook, FailurePolicy::Fail, Class::Field("nginx"), &["203.0.113.60"]).await;
    let event = t.await_event(&webhook, "probe").await;
    assert_eq!(event.regarding.and_then(|r| r.name).as_deref(), Some("probe"));

    let log = webhook.log();
    // The log is the one this webhook wrote (the finding behind the Event is in it), so the
    // absence below means something.
    assert!(log.contains("rogue status write") && log.contains("publish Service resolved"), "{log}");
    assert!(log.contains("reconciler scope known"), "{log}");
    let forbidden = webhook.forbidden_lines();
    assert!(forbidden.is_empty(), "forbidden in the webhook's log: {forbidden:#?}\n{log}");
    // Deleted, the scope is unknown again: said once more.
    delete_webhook_configuration(&t.admin).await;
    support::eventually("the deletion makes the scope unknown", std::time::Duration::from_secs(20), || async {
        let log = webhook.log();
        let unknown = log
            .lines()
            .filter(|l| l.contains("the reconciler's scope is unknown") && l.contains("does not exist"))
            .count();
        if unknown >= 2 { Ok(()) } else { Err(format!("{unknown} unknown-scope lines")) }
    })
    .await;
}

/// The extra RBAC for node IPs and namespace selectors, on top of the base: the webhook runs as
/// the manifests' ServiceAccount with a policy that needs every cache (controller Pods, Nodes,
/// IngressClasses, Namespaces), gets ready and rewrites a write to the node's address, with no
/// forbidden error; and that identity may only list and watch.
#[tokio::test]
async fn the_extra_rbac_is_all_node_ips_and_namespace_selectors_need() {
    use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
    let t = TestEnv::new("deploy-extras").await;
    prerequisites(t.cluster).await;
    let rbac = |docs: Vec<Value>| -> Vec<Value> {
        docs.into_iter()
            .filter(|d| {
                ["ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"]
                    .contains(&d["kind"].as_str().unwrap())
            })
            .collect()
    };
    let extras_file = manifests("extras/rbac-node-ips-and-namespaces.yaml");
    let text = std::fs::read_to_string(&extras_file).unwrap();
    let extras: Vec<Value> = serde_norway::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .filter(|v| !v.is_null())
        .collect();
    for rule in extras
        .iter()
        .filter(|d| d["kind"] == "Role" || d["kind"] == "ClusterRole")
        .flat_map(|d| d["rules"].as_array().unwrap())
    {
        assert_eq!(rule["verbs"], json!(["list", "watch"]), "{rule}");
    }
    let mut objects = rbac(render("base"));
    objects.extend(rbac(extras));
    {
        let _configuration = WEBHOOK_CONFIGURATION.lock().await;
        apply(t.cluster, &objects);
    }

    // A controller Pod, Ready on a Node, in the namespace the extra Role names.
    let node_name = format!("{}-node", t.ns);
    let nodes: Api<Node> = Api::all(t.admin.clone());
    nodes
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": node_name}})).unwrap())
        .await
        .unwrap();
    let addresses = json!({"status": {"addresses": [{"type": "ExternalIP", "address": "203.0.113.70"}]}});
    nodes.patch_status(&node_name, &PatchParams::default(), &Patch::Merge(&addresses)).await.unwrap();
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": "ingress-nginx"}});
    apply(t.cluster, &[sa]);
    let pods: Api<Pod> = Api::namespaced(t.admin.clone(), "ingress-nginx");
    let pod_name = format!("{}-ctrl", t.ns);
    let pod = json!({"metadata": {"name": pod_name, "labels": {"isg-test": t.ns}},
        "spec": {"nodeName": node_name, "automountServiceAccountToken": false,
                 "containers": [{"name": "c", "image": "registry.invalid/controller:1"}]}});
    pods.create(&PostParams::default(), &serde_json::from_value(pod).unwrap()).await.unwrap();
    let ready = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    pods.patch_status(&pod_name, &PatchParams::default(), &Patch::Merge(&ready)).await.unwrap();
    Api::<Namespace>::all(t.admin.clone())
        .patch(&t.ns, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"isg-team": "blue"}}})))
        .await
        .unwrap();

    let kubeconfig = t.cluster.kubeconfig_for(WEBHOOK_SA, Some("system:serviceaccounts"));
    let narrow = support::cluster::client_from(&kubeconfig).await;
    let forbidden = |r: Result<(), kube::Error>, what: &str| {
        assert!(matches!(&r, Err(kube::Error::Api(s)) if s.code == 403), "{what} must be forbidden: {r:?}");
    };
    forbidden(
        Api::<Pod>::namespaced(narrow.clone(), &t.ns).list(&Default::default()).await.map(|_| ()),
        "Pods elsewhere",
    );
    forbidden(Api::<Pod>::namespaced(narrow.clone(), "ingress-nginx").get(&pod_name).await.map(|_| ()), "get of a Pod");
    forbidden(Api::<Node>::all(narrow.clone()).get(&node_name).await.map(|_| ()), "get of a Node");
    forbidden(
        Api::<Secret>::namespaced(narrow, "ingress-nginx").list(&Default::default()).await.map(|_| ()),
        "Secrets",
    );

    let config = format!(
        "policies:\n  - name: bare-metal\n    controllerClasses: [example.com/{ns}]\n    ingressClasses: [{ns}]\n    namespaceSelector: isg-team=blue\n    publishPods: {{namespace: ingress-nginx, selector: isg-test={ns}}}\n",
        ns = t.ns
    );
    let config_file = t.cluster.scratch_dir("deploy-extras-config").join("config.yaml");
    std::fs::write(&config_file, config).unwrap();
    let config_arg = format!("--config={}", config_file.display());
    let webhook = Webhook::start(t.cluster, &t.ns, &kubeconfig, &[&config_arg]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::Field(&t.ns), &["203.0.113.70"]).await;
    let log = webhook.log();
    assert!(log.contains("watch synced") && log.contains("Nodes"), "{log}");
    let forbidden = webhook.forbidden_lines();
    assert!(forbidden.is_empty(), "forbidden in the webhook's log: {forbidden:#?}\n{log}");
}
