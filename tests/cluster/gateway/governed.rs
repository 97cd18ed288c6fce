//! Gateways governed at admission (`gatewayClasses`, `gatewayControllers`): rogue
//! `gateways/status` writes against the real API server and CRDs, and `explain gateway/...`.

use serde_json::json;

use super::support;
use super::support::gateway::{
    self, create_gateway, create_gateway_class, gateway_status, stored_gateway_addresses, write_gateway_status,
};
use super::support::{SENTINEL, SENTINEL_2, TestEnv, eventually};
use super::{SETTLE, guard_args, run_cli, start_guard};

/// Gateways governed at admission: a rogue status write rewritten with conditions and
/// listeners kept exactly as written, a dry run, audit and deny modes, selection by the
/// GatewayClass's controller with another class left alone, and 17 canonical entries unresolved.
#[tokio::test]
async fn rogue_gateway_status_writes_are_rewritten_audited_or_denied() {
    let t = TestEnv::new("gw-govern").await;
    t.cluster.install_gateway_crds().await;
    let ns = &t.ns;
    let seventeen: Vec<String> = (1..=17).map(|i| format!("192.0.2.{i}")).collect();
    let controller = format!("example.com/ctl-{ns}");
    let policies = format!(
        "policies:
  - {{name: enforce, gatewayClasses: [{ns}], publishStatusAddress: '192.0.2.60, gw.example.test'}}
  - {{name: audit, gatewayClasses: [{ns}-audit], publishStatusAddress: 192.0.2.61, mode: audit}}
  - {{name: deny, gatewayClasses: [{ns}-deny], publishStatusAddress: 192.0.2.62, mode: deny}}
  - {{name: by-controller, gatewayControllers: [{controller}], publishStatusAddress: 192.0.2.63}}
  - {{name: many, gatewayClasses: [{ns}-many], publishStatusAddress: '{}'}}
",
        seventeen.join(",")
    );
    for (class, ctl) in [
        (ns.clone(), "example.com/gateway-controller".to_owned()),
        (format!("{ns}-audit"), "example.com/gateway-controller".to_owned()),
        (format!("{ns}-deny"), "example.com/gateway-controller".to_owned()),
        (format!("{ns}-ctl"), controller.clone()),
        (format!("{ns}-other"), format!("example.com/other-{ns}")),
        (format!("{ns}-many"), "example.com/gateway-controller".to_owned()),
    ] {
        create_gateway_class(&t.admin, &class, &ctl).await;
    }
    let admin = gateway::gateways(&t.admin, ns);
    for (name, class) in [
        ("edge", ns.clone()),
        ("audited", format!("{ns}-audit")),
        ("denied", format!("{ns}-deny")),
        ("by-ctl", format!("{ns}-ctl")),
        ("other", format!("{ns}-other")),
        ("many", format!("{ns}-many")),
    ] {
        create_gateway(&admin, name, &class).await;
    }
    let mut args = guard_args(&t, &policies);
    args.retain(|a| !a.starts_with("--reconcile"));
    let webhook = start_guard(&t, &args).await;
    gateway::register_gateway_webhook(&t.admin, ns, &webhook.url(), webhook.ca_pem()).await;
    let rogue = gateway::gateways(&t.cluster.rogue().await, ns);

    // Enforce: rewritten once the registration is in effect; everything else as written.
    let written = gateway_status(&[SENTINEL], true, 1);
    let stored = eventually(
        &format!("a rogue write of Gateway {ns}/edge is rewritten (log: {})", webhook.log_path().display()),
        SETTLE,
        || async {
            let stored =
                write_gateway_status(&rogue, "edge", written.clone(), false).await.map_err(|e| e.to_string())?;
            let got = stored_gateway_addresses(&stored);
            if got == ["192.0.2.60", "gw.example.test"] { Ok(stored) } else { Err(format!("stored {got:?}")) }
        },
    )
    .await;
    let read_back = admin.get("edge").await.unwrap();
    for field in ["conditions", "listeners"] {
        assert_eq!(read_back.data["status"][field], written[field], "status.{field} exactly as written");
        assert_eq!(stored.data["status"][field], written[field]);
    }
    assert_eq!(
        read_back.data["status"]["addresses"],
        json!([{"type": "IPAddress", "value": "192.0.2.60"}, {"type": "Hostname", "value": "gw.example.test"}])
    );
    eventually("the rewrite is logged", SETTLE, || async {
        let log = webhook.log();
        let rewrite = log.contains("rogue Gateway status write") && log.contains("\"gateway_name\":\"edge\"");
        if rewrite && log.contains("Gateway policy loaded") { Ok(()) } else { Err("not yet".to_owned()) }
    })
    .await;
    // And an Event on the Gateway, naming the writer: the guard's own watch knows the Gateway.
    let event = eventually("an Event regarding Gateway edge", SETTLE, || async {
        let events = support::events_about(&t.admin, ns, "edge").await;
        let about_gateway = |e: &&k8s_openapi::api::events::v1::Event| {
            e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Gateway")
        };
        events.iter().find(about_gateway).cloned().ok_or_else(|| format!("no Event yet; {}", webhook.log_tail()))
    })
    .await;
    let regarding = event.regarding.clone().unwrap_or_default();
    assert_eq!(regarding.api_version.as_deref(), Some("gateway.networking.k8s.io/v1"));
    assert_eq!(regarding.uid, read_back.metadata.uid, "the real Gateway's uid");
    assert_eq!(event.related.as_ref().and_then(|r| r.name.as_deref()), Some(support::ROGUE_USER), "{event:?}");
    assert_eq!((event.reason.as_deref(), event.action.as_deref()), (Some("RogueStatusWrite"), Some("RewriteStatus")));
    let note = event.note.clone().unwrap_or_default();
    let wrote = format!("{} wrote status.addresses [{SENTINEL}]; policy enforce requires", support::ROGUE_USER);
    assert!(note.starts_with(&wrote) && note.ends_with("[192.0.2.60,gw.example.test]; rewritten"), "{note}");
    // A dry run is answered the same, and stores nothing.
    let dry =
        write_gateway_status(&rogue, "edge", gateway_status(&[SENTINEL_2], false, 1), true).await.expect("dry run");
    assert_eq!(stored_gateway_addresses(&dry), ["192.0.2.60", "gw.example.test"]);
    assert_eq!(
        admin.get("edge").await.unwrap().data["status"]["conditions"],
        written["conditions"],
        "dry run stored nothing"
    );

    // By controller; another controller's class is not governed.
    let by_ctl = write_gateway_status(&rogue, "by-ctl", gateway_status(&[SENTINEL], true, 1), false).await.unwrap();
    assert_eq!(stored_gateway_addresses(&by_ctl), ["192.0.2.63"], "governed through its GatewayClass's controller");
    let other = write_gateway_status(&rogue, "other", gateway_status(&[SENTINEL], true, 1), false).await.unwrap();
    assert_eq!(stored_gateway_addresses(&other), [SENTINEL], "another controller's Gateway is left alone");

    // `explain gateway/NS/NAME` judges the stored status as the webhook would.
    let kubeconfig = format!("--kubeconfig={}", t.cluster.admin_kubeconfig().display());
    let config = guard_args(&t, &policies).remove(0);
    let (code, text) = run_cli(&["explain", &format!("gateway/{ns}/edge"), &kubeconfig, &config]);
    assert_eq!(code, Some(0), "{text}");
    for line in [
        format!("Gateway:   {ns}/edge"),
        "Policy:    \"enforce\" (mode enforce)".to_owned(),
        // Issue 32's drift: the lines an Ingress's explanation has.
        "Rule:      governed because its class is in gatewayClasses".to_owned(),
        "Stored:    192.0.2.60,gw.example.test".to_owned(),
        "State:     OK".to_owned(),
        // Policy "enforce" is the file's first Gateway policy: slot 0, under the default Lease.
        "Admission: no admission policy ingress-status-guard-gateway-0 in the cluster: the webhook enforces (--admission=webhook)".to_owned(),
    ] {
        assert!(text.contains(&line), "{line:?} in:\n{text}");
    }
    let (code, text) = run_cli(&["explain", &format!("gateway/{ns}/other"), &kubeconfig, &config]);
    assert_eq!(code, Some(0), "not governed: {text}");
    assert!(text.contains("Policy:    none: policy \"enforce\" governs gatewayClasses"), "{text}");
    let (code, text) = run_cli(&["explain", &format!("gateway/{ns}/by-ctl"), &kubeconfig, &config]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains(&format!("(GatewayClass controller {controller})")) && text.contains("\"by-controller\""),
        "{text}"
    );
    let rule =
        format!("Rule:      governed because its GatewayClass's controller {controller} is in gatewayControllers");
    assert!(text.contains(&rule), "{rule:?} in:\n{text}");

    // Audit and too many: stored as written, the writer warned (kubectl prints warnings).
    let rogue_kubeconfig = t.cluster.kubeconfig_for(support::ROGUE_USER, Some(support::cluster::STATUS_WRITERS));
    let patch = json!({"status": gateway_status(&[SENTINEL], true, 1)}).to_string();
    let kubectl_patch = |name: &str| {
        t.cluster.kubectl(
            &rogue_kubeconfig,
            &["patch", "gateway", name, "-n", ns, "--subresource=status", "--type=merge", "-p", &patch],
        )
    };
    let audited = kubectl_patch("audited");
    assert!(audited.success, "{}", audited.stderr);
    assert!(
        audited.stderr.contains("Warning: status.addresses differs from [192.0.2.61] (policy audit, audit mode)"),
        "{}",
        audited.stderr
    );
    assert_eq!(stored_gateway_addresses(&admin.get("audited").await.unwrap()), [SENTINEL]);
    let (code, text) = run_cli(&["explain", &format!("gateway/{ns}/audited"), &kubeconfig, &config]);
    assert_eq!(code, Some(1), "drift: {text}");
    assert!(text.contains("State:     DRIFT") && text.contains("Canonical: 192.0.2.61"), "{text}");
    let many = kubectl_patch("many");
    assert!(many.success, "{}", many.stderr);
    assert!(many.stderr.contains("more than the 16 a Gateway"), "the writer is told why: {}", many.stderr);
    assert_eq!(stored_gateway_addresses(&admin.get("many").await.unwrap()), [SENTINEL]);

    // Deny: refused with the canonical value.
    let denied = kubectl_patch("denied");
    assert!(!denied.success, "denied");
    assert!(
        denied
            .stderr
            .contains("ingress-status-guard policy \"deny\" requires status.addresses [192.0.2.62], not [192.0.2.254]"),
        "{}",
        denied.stderr
    );
}

