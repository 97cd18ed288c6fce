//! `render-admission-policy` against a real kube-apiserver (v1.37 by default, where
//! MutatingAdmissionPolicy is GA): the rendered objects apply, and then the API server itself
//! enforces the policy, with no guard process and no webhook registered at all.
//!
//! MutatingAdmissionPolicies are cluster-scoped and match every namespace, so each test names
//! its own ingress class (its namespace's name) and renders for a Lease of its own
//! ([`lease_flag`]): the objects are named `<lease>-<kind>-<n>`, whatever the policy is called.

use crate::support;

mod equivalence;
mod forged;
mod gateway;
mod guard;
mod hybrid;
mod kept;
mod service;
mod trusted;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::Api;
use serde_json::json;

use support::webhook::BINARY;
use support::{Class, SENTINEL, SENTINEL_2, TestEnv, create_ingress, entries, eventually, stored, write_status};

const WAIT: Duration = Duration::from_secs(60);

/// A policy file governing class `class`, addresses from Service `<ns>/edge`.
fn config(name: &str, class: &str, ns: &str, mode: &str) -> String {
    format!(
        "policies:\n  - name: {name}\n    ingressClasses: [{class}]\n    publishService: {ns}/edge\n    mode: {mode}\n"
    )
}

/// The publish Service, as `kubectl get svc -o yaml` would give it: never created in the
/// cluster, only read by `render-admission-policy`.
fn service_manifest(ns: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: edge, namespace: {ns}}}\n\
         spec: {{type: LoadBalancer, ports: [{{port: 80}}]}}\n\
         status: {{loadBalancer: {{ingress: [{{ip: 203.0.113.10}}, {{hostname: lb.{ns}.example.com}}]}}}}\n"
    )
}

/// The Lease a test's admission objects are rendered and kept for, so that no two tests of the
/// shared API server share an object name (`<lease>-ingress-0`, ...): `isg-<namespace>`.
fn lease_of(ns: &str) -> String {
    format!("isg-{ns}")
}

/// `--leader-election-lease-name` of [`lease_of`] `ns`.
fn lease_flag(ns: &str) -> String {
    format!("--leader-election-lease-name={}", lease_of(ns))
}

/// Runs `render-admission-policy` with `args`; returns (exit code, stdout, stderr).
fn run_render(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(BINARY).arg("render-admission-policy").args(args).output().expect("run the binary");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Renders the policy of `config_text` over the Service manifest and applies the output, first
/// with `--dry-run=server` (so the API server validates and compiles it), then for real.
fn render_and_apply(t: &TestEnv, dir: &Path, config_text: &str) -> PathBuf {
    let (cfg, svc, out) = (dir.join("policies.yaml"), dir.join("svc.yaml"), dir.join("rendered.yaml"));
    std::fs::write(&cfg, config_text).unwrap();
    std::fs::write(&svc, service_manifest(&t.ns)).unwrap();
    let lease = lease_flag(&t.ns);
    let (code, yaml, stderr) = run_render(&["--config", cfg.to_str().unwrap(), "-f", svc.to_str().unwrap(), &lease]);
    assert_eq!(code, Some(0), "render failed: {stderr}");
    std::fs::write(&out, &yaml).unwrap();
    let admin = t.cluster.admin_kubeconfig();
    let dry = t.cluster.kubectl(admin, &["apply", "--dry-run=server", "-f", out.to_str().unwrap()]);
    assert!(dry.success, "server dry run refused the rendered objects: {}\n{yaml}", dry.stderr);
    let applied = t.cluster.kubectl(admin, &["apply", "-f", out.to_str().unwrap()]);
    assert!(applied.success, "apply failed: {}", applied.stderr);
    out
}

fn canonical(ns: &str) -> Vec<String> {
    vec!["203.0.113.10".to_owned(), format!("lb.{ns}.example.com")]
}

/// The harness's API server serves MutatingAdmissionPolicy without any extra flag.
#[tokio::test]
async fn the_api_server_serves_mutating_admission_policies() {
    let t = TestEnv::new("map-served").await;
    let out =
        t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["api-resources", "--api-group=admissionregistration.k8s.io"]);
    assert!(out.success, "{}", out.stderr);
    assert!(out.stdout.contains("mutatingadmissionpolicies"), "{}", out.stdout);
    assert!(out.stdout.contains("mutatingadmissionpolicybindings"), "{}", out.stdout);
    // Why `audit` renders a ValidatingAdmissionPolicy: a MutatingAdmissionPolicy without a
    // mutation is refused ("spec.mutations: Required value: mutations must contain at least one
    // item").
    let dir = t.cluster.scratch_dir("map-empty");
    let file = dir.join("empty.yaml");
    std::fs::write(
        &file,
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicy\nmetadata: {name: isg-empty}\n\
         spec:\n  reinvocationPolicy: Never\n  matchConstraints:\n    resourceRules:\n    - {apiGroups: [networking.k8s.io], apiVersions: [v1], operations: [UPDATE], resources: [ingresses/status]}\n  mutations: []\n",
    )
    .unwrap();
    let empty =
        t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["apply", "--dry-run=server", "-f", file.to_str().unwrap()]);
    assert!(!empty.success, "a MAP without mutations was accepted");
    assert!(empty.stderr.contains("spec.mutations"), "{}", empty.stderr);
}

