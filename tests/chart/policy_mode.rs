//! `admission.mode=policy`: no certificate machinery, no MutatingWebhookConfiguration, the
//! RBAC the leader needs for its admission policies (by name where the API allows), as the
//! kustomize overlay `overlays/admission-policy` has it; and that RBAC is all the guard needs.

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
        for kind in ["MutatingWebhookConfiguration", "Service", "Job", "CronJob", "Certificate", "Issuer", "Secret"] {
            assert!(!kinds(&docs).contains(&kind.to_owned()), "{certificate}: a {kind} rendered: {:?}", kinds(&docs));
        }
        let args = args_of(&docs);
        assert!(args.contains(&"--admission=policy".to_owned()), "{args:?}");
        assert!(!args.iter().any(|a| a.starts_with("--tls-")), "{args:?}");
        let pod = &find(&docs, "Deployment", RELEASE)["spec"]["template"]["spec"];
        assert!(!pod.to_string().contains("\"tls\""), "no serving certificate volume: {pod}");
    }
    let out = helm.run(&["template", RELEASE, CHART, "--set", "admission.mode=both"]);
    assert!(!out.success && out.stderr.contains("/admission/mode"), "{}", out.stderr);

    let docs = helm.template(&["--set", "admission.mode=policy"]);
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
             "resourceNames": ["ingress-status-guard-default"], "verbs": ["get", "patch", "delete"]},
        ])
    );
    // A policy name the chart cannot turn into the object's name (it gets a hash): any name.
    let long = helm.template(&[
        "--set",
        "admission.mode=policy",
        "--set",
        "policies[0].name=Not_A_Label,policies[0].publishStatusAddress=192.0.2.1",
    ]);
    let rules = &find(&long, "ClusterRole", &format!("{RELEASE}-admission-policies"))["rules"];
    assert!(rules[1].get("resourceNames").is_none(), "{rules}");
    // The webhook mode has none of it.
    let webhook = helm.template(&[]);
    assert!(!names(&webhook).iter().any(|n| n.contains("admission-policies")));

    // The overlay: the same objects (the chart's webhook-mode-only ones gone alike), the same
    // args and RBAC.
    let overlay = kustomize("overlays/admission-policy");
    let chart: Vec<String> = names(&docs);
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
    let pod = &find(&overlay, "Deployment", RELEASE)["spec"]["template"]["spec"];
    assert_eq!(pod["volumes"].as_array().unwrap().len(), 1, "the config volume only: {pod}");
}

/// The chart's RBAC in policy mode is all the guard needs: run as its ServiceAccount with its
/// policy file, it leads, applies the MutatingAdmissionPolicy the API server then enforces, and
/// logs nothing forbidden.
#[tokio::test]
async fn the_charts_rbac_is_all_policy_mode_needs() {
    let t = TestEnv::new("chart-map").await;
    // .ci/run runs this binary on v1.31 too, which has no MutatingAdmissionPolicy: there the
    // guard exits 2 at start (tests/admission_policy.rs checks that), so there is nothing to run.
    let resources =
        t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["api-resources", "--api-group=admissionregistration.k8s.io"]);
    if !resources.stdout.contains("mutatingadmissionpolicies") {
        eprintln!("the API server serves no MutatingAdmissionPolicy: policy mode cannot run here");
        return;
    }
    let helm = Helm::new(3, &t.cluster.scratch_dir("chart-map-helm"));
    let class = format!("{}-class", t.ns);
    let docs = helm.template(&[
        "--set",
        "admission.mode=policy",
        "--set",
        "policy.name=chart-map",
        "--set",
        &format!("policy.ingressClasses={{{class}}}"),
        "--set",
        "policy.publishStatusAddress=",
        "--set",
        "policy.publishService=chart-map-edge/lb",
        "--set",
        "policy.mode=enforce",
    ]);
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "chart-map-edge"}}),
    ];
    objects.extend(
        docs.iter()
            .filter(|d| {
                ["ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"]
                    .contains(&d["kind"].as_str().unwrap())
            })
            .cloned(),
    );
    // Server-side, as the webhook-mode RBAC test beside it, which applies the same Namespace and
    // ServiceAccount into this shared API server at the same time.
    let file = t.cluster.scratch_dir("chart-map").join("objects.json");
    std::fs::write(&file, json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string()).unwrap();
    let out =
        t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["apply", "--server-side", "-f", &file.display().to_string()]);
    assert!(out.success, "{}", out.stderr);

    let services: Api<Service> = Api::namespaced(t.admin.clone(), "chart-map-edge");
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 443}]}
    }))
    .unwrap();
    services.create(&PostParams::default(), &service).await.unwrap();
    let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.71"}]}}});
    services.patch_status("lb", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();

    let config = find(&docs, "ConfigMap", "ingress-status-guard-config")["data"]["config.yaml"].as_str().unwrap();
    let config_file = t.cluster.scratch_dir("chart-map-config").join("config.yaml");
    std::fs::write(&config_file, config).unwrap();
    let config_arg = format!("--config={}", config_file.display());
    let kubeconfig = t.cluster.kubeconfig_for(
        "system:serviceaccount:ingress-status-guard:ingress-status-guard",
        Some("system:serviceaccounts"),
    );
    let lease = format!("--leader-election-namespace={NAMESPACE}");
    let guard =
        Webhook::start(t.cluster, &t.ns, &kubeconfig, &["--admission=policy", "--reconcile", &config_arg, &lease])
            .await;
    create_ingress(&t.ingresses, "web", Class::Field(&class)).await;
    eventually("the chart's guard keeps the MAP the API server enforces", WAIT, || async {
        let got =
            support_addresses(write_status(&t.rogue, "web", &["192.0.2.254"], false).await.map_err(|e| e.to_string())?);
        if got == ["203.0.113.71"] { Ok(()) } else { Err(format!("stored {got:?}; {}", guard.log_tail())) }
    })
    .await;
    let log = guard.log();
    assert!(!log.to_lowercase().contains("forbidden"), "forbidden in the guard's log:\n{log}");
}

fn support_addresses(ingress: k8s_openapi::api::networking::v1::Ingress) -> Vec<String> {
    crate::support::addresses(&ingress)
}
