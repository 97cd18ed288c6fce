//! The AdmissionReview on the wire, going in: the fields the decision needs (everything else is
//! skipped unparsed), and errors that name the field when a body is not a review we can answer.

use std::borrow::Cow;

use kube::Resource;
use serde::{Deserialize, de};
use serde_json::value::RawValue;

pub(crate) mod bounds;
mod gateway;
mod ingress;
pub(crate) mod metadata;
mod service;
mod stored;

pub(crate) use bounds::OutOfBounds;
pub(crate) use metadata::Metadata;
use metadata::{MetaIn, MetadataError};
pub(crate) use stored::RawStatus;
use stored::stored_status;

use crate::{
    decision::{Author, Verdict, decide_by},
    kind::{Governed, Kind, Write, with_kind},
    names::truncate,
    policy::Policies,
    sources::Sources,
};

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
    #[error("request.object is required for {} status UPDATE", .0.info().with_article)]
    MissingObject(Kind),
    #[error("request.object is not a valid {0}: {1}")]
    Object(Kind, String),
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    #[error(
        "request.uid is {0} bytes, over the limit of {max}: the API server sends a UUID",
        max = bounds::MAX_UID
    )]
    Uid(usize),
}

impl ReviewError {
    /// Whether the body broke a bound on what a caller may write (counted apart from malformed bodies).
    pub fn is_out_of_bounds(&self) -> bool {
        matches!(self, ReviewError::Uid(_))
    }
}

/// Longest text of a body quoted in an error (serde_json quotes whole strings).
const MAX_QUOTED: usize = 1024;

/// `O` is how `request.object` is read: as its kind's object in one pass, `&RawValue` to parse it
/// on its own afterwards, or skipped (`IgnoredAny`) when the request is not a governed status write.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "an AdmissionReview object", bound(deserialize = "O: Deserialize<'de>"))]
struct ReviewIn<'a, O> {
    #[serde(borrow)]
    api_version: Option<Cow<'a, str>>,
    #[serde(borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "crate::strict::optional_object")]
    request: Option<RequestIn<'a, O>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", expecting = "an AdmissionRequest object", bound(deserialize = "O: Deserialize<'de>"))]
struct RequestIn<'a, O> {
    #[serde(borrow)]
    uid: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "crate::strict::object")]
    kind: GroupVersionKind<'a>,
    #[serde(default, borrow)]
    sub_resource: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    operation: Option<Cow<'a, str>>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default, borrow, deserialize_with = "crate::strict::object")]
    user_info: User<'a>,
    #[serde(default, deserialize_with = "crate::strict::optional_object")]
    object: Option<O>,
    #[serde(default, borrow, deserialize_with = "crate::strict::optional_object")]
    old_object: Option<StoredIn<'a>>,
    #[serde(default)]
    dry_run: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(expecting = "a GroupVersionKind object")]
struct GroupVersionKind<'a> {
    #[serde(default, borrow)]
    group: Cow<'a, str>,
    #[serde(default, borrow)]
    kind: Cow<'a, str>,
}

/// The parts of an object the decision reads: its metadata, and its spec and status as its kind reads them.
#[derive(Deserialize)]
#[serde(
    rename_all = "camelCase",
    expecting = "a Kubernetes object",
    bound(deserialize = "'de: 'a, S: Deserialize<'de> + Default, T: Deserialize<'de>")
)]
struct ObjectIn<'a, S, T> {
    #[serde(default, borrow, deserialize_with = "crate::strict::optional_object")]
    metadata: Option<MetaIn<'a>>,
    #[serde(default, deserialize_with = "crate::strict::object")]
    spec: S,
    #[serde(default, deserialize_with = "crate::strict::optional_object")]
    status: Option<T>,
}

/// What a status write cannot change, read from `request.oldObject` alike for every kind: the
/// fields whose written value the API server throws away after mutating admission (each kind's
/// reader takes them from here), the `uid` it refills, and the metadata to compare the written one with.
#[derive(Deserialize, Default)]
#[serde(expecting = "a Kubernetes object")]
struct StoredIn<'a> {
    #[serde(default, borrow, deserialize_with = "crate::strict::object")]
    metadata: MetaIn<'a>,
    #[serde(default, deserialize_with = "crate::strict::object")]
    spec: StoredSpecIn,
    /// Kept unparsed: read only when a trusted-writer policy compares a write with it ([`stored_status`]).
    #[serde(default, borrow)]
    status: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", expecting = "an IngressSpec, GatewaySpec or ServiceSpec object")]