/// An unresolved source: exit 1, naming the policy and why.
#[test]
fn an_unresolved_source_is_refused_naming_the_policy() {
    let dir = std::env::temp_dir().join(format!("isg-render-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("p.yaml");
    std::fs::write(&cfg, config("edge", "nginx", "elsewhere", "enforce")).unwrap();
    let (code, stdout, stderr) = run_render(&["--config", cfg.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("policy \"edge\" is unresolved: Service elsewhere/edge not found"), "{stderr}");
}

/// Enforce: a rogue write by another identity is rewritten by the API server to the canonical
/// value, through the field and the annotation; an Ingress of another class keeps its write.
#[tokio::test]
async fn a_rendered_mutating_policy_rewrites_rogue_writes_with_no_guard_running() {
    let t = TestEnv::private("map-enforce").await;
    let dir = t.cluster.scratch_dir("map-enforce");
    render_and_apply(&t, &dir, &config(&t.ns, &t.ns, &t.ns, "enforce"));
    // No guard: nothing is registered as a webhook.
    let webhooks = Api::<MutatingWebhookConfiguration>::all(t.admin.clone()).list(&Default::default()).await.unwrap();
    assert!(webhooks.items.is_empty(), "{:?}", webhooks.items.iter().map(|w| &w.metadata.name).collect::<Vec<_>>());

    let other_class = format!("other-{}", t.ns);
    create_ingress(&t.ingresses, "web", Class::Field(&t.ns)).await;
    create_ingress(&t.ingresses, "legacy", Class::Annotation(&t.ns)).await;
    create_ingress(&t.ingresses, "other", Class::Field(&other_class)).await;
    let want = canonical(&t.ns);
    // The API server starts enforcing once its policy informer has the objects.
    eventually("the MAP rewrites the rogue write", WAIT, || async {
        let got = addresses_of(write_status(&t.rogue, "web", &[SENTINEL], false).await.map_err(|e| e.to_string())?);
        if got == want { Ok(()) } else { Err(format!("stored {got:?}")) }
    })
    .await;
    assert_eq!(stored(&t.ingresses, "web").await, want);
    for (name, written) in [
        ("legacy", vec![SENTINEL]),
        ("web", vec!["203.0.113.10:80", "lb.example.org"]),
        ("web", vec![want[1].as_str(), "203.0.113.10", "203.0.113.10"]),
    ] {
        write_status(&t.rogue, name, &written, false).await.expect("the write is allowed");
        assert_eq!(stored(&t.ingresses, name).await, want, "{name} after writing {written:?}");
    }
    // A write that removes the status (the patch adds `/status` when the object has none).
    let rogue = t.cluster.kubeconfig_for(support::ROGUE_USER, Some(support::cluster::STATUS_WRITERS));
    let remove = r#"[{"op": "remove", "path": "/status"}]"#;
    let out = t.cluster.kubectl(
        &rogue,
        &["patch", "ingress", "legacy", "-n", &t.ns, "--subresource=status", "--type=json", "-p", remove],
    );
    assert!(out.success, "{}", out.stderr);
    assert_eq!(stored(&t.ingresses, "legacy").await, want, "after removing the status");
    write_status(&t.rogue, "other", &[SENTINEL], false).await.expect("the write is allowed");
    assert_eq!(stored(&t.ingresses, "other").await, [SENTINEL], "another class is left as written");
}

/// Deny: a write off canonical is refused with the message naming the canonical value; the
/// canonical set in another order is accepted as written, as the webhook accepts it.
#[tokio::test]
async fn a_rendered_deny_policy_refuses_with_the_canonical_value() {
    let t = TestEnv::new("map-deny").await;
    let dir = t.cluster.scratch_dir("map-deny");
    render_and_apply(&t, &dir, &config(&t.ns, &t.ns, &t.ns, "deny"));
    create_ingress(&t.ingresses, "web", Class::Field(&t.ns)).await;
    let want = canonical(&t.ns);
    let message = eventually("the VAP refuses the rogue write", WAIT, || async {
        match write_status(&t.rogue, "web", &[SENTINEL], false).await {
            Err(kube::Error::Api(status)) => Ok(status.message),
            other => Err(format!("not refused: {other:?}")),
        }
    })
    .await;
    let expected =
        format!("ingress-status-guard policy \"{}\" requires status.loadBalancer.ingress [{}]", t.ns, want.join(","));
    assert!(message.contains(&expected), "{message}");
    // Writes made before the API server enforced the policy may be stored; a refused one is not.
    let before = stored(&t.ingresses, "web").await;
    write_status(&t.rogue, "web", &[SENTINEL_2], false).await.expect_err("refused");
    assert_eq!(stored(&t.ingresses, "web").await, before);
    let reversed = [want[1].as_str(), want[0].as_str()];
    write_status(&t.rogue, "web", &reversed, false).await.expect("the canonical set is accepted");
    assert_eq!(stored(&t.ingresses, "web").await, reversed);
    let ported = write_status(&t.rogue, "web", &["203.0.113.10:80", &want[1]], false).await;
    assert!(ported.is_err(), "ports are not canonical here: {ported:?}");
    // Longer than the webhook's reader keeps (256 entries): never canonical, though the set is.
    let mut long: Vec<&str> = vec![&want[1]];
    long.extend(std::iter::repeat_n(want[0].as_str(), 300));
    let long = write_status(&t.rogue, "web", &long, false).await;
    assert!(
        long.is_err(),
        "301 entries are refused, as the webhook refuses them: {:?}",
        long.map(|i| addresses_of(i).len())
    );
}

/// Audit: the write is stored as written, and the writer gets a warning naming the canonical
/// value (kubectl prints it).
#[tokio::test]
async fn a_rendered_audit_policy_warns_and_stores_the_write() {
    let t = TestEnv::new("map-audit").await;
    let dir = t.cluster.scratch_dir("map-audit");
    render_and_apply(&t, &dir, &config(&t.ns, &t.ns, &t.ns, "audit"));
    create_ingress(&t.ingresses, "web", Class::Field(&t.ns)).await;
    let rogue = t.cluster.kubeconfig_for(support::ROGUE_USER, Some(support::cluster::STATUS_WRITERS));
    let patch = json!({"status": {"loadBalancer": {"ingress": entries(&[SENTINEL])}}}).to_string();
    let warning = eventually("the VAP warns the writer", WAIT, || async {
        let out = t.cluster.kubectl(
            &rogue,
            &["patch", "ingress", "web", "-n", &t.ns, "--subresource=status", "--type=merge", "-p", &patch],
        );
        if !out.success {
            return Err(out.stderr);
        }
        if out.stderr.contains("requires status.loadBalancer.ingress") { Ok(out.stderr) } else { Err(out.stderr) }
    })
    .await;
    assert!(warning.contains(&canonical(&t.ns).join(",")), "{warning}");
    assert_eq!(stored(&t.ingresses, "web").await, [SENTINEL]);
    // The API server's audit log names the writer and the failed validation.
    let audited = eventually("the audit log records the failed validation", WAIT, || async {
        let events = t.cluster.ingress_status_audit(&t.ns, "web");
        events
            .into_iter()
            .find(|e| e["annotations"]["validation.policy.admission.k8s.io/validation_failure"].is_string())
            .ok_or_else(|| "no audit event with validation_failure yet".to_owned())
    })
    .await;
    assert_eq!(audited["user"]["username"], support::ROGUE_USER);
    let failure = audited["annotations"]["validation.policy.admission.k8s.io/validation_failure"].as_str().unwrap();
    assert!(failure.contains(&format!("isg-{}-ingress-0", t.ns)), "{failure}");
}

fn addresses_of(ingress: k8s_openapi::api::networking::v1::Ingress) -> Vec<String> {
    support::addresses(&ingress)
}

/// A controller-class policy: the IngressClasses of `-f` resolve it into class names, and a
/// class-less Ingress is governed because the default class is one of them. Its
/// `namespaceSelector` (in the binding) keeps it to this test's namespace, which matters: it
/// governs every class-less Ingress it matches.
#[tokio::test]
async fn controller_and_default_classes_resolve_from_the_manifests() {
    let t = TestEnv::private("map-ctl").await;
    let dir = t.cluster.scratch_dir("map-ctl");
    let controller = format!("example.com/{}", t.ns);
    let (cfg, manifests, out) = (dir.join("p.yaml"), dir.join("objects.yaml"), dir.join("rendered.yaml"));
    std::fs::write(
        &cfg,
        format!(
            "policies:\n  - name: {ns}\n    controllerClasses: [{controller}]\n    publishService: {ns}/edge\n    namespaceSelector: \"{label}={ns}\"\n",
            ns = t.ns,
            label = support::cluster::NAMESPACE_LABEL
        ),
    )
    .unwrap();
    std::fs::write(
        &manifests,
        format!(
            "{}---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: {ns}-main\n  annotations: {{ingressclass.kubernetes.io/is-default-class: \"true\"}}\nspec: {{controller: {controller}}}\n\
             ---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {{name: {ns}-foreign}}\nspec: {{controller: example.com/foreign}}\n",
            service_manifest(&t.ns),
            ns = t.ns
        ),
    )
    .unwrap();
    let lease = lease_flag(&t.ns);
    let (code, yaml, stderr) =
        run_render(&["--config", cfg.to_str().unwrap(), "-f", manifests.to_str().unwrap(), &lease]);
    assert_eq!(code, Some(0), "{stderr}");
    std::fs::write(&out, &yaml).unwrap();
    let applied = t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["apply", "-f", out.to_str().unwrap()]);
    assert!(applied.success, "{}", applied.stderr);

    create_ingress(&t.ingresses, "main", Class::Field(&format!("{}-main", t.ns))).await;
    create_ingress(&t.ingresses, "foreign", Class::Field(&format!("{}-foreign", t.ns))).await;
    create_ingress(&t.ingresses, "classless", Class::None).await;
    let want = canonical(&t.ns);
    eventually("the MAP rewrites the class-less Ingress", WAIT, || async {
        let got =
            addresses_of(write_status(&t.rogue, "classless", &[SENTINEL], false).await.map_err(|e| e.to_string())?);
        if got == want { Ok(()) } else { Err(format!("stored {got:?}")) }
    })
    .await;
    write_status(&t.rogue, "main", &[SENTINEL], false).await.unwrap();
    assert_eq!(stored(&t.ingresses, "main").await, want);
    write_status(&t.rogue, "foreign", &[SENTINEL], false).await.unwrap();
    assert_eq!(stored(&t.ingresses, "foreign").await, [SENTINEL]);
    // Another namespace is outside the binding's namespaceSelector.
    let outside = t.cluster.namespace(&t.admin, "map-ctl-out").await;
    let (admin, rogue) =
        (Api::namespaced(t.admin.clone(), &outside), Api::namespaced(t.cluster.rogue().await, &outside));
    create_ingress(&admin, "classless", Class::None).await;
    write_status(&rogue, "classless", &[SENTINEL], false).await.unwrap();
    assert_eq!(stored(&admin, "classless").await, [SENTINEL]);
}

/// Kept ports: the typed literal of `ports` (with `error`) compiles in the API server, and a
/// rogue write gets the Service's entries with their ports.
#[tokio::test]
async fn kept_ports_are_written_by_the_mutating_policy() {
    let t = TestEnv::new("map-ports").await;
    let dir = t.cluster.scratch_dir("map-ports");
    let (cfg, svc, out) = (dir.join("p.yaml"), dir.join("svc.yaml"), dir.join("rendered.yaml"));
    std::fs::write(&cfg, format!("{}    keepPorts: true\n", config(&t.ns, &t.ns, &t.ns, "enforce"))).unwrap();
    std::fs::write(
        &svc,
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: edge, namespace: {ns}}}\nspec: {{type: LoadBalancer, ports: [{{port: 80}}]}}\n\
             status: {{loadBalancer: {{ingress: [{{ip: 203.0.113.10, ports: [{{port: 80, protocol: TCP}}, {{port: 443, protocol: TCP, error: Pending}}]}}]}}}}\n",
            ns = t.ns
        ),
    )
    .unwrap();
    let lease = lease_flag(&t.ns);
    let (code, yaml, stderr) = run_render(&["--config", cfg.to_str().unwrap(), "-f", svc.to_str().unwrap(), &lease]);
    assert_eq!(code, Some(0), "{stderr}");
    std::fs::write(&out, &yaml).unwrap();
    let applied = t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["apply", "-f", out.to_str().unwrap()]);
    assert!(applied.success, "{}", applied.stderr);
    create_ingress(&t.ingresses, "web", Class::Field(&t.ns)).await;
    let stored_ingress = eventually("the MAP writes the ports", WAIT, || async {
        let got = write_status(&t.rogue, "web", &[SENTINEL], false).await.map_err(|e| e.to_string())?;
        if addresses_of(got.clone()) == ["203.0.113.10:80:443"] { Ok(got) } else { Err(format!("{got:?}")) }
    })
    .await;
    let entry = &stored_ingress.status.unwrap().load_balancer.unwrap().ingress.unwrap()[0];
    let ports = entry.ports.as_ref().expect("ports");
    assert_eq!(ports[1].error.as_deref(), Some("Pending"));
    assert_eq!(ports[1].protocol, "TCP");
}

