//! Webhook mode, against the real kube-apiserver: a status write that also forges
//! the class. The API server runs mutating admission on the object as written and only then
//! puts the stored spec back, so the guard judges the write by what will be stored (the class
//! field from `oldObject`, the annotation from the object: metadata is stored as written) and
//! names the forged field, `forged_spec`, in the audit log, its log line, the Event and
//! `forged_spec_writes_total`. The admission-policy mode is in `tests/cluster/admission_policy/forged.rs`,
//! Gateways in `tests/cluster/gateway/forged.rs`.

use crate::support;

use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use support::{Class, FailurePolicy, ROGUE_USER, TestEnv, Webhook, addresses, create_ingress, entries};

const ROGUE: &str = "10.6.6.6";
const CLASS: &str = "kubernetes.io/ingress.class";

/// A status write through the status subresource (merge patch) by the rogue identity, with
/// whatever else `extra` holds besides the rogue address: the `kubectl patch --subresource=status`
/// of the issue.
async fn forge(api: &Api<Ingress>, name: &str, extra: Value) -> kube::Result<Ingress> {
    let mut patch = json!({"status": {"loadBalancer": {"ingress": entries(&[ROGUE])}}});
    for (key, value) in extra.as_object().expect("an object").clone() {
        patch[key] = value;
    }
    let params = PatchParams { field_manager: Some(ROGUE_USER.into()), ..PatchParams::default() };
    api.patch_status(name, &params, &Patch::Merge(&patch)).await
}

fn forged_class(class: &str) -> Value {
    json!({"spec": {"ingressClassName": class}})
}

/// The guard's audit annotation `key` on the last status PATCH of Ingress `name`.
async fn audit_annotation(t: &TestEnv, name: &str, key: &str) -> Option<Value> {
    t.audited(name, 1).await;
    let events: Vec<Value> =
        t.cluster.ingress_status_audit(&t.ns, name).into_iter().filter(|e| e["verb"] == "patch").collect();
    let last = events.last()?;
    let suffix = format!(".e2e.ingress-status-guard.test/{key}");
    last["annotations"].as_object()?.iter().find(|(k, _)| k.ends_with(&suffix)).map(|(_, v)| v.clone())
}

/// The webhook's structured log line about `name` with `message`.
fn log_line(webhook: &Webhook, message: &str, name: &str) -> Value {
    webhook
        .log()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["message"] == message && (l["ingress_name"] == name || l["name"] == name))
        .unwrap_or_else(|| panic!("a {message:?} line about {name}:\n{}", webhook.log_tail()))
}

/// The webhook for this test's namespace, governing class `guarded` (enforce), `deny` and
/// `audit`, registered and in effect.
async fn guard(t: &TestEnv) -> Webhook {
    let dir = t.cluster.scratch_dir(&format!("forged-{}", t.ns));
    let config = dir.join("policies.yaml");
    std::fs::write(
        &config,
        "policies:
  - {name: enforce, ingressClasses: [guarded], publishStatusAddress: 192.0.2.10}
  - {name: deny, ingressClasses: [deny], publishStatusAddress: 192.0.2.21, mode: deny}
  - {name: audit, ingressClasses: [audit], publishStatusAddress: 192.0.2.22, mode: audit}
",
    )
    .unwrap();
    let webhook = t.start_webhook(&[&format!("--config={}", config.display())]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::Field("guarded"), &["192.0.2.10"]).await;
    webhook
}

fn forged_metric(webhook: &Webhook, result: &str) -> f64 {
    webhook.metric(&format!(
        "ingress_status_guard_forged_spec_writes_total{{field=\"spec.ingressClassName\",result=\"{result}\"}}"
    ))
}

/// The write: the forged `spec.ingressClassName` names no policy, the stored class
/// (`class`) does, so the write is rewritten; the audit annotation, the Event, the log line and
/// the metric name the field.
async fn rewritten_under_the_stored_class(prefix: &str, class: Class<'_>, stored_field: Option<&str>) {
    let t = TestEnv::new(prefix).await;
    let webhook = guard(&t).await;
    create_ingress(&t.ingresses, "web", class).await;

    let answer = forge(&t.rogue, "web", forged_class("zzz")).await.expect("allowed, rewritten");
    assert_eq!(addresses(&answer), ["192.0.2.10"], "what the writer gets back");
    let stored = t.ingresses.get("web").await.unwrap();
    assert_eq!(addresses(&stored), ["192.0.2.10"], "stored");
    let spec = stored.spec.as_ref().unwrap();
    assert_eq!(spec.ingress_class_name.as_deref(), stored_field, "the API server kept the stored spec");

    assert_eq!(audit_annotation(&t, "web", "forged_spec").await, Some(json!("spec.ingressClassName")));
    assert_eq!(audit_annotation(&t, "web", "action").await, Some(json!("patched")));
    let event = t.await_event(&webhook, "web").await;
    let note = event.note.clone().unwrap_or_default();
    assert!(note.starts_with("forged_spec spec.ingressClassName") && note.ends_with("; rewritten"), "{note}");
    let line = log_line(&webhook, "rogue status write", "web");
    assert_eq!(
        (line["forged_spec"].as_str(), line["ingress_class"].as_str()),
        (Some("spec.ingressClassName"), Some("guarded"))
    );
    assert_eq!(forged_metric(&webhook, "patched"), 1.0, "{}", webhook.metrics());
}

