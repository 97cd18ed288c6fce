//! The audit trail under attack, end to end: the built binary registered in a real
//! kube-apiserver, fed forged AdmissionReviews straight to its port (as anyone who reaches it
//! can), and real writes through the API server. Events are only about Ingresses the guard's
//! watch knows, stay small whatever the caller sent, and a flood of forged writers neither
//! suppresses a real writer's Event nor keeps its metric label from it.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use support::{Class, FailurePolicy, TestEnv, Webhook, create_ingress, events_about, eventually};

/// The AdmissionReview an API server 1.24 sent for an Ingress status update.
const FIXTURE: &str = include_str!("../fixtures/ingress-status-update.apiserver-1.24.json");
const CANONICAL: [&str; 1] = ["192.0.2.10"];

/// A review of a status write of `10.66.66.66` by `username` to Ingress `namespace/name` whose
/// metadata.uid is `uid`: what a forger sends.
fn forged(namespace: &str, name: &str, uid: &str, username: &str) -> Vec<u8> {
    let mut review: Value = serde_json::from_str(FIXTURE).expect("fixture");
    let request = &mut review["request"];
    request["uid"] = json!(format!("forged-{name}-{}", username.len()));
    request["namespace"] = json!(namespace);
    request["name"] = json!(name);
    request["userInfo"] = json!({"username": username, "groups": ["system:authenticated"]});
    for object in ["object", "oldObject"] {
        let meta = &mut request[object]["metadata"];
        meta["namespace"] = json!(namespace);
        meta["name"] = json!(name);
        meta["uid"] = json!(uid);
        request[object]["spec"]["ingressClassName"] = json!("nginx");
    }
    request["object"]["status"] = json!({"loadBalancer": {"ingress": [{"ip": "10.66.66.66"}]}});
    serde_json::to_vec(&review).expect("review JSON")
}

/// Posts `body` to the webhook's `/mutate` over TLS (HTTP/1.1) and returns the HTTP status line.
async fn post(webhook: &Webhook, body: &[u8]) -> String {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(webhook.ca_pem().as_bytes()) {
        roots.add(cert.expect("CA PEM")).expect("CA");
    }
    let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    let addr = webhook.url().trim_start_matches("https://").trim_end_matches("/mutate").to_owned();
    let tcp = tokio::net::TcpStream::connect(&addr).await.expect("connect to the webhook");
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("server name");
    let mut tls = connector.connect(name, tcp).await.expect("TLS handshake");
    let head = format!(
        "POST /mutate HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.expect("send head");
    tls.write_all(body).await.expect("send body");
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response).await;
    String::from_utf8_lossy(&response).lines().next().unwrap_or_default().to_owned()
}

/// The webhook with a static canonical address, registered for the test namespace, and the
/// uid of a real Ingress `web` in it.
async fn guarded(t: &TestEnv, args: &[&str]) -> (Webhook, String) {
    let mut all = vec!["--publish-status-address=192.0.2.10"];
    all.extend_from_slice(args);
    let webhook = t.start_webhook(&all).await;
    t.register(&webhook, FailurePolicy::Fail, Class::None, &CANONICAL).await;
    let web = create_ingress(&t.ingresses, "web", Class::Field("nginx")).await;
    (webhook, web.metadata.uid.expect("the API server sets a uid"))
}

const UNKNOWN: &str = "ingress_status_guard_events_skipped_total{reason=\"unknown_object\"}";

/// Forged reviews naming Ingresses that do not exist (in an existing namespace, and in one that
/// does not exist) or a real Ingress with another uid: no Event, each counted and logged. The
/// known-Ingress index fed by a watch of its own (`--reconcile=false`).
#[tokio::test]
async fn forged_targets_get_no_event() {
    let t = TestEnv::new("audit-forged").await;
    forged_targets(&t, &[]).await;
}

/// The same, with the index fed by the reconciler's watch (one list of Ingresses, not two).
#[tokio::test]
async fn forged_targets_get_no_event_with_the_reconcilers_watch() {
    let t = TestEnv::new("audit-forged-rec").await;
    let lease_ns = format!("--leader-election-namespace={}", t.ns);
    forged_targets(&t, &["--reconcile=true", &lease_ns]).await;
}