struct StoredSpecIn {
    /// As `ingress::SpecIn` reads it.
    #[serde(default)]
    ingress_class_name: Option<String>,
    /// As [`gateway::SpecIn`] reads it.
    #[serde(default, deserialize_with = "crate::kind::ingress::bounded::class_field")]
    gateway_class_name: Option<String>,
    /// As [`service::SpecIn`] reads it.
    #[serde(default, rename = "type")]
    service_type: Option<String>,
    /// As [`service::SpecIn`] reads it.
    #[serde(default)]
    load_balancer_class: Option<String>,
}

/// The class field a status write tried to change, which the API server resets from the stored
/// object: the write is judged without it, and is a finding (`forged_spec`) of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Forged(pub Kind);

impl Forged {
    /// The field, as the audit annotation, the log line, the Event and the metric name it.
    pub fn field(self) -> &'static str {
        let Forged(kind) = self;
        kind.info().class_field
    }
}

/// A field a status write cannot change, as it will be stored (`old`'s, when there is one),
/// and `forged` when the write changed it.
fn stored<T: PartialEq>(written: T, old: Option<T>, forged: Forged) -> (T, Option<Forged>) {
    match old {
        Some(old) => {
            let forged = (written != old).then_some(forged);
            (old, forged)
        }
        None => (written, None),
    }
}

/// A review we can answer: what the response must echo, who wrote, and what was written. Strings
/// are borrowed from the body where it has them unescaped: no allocation per review for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review<'a> {
    /// The request's `apiVersion`, which the response must repeat.
    pub api_version: ApiVersion,
    /// `request.uid`, echoed as `response.uid`.
    pub uid: Cow<'a, str>,
    /// `request.dryRun`: no side effects for this review.
    pub dry_run: bool,
    /// `request.userInfo`: who wrote.
    pub user: User<'a>,
    /// What was written, or why the review is not one we judge.
    pub target: Target<'a>,
    /// `request.oldObject.status`, unparsed (`None` when absent or `null`), for a trusted-writer policy.
    pub stored_status: Option<RawStatus<'a>>,
}

/// The AdmissionReview versions the API server may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiVersion {
    V1,
    V1beta1,
}

impl ApiVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V1 => "admission.k8s.io/v1",
            ApiVersion::V1beta1 => "admission.k8s.io/v1beta1",
        }
    }
}

/// `request.userInfo`: who sent the write.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(expecting = "a UserInfo object")]
pub struct User<'a> {
    /// At most [`bounds::MAX_USERNAME`] bytes, cut as it is read ([`bounds::username`]).
    #[serde(default, borrow, deserialize_with = "bounds::username")]
    pub username: Cow<'a, str>,
    /// At most [`bounds::MAX_GROUPS`] of [`bounds::MAX_GROUP`] bytes each.
    #[serde(default, deserialize_with = "bounds::groups")]
    pub groups: Vec<String>,
}