/// Two policies that both match an Ingress at run time (a class named by one whose
/// IngressClass has the other's controller): the first in file order governs, as with the
/// webhook, though the API server runs every matching admission policy.
#[tokio::test]
async fn the_first_policy_in_file_order_governs_an_overlap() {
    let t = TestEnv::new("map-first").await;
    let dir = t.cluster.scratch_dir("map-first");
    let (cfg, classes, out) = (dir.join("p.yaml"), dir.join("classes.yaml"), dir.join("rendered.yaml"));
    let (class, lan, controller) = (format!("{}-edge", t.ns), format!("{}-lan", t.ns), format!("example.com/{}", t.ns));
    std::fs::write(
        &cfg,
        format!(
            "policies:\n  - name: {ns}-a-first\n    ingressClasses: [{class}]\n    publishStatusAddress: 192.0.2.1\n\
             \x20 - name: {ns}-z-second\n    controllerClasses: [{controller}]\n    publishStatusAddress: 192.0.2.2\n",
            ns = t.ns
        ),
    )
    .unwrap();
    std::fs::write(
        &classes,
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {{name: {class}}}\nspec: {{controller: {controller}}}\n\
             ---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {{name: {lan}}}\nspec: {{controller: {controller}}}\n"
        ),
    )
    .unwrap();
    let lease = lease_flag(&t.ns);
    let (code, yaml, stderr) =
        run_render(&["--config", cfg.to_str().unwrap(), "-f", classes.to_str().unwrap(), &lease]);
    assert_eq!(code, Some(0), "{stderr}");
    std::fs::write(&out, &yaml).unwrap();
    let applied = t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["apply", "-f", out.to_str().unwrap()]);
    assert!(applied.success, "{}", applied.stderr);
    // Named by their places in the file, each annotated with its policy's name.
    for (slot, policy) in [(0, format!("{}-a-first", t.ns)), (1, format!("{}-z-second", t.ns))] {
        let name = format!("{}-ingress-{slot}", lease_of(&t.ns));
        let map = guard::get_object(&t, "mutatingadmissionpolicy", &name).unwrap_or_else(|| panic!("no MAP {name}"));
        assert_eq!(map["metadata"]["annotations"]["ingress-status-guard/policy"], policy.as_str(), "{name}");
    }
    create_ingress(&t.ingresses, "web", Class::Field(&class)).await;
    eventually("the first policy's MAP rewrites the write", WAIT, || async {
        let got = addresses_of(write_status(&t.rogue, "web", &[SENTINEL], false).await.map_err(|e| e.to_string())?);
        if got == ["192.0.2.1"] { Ok(()) } else { Err(format!("stored {got:?}")) }
    })
    .await;
    // The second policy is in force too (it governs a class of its controller alone), and still
    // the first one's answer stands.
    create_ingress(&t.ingresses, "lan", Class::Field(&lan)).await;
    eventually("the second policy's MAP rewrites its own class", WAIT, || async {
        let got = addresses_of(write_status(&t.rogue, "lan", &[SENTINEL], false).await.map_err(|e| e.to_string())?);
        if got == ["192.0.2.2"] { Ok(()) } else { Err(format!("stored {got:?}")) }
    })
    .await;
    write_status(&t.rogue, "web", &[SENTINEL_2], false).await.unwrap();
    assert_eq!(stored(&t.ingresses, "web").await, ["192.0.2.1"]);
}

