//! What the leader keeps in the cluster in `--admission=policy`: the rendered objects of every
//! policy whose sources resolve, labelled as this guard's, and the names of the objects left as
//! they are (a source not known yet, or unresolved under `onUnresolved: deny`). Pure: policies,
//! sources (each kind's classes among them) in, the plan out; [`super::keeper`] carries it out.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{ApiVersion, Governed, governed_in_order, object_name_in, render_named};
use crate::{
    address::Address,
    kind::{Kind, with_kind},
    policy::{OnUnresolved, Policies, Policy},
    sources::{Sources, Unresolved, every_source_read},
};

/// Label naming the guard deployment (its leader Lease) that keeps an object: the leader
/// deletes only what carries its own value, so two guards in one cluster leave each other's
/// objects alone.
pub(crate) const OWNER_LABEL: &str = "ingress-status-guard/lease";

/// Field manager of the admission policies' writes, before the owner ([`Owner::field_manager`]):
/// apart from the reconciler's, so the managedFields say which part of which guard wrote what.
pub(crate) const FIELD_MANAGER: &str = "ingress-status-guard-admission-policy";

/// The plan of one pass.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Desired {
    /// Objects to have in the cluster as shown, in apply order (a policy before its binding).
    pub(crate) objects: Vec<Value>,
    /// The canonical value each rendered policy carries, by policy name, whatever its kind:
    /// the reconciler judges every kind by them ([`super::enforced`]).
    pub(crate) values: Vec<(String, Vec<Address>)>,
    /// Names of objects to leave as they are: neither applied nor deleted.
    pub(crate) kept: BTreeSet<String>,
    /// Names of the policies whose objects are kept.
    pub(crate) kept_policies: BTreeSet<String>,
    /// Per policy whose value is not rendered, why, for the log.
    pub(crate) skipped: Vec<(String, String)>,
    /// Each policy's object name, by policy name (a policy that cannot be named has none).
    pub(crate) names: Vec<(String, String)>,
}

/// Who keeps a set of admission objects: a guard, known by its leader Lease. An object of one
/// of its names ([`object_name_in`]) labelled [`OWNER_LABEL`] with another value is another
/// guard's, never written or deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    /// The [`OWNER_LABEL`] value: [`owner`] of the Lease's namespace and name.
    pub(crate) label: String,
    /// The Lease's name, which the object names start with.
    pub(crate) lease: String,
    /// Older hashed labels of a Lease whose `namespace.name` is no label value (FNV-1a, then
    /// Adler-32): read as this owner's, and replaced on the next write.
    pub(crate) legacy: Vec<String>,
}

impl Owner {
    pub(crate) fn new(namespace: &str, lease: &str) -> Self {
        let label = owner(namespace, lease);
        let full = format!("{namespace}.{lease}");
        let legacy = match label == full {
            true => Vec::new(),
            false => vec![format!("h-{:08x}", fnv1a(full.as_bytes())), format!("h-{}", adler32(full.as_bytes()))],
        };
        Owner { label, lease: lease.to_owned(), legacy }
    }

    /// The field manager of this owner's writes (at most 128 characters: the label is 63).
    pub(crate) fn field_manager(&self) -> String {
        format!("{FIELD_MANAGER}/{}", self.label)
    }

    /// Whose an object labelled `label` is, from this owner's side: `None` when it is this
    /// owner's, or carries no owner label (rendered by hand with `render-admission-policy`, or
    /// by a guard before owner labels: adopted); else the other owner's label.
    pub(crate) fn other<'a>(&self, label: Option<&'a str>) -> Option<&'a str> {
        label.filter(|l| *l != self.label && !self.legacy.iter().any(|old| old == l))
    }
}

/// 32-bit FNV-1a ([`Owner::legacy`]).
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(*b)).wrapping_mul(0x0100_0193))
}

/// Adler-32 ([`Owner::legacy`]).
fn adler32(bytes: &[u8]) -> u32 {
    let (a, b) = bytes.iter().fold((1u32, 0u32), |(a, b), &c| {
        let a = (a + u32::from(c)) % 65_521;
        (a, (b + a) % 65_521)
    });
    (b << 16) | a
}

