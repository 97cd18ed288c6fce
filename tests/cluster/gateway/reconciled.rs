//! The reconciler for governed Gateways: a rogue `status.addresses` stored while no webhook is
//! registered for Gateways is healed by the reconciler alone, conditions and listeners kept;
//! an audit policy's Gateway measured (drift gauge) and never patched; a Gateway of another
//! class is never patched; a class whose controller changes (deleted and
//! created again: `controllerName` is immutable) is followed.

use kube::Api;
use kube::api::{DeleteParams, DynamicObject};

use super::support::gateway::{
    self, create_gateway, create_gateway_class, gateway_class_resource, gateway_status, stored_gateway_addresses,
    write_gateway_status,
};
use super::support::{SENTINEL, SENTINEL_2, TestEnv, eventually};
use super::{SETTLE, guard_args, start_guard};

#[tokio::test]
async fn the_reconciler_heals_governed_gateways_and_no_others() {
    let t = TestEnv::new("gw-reconcile").await;
    t.cluster.install_gateway_crds().await;
    let ns = &t.ns;
    let controller = format!("example.com/ctl-{ns}");
    let policies = format!(
        "policies:
  - {{name: enforce, gatewayClasses: [{ns}], publishStatusAddress: '192.0.2.60, gw.example.test'}}
  - {{name: by-controller, gatewayControllers: [{controller}], publishStatusAddress: 192.0.2.63}}
  - {{name: audit, gatewayClasses: [{ns}-audit], publishStatusAddress: 192.0.2.61, mode: audit}}
"
    );
    create_gateway_class(&t.admin, ns, "example.com/gateway-controller").await;
    create_gateway_class(&t.admin, &format!("{ns}-other"), &format!("example.com/other-{ns}")).await;
    create_gateway_class(&t.admin, &format!("{ns}-moves"), &format!("example.com/other-{ns}")).await;
    create_gateway_class(&t.admin, &format!("{ns}-audit"), "example.com/gateway-controller").await;
    let admin = gateway::gateways(&t.admin, ns);
    let gateways = [
        ("edge", ns.clone()),
        ("other", format!("{ns}-other")),
        ("moving", format!("{ns}-moves")),
        ("audited", format!("{ns}-audit")),
    ];
    for (name, class) in &gateways {
        create_gateway(&admin, name, class).await;
    }
    // Rogue statuses stored before the guard runs; no webhook is registered for Gateways.
    let rogue = gateway::gateways(&t.cluster.rogue().await, ns);
    let written = gateway_status(&[SENTINEL], true, 1);
    for (name, _) in &gateways {
        let stored = write_gateway_status(&rogue, name, written.clone(), false).await.expect("rogue status write");
        assert_eq!(stored_gateway_addresses(&stored), [SENTINEL]);
    }

    let guard = start_guard(&t, &guard_args(&t, &policies)).await;
    let log = guard.log_path().display().to_string();
    let healed = eventually(&format!("Gateway {ns}/edge healed by the reconciler (log: {log})"), SETTLE, || async {
        let got = admin.get("edge").await.map_err(|e| e.to_string())?;
        let addrs = stored_gateway_addresses(&got);
        if addrs == ["192.0.2.60", "gw.example.test"] { Ok(got) } else { Err(format!("stored {addrs:?}")) }
    })
    .await;
    for field in ["conditions", "listeners"] {
        assert_eq!(healed.data["status"][field], written[field], "status.{field} untouched by the reconciler");
    }
    let managers: Vec<&str> =
        healed.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.as_deref()).collect();
    assert!(managers.contains(&"ingress-status-guard"), "the reconciler's field manager: {managers:?}");

    // The drift gauges per policy and kind: the audited Gateway is measured, never patched.
    let drift = |policy: &str| {
        guard.metric(&format!("ingress_status_guard_drift_objects{{policy=\"{policy}\",kind=\"gateway\"}}"))
    };
    eventually("the audit policy's drift gauge counts the audited Gateway", SETTLE, || async {
        let (audit, enforce) = (drift("audit"), drift("enforce"));
        if audit == 1.0 && enforce == 0.0 { Ok(()) } else { Err(format!("audit {audit}, enforce {enforce}")) }
    })
    .await;
    let metrics = guard.metrics();
    assert!(
        !metrics.contains("ingress_status_guard_drift_ingresses{policy=\"audit\"}"),
        "the Ingress-only gauge does not count Gateways:\n{metrics}"
    );
    let patched = guard.metric("ingress_status_guard_reconcile_patches_total{policy=\"enforce\",result=\"patched\"}");
    assert_eq!(patched, 1.0, "one patch healed Gateway edge");

    // The moving Gateway's class is not governed yet, the audited one only measured; none is
    // patched by the guard's field manager.
    for name in ["other", "moving", "audited"] {
        let got = admin.get(name).await.unwrap();
        assert_eq!(stored_gateway_addresses(&got), [SENTINEL], "Gateway {name} of an ungoverned class");
        let touched =
            got.metadata.managed_fields.iter().flatten().any(|m| m.manager.as_deref() == Some("ingress-status-guard"));
        assert!(!touched, "Gateway {name} never patched");
    }

    // The class of `moving` now names the policy's controller: the reconciler follows.
    let classes: Api<DynamicObject> = Api::all_with(t.admin.clone(), &gateway_class_resource());
    let moves = format!("{ns}-moves");
    classes.delete(&moves, &DeleteParams::default()).await.expect("delete the GatewayClass");
    eventually("the GatewayClass is gone", SETTLE, || async {
        match classes.get_opt(&moves).await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    create_gateway_class(&t.admin, &moves, &controller).await;
    eventually(&format!("Gateway {ns}/moving healed once its class is governed (log: {log})"), SETTLE, || async {
        let addrs = stored_gateway_addresses(&admin.get("moving").await.map_err(|e| e.to_string())?);
        if addrs == ["192.0.2.63"] { Ok(()) } else { Err(format!("stored {addrs:?}")) }
    })
    .await;

    // A later rogue write of the governed Gateway is healed again; the other class still not.
    write_gateway_status(&rogue, "edge", gateway_status(&[SENTINEL_2], true, 1), false).await.unwrap();
    eventually(&format!("Gateway {ns}/edge healed again (log: {log})"), SETTLE, || async {
        let addrs = stored_gateway_addresses(&admin.get("edge").await.map_err(|e| e.to_string())?);
        if addrs == ["192.0.2.60", "gw.example.test"] { Ok(()) } else { Err(format!("stored {addrs:?}")) }
    })
    .await;
    assert_eq!(stored_gateway_addresses(&admin.get("other").await.unwrap()), [SENTINEL]);
}
