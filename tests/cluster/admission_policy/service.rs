//! Service policies rendered by `render-admission-policy` and enforced by the API server: the
//! MutatingAdmissionPolicy replaces a LoadBalancer Service's `status.loadBalancer.ingress` of
//! the governed class (the Ingress's typed literal checked against the Service schema), and
//! leaves a Service of another class and a ClusterIP Service as written.

use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::support::{SENTINEL, TestEnv, eventually};
use super::{lease_flag, run_render};

const WAIT: Duration = Duration::from_secs(60);

async fn create(api: &Api<Service>, name: &str, kind: &str, class: Option<&str>) {
    let mut spec = json!({"type": kind, "ports": [{"port": 80, "protocol": "TCP"}]});
    if kind == "LoadBalancer" {
        spec["allocateLoadBalancerNodePorts"] = json!(false);
    }
    if let Some(class) = class {
        spec["loadBalancerClass"] = json!(class);
    }
    let service: Service = serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
    api.create(&PostParams::default(), &service).await.unwrap_or_else(|e| panic!("create Service {name}: {e}"));
}

async fn write(api: &Api<Service>, name: &str, status: Value) -> kube::Result<Service> {
    let params = PatchParams { field_manager: Some("isg-e2e-lb".into()), ..PatchParams::default() };
    api.patch_status(name, &params, &Patch::Merge(&json!({"status": status}))).await
}

fn ips(service: &Service) -> Vec<String> {
    let entries = service.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|lb| lb.ingress.as_ref());
    entries.into_iter().flatten().filter_map(|e| e.ip.clone().or(e.hostname.clone())).collect()
}