/// The label value for the Lease `namespace/name`: `namespace.name` when that is a valid label
/// value, else `h-` and the first 60 hex digits of its SHA-256 (a Lease name may be 253
/// characters, a label value 63), which no two Leases share by accident or by a chosen name:
/// the chart computes the same (`isg.ownerLabel`, `sha256sum`) to find its objects.
pub(crate) fn owner(namespace: &str, lease: &str) -> String {
    let full = format!("{namespace}.{lease}");
    let valid = full.len() <= 63 && full.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if valid {
        return full;
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, full.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("h-{}", &hex[..60])
}

/// Why `policy`'s value is not known yet: a source of it not read yet (the reconciler's rule,
/// [`every_source_read`]). What is in the cluster then stays, neither swept nor replaced by the
/// other sources' part, until it is read.
fn not_read_yet(policy: &Policy, sources: &dyn Sources) -> Option<String> {
    if every_source_read(policy, sources) {
        return None;
    }
    let first = policy.sources.iter().find_map(|s| sources.source(s).err().filter(Unresolved::not_read_yet));
    Some(first.map_or_else(|| "the sources are not synced yet".to_owned(), |e| e.to_string()))
}

/// The plan for `policies` over `sources`. While a kind's classes are not read yet, none of
/// that kind's policies' objects are rendered or deleted.
pub(crate) fn desired(policies: &Policies, sources: &dyn Sources, api: ApiVersion, owner: &Owner) -> Desired {
    let mut plan = Desired::default();
    // Each kind's policies wait on their own classes only: class rules resolve against every
    // class of the kind, and earlier policies' classes are taken out of later ones.
    for kind in Kind::ALL {
        let governed = sources.classes(kind).map(|classes| governed_in_order(policies, kind, &classes));
        let governed = governed.ok_or_else(|| format!("{} not synced yet", kind.info().classes));
        with_kind!(kind, K => plan.kind::<K>(policies, governed, sources, api, owner));
    }
    plan
}

impl Desired {
    /// Whether the object of kind `kind` named `name` is to stay: rendered as such, or kept
    /// whatever its kind (a policy whose mode changed keeps its old kind until it renders).
    pub(crate) fn keeps(&self, kind: &str, name: &str) -> bool {
        self.kept.contains(name) || self.objects.iter().any(|o| o["kind"] == kind && o["metadata"]["name"] == name)
    }

    /// The plan of the policies of kind `K`: `governed` holds their class rules in file order,
    /// or says why their class facts are not known yet (then their objects are kept).
    fn kind<K: super::Admitted>(
        &mut self,
        policies: &Policies,
        governed: Result<Vec<Governed>, String>,
        sources: &dyn Sources,
        api: ApiVersion,
        owner: &Owner,
    ) {
        for (at, policy) in policies.of(K::KIND).enumerate() {
            let name = match object_name_in(&owner.lease, policies, policy) {
                Ok(name) => name,
                // Nothing is deleted for it either: its old objects, if any, are not this name's.
                Err(e) => {
                    self.skipped.push((policy.name.clone(), e.to_string()));
                    continue;
                }
            };
            self.names.push((policy.name.clone(), name.clone()));
            let governed = match governed.as_ref().map(|all| &all[at]) {
                Ok(governed) => governed,
                Err(why) => {
                    self.keep(policy, name, why.clone());
                    continue;
                }
            };
            if let Some(why) = not_read_yet(policy, sources) {
                self.keep(policy, name, why);
                continue;
            }
            let canonical = match super::value(policy, sources) {
                Ok(canonical) => canonical,
                // Unresolved: as the webhook, `allow` lets writes through unchanged (no mutation),
                // and `deny` holds the line with the last value rendered, the strictest thing a
                // literal can do. (A source not read yet is not unresolved: it was kept above.)
                Err(reason) if policy.on_unresolved == OnUnresolved::Deny => {
                    self.keep(policy, name, reason.to_string());
                    continue;
                }
                Err(reason) => {
                    self.skipped.push((policy.name.clone(), reason.to_string()));
                    continue;
                }
            };
            match render_named::<K>(policy, &canonical, governed, api, &name) {
                Ok(objects) => {
                    self.objects.extend(objects.into_iter().map(|mut o| {
                        o["metadata"]["labels"][OWNER_LABEL] = Value::from(owner.label.as_str());
                        o
                    }));
                    // A trusted-writer policy's objects carry no value for the reconciler to judge by.
                    if policy.trusted_writers().is_none() {
                        self.values.push((policy.name.clone(), canonical.into_owned()));
                    }
                }
                // A value the comparison cannot carry: the last rendered one stays.
                Err(e) => self.keep(policy, name, e.to_string()),
            }
        }
    }

    /// Leaves `policy`'s objects (named `name`) as they are in the cluster, saying why.
    fn keep(&mut self, policy: &Policy, name: String, why: String) {
        self.kept.insert(name);
        self.kept_policies.insert(policy.name.clone());
        self.skipped.push((policy.name.clone(), why));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::{
        address::Address,
        kind::{Class, Classes},
        policy::{PodsRef, ServiceRef, parse_file},
    };

    /// Sources with fixed values, every kind's classes read (none) unless `classes` says.
    struct Fixed(HashMap<String, Result<Vec<Address>, Unresolved>>, [Option<Classes>; crate::kind::Kind::ALL.len()]);

    fn fixed(values: HashMap<String, Result<Vec<Address>, Unresolved>>) -> Fixed {
        Fixed(values, [Some(Classes::new()), Some(Classes::new()), Some(Classes::new())])
    }

    impl Sources for Fixed {
        fn classes(&self, kind: Kind) -> Option<Classes> {
            self.1[kind.index()].clone()
        }
        fn service(&self, svc: &ServiceRef) -> Result<Vec<Address>, Unresolved> {
            self.0.get(&svc.to_string()).cloned().unwrap_or_else(|| Err(Unresolved::NotSynced(svc.clone())))
        }
        fn pods(&self, pods: &PodsRef) -> Result<Vec<Address>, Unresolved> {
            Err(Unresolved::PodsNotSynced(pods.to_string()))
        }
    }

    fn o() -> Owner {
        Owner { label: "o".into(), lease: "ingress-status-guard".into(), legacy: Vec::new() }
    }

    fn ip(s: &str) -> Address {
        Address { ip: Some(s.to_owned()), ..Address::default() }
    }

    #[test]
    fn each_source_state_renders_keeps_or_removes() {
        let file = "policies:\n\
            - {name: ok, ingressClasses: [a], publishService: ns/ok}\n\
            - {name: pending, ingressClasses: [b], publishService: ns/pending}\n\
            - {name: gone-allow, ingressClasses: [c], publishService: ns/gone}\n\
            - {name: gone-deny, ingressClasses: [d], publishService: ns/gone, onUnresolved: deny}\n\
            - {name: audit, ingressClasses: [e], publishStatusAddress: 192.0.2.1, mode: audit}\n";
        let policies = parse_file("t", file).unwrap();
        let svc = |n: &str| ServiceRef { namespace: "ns".into(), name: n.into() };
        let sources = fixed(HashMap::from([
            ("ns/ok".to_owned(), Ok(vec![ip("192.0.2.9")])),
            ("ns/gone".to_owned(), Err(Unresolved::Missing(svc("gone")))),
        ]));
        let plan = desired(
            &policies,
            &sources,
            ApiVersion::V1,
            &Owner { label: "ns.lease".into(), lease: "ingress-status-guard".into(), legacy: Vec::new() },
        );
        let kinds: Vec<(&str, &str)> = plan
            .objects
            .iter()
            .map(|o| (o["kind"].as_str().unwrap(), o["metadata"]["name"].as_str().unwrap()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("MutatingAdmissionPolicy", "ingress-status-guard-ingress-0"),
                ("MutatingAdmissionPolicyBinding", "ingress-status-guard-ingress-0"),
                ("ValidatingAdmissionPolicy", "ingress-status-guard-ingress-4"),
                ("ValidatingAdmissionPolicyBinding", "ingress-status-guard-ingress-4"),
            ]
        );
        assert!(plan.objects.iter().all(|o| o["metadata"]["labels"][OWNER_LABEL] == "ns.lease"));
        let kept: Vec<&str> = plan.kept.iter().map(String::as_str).collect();
        assert_eq!(kept, ["ingress-status-guard-ingress-1", "ingress-status-guard-ingress-3"]);
        assert!(!plan.keeps("MutatingAdmissionPolicy", "ingress-status-guard-ingress-2"), "allow removes the mutation");
        assert!(plan.keeps("MutatingAdmissionPolicy", "ingress-status-guard-ingress-0"));
        assert!(
            !plan.keeps("ValidatingAdmissionPolicy", "ingress-status-guard-ingress-0"),
            "another kind of the same name goes"
        );
        assert!(plan.keeps("ValidatingAdmissionPolicy", "ingress-status-guard-ingress-1"));
        assert_eq!(plan.skipped.len(), 3);
    }

    #[test]
    fn class_rules_wait_for_the_ingress_classes() {
        let file = "policies:\n- {name: ctl, controllerClasses: [example.com/x], publishStatusAddress: 192.0.2.1}\n";
        let policies = parse_file("t", file).unwrap();
        let unread = Fixed(HashMap::new(), [None, Some(Classes::new()), Some(Classes::new())]);
        let plan = desired(&policies, &unread, ApiVersion::V1, &o());
        assert!(plan.objects.is_empty());
        assert!(plan.keeps("MutatingAdmissionPolicy", "ingress-status-guard-ingress-0"));
        let x = Class { controller: Some("example.com/x".into()), default: true };
        let read = Fixed(
            HashMap::new(),
            [Some(Classes::from([("x".to_owned(), x)])), Some(Classes::new()), Some(Classes::new())],
        );
        let plan = desired(&policies, &read, ApiVersion::V1beta1, &o());
        assert_eq!(plan.objects[0]["apiVersion"], "admissionregistration.k8s.io/v1beta1");
        let condition = plan.objects[0]["spec"]["matchConditions"][0]["expression"].as_str().unwrap();
        assert!(condition.contains("[\"x\"]") && condition.ends_with(": true)"), "{condition}");
    }

    /// Regression: after a reload adds a `publishGateway`, the sources as a whole stay
    /// synced while that Gateway's watch has not listed yet. The reconciler leaves Ingresses alone
    /// until then (`reconcile::judge::knows_enough`); the keeper must likewise leave the policy's
    /// objects in the cluster, not sweep them (`onUnresolved: allow`) nor replace their value with
    /// the other sources' part (several sources), until the Gateway is read.
    #[test]
    fn a_publish_gateway_not_read_yet_keeps_the_objects() {
        let file = "policies:\n\
            - {name: ing, ingressClasses: [a], publishGateway: ns/edge}\n\
            - {name: two, ingressClasses: [b], sources: [{publishStatusAddress: 192.0.2.1}, {publishGateway: ns/edge}]}\n\
            - {name: gw, gatewayClasses: [eg], publishGateway: ns/edge}\n";
        let policies = parse_file("t", file).unwrap();
        // `Fixed` answers every Gateway as not in the cache yet (the trait's default).
        let plan = desired(&policies, &fixed(HashMap::new()), ApiVersion::V1, &o());
        assert!(plan.objects.is_empty(), "nothing rendered from a Gateway not read: {:?}", plan.objects);
        for name in
            ["ingress-status-guard-ingress-0", "ingress-status-guard-ingress-1", "ingress-status-guard-gateway-0"]
        {
            assert!(plan.keeps("MutatingAdmissionPolicy", name), "{name} is swept: {plan:?}");
        }
        assert_eq!(plan.skipped.len(), 3, "{:?}", plan.skipped);
    }

    /// Regression: a Gateway policy's objects waited on the IngressClasses too; until
    /// their watch synced, the plan held nothing of it, so the keeper swept them. Each kind's
    /// policies wait only on their own class facts.
    #[test]
    fn gateway_policies_do_not_wait_for_the_ingress_classes() {
        let file = "policies:\n\
            - {name: ing, ingressClasses: [a], publishStatusAddress: 192.0.2.1}\n\
            - {name: gw, gatewayClasses: [eg], publishStatusAddress: 192.0.2.2}\n";
        let policies = parse_file("t", file).unwrap();
        let unread = Fixed(HashMap::new(), [None, Some(Classes::new()), Some(Classes::new())]);
        let plan = desired(&policies, &unread, ApiVersion::V1, &o());
        assert!(plan.kept.contains("ingress-status-guard-ingress-0"), "{plan:?}");
        let names: Vec<&str> = plan.objects.iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["ingress-status-guard-gateway-0"; 2], "the Gateway policy renders: {plan:?}");
        assert!(plan.keeps("MutatingAdmissionPolicy", "ingress-status-guard-gateway-0"));
    }

    /// Regression: the Gateway reconciler judged by the live value while the Ingress one
    /// judged by what the admission policy enforces, so a moved source read as a fight with
    /// the guard's own MAP. Every kind's rendered value is published, by the one path.
    #[test]
    fn every_kinds_rendered_value_is_published() {
        let file = "policies:\n\
            - {name: ing, ingressClasses: [a], publishStatusAddress: 192.0.2.1}\n\
            - {name: gw, gatewayClasses: [eg], publishStatusAddress: 192.0.2.2}\n\
            - {name: gw-audit, gatewayClasses: [other], publishStatusAddress: 192.0.2.3, mode: audit}\n";
        let policies = parse_file("t", file).unwrap();
        let plan = desired(&policies, &fixed(HashMap::new()), ApiVersion::V1, &o());
        let values: Vec<(&str, Vec<Address>)> = plan.values.iter().map(|(p, v)| (p.as_str(), v.clone())).collect();
        assert_eq!(
            values,
            [("ing", vec![ip("192.0.2.1")]), ("gw", vec![ip("192.0.2.2")]), ("gw-audit", vec![ip("192.0.2.3")])],
            "{plan:?}"
        );
    }

    #[test]
    fn owner_labels_are_valid_label_values() {
        assert_eq!(owner("isg", "ingress-status-guard"), "isg.ingress-status-guard");
        let long = owner("isg", &"x".repeat(200));
        assert!(long.len() <= 63 && long.starts_with("h-"), "{long}");
        assert_eq!(long, owner("isg", &"x".repeat(200)), "stable");
        let long_owner = Owner::new("isg", &"x".repeat(200));
        assert_eq!(long_owner.legacy.len(), 2, "a hashed label had two other hashes before");
        for legacy in &long_owner.legacy {
            assert_eq!(long_owner.other(Some(legacy)), None, "an earlier version's label is its own");
        }
        assert_eq!(long_owner.other(Some("isg.other")), Some("isg.other"));
        assert!(Owner::new("isg", "ingress-status-guard").legacy.is_empty());
        // Transposed digit pairs: the same Adler-32, other labels.
        let region = |a: &str, b: &str| format!("tenant-platform-europe-west-production-cluster-a-region-{a}-zone-{b}");
        let (first, second) = (region("12", "21"), region("21", "12"));
        assert_eq!(adler32(format!("{first}.isg").as_bytes()), adler32(format!("{second}.isg").as_bytes()));
        assert_ne!(owner(&first, "isg"), owner(&second, "isg"));
        // The earlier Adler-32 was Go's hash/adler32 (helm's `adler32sum`), and is still read.
        assert_eq!((adler32(b"Wikipedia"), adler32(b"")), (300_286_872, 1));
        // The chart's sha256sum | trunc 60 of the same text.
        assert_eq!(owner("isg", &"x".repeat(60)), "h-1790bbe21a324cc53ee75b984dd73a2173ca6c0ed753e38aa2d138b34d35");
    }
}
