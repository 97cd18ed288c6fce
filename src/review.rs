//! The admission decision: the bytes of an AdmissionReview in, the bytes of the response and a
//! report of what was decided out. Pure: all addresses come through [`Sources`].

use std::{borrow::Cow, collections::BTreeMap, fmt};

use base64::Engine;
use serde::{Deserialize, Deserializer, Serialize, de};
use serde_json::value::RawValue;

use crate::{
    address::{self, Address},
    audit::{Finding, Writer, joined},
    config::{Mode, OnUnresolved, Policies},
    patch::{self, StatusShape},
    sources::Sources,
};

const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
/// kubectl prints warnings as they are; the API server truncates long ones.
const MAX_WARNING: usize = 120;

/// A request body that is not an AdmissionReview we can answer (HTTP 400).
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("body is not a valid AdmissionReview: {0}")]
    Json(String),
    #[error("body is not a valid AdmissionReview: expected a JSON object")]
    NotObject,
    #[error("kind must be \"AdmissionReview\", got {0:?}")]
    Kind(String),
    #[error("apiVersion must be \"admission.k8s.io/v1\" or \"admission.k8s.io/v1beta1\", got {0:?}")]
    ApiVersion(String),
    #[error("AdmissionReview has no request")]
    MissingRequest,
    #[error("request.object is required for an Ingress status UPDATE")]
    MissingObject,
    #[error("request.object is not a valid Ingress: {0}")]
    Object(String),
}

/// What the webhook did with a review; each maps to one response shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Not an Ingress status UPDATE: the webhook is registered for more than it should be.
    Ignored,
    /// No policy governs the Ingress's class.
    NotGoverned,
    /// The written addresses are already canonical.
    Unchanged,
    /// Rewritten to the canonical addresses.
    Patched,
    /// Differs, let through because the policy is in audit mode.
    Audited,
    /// Rejected: differs and the policy is in deny mode, or unresolved with `onUnresolved: deny`.
    Denied,
    /// The source has no addresses now; let through unchanged.
    Unresolved,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ignored => "ignored",
            Outcome::NotGoverned => "not_governed",
            Outcome::Unchanged => "unchanged",
            Outcome::Patched => "patched",
            Outcome::Audited => "audited",
            Outcome::Denied => "denied",
            Outcome::Unresolved => "unresolved",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The decision, with what the edges need to log and count it.
#[derive(Debug, Clone)]
pub struct Decision {
    /// The serialized AdmissionReview response.
    pub response: Vec<u8>,
    pub outcome: Outcome,
    pub uid: String,
    /// `namespace/name` of the reviewed object.
    pub object: String,
    pub policy: Option<String>,
    /// The canonical addresses, when the Ingress is governed and its source resolved.
    pub canonical: Vec<Address>,
    /// Why the policy's source is unresolved, or what the ignored request was.
    pub detail: Option<String>,
    /// Set when a governed write differs from the canonical addresses.
    pub finding: Option<Finding>,
    pub dry_run: bool,
}

/// `O` is how `request.object` is read: an [`IngressIn`] in one pass, or `&RawValue` to parse it
/// on its own afterwards.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReviewIn<'a, O> {
    #[serde(borrow)]
    api_version: Option<Cow<'a, str>>,
    #[serde(borrow)]
    kind: Option<Cow<'a, str>>,
    request: Option<RequestIn<O>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestIn<O> {
    uid: String,
    #[serde(default)]
    kind: GroupVersionKind,
    #[serde(default)]
    sub_resource: Option<String>,
    #[serde(default)]
    operation: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    user_info: UserInfo,
    /// Missing: `None` (no `default` here, which would require `O: Default`).
    object: Option<O>,
    #[serde(default)]
    dry_run: Option<bool>,
}

#[derive(Deserialize, Default)]
struct GroupVersionKind {
    #[serde(default)]
    group: String,
    #[serde(default)]
    kind: String,
}

#[derive(Deserialize, Default)]
struct UserInfo {
    #[serde(default)]
    username: String,
    #[serde(default)]
    groups: Vec<String>,
}

