//! The hybrid: the MutatingAdmissionPolicy enforces, and the guard's webhook is registered
//! beside it in `audit` with `failurePolicy: Ignore`, for a writer trail. What a real API
//! server shows: its admission chain runs admission policies before webhooks, so the webhook
//! is called with the object the policy has already rewritten.

use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;

use super::WAIT;
use super::guard::{rewritten_to, start_guard};
use crate::support::{Class, FailurePolicy, SENTINEL, TestEnv, create_ingress, eventually, write_status};

#[tokio::test]
async fn a_webhook_beside_the_mutating_policy_sees_the_rewritten_write() {
    let t = TestEnv::new("maph").await;
    let dir = t.cluster.scratch_dir(&format!("maph-{}", t.ns));
    let policy = |mode: &str| {
        format!(
            "policies:\n  - name: {ns}\n    ingressClasses: [{ns}]\n    publishStatusAddress: 192.0.2.81\n    mode: {mode}\n",
            ns = t.ns
        )
    };
    let enforce = dir.join("enforce.yaml");
    std::fs::write(&enforce, policy("enforce")).unwrap();
    let audit = dir.join("audit.yaml");
    std::fs::write(&audit, policy("audit")).unwrap();
    let guard = start_guard(&t, &enforce).await;
    let config = format!("--config={}", audit.display());
    let webhook = t.start_webhook(&[&config]).await;
    webhook.register(&t.admin, &t.ns, FailurePolicy::Ignore).await;
    create_ingress(&t.ingresses, "web", Class::Field(&t.ns)).await;
    rewritten_to(&t.rogue, "web", &["192.0.2.81"], &guard.log_path()).await;
    let rogue: &Api<Ingress> = &t.rogue;
    let count =
        |result: &str| webhook.metric(&format!("ingress_status_guard_admission_requests_total{{result=\"{result}\"}}"));
    // Once a rogue write reached the webhook after the MAP: the webhook judged the rewritten
    // object, canonical. (Writes before the MAP was in force may have been audited.)
    let event = eventually("a rogue write that reached the webhook", WAIT, || async {
        let (audited, unchanged) = (count("audited"), count("unchanged"));
        let stored = write_status(rogue, "web", &[SENTINEL], false).await.map_err(|e| e.to_string())?;
        if crate::support::addresses(&stored) != ["192.0.2.81"] {
            return Err("not rewritten".into());
        }
        let events = t.cluster.ingress_status_audit(&t.ns, "web");
        let last = events.last().cloned().ok_or("no audit event")?;
        let called =
            last["annotations"].as_object().is_some_and(|a| a.keys().any(|k| k.starts_with("mutation.webhook")));
        if !called {
            return Err(format!("webhook not called yet: {last}"));
        }
        // The webhook answers before the API server logs the write: its counters are final.
        assert_eq!(count("audited"), audited, "the webhook never sees the rogue value");
        if count("unchanged") == unchanged + 1.0 { Ok(last) } else { Err("the webhook's count lags".into()) }
    })
    .await;
    // What the trail is, then: the API server's audit log, at level Request, with the writer and
    // what it sent, and no annotation of the webhook's (it saw nothing to report).
    assert_eq!(event["user"]["username"], crate::support::ROGUE_USER);
    assert_eq!(event["requestObject"]["status"]["loadBalancer"]["ingress"][0]["ip"], SENTINEL);
    let annotations = event["annotations"].as_object().unwrap();
    assert!(!annotations.keys().any(|k| k.ends_with("/action") || k.ends_with("/attempted")), "{annotations:?}");
}
