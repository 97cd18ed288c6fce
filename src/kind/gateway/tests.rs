use serde_json::json;

use super::status::{GatewayAddress, GatewayAddressError, MAX_ADDRESSES, MAX_TEXT, ToIngressError};
use super::*;
use crate::address::Address;

fn entry(kind: &str, value: &str) -> GatewayAddress {
    GatewayAddress { kind: kind.to_owned(), value: value.to_owned() }
}

#[test]
fn entries_are_validated_as_the_crd_validates_them() {
    let ok = [
        ("IPAddress", "192.0.2.1"),
        ("IPAddress", "2001:db8::1"),
        ("Hostname", "gw.example.com"),
        ("Hostname", "*.example.com"),
        ("NamedAddress", "my-address"),
        ("example.com/Custom", "anything at all"),
        ("example.com/a/b~c", "x"),
    ];
    for (kind, value) in ok {
        assert_eq!(entry(kind, value).validate(), Ok(()), "{kind} {value}");
    }
    let long = "a".repeat(254);
    let refused = [
        (entry("IPAddress", "gw.example.com"), GatewayAddressError::Ip("gw.example.com".into())),
        (entry("IPAddress", "010.0.0.1"), GatewayAddressError::Ip("010.0.0.1".into())),
        (entry("Hostname", "Upper.example.com"), GatewayAddressError::Hostname("Upper.example.com".into())),
        (entry("Hostname", "a.*.example.com"), GatewayAddressError::Hostname("a.*.example.com".into())),
        (entry("Hostname", ""), GatewayAddressError::Length(String::new())),
        (entry("NamedAddress", &long), GatewayAddressError::Length(long.clone())),
        (entry("", "x"), GatewayAddressError::Type(String::new())),
        (entry("ipaddress", "x"), GatewayAddressError::Type("ipaddress".into())),
        (entry("Example.com/x", "x"), GatewayAddressError::Type("Example.com/x".into())),
        (entry("example.com/", "x"), GatewayAddressError::Type("example.com/".into())),
        (entry("example.com/a b", "x"), GatewayAddressError::Type("example.com/a b".into())),
    ];
    for (e, want) in refused {
        assert_eq!(e.validate(), Err(want), "{e:?}");
    }
}

#[test]
fn entries_map_to_ingress_entries_by_type() {
    let v6: std::net::IpAddr = "2001:db8::1".parse().unwrap();
    assert_eq!(entry("IPAddress", "2001:DB8::1").to_ingress(), Ok(Address::ip(v6)), "IPs in canonical text form");
    assert_eq!(entry("IPAddress", "192.0.2.1").to_ingress(), Ok(Address::ip([192, 0, 2, 1].into())));
    assert_eq!(entry("Hostname", "gw.example.com").to_ingress(), Ok(Address::hostname("gw.example.com")));
    assert!(matches!(entry("Hostname", "*.example.com").to_ingress(), Err(ToIngressError::Ingress(_))), "wildcard");
    assert_eq!(entry("NamedAddress", "x").to_ingress(), Err(ToIngressError::Type("NamedAddress".into())));
    assert!(matches!(entry("IPAddress", "x").to_ingress(), Err(ToIngressError::Invalid(_))));
    let both = Address { ip: Some("192.0.2.1".into()), hostname: Some("lb.example.com".into()), ports: vec![] };
    assert_eq!(
        GatewayAddress::from_addresses(&[both, Address::hostname("b.example.com")]),
        [entry("IPAddress", "192.0.2.1"), entry("Hostname", "lb.example.com"), entry("Hostname", "b.example.com")]
    );
}

fn gateway(status: serde_json::Value) -> LeanGateway {
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "edge", "namespace": "infra", "uid": "u-1", "resourceVersion": "42", "generation": 3,
                     "annotations": {"big": "x".repeat(10_000)}, "managedFields": [{"manager": "m"}]},
        "spec": {"gatewayClassName": "eg", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
        "status": status,
    }))
    .expect("a Gateway reads")
}

#[test]
fn a_gateway_keeps_identity_class_addresses_and_programmed() {
    let gw = gateway(json!({
        "addresses": [{"type": "IPAddress", "value": "192.0.2.1"}, {"value": "192.0.2.2"}, {"type": "Hostname", "value": "gw.example.com"}],
        "conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "m"},
            {"type": "Programmed", "status": "True", "reason": "Programmed", "message": "m"},
        ],
        "listeners": [{"name": "http", "attachedRoutes": 1, "conditions": []}],
    }));
    assert_eq!(gw.meta.name.as_deref(), Some("edge"));
    assert_eq!(gw.meta.namespace.as_deref(), Some("infra"));
    assert_eq!(gw.meta.uid.as_deref(), Some("u-1"));
    assert_eq!(gw.meta.resource_version.as_deref(), Some("42"));
    assert_eq!(gw.meta.generation, Some(3));
    assert!(gw.meta.annotations.is_none(), "annotations are not kept");
    assert_eq!(gw.class.as_deref(), Some("eg"));
    assert_eq!(
        gw.addresses.kept,
        [entry("IPAddress", "192.0.2.1"), entry("IPAddress", "192.0.2.2"), entry("Hostname", "gw.example.com")],
        "a missing type is the CRD's default, IPAddress"
    );
    assert_eq!(gw.programmed, Programmed::True);
}