/// `Target` and `on_status!`, one status variant per kind of the kind list.
macro_rules! define_targets {
    ($d:tt ; $( $(#[$doc:meta])* $V:ident : $module:ident :: $T:ident { $($fields:ident),* } ),* $(,)?) => {
        /// What the review is about.
        // The kinds' types are the crate's: the benchmarks see a target, never inside one.
        #[allow(private_interfaces)]
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Target<'a> {
            $(
                /// An UPDATE of the `status` subresource of this kind's object.
                $V(Status<'a, <crate::kind::$module::$T as Governed>::Entry, <crate::kind::$module::$T as Governed>::Shape>),
            )*
            /// Anything else, described for the log (at most [`MAX_QUOTED`] bytes).
            Other(String),
            /// A status review with a field no API server sends: allowed as written.
            OutOfBounds(OutOfBounds),
        }

        /// `$on` applied to the [`Status`] of a status target (`$K` its [`Governed`] type); `$else` otherwise.
        macro_rules! on_status {
            ($d target:expr, $d K:ident, $d s:ident => $d on:expr, _ => $d else:expr) => {
                match $d target {
                    $( $crate::review::Target::$V($d s) => {
                        type $d K = $crate::kind::$module::$T;
                        $d on
                    } )*
                    $crate::review::Target::Other(_) | $crate::review::Target::OutOfBounds(_) => $d else,
                }
            };
            ($d target:expr, $d s:ident => $d on:expr, _ => $d else:expr) => {
                $crate::review::on_status!($d target, _K, $d s => $d on, _ => $d else)
            };
        }
    };
}
crate::kind::kind_list!(define_targets, $);
#[allow(clippy::single_component_path_imports, reason = "the macro comes from an expansion: this makes it a path")]
pub(crate) use on_status;

/// A status write of one governed kind, as a review carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status<'a, E, S> {
    /// With the class the object will be stored with (its reader's `stored_*class`).
    pub write: Write<E>,
    /// `metadata.uid` of the object, so Events find it.
    pub object_uid: Option<Cow<'a, str>>,
    /// How much of the status list's path the object has: where a patch must go.
    pub shape: S,
    /// A field the write changed, which the API server resets.
    pub forged: Option<Forged>,
    /// The metadata the write changed, which the API server would store as written.
    pub metadata: Option<Metadata<'a>>,
}

impl Review<'_> {
    /// The decision on this review.
    pub fn decide<'p>(&self, policies: &'p Policies, sources: &dyn Sources) -> Verdict<'p> {
        match &self.target {
            Target::Other(what) => Verdict::Ignored(what.clone()),
            Target::OutOfBounds(bound) => Verdict::Ignored(bound.to_string()),
            // The other targets are matched above.
            target => on_status!(target, K, s => {
                let stored = || stored_status::<K>(self.stored_status.map(|raw| raw.0));
                let author = Author { username: &self.user.username, stored: &stored };
                decide_by::<K>(&s.write, Some(&author), policies, sources)
            }, _ => Verdict::NotGoverned),
        }
    }

    /// The JSON patch that puts the stored status list back on the written object, into `out`: a
    /// trusted-writer policy's rewrite. `false` when there is none or it cannot be read.
    pub(crate) fn restoring_patch(&self, out: &mut Vec<u8>) -> bool {
        fn restore<K: Reviewed>(stored: Option<&str>, shape: K::Shape, out: &mut Vec<u8>) -> bool {
            stored_status::<K>(stored).is_ok_and(|stored| K::patch(shape, &stored.addresses, out).is_ok())
        }
        on_status!(&self.target, K, s => restore::<K>(self.stored_status.map(|raw| raw.0), s.shape, out), _ => false)
    }

    /// The field the write tried to change that the API server resets, if any.
    pub fn forged(&self) -> Option<Forged> {
        on_status!(&self.target, s => s.forged, _ => None)
    }

    /// The name of the field the write tried to change that the API server resets, if any.
    pub fn forged_field(&self) -> Option<&'static str> {
        self.forged().map(Forged::field)
    }

    /// The metadata the write changed, which a status write would store as written.
    pub fn forged_metadata(&self) -> Option<&Metadata<'_>> {
        on_status!(&self.target, s => s.metadata.as_ref(), _ => None)
    }

    /// The kind of the object written (`None` for other requests).
    pub(crate) fn kind(&self) -> Option<Kind> {
        on_status!(&self.target, K, _s => Some(K::KIND), _ => None)
    }

    /// The namespace and name of the object written (empty for other requests).
    pub fn object_key(&self) -> (&str, &str) {
        on_status!(&self.target, s => (&s.write.namespace, &s.write.name), _ => ("", ""))
    }

    /// How many entries of the status list were written after those kept, counted not kept.
    pub fn omitted(&self) -> usize {
        on_status!(&self.target, s => s.write.omitted, _ => 0)
    }
}

/// Reads an AdmissionReview body. Every string a caller chooses is bounded (`bounds`), and the
/// status list is read with a bounded visitor: what a review holds does not grow with what was sent.
pub fn read(body: &[u8]) -> Result<Review<'_>, ReviewError> {
    // serde reads a struct from a JSON array too, which would make the errors below confusing.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{')
        && serde_json::from_slice::<de::IgnoredAny>(body).is_ok()
    {
        return Err(ReviewError::NotObject);
    }
    // Which kind's object `request.object` is, read first with everything else skipped: serde
    // cannot choose a field's type from a sibling field. A body this fails on fails below too,
    // where the error is worded.
    let kind = serde_json::from_slice::<Probe>(body).ok().and_then(|p| p.request?.status_of());
    match kind {
        Some(kind) => with_kind!(kind, K => read_status::<K>(body)),
        None => read_other(body),
    }
}

