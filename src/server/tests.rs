use super::*;

/// The log lines written while `f` runs on this thread (the server's tests and its parts').
pub(crate) fn logged(f: impl FnOnce()) -> String {
    #[derive(Clone, Default)]
    struct Lines(Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || writer.clone()).finish();
    tracing::subscriber::with_default(subscriber, f);
    String::from_utf8(lines.0.lock().unwrap().clone()).unwrap()
}

#[test]
fn a_decision_after_its_answer_reports_timed_out_never_rewritten() {
    let policies = crate::PolicySpec { publish_status_address: Some("192.0.2.10".into()), ..Default::default() }
        .into_policies()
        .unwrap();
    let state = AppState::new(policies.clone(), crate::SourceCache::new(&policies));
    let mut review: serde_json::Value = serde_json::from_slice(include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/ingress-status-update.apiserver-1.24.json"
    )))
    .unwrap();
    review["request"]["userInfo"]["username"] = "rogue".into();
    review["request"]["object"]["status"] = serde_json::json!({"loadBalancer": {"ingress": [{"ip": "10.7.7.7"}]}});
    let body = Bytes::from(serde_json::to_vec(&review).unwrap());

    // In time: the rogue write is rewritten, and says so.
    let mut answer = None;
    let log = logged(|| answer = Some(super::review(&state, &body, &Claim::default())));
    assert_eq!(answer.take().unwrap().unwrap().1, "patched");
    assert!(log.contains("rogue status write") && log.contains("action=\"patched\""), "{log}");

    // Late: the answer went out without it, so the write went through as written.
    let log = logged(|| answer = Some(super::review(&state, &body, &Claim::late())));
    assert_eq!(answer.unwrap().unwrap(), (Vec::new(), TIMED_OUT));
    assert!(log.contains("action=\"timed_out\"") && log.contains("allowed unchanged"), "{log}");
    assert!(!log.contains("rewritten") && !log.contains("rogue status write"), "{log}");
    let metrics = state.metrics.encode();
    assert!(metrics.contains("writer=\"rogue\",action=\"timed_out\"} 1"), "{metrics}");
    assert!(metrics.contains("writer=\"rogue\",action=\"patched\"} 1"), "only the one in time: {metrics}");
}

#[test]
fn undecided_reviews_are_allowed_with_a_warning() {
    let fixture = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/ingress-status-update.apiserver-1.24.json"
    ));
    let answer: serde_json::Value = serde_json::from_slice(&undecided(fixture, 2).unwrap()).unwrap();
    assert_eq!(
        answer,
        serde_json::json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {
                "uid": "0f3cb218-7947-4a5f-839c-6e300a5ae86a",
                "allowed": true,
                "warnings": ["ingress-status-guard: not decided within 2 s; status left as written"],
            },
        })
    );
    let (status, _) = undecided(b"{\"not\": \"a review\"}", 2).unwrap_err();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
}

#[test]
fn a_late_gateway_decision_names_the_gateway() {
    let text = "policies: [{name: gw, gatewayClasses: [eg], publishStatusAddress: 192.0.2.10}]";
    let policies = crate::parse_file("p.yaml", text).unwrap();
    let state = AppState::new(policies.clone(), crate::SourceCache::new(&policies));
    let gateway = |class: &str| {
        serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "edge", "namespace": "infra", "uid": "7d0c5a0e-2b59-4c49-a2c6-0d7e1c1f5c1a", "generation": 1},
            "spec": {"gatewayClassName": class, "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
            "status": {"addresses": [{"type": "IPAddress", "value": "10.7.7.7"}]},
        })
    };
    let gvk = serde_json::json!({"group": "gateway.networking.k8s.io", "version": "v1", "kind": "Gateway"});
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "0a1b2c3d-0000-4000-8000-000000000001",
            "kind": gvk, "requestKind": gvk,
            "resource": {"group": "gateway.networking.k8s.io", "version": "v1", "resource": "gateways"},
            "subResource": "status",
            "name": "edge", "namespace": "infra", "operation": "UPDATE",
            "userInfo": {"username": "rogue"},
            "object": gateway("eg"), "oldObject": gateway("eg"), "dryRun": false,
        },
    });
    let body = Bytes::from(serde_json::to_vec(&review).unwrap());
    let mut answer = None;
    let log = logged(|| answer = Some(super::review(&state, &body, &Claim::late())));
    assert_eq!(answer.unwrap().unwrap(), (Vec::new(), TIMED_OUT));
    assert!(log.contains("allowed unchanged") && log.contains("would_have=\"patched\""), "{log}");
    assert!(log.contains("gateway_namespace=infra") && log.contains("gateway_name=edge"), "{log}");
}

/// A gateway status review of `infra/edge`, class `eg`, writing 10.7.7.7.
fn gateway_review() -> Bytes {
    let gateway = serde_json::json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "edge", "namespace": "infra", "uid": "7d0c5a0e-2b59-4c49-a2c6-0d7e1c1f5c1a", "generation": 1},
        "spec": {"gatewayClassName": "eg", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
        "status": {"addresses": [{"type": "IPAddress", "value": "10.7.7.7"}]},
    });
    let gvk = serde_json::json!({"group": "gateway.networking.k8s.io", "version": "v1", "kind": "Gateway"});
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "0a1b2c3d-0000-4000-8000-000000000001",
            "kind": gvk, "requestKind": gvk,
            "resource": {"group": "gateway.networking.k8s.io", "version": "v1", "resource": "gateways"},
            "subResource": "status",
            "name": "edge", "namespace": "infra", "operation": "UPDATE",
            "userInfo": {"username": "rogue"},
            "object": gateway, "oldObject": gateway, "dryRun": false,
        },
    });
    Bytes::from(serde_json::to_vec(&review).unwrap())
}

#[test]
fn two_gateway_policies_matching_one_gateway_at_run_time_are_warned_about() {
    struct Labelled;
    impl Sources for Labelled {
        fn service(
            &self,
            svc: &crate::policy::ServiceRef,
        ) -> Result<Vec<crate::address::Address>, crate::sources::Unresolved> {
            Err(crate::sources::Unresolved::Missing(svc.clone()))
        }
        fn namespace_labels(&self, _: &str) -> Option<std::collections::BTreeMap<String, String>> {
            Some([("team".to_owned(), "a".to_owned()), ("env".to_owned(), "prod".to_owned())].into())
        }
    }
    let text = "policies: [\
        {name: a, publishStatusAddress: 192.0.2.10, gatewayClasses: [eg], namespaceSelector: team=a},\
        {name: b, publishStatusAddress: 192.0.2.10, gatewayClasses: [eg], namespaceSelector: env=prod}]";
    let policies = crate::parse_file("p.yaml", text).unwrap();
    let state = AppState::new(policies, Arc::new(Labelled));
    let log = logged(|| drop(super::review(&state, &gateway_review(), &Claim::default())));
    assert!(log.contains("two policies match this Gateway"), "{log}");
    assert!(log.contains("gateway_namespace=infra") && log.contains("first=a") && log.contains("second=b"), "{log}");
}
