//! `check` over both kinds against the real API server and CRDs: a drifted Ingress and a
//! drifted Gateway in one report with their KIND, `--kind` to keep one, and a bad `--kind`.

use super::run_cli;
use super::support::gateway::{self, create_gateway, create_gateway_class, gateway_status, write_gateway_status};
use super::support::{Class, TestEnv, create_ingress, write_status};

/// A drifted Ingress and a drifted Gateway: `check` lists both with their kind and exits 1;
/// `--kind gateway` and `--kind ingress` keep one each; `--kind bogus` is a usage error (2)
/// naming the flag.
#[tokio::test]
async fn check_lists_ingresses_and_gateways_and_filters_by_kind() {
    let t = TestEnv::new("gw-check").await;
    t.cluster.install_gateway_crds().await;
    let ns = &t.ns;
    create_gateway_class(&t.admin, ns, "example.com/gateway-controller").await;
    let gateways = gateway::gateways(&t.admin, ns);
    create_gateway(&gateways, "edge", ns).await;
    write_gateway_status(&gateways, "edge", gateway_status(&["198.51.100.7"], true, 1), false)
        .await
        .expect("a drifted Gateway status");
    create_ingress(&t.ingresses, "web", Class::Field(ns)).await;
    write_status(&t.ingresses, "web", &["198.51.100.8"], false).await.expect("a drifted Ingress status");
    let dir = t.cluster.scratch_dir(&format!("check-{ns}"));
    let file = dir.join("config.yaml");
    std::fs::write(
        &file,
        format!(
            "policies:\n  - {{name: ing, ingressClasses: [{ns}], publishStatusAddress: 192.0.2.80}}\n  - {{name: gw, kind: Gateway, gatewayClasses: [{ns}], publishStatusAddress: '192.0.2.81, gw.example.test'}}\n"
        ),
    )
    .expect("write the policy file");
    let kubeconfig = format!("--kubeconfig={}", t.cluster.admin_kubeconfig().display());
    let config = format!("--config={}", file.display());
    let check = |extra: &[&str]| {
        let mut args = vec!["check", kubeconfig.as_str(), config.as_str(), "-n", ns.as_str()];
        args.extend_from_slice(extra);
        run_cli(&args)
    };

    let (code, text) = check(&[]);
    assert_eq!(code, Some(1), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let columns = |line: &str| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(columns(lines[0]), ["KIND", "NAME", "POLICY", "SOURCE", "STORED", "CANONICAL", "STATE"], "{text}");
    let ingress = columns(lines[1]);
    let ingress_row = [format!("{ns}/web"), "ing".into(), "static".into(), "[192.0.2.80]".into()];
    assert_eq!((ingress[0].as_str(), &ingress[1..5]), ("ingress", &ingress_row[..]), "{text}");
    assert_eq!(ingress[5..], ["198.51.100.8", "192.0.2.80", "DRIFT"], "{text}");
    let gw = columns(lines[2]);
    assert_eq!((gw[0].as_str(), gw[1].as_str(), gw[2].as_str()), ("gateway", &*format!("{ns}/edge"), "gw"), "{text}");
    assert_eq!(gw[gw.len() - 3..], ["198.51.100.7", "192.0.2.81,gw.example.test", "DRIFT"], "{text}");
    assert!(text.contains("governed Ingresses: 1 (0 OK, 1 DRIFT, 0 UNRESOLVED); not governed: 0"), "{text}");
    assert!(text.contains("governed Gateways: 1 (0 OK, 1 DRIFT, 0 UNRESOLVED); not governed: 0"), "{text}");

    let (code, text) = check(&["--kind", "gateway", "-o", "json"]);
    assert_eq!(code, Some(1), "{text}");
    let json: serde_json::Value = serde_json::from_str(&text).expect("check -o json prints one JSON document");
    let rows = json["ingresses"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{text}");
    assert_eq!((rows[0]["kind"].as_str(), rows[0]["name"].as_str()), (Some("gateway"), Some("edge")), "{text}");
    assert_eq!(rows[0]["stored"], serde_json::json!([{"type": "IPAddress", "value": "198.51.100.7"}]), "{text}");
    assert!(json["byKind"].get("ingress").is_none(), "{text}");

    let (code, text) = check(&["--kind", "ingress"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.starts_with("INGRESS "), "no Gateway read, no KIND column:\n{text}");
    assert!(text.contains(&format!("{ns}/web")) && !text.contains(&format!("{ns}/edge")), "{text}");
    assert!(!text.contains("Gateways"), "{text}");

    // The Gateway set right: only the Ingress drifts.
    write_gateway_status(&gateways, "edge", gateway_status(&["gw.example.test", "192.0.2.81"], true, 1), false)
        .await
        .expect("a canonical Gateway status");
    let (code, text) = check(&["--kind=gateway"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("governed Gateways: 1 (1 OK, 0 DRIFT, 0 UNRESOLVED)"), "{text}");

    let (code, text) = check(&["--kind", "bogus"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("--kind") && text.contains("bogus"), "the error names the flag and the value:\n{text}");
}
