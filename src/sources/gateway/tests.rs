use serde_json::json;

use super::*;
use crate::gateway::status::GatewayAddressError;

fn gateway(addresses: serde_json::Value, programmed: Option<&str>) -> LeanGateway {
    let conditions = match programmed {
        Some(status) => {
            json!([{"type": "Accepted", "status": "True"}, {"type": "Programmed", "status": status, "reason": "R"}])
        }
        None => json!([]),
    };
    serde_json::from_value(json!({
        "metadata": {"name": "edge", "namespace": "infra"},
        "status": {"addresses": addresses, "conditions": conditions},
    }))
    .unwrap()
}

fn ok(addresses: &[&str]) -> Result<Vec<Address>, GatewayError> {
    Ok(addresses.iter().map(|a| Address::parse(a).unwrap()).collect())
}

#[test]
fn addresses_map_by_type_sorted_as_for_ingress() {
    let gw = gateway(
        json!([
            {"type": "Hostname", "value": "b.example.com"},
            {"type": "IPAddress", "value": "192.0.2.2"},
            {"value": "192.0.2.1"},
            {"type": "Hostname", "value": "a.example.com"},
            {"type": "IPAddress", "value": "192.0.2.1"},
        ]),
        Some("True"),
    );
    assert_eq!(
        addresses(&gw),
        ok(&["192.0.2.1", "192.0.2.2", "a.example.com", "b.example.com"]),
        "de-duplicated, IPs first"
    );
}

#[test]
fn unresolved_says_which() {
    let not = |status: &str| Programmed::Not { status: status.into(), reason: "R".into() };
    let one = json!([{"type": "IPAddress", "value": "192.0.2.1"}]);
    let cases = [
        (gateway(json!([]), Some("True")), Err(GatewayError::NoAddresses(Programmed::True))),
        (gateway(json!(null), Some("False")), Err(GatewayError::NoAddresses(not("False")))),
        (gateway(one.clone(), Some("False")), Err(GatewayError::NotProgrammed(not("False")))),
        (gateway(one.clone(), Some("Unknown")), Err(GatewayError::NotProgrammed(not("Unknown")))),
        (gateway(one, None), Err(GatewayError::NotProgrammed(Programmed::Absent))),
        (
            gateway(json!([{"type": "NamedAddress", "value": "x"}]), Some("True")),
            Err(GatewayError::Entry { index: 0, error: ToIngressError::Type("NamedAddress".into()) }),
        ),
        (
            gateway(json!([{"value": "192.0.2.1"}, {"type": "IPAddress", "value": "gw"}]), Some("True")),
            Err(GatewayError::Entry { index: 1, error: ToIngressError::Invalid(GatewayAddressError::Ip("gw".into())) }),
        ),
    ];
    for (gw, want) in cases {
        assert_eq!(addresses(&gw), want, "{:?}", gw.addresses);
    }
    let texts = [
        (
            GatewayError::NoAddresses(not("False")),
            "has no addresses in status.addresses yet (it is not Programmed (Programmed: False, reason R))",
        ),
        (
            GatewayError::NotProgrammed(Programmed::Absent),
            "has no Programmed condition, so its addresses are not published",
        ),
        (GatewayError::TooMany(17), "has 17 entries in status.addresses, more than the 16 the CRD allows"),
    ];
    for (e, text) in texts {
        assert_eq!(e.to_string(), text);
    }
}

#[test]
fn more_than_the_crd_allows_is_unresolved() {
    let many: Vec<_> = (0..17).map(|i| json!({"type": "IPAddress", "value": format!("192.0.2.{i}")})).collect();
    assert_eq!(addresses(&gateway(json!(many), Some("True"))), Err(GatewayError::TooMany(17)));
    let sixteen: Vec<_> = (0..16).map(|i| json!({"type": "IPAddress", "value": format!("192.0.2.{i}")})).collect();
    assert_eq!(addresses(&gateway(json!(sixteen), Some("True"))).map(|a| a.len()), Ok(16));
}
