//! `trustedWriters` through the webhook against a real kube-apiserver: the identities the API
//! server authenticates (client certificates: the username the webhook reads is the one the
//! API server put in the review) write an Ingress's status. A trusted identity's writes stand;
//! another's are put back to the stored status (`enforce`, read back), refused with a 403 naming
//! the policy (`deny`), or land and are reported (`audit`: audit annotation, metric, log line);
//! `explain` names the last status writer from `managedFields`.

use std::time::Duration;

use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::support::{
    self, Class, FailurePolicy, ROGUE_USER, SENTINEL, SENTINEL_2, TestEnv, addresses, create_ingress, eventually,
    stored, write_status,
};

const WAIT: Duration = Duration::from_secs(30);

/// The trusted controller's username in namespace `ns`, as a ServiceAccount's reads.
pub(crate) fn trusted_user(ns: &str) -> String {
    format!("system:serviceaccount:{ns}:traefik")
}

/// The status list of Ingress `name` written as the trusted controller does (field manager
/// `traefik`); what the API server stored, or its refusal.
pub(crate) async fn write_as(api: &Api<Ingress>, manager: &str, name: &str, ips: &[&str]) -> kube::Result<Ingress> {
    let list: Vec<_> = ips.iter().map(|ip| json!({"ip": ip})).collect();
    let params = PatchParams { field_manager: Some(manager.into()), ..PatchParams::default() };
    api.patch_status(name, &params, &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": list}}}))).await
}

/// A client of the trusted controller, which may write Ingress statuses as the rogue one may.
pub(crate) async fn trusted_api(t: &TestEnv) -> Api<Ingress> {
    let client = t.cluster.client_for(&trusted_user(&t.ns), Some(support::cluster::STATUS_WRITERS)).await;
    Api::namespaced(client, &t.ns)
}

#[tokio::test]
async fn a_trusted_writer_defines_the_status_and_another_is_put_back_refused_or_reported() {
    let t = TestEnv::new("trusted").await;
    let dir = t.cluster.scratch_dir(&format!("trusted-{}", t.ns));
    let ns = &t.ns;
    let user = trusted_user(ns);
    let policy = |mode: &str| {
        format!("  - {{name: {ns}-{mode}, ingressClasses: [{ns}-{mode}], mode: {mode}, trustedWriters: ['{user}']}}\n")
    };
    let config = dir.join("policies.yaml");
    std::fs::write(&config, format!("policies:\n{}{}{}", policy("enforce"), policy("deny"), policy("audit"))).unwrap();
    let webhook = t.start_webhook(&[&format!("--config={}", config.display())]).await;
    webhook.register(&t.admin, ns, FailurePolicy::Fail).await;
    let trusted = trusted_api(&t).await;
    for mode in ["enforce", "deny", "audit"] {
        create_ingress(&t.ingresses, mode, Class::Field(&format!("{ns}-{mode}"))).await;
    }

    // Enforce. Until the API server calls the webhook, a rogue write lands; then it is put back.
    write_as(&trusted, "traefik", "enforce", &["203.0.113.41"]).await.expect("the trusted write");
    let mut flip = false;
    eventually(&format!("a rogue write is put back (log {})", webhook.log_path().display()), WAIT, || {
        flip = !flip;
        let (trusted, rogue_api) = (&trusted, &t.rogue);
        let rogue = if flip { SENTINEL } else { SENTINEL_2 };
        async move {
            write_as(trusted, "traefik", "enforce", &["203.0.113.41"]).await.map_err(|e| e.to_string())?;
            let got = addresses(&write_status(rogue_api, "enforce", &[rogue], false).await.map_err(|e| e.to_string())?);
            if got == ["203.0.113.41"] { Ok(()) } else { Err(format!("stored {got:?}")) }
        }
    })
    .await;
    // The trusted writer moves the address; the rogue one cannot, nor clear it.
    let moved = write_as(&trusted, "traefik", "enforce", &["203.0.113.42", "203.0.113.43"]).await.unwrap();
    assert_eq!(addresses(&moved), ["203.0.113.42", "203.0.113.43"], "a trusted write stands as written");
    for rogue in [&[SENTINEL][..], &[]] {
        let answer = write_status(&t.rogue, "enforce", rogue, false).await.expect("allowed, and put back");
        assert_eq!(addresses(&answer), ["203.0.113.42", "203.0.113.43"]);
        assert_eq!(stored(&t.ingresses, "enforce").await, ["203.0.113.42", "203.0.113.43"], "read back");
    }
    // A rogue write of the stored value passes untouched: no patch in the audit log.
    write_status(&t.rogue, "enforce", &["203.0.113.42", "203.0.113.43"], false).await.unwrap();
    let audit = t.audited("enforce", 1).await;
    let last = audit.last().unwrap();
    assert_eq!((last.user.as_str(), last.patch.is_none()), (ROGUE_USER, true), "{audit:?}");
    let patched = format!(
        "ingress_status_guard_rogue_writes_total{{policy=\"{ns}-enforce\",writer=\"{ROGUE_USER}\",action=\"patched\"}}"
    );
    assert!(webhook.metric(&patched) >= 2.0, "{}", webhook.log_tail());

    // Deny: the trusted write lands; the rogue one is refused with a 403 naming the policy.
    write_as(&trusted, "traefik", "deny", &["203.0.113.51"]).await.expect("the trusted write");
    let refused = write_status(&t.rogue, "deny", &[SENTINEL], false).await.expect_err("refused");
    let kube::Error::Api(status) = &refused else { panic!("{refused:?}") };
    assert_eq!(status.code, 403, "{status:?}");
    assert!(status.message.contains(&format!("policy \"{ns}-deny\"")), "{}", status.message);
    assert!(status.message.contains("only its trusted writers may change it"), "{}", status.message);
    assert_eq!(stored(&t.ingresses, "deny").await, ["203.0.113.51"]);

    // Audit: both land; the rogue one is reported with its writer's name.
    write_as(&trusted, "traefik", "audit", &["203.0.113.61"]).await.expect("the trusted write");
    let answer = write_status(&t.rogue, "audit", &[SENTINEL], false).await.expect("allowed");
    assert_eq!(addresses(&answer), [SENTINEL], "landed as written");
    let audited = format!(
        "ingress_status_guard_rogue_writes_total{{policy=\"{ns}-audit\",writer=\"{ROGUE_USER}\",action=\"audited\"}}"
    );
    eventually("the audited write is counted and logged", WAIT, || async {
        let log = webhook.log();
        let logged = log
            .lines()
            .any(|l| l.contains("rogue status write") && l.contains(ROGUE_USER) && l.contains(&format!("{ns}-audit")));
        if webhook.metric(&audited) >= 1.0 && logged { Ok(()) } else { Err(webhook.log_tail()) }
    })
    .await;
    let events = t.cluster.ingress_status_audit(ns, "audit");
    let annotated = events.iter().any(|e| {
        let annotations = e["annotations"].as_object().into_iter().flatten();
        let mut found =
            annotations.filter(|(k, _)| k.ends_with("/action") || k.ends_with("/policy")).map(|(_, v)| v.clone());
        let values: Vec<_> = found.by_ref().collect();
        e["user"]["username"] == ROGUE_USER
            && values.contains(&json!("audited"))
            && values.contains(&json!(format!("{ns}-audit")))
    });
    assert!(annotated, "an audit annotation reports the rogue write: {events:#?}");
    // The trusted writer's own writes are no finding.
    let trusted_label = format!("writer=\"{user}\"");
    assert!(!webhook.metrics().lines().any(|l| l.contains(&trusted_label)), "{}", webhook.metrics());

    // `explain` names the last writer of the stored status, by its field manager.
    let kubeconfig = t.cluster.admin_kubeconfig().to_str().unwrap().to_owned();
    let out = std::process::Command::new(support::webhook::BINARY)
        .args(["explain", &format!("{ns}/deny"), "--kubeconfig", &kubeconfig, "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.lines().any(|l| l.starts_with("State:") && l.ends_with(" TRUSTED")), "{text}");
    assert!(text.contains("Written by: field manager \"traefik\" (Update at "), "{text}");
    assert!(text.contains("not the user"), "{text}");
    // `check` lists the policy's Ingresses TRUSTED, with the same last writer, and exits 0.
    let out = std::process::Command::new(support::webhook::BINARY)
        .args(["check", "--kubeconfig", &kubeconfig, "--config", config.to_str().unwrap(), "-n", ns])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let row = text.lines().find(|l| l.starts_with(&format!("{ns}/deny "))).unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("TRUSTED (last written by field manager \"traefik\" (Update at "), "{row}");
    assert!(row.contains(&format!("trusted writers [{user}]")), "{row}");
}
