//! A trusted-writer policy's admission objects, for every kind alike: they match the kind's
//! status writes by an untrusted identity, and put the stored status field back (`enforce`) or
//! compare it with the written one (`audit`, `deny`). Written from the field's path and the
//! kind's [`Admitted::rebuilt`], so a new kind needs nothing here.

use serde_json::{Value, json};

use super::{Admitted, Governed, RenderError, Shape, cel};
use crate::{address::Address, policy::Policy, policy::TrustedWriters};

/// The kind's part of a trusted-writer policy's objects: its own resources and class
/// conditions, the writer condition, and the CEL that restores or compares its status field.
pub(super) fn shape<K: Admitted>(
    policy: &Policy,
    writers: &TrustedWriters,
    governed: &Governed,
) -> Result<Shape, RenderError> {
    // Any one address gives the kind's match rules, which name resources and classes only.
    let any = [Address { ip: Some("192.0.2.1".to_owned()), ..Address::default() }];
    let kind = K::admission_shape(policy, &any, governed)?;
    let mut conditions = match kind.match_conditions {
        Value::Array(conditions) => conditions,
        _ => Vec::new(),
    };
    conditions.push(json!({"name": "untrusted-writer", "expression": untrusted(writers)}));
    let field = K::KIND.field();
    let path = Path(field.split('.').collect());
    let Some(rebuilt) = K::rebuilt(&path.at("oldObject", path.0.len())) else {
        return Err(RenderError::Trusted { policy: policy.name.clone(), kind: K::KIND });
    };
    Ok(Shape {
        match_constraints: kind.match_constraints,
        match_conditions: Value::Array(conditions),
        patch: path.restore(&rebuilt),
        // Who wrote: the comparison below reads both objects directly.
        written: "request.userInfo.username",
        same_set: path.unchanged(),
        message: format!(
            "ingress-status-guard policy {:?}: only its trusted writers may change {field}, and this writer is not one",
            policy.name
        ),
        metadata_unchanged: kind.metadata_unchanged,
    })
}

/// True when the writer is not one of `writers`: the match condition.
pub(super) fn untrusted(writers: &TrustedWriters) -> String {
    format!("!(request.userInfo.username in {})", cel::string_list(writers.iter()))
}

/// A status field's path, by member names: `["status", "loadBalancer", "ingress"]`.
struct Path<'a>(Vec<&'a str>);