/// The parts of an Ingress the decision reads; everything else is skipped unparsed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IngressIn {
    #[serde(default)]
    metadata: MetadataIn,
    #[serde(default)]
    spec: SpecIn,
    #[serde(default)]
    status: Option<StatusIn>,
}

#[derive(Deserialize, Default)]
struct MetadataIn {
    #[serde(default)]
    uid: Option<String>,
    #[serde(default, deserialize_with = "class_annotation")]
    annotations: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct SpecIn {
    #[serde(default)]
    ingress_class_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusIn {
    #[serde(default)]
    load_balancer: Option<LoadBalancerIn>,
}

#[derive(Deserialize)]
struct LoadBalancerIn {
    #[serde(default)]
    ingress: Option<Vec<Address>>,
}

/// Reads only the class annotation out of `metadata.annotations`, which often carries large
/// values such as `kubectl.kubernetes.io/last-applied-configuration`.
fn class_annotation<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    struct Visit;
    impl<'de> de::Visitor<'de> for Visit {
        type Value = Option<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of annotations")
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut class = None;
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                if key == CLASS_ANNOTATION {
                    class = Some(map.next_value::<String>()?);
                } else {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
            Ok(class)
        }
    }
    d.deserialize_any(Visit)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReviewOut<'a> {
    api_version: &'a str,
    kind: &'static str,
    response: ResponseOut<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseOut<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    /// Base64 of the JSON patch: the API server rejects a byte array here.
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<StatusOut>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    audit_annotations: BTreeMap<&'static str, String>,
}

#[derive(Serialize)]
struct StatusOut {
    code: u16,
    reason: &'static str,
    message: String,
}

/// Decides one AdmissionReview.
pub fn decide(body: &[u8], policies: &Policies, sources: &dyn Sources) -> Result<Decision, ReviewError> {
    // serde reads a struct from a JSON array too, which would make the errors below confusing.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{')
        && serde_json::from_slice::<de::IgnoredAny>(body).is_ok()
    {
        return Err(ReviewError::NotObject);
    }
    // A well-formed review is read in one pass. Anything else is read again with the object
    // kept raw and parsed on its own, so that the error names the right document and field.
    if let Ok(review) = serde_json::from_slice::<ReviewIn<IngressIn>>(body) {
        return decide_review(review, Ok, policies, sources);
    }
    let review: ReviewIn<&RawValue> =
        serde_json::from_slice(body).map_err(|_| ReviewError::Json(explain::<ReviewIn<&RawValue>>(body)))?;
    let parse = |raw: &RawValue| {
        serde_json::from_str(raw.get()).map_err(|_| ReviewError::Object(explain::<IngressIn>(raw.get().as_bytes())))
    };
    decide_review(review, parse, policies, sources)
}

fn decide_review<O>(
    review: ReviewIn<O>,
    read_object: impl FnOnce(O) -> Result<IngressIn, ReviewError>,
    policies: &Policies,
    sources: &dyn Sources,
) -> Result<Decision, ReviewError> {
    let kind = review.kind.as_deref().unwrap_or("");
    if kind != "AdmissionReview" {
        return Err(ReviewError::Kind(kind.to_owned()));
    }
    let api_version = review.api_version.as_deref().unwrap_or("");
    if api_version != "admission.k8s.io/v1" && api_version != "admission.k8s.io/v1beta1" {
        return Err(ReviewError::ApiVersion(api_version.to_owned()));
    }
    let request = review.request.ok_or(ReviewError::MissingRequest)?;
    let mut decision = Decision {
        response: Vec::new(),
        outcome: Outcome::Ignored,
        uid: request.uid.clone(),
        object: format!("{}/{}", request.namespace.as_deref().unwrap_or(""), request.name.as_deref().unwrap_or("")),
        policy: None,
        canonical: Vec::new(),
        detail: None,
        finding: None,
        dry_run: request.dry_run.unwrap_or(false),
    };
    let mut response = ResponseOut {
        uid: &request.uid,
        allowed: true,
        patch_type: None,
        patch: None,
        status: None,
        warnings: Vec::new(),
        audit_annotations: BTreeMap::new(),
    };

    let is_ingress =
        matches!(request.kind.group.as_str(), "networking.k8s.io" | "extensions") && request.kind.kind == "Ingress";
    let sub_resource = request.sub_resource.as_deref().unwrap_or("");
    let operation = request.operation.as_deref().unwrap_or("");
    if !(is_ingress && sub_resource == "status" && operation == "UPDATE") {
        decision.detail = Some(format!(
            "{operation} of {}/{}{}{sub_resource} is not an Ingress status UPDATE; check the webhook's rules",
            request.kind.group,
            request.kind.kind,
            if sub_resource.is_empty() { "" } else { "/" }
        ));
        return Ok(finish(decision, api_version, response));
    }

    let ingress = read_object(request.object.ok_or(ReviewError::MissingObject)?)?;
    let class = ingress.spec.ingress_class_name.as_deref().or(ingress.metadata.annotations.as_deref());
    let Some(policy) = policies.governing(class) else {
        decision.outcome = Outcome::NotGoverned;
        return Ok(finish(decision, api_version, response));
    };
    decision.policy = Some(policy.name.clone());
    let written = ingress.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|lb| lb.ingress.as_deref());
    let attempted = written.map(<[Address]>::to_vec).unwrap_or_default();