/// The largest canonical value a write can be compared with (256 entries, the webhook reader's
/// bound): the API server compiles and accepts every kind rendered for it (its CEL cost
/// estimate included), and the mutation writes all of it.
#[tokio::test]
async fn a_canonical_value_of_256_entries_is_accepted_by_the_api_server() {
    let t = TestEnv::new("map-large").await;
    let dir = t.cluster.scratch_dir("map-large");
    let ips: Vec<String> = (0..256).map(|i| format!("10.{}.{}.{}", t.ns.len(), i / 250, i % 250 + 1)).collect();
    for mode in ["enforce", "deny", "audit"] {
        let name = format!("{}-{mode}", t.ns);
        let class = if mode == "enforce" { t.ns.clone() } else { name.clone() };
        let file = format!(
            "policies:\n  - name: {name}\n    ingressClasses: [{class}]\n    publishStatusAddress: \"{}\"\n    mode: {mode}\n",
            ips.join(",")
        );
        let cfg = dir.join(format!("{mode}.yaml"));
        std::fs::write(&cfg, file).unwrap();
        // Each file's one policy takes slot 0: a Lease per mode, so the three objects are three.
        let lease = format!("--leader-election-lease-name={}-{mode}", lease_of(&t.ns));
        let (code, yaml, stderr) = run_render(&["--config", cfg.to_str().unwrap(), &lease]);
        assert_eq!(code, Some(0), "{stderr}");
        let out = dir.join(format!("{mode}-rendered.yaml"));
        std::fs::write(&out, &yaml).unwrap();
        let applied = t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["apply", "-f", out.to_str().unwrap()]);
        assert!(applied.success, "{mode}: {} bytes refused: {}", yaml.len(), applied.stderr);
    }
    create_ingress(&t.ingresses, "web", Class::Field(&t.ns)).await;
    let stored_ingress = eventually("the MAP writes 256 entries", WAIT, || async {
        let got = addresses_of(write_status(&t.rogue, "web", &[SENTINEL], false).await.map_err(|e| e.to_string())?);
        if got.len() == 256 { Ok(got) } else { Err(format!("{} entries", got.len())) }
    })
    .await;
    let mut want = ips.clone();
    want.sort();
    let mut got = stored_ingress;
    got.sort();
    assert_eq!(got, want);
}