#[tokio::test]
async fn a_rendered_service_policy_rewrites_its_load_balancers_only() {
    let t = TestEnv::new("map-svc").await;
    let ns = &t.ns;
    let class = format!("isg.test/{ns}");
    let dir = t.cluster.scratch_dir("map-svc");
    let (cfg, out) = (dir.join("policies.yaml"), dir.join("rendered.yaml"));
    let policies = format!(
        "policies:\n  - {{name: {ns}, kind: Service, loadBalancerClasses: ['{class}'], publishStatusAddress: '192.0.2.50, lb.{ns}.example.test', acknowledgeKubeProxyImpact: true, mode: enforce}}\n"
    );
    std::fs::write(&cfg, policies).unwrap();
    let (code, yaml, stderr) = run_render(&["--config", cfg.to_str().unwrap(), &lease_flag(ns)]);
    assert_eq!(code, Some(0), "render failed: {stderr}");
    assert!(yaml.contains("services/status") && yaml.contains("MutatingAdmissionPolicy"), "{yaml}");
    std::fs::write(&out, &yaml).unwrap();
    let admin = t.cluster.admin_kubeconfig();
    let dry = t.cluster.kubectl(admin, &["apply", "--dry-run=server", "-f", out.to_str().unwrap()]);
    assert!(dry.success, "server dry run refused the rendered objects: {}\n{yaml}", dry.stderr);
    let applied = t.cluster.kubectl(admin, &["apply", "-f", out.to_str().unwrap()]);
    assert!(applied.success, "apply failed: {}", applied.stderr);

    let api: Api<Service> = Api::namespaced(t.admin.clone(), ns);
    create(&api, "lb", "LoadBalancer", Some(&class)).await;
    create(&api, "other", "LoadBalancer", Some("isg.test/other")).await;
    create(&api, "internal", "ClusterIP", None).await;
    let rogue = json!({"loadBalancer": {"ingress": [{"ip": SENTINEL}]}});
    let stored = eventually("the MutatingAdmissionPolicy rewrites the governed Service", WAIT, || async {
        let stored = write(&api, "lb", rogue.clone()).await.map_err(|e| e.to_string())?;
        let got = ips(&stored);
        if got == ["192.0.2.50".to_owned(), format!("lb.{ns}.example.test")] {
            Ok(stored)
        } else {
            Err(format!("{got:?}"))
        }
    })
    .await;
    let entry = &stored.status.as_ref().unwrap().load_balancer.as_ref().unwrap().ingress.as_ref().unwrap()[0];
    assert_eq!(entry.ip_mode.as_deref(), Some("VIP"), "the API server defaults the literal's ipMode");
    let other = write(&api, "other", rogue.clone()).await.expect("another class is written as sent");
    assert_eq!(ips(&other), [SENTINEL]);
    let conditions = json!({"conditions": [{"type": "Probe", "status": "True", "reason": "Test", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
    let internal = write(&api, "internal", conditions).await.expect("a ClusterIP Service's status write passes");
    assert!(ips(&internal).is_empty());
}

/// A trusted-writer Service policy kept by a policy-mode guard, which is then SIGKILLed: the API
/// server alone puts the stored status, `ipMode` and `ports` included, back on the second
/// controller's write, and lets the trusted controller's stand.
#[tokio::test]
async fn the_kept_trusted_writer_service_policy_holds_while_the_guard_is_down() {
    let t = TestEnv::new("map-svc-trusted").await;
    let ns = &t.ns;
    let (metallb, kube_vip, first, _) = crate::service::two_controllers(&t).await;
    let class = format!("isg.test/{ns}");
    let cfg = t.cluster.scratch_dir("map-svc-trusted").join("policies.yaml");
    let policies = format!(
        "policies:\n  - {{name: {ns}, kind: Service, loadBalancerClasses: ['{class}'], trustedWriters: ['{first}'], mode: enforce}}\n"
    );
    std::fs::write(&cfg, policies).unwrap();
    let mut guard = super::guard::start_guard(&t, &cfg).await;

    let admin: Api<Service> = Api::namespaced(t.admin.clone(), ns);
    create(&admin, "lb", "LoadBalancer", Some(&class)).await;
    let ours = json!({"loadBalancer": {"ingress": [{"ip": "198.51.100.10", "ipMode": "Proxy", "ports": [{"port": 80, "protocol": "TCP"}]}]}});
    let theirs = json!({"loadBalancer": {"ingress": [{"ip": SENTINEL}]}});
    let log = guard.log_path().display().to_string();
    eventually(&format!("the kept policy puts the trusted status back (guard log {log})"), WAIT, || async {
        write(&metallb, "lb", ours.clone()).await.map_err(|e| e.to_string())?;
        let got = write(&kube_vip, "lb", theirs.clone()).await.map_err(|e| e.to_string())?;
        if ips(&got) == ["198.51.100.10"] { Ok(()) } else { Err(format!("{:?}", ips(&got))) }
    })
    .await;
    let name = format!("{}-service-0", super::lease_of(ns));
    let map = super::guard::get_object(&t, "mutatingadmissionpolicy", &name).expect("the Service slot's MAP");
    assert!(map["spec"]["matchConditions"].to_string().contains("request.userInfo.username in"), "{map}");

    // SIGKILL: the API server alone keeps the trusted controller's status.
    guard.stop();
    let fought = write(&kube_vip, "lb", theirs.clone()).await.expect("allowed, and put back");
    assert_eq!(ips(&fought), ["198.51.100.10"], "put back with the guard down");
    let stored = admin.get("lb").await.unwrap();
    let entry = &stored.status.as_ref().unwrap().load_balancer.as_ref().unwrap().ingress.as_ref().unwrap()[0];
    assert_eq!(entry.ip_mode.as_deref(), Some("Proxy"), "the stored ipMode is put back, not defaulted");
    assert_eq!(entry.ports.as_ref().map(Vec::len), Some(1), "and its ports");
    let moved = json!({"loadBalancer": {"ingress": [{"ip": "198.51.100.11"}]}});
    let stood = write(&metallb, "lb", moved).await.expect("the trusted write");
    assert_eq!(ips(&stood), ["198.51.100.11"], "the trusted controller moves the address");
    let cleared = write(&kube_vip, "lb", json!({"loadBalancer": {"ingress": []}})).await.expect("allowed, put back");
    assert_eq!(ips(&cleared), ["198.51.100.11"], "nor can the second clear it");
}