    let canonical = match sources.canonical(policy) {
        Ok(canonical) => canonical,
        Err(unresolved) => {
            let why = unresolved.to_string();
            match policy.on_unresolved {
                OnUnresolved::Allow => {
                    decision.outcome = Outcome::Unresolved;
                    response
                        .warnings
                        .push(warning(&format!("canonical address unknown ({why}); status left as written")));
                }
                OnUnresolved::Deny => {
                    decision.outcome = Outcome::Denied;
                    response.allowed = false;
                    response.status = Some(forbidden(format!(
                        "ingress-status-guard policy {:?} cannot resolve the canonical address: {why}; the status write is refused until it resolves",
                        policy.name
                    )));
                }
            }
            response.audit_annotations.insert("policy", policy.name.clone());
            response.audit_annotations.insert("unresolved", why.clone());
            decision.detail = Some(why);
            return Ok(finish(decision, api_version, response));
        }
    };
    decision.canonical = canonical;

    if address::same_set(&attempted, &decision.canonical) {
        decision.outcome = Outcome::Unchanged;
        return Ok(finish(decision, api_version, response));
    }

    let canonical_text = joined(&decision.canonical);
    let attempted_text = joined(&attempted);
    response.audit_annotations.insert("policy", policy.name.clone());
    response.audit_annotations.insert("attempted", attempted_text.clone());
    response.audit_annotations.insert("canonical", canonical_text.clone());
    match policy.mode {
        Mode::Enforce => {
            let ops = patch::set_addresses(shape(ingress.status.as_ref()), &decision.canonical);
            let json = serde_json::to_vec(&ops).expect("a patch of strings and numbers always serializes");
            response.patch_type = Some("JSONPatch");
            response.patch = Some(base64::engine::general_purpose::STANDARD.encode(json));
            response.warnings.push(warning(&format!(
                "status.loadBalancer.ingress rewritten to [{canonical_text}] by policy {}",
                policy.name
            )));
            decision.outcome = Outcome::Patched;
        }
        Mode::Audit => {
            response.warnings.push(warning(&format!(
                "status.loadBalancer.ingress differs from [{canonical_text}] (policy {}, audit mode)",
                policy.name
            )));
            decision.outcome = Outcome::Audited;
        }
        Mode::Deny => {
            response.allowed = false;
            response.status = Some(forbidden(format!(
                "ingress-status-guard policy {:?} requires status.loadBalancer.ingress [{canonical_text}], not [{}]",
                policy.name, attempted_text
            )));
            decision.outcome = Outcome::Denied;
        }
    }
    response.audit_annotations.insert("action", decision.outcome.as_str().to_owned());
    decision.finding = Some(Finding {
        uid: request.uid.clone(),
        object_uid: ingress.metadata.uid.clone(),
        namespace: request.namespace.clone().unwrap_or_default(),
        name: request.name.clone().unwrap_or_default(),
        class: class.map(str::to_owned),
        policy: policy.name.clone(),
        writer: Writer::new(request.user_info.username.clone(), request.user_info.groups.clone()),
        attempted,
        canonical: decision.canonical.clone(),
        action: decision.outcome,
        dry_run: decision.dry_run,
    });
    Ok(finish(decision, api_version, response))
}

