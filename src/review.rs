//! The admission decision: the bytes of an AdmissionReview in, the bytes of the response and a
//! report of what was decided out. Pure: all addresses come through [`Sources`].

use std::{borrow::Cow, collections::BTreeMap, fmt};

use base64::Engine;
use serde::{Deserialize, Deserializer, Serialize, de};
use serde_json::value::RawValue;

use crate::{
    address::{self, Address},
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
    Json(serde_json::Error),
    #[error("kind must be \"AdmissionReview\", got {0:?}")]
    Kind(String),
    #[error("apiVersion must be \"admission.k8s.io/v1\" or \"admission.k8s.io/v1beta1\", got {0:?}")]
    ApiVersion(String),
    #[error("AdmissionReview has no request")]
    MissingRequest,
    #[error("request.object is required for an Ingress status UPDATE")]
    MissingObject,
    #[error("request.object is not a valid Ingress: {0}")]
    Object(serde_json::Error),
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
    pub attempted: Vec<Address>,
    pub canonical: Vec<Address>,
    /// Why the policy's source is unresolved, or what the ignored request was.
    pub detail: Option<String>,
    pub username: String,
    pub dry_run: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReviewIn<'a> {
    #[serde(borrow)]
    api_version: Option<Cow<'a, str>>,
    #[serde(borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    request: Option<RequestIn<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestIn<'a> {
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
    #[serde(borrow, default)]
    object: Option<&'a RawValue>,
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
    let review: ReviewIn = serde_json::from_slice(body).map_err(ReviewError::Json)?;
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
        attempted: Vec::new(),
        canonical: Vec::new(),
        detail: None,
        username: request.user_info.username.clone(),
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

    let raw = request.object.ok_or(ReviewError::MissingObject)?;
    let ingress: IngressIn = serde_json::from_str(raw.get()).map_err(ReviewError::Object)?;
    let class = ingress.spec.ingress_class_name.as_deref().or(ingress.metadata.annotations.as_deref());
    let Some(policy) = policies.governing(class) else {
        decision.outcome = Outcome::NotGoverned;
        return Ok(finish(decision, api_version, response));
    };
    decision.policy = Some(policy.name.clone());
    let written = ingress.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|lb| lb.ingress.as_deref());
    decision.attempted = written.map(<[Address]>::to_vec).unwrap_or_default();

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

    if address::same_set(&decision.attempted, &decision.canonical) {
        decision.outcome = Outcome::Unchanged;
        return Ok(finish(decision, api_version, response));
    }

    let canonical_text = joined(&decision.canonical);
    response.audit_annotations.insert("policy", policy.name.clone());
    response.audit_annotations.insert("attempted", joined(&decision.attempted));
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
                policy.name,
                joined(&decision.attempted)
            )));
            decision.outcome = Outcome::Denied;
        }
    }
    response.audit_annotations.insert("action", decision.outcome.as_str().to_owned());
    Ok(finish(decision, api_version, response))
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

fn joined(list: &[Address]) -> String {
    list.iter().map(Address::display).collect::<Vec<_>>().join(",")
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
