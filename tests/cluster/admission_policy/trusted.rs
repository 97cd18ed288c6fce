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