/// Parses again, off the fast path, to name the field that failed (`request.uid: missing ...`).
fn explain<'a, T: Deserialize<'a>>(body: &'a [u8]) -> String {
    let mut de = serde_json::Deserializer::from_slice(body);
    match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Ok(_) => "unexpected trailing data".to_owned(),
        Err(e) => {
            let path = e.path().to_string();
            if path == "." || path == "?" { e.into_inner().to_string() } else { format!("{path}: {}", e.into_inner()) }
        }
    }
}

fn finish(mut decision: Decision, api_version: &str, response: ResponseOut<'_>) -> Decision {
    let review = ReviewOut { api_version, kind: "AdmissionReview", response };
    decision.response = serde_json::to_vec(&review).expect("a response of strings and numbers always serializes");
    decision
}

fn shape(status: Option<&StatusIn>) -> StatusShape {
    match status {
        None => StatusShape::NoStatus,
        Some(StatusIn { load_balancer: None }) => StatusShape::NoLoadBalancer,
        Some(StatusIn { load_balancer: Some(LoadBalancerIn { ingress: None }) }) => StatusShape::NoIngressList,
        Some(_) => StatusShape::IngressList,
    }
}

fn forbidden(message: String) -> StatusOut {
    StatusOut { code: 403, reason: "Forbidden", message }
}

