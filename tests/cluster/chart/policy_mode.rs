//! `admission.mode=policy`: no certificate machinery, no MutatingWebhookConfiguration, no
//! Events grant, the RBAC the leader needs for its admission policies (by name where the API
//! allows, the names the binary computes: `render-admission-policy --names`), as the kustomize
//! overlay `overlays/admission-policy` has it; and that RBAC is all the guard needs.

use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::{CHART, Helm, NAMESPACE, RELEASE, find, kinds, kustomize, scratch};
use crate::support::{Class, TestEnv, Webhook, create_ingress, eventually, write_status};

const WAIT: std::time::Duration = std::time::Duration::from_secs(60);

fn args_of(docs: &[Value]) -> Vec<String> {
    let args = &find(docs, "Deployment", RELEASE)["spec"]["template"]["spec"]["containers"][0]["args"];
    args.as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()).collect()
}

/// What `render-admission-policy --names` prints for the policy file `config` and the Lease.
fn binary_names(dir: &std::path::Path, config: &str, lease: &str) -> Vec<String> {
    let file = dir.join(format!("{lease}-config.yaml"));
    std::fs::write(&file, config).unwrap();
    let out = std::process::Command::new(crate::support::webhook::BINARY)
        .args(["render-admission-policy", "--names", "--config", file.to_str().unwrap()])
        .args(["--leader-election-lease-name", lease])
        .output()
        .expect("run the binary");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

/// The 48 fixed names the guard of the Lease `lease` may give its admission objects.
fn slots(lease: &str) -> Vec<String> {
    ["ingress", "gateway", "service"]
        .iter()
        .flat_map(|kind| (0..16).map(move |n| format!("{lease}-{kind}-{n}")))
        .collect()
}

/// The names of the first container's ports in the pod spec `pod`.
fn port_names(pod: &Value) -> Vec<&str> {
    pod["containers"][0]["ports"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect()
}

fn config_of(docs: &[Value]) -> String {
    let map = docs.iter().find(|d| d["kind"] == "ConfigMap").expect("the policy ConfigMap");
    map["data"]["config.yaml"].as_str().unwrap().to_owned()
}

fn granted(docs: &[Value], fullname: &str) -> Vec<String> {
    let role = find(docs, "ClusterRole", &format!("{fullname}-admission-policies"));
    let names = role["rules"][1]["resourceNames"].as_array().expect("resourceNames");
    names.iter().map(|n| n.as_str().unwrap().to_owned()).collect()
}

/// The chart and the overlay grant exactly the names the binary may give the objects: 16 per
/// kind, `<lease>-<kind>-<n>`, the same whatever the policies are called (so a rename changes
/// no grant and `helm template` needs no lookup), under another release name too; more
/// policies of a kind than names fail the render and the binary alike, naming the policy.
#[test]
fn the_granted_names_are_the_binarys() {
    let dir = scratch("policy-names");
    let helm = Helm::new(3, &dir);
    let values = |name: &str, policies: &str| {
        let file = dir.join(name);
        std::fs::write(&file, format!("admission: {{mode: policy}}\npolicies:\n{policies}")).unwrap();
        file.display().to_string()
    };
    let two = values(
        "two.yaml",
        "- {name: web, ingressClasses: [nginx], publishStatusAddress: 192.0.2.1}\n\
         - {name: edge, gatewayClasses: [eg], publishStatusAddress: 192.0.2.2}\n",
    );
    let docs = helm.template(&["-f", &two]);
    let want = binary_names(&dir, &config_of(&docs), RELEASE);
    assert_eq!(want, slots(RELEASE));
    assert_eq!(granted(&docs, RELEASE), want);
    // Renamed, reordered, or other policies altogether: the same grant.
    let renamed = values(
        "renamed.yaml",
        "- {name: gw, kind: Gateway, gatewayClasses: [eg], publishStatusAddress: 192.0.2.2}\n\
         - {name: Not_A_Label, ingressClasses: [nginx], publishStatusAddress: 192.0.2.1}\n",
    );
    assert_eq!(granted(&helm.template(&["-f", &renamed]), RELEASE), want);
    // Another release: its fullname is its Lease, and its objects' names start with it.
    let out = helm.run(&["template", "team-a", CHART, "--namespace", "team-a", "-f", &two]);
    assert!(out.success, "{}", out.stderr);
    let other = super::documents(&out.stdout);
    let fullname = "team-a-ingress-status-guard";
    let args = args_of_release(&other, fullname);
    assert!(args.contains(&format!("--leader-election-lease-name={fullname}")), "{args:?}");
    let want = binary_names(&dir, &config_of(&other), fullname);
    assert_eq!(want, slots(fullname));
    assert_eq!(granted(&other, fullname), want);
    // 17 Gateway policies: the chart refuses the render and the binary the file, both naming
    // the 17th.
    let many: String = (0..17)
        .map(|i| format!("- {{name: g{i}, kind: Gateway, gatewayClasses: [c{i}], publishStatusAddress: 192.0.2.1}}\n"))
        .collect();
    let out = helm.run(&["template", RELEASE, CHART, "-f", &values("many.yaml", &many)]);
    assert!(!out.success && out.stderr.contains("the Gateway policy \"g16\" is number 17"), "{}", out.stderr);
    let file = dir.join("many-config.yaml");
    std::fs::write(&file, format!("policies:\n{many}")).unwrap();
    let out = std::process::Command::new(crate::support::webhook::BINARY)
        .args(["render-admission-policy", "--names", "--config", file.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("policy \"g16\": it is Gateway policy number 17"), "{stderr}");
    // The overlay grants what the binary names for its own policy file.
    let overlay = kustomize("overlays/admission-policy");
    assert_eq!(granted(&overlay, RELEASE), binary_names(&dir, &config_of(&overlay), RELEASE));
}

fn args_of_release(docs: &[Value], name: &str) -> Vec<String> {
    let args = &find(docs, "Deployment", name)["spec"]["template"]["spec"]["containers"][0]["args"];
    args.as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()).collect()
}

/// The objects of the release itself: not its hooks (the uninstall's).
fn without_hooks(docs: &[Value]) -> Vec<Value> {
    docs.iter().filter(|d| d["metadata"]["annotations"]["helm.sh/hook"].is_null()).cloned().collect()
}

fn names(docs: &[Value]) -> Vec<String> {
    let mut names: Vec<String> = docs
        .iter()
        .filter(|d| d["kind"] != "Namespace")
        .map(|d| format!("{}/{}", d["kind"].as_str().unwrap(), d["metadata"]["name"].as_str().unwrap()))
        .collect();
    names.sort();
    names
}

#[test]
fn policy_mode_renders_no_webhook_machinery_and_agrees_with_the_overlay() {
    let helm = Helm::new(3, &scratch("policy-mode"));
    for certificate in ["selfSigned", "certManager"] {
        let docs =
            helm.template(&["--set", "admission.mode=policy", "--set", &format!("certificate.mode={certificate}")]);
        let docs = without_hooks(&docs);
        for kind in ["MutatingWebhookConfiguration", "Service", "Job", "CronJob", "Certificate", "Issuer", "Secret"] {
            assert!(!kinds(&docs).contains(&kind.to_owned()), "{certificate}: a {kind} rendered: {:?}", kinds(&docs));
        }
        let args = args_of(&docs);
        assert!(args.contains(&"--admission=policy".to_owned()), "{args:?}");
        assert!(!args.iter().any(|a| a.starts_with("--tls-") || a.starts_with("--listen=")), "{args:?}");
        let pod = &find(&docs, "Deployment", RELEASE)["spec"]["template"]["spec"];
        assert!(!pod.to_string().contains("\"tls\""), "no serving certificate volume: {pod}");
        // The pods hold the admission-policy rights and open no webhook port: probes and metrics.
        assert_eq!(port_names(pod), ["admin", "probes"]);
    }
    // Its NetworkPolicy admits the probes and the admin peers, and names no webhook port.
    let docs = helm.template(&["--set", "admission.mode=policy", "--set", "networkPolicy.enabled=true"]);
    let rules = &find(&docs, "NetworkPolicy", RELEASE)["spec"]["ingress"];
    let ports: Vec<&Value> = rules.as_array().unwrap().iter().map(|r| &r["ports"][0]["port"]).collect();
    assert_eq!(ports, [&json!(8081)], "{rules}");
    let out = helm.run(&["template", RELEASE, CHART, "--set", "admission.mode=both"]);
    assert!(!out.success && out.stderr.contains("/admission/mode"), "{}", out.stderr);

    let all = helm.template(&["--set", "admission.mode=policy"]);
    // The uninstall's post-delete Job: `admission-policy remove` of this release's Lease, as an
    // identity that may only list the four kinds and delete the release's names.
    let job = find(&all, "Job", &format!("{RELEASE}-remove"));
    assert_eq!(job["metadata"]["annotations"]["helm.sh/hook"], "post-delete");
    let job_args = &job["spec"]["template"]["spec"]["containers"][0]["args"];
    assert_eq!(
        job_args.as_array().unwrap()[..4],
        [
            json!("admission-policy"),
            json!("remove"),
            json!(format!("--leader-election-namespace={NAMESPACE}")),
            json!(format!("--leader-election-lease-name={RELEASE}"))
        ]
    );
    assert_eq!(job["spec"]["template"]["spec"]["serviceAccountName"], format!("{RELEASE}-remove"));
    let remover = find(&all, "ClusterRole", &format!("{RELEASE}-remove"));
    assert_eq!(remover["rules"][0]["verbs"], json!(["list"]));
    assert_eq!(remover["rules"][1]["verbs"], json!(["delete"]));
    let slots = slots(RELEASE);
    assert_eq!(remover["rules"][1]["resourceNames"], json!(slots));
    let mut docs = without_hooks(&all);
    // doctor's identity is the chart's alone (helm runs its hook and test), as in webhook mode.
    docs.retain(|d| d["metadata"]["labels"]["app.kubernetes.io/component"] != "doctor");
    let role = find(&docs, "ClusterRole", &format!("{RELEASE}-admission-policies"));
    let resources = json!([
        "mutatingadmissionpolicies",
        "mutatingadmissionpolicybindings",
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings"
    ]);
    assert_eq!(
        role["rules"],
        json!([
            {"apiGroups": ["admissionregistration.k8s.io"], "resources": resources, "verbs": ["create", "list"]},
            {"apiGroups": ["admissionregistration.k8s.io"], "resources": resources,
             "resourceNames": slots, "verbs": ["get", "update", "delete"]},
        ])
    );
    // A policy name that is no part of a DNS label names no object: the same fixed grant.
    let odd = helm.template(&[
        "--set",
        "admission.mode=policy",
        "--set",
        "policies[0].name=Not_A_Label,policies[0].publishStatusAddress=192.0.2.1",
    ]);
    assert_eq!(find(&odd, "ClusterRole", &format!("{RELEASE}-admission-policies"))["rules"], role["rules"]);
    // No Events in this mode: no grant of them.
    assert!(!names(&docs).iter().any(|n| n.contains("-events")), "{:?}", names(&docs));
    // The webhook mode has none of it.
    let webhook = helm.template(&[]);
    assert!(!names(&webhook).iter().any(|n| n.contains("admission-policies")));

    // The overlay: the same objects (the chart's webhook-mode-only ones gone alike), the same
    // args and RBAC; and its base's only grant of Namespaces stays, for a namespaceSelector.
    let overlay = kustomize("overlays/admission-policy");
    let scope = find(&overlay, "ClusterRole", &format!("{RELEASE}-scope"));
    assert_eq!(scope["rules"], json!([{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]}]));
    let mut chart: Vec<String> = names(&docs);
    chart.extend([format!("ClusterRole/{RELEASE}-scope"), format!("ClusterRoleBinding/{RELEASE}-scope")]);
    chart.sort();
    let overlay_names: Vec<String> = names(&overlay)
        .into_iter()
        .map(|n| {
            if n.starts_with("ConfigMap/ingress-status-guard-config") {
                "ConfigMap/ingress-status-guard-config".into()
            } else {
                n
            }
        })
        .collect();
    assert_eq!(overlay_names, chart);
    assert_eq!(find(&overlay, "ClusterRole", &format!("{RELEASE}-admission-policies"))["rules"], role["rules"]);
    let overlay_args = args_of(&overlay);
    assert!(overlay_args.contains(&"--admission=policy".to_owned()), "{overlay_args:?}");
    assert!(!overlay_args.iter().any(|a| a.starts_with("--tls-")), "{overlay_args:?}");
    assert!(!overlay_args.iter().any(|a| a.starts_with("--listen=")), "{overlay_args:?}");
    let pod = &find(&overlay, "Deployment", RELEASE)["spec"]["template"]["spec"];
    assert_eq!(pod["volumes"].as_array().unwrap().len(), 1, "the config volume only: {pod}");
    assert_eq!(port_names(pod), ["admin", "probes"]);
}

/// The release of the policy-mode install test, in a namespace of its own (the webhook-mode
/// RBAC test applies the default release's ServiceAccount into this shared API server).
const INSTALL: &str = "isg-map";
const FULLNAME: &str = "isg-map-ingress-status-guard";

/// The chart's RBAC in policy mode is all the guard needs: installed with helm (so `lookup`
/// runs), run as its ServiceAccount with its policy file (an Ingress and a Gateway policy), the
/// guard leads and creates both admission policies, the API server enforces the Ingress one;
/// renamed by an upgrade (which grants the old objects' names too), the old objects go, and the
/// upgrade after that grants only the current names; the guard logs nothing forbidden.
#[tokio::test]
async fn the_charts_rbac_is_all_policy_mode_needs() {
    let t = TestEnv::new("chart-map").await;
    // .ci/run runs this binary on v1.31 too, which has no MutatingAdmissionPolicy: there the
    // guard exits 2 at start (tests/cluster/admission_policy.rs checks that), so there is nothing to run.
    let admin = t.cluster.admin_kubeconfig();
    let resources = t.cluster.kubectl(admin, &["api-resources", "--api-group=admissionregistration.k8s.io"]);
    if !resources.stdout.contains("mutatingadmissionpolicies") {
        eprintln!("the API server serves no MutatingAdmissionPolicy: policy mode cannot run here");
        return;
    }
    t.cluster.install_gateway_crds().await;
    let scratch_dir = t.cluster.scratch_dir("chart-map-helm");
    let helm = Helm::new(3, &scratch_dir);
    let class = format!("{}-class", t.ns);
    let values = |ingress_policy: &str| {
        let file = scratch_dir.join(format!("{ingress_policy}.yaml"));
        let text = format!(
            "admission: {{mode: policy}}\ndoctor: {{hook: {{enabled: false}}}}\npolicies:\n\
             - {{name: {ingress_policy}, ingressClasses: [{class}], publishService: chart-map-edge/lb, mode: enforce}}\n\
             - {{name: chart-gw, gatewayClasses: [{class}-gw], publishStatusAddress: 192.0.2.77, mode: enforce}}\n"
        );
        std::fs::write(&file, text).unwrap();
        file.display().to_string()
    };
    let kubeconfig_arg = format!("--kubeconfig={}", admin.display());
    let helm_ok = |verb: &str, values: &str| {
        let out = helm.run(&[
            verb,
            INSTALL,
            CHART,
            "--namespace",
            INSTALL,
            "--create-namespace",
            "-f",
            values,
            &kubeconfig_arg,
        ]);
        assert!(out.success, "helm {verb}: {}", out.stderr);
        out.stdout
    };
    let granted = || {
        let out =
            t.cluster.kubectl(admin, &["get", "clusterrole", &format!("{FULLNAME}-admission-policies"), "-o", "json"]);
        assert!(out.success, "{}", out.stderr);
        let role: Value = serde_json::from_str(&out.stdout).unwrap();
        role["rules"][1]["resourceNames"].clone()
    };
    let edge = t.cluster.kubectl(admin, &["create", "namespace", "chart-map-edge"]);
    assert!(edge.success, "{}", edge.stderr);
    let notes = helm_ok("install", &values("chart-map"));
    assert!(notes.contains(&format!("-l ingress-status-guard/lease={INSTALL}.{FULLNAME}")), "{notes}");
    let slots = slots(FULLNAME);
    assert_eq!(granted(), json!(slots));
    // `helm template`, as Argo CD renders, grants the same names: no lookup is needed for them.
    let rendered = helm.run(&["template", INSTALL, CHART, "--namespace", INSTALL, "-f", &values("chart-map")]);
    assert!(rendered.success, "{}", rendered.stderr);
    let rendered = super::documents(&rendered.stdout);
    let role = find(&rendered, "ClusterRole", &format!("{FULLNAME}-admission-policies"));
    assert_eq!(role["rules"][1]["resourceNames"], json!(slots));

    let services: Api<Service> = Api::namespaced(t.admin.clone(), "chart-map-edge");
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 443}]}
    }))
    .unwrap();
    services.create(&PostParams::default(), &service).await.unwrap();
    let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.71"}]}}});
    services.patch_status("lb", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();

    let config_dir = t.cluster.scratch_dir("chart-map-config");
    let config_file = config_dir.join("config.yaml");
    let write_config = |values: &str| {
        let out = helm.run(&["template", INSTALL, CHART, "--namespace", INSTALL, "-f", values]);
        assert!(out.success, "{}", out.stderr);
        let docs = super::documents(&out.stdout);
        let config =
            find(&docs, "ConfigMap", &format!("{FULLNAME}-config"))["data"]["config.yaml"].as_str().unwrap().to_owned();
        let tmp = config_dir.join("config.yaml.tmp");
        std::fs::write(&tmp, config).unwrap();
        std::fs::rename(&tmp, &config_file).unwrap();
    };
    write_config(&values("chart-map"));
    let config_arg = format!("--config={}", config_file.display());
    let kubeconfig = t
        .cluster
        .kubeconfig_for(&format!("system:serviceaccount:{INSTALL}:{FULLNAME}"), Some("system:serviceaccounts"));
    let (lease_ns, lease) =
        (format!("--leader-election-namespace={INSTALL}"), format!("--leader-election-lease-name={FULLNAME}"));
    let args = ["--admission=policy", "--reconcile", &config_arg, &lease_ns, &lease];
    let guard = Webhook::start(t.cluster, &t.ns, &kubeconfig, &args).await;
    create_ingress(&t.ingresses, "web", Class::Field(&class)).await;
    eventually("the chart's guard keeps the MAP the API server enforces", WAIT, || async {
        let got =
            support_addresses(write_status(&t.rogue, "web", &["192.0.2.254"], false).await.map_err(|e| e.to_string())?);
        if got == ["203.0.113.71"] { Ok(()) } else { Err(format!("stored {got:?}; {}", guard.log_tail())) }
    })
    .await;
    let exists = |kind: &str, name: &str| t.cluster.kubectl(admin, &["get", kind, name]).success;
    let (ingress_slot, gateway_slot) = (format!("{FULLNAME}-ingress-0"), format!("{FULLNAME}-gateway-0"));
    eventually("the Gateway policy's MAP and binding are created", WAIT, || async {
        match exists("mutatingadmissionpolicy", &gateway_slot)
            && exists("mutatingadmissionpolicybinding", &gateway_slot)
        {
            true => Ok(()),
            false => Err(guard.log_tail()),
        }
    })
    .await;
    // The release's objects, by its owner label: (name, the policy it holds).
    let owned = || -> Vec<(String, String)> {
        let selector = format!("ingress-status-guard/lease={INSTALL}.{FULLNAME}");
        let out = t.cluster.kubectl(
            admin,
            &["get", "mutatingadmissionpolicies,mutatingadmissionpolicybindings", "-l", &selector, "-o", "json"],
        );
        assert!(out.success, "{}", out.stderr);
        let list: Value = serde_json::from_str(&out.stdout).unwrap();
        let mut items: Vec<(String, String)> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                let annotation = &o["metadata"]["annotations"]["ingress-status-guard/policy"];
                (o["metadata"]["name"].as_str().unwrap().to_owned(), annotation.as_str().unwrap_or("").to_owned())
            })
            .collect();
        items.sort();
        items
    };
    let held = |ingress_policy: &str| {
        let mut want = vec![
            (gateway_slot.clone(), "chart-gw".to_owned()),
            (gateway_slot.clone(), "chart-gw".to_owned()),
            (ingress_slot.clone(), ingress_policy.to_owned()),
            (ingress_slot.clone(), ingress_policy.to_owned()),
        ];
        want.sort();
        want
    };
    assert_eq!(owned(), held("chart-map"));

    // Renamed by an upgrade as Argo CD makes it: `helm template` (no lookup) applied with
    // kubectl, hooks left to their own phase. The same names are granted, and the guard
    // replaces the objects of the policy's slot in place; no name is left behind to delete.
    let rendered = helm.run(&["template", INSTALL, CHART, "--namespace", INSTALL, "-f", &values("chart-map-two")]);
    assert!(rendered.success, "{}", rendered.stderr);
    let synced: Vec<Value> = super::documents(&rendered.stdout)
        .into_iter()
        .filter(|d| d["metadata"]["annotations"]["helm.sh/hook"].is_null())
        .collect();
    // Objects the chart puts in a namespace of their own keep it; the rest go to the release's
    // (Argo CD's destination namespace).
    let (elsewhere, here): (Vec<Value>, Vec<Value>) =
        synced.into_iter().partition(|d| d["metadata"]["namespace"].as_str().is_some_and(|n| n != INSTALL));
    for (part, items) in [("here", here), ("elsewhere", elsewhere)] {
        let file = scratch_dir.join(format!("synced-{part}.json"));
        std::fs::write(&file, json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()).unwrap();
        let mut args = vec!["apply", "-f", file.to_str().unwrap()];
        if part == "here" {
            args.extend(["-n", INSTALL]);
        }
        let applied = t.cluster.kubectl(admin, &args);
        assert!(applied.success, "kubectl apply of the template: {}", applied.stderr);
    }
    assert_eq!(granted(), json!(slots));
    write_config(&values("chart-map-two"));
    // Within 10 s of the file's rename: the bound, asserted as correctness (a reload
    // runs the keeper at once; the file's 10 s poll alone would miss it).
    eventually(
        "the renamed policy holds its slot, and nothing else is left",
        std::time::Duration::from_secs(10),
        || async {
            match owned() {
                got if got == held("chart-map-two") => Ok(()),
                got => Err(format!("{got:?}; {}", guard.log_tail())),
            }
        },
    )
    .await;
    eventually("the renamed policy's MAP still enforces", WAIT, || async {
        let got =
            support_addresses(write_status(&t.rogue, "web", &["192.0.2.253"], false).await.map_err(|e| e.to_string())?);
        if got == ["203.0.113.71"] { Ok(()) } else { Err(format!("stored {got:?}; {}", guard.log_tail())) }
    })
    .await;
    let log = guard.log();
    let forbidden = guard.forbidden_lines();
    assert!(forbidden.is_empty(), "forbidden in the guard's log: {forbidden:#?}\n{log}");

    // helm uninstall: the release's objects go (its hooks are run below, as helm would after
    // them: this control plane runs no Jobs) and leave the admission policies enforcing; the
    // post-delete hook's `admission-policy remove`, as the hook's own identity, deletes this
    // release's objects and not another owner's.
    drop(guard);
    let other = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": format!("{FULLNAME}-gateway-5"), "labels": {"ingress-status-guard/lease": "elsewhere.isg-map-ingress-status-guard"}},
        "spec": {"policyName": "nothing"},
    });
    let other_file = config_dir.join("other.json");
    std::fs::write(&other_file, other.to_string()).unwrap();
    let created = t.cluster.kubectl(admin, &["create", "-f", other_file.to_str().unwrap()]);
    assert!(created.success, "{}", created.stderr);
    let out = helm.run(&["uninstall", INSTALL, "--namespace", INSTALL, "--no-hooks", &kubeconfig_arg]);
    assert!(out.success, "{}", out.stderr);
    assert!(!exists("clusterrole", &format!("{FULLNAME}-admission-policies")), "the release's RBAC is gone");
    assert!(exists("mutatingadmissionpolicy", &ingress_slot), "left enforcing");
    let rendered = helm.run(&["template", INSTALL, CHART, "--namespace", INSTALL, "-f", &values("chart-map-two")]);
    assert!(rendered.success, "{}", rendered.stderr);
    let hooks: Vec<Value> = super::documents(&rendered.stdout)
        .into_iter()
        .filter(|d| d["metadata"]["annotations"]["helm.sh/hook"] == "post-delete")
        .collect();
    let job = hooks.iter().find(|d| d["kind"] == "Job").expect("the post-delete Job");
    let pod = &job["spec"]["template"]["spec"];
    let hook_rbac: Vec<Value> = hooks.iter().filter(|d| d["kind"] != "Job").cloned().collect();
    let hook_file = config_dir.join("hooks.json");
    std::fs::write(&hook_file, json!({"apiVersion": "v1", "kind": "List", "items": hook_rbac}).to_string()).unwrap();
    let applied = t.cluster.kubectl(admin, &["apply", "--server-side", "-f", hook_file.to_str().unwrap()]);
    assert!(applied.success, "{}", applied.stderr);
    let account = pod["serviceAccountName"].as_str().unwrap();
    let hook_kubeconfig =
        t.cluster.kubeconfig_for(&format!("system:serviceaccount:{INSTALL}:{account}"), Some("system:serviceaccounts"));
    let args: Vec<&str> = pod["containers"][0]["args"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    let out = std::process::Command::new(crate::support::webhook::BINARY)
        .args(&args)
        .args(["--kubeconfig", hook_kubeconfig.to_str().unwrap()])
        .output()
        .expect("run the binary");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{args:?}: {stdout}{stderr}");
    assert!(stdout.contains("deleted 4 admission policies and bindings"), "{stdout}{stderr}");
    for kind in ["mutatingadmissionpolicy", "mutatingadmissionpolicybinding"] {
        for name in [&ingress_slot, &gateway_slot] {
            assert!(!exists(kind, name), "{kind} {name} left");
        }
    }
    // A granted name under another owner's label stays.
    assert!(exists("mutatingadmissionpolicybinding", &format!("{FULLNAME}-gateway-5")), "another owner's stays");
}

