use super::*;

#[test]
fn counts_by_result() {
    let m = Metrics::new();
    m.observe("patched", Duration::from_micros(30));
    m.observe("patched", Duration::from_micros(30));
    m.observe(ERROR, Duration::from_micros(5));
    m.set_cache_ages(&[("ns/svc".to_owned(), Duration::from_secs(3))]);
    let text = m.encode();
    assert!(text.contains("ingress_status_guard_admission_requests_total{result=\"patched\"} 2"), "{text}");
    assert!(text.contains("ingress_status_guard_admission_requests_total{result=\"error\"} 1"), "{text}");
    assert!(text.contains("ingress_status_guard_admission_duration_seconds_bucket{le=\"0.00005\"} 3"), "{text}");
    assert!(text.contains("ingress_status_guard_source_cache_age_seconds{service=\"ns/svc\"} 3.0"), "{text}");
    let build = format!("ingress_status_guard_build_info{{version=\"{VERSION}\",revision=\"{REVISION}\"}} 1");
    assert!(text.contains(&build), "{text}");
    assert!(!text.contains("tls_cert_expiry"), "only with a certificate reloader: {text}");
}

#[test]
fn cache_ages_of_services_no_longer_named_go() {
    let m = Metrics::new();
    let age = |service: &str, secs| (service.to_owned(), Duration::from_secs(secs));
    m.set_cache_ages(&[age("ns/a", 1), age("ns/b", 2)]);
    m.set_cache_ages(&[age("ns/b", 5), age("ns/c", 1)]);
    let text = m.encode();
    assert!(!text.contains("service=\"ns/a\""), "a reload dropped ns/a: {text}");
    assert!(text.contains("ingress_status_guard_source_cache_age_seconds{service=\"ns/b\"} 5.0"), "{text}");
    assert!(text.contains("ingress_status_guard_source_cache_age_seconds{service=\"ns/c\"} 1.0"), "{text}");
}

#[test]
fn exports_the_certificate_expiry_it_is_given() {
    let mut m = Metrics::new();
    let expiry = Gauge::default();
    m.register_tls_cert_expiry(expiry.clone());
    expiry.set(1_900_000_000);
    let text = m.encode();
    assert!(text.contains("ingress_status_guard_tls_cert_expiry_timestamp_seconds 1900000000"), "{text}");
}

/// A rewritten write by `username` in policy `p`.
fn rogue(m: &Metrics, username: &str) {
    m.rogue_write("p", username, "patched");
}

#[test]
fn label_values_are_escaped() {
    let m = Metrics::new();
    rogue(&m, "evil\"} 1\ningress_status_guard_admission_requests_total{result=\"patched\"} 1e9\n#\\");
    let text = m.encode();
    // Every result exists at 0 from the start; the forged sample must not appear.
    assert!(
        !text.lines().any(|l| l.contains("1e9") && !l.starts_with("ingress_status_guard_rogue_writes_total")),
        "{text}"
    );
    let line = text.lines().find(|l| l.starts_with("ingress_status_guard_rogue_writes_total")).unwrap();
    assert_eq!(
        line,
        r#"ingress_status_guard_rogue_writes_total{policy="p",writer="evil\"} 1\ningress_status_guard_admission_requests_total{result=\"patched\"} 1e9\n#\\",action="patched"} 1"#
    );
}

