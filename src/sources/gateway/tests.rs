use serde_json::json;

use super::*;
use crate::kind::gateway::status::GatewayAddressError;

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

/// A Gateway of `generation` whose Programmed condition (`status`) was written for `observed`.
fn generations(generation: Option<i64>, status: &str, observed: Option<i64>) -> LeanGateway {
    let mut condition = json!({"type": "Programmed", "status": status, "reason": "R"});
    if let Some(observed) = observed {
        condition["observedGeneration"] = json!(observed);
    }
    let mut metadata = json!({"name": "edge", "namespace": "infra"});
    if let Some(generation) = generation {
        metadata["generation"] = json!(generation);
    }
    serde_json::from_value(json!({
        "metadata": metadata,
        "status": {"addresses": [{"type": "IPAddress", "value": "192.0.2.1"}], "conditions": [condition]},
    }))
    .unwrap()
}

/// A Programmed condition written for an older generation than the Gateway's is not
/// Programmed: the implementation has not yet programmed the current spec, and the addresses
/// may be the old spec's. Unresolved, with both generations named.
#[test]
fn a_stale_programmed_condition_is_not_programmed() {
    let stale = Programmed::Stale { observed: 1, generation: 2 };
    let cases = [
        ("stale", generations(Some(2), "True", Some(1)), Err(GatewayError::NotProgrammed(stale.clone()))),
        ("current", generations(Some(2), "True", Some(2)), ok(&["192.0.2.1"])),
        // Newer than the Gateway's generation: not stale (it can only be the current spec's).
        ("ahead", generations(Some(2), "True", Some(3)), ok(&["192.0.2.1"])),
        // An implementation that sets no observedGeneration: taken as written.
        ("no observedGeneration", generations(Some(2), "True", None), ok(&["192.0.2.1"])),
        ("no generation", generations(None, "True", Some(1)), ok(&["192.0.2.1"])),
        (
            "stale and False: not Programmed anyway",
            generations(Some(2), "False", Some(1)),
            Err(GatewayError::NotProgrammed(Programmed::Not { status: "False".into(), reason: "R".into() })),
        ),
    ];
    for (name, gw, want) in cases {
        assert_eq!(addresses(&gw), want, "case {name}");
    }
    assert_eq!(
        GatewayError::NotProgrammed(stale).to_string(),
        "is Programmed only for generation 1, not its current generation 2 (a stale condition), so its addresses are not published"
    );
}
