//! `--admission=policy` mode: the MutatingAdmissionPolicies the guard keeps match
//! on the class the API server will store (`oldObject.spec`), so a status write that forges
//! the class is rewritten by the API server itself, Ingress (field and legacy annotation) and
//! Gateway, with the guard SIGKILLed.

use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::guard::{rewritten_to, start_guard};
use super::support::gateway::{self, create_gateway, create_gateway_class, gateway_status, stored_gateway_addresses};
use super::support::{self, Class, SENTINEL, TestEnv, create_ingress, entries, eventually};
use super::{WAIT, addresses_of};

/// A status write (merge patch, rogue identity) of `patch` to `name` through `api`.
async fn forge<K>(api: &Api<K>, name: &str, patch: Value) -> K
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params = PatchParams { field_manager: Some(support::ROGUE_USER.into()), ..PatchParams::default() };
    api.patch_status(name, &params, &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("forged write of {name}: {e}"))
}

#[tokio::test]
async fn forged_classes_are_rewritten_by_the_api_server_with_the_guard_killed() {
    let t = TestEnv::new("map-forged").await;
    t.cluster.install_gateway_crds().await;
    let (ns, gw_class) = (&t.ns, format!("{}-gw", t.ns));
    let dir = t.cluster.scratch_dir(&format!("map-forged-{ns}"));
    let cfg = dir.join("policies.yaml");
    std::fs::write(
        &cfg,
        format!(
            "policies:\n  - {{name: {ns}, ingressClasses: [{ns}], publishStatusAddress: 192.0.2.70}}\n  - {{name: {ns}-gw, gatewayClasses: [{gw_class}], publishStatusAddress: 192.0.2.71}}\n"
        ),
    )
    .unwrap();
    create_gateway_class(&t.admin, &gw_class, "example.com/gateway-controller").await;
    let (admin_gws, rogue_gws) = (gateway::gateways(&t.admin, ns), gateway::gateways(&t.cluster.rogue().await, ns));
    create_gateway(&admin_gws, "edge", &gw_class).await;
    create_ingress(&t.ingresses, "web", Class::Field(ns)).await;
    create_ingress(&t.ingresses, "legacy", Class::Annotation(ns)).await;
    let mut guard = start_guard(&t, &cfg).await;
    rewritten_to(&t.rogue, "web", &["192.0.2.70"], &guard.log_path()).await;
    eventually("the Gateway MAP rewrites a rogue write", WAIT, || async {
        let stored = gateway::write_gateway_status(&rogue_gws, "edge", gateway_status(&[SENTINEL], true, 1), false)
            .await
            .map_err(|e| e.to_string())?;
        let got = stored_gateway_addresses(&stored);
        if got == ["192.0.2.71"] { Ok(()) } else { Err(format!("stored {got:?}")) }
    })
    .await;

    // SIGKILL: the API server alone enforces, on the stored class.
    guard.stop();
    let rogue_status = json!({"loadBalancer": {"ingress": entries(&["10.6.6.6"])}});
    for name in ["web", "legacy"] {
        let written: Ingress =
            forge(&t.rogue, name, json!({"spec": {"ingressClassName": "zzz"}, "status": rogue_status})).await;
        assert_eq!(addresses_of(written), ["192.0.2.70"], "{name}: rewritten with the guard down");
    }
    let status = gateway_status(&["10.6.6.6"], true, 1);
    let written: DynamicObject =
        forge(&rogue_gws, "edge", json!({"spec": {"gatewayClassName": "zzz"}, "status": status})).await;
    assert_eq!(stored_gateway_addresses(&written), ["192.0.2.71"], "Gateway: rewritten with the guard down");
    let stored = admin_gws.get("edge").await.unwrap();
    assert_eq!(stored.data["spec"]["gatewayClassName"], json!(gw_class));
    assert_eq!(stored.data["status"]["conditions"], status["conditions"], "conditions kept as written");

    // Metadata through the status subresource, with the guard still down: the Ingress's write
    // is judged by the stored class annotation (the MAP cannot put the metadata back: it is
    // stored as written, see docs/admission-policy.md), a Gateway's is never stored (the
    // custom resource status strategy keeps none of it).
    let target = "external-dns.alpha.kubernetes.io/target";
    let forged_meta = json!({"annotations": {"kubernetes.io/ingress.class": "zzz", target: "192.0.2.99"}, "labels": {"app": "hijacked"}, "finalizers": ["example.test/block"]});
    let written: Ingress = forge(&t.rogue, "legacy", json!({"metadata": forged_meta, "status": rogue_status})).await;
    assert_eq!(addresses_of(written.clone()), ["192.0.2.70"], "legacy: judged by the stored annotation");
    let annotations = written.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get(target).map(String::as_str),
        Some("192.0.2.99"),
        "policy-mode enforce: stored as written"
    );
    // Finalizers stored would block the namespace's deletion.
    let unblock = json!({"metadata": {"finalizers": null}});
    t.ingresses.patch("legacy", &PatchParams::default(), &Patch::Merge(&unblock)).await.unwrap();
    let written: DynamicObject = forge(&rogue_gws, "edge", json!({"metadata": forged_meta, "status": status})).await;
    let meta = &written.metadata;
    let gw_annotations = meta.annotations.clone().unwrap_or_default();
    assert_eq!(
        (gw_annotations.get(target), meta.labels.as_ref(), meta.finalizers.as_ref()),
        (None, None, None),
        "{meta:?}"
    );
}