#[test]
fn writers_beyond_the_cap_take_the_least_recent_label() {
    let m = Metrics::with_writer_labels(3, WriterLabels::User);
    for i in 0..10 {
        rogue(&m, &format!("user-{i}"));
    }
    rogue(&m, "user-9");
    rogue(&m, &"x".repeat(1 << 20));
    let text = m.encode();
    let series: Vec<&str> =
        text.lines().filter(|l| l.starts_with("ingress_status_guard_rogue_writes_total{")).collect();
    assert_eq!(series.len(), 3, "{text}");
    assert!(text.contains(r#"writer="user-9",action="patched"} 2"#), "{text}");
    assert!(text.contains(r#"writer="user-8",action="patched"} 1"#), "{text}");
    assert!(!text.contains(r#"writer="user-7""#), "the least recently seen went: {text}");
    assert!(text.contains("ingress_status_guard_writer_labels_evicted_total 8"), "{text}");
    assert!(text.len() < 16 * 1024, "a 1 MiB username is not a 1 MiB label: {} bytes", text.len());
    let none = Metrics::with_writer_labels(0, WriterLabels::User);
    rogue(&none, "dev");
    assert!(none.encode().contains(r#"writer="other",action="patched"} 1"#));
}

#[test]
fn usernames_can_stay_out_of_metrics() {
    let m = Metrics::with_writer_labels(10, WriterLabels::ServiceAccount);
    rogue(&m, "alice@example.com");
    rogue(&m, "bob");
    rogue(&m, "system:serviceaccount:ingress-nginx:controller");
    let text = m.encode();
    assert!(!text.contains("alice") && !text.contains("bob"), "{text}");
    assert!(text.contains(r#"writer="user",action="patched"} 2"#), "{text}");
    assert!(text.contains(r#"writer="system:serviceaccount:ingress-nginx:controller""#), "{text}");
    let hashed = Metrics::with_writer_labels(10, WriterLabels::Hashed);
    rogue(&hashed, "alice@example.com");
    let text = hashed.encode();
    assert!(!text.contains("alice") && text.contains(r#"writer="h:"#), "{text}");
}

#[test]
fn long_labels_are_cut() {
    let m = Metrics::with_writer_labels(3, WriterLabels::User);
    rogue(&m, &"y".repeat(1 << 20));
    let text = m.encode();
    let line = text.lines().find(|l| l.starts_with("ingress_status_guard_rogue_writes_total{")).unwrap_or_default();
    assert!(line.len() < 1024, "{} bytes", line.len());
    assert!(text.contains(&format!("writer=\"{}…\"", "y".repeat(MAX_LABEL_BYTES - 3))), "{text}");
}

/// Drift is counted per policy and kind; the older Ingress-only gauge never counts a Gateway.
#[test]
fn drift_by_kind_and_the_ingress_only_gauge() {
    let m = Metrics::new();
    m.set_drift(crate::kind::Kind::Ingress, "nginx", 3);
    m.set_drift(crate::kind::Kind::Gateway, "eg", 2);
    let text = m.encode();
    assert!(text.contains("ingress_status_guard_drift_objects{policy=\"nginx\",kind=\"ingress\"} 3"), "{text}");
    assert!(text.contains("ingress_status_guard_drift_objects{policy=\"eg\",kind=\"gateway\"} 2"), "{text}");
    assert!(text.contains("ingress_status_guard_drift_ingresses{policy=\"nginx\"} 3"), "{text}");
    assert!(!text.contains("drift_ingresses{policy=\"eg\"}"), "a Gateway policy is not in drift_ingresses: {text}");
    m.remove_drift(crate::kind::Kind::Gateway, "eg");
    m.remove_drift(crate::kind::Kind::Ingress, "nginx");
    let text = m.encode();
    assert!(!text.contains("policy=\"eg\"") && !text.contains("policy=\"nginx\""), "{text}");
}

/// Every watch has its series from the start; the source cache's handle counts into the same
/// family; the Ingress watch also into the older unlabelled counter.
#[test]
fn watch_errors_by_watch() {
    let m = Metrics::new();
    let text = m.encode();
    for watch in objects::WATCHES {
        let zero = format!("ingress_status_guard_watch_errors_total{{watch=\"{watch}\"}} 0");
        assert!(text.contains(&zero), "{text}");
    }
    let shared = m.watch_errors();
    shared.inc(objects::PUBLISH_GATEWAY);
    shared.inc(objects::GATEWAY_CLASSES);
    m.watch_error(objects::GATEWAYS);
    m.watch_error(objects::INGRESSES);
    m.watch_error(objects::INGRESSES);
    let text = m.encode();
    for (watch, n) in [("publish-gateway", 1), ("gatewayclasses", 1), ("gateways", 1), ("ingresses", 2)] {
        let line = format!("ingress_status_guard_watch_errors_total{{watch=\"{watch}\"}} {n}");
        assert!(text.contains(&line), "{line}: {text}");
    }
    assert!(text.contains("ingress_status_guard_ingress_watch_errors_total 2"), "{text}");
}
