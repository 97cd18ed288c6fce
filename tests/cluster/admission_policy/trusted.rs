//! `trustedWriters` in `--admission=policy`: the MutatingAdmissionPolicy the leader keeps puts
//! the stored status back on another identity's write, and the API server goes on doing so
//! with the guard SIGKILLed; the trusted identity's writes stand throughout.

use super::WAIT;
use super::guard::{get_object, start_guard};
use crate::support::{Class, SENTINEL, TestEnv, addresses, create_ingress, eventually, stored, write_status};
use crate::trusted::{trusted_api, trusted_user, write_as};

#[tokio::test]
async fn the_kept_policy_puts_the_stored_status_back_while_the_guard_is_down() {
    let t = TestEnv::new("mapt").await;
    let dir = t.cluster.scratch_dir(&format!("mapt-{}", t.ns));
    let ns = &t.ns;
    let cfg = dir.join("policies.yaml");
    std::fs::write(
        &cfg,
        format!(
            "policies:\n  - name: {ns}\n    ingressClasses: [{ns}]\n    trustedWriters: ['{}']\n",
            trusted_user(ns)
        ),
    )
    .unwrap();
    let mut guard = start_guard(&t, &cfg).await;
    let trusted = trusted_api(&t).await;
    create_ingress(&t.ingresses, "web", Class::Field(ns)).await;
    // Until the API server applies the MAP, a rogue write lands (and is what a later one would
    // be put back to): the trusted value is written again before each try.
    eventually(&format!("a rogue write is put back (guard log {})", guard.log_path().display()), WAIT, || async {
        write_as(&trusted, "traefik", "web", &["203.0.113.71"]).await.map_err(|e| e.to_string())?;
        let got = addresses(&write_status(&t.rogue, "web", &[SENTINEL], false).await.map_err(|e| e.to_string())?);
        if got == ["203.0.113.71"] { Ok(()) } else { Err(format!("stored {got:?}")) }
    })
    .await;
    let name = format!("{}-ingress-0", super::lease_of(ns));
    let map = get_object(&t, "mutatingadmissionpolicy", &name).expect("the MAP exists");
    let conditions = map["spec"]["matchConditions"].to_string();
    assert!(conditions.contains("request.userInfo.username in"), "{conditions}");

    // SIGKILL: the API server alone puts the stored status back, and lets the trusted write in.
    guard.stop();
    let moved = write_as(&trusted, "traefik", "web", &["203.0.113.72"]).await.expect("the trusted write");
    assert_eq!(addresses(&moved), ["203.0.113.72"], "a trusted write stands with the guard down");
    for rogue in [&[SENTINEL][..], &[]] {
        let answer = write_status(&t.rogue, "web", rogue, false).await.expect("allowed, and put back");
        assert_eq!(addresses(&answer), ["203.0.113.72"], "put back with the guard down");
    }
    assert_eq!(stored(&t.ingresses, "web").await, ["203.0.113.72"], "read back");
    // A write on an Ingress with no status yet: the rogue list is removed.
    create_ingress(&t.ingresses, "fresh", Class::Field(ns)).await;
    eventually("a first rogue write is removed", WAIT, || async {
        let got = addresses(&write_status(&t.rogue, "fresh", &[SENTINEL], false).await.map_err(|e| e.to_string())?);
        if got.is_empty() { Ok(()) } else { Err(format!("stored {got:?}")) }
    })
    .await;
}

/// A Gateway trusted-writer policy rendered by `render-admission-policy` and applied, with no
/// guard running: the API server puts the stored `status.addresses` back on another identity's
/// write (its conditions as written), and lets the trusted identity's write in.
#[tokio::test]
async fn a_rendered_gateway_policy_puts_the_stored_addresses_back() {
    use crate::support::gateway::{
        create_gateway, create_gateway_class, gateway_status, gateways, stored_gateway_addresses, write_gateway_status,
    };
    let t = TestEnv::new("gw-map-trusted").await;
    t.cluster.install_gateway_crds().await;
    let (ns, class) = (&t.ns, format!("{}-gw", t.ns));
    create_gateway_class(&t.admin, &class, &format!("example.test/{ns}")).await;
    let dir = t.cluster.scratch_dir(&format!("gw-map-trusted-{ns}"));
    let (cfg, out) = (dir.join("policies.yaml"), dir.join("rendered.yaml"));
    let policy = format!(
        "policies:\n  - name: {ns}\n    kind: Gateway\n    gatewayClasses: [{class}]\n    trustedWriters: ['{}']\n",
        trusted_user(ns)
    );
    std::fs::write(&cfg, policy).unwrap();
    let (code, yaml, stderr) = super::run_render(&["--config", cfg.to_str().unwrap(), &super::lease_flag(ns)]);
    assert_eq!(code, Some(0), "render failed: {stderr}");
    std::fs::write(&out, &yaml).unwrap();
    let applied = t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["apply", "-f", out.to_str().unwrap()]);
    assert!(applied.success, "apply failed: {}\n{yaml}", applied.stderr);

    let trusted_client = t.cluster.client_for(&trusted_user(ns), Some(crate::support::cluster::STATUS_WRITERS)).await;
    let (admin_gws, rogue_gws, trusted_gws) =
        (gateways(&t.admin, ns), gateways(&t.cluster.rogue().await, ns), gateways(&trusted_client, ns));
    create_gateway(&admin_gws, "public", &class).await;
    let mine = ["192.0.2.60", "lb.example.test"];
    eventually("the MAP puts the stored addresses back", WAIT, || async {
        write_gateway_status(&trusted_gws, "public", gateway_status(&mine, true, 1), false)
            .await
            .map_err(|e| e.to_string())?;
        let got = write_gateway_status(&rogue_gws, "public", gateway_status(&["198.51.100.66"], false, 1), false)
            .await
            .map_err(|e| e.to_string())?;
        let got = stored_gateway_addresses(&got);
        if got == mine { Ok(()) } else { Err(format!("stored {got:?}")) }
    })
    .await;
    let stored = admin_gws.get_status("public").await.unwrap();
    assert_eq!(stored_gateway_addresses(&stored), mine, "read back");
    let status = &stored.data["status"];
    assert_eq!(status["addresses"][1]["type"], "Hostname", "{status}");
    assert_eq!(status["conditions"][1]["status"], "False", "the rogue write's conditions stay as written: {status}");
    let moved = write_gateway_status(&trusted_gws, "public", gateway_status(&["192.0.2.61"], true, 1), false).await;
    assert_eq!(stored_gateway_addresses(&moved.unwrap()), ["192.0.2.61"], "a trusted write stands");
}