/// Cuts a warning to what kubectl shows in full, on a character boundary.
fn warning(text: &str) -> String {
    if text.chars().count() <= MAX_WARNING {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(MAX_WARNING - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::{
        config::{ClassScope, Policy, ServiceRef, Source},
        sources::Unresolved,
    };

    const FIXTURE: &str = include_str!("../tests/fixtures/ingress-status-update.apiserver-1.24.json");

    /// Sources answering from a fixed value, for the one Service the tests use.
    struct Fixed(Result<Vec<Address>, Unresolved>);
    impl Sources for Fixed {
        fn service(&self, _: &ServiceRef) -> Result<Vec<Address>, Unresolved> {
            self.0.clone()
        }
    }

    fn policy(mode: Mode, classes: &[&str], source: Source) -> Policies {
        Policies::new(vec![Policy {
            name: "p".into(),
            scope: ClassScope { classes: classes.iter().map(|c| c.to_string()).collect(), without_class: false },
            source,
            mode,
            keep_ports: false,
            on_unresolved: OnUnresolved::Allow,
        }])
        .unwrap()
    }

    fn static_policy(mode: Mode) -> Policies {
        policy(mode, &[], Source::Static(address::parse_static_list("192.0.2.10,lb.example.test").unwrap()))
    }

    fn canonical_json() -> Value {
        json!([{"ip": "192.0.2.10"}, {"hostname": "lb.example.test"}])
    }

    /// The fixture review with `status` replaced (`None` removes it) and optional edits.
    fn review(status: Option<Value>, edit: impl FnOnce(&mut Value)) -> Value {
        let mut review: Value = serde_json::from_str(FIXTURE).unwrap();
        let object = &mut review["request"]["object"];
        match status {
            Some(status) => object["status"] = status,
            None => {
                object.as_object_mut().unwrap().remove("status");
            }
        }
        edit(&mut review);
        review
    }

    fn run(review: &Value, policies: &Policies, sources: &dyn Sources) -> (Decision, Value) {
        let decision = decide(&serde_json::to_vec(review).unwrap(), policies, sources).unwrap();
        let response: Value = serde_json::from_slice(&decision.response).unwrap();
        (decision, response)
    }

    fn decoded_patch(response: &Value) -> Option<json_patch::Patch> {
        let encoded = response["response"]["patch"].as_str()?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).unwrap();
        Some(serde_json::from_slice(&bytes).expect("patch must be an RFC 6902 array"))
    }

    const NO_SERVICE: Fixed =
        Fixed(Err(Unresolved::NotSynced(ServiceRef { namespace: String::new(), name: String::new() })));

    #[test]
    fn patch_applies_to_every_status_shape_and_is_idempotent() {
        let cases: Vec<(&str, Option<Value>)> = vec![
            ("status absent", None),
            ("status null", Some(Value::Null)),
            ("status empty", Some(json!({}))),
            ("loadBalancer null", Some(json!({"loadBalancer": null}))),
            ("loadBalancer empty", Some(json!({"loadBalancer": {}}))),
            ("ingress null", Some(json!({"loadBalancer": {"ingress": null}}))),
            ("ingress empty", Some(json!({"loadBalancer": {"ingress": []}}))),
            (
                "wrong values",
                Some(json!({"loadBalancer": {"ingress": [{"ip": "10.7.7.7"}, {"hostname": "old.example"}]}})),
            ),
            ("subset", Some(json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}))),
            (
                "right addresses with ports",
                Some(
                    json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10", "ports": [{"port": 80, "protocol": "TCP"}]}, {"hostname": "lb.example.test"}]}}),
                ),
            ),
        ];
        let policies = static_policy(Mode::Enforce);
        for (name, status) in cases {
            let input = review(status, |_| {});
            let (decision, response) = run(&input, &policies, &NO_SERVICE);
            assert_eq!(decision.outcome, Outcome::Patched, "case {name}");
            assert_eq!(response["response"]["patchType"], "JSONPatch", "case {name}");
            let patch = decoded_patch(&response).unwrap_or_else(|| panic!("case {name}: no patch"));
            for op in &patch.0 {
                let path = serde_json::to_value(op).unwrap()["path"].as_str().unwrap().to_owned();
                assert!(path.starts_with("/status"), "case {name}: patch touches {path}");
            }
            let mut object = input["request"]["object"].clone();
            let spec_before = object["spec"].clone();
            json_patch::patch(&mut object, &patch).unwrap_or_else(|e| panic!("case {name}: patch does not apply: {e}"));
            assert_eq!(object["status"]["loadBalancer"]["ingress"], canonical_json(), "case {name}");
            assert_eq!(object["spec"], spec_before, "case {name}");

            let mut again = input.clone();
            again["request"]["object"] = object;
            let (second, response) = run(&again, &policies, &NO_SERVICE);
            assert_eq!(second.outcome, Outcome::Unchanged, "case {name}: second pass");
            assert!(response["response"].get("patch").is_none(), "case {name}: second pass patched");
        }
    }

    #[test]
    fn canonical_writes_are_not_patched() {
        let policies = static_policy(Mode::Enforce);
        for (name, list) in [
            ("same order", json!([{"ip": "192.0.2.10"}, {"hostname": "lb.example.test"}])),
            ("other order", json!([{"hostname": "lb.example.test"}, {"ip": "192.0.2.10"}])),
            ("duplicated", json!([{"hostname": "lb.example.test"}, {"ip": "192.0.2.10"}, {"ip": "192.0.2.10"}])),
        ] {
            let (decision, response) =
                run(&review(Some(json!({"loadBalancer": {"ingress": list}})), |_| {}), &policies, &NO_SERVICE);
            assert_eq!(decision.outcome, Outcome::Unchanged, "case {name}");
            assert_eq!(
                response["response"],
                json!({"uid": "0f3cb218-7947-4a5f-839c-6e300a5ae86a", "allowed": true}),
                "case {name}"
            );
        }
    }

    #[test]
    fn golden_wire_format() {
        let (_, response) = run(&serde_json::from_str(FIXTURE).unwrap(), &static_policy(Mode::Enforce), &NO_SERVICE);
        assert_eq!(
            response,
            json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {
                    "uid": "0f3cb218-7947-4a5f-839c-6e300a5ae86a",
                    "allowed": true,
                    "patchType": "JSONPatch",
                    // base64 of [{"op":"replace","path":"/status/loadBalancer/ingress","value":[{"ip":"192.0.2.10"},{"hostname":"lb.example.test"}]}]
                    "patch": "W3sib3AiOiJyZXBsYWNlIiwicGF0aCI6Ii9zdGF0dXMvbG9hZEJhbGFuY2VyL2luZ3Jlc3MiLCJ2YWx1ZSI6W3siaXAiOiIxOTIuMC4yLjEwIn0seyJob3N0bmFtZSI6ImxiLmV4YW1wbGUudGVzdCJ9XX1d",
                    "warnings": ["status.loadBalancer.ingress rewritten to [192.0.2.10,lb.example.test] by policy p"],
                    "auditAnnotations": {"action": "patched", "attempted": "10.7.7.7", "canonical": "192.0.2.10,lb.example.test", "policy": "p"}
                }
            })
        );
    }

    #[test]
    fn v1beta1_reviews_are_answered_in_v1beta1() {
        let input = review(None, |r| r["apiVersion"] = json!("admission.k8s.io/v1beta1"));
        let (_, response) = run(&input, &static_policy(Mode::Enforce), &NO_SERVICE);
        assert_eq!(response["apiVersion"], "admission.k8s.io/v1beta1");
        assert_eq!(response["response"]["uid"], "0f3cb218-7947-4a5f-839c-6e300a5ae86a");
    }

    #[test]
    fn class_scoping() {
        let policies =
            policy(Mode::Enforce, &["nginx"], Source::Static(address::parse_static_list("192.0.2.10").unwrap()));
        let with = |class: Option<&str>, annotation: Option<&str>| {
            review(None, |r| {
                let object = &mut r["request"]["object"];
                if let Some(class) = class {
                    object["spec"]["ingressClassName"] = json!(class);
                }
                if let Some(a) = annotation {
                    object["metadata"]["annotations"][CLASS_ANNOTATION] = json!(a);
                }
            })
        };
        let cases = [
            ("class field", with(Some("nginx"), None), Outcome::Patched),
            ("class annotation", with(None, Some("nginx")), Outcome::Patched),
            ("other class", with(Some("traefik"), None), Outcome::NotGoverned),
            ("other class annotation", with(None, Some("traefik")), Outcome::NotGoverned),
            ("class-less", with(None, None), Outcome::NotGoverned),
        ];
        for (name, input, want) in cases {
            let (decision, response) = run(&input, &policies, &NO_SERVICE);
            assert_eq!(decision.outcome, want, "case {name}");
            if want == Outcome::NotGoverned {
                assert_eq!(
                    response["response"],
                    json!({"uid": "0f3cb218-7947-4a5f-839c-6e300a5ae86a", "allowed": true})
                );
            }
        }
    }

    #[test]
    fn modes() {
        let input: Value = serde_json::from_str(FIXTURE).unwrap();
        let (decision, response) = run(&input, &static_policy(Mode::Audit), &NO_SERVICE);
        assert_eq!(decision.outcome, Outcome::Audited);
        assert_eq!(response["response"]["allowed"], true);
        assert!(response["response"].get("patch").is_none());
        assert_eq!(response["response"]["auditAnnotations"]["action"], "audited");
        assert!(response["response"]["warnings"][0].as_str().unwrap().contains("audit mode"));

        let (decision, response) = run(&input, &static_policy(Mode::Deny), &NO_SERVICE);
        assert_eq!(decision.outcome, Outcome::Denied);
        assert_eq!(response["response"]["allowed"], false);
        assert!(response["response"].get("patch").is_none());
        assert_eq!(response["response"]["status"]["code"], 403);
        let message = response["response"]["status"]["message"].as_str().unwrap();
        assert_eq!(
            message,
            "ingress-status-guard policy \"p\" requires status.loadBalancer.ingress [192.0.2.10,lb.example.test], not [10.7.7.7]"
        );
    }

    #[test]
    fn service_source_and_unresolved() {
        let svc: ServiceRef = "ingress/lb".parse().unwrap();
        let mut policies = policy(Mode::Enforce, &[], Source::Service(svc.clone()));
        let input: Value = serde_json::from_str(FIXTURE).unwrap();

        let resolved = Fixed(Ok(address::parse_static_list("203.0.113.5").unwrap()));
        let (decision, response) = run(&input, &policies, &resolved);
        assert_eq!(decision.outcome, Outcome::Patched);
        assert_eq!(decision.canonical, address::parse_static_list("203.0.113.5").unwrap());
        assert!(decoded_patch(&response).is_some());

        let missing = Fixed(Err(Unresolved::Missing(svc.clone())));
        let (decision, response) = run(&input, &policies, &missing);
        assert_eq!(decision.outcome, Outcome::Unresolved);
        assert_eq!(response["response"]["allowed"], true);
        assert!(response["response"].get("patch").is_none());
        assert_eq!(
            response["response"]["warnings"][0],
            "canonical address unknown (Service ingress/lb not found); status left as written"
        );

        policies = Policies::new(
            policies.iter().cloned().map(|p| Policy { on_unresolved: OnUnresolved::Deny, ..p }).collect(),
        )
        .unwrap();
        let (decision, response) = run(&input, &policies, &missing);
        assert_eq!(decision.outcome, Outcome::Denied);
        assert_eq!(response["response"]["allowed"], false);
        assert!(response["response"]["status"]["message"].as_str().unwrap().contains("Service ingress/lb not found"));
    }

    #[test]
    fn ports_kept_by_policy() {
        let svc: ServiceRef = "ingress/lb".parse().unwrap();
        let with_port = Address {
            ports: vec![address::PortStatus { port: 443, protocol: "TCP".into(), error: None }],
            ..Address::parse("203.0.113.5").unwrap()
        };
        let sources = Fixed(Ok(vec![with_port.clone()]));
        let input: Value = serde_json::from_str(FIXTURE).unwrap();
        let dropping = policy(Mode::Enforce, &[], Source::Service(svc.clone()));
        assert_eq!(run(&input, &dropping, &sources).0.canonical, vec![Address::parse("203.0.113.5").unwrap()]);
        let keeping =
            Policies::new(dropping.iter().cloned().map(|p| Policy { keep_ports: true, ..p }).collect()).unwrap();
        assert_eq!(run(&input, &keeping, &sources).0.canonical, vec![with_port]);
    }

    #[test]
    fn requests_that_are_not_ingress_status_updates_pass() {
        let cases: Vec<(&str, Box<dyn Fn(&mut Value)>)> = vec![
            ("create", Box::new(|r: &mut Value| r["request"]["operation"] = json!("CREATE"))),
            (
                "main resource",
                Box::new(|r: &mut Value| {
                    r["request"].as_object_mut().unwrap().remove("subResource").map(drop).unwrap_or(())
                }),
            ),
            (
                "service status",
                Box::new(|r: &mut Value| {
                    r["request"]["kind"] = json!({"group": "", "version": "v1", "kind": "Service"})
                }),
            ),
        ];
        for (name, edit) in cases {
            let input = review(None, edit);
            let (decision, response) = run(&input, &static_policy(Mode::Enforce), &NO_SERVICE);
            assert_eq!(decision.outcome, Outcome::Ignored, "case {name}");
            assert!(decision.detail.as_deref().unwrap().contains("not an Ingress status UPDATE"), "case {name}");
            assert_eq!(
                response["response"],
                json!({"uid": "0f3cb218-7947-4a5f-839c-6e300a5ae86a", "allowed": true}),
                "case {name}"
            );
        }
    }

    #[test]
    fn malformed_reviews_say_what_is_wrong() {
        let fixture: Value = serde_json::from_str(FIXTURE).unwrap();
        let edited = |edit: &dyn Fn(&mut Value)| {
            let mut v = fixture.clone();
            edit(&mut v);
            serde_json::to_vec(&v).unwrap()
        };
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            ("not json", b"{".to_vec(), "body is not a valid AdmissionReview: EOF while parsing"),
            ("array", b"[]".to_vec(), "body is not a valid AdmissionReview: expected a JSON object"),
            ("wrong kind", edited(&|v| v["kind"] = json!("Pod")), "kind must be \"AdmissionReview\", got \"Pod\""),
            ("wrong version", edited(&|v| v["apiVersion"] = json!("v1")), "apiVersion must be"),
            (
                "no request",
                edited(&|v| drop(v.as_object_mut().unwrap().remove("request"))),
                "AdmissionReview has no request",
            ),
            (
                "no uid",
                edited(&|v| drop(v["request"].as_object_mut().unwrap().remove("uid"))),
                "body is not a valid AdmissionReview: request: missing field `uid`",
            ),
            (
                "no object",
                edited(&|v| drop(v["request"].as_object_mut().unwrap().remove("object"))),
                "request.object is required",
            ),
            (
                "bad status",
                edited(&|v| v["request"]["object"]["status"] = json!({"loadBalancer": {"ingress": [{"ip": 7}]}})),
                "request.object is not a valid Ingress: status.loadBalancer.ingress[0].ip: invalid type: integer `7`",
            ),
        ];
        for (name, body, want) in cases {
            let err = decide(&body, &static_policy(Mode::Enforce), &NO_SERVICE).unwrap_err().to_string();
            assert!(err.starts_with(want), "case {name}: {err}");
        }
    }

    #[test]
    fn warnings_fit_kubectl() {
        let many: Vec<String> = (1..=40).map(|i| format!("192.0.2.{i}")).collect();
        let policies = policy(Mode::Enforce, &[], Source::Static(address::parse_static_list(&many.join(",")).unwrap()));
        let (_, response) = run(&serde_json::from_str(FIXTURE).unwrap(), &policies, &NO_SERVICE);
        let warning = response["response"]["warnings"][0].as_str().unwrap();
        assert_eq!(warning.chars().count(), MAX_WARNING);
        assert!(warning.ends_with('…') && !warning.starts_with("Warning:"));
    }

    #[test]
    fn findings_classify_writes() {
        let rogue = |edit: &dyn Fn(&mut Value)| {
            review(Some(json!({"loadBalancer": {"ingress": [{"ip": "10.9.9.9"}]}})), |r| {
                r["request"]["userInfo"] = json!({"username": "system:serviceaccount:kube-system:old-controller", "groups": ["system:serviceaccounts"]});
                edit(r)
            })
        };
        let canonical = review(Some(json!({"loadBalancer": {"ingress": canonical_json()}})), |_| {});
        let other_class = rogue(&|r| r["request"]["object"]["spec"]["ingressClassName"] = json!("traefik"));
        let dry_run = rogue(&|r| r["request"]["dryRun"] = json!(true));
        let nginx_only =
            policy(Mode::Enforce, &["nginx"], Source::Static(address::parse_static_list("192.0.2.10").unwrap()));
        let cases: Vec<(&str, Value, Policies, Option<(Outcome, bool)>)> = vec![
            ("matching write", canonical, static_policy(Mode::Enforce), None),
            ("not governed", other_class, nginx_only, None),
            ("mismatch, enforce", rogue(&|_| {}), static_policy(Mode::Enforce), Some((Outcome::Patched, false))),
            ("mismatch, audit", rogue(&|_| {}), static_policy(Mode::Audit), Some((Outcome::Audited, false))),
            ("mismatch, deny", rogue(&|_| {}), static_policy(Mode::Deny), Some((Outcome::Denied, false))),
            ("mismatch, dry run", dry_run, static_policy(Mode::Enforce), Some((Outcome::Patched, true))),
        ];
        for (name, input, policies, want) in cases {
            let (decision, _) = run(&input, &policies, &NO_SERVICE);
            let got = decision.finding.as_ref().map(|f| (f.action, f.dry_run));
            assert_eq!(got, want, "case {name}");
            if let Some(f) = decision.finding {
                assert_eq!(f.uid, "0f3cb218-7947-4a5f-839c-6e300a5ae86a", "case {name}");
                assert_eq!(f.object_uid.as_deref(), Some("8d85ab45-0193-4e14-b7ab-45d58c9dc450"), "case {name}");
                assert_eq!(
                    (f.namespace.as_str(), f.name.as_str(), f.policy.as_str()),
                    ("default", "demo-ing", "p"),
                    "case {name}"
                );
                assert_eq!(f.writer.username, "system:serviceaccount:kube-system:old-controller", "case {name}");
                assert_eq!(f.writer.groups, ["system:serviceaccounts"], "case {name}");
                assert_eq!(
                    f.writer.service_account,
                    Some(("kube-system".into(), "old-controller".into())),
                    "case {name}"
                );
                assert_eq!(f.attempted, address::parse_static_list("10.9.9.9").unwrap(), "case {name}");
                assert_eq!(
                    f.canonical,
                    address::parse_static_list("192.0.2.10,lb.example.test").unwrap(),
                    "case {name}"
                );
            }
        }
    }
}