fn support_addresses(ingress: k8s_openapi::api::networking::v1::Ingress) -> Vec<String> {
    crate::support::addresses(&ingress)
}

/// The overlay's own RBAC with a policy that has a `namespaceSelector`: run as the overlay's
/// ServiceAccount, the guard may watch the Namespaces (the base's only grant of them stays), so
/// it turns Ready and keeps the MutatingAdmissionPolicy. The overlay's objects are renamed
/// `ovl-map` (its Lease too), apart from the default release that other tests here install.
#[tokio::test]
async fn the_overlays_rbac_runs_a_namespace_selector_policy() {
    let t = TestEnv::new("ovl-map").await;
    let admin = t.cluster.admin_kubeconfig();
    let resources = t.cluster.kubectl(admin, &["api-resources", "--api-group=admissionregistration.k8s.io"]);
    if !resources.stdout.contains("mutatingadmissionpolicies") {
        eprintln!("the API server serves no MutatingAdmissionPolicy: policy mode cannot run here");
        return;
    }
    let rbac: Vec<Value> = kustomize("overlays/admission-policy")
        .into_iter()
        .filter(|d| {
            ["ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"]
                .contains(&d["kind"].as_str().unwrap())
        })
        .collect();
    let text = json!({"apiVersion": "v1", "kind": "List", "items": rbac})
        .to_string()
        .replace("ingress-status-guard", "ovl-map");
    let dir = t.cluster.scratch_dir("ovl-map");
    let (file, config) = (dir.join("rbac.json"), dir.join("config.yaml"));
    std::fs::write(&file, text).unwrap();
    let ns = t.cluster.kubectl(admin, &["create", "namespace", "ovl-map"]);
    assert!(ns.success, "{}", ns.stderr);
    let applied = t.cluster.kubectl(admin, &["apply", "--server-side", "-f", file.to_str().unwrap()]);
    assert!(applied.success, "{}", applied.stderr);
    let class = format!("{}-class", t.ns);
    std::fs::write(
        &config,
        format!(
            "policies:\n  - name: default\n    ingressClasses: [{class}]\n    publishStatusAddress: 192.0.2.95\n    mode: enforce\n    namespaceSelector: \"kubernetes.io/metadata.name={}\"\n",
            t.ns
        ),
    )
    .unwrap();
    let kubeconfig = t.cluster.kubeconfig_for("system:serviceaccount:ovl-map:ovl-map", Some("system:serviceaccounts"));
    let config_arg = format!("--config={}", config.display());
    let args = [
        "--admission=policy",
        "--reconcile",
        &config_arg,
        "--leader-election-namespace=ovl-map",
        "--leader-election-lease-name=ovl-map",
    ];
    let guard = Webhook::start(t.cluster, &t.ns, &kubeconfig, &args).await;
    create_ingress(&t.ingresses, "web", Class::Field(&class)).await;
    eventually("the overlay's guard keeps the MAP the API server enforces", WAIT, || async {
        let got =
            support_addresses(write_status(&t.rogue, "web", &["192.0.2.254"], false).await.map_err(|e| e.to_string())?);
        if got == ["192.0.2.95"] { Ok(()) } else { Err(format!("stored {got:?}; {}", guard.log_tail())) }
    })
    .await;
    eventually("Ready", WAIT, || async {
        if guard.metric("ingress_status_guard_ready") == 1.0 { Ok(()) } else { Err(guard.log_tail()) }
    })
    .await;
    assert!(t.cluster.kubectl(admin, &["get", "mutatingadmissionpolicy", "ovl-map-ingress-0"]).success);
    let log = guard.log();
    let forbidden = guard.forbidden_lines();
    assert!(forbidden.is_empty(), "forbidden in the guard's log: {forbidden:#?}\n{log}");
}