async fn forged_targets(t: &TestEnv, args: &[&str]) {
    let (webhook, uid) = guarded(t, args).await;
    let ghosts = ["ghost-0", "ghost-1", "ghost-2"];
    for ghost in ghosts {
        assert!(post(&webhook, &forged(&t.ns, ghost, &uid, "forger")).await.contains("200"));
    }
    assert!(post(&webhook, &forged("no-such-namespace-x1", "web", &uid, "forger")).await.contains("200"));
    let wrong_uid = "00000000-0000-0000-0000-000000000000";
    assert!(post(&webhook, &forged(&t.ns, "web", wrong_uid, "forger")).await.contains("200"));
    let skipped = eventually("five forged targets counted", Duration::from_secs(20), || async {
        match webhook.metric(UNKNOWN) {
            n if n >= 5.0 => Ok(n),
            n => Err(format!("{n} skipped; {}", webhook.log_tail())),
        }
    })
    .await;
    assert_eq!(skipped, 5.0);

    // The same forger with the right namespace, name and uid gets its Event: the Events below
    // are published in order, so once that one exists, Events about the forged ones would too.
    assert!(post(&webhook, &forged(&t.ns, "web", &uid, "forger")).await.contains("200"));
    let real = t.await_event(&webhook, "web").await;
    assert_eq!(real.regarding.as_ref().and_then(|r| r.uid.as_deref()), Some(uid.as_str()));
    for ghost in ghosts {
        assert!(events_about(&t.admin, &t.ns, ghost).await.is_empty(), "an Event about {ghost}");
    }
    let about_web = events_about(&t.admin, &t.ns, "web").await;
    assert_eq!(about_web.len(), 1, "one Event, about the real uid: {about_web:?}");
    let log = webhook.log();
    let refusals =
        log.lines().filter(|l| l.contains("no Event: the namespace, name and uid are not an Ingress")).count();
    assert_eq!(refusals, 5, "each forged target is logged:\n{}", webhook.log_tail());
}

/// 150 forged writers flood a real Ingress; then another user writes its status through the
/// API server: that write gets its Event and its metric label.
#[tokio::test]
async fn a_flood_of_forged_writers_leaves_the_real_writers_event_and_label() {
    let t = TestEnv::new("audit-flood").await;
    let (webhook, uid) = guarded(&t, &[]).await;
    for i in 0..150 {
        let status = post(&webhook, &forged(&t.ns, "web", &uid, &format!("forged-{i}"))).await;
        assert!(status.contains("200"), "{status}");
    }
    let flood = "ingress_status_guard_rogue_writes_total{policy=\"default\",writer=\"forged-149\",action=\"patched\"}";
    assert_eq!(webhook.metric(flood), 1.0, "the flood was counted: {}", webhook.metrics());

    let dev = t.cluster.kubeconfig_for("dev", Some(support::cluster::STATUS_WRITERS));
    let patch = r#"{"status":{"loadBalancer":{"ingress":[{"ip":"198.51.100.7"}]}}}"#;
    let out = t
        .cluster
        .kubectl(&dev, &["patch", "ingress", "web", "-n", &t.ns, "--subresource=status", "--type=merge", "-p", patch]);
    assert!(out.success, "kubectl patch as dev: {}", out.stderr);
    let label = "ingress_status_guard_rogue_writes_total{policy=\"default\",writer=\"dev\",action=\"patched\"}";
    assert_eq!(webhook.metric(label), 1.0, "dev has its label: {}", webhook.metrics());
    let event = eventually("an Event naming dev", Duration::from_secs(30), || async {
        let events = events_about(&t.admin, &t.ns, "web").await;
        let dev = events.iter().find(|e| e.related.as_ref().and_then(|r| r.name.as_deref()) == Some("dev"));
        dev.cloned().ok_or_else(|| format!("{} Events, none about dev; {}", events.len(), webhook.log_tail()))
    })
    .await;
    assert!(event.note.unwrap_or_default().starts_with("dev wrote status.loadBalancer.ingress [198.51.100.7]"));
}

