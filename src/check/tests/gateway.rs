//! `check` over Ingresses and Gateways: the KIND column, each kind's entries in its own shape,
//! the summary per kind, and Gateway policies without the Gateway API.

use serde_json::json;

use super::{lb_service, list, policy, snapshot, svc_ref, write};
use crate::{
    check::{Explained as _, explain::gateway::StoredGateway, report::Report},
    kind::Kind,
    kind::gateway::{GatewayShape, GatewayWrite, Gateways, LeanGateway, status::GatewayAddress},
    policy::{Mode, Policies, Policy, Source},
    sources::snapshot::Fetched,
};

/// `nginx` Ingresses follow Service edge/lb; Gateways of class `eg` a fixed list.
fn policies() -> Policies {
    let gateways = policy("gw", &["eg"], Source::Static(list("192.0.2.40,gw.example.test")), Mode::Enforce);
    Policies::new(vec![
        policy("lb", &["nginx"], Source::Service(svc_ref()), Mode::Enforce),
        Policy { kind: Kind::Gateway, ..gateways },
    ])
    .unwrap()
}

fn gateway(ns: &str, name: &str, class: &str, addresses: &[GatewayAddress]) -> GatewayWrite {
    GatewayWrite {
        namespace: ns.into(),
        name: name.into(),
        class: Some(class.into()),
        addresses: addresses.to_vec(),
        omitted: 0,
    }
}

fn both() -> Report {
    let sources = snapshot(Fetched::of(Some(&lb_service())));
    let policies = policies();
    let ingresses = [write("shop", "web", Some("nginx"), "10.0.0.1"), write("shop", "other", Some("x"), "")];
    let mut report = Report::build(&ingresses, &policies, &sources);
    let canonical = [GatewayAddress::hostname("gw.example.test"), GatewayAddress::ip("192.0.2.40")];
    let gateways = [
        gateway("infra", "public", "eg", &canonical),
        gateway("infra", "edge", "eg", &[GatewayAddress::ip("10.0.0.9")]),
        gateway("infra", "istio", "istio", &[]),
    ];
    report.add::<crate::kind::gateway::Gateways>(Some(&gateways), &policies, &sources);
    report
}

#[test]
fn the_table_has_a_kind_column_and_a_summary_line_per_kind() {
    let report = both();
    assert_eq!(
        report.table(),
        "\
KIND     NAME          POLICY  SOURCE                               STORED                      CANONICAL                   STATE
ingress  shop/web      lb      service edge/lb                      10.0.0.1                    203.0.113.10,203.0.113.20   DRIFT
gateway  infra/edge    gw      static [192.0.2.40,gw.example.test]  10.0.0.9                    192.0.2.40,gw.example.test  DRIFT
gateway  infra/public  gw      static [192.0.2.40,gw.example.test]  gw.example.test,192.0.2.40  192.0.2.40,gw.example.test  OK
governed Ingresses: 1 (0 OK, 1 DRIFT, 0 UNRESOLVED); not governed: 1
governed Gateways: 2 (1 OK, 1 DRIFT, 0 UNRESOLVED); not governed: 1
"
    );
    assert_eq!(report.exit_code(), 1);
}

#[test]
fn json_rows_carry_their_kind_and_entries_in_their_kinds_shape() {
    let json: serde_json::Value = serde_json::from_str(&both().json()).unwrap();
    assert_eq!(json["ingresses"][0]["kind"], "ingress");
    assert_eq!(json["ingresses"][0]["stored"], json!([{"ip": "10.0.0.1"}]));
    assert_eq!(
        json["ingresses"][1],
        json!({"kind": "gateway", "namespace": "infra", "name": "edge", "class": "eg", "policy": "gw",
               "mode": "enforce", "source": "static [192.0.2.40,gw.example.test]",
               "stored": [{"type": "IPAddress", "value": "10.0.0.9"}],
               "canonical": [{"type": "IPAddress", "value": "192.0.2.40"}, {"type": "Hostname", "value": "gw.example.test"}],
               "state": "DRIFT"})
    );
    // `summary` is over both kinds; `byKind` has each.
    assert_eq!(json["summary"], json!({"governed": 3, "ok": 1, "drift": 2, "unresolved": 0, "notGoverned": 2}));
    assert_eq!(
        json["byKind"]["ingress"],
        json!({"governed": 1, "ok": 0, "drift": 1, "unresolved": 0, "notGoverned": 1})
    );
    assert_eq!(
        json["byKind"]["gateway"],
        json!({"governed": 2, "ok": 1, "drift": 1, "unresolved": 0, "notGoverned": 1})
    );
    assert!(json.get("gatewayPolicies").is_none(), "{json}");
}