#[tokio::test]
async fn a_forged_class_field_is_rewritten_under_the_stored_class() {
    rewritten_under_the_stored_class("forged-field", Class::Field("guarded"), Some("guarded")).await;
}

/// The same over a class taken from the legacy annotation: the forged field would win over it
/// in `object`, but is not stored.
#[tokio::test]
async fn a_forged_class_over_the_legacy_annotation_is_rewritten() {
    rewritten_under_the_stored_class("forged-annotation", Class::Annotation("guarded"), None).await;
}

/// `deny` over the forged write: refused under the stored class, and reported.
#[tokio::test]
async fn deny_mode_refuses_a_forged_write_under_the_stored_class() {
    let t = TestEnv::new("forged-deny").await;
    let webhook = guard(&t).await;
    create_ingress(&t.ingresses, "denied", Class::Field("deny")).await;
    match forge(&t.rogue, "denied", forged_class("zzz")).await {
        Err(kube::Error::Api(status)) => assert!(
            status.message.contains(
                "ingress-status-guard policy \"deny\" requires status.loadBalancer.ingress [192.0.2.21], not [10.6.6.6]"
            ),
            "{status:?}"
        ),
        other => panic!("the forged write is refused under the stored class: {other:?}"),
    }
    assert!(addresses(&t.ingresses.get("denied").await.unwrap()).is_empty(), "nothing stored");
    let event = t.await_event(&webhook, "denied").await;
    let note = event.note.clone().unwrap_or_default();
    assert!(note.starts_with("forged_spec spec.ingressClassName") && note.ends_with("; denied"), "{note}");
    assert_eq!(forged_metric(&webhook, "denied"), 1.0, "{}", webhook.metrics());
}

/// `audit` over the forged write (stored class from the annotation): stored as written,
/// reported under the stored class.
#[tokio::test]
async fn audit_mode_reports_a_forged_write_under_the_stored_class() {
    let t = TestEnv::new("forged-audit").await;
    let webhook = guard(&t).await;
    create_ingress(&t.ingresses, "audited", Class::Annotation("audit")).await;
    let answer = forge(&t.rogue, "audited", forged_class("zzz")).await.expect("audit mode allows");
    assert_eq!(addresses(&answer), [ROGUE], "audit mode stores the write");
    assert_eq!(audit_annotation(&t, "audited", "action").await, Some(json!("audited")));
    assert_eq!(audit_annotation(&t, "audited", "policy").await, Some(json!("audit")));
    assert_eq!(audit_annotation(&t, "audited", "forged_spec").await, Some(json!("spec.ingressClassName")));
    let event = t.await_event(&webhook, "audited").await;
    let note = event.note.clone().unwrap_or_default();
    assert!(
        note.starts_with("forged_spec spec.ingressClassName") && note.ends_with("; allowed (audit mode)"),
        "{note}"
    );
    assert_eq!(forged_metric(&webhook, "audited"), 1.0, "{}", webhook.metrics());
}

/// A write that really is ungoverned (stored class `other`) keeps its value, whatever governed
/// class it claims; the forged field is still named, and it is not a rogue write.
#[tokio::test]
async fn a_write_whose_stored_class_is_ungoverned_stays_untouched() {
    let t = TestEnv::new("forged-other").await;
    let webhook = guard(&t).await;
    create_ingress(&t.ingresses, "other", Class::Field("other")).await;
    let answer = forge(&t.rogue, "other", forged_class("guarded")).await.expect("allowed as written");
    assert_eq!(addresses(&answer), [ROGUE], "an ungoverned Ingress keeps its write");
    let stored = t.ingresses.get("other").await.unwrap();
    assert_eq!(addresses(&stored), [ROGUE]);
    assert_eq!(stored.spec.and_then(|s| s.ingress_class_name).as_deref(), Some("other"));
    assert_eq!(audit_annotation(&t, "other", "forged_spec").await, Some(json!("spec.ingressClassName")));
    assert_eq!(audit_annotation(&t, "other", "action").await, None, "no finding");
    assert_eq!(forged_metric(&webhook, "not_governed"), 1.0, "{}", webhook.metrics());
    assert!(support::events_about(&t.admin, &t.ns, "other").await.is_empty(), "no Event");
}

