//! The moves of the dashboard test's scenario, each a real act on the guard or the test API
//! server: a publish Service, stale statuses, requests straight to `/mutate` (a forged review,
//! a malformed one, an oversized one), and a fight with the reconciler.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{Class, SENTINEL, SENTINEL_2, Webhook, addresses, create_ingress, eventually, write_status};

/// The AdmissionReview an API server 1.24 sent for an Ingress status update.
const FIXTURE: &str = include_str!("../../fixtures/ingress-status-update.apiserver-1.24.json");

/// A LoadBalancer Service whose status publishes `ip`.
pub(crate) async fn lb_service(api: &Api<Service>, name: &str, ip: &str) {
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}
    }))
    .expect("Service object");
    api.create(&PostParams::default(), &service).await.unwrap_or_else(|e| panic!("create Service {name}: {e}"));
    let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("write the status of Service {name}: {e}"));
}

/// Creates Ingress `name` of `class` and writes `status` to it as the rogue identity (before any
/// webhook is registered, or where none is: stored as written).
pub(crate) async fn stale_ingress(admin: &Api<Ingress>, rogue: &Api<Ingress>, name: &str, class: &str, status: &str) {
    create_ingress(admin, name, Class::Field(class)).await;
    let written = write_status(rogue, name, &[status], false).await.expect("rogue write");
    assert_eq!(addresses(&written), [status], "no webhook for {name}: stored as written");
}

/// A review of a status write of `10.66.66.66` to Ingress `namespace/name` of `class`, by user
/// `forger`, as anyone who reaches the webhook's port can send it.
pub(crate) fn forged(namespace: &str, name: &str, class: &str, n: usize) -> Vec<u8> {
    let mut review: Value = serde_json::from_str(FIXTURE).expect("fixture");
    let request = &mut review["request"];
    request["uid"] = json!(format!("forged-{name}-{n}"));
    request["namespace"] = json!(namespace);
    request["name"] = json!(name);
    request["userInfo"] = json!({"username": "forger", "groups": ["system:authenticated"]});
    for object in ["object", "oldObject"] {
        request[object]["metadata"]["namespace"] = json!(namespace);
        request[object]["metadata"]["name"] = json!(name);
        request[object]["spec"]["ingressClassName"] = json!(class);
    }
    request["object"]["status"] = json!({"loadBalancer": {"ingress": [{"ip": "10.66.66.66"}]}});
    serde_json::to_vec(&review).expect("review JSON")
}

/// Posts `body` to the webhook's `/mutate` over TLS (HTTP/1.1) and returns the status code. A
/// body the webhook refuses from its declared length may be cut off mid-send: the answer is
/// still read.
pub(crate) async fn post(webhook: &Webhook, body: &[u8]) -> u16 {
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
    let _ = tls.write_all(body).await;
    let mut response = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut response)).await;
    let text = String::from_utf8_lossy(&response);
    text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// Fights the reconciler over Ingress `name` until the guard has counted `fights` for policy
/// `edge`: whenever the reconciler has put `canonical` back, the rogue identity writes another
/// address (where no webhook is registered, so only the reconciler answers).
pub(crate) async fn fight(webhook: &Webhook, rogue: &Api<Ingress>, name: &str, canonical: &str, fights: f64) {
    let metric = "ingress_status_guard_reconcile_fights_total{policy=\"edge\"}";
    let mut flip = false;
    eventually(
        &format!("{fights} fights counted over {name} (webhook log: {})", webhook.log_path().display()),
        Duration::from_secs(90),
        || {
            flip = !flip;
            async move {
                let counted = webhook.metric(metric);
                if counted >= fights {
                    return Ok(());
                }
                let stored = addresses(&rogue.get(name).await.map_err(|e| e.to_string())?);
                if stored == [canonical] {
                    let other = if flip { SENTINEL } else { SENTINEL_2 };
                    write_status(rogue, name, &[other], false).await.map_err(|e| e.to_string())?;
                }
                Err(format!("{counted} fights, stored {stored:?}"))
            }
        },
    )
    .await;
}
