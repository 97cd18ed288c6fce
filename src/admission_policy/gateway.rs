//! A Gateway policy's part of its admission objects in CEL: `status.addresses` set to, or
//! compared with, the canonical `{type, value}` list, on Gateways of the governed classes.

use serde_json::json;

use crate::kind::gateway::status::{GatewayAddress, MAX_ADDRESSES};
use crate::{
    address::Address,
    admission_policy::{Admitted, Governed, RenderError, Shape, cel},
    policy::Policy,
};

impl Admitted for crate::kind::gateway::Gateways {
    /// `governed` holds GatewayClass names (CEL sees only the Gateway, so controllers become
    /// class names, rendered again when the GatewayClasses change); none matches nothing.
    fn admission_shape(policy: &Policy, canonical: &[Address], governed: &Governed) -> Result<Shape, RenderError> {
        let entries = GatewayAddress::from_addresses(canonical);
        if entries.is_empty() {
            return Err(RenderError::Empty(policy.name.clone()));
        }
        if let Err(too_many) = <crate::kind::gateway::Gateways as crate::kind::Governed>::entries(canonical) {
            return Err(RenderError::TooMany { policy: policy.name.clone(), too_many });
        }
        let list = cel::string_list(governed.names().iter().map(String::as_str));
        // From `oldObject`, as the webhook reads it (`review::read::gateway::stored_class`): the
        // CRD status strategy keeps everything but `status` from the stored object.
        let match_conditions = json!([{
            "name": "governed-class",
            "expression": format!("has(oldObject.spec.gatewayClassName) && oldObject.spec.gatewayClassName in {list}"),
        }]);
        // `Equivalent` (the default, written out): a write through v1beta1 is matched as v1.
        let mut match_constraints = super::status_updates(crate::kind::gateway::GROUP, "gateways/status");
        match_constraints["matchPolicy"] = json!("Equivalent");
        let shown: Vec<String> = entries.iter().map(ToString::to_string).collect();
        Ok(Shape {
            match_constraints,
            match_conditions,
            patch: patch(&entries),
            written: WRITTEN_KEYS,
            same_set: same_set(&entries),
            // A custom resource's status write stores none of the metadata it carries.
            metadata_unchanged: None,
            message: format!(
                "ingress-status-guard policy {:?} requires status.addresses [{}]",
                policy.name,
                shown.join(",")
            ),
        })
    }

    /// Each stored entry as a `{type, value}` map of strings, as the canonical literal is
    /// written (an absent `type` is the CRD's default).
    fn rebuilt(list: &str) -> Option<String> {
        Some(format!(
            "{list}.map(a, {{\"type\": has(a.type) ? string(a.type) : \"IPAddress\", \"value\": string(a.value)}})"
        ))
    }
}

/// The JSONPatch that sets `status.addresses` (an atomic list, so a whole replacement, which
/// an ApplyConfiguration could not express); `/status` is added when the object has none. The
/// entries are untyped maps: `type` names a CEL function, so a typed literal could not use it.
fn patch(entries: &[GatewayAddress]) -> String {
    let items: Vec<String> = entries
        .iter()
        .map(|a| format!("{{\"type\": {}, \"value\": {}}}", cel::string(&a.kind), cel::string(&a.value)))
        .collect();
    let value = format!("[{}]", items.join(", "));
    format!(
        "has(object.status) ? [JSONPatch{{op: \"add\", path: \"/status/addresses\", value: {value}}}] : [JSONPatch{{op: \"add\", path: \"/status\", value: {{\"addresses\": {value}}}}}]"
    )
}

/// The written entries as `type|value` keys; an absent `type` is the CRD's default
/// `IPAddress`. A canonical type never holds `|`, so equal keys are equal entries.
const WRITTEN_KEYS: &str = "(has(object.status) && has(object.status.addresses) ? object.status.addresses : []).map(a, (has(a.type) ? a.type : \"IPAddress\") + \"|\" + (has(a.value) ? a.value : \"\"))";