/// The question the rule rests on, asked of the API server the suite runs (`ISG_K8S_VERSION`;
/// run on v1.37 and v1.23): a status write's metadata is stored as written, spec is not. So
/// the class annotation is read from the object, and a status writer can move an Ingress that
/// has no `spec.ingressClassName` to another class (as ingress-nginx would then see it).
#[tokio::test]
async fn a_status_write_stores_its_metadata_and_not_its_spec() {
    let t = TestEnv::new("forged-meta").await;
    create_ingress(&t.ingresses, "legacy", Class::Annotation("guarded")).await;
    let extra = json!({
        "metadata": {"annotations": {CLASS: "zzz", "example.test/written-by": "status"}, "labels": {"written": "status"}},
        "spec": {"ingressClassName": "zzz"},
    });
    forge(&t.rogue, "legacy", extra).await.expect("the rogue identity may patch ingresses/status");
    let stored = t.ingresses.get("legacy").await.unwrap();
    let annotations = stored.metadata.annotations.clone().unwrap_or_default();
    let version = std::env::var("ISG_K8S_VERSION").unwrap_or_else(|_| "default".into());
    println!(
        "API server {version}: stored annotations {annotations:?}, labels {:?}, spec {:?}",
        stored.metadata.labels, stored.spec
    );
    assert_eq!(
        annotations.get(CLASS).map(String::as_str),
        Some("zzz"),
        "{version}: the annotation is stored as written"
    );
    assert_eq!(annotations.get("example.test/written-by").map(String::as_str), Some("status"), "{version}");
    assert_eq!(
        stored.metadata.labels.clone().unwrap_or_default().get("written").map(String::as_str),
        Some("status"),
        "{version}"
    );
    assert_eq!(addresses(&stored), [ROGUE]);
    assert_eq!(stored.spec.and_then(|s| s.ingress_class_name), None, "{version}: the spec is the stored one");
}