/// Two releases whose objects had one name under the old naming (`<lease>-<policy>`: Lease
/// `isg-<ns>` with policy `team-web`, Lease `isg-<ns>-team` with policy `web`) render disjoint
/// names, apply side by side, and each one's policy is enforced on its own class.
#[tokio::test]
async fn two_releases_whose_old_names_collided_are_both_enforced() {
    let t = TestEnv::new("map-two").await;
    let dir = t.cluster.scratch_dir("map-two");
    let admin = t.cluster.admin_kubeconfig();
    let releases = [
        (lease_of(&t.ns), "team-web", format!("{}-a", t.ns), "203.0.113.21"),
        (format!("{}-team", lease_of(&t.ns)), "web", format!("{}-b", t.ns), "203.0.113.22"),
    ];
    let mut names = Vec::new();
    for (i, (lease, policy, class, address)) in releases.iter().enumerate() {
        let cfg = dir.join(format!("policies-{i}.yaml"));
        std::fs::write(
            &cfg,
            format!(
                "policies:\n  - name: {policy}\n    ingressClasses: [{class}]\n    publishStatusAddress: {address}\n    mode: enforce\n"
            ),
        )
        .unwrap();
        let lease_arg = format!("--leader-election-lease-name={lease}");
        let (code, yaml, stderr) = run_render(&["--config", cfg.to_str().unwrap(), &lease_arg]);
        assert_eq!(code, Some(0), "render failed: {stderr}");
        let rendered: Vec<serde_json::Value> =
            serde_norway::Deserializer::from_str(&yaml).map(|d| serde::Deserialize::deserialize(d).unwrap()).collect();
        names.extend(
            rendered
                .iter()
                .filter_map(|o| Some(format!("{}/{}", o["kind"].as_str()?, o["metadata"]["name"].as_str()?))),
        );
        let out = dir.join(format!("rendered-{i}.yaml"));
        std::fs::write(&out, &yaml).unwrap();
        let applied = t.cluster.kubectl(admin, &["apply", "-f", out.to_str().unwrap()]);
        assert!(applied.success, "apply failed: {}", applied.stderr);
    }
    let distinct: std::collections::BTreeSet<&String> = names.iter().collect();
    assert_eq!(distinct.len(), names.len(), "the two releases share an object name: {names:?}");
    for (lease, ..) in &releases {
        assert!(names.contains(&format!("MutatingAdmissionPolicy/{lease}-ingress-0")), "{names:?}");
    }

    for (i, (_, _, class, address)) in releases.iter().enumerate() {
        let name = format!("web-{i}");
        create_ingress(&t.ingresses, &name, Class::Field(class)).await;
        eventually(&format!("release {i}'s policy rewrites {name}"), WAIT, || async {
            let got = addresses_of(write_status(&t.rogue, &name, &[SENTINEL], false).await.map_err(|e| e.to_string())?);
            if got == [*address] { Ok(()) } else { Err(format!("stored {got:?}")) }
        })
        .await;
    }
    // Both stay in force: neither release's objects replaced the other's.
    for (i, (_, _, _, address)) in releases.iter().enumerate() {
        let name = format!("web-{i}");
        write_status(&t.rogue, &name, &[SENTINEL_2], false).await.expect("the write is allowed");
        assert_eq!(stored(&t.ingresses, &name).await, [*address], "{name}");
    }
}