/// A release reinstalled in another namespace after `helm uninstall --no-hooks` finds its old
/// objects under its names, labelled for the old namespace: the install fails and names the
/// object and its owner, rather than install a guard that leaves its policy to the old
/// objects. Once they are deleted the same install succeeds; an object of the release's own
/// label (an earlier install in this namespace) does not stop it either.
#[tokio::test]
async fn an_install_whose_names_another_guard_holds_fails_naming_them() {
    const MOVED: &str = "isg-moved";
    const MOVED_FULL: &str = "isg-moved-ingress-status-guard";
    let t = TestEnv::new("chart-moved").await;
    let admin = t.cluster.admin_kubeconfig();
    let resources = t.cluster.kubectl(admin, &["api-resources", "--api-group=admissionregistration.k8s.io"]);
    if !resources.stdout.contains("mutatingadmissionpolicies") {
        eprintln!("the API server serves no MutatingAdmissionPolicy: policy mode cannot run here");
        return;
    }
    let scratch_dir = t.cluster.scratch_dir("chart-moved-helm");
    let helm = Helm::new(3, &scratch_dir);
    let values = scratch_dir.join("values.yaml");
    std::fs::write(
        &values,
        "admission: {mode: policy}\ndoctor: {hook: {enabled: false}}\npolicies:\n\
         - {name: web, ingressClasses: [moved], publishStatusAddress: 192.0.2.90, mode: enforce}\n",
    )
    .unwrap();
    let kubeconfig_arg = format!("--kubeconfig={}", admin.display());
    let install = || {
        helm.run(&[
            "install",
            MOVED,
            CHART,
            "--namespace",
            MOVED,
            "--create-namespace",
            "-f",
            values.to_str().unwrap(),
            &kubeconfig_arg,
        ])
    };
    let name = format!("{MOVED_FULL}-ingress-0");
    let binding = |owner: &str| {
        let object = json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": name, "labels": {"ingress-status-guard/lease": owner}},
            "spec": {"policyName": "nothing"},
        });
        let file = scratch_dir.join("binding.json");
        std::fs::write(&file, object.to_string()).unwrap();
        let applied = t.cluster.kubectl(admin, &["apply", "-f", file.to_str().unwrap()]);
        assert!(applied.success, "{}", applied.stderr);
    };
    let old_owner = format!("gone.{MOVED_FULL}");
    binding(&old_owner);
    let out = install();
    assert!(!out.success, "installed over another guard's object: {}", out.stdout);
    for part in [name.as_str(), "MutatingAdmissionPolicyBinding", old_owner.as_str(), "kubectl delete"] {
        assert!(out.stderr.contains(part), "the failure names {part}: {}", out.stderr);
    }
    // The release's own label (an earlier install here) is no obstacle.
    binding(&format!("{MOVED}.{MOVED_FULL}"));
    let out = install();
    assert!(out.success, "helm install: {}", out.stderr);
    let out = helm.run(&["uninstall", MOVED, "--namespace", MOVED, "--no-hooks", &kubeconfig_arg]);
    assert!(out.success, "{}", out.stderr);
    let deleted = t.cluster.kubectl(admin, &["delete", "mutatingadmissionpolicybinding", &name]);
    assert!(deleted.success, "{}", deleted.stderr);
}