impl Path<'_> {
    /// `root.a.b`, the first `depth` members.
    fn at(&self, root: &str, depth: usize) -> String {
        std::iter::once(root).chain(self.0[..depth].iter().copied()).collect::<Vec<_>>().join(".")
    }

    /// True when `root` has the first `depth` members (true for none).
    fn has(&self, root: &str, depth: usize) -> String {
        if depth == 0 {
            return "true".to_owned();
        }
        (1..=depth).map(|d| format!("has({})", self.at(root, d))).collect::<Vec<_>>().join(" && ")
    }

    /// The JSON pointer of the first `depth` members.
    fn pointer(&self, depth: usize) -> String {
        self.0[..depth].iter().map(|m| format!("/{m}")).collect()
    }

    /// The value to add at the first `depth` members so that the field is `oldObject`'s: the
    /// list `rebuilt`, or the typed objects that hold it (typed: checked against the schema).
    fn value(&self, depth: usize, rebuilt: &str) -> String {
        if depth == self.0.len() {
            return rebuilt.to_owned();
        }
        let typed = self.at("Object", depth);
        format!("{typed}{{{}: {}}}", self.0[depth], self.value(depth + 1, rebuilt))
    }

    /// The JSONPatch that puts the stored field back: `add` at the deepest member the written
    /// object has (`add` replaces a member that exists); `remove` when the stored object has
    /// no such field and the written one has; nothing when neither has.
    fn restore(&self, rebuilt: &str) -> String {
        let n = self.0.len();
        let add = |depth: usize| {
            let (path, value) = (cel::string(&self.pointer(depth)), self.value(depth, rebuilt));
            format!("[JSONPatch{{op: \"add\", path: {path}, value: {value}}}]")
        };
        let mut put = add(1);
        for depth in 2..=n {
            put = format!("{} ? {} : {put}", self.has("object", depth - 1), add(depth));
        }
        let remove = format!("[JSONPatch{{op: \"remove\", path: {}}}]", cel::string(&self.pointer(n)));
        format!("{} ? ({put}) : ({} ? {remove} : [])", self.has("oldObject", n), self.has("object", n))
    }

    /// True when the written field is the stored one: both absent, or equal (in order).
    fn unchanged(&self) -> String {
        let n = self.0.len();
        let (written, stored) = (self.has("object", n), self.has("oldObject", n));
        format!(
            "({written}) == ({stored}) && (!({written}) || {} == {})",
            self.at("object", n),
            self.at("oldObject", n)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission_policy::{ApiVersion, tests::render};
    use crate::kind::{gateway::Gateways, ingress::Ingresses};

    fn policy(file: &str) -> Policy {
        crate::policy::parse_file("f", file).unwrap().iter().next().cloned().unwrap()
    }

    #[test]
    fn the_ingress_restore_adds_at_the_deepest_member_the_write_has() {
        let path = Path(vec!["status", "loadBalancer", "ingress"]);
        assert_eq!(
            path.restore("L"),
            "has(oldObject.status) && has(oldObject.status.loadBalancer) && has(oldObject.status.loadBalancer.ingress) ? \
             (has(object.status) && has(object.status.loadBalancer) ? \
             [JSONPatch{op: \"add\", path: \"/status/loadBalancer/ingress\", value: L}] : \
             has(object.status) ? \
             [JSONPatch{op: \"add\", path: \"/status/loadBalancer\", value: Object.status.loadBalancer{ingress: L}}] : \
             [JSONPatch{op: \"add\", path: \"/status\", value: Object.status{loadBalancer: Object.status.loadBalancer{ingress: L}}}]) : \
             (has(object.status) && has(object.status.loadBalancer) && has(object.status.loadBalancer.ingress) ? \
             [JSONPatch{op: \"remove\", path: \"/status/loadBalancer/ingress\"}] : [])"
        );
        assert_eq!(
            Path(vec!["status", "addresses"]).unchanged(),
            "(has(object.status) && has(object.status.addresses)) == (has(oldObject.status) && has(oldObject.status.addresses)) \
             && (!(has(object.status) && has(object.status.addresses)) || object.status.addresses == oldObject.status.addresses)"
        );
    }

    #[test]
    fn enforce_matches_untrusted_writers_of_the_kinds_classes_and_restores() {
        let p = policy(
            "policies:\n  - name: edge\n    ingressClasses: [nginx]\n    trustedWriters: [system:serviceaccount:traefik:traefik, \"a\\\"b\"]\n",
        );
        let governed = Governed::Classes { names: vec!["nginx".to_owned()], without_class: false };
        let out = render::<Ingresses>(&p, &[], &governed, ApiVersion::V1).unwrap();
        assert_eq!(out[0]["kind"], "MutatingAdmissionPolicy");
        assert_eq!(out[0]["spec"]["matchConstraints"]["resourceRules"][0]["resources"], json!(["ingresses/status"]));
        let conditions = out[0]["spec"]["matchConditions"].as_array().unwrap();
        assert_eq!(conditions[0]["name"], "governed-class");
        assert_eq!(
            conditions[1],
            json!({"name": "untrusted-writer", "expression": "!(request.userInfo.username in [\"a\\\"b\", \"system:serviceaccount:traefik:traefik\"])"})
        );
        let expression = out[0]["spec"]["mutations"][0]["jsonPatch"]["expression"].as_str().unwrap();
        let rebuilt = <Ingresses as Admitted>::rebuilt("oldObject.status.loadBalancer.ingress").unwrap();
        assert_eq!(expression, Path(vec!["status", "loadBalancer", "ingress"]).restore(&rebuilt));
    }

    #[test]
    fn deny_compares_the_field_with_the_stored_one_and_names_the_policy() {
        let p = policy(
            "policies:\n  - name: eg\n    kind: Gateway\n    gatewayClasses: [eg]\n    mode: deny\n    trustedWriters: [system:serviceaccount:gw:controller]\n",
        );
        let governed = Governed::Classes { names: vec!["eg".to_owned()], without_class: false };
        let out = render::<Gateways>(&p, &[], &governed, ApiVersion::V1).unwrap();
        assert_eq!(out[0]["kind"], "ValidatingAdmissionPolicy");
        assert_eq!(out[1]["spec"]["validationActions"], json!(["Deny"]));
        let validation = &out[0]["spec"]["validations"][0];
        assert_eq!(validation["expression"], Path(vec!["status", "addresses"]).unchanged());
        assert_eq!(
            validation["message"],
            "ingress-status-guard policy \"eg\": only its trusted writers may change status.addresses, and this writer is not one"
        );
        assert_eq!(out[0]["spec"]["matchConditions"].as_array().unwrap().len(), 2);
    }
}
