//! An API server outage (issue 12): the webhook keeps answering from its Service cache and stays
//! ready (the cache keeps the last known state, as documented), and its watch recovers when the
//! API server returns: a Service change made afterwards is what the next write gets. Its own
//! test binary, so stopping the API server disturbs no other test.

use crate::support;

use std::{sync::Arc, time::Duration};

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::{Class, FailurePolicy, TestEnv, addresses, create_ingress, eventually, write_status};

const FIXTURE: &str = include_str!("../fixtures/ingress-status-update.apiserver-1.24.json");

/// Posts the fixture review (a write of 10.7.7.7) straight to the webhook, as the API server
/// would; the canonical addresses in its patch.
async fn ask_directly(webhook: &support::Webhook) -> Vec<String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(webhook.ca_pem().as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    let addr = webhook.url().trim_start_matches("https://").trim_end_matches("/mutate").to_owned();
    let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    let request = hyper::Request::post("/mutate")
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(FIXTURE.as_bytes())))
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(20), sender.send_request(request)).await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    let patch = body["response"]["patch"].as_str().expect("a patch");
    use base64::Engine as _;
    let ops: Value = serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(patch).unwrap()).unwrap();
    ops[0]["value"].as_array().unwrap().iter().map(|a| a["ip"].as_str().unwrap_or_default().to_owned()).collect()
}

#[tokio::test]
async fn webhook_rides_out_an_api_server_outage() {
    let t = TestEnv::private("outage").await;
    let services: Api<Service> = Api::namespaced(t.admin.clone(), &t.ns);
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "edge"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}], "externalIPs": ["203.0.113.10"]},
    }))
    .unwrap();
    services.create(&PostParams::default(), &service).await.unwrap();
    let webhook = t.start_webhook(&[&format!("--publish-service={}/edge", t.ns)]).await;
    t.register(&webhook, FailurePolicy::Fail, Class::None, &["203.0.113.10"]).await;
    create_ingress(&t.ingresses, "web", Class::None).await;

    t.cluster.stop_apiserver();
    // Down: the webhook still answers from its cache, and stays ready.
    assert_eq!(ask_directly(&webhook).await, ["203.0.113.10"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(ask_directly(&webhook).await, ["203.0.113.10"]);
    assert_eq!(webhook.readyz(), Some(200), "the cache keeps its last state: still ready");

    t.cluster.restart_apiserver().await;
    // Back: a change made now reaches the webhook through its recovered watch.
    let patch = json!({"spec": {"externalIPs": ["203.0.113.30"]}});
    services.patch("edge", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    eventually(
        &format!("a rogue write gets the Service's new address (webhook log: {})", webhook.log_path().display()),
        Duration::from_secs(90),
        || async {
            let answer = write_status(&t.rogue, "web", &["198.51.100.1"], false).await.map_err(|e| e.to_string())?;
            let got = addresses(&answer);
            if got == ["203.0.113.30"] { Ok(()) } else { Err(format!("stored {got:?}")) }
        },
    )
    .await;
    assert_eq!(ask_directly(&webhook).await, ["203.0.113.30"]);
    assert_eq!(webhook.readyz(), Some(200));
}