/// The reconciler and `check` judge the stored object, which a forged write cannot change: a
/// forged write let through while no guard ran is drift under the stored class for `check`,
/// and the reconciler heals it (the forged class named in the write is nowhere stored).
#[tokio::test]
async fn check_and_the_reconciler_judge_the_stored_class() {
    let t = TestEnv::new("forged-stored").await;
    let class = format!("cls-{}", t.ns);
    create_ingress(&t.ingresses, "web", Class::Field(&class)).await;
    create_ingress(&t.ingresses, "other", Class::Field("other")).await;
    forge(&t.rogue, "web", forged_class("zzz")).await.expect("no guard: stored as written");
    forge(&t.rogue, "other", forged_class(&class)).await.expect("no guard: stored as written");
    assert_eq!(addresses(&t.ingresses.get("web").await.unwrap()), [ROGUE]);

    let kubeconfig = format!("--kubeconfig={}", t.cluster.admin_kubeconfig().display());
    let class_flag = format!("--ingress-class={class}");
    let policy = ["--publish-status-address=192.0.2.30", class_flag.as_str()];
    let out = std::process::Command::new(support::webhook::BINARY)
        .args(["check", &kubeconfig, "-n", &t.ns])
        .args(policy)
        .output()
        .expect("run check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "drift: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    let row = |name: &str| {
        let key = format!("{}/{name}", t.ns);
        stdout.lines().map(|l| l.split_whitespace().collect::<Vec<_>>()).find(|c| c.first() == Some(&key.as_str()))
    };
    assert_eq!(row("web").map(|r| r[r.len() - 1]), Some("DRIFT"), "{stdout}");
    assert!(row("other").is_none(), "stored class other: not governed\n{stdout}");

    let lease = format!("--leader-election-namespace={}", t.ns);
    let mut args = vec!["--reconcile=true", lease.as_str(), "--leader-election-lease-duration=4s"];
    args.extend(["--leader-election-renew-deadline=3s", "--leader-election-retry-period=1s"]);
    args.extend(policy);
    let guard = t.start_webhook(&args).await;
    support::eventually("the reconciler heals web", std::time::Duration::from_secs(60), || async {
        match addresses(&t.ingresses.get("web").await.map_err(|e| e.to_string())?) {
            got if got == ["192.0.2.30"] => Ok(()),
            got => Err(format!("stored {got:?}; {}", guard.log_tail())),
        }
    })
    .await;
    assert_eq!(addresses(&t.ingresses.get("other").await.unwrap()), [ROGUE], "an ungoverned Ingress is left alone");
}

/// A status write that changes metadata: the API server would store it as written, so the
/// guard judges the write by the stored metadata (class annotation and uid from `oldObject`)
/// and puts the written metadata back (`forged_metadata`), whatever the status.
fn forged_metadata_metric(webhook: &Webhook, field: &str, result: &str) -> f64 {
    webhook
        .metric(&format!("ingress_status_guard_forged_metadata_writes_total{{field=\"{field}\",result=\"{result}\"}}"))
}

/// The reclassification: one status patch sets the legacy class annotation to `zzz`
/// with a rogue address. Stored: the original annotation and the canonical address.
#[tokio::test]
async fn a_forged_class_annotation_is_put_back_and_the_write_judged_as_stored() {
    let t = TestEnv::new("forged-meta-class").await;
    let webhook = guard(&t).await;
    create_ingress(&t.ingresses, "legacy", Class::Annotation("guarded")).await;
    let extra = json!({"metadata": {"annotations": {CLASS: "zzz"}}});
    let answer = forge(&t.rogue, "legacy", extra).await.expect("allowed, rewritten");
    assert_eq!(addresses(&answer), ["192.0.2.10"], "what the writer gets back");
    let stored = t.ingresses.get("legacy").await.unwrap();
    assert_eq!(addresses(&stored), ["192.0.2.10"], "stored canonical");
    let annotations = stored.metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.get(CLASS).map(String::as_str), Some("guarded"), "the stored class is kept");
    assert_eq!(
        audit_annotation(&t, "legacy", "forged_metadata").await,
        Some(json!("metadata.annotations[kubernetes.io/ingress.class]"))
    );
    assert_eq!(audit_annotation(&t, "legacy", "action").await, Some(json!("patched")));
    let event = t.await_event(&webhook, "legacy").await;
    let note = event.note.clone().unwrap_or_default();
    assert!(note.starts_with("forged_metadata metadata.annotations[kubernetes.io/ingress.class]"), "{note}");
    assert_eq!(forged_metadata_metric(&webhook, "metadata.annotations", "patched"), 1.0, "{}", webhook.metrics());
}

/// external-dns's target annotation alone, the status untouched: put back in `enforce`,
/// refused in `deny`, stored and reported in `audit`.
#[tokio::test]
async fn an_external_dns_target_written_through_status_is_reverted_refused_or_reported() {
    let t = TestEnv::new("forged-meta-dns").await;
    let webhook = guard(&t).await;
    const TARGET: &str = "external-dns.alpha.kubernetes.io/target";
    let write = |name: &'static str| {
        let api = t.rogue.clone();
        async move {
            let patch = json!({"metadata": {"annotations": {TARGET: "192.0.2.99"}}});
            let params = PatchParams { field_manager: Some(ROGUE_USER.into()), ..PatchParams::default() };
            api.patch_status(name, &params, &Patch::Merge(&patch)).await
        }
    };
    let target_of = |ing: &Ingress| ing.metadata.annotations.clone().unwrap_or_default().get(TARGET).cloned();

    create_ingress(&t.ingresses, "enforced", Class::Field("guarded")).await;
    write("enforced").await.expect("allowed, put back");
    assert_eq!(target_of(&t.ingresses.get("enforced").await.unwrap()), None, "enforce: reverted");
    assert_eq!(
        audit_annotation(&t, "enforced", "forged_metadata").await,
        Some(json!(format!("metadata.annotations[{TARGET}]")))
    );

    create_ingress(&t.ingresses, "denied", Class::Field("deny")).await;
    match write("denied").await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "{status:?}");
            assert!(
                status.message.contains(&format!(
                    "a status write may not change metadata (it changed metadata.annotations[{TARGET}])"
                )),
                "{status:?}"
            );
        }
        other => panic!("deny refuses a metadata change: {other:?}"),
    }
    assert_eq!(target_of(&t.ingresses.get("denied").await.unwrap()), None, "deny: nothing stored");

    create_ingress(&t.ingresses, "audited", Class::Field("audit")).await;
    write("audited").await.expect("audit allows");
    assert_eq!(target_of(&t.ingresses.get("audited").await.unwrap()).as_deref(), Some("192.0.2.99"), "audit: stored");
    assert_eq!(audit_annotation(&t, "audited", "action").await, Some(json!("audited")));
    let event = t.await_event(&webhook, "audited").await;
    assert!(event.note.clone().unwrap_or_default().ends_with("allowed (audit mode)"), "{event:?}");
    assert_eq!(forged_metadata_metric(&webhook, "metadata.annotations", "patched"), 1.0, "{}", webhook.metrics());
    assert_eq!(forged_metadata_metric(&webhook, "metadata.annotations", "denied"), 1.0);
    assert_eq!(forged_metadata_metric(&webhook, "metadata.annotations", "audited"), 1.0);
}