/// With `--reconcile=false` the known-Gateway index has a watch of its own (started once a
/// policy governs Gateways): a rogue write still gets its Event, regarding the real Gateway.
#[tokio::test]
async fn a_gateway_event_without_the_reconciler() {
    let t = TestEnv::new("gw-event").await;
    t.cluster.install_gateway_crds().await;
    let ns = &t.ns;
    create_gateway_class(&t.admin, ns, "example.com/gateway-controller").await;
    let admin = gateway::gateways(&t.admin, ns);
    create_gateway(&admin, "edge", ns).await;
    let policies =
        format!("policies:\n  - {{name: enforce, gatewayClasses: [{ns}], publishStatusAddress: 192.0.2.60}}\n");
    let mut args = guard_args(&t, &policies);
    args.retain(|a| !a.starts_with("--reconcile"));
    args.push("--reconcile=false".to_owned());
    let webhook = start_guard(&t, &args).await;
    gateway::register_gateway_webhook(&t.admin, ns, &webhook.url(), webhook.ca_pem()).await;
    let rogue = gateway::gateways(&t.cluster.rogue().await, ns);
    eventually("a rogue write of Gateway edge is rewritten", SETTLE, || async {
        let stored = write_gateway_status(&rogue, "edge", gateway_status(&[SENTINEL], true, 1), false)
            .await
            .map_err(|e| e.to_string())?;
        let got = stored_gateway_addresses(&stored);
        if got == ["192.0.2.60"] { Ok(()) } else { Err(format!("stored {got:?}")) }
    })
    .await;
    let event = eventually("an Event regarding Gateway edge", SETTLE, || async {
        let events = support::events_about(&t.admin, ns, "edge").await;
        events.into_iter().next().ok_or_else(|| format!("no Event yet; {}", webhook.log_tail()))
    })
    .await;
    let regarding = event.regarding.unwrap_or_default();
    assert_eq!(
        (regarding.kind.as_deref(), regarding.uid),
        (Some("Gateway"), admin.get("edge").await.unwrap().metadata.uid)
    );
    assert_eq!(event.related.and_then(|r| r.name).as_deref(), Some(support::ROGUE_USER));
    let log = webhook.log();
    let synced = log.lines().any(|l| l.contains("known-object index synced") && l.contains("\"kind\":\"Gateway\""));
    assert!(synced, "the Gateway index's own watch: {}", webhook.log_tail());
}