/// A forged review with a 1 MiB username and a 512 KiB group, and one with a 1 MiB uid too
/// (refused at the wire): every Event the guard writes is at most 4 KiB, and every finding's log
/// line at most 8 KiB.
#[tokio::test]
async fn huge_caller_strings_make_small_events() {
    let t = TestEnv::new("audit-huge").await;
    let (webhook, uid) = guarded(&t, &[]).await;
    let mut body: Value = serde_json::from_slice(&forged(&t.ns, "web", &uid, &"u".repeat(1 << 20))).unwrap();
    body["request"]["userInfo"]["groups"] = json!(["g".repeat(1 << 19)]);
    let status = post(&webhook, &serde_json::to_vec(&body).unwrap()).await;
    assert!(status.contains("200"), "{status}");
    // A 1 MiB request uid is no API server's (it sends a UUID): refused at the wire, never echoed.
    body["request"]["uid"] = json!("i".repeat(1 << 20));
    let status = post(&webhook, &serde_json::to_vec(&body).unwrap()).await;
    assert!(status.contains("400"), "{status}");
    // And one through the API server, so there is an Event of a known size beside it.
    let rogue = t.cluster.kubeconfig_for(support::ROGUE_USER, Some(support::cluster::STATUS_WRITERS));
    let patch = r#"{"status":{"loadBalancer":{"ingress":[{"ip":"198.51.100.8"}]}}}"#;
    let out = t.cluster.kubectl(
        &rogue,
        &["patch", "ingress", "web", "-n", &t.ns, "--subresource=status", "--type=merge", "-p", patch],
    );
    assert!(out.success, "{}", out.stderr);
    // Events are published in order: once the real write's exists, the forged one's would too.
    eventually("the real write's Event", Duration::from_secs(30), || async {
        let events = events_about(&t.admin, &t.ns, "web").await;
        let real =
            events.iter().any(|e| e.related.as_ref().and_then(|r| r.name.as_deref()) == Some(support::ROGUE_USER));
        if real { Ok(()) } else { Err(format!("{} Events; {}", events.len(), webhook.log_tail())) }
    })
    .await;
    let events = events_about(&t.admin, &t.ns, "web").await;
    for event in &events {
        let size = serde_json::to_vec(event).unwrap().len();
        assert!(size <= 4096, "an Event of {size} bytes: {:?}", event.note);
    }
    let log = webhook.log();
    let findings: Vec<&str> = log.lines().filter(|l| l.contains("rogue status write")).collect();
    assert!(!findings.is_empty());
    for line in findings {
        assert!(line.len() <= 8192, "a log line of {} bytes", line.len());
    }
}

/// An Ingress with a name of 253 characters (the most a name may have): a rogue write to it
/// gets an Event the API server stores, regarding it, named within 253 too; nothing failed.
/// (kube's recorder named it `<name>.<hex nanoseconds>`, which the API server refused.)
#[tokio::test]
async fn an_ingress_with_a_253_character_name_gets_its_event() {
    let t = TestEnv::new("audit-longname").await;
    let (webhook, _) = guarded(&t, &[]).await;
    let name = format!("{}.{}", "a".repeat(126), "b".repeat(126));
    assert_eq!(name.len(), 253);
    // No rules: a host may not have 126-character labels, a name may.
    let ingress: k8s_openapi::api::networking::v1::Ingress = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"ingressClassName": "nginx", "defaultBackend": {"service": {"name": "backend", "port": {"number": 80}}}}
    }))
    .unwrap();
    let created = t.ingresses.create(&Default::default(), &ingress).await.expect("create the long-named Ingress");
    let uid = created.metadata.uid.expect("uid");
    let rogue = t.cluster.kubeconfig_for(support::ROGUE_USER, Some(support::cluster::STATUS_WRITERS));
    let patch = r#"{"status":{"loadBalancer":{"ingress":[{"ip":"198.51.100.9"}]}}}"#;
    let out = t.cluster.kubectl(
        &rogue,
        &["patch", "ingress", &name, "-n", &t.ns, "--subresource=status", "--type=merge", "-p", patch],
    );
    assert!(out.success, "{}", out.stderr);
    let event = eventually("an Event about the long-named Ingress", Duration::from_secs(30), || async {
        let events = events_about(&t.admin, &t.ns, &name).await;
        events.into_iter().next().ok_or_else(|| format!("no Event yet; {}", webhook.log_tail()))
    })
    .await;
    let regarding = event.regarding.as_ref().expect("regarding");
    assert_eq!(regarding.uid.as_deref(), Some(uid.as_str()));
    assert_eq!(regarding.kind.as_deref(), Some("Ingress"));
    let event_name = event.metadata.name.as_deref().unwrap_or_default();
    assert!(event_name.len() <= 253, "{event_name}");
    assert!(event_name.starts_with(&name[..200]), "{event_name}");
    assert_eq!(event.related.as_ref().and_then(|r| r.name.as_deref()), Some(support::ROGUE_USER));
    let published = "ingress_status_guard_kubernetes_events_total{result=\"published\"}";
    let failed = "ingress_status_guard_kubernetes_events_total{result=\"failed\"}";
    // Counted just after the API server answered the create.
    eventually("the Event counted as published", Duration::from_secs(10), || async {
        match webhook.metric(published) {
            n if n >= 1.0 => Ok(()),
            n => Err(format!("published {n}: {}", webhook.metrics())),
        }
    })
    .await;
    assert_eq!(webhook.metric(failed), 0.0, "{}", webhook.metrics());
    assert!(!webhook.log().contains("cannot write Kubernetes Event"), "{}", webhook.log_tail());
}