/// Labels, an owner reference and a finalizer, in one write that also clears the uid it sends
/// (the API server refills it): each put back, and the Event still sent (its uid is the stored
/// object's).
#[tokio::test]
async fn labels_owners_and_finalizers_are_put_back_and_a_null_uid_still_finds_the_object() {
    let t = TestEnv::new("forged-meta-owner").await;
    let webhook = guard(&t).await;
    create_ingress(&t.ingresses, "web", Class::Field("guarded")).await;
    let extra = json!({"metadata": {
        "uid": null,
        "labels": {"app": "hijacked"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "00000000-0000-0000-0000-000000000001"}],
        "finalizers": ["example.test/block"],
    }});
    forge(&t.rogue, "web", extra).await.expect("allowed, put back");
    let stored = t.ingresses.get("web").await.unwrap();
    assert_eq!(addresses(&stored), ["192.0.2.10"]);
    assert_eq!(stored.metadata.labels, None, "labels put back");
    assert_eq!(stored.metadata.owner_references, None, "owner references put back");
    assert_eq!(stored.metadata.finalizers, None, "finalizers put back");
    let event = t.await_event(&webhook, "web").await;
    let note = event.note.clone().unwrap_or_default();
    assert!(
        note.starts_with(
            "forged_metadata metadata.labels[app],metadata.ownerReferences,metadata.finalizers[example.test/block]"
        ),
        "{note}"
    );
    for field in ["metadata.labels", "metadata.ownerReferences", "metadata.finalizers"] {
        assert_eq!(forged_metadata_metric(&webhook, field, "patched"), 1.0, "{field}: {}", webhook.metrics());
    }
}

/// What ingress-nginx's `--update-status-on-shutdown` writes on every rollout, and external-dns
/// then deletes the records for: an empty list. Rewritten to canonical in `enforce`, refused
/// in `deny`.
#[tokio::test]
async fn a_write_that_clears_the_status_is_rewritten_or_refused() {
    let t = TestEnv::new("forged-clear").await;
    let _webhook = guard(&t).await;
    let params = PatchParams { field_manager: Some(ROGUE_USER.into()), ..PatchParams::default() };
    let clear = json!({"status": {"loadBalancer": {"ingress": []}}});
    create_ingress(&t.ingresses, "web", Class::Field("guarded")).await;
    let answer = t.rogue.patch_status("web", &params, &Patch::Merge(&clear)).await.expect("allowed, rewritten");
    assert_eq!(addresses(&answer), ["192.0.2.10"]);
    assert_eq!(addresses(&t.ingresses.get("web").await.unwrap()), ["192.0.2.10"]);
    create_ingress(&t.ingresses, "denied", Class::Field("deny")).await;
    match t.rogue.patch_status("denied", &params, &Patch::Merge(&clear)).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("deny refuses clearing the status: {other:?}"),
    }
}

/// An ungoverned Ingress (stored class `other`): its status write's metadata is stored as
/// written, whatever class it claims; counted as not governed, and no Event.
#[tokio::test]
async fn an_ungoverned_ingress_keeps_the_metadata_of_its_status_write() {
    let t = TestEnv::new("forged-meta-other").await;
    let webhook = guard(&t).await;
    create_ingress(&t.ingresses, "other", Class::Annotation("other")).await;
    let extra = json!({"metadata": {"annotations": {CLASS: "guarded"}, "labels": {"written": "status"}}});
    let answer = forge(&t.rogue, "other", extra).await.expect("allowed as written");
    assert_eq!(addresses(&answer), [ROGUE]);
    let stored = t.ingresses.get("other").await.unwrap();
    assert_eq!(stored.metadata.annotations.unwrap_or_default().get(CLASS).map(String::as_str), Some("guarded"));
    assert_eq!(stored.metadata.labels.unwrap_or_default().get("written").map(String::as_str), Some("status"));
    assert_eq!(audit_annotation(&t, "other", "action").await, None, "no finding");
    assert_eq!(forged_metadata_metric(&webhook, "metadata.annotations", "not_governed"), 1.0, "{}", webhook.metrics());
    assert!(support::events_about(&t.admin, &t.ns, "other").await.is_empty(), "no Event");
}