/// The request fields that say what a review is about, read as [`ReviewIn`] reads them, so that
/// it refuses no body that [`ReviewIn`] accepts.
#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(default, borrow, deserialize_with = "crate::strict::optional_object")]
    request: Option<ProbeRequest<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProbeRequest<'a> {
    #[serde(default, borrow, deserialize_with = "crate::strict::object")]
    kind: GroupVersionKind<'a>,
    #[serde(default, borrow)]
    sub_resource: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    operation: Option<Cow<'a, str>>,
}

impl ProbeRequest<'_> {
    /// The governed kind this request is a status UPDATE of, if any.
    fn status_of(&self) -> Option<Kind> {
        if self.sub_resource.as_deref() != Some("status") || self.operation.as_deref() != Some("UPDATE") {
            return None;
        }
        Kind::ALL.into_iter().find(|&kind| with_kind!(kind, K => K::is_of(&self.kind)))
    }
}

/// A status UPDATE of kind `K`, read in one pass, or again with the object raw to word the error.
fn read_status<'a, K: Reviewed>(body: &'a [u8]) -> Result<Review<'a>, ReviewError> {
    if let Ok(review) = serde_json::from_slice::<ReviewIn<K::In<'a>>>(body) {
        let (api_version, request) = header(review)?;
        return convert_status::<K, _>(api_version, request, Ok);
    }
    let review: ReviewIn<&'a RawValue> =
        serde_json::from_slice(body).map_err(|_| ReviewError::Json(explain::<ReviewIn<&RawValue>>(body)))?;
    let (api_version, request) = header(review)?;
    convert_status::<K, _>(api_version, request, parse::<K>)
}

/// What reading a status review needs of one kind: which requests are its, and the write its object makes.
trait Reviewed: Governed {
    /// Groups the kind was also served under that API servers may still send.
    const OLD_GROUPS: &'static [&'static str] = &[];

    /// Whether a request's group and kind are this kind's (of any version).
    fn is_of(request: &GroupVersionKind<'_>) -> bool {
        let group = request.group.as_ref();
        request.kind == Self::Lean::kind(&()) && (group == Self::Lean::group(&()) || Self::OLD_GROUPS.contains(&group))
    }

    /// The parts of the object the decision reads; everything else is skipped unparsed.
    type In<'a>: Deserialize<'a>;

    /// Takes the object's metadata (`None`: it has none).
    fn metadata<'a>(object: &mut Self::In<'a>) -> Option<MetaIn<'a>>;

    /// `write` (the request's namespace and name) completed with what `object` writes and the
    /// class it will be stored with (`old`'s), its shape, and the class field the write forged.
    #[allow(clippy::type_complexity)]
    fn written(
        object: Self::In<'_>,
        metadata: Option<&MetaIn<'_>>,
        old: Option<&StoredIn<'_>>,
        write: Write<Self::Entry>,
    ) -> Result<(Write<Self::Entry>, Self::Shape, Option<Forged>), ReviewError>;

    /// The review's target for a status write of this kind.
    fn target<'a>(status: Status<'a, Self::Entry, Self::Shape>) -> Target<'a>;
}

/// An object kept raw, read as kind `K`'s, or an error naming its field.
fn parse<'a, K: Reviewed>(raw: &'a RawValue) -> Result<K::In<'a>, ReviewError> {
    crate::strict::from_str(raw.get())
        .map_err(|_| ReviewError::Object(K::KIND, explain::<K::In<'a>>(raw.get().as_bytes())))
}

/// A status UPDATE of kind `K`, its object read by `read_object`, into a [`Review`].
fn convert_status<'a, K: Reviewed, O>(
    api_version: ApiVersion,
    mut request: RequestIn<'a, O>,
    read_object: impl FnOnce(O) -> Result<K::In<'a>, ReviewError>,
) -> Result<Review<'a>, ReviewError> {
    let mut object = read_object(request.object.take().ok_or(ReviewError::MissingObject(K::KIND))?)?;
    let written = K::metadata(&mut object);
    let old = request.old_object.take();
    // Judged by the stored metadata, `oldObject`'s (the API server refills the uid whatever was
    // written); without one (no API server sends an UPDATE without it), the object's.
    let (judged, metadata) = match &old {
        Some(old) if K::KIND.info().status_keeps_metadata => {
            (Some(&old.metadata), Metadata::compare(written.as_ref(), &old.metadata)?)
        }
        Some(old) => (Some(&old.metadata), None),
        None => (written.as_ref(), None),
    };
    let uid = judged.and_then(|m| m.uid.clone());
    let stored_status = old.as_ref().and_then(|old| old.status).map(|raw| RawStatus(raw.get()));
    let (namespace, name) = (request.namespace.take().unwrap_or_default(), request.name.take().unwrap_or_default());
    let target = match OutOfBounds::check(&namespace, &name, uid.as_deref()) {
        Some(bound) => Target::OutOfBounds(bound),
        None => {
            let write = Write { namespace, name, ..Write::default() };
            let (write, shape, forged) = K::written(object, judged, old.as_ref(), write)?;
            K::target(Status { write, object_uid: uid, shape, forged, metadata })
        }
    };
    Ok(finish(api_version, request, target, stored_status))
}