/// Whether the written entries are the canonical ones, ignoring order and duplicates.
fn same_set(entries: &[GatewayAddress]) -> String {
    let keys: Vec<String> = entries.iter().map(|a| format!("{}|{}", a.kind, a.value)).collect();
    let list = cel::string_list(keys.iter().map(String::as_str));
    format!(
        "size(variables.written) <= {MAX_ADDRESSES} && variables.written.all(k, k in {list}) && {list}.all(k, k in variables.written)"
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::Value;

    use super::*;
    use crate::{admission_policy::ApiVersion, kind::gateway::GROUP};

    fn render(
        p: &Policy,
        canonical: &[Address],
        classes: &[String],
        api: ApiVersion,
    ) -> Result<Vec<Value>, RenderError> {
        let governed = Governed::Classes { names: classes.to_vec(), without_class: false };
        crate::admission_policy::tests::render::<crate::kind::gateway::Gateways>(p, canonical, &governed, api)
    }

    fn class_names(scope: &crate::policy::ClassScope, classes: &BTreeMap<String, Option<String>>) -> Vec<String> {
        let class = |(name, controller): (&String, &Option<String>)| {
            (name.clone(), crate::kind::Class { controller: controller.clone(), default: false })
        };
        Governed::resolve(scope, &classes.iter().map(class).collect()).names().to_vec()
    }

    fn policy(file: &str) -> Policy {
        crate::policy::parse_file("f", file).unwrap().of(crate::kind::Kind::Gateway).next().cloned().unwrap()
    }

    fn addr(ip: Option<&str>, hostname: Option<&str>) -> Address {
        Address { ip: ip.map(str::to_owned), hostname: hostname.map(str::to_owned), ports: Vec::new() }
    }

    #[test]
    fn controllers_become_class_names() {
        let p = policy(
            "policies:\n  - name: eg\n    gatewayClasses: [listed]\n    gatewayControllers: [example.test/gw]\n    publishStatusAddress: 192.0.2.1\n",
        );
        let classes = BTreeMap::from([
            ("eg".to_owned(), Some("example.test/gw".to_owned())),
            ("other".to_owned(), Some("example.test/other".to_owned())),
            ("listed".to_owned(), None),
            ("bare".to_owned(), None),
        ]);
        assert_eq!(class_names(&p.scope, &classes), ["eg", "listed"]);
    }

    #[test]
    fn enforce_replaces_status_addresses_with_a_literal() {
        let p = policy(
            "policies:\n  - name: eg\n    gatewayClasses: [eg]\n    publishStatusAddress: 192.0.2.1,lb.example.test\n",
        );
        let canonical = [addr(Some("192.0.2.1"), None), addr(None, Some("lb.example.test"))];
        let out = render(&p, &canonical, &["eg".to_owned()], ApiVersion::V1).unwrap();
        assert_eq!(out[0]["kind"], "MutatingAdmissionPolicy");
        assert_eq!(out[0]["metadata"]["name"], "ingress-status-guard-gateway-0");
        assert_eq!(out[1]["spec"]["policyName"], "ingress-status-guard-gateway-0");
        let rule = &out[0]["spec"]["matchConstraints"]["resourceRules"][0];
        assert_eq!(rule["apiGroups"], json!([GROUP]));
        assert_eq!(rule["resources"], json!(["gateways/status"]));
        assert_eq!(
            out[0]["spec"]["matchConditions"][0]["expression"],
            "has(oldObject.spec.gatewayClassName) && oldObject.spec.gatewayClassName in [\"eg\"]"
        );
        let expression = out[0]["spec"]["mutations"][0]["jsonPatch"]["expression"].as_str().unwrap();
        assert!(
            expression.contains("path: \"/status/addresses\", value: [{\"type\": \"IPAddress\", \"value\": \"192.0.2.1\"}, {\"type\": \"Hostname\", \"value\": \"lb.example.test\"}]"),
            "{expression}"
        );
    }

    #[test]
    fn deny_compares_type_and_value_and_says_what_is_required() {
        let p = policy(
            "policies:\n  - name: eg\n    gatewayClasses: [eg]\n    mode: deny\n    publishStatusAddress: 192.0.2.1\n",
        );
        let out = render(&p, &[addr(Some("192.0.2.1"), None)], &["eg".to_owned()], ApiVersion::V1).unwrap();
        assert_eq!(out[0]["kind"], "ValidatingAdmissionPolicy");
        assert_eq!(out[1]["spec"]["validationActions"], json!(["Deny"]));
        let validation = &out[0]["spec"]["validations"][0];
        assert_eq!(validation["message"], "ingress-status-guard policy \"eg\" requires status.addresses [192.0.2.1]");
        assert!(validation["expression"].as_str().unwrap().contains("[\"IPAddress|192.0.2.1\"]"), "{validation}");
    }

    #[test]
    fn too_many_or_no_entries_are_refused() {
        let p = policy("policies:\n  - name: eg\n    gatewayClasses: [eg]\n    publishStatusAddress: 192.0.2.1\n");
        let many: Vec<Address> = (0..17).map(|i| addr(Some(&format!("192.0.2.{i}")), None)).collect();
        assert_eq!(
            render(&p, &many, &[], ApiVersion::V1),
            Err(RenderError::TooMany {
                policy: "eg".into(),
                too_many: crate::kind::TooMany { kind: crate::kind::Kind::Gateway, entries: 17, max: 16 }
            })
        );
        assert_eq!(render(&p, &[], &[], ApiVersion::V1), Err(RenderError::Empty("eg".into())));
    }
}