/// `deny` in policy mode: the ValidatingAdmissionPolicy refuses a status write that changes
/// metadata (the external-dns target alone, the status canonical), and still allows a
/// canonical write that changes none; with the guard SIGKILLed.
#[tokio::test]
async fn the_validating_policy_refuses_a_metadata_change_through_status() {
    let t = TestEnv::new("vap-meta").await;
    let ns = &t.ns;
    let dir = t.cluster.scratch_dir(&format!("vap-meta-{ns}"));
    let cfg = dir.join("policies.yaml");
    std::fs::write(
        &cfg,
        format!(
            "policies:\n  - {{name: {ns}, ingressClasses: [{ns}], publishStatusAddress: 192.0.2.72, mode: deny}}\n"
        ),
    )
    .unwrap();
    create_ingress(&t.ingresses, "web", Class::Field(ns)).await;
    let mut guard = start_guard(&t, &cfg).await;
    let params = PatchParams { field_manager: Some(support::ROGUE_USER.into()), ..PatchParams::default() };
    let canonical = json!({"status": {"loadBalancer": {"ingress": entries(&["192.0.2.72"])}}});
    eventually("the VAP is in force: a rogue write is refused", WAIT, || async {
        let rogue = json!({"status": {"loadBalancer": {"ingress": entries(&["10.6.6.6"])}}});
        match t.rogue.patch_status("web", &params, &Patch::Merge(&rogue)).await {
            Err(kube::Error::Api(s)) if s.code == 403 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    guard.stop();
    t.rogue.patch_status("web", &params, &Patch::Merge(&canonical)).await.expect("a canonical write is allowed");
    let target = json!({"metadata": {"annotations": {"external-dns.alpha.kubernetes.io/target": "192.0.2.99"}}});
    match t.rogue.patch_status("web", &params, &Patch::Merge(&target)).await {
        Err(kube::Error::Api(s)) => {
            assert!(s.message.contains("a status write may not change metadata"), "{s:?}");
        }
        other => panic!("refused: {other:?}"),
    }
    let stored = t.ingresses.get("web").await.unwrap();
    assert_eq!(
        stored.metadata.annotations.clone().unwrap_or_default().get("external-dns.alpha.kubernetes.io/target"),
        None
    );
    assert_eq!(addresses_of(stored), ["192.0.2.72"]);
}