/// The checks every review passes before its object is read: kind, apiVersion, a request, its uid's bound.
fn header<O>(review: ReviewIn<'_, O>) -> Result<(ApiVersion, RequestIn<'_, O>), ReviewError> {
    let kind = review.kind.as_deref().unwrap_or("");
    if kind != "AdmissionReview" {
        return Err(ReviewError::Kind(truncate(kind, usize::MAX, MAX_QUOTED)));
    }
    let api_version = match review.api_version.as_deref().unwrap_or("") {
        "admission.k8s.io/v1" => ApiVersion::V1,
        "admission.k8s.io/v1beta1" => ApiVersion::V1beta1,
        other => return Err(ReviewError::ApiVersion(truncate(other, usize::MAX, MAX_QUOTED))),
    };
    let request = review.request.ok_or(ReviewError::MissingRequest)?;
    bounds::uid(&request.uid).map_err(ReviewError::Uid)?;
    Ok((api_version, request))
}

/// A review that is not a status write of a governed kind (its object skipped unread).
fn read_other(body: &[u8]) -> Result<Review<'_>, ReviewError> {
    let review: ReviewIn<de::IgnoredAny> =
        serde_json::from_slice(body).map_err(|_| ReviewError::Json(explain::<ReviewIn<&RawValue>>(body)))?;
    let (api_version, request) = header(review)?;
    let sub_resource = request.sub_resource.as_deref().unwrap_or("");
    // Every part is the caller's: each is cut, then the whole.
    let part = |text: &str| truncate(text, usize::MAX, 253);
    let what = format!(
        "{} of {}/{}{}{} ({}/{}) is not an Ingress status UPDATE; check the webhook's rules",
        part(request.operation.as_deref().unwrap_or("")),
        part(&request.kind.group),
        part(&request.kind.kind),
        if sub_resource.is_empty() { "" } else { "/" },
        part(sub_resource),
        part(request.namespace.as_deref().unwrap_or("")),
        part(request.name.as_deref().unwrap_or("")),
    );
    let target = Target::Other(truncate(&what, usize::MAX, MAX_QUOTED));
    Ok(finish(api_version, request, target, None))
}

/// The review of `target`, with what the response and a finding need of the request.
fn finish<'a, O>(
    api_version: ApiVersion,
    request: RequestIn<'a, O>,
    target: Target<'a>,
    stored_status: Option<RawStatus<'a>>,
) -> Review<'a> {
    let RequestIn { uid, dry_run, user_info: user, .. } = request;
    Review { api_version, uid, dry_run: dry_run.unwrap_or(false), user, target, stored_status }
}

/// Parses again, off the common path, to name the field that failed (`request.uid: missing ...`).
/// Cut to [`MAX_QUOTED`] bytes: serde_json quotes a string of the body whole.
fn explain<'a, T: Deserialize<'a>>(body: &'a [u8]) -> String {
    let text = match crate::strict::path_to_error::<T>(body) {
        Ok(_) => "unexpected trailing data".to_owned(),
        Err(e) => {
            let path = e.path().to_string();
            if path == "." || path == "?" { e.into_inner().to_string() } else { format!("{path}: {}", e.into_inner()) }
        }
    };
    truncate(&text, usize::MAX, MAX_QUOTED)
}

#[cfg(test)]
mod tests;