#[test]
fn programmed_reads_the_condition_and_says_why_not() {
    let cases = [
        (json!({}), Programmed::Absent, "has no Programmed condition"),
        (json!({"conditions": null}), Programmed::Absent, "has no Programmed condition"),
        (
            json!({"conditions": [{"type": "Programmed", "status": "False", "reason": "AddressNotAssigned"}]}),
            Programmed::Not { status: "False".into(), reason: "AddressNotAssigned".into() },
            "is not Programmed (Programmed: False, reason AddressNotAssigned)",
        ),
        (
            json!({"conditions": [{"type": "Programmed", "status": "Unknown"}]}),
            Programmed::Not { status: "Unknown".into(), reason: String::new() },
            "is not Programmed (Programmed: Unknown)",
        ),
    ];
    for (status, want, text) in cases {
        let gw = gateway(status.clone());
        assert_eq!(gw.programmed, want, "{status}");
        assert_eq!(gw.programmed.to_string(), text);
    }
    let reason = "R".repeat(100_000);
    let gw = gateway(json!({"conditions": [{"type": "Programmed", "status": "False\n", "reason": reason}]}));
    let Programmed::Not { status, reason } = &gw.programmed else { panic!("not programmed") };
    assert!(reason.len() <= 64, "reason cut");
    assert!(gw.programmed.to_string().contains("False\\n"), "control characters escaped: {status:?}");
}

#[test]
fn hostile_statuses_are_bounded() {
    let many: Vec<_> =
        (0..10_000).map(|i| json!({"type": "IPAddress", "value": format!("10.0.{}.{}", i / 256, i % 256)})).collect();
    let gw = gateway(json!({"addresses": many}));
    assert_eq!(gw.addresses.kept.len(), MAX_ADDRESSES);
    assert_eq!(gw.addresses.omitted, 10_000 - MAX_ADDRESSES);
    let huge = "a".repeat(1 << 20);
    let gw = gateway(json!({"addresses": [{"type": huge, "value": huge}]}));
    let kept = &gw.addresses.kept[0];
    assert!(kept.kind.len() <= MAX_TEXT && kept.value.len() <= MAX_TEXT, "strings cut as read");
    assert!(kept.validate().is_err(), "a cut value stays invalid");
    let conditions: Vec<_> =
        (0..10_000).map(|i| json!({"type": format!("C{i}"), "status": "True", "message": "m".repeat(100)})).collect();
    assert_eq!(gateway(json!({"conditions": conditions})).programmed, Programmed::Absent);
    for wrong in [
        json!({"addresses": [["IPAddress", "192.0.2.1"]]}),
        json!({"addresses": {"type": "IPAddress"}}),
        json!({"conditions": [[]]}),
    ] {
        let read: Result<LeanGateway, _> = serde_json::from_value(json!({"metadata": {}, "status": wrong}));
        assert!(read.is_err(), "objects only where the schema has objects: {wrong}");
    }
}

#[test]
fn a_gateway_class_keeps_its_controller_if_valid() {
    let class = |controller: serde_json::Value| -> LeanGatewayClass {
        serde_json::from_value(json!({"metadata": {"name": "eg"}, "spec": {"controllerName": controller, "parametersRef": {"group": "g", "kind": "k", "name": "n"}}})).unwrap()
    };
    assert_eq!(
        class(json!("gateway.envoyproxy.io/gatewayclass-controller")).controller.as_deref(),
        Some("gateway.envoyproxy.io/gatewayclass-controller")
    );
    assert_eq!(class(json!("no-slash")).controller, None);
    assert_eq!(class(json!("x".repeat(1 << 20))).controller, None);
    assert_eq!(class(json!(null)).controller, None);
    assert_eq!(class(json!("eg.example/c")).meta.name.as_deref(), Some("eg"));
}

#[test]
fn the_lean_gateway_keeps_its_status_writers_bounded() {
    let entry = |manager: &str, time: &str, fields: serde_json::Value| json!({"manager": manager, "operation": "Update", "time": time, "fieldsType": "FieldsV1", "fieldsV1": fields});
    let mut managed = vec![
        entry("kubectl-client-side-apply", "2026-01-01T00:00:00Z", json!({"f:spec": {"f:listeners": {}}})),
        entry("envoy-gateway", "2026-01-01T00:00:01Z", json!({"f:status": {"f:addresses": {}, "f:conditions": {}}})),
        entry("rogue", "2026-01-01T00:00:02Z", json!({"f:status": {"f:addresses": {}}})),
    ];
    let gateway = |managed: &Vec<serde_json::Value>| {
        let object = json!({"metadata": {"name": "edge", "namespace": "infra", "managedFields": managed}, "spec": {"gatewayClassName": "eg"}});
        serde_json::from_value::<LeanGateway>(object).unwrap()
    };
    assert_eq!(gateway(&managed).status_managers, ["rogue", "envoy-gateway"], "the latest status writer first");
    managed.extend(
        (0..100).map(|i| entry(&format!("{i}-{}", "w".repeat(1000)), "2026-01-01T00:00:03Z", json!({"f:status": {}}))),
    );
    let kept = gateway(&managed).status_managers;
    assert_eq!(kept.len(), crate::kind::ingress::bounded::MAX_MANAGERS, "as many as an Ingress keeps");
    assert!(kept.iter().all(|m| m.len() <= crate::kind::ingress::bounded::MAX_MANAGER_BYTES), "each cut");
    let class: LeanGatewayClass = serde_json::from_value(
        json!({"metadata": {"name": "eg", "managedFields": managed}, "spec": {"controllerName": "example.com/gw"}}),
    )
    .unwrap();
    assert_eq!(class.controller.as_deref(), Some("example.com/gw"));
}
