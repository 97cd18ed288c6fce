//! Gateways, webhook mode: a `gateways/status` write that also forges
//! `spec.gatewayClassName` is judged by the stored class (the CRD status strategy keeps
//! everything but `status` from the stored object), its conditions kept as written, and the
//! forged field is named in the Event and `forged_spec_writes_total`.

use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::support::gateway::{self, create_gateway, create_gateway_class, gateway_status, stored_gateway_addresses};
use super::support::{self, SENTINEL, TestEnv, eventually};
use super::{SETTLE, guard_args, start_guard};

/// A merge patch of the status subresource by the rogue identity: `status` and a forged class.
async fn forge(
    api: &kube::Api<kube::api::DynamicObject>,
    name: &str,
    class: &str,
    status: &Value,
) -> kube::api::DynamicObject {
    let params = PatchParams { field_manager: Some(support::ROGUE_USER.into()), ..PatchParams::default() };
    let patch = json!({"spec": {"gatewayClassName": class}, "status": status});
    api.patch_status(name, &params, &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("forged write of {name}: {e}"))
}

#[tokio::test]
async fn a_forged_gateway_class_is_judged_by_the_stored_class() {
    let t = TestEnv::new("gw-forged").await;
    t.cluster.install_gateway_crds().await;
    let ns = &t.ns;
    let other = format!("{ns}-other");
    for class in [ns, &other] {
        create_gateway_class(&t.admin, class, "example.com/gateway-controller").await;
    }
    let admin = gateway::gateways(&t.admin, ns);
    for (name, class) in [("probe", ns), ("edge", ns), ("fresh", ns), ("other", &other)] {
        create_gateway(&admin, name, class).await;
    }
    let policies =
        format!("policies:\n  - {{name: enforce, gatewayClasses: [{ns}], publishStatusAddress: 192.0.2.60}}\n");
    let mut args = guard_args(&t, &policies);
    args.retain(|a| !a.starts_with("--reconcile"));
    args.push("--reconcile=false".to_owned());
    let webhook = start_guard(&t, &args).await;
    gateway::register_gateway_webhook(&t.admin, ns, &webhook.url(), webhook.ca_pem()).await;
    let rogue = gateway::gateways(&t.cluster.rogue().await, ns);
    eventually("a rogue write of Gateway probe is rewritten", SETTLE, || async {
        let written = gateway_status(&[SENTINEL], true, 1);
        let stored = gateway::write_gateway_status(&rogue, "probe", written, false).await.map_err(|e| e.to_string())?;
        let got = stored_gateway_addresses(&stored);
        if got == ["192.0.2.60"] { Ok(()) } else { Err(format!("stored {got:?}")) }
    })
    .await;

    let written = gateway_status(&["10.6.6.6"], true, 1);
    let answer = forge(&rogue, "edge", "zzz", &written).await;
    assert_eq!(stored_gateway_addresses(&answer), ["192.0.2.60"], "rewritten under the stored class");
    let stored = admin.get("edge").await.unwrap();
    assert_eq!(stored_gateway_addresses(&stored), ["192.0.2.60"]);
    assert_eq!(stored.data["spec"]["gatewayClassName"], json!(ns), "the API server kept the stored spec");
    for field in ["conditions", "listeners"] {
        assert_eq!(stored.data["status"][field], written[field], "status.{field} exactly as written");
    }
    let event = eventually("an Event regarding Gateway edge", SETTLE, || async {
        let events = support::events_about(&t.admin, ns, "edge").await;
        events.into_iter().next().ok_or_else(|| format!("no Event yet; {}", webhook.log_tail()))
    })
    .await;
    let note = event.note.unwrap_or_default();
    assert!(note.starts_with("forged_spec spec.gatewayClassName") && note.ends_with("; rewritten"), "{note}");

    // Stored in another class: ungoverned, whatever class the write claims.
    let answer = forge(&rogue, "other", ns, &written).await;
    assert_eq!(stored_gateway_addresses(&answer), ["10.6.6.6"], "an ungoverned Gateway keeps its write");
    let metric = |result: &str| {
        webhook.metric(&format!(
            "ingress_status_guard_forged_spec_writes_total{{field=\"spec.gatewayClassName\",result=\"{result}\"}}"
        ))
    };
    assert_eq!([metric("patched"), metric("not_governed")], [1.0, 1.0], "{}", webhook.metrics());

    // Metadata through `gateways/status`, with the Event's uid cleared in the write: the
    // custom resource status strategy stores none of the written metadata (so it is no
    // finding), and the Event still finds the Gateway by the stored uid.
    let params = PatchParams { field_manager: Some(support::ROGUE_USER.into()), ..PatchParams::default() };
    let meta = json!({"metadata": {"uid": null, "annotations": {"external-dns.alpha.kubernetes.io/target": "192.0.2.99"}, "labels": {"app": "hijacked"}, "finalizers": ["example.test/block"]}, "spec": {"gatewayClassName": "zzz"}, "status": gateway_status(&["10.6.6.7"], true, 1)});
    let answer = rogue.patch_status("fresh", &params, &Patch::Merge(&meta)).await.expect("rewritten");
    assert_eq!(stored_gateway_addresses(&answer), ["192.0.2.60"]);
    let stored = admin.get("fresh").await.unwrap();
    let m = &stored.metadata;
    let version = std::env::var("ISG_K8S_VERSION").unwrap_or_else(|_| "default".into());
    println!(
        "API server {version}: a gateways/status write stored annotations {:?}, labels {:?}, finalizers {:?}",
        m.annotations, m.labels, m.finalizers
    );
    let target = m.annotations.clone().unwrap_or_default().get("external-dns.alpha.kubernetes.io/target").cloned();
    assert_eq!(
        (target, m.labels.as_ref(), m.finalizers.as_ref()),
        (None, None, None),
        "{version}: no written metadata stored"
    );
    assert_eq!(stored.data["spec"]["gatewayClassName"], json!(ns), "{version}");
    eventually("an Event regarding Gateway fresh's forged write", SETTLE, || async {
        let notes: Vec<String> =
            support::events_about(&t.admin, ns, "fresh").await.into_iter().filter_map(|e| e.note).collect();
        notes
            .iter()
            .any(|n| n.contains("10.6.6.7"))
            .then_some(())
            .ok_or_else(|| format!("{notes:?}; {}", webhook.log_tail()))
    })
    .await;
}