#[test]
fn gateway_policies_without_the_gateway_api_are_said_inactive() {
    let sources = snapshot(Fetched::of(Some(&lb_service())));
    let ingresses = [write("shop", "web", Some("nginx"), "203.0.113.10,203.0.113.20")];
    let mut report = Report::build(&ingresses, &policies(), &sources);
    report.add::<crate::kind::gateway::Gateways>(None, &policies(), &sources);
    assert_eq!(
        report.table(),
        "\
KIND     NAME      POLICY  SOURCE           STORED                     CANONICAL                  STATE
ingress  shop/web  lb      service edge/lb  203.0.113.10,203.0.113.20  203.0.113.10,203.0.113.20  OK
governed Ingresses: 1 (1 OK, 0 DRIFT, 0 UNRESOLVED); not governed: 0
governed Gateways: 0 (0 OK, 0 DRIFT, 0 UNRESOLVED); not governed: 0
Gateway policies: inactive: the API server serves no Gateways (the Gateway API CRDs are not installed)
"
    );
    assert_eq!(report.exit_code(), 0, "nothing is off canonical; the guard says the same in /readyz");
    let json: serde_json::Value = serde_json::from_str(&report.json()).unwrap();
    assert_eq!(
        json["gatewayPolicies"],
        "inactive: the API server serves no Gateways (the Gateway API CRDs are not installed)"
    );

    // Without Gateway policies (`--kind gateway` on an Ingress-only setup), nothing to say.
    let ingress_only =
        Policies::new(vec![policy("lb", &["nginx"], Source::Service(svc_ref()), Mode::Enforce)]).unwrap();
    let mut report = Report::default();
    report.add::<crate::kind::gateway::Gateways>(None, &ingress_only, &sources);
    assert_eq!(report.table(), "governed Gateways: 0 (0 OK, 0 DRIFT, 0 UNRESOLVED); not governed: 0\n");
}

#[test]
fn ingress_only_reports_keep_their_table_and_add_only_json_fields() {
    let sources = snapshot(Fetched::of(Some(&lb_service())));
    let policies = Policies::new(vec![policy("lb", &["nginx"], Source::Service(svc_ref()), Mode::Enforce)]).unwrap();
    let report = Report::build(&[write("shop", "web", Some("nginx"), "10.0.0.1")], &policies, &sources);
    assert!(report.table().starts_with("INGRESS   POLICY  SOURCE "), "{}", report.table());
    let json: serde_json::Value = serde_json::from_str(&report.json()).unwrap();
    assert_eq!(json["byKind"], json!({"ingress": json["summary"].clone()}));
    assert_eq!(json["ingresses"][0]["kind"], "ingress");
}

/// Regression: a Gateway's explanation has the `Rule:` line and, with the admission
/// policies found in the cluster, the `Admission:` line, as an Ingress's has.
#[test]
fn a_gateway_explanation_says_its_rule_and_its_admission_policy() {
    use crate::check::explain;
    let policies = policies();
    let sources = snapshot(Fetched::of(Some(&lb_service())));
    let write = gateway("infra", "edge", "eg", &[GatewayAddress::ip("10.0.0.9")]);
    let stored = StoredGateway { write: write.clone(), shape: GatewayShape::Addresses };
    let mut explanation = crate::check::explain::explain::<Gateways>(&stored, None, &policies, &sources);
    let governing = crate::decision::decide::<Gateways>(&write, &policies, &sources).policy().map(|p| {
        (p, crate::admission_policy::object_name_in(crate::admission_policy::DEFAULT_LEASE, &policies, p).unwrap())
    });
    let owner = crate::admission_policy::desired::Owner::new("isg", crate::admission_policy::DEFAULT_LEASE);
    explain::add_admission(&mut explanation, governing, &policies, &owner, &sources, &Default::default());
    let text = explanation.text();
    assert!(text.contains("\nRule:      governed because its class is in gatewayClasses\n"), "{text}");
    let admission = "\nAdmission: no admission policy ingress-status-guard-gateway-0 in the cluster: the webhook enforces (--admission=webhook)\nWebhook:";
    assert!(text.contains(admission), "{text}");
    assert_eq!(explanation.exit_code, 1, "drift");
}

/// `explain` of a stored Gateway shows the patch the webhook sends for a write of it: the same
/// operation at the same path, for each shape of `status`, where guessing from an empty list
/// would say `add /status/addresses` both for a Gateway without `status` (the webhook adds
/// `/status`) and for one with `addresses: []` (the webhook replaces the list).
#[test]
fn a_gateway_explanation_shows_the_patch_the_webhook_sends() {
    let policies = policies();
    let sources = snapshot(Fetched::of(Some(&lb_service())));
    let object = |status: Option<serde_json::Value>| {
        let mut object = json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "edge", "namespace": "infra", "uid": "7d0c5a0e-2b59-4c49-a2c6-0d7e1c1f5c1a", "generation": 1},
            "spec": {"gatewayClassName": "eg"},
        });
        if let Some(status) = status {
            object["status"] = status;
        }
        object
    };
    let patch_of = |response: &serde_json::Value| -> String {
        use base64::Engine as _;
        let b64 = response["response"]["patch"].as_str().expect("a patch");
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b64).unwrap()).unwrap()
    };
    let webhook = |object: &serde_json::Value| {
        let body = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "0a1b2c3d-0000-4000-8000-000000000001",
                "kind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": "Gateway"},
                "resource": {"group": "gateway.networking.k8s.io", "version": "v1", "resource": "gateways"},
                "subResource": "status", "name": "edge", "namespace": "infra", "operation": "UPDATE",
                "userInfo": {"username": "controller"}, "object": object, "oldObject": object,
            }
        });
        let bytes = serde_json::to_vec(&body).unwrap();
        let review = crate::review::read(&bytes).expect("a Gateway review reads");
        let verdict = review.decide(&policies, &sources);
        patch_of(&serde_json::from_slice(&crate::review::render(&review, &verdict)).unwrap())
    };
    let canonical = r#"[{"type":"IPAddress","value":"192.0.2.40"},{"type":"Hostname","value":"gw.example.test"}]"#;
    let cases = [
        ("no status", None, format!(r#"[{{"op":"add","path":"/status","value":{{"addresses":{canonical}}}}}]"#)),
        (
            "status: null",
            Some(json!(null)),
            format!(r#"[{{"op":"add","path":"/status","value":{{"addresses":{canonical}}}}}]"#),
        ),
        (
            "status without addresses",
            Some(json!({"conditions": []})),
            format!(r#"[{{"op":"add","path":"/status/addresses","value":{canonical}}}]"#),
        ),
        (
            "addresses: []",
            Some(json!({"addresses": []})),
            format!(r#"[{{"op":"replace","path":"/status/addresses","value":{canonical}}}]"#),
        ),
        (
            "an address",
            Some(json!({"addresses": [{"type": "IPAddress", "value": "10.0.0.9"}]})),
            format!(r#"[{{"op":"replace","path":"/status/addresses","value":{canonical}}}]"#),
        ),
    ];
    for (case, status, want) in cases {
        let object = object(status);
        let stored = Gateways::stored(serde_json::from_value::<LeanGateway>(object.clone()).unwrap());
        let text = crate::check::explain::explain::<Gateways>(&stored, None, &policies, &sources).text();
        let shown = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("Webhook:   a write of the stored value: rewrite it (patched) with JSON patch ")
            })
            .unwrap_or_else(|| panic!("{case}: {text}"));
        let shown = shown.split("; warning").next().unwrap();
        assert_eq!(shown, want, "{case}: {text}");
        assert_eq!(webhook(&object), want, "{case}: the webhook sends what explain shows");
    }
}
