//! The edit `cutover` makes to the policy file: one policy's source replaced, everything else
//! kept, and the checks that the result is a file the guard would load and a ConfigMap the API
//! server would store. Pure, text in and text out.

use serde_norway::{Mapping, Value};

use crate::{
    address,
    policy::{GatewayRef, ServiceRef},
};

/// The source a policy moves to, in the shapes of today's flags and policy fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NewSource {
    /// `publishService: NAMESPACE/NAME` (`--to-publish-service`).
    Service(ServiceRef),
    /// `publishStatusAddress: LIST` (`--to-publish-status-address`), validated as the guard
    /// validates the field, kept as written.
    StatusAddress(String),
    /// `publishGateway: NAMESPACE/NAME` (`--to-publish-gateway`): a Gateway's addresses, the
    /// Ingress → Gateway API cutover.
    Gateway(GatewayRef),
}

impl NewSource {
    /// The policy file's field for this source.
    pub(crate) fn field(&self) -> &'static str {
        match self {
            NewSource::Service(_) => "publishService",
            NewSource::StatusAddress(_) => "publishStatusAddress",
            NewSource::Gateway(_) => "publishGateway",
        }
    }

    /// The source as the policy's fields: one field, its value as written.
    pub(crate) fn fields(&self) -> Mapping {
        Mapping::from_iter([(Value::from(self.field()), Value::from(self.value()))])
    }

    fn value(&self) -> String {
        match self {
            NewSource::Service(svc) => svc.to_string(),
            NewSource::StatusAddress(list) => list.clone(),
            NewSource::Gateway(gw) => gw.to_string(),
        }
    }

    /// Validates `--to-publish-status-address` as `publishStatusAddress` is validated.
    pub(crate) fn status_address(list: &str) -> Result<NewSource, address::AddressError> {
        address::parse_static_list(list)?;
        Ok(NewSource::StatusAddress(list.to_owned()))
    }
}

/// Every field that names a policy's source: the new source replaces all of them.
/// `reportNodeInternalIp` only means something beside `publishPods`, which a cutover removes.
const SOURCE_FIELDS: [&str; 6] =
    ["publishService", "publishStatusAddress", "publishPods", "publishGateway", "sources", "reportNodeInternalIp"];

/// Why the file cannot be edited as asked; the CLI puts the flag on each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EditError {
    #[error("the file is not YAML: {0}")]
    NotYaml(String),
    #[error("the file has no `policies:` list")]
    NoPolicies,
    #[error("no policy named {name:?} in the file (it has: {known})")]
    NoSuchPolicy { name: String, known: String },
    #[error(
        "no source of policy {name:?} is kept from an earlier cutover: nothing to roll back (cutover keeps each policy's previous source when it moves it)"
    )]
    NothingKept { name: String },
    #[error(
        "policy {name:?}'s source changed since its cutover set it (now {}, cutover set {}): rolling back would overwrite that edit; edit the file by hand, or cut over again", sources[0], sources[1]
    )]
    /// `sources`: the policy's source now, and the one the cutover set (boxed: a rare error).
    ChangedSince { name: String, sources: Box<[String; 2]> },
}

/// `text` with the source fields of policy `name` replaced by `fields` (in the place of the
/// first old one, so the file reads as before), and the fields it had.
pub(crate) fn replace_fields(text: &str, name: &str, fields: &Mapping) -> Result<(String, Mapping), EditError> {
    let mut file: Value = serde_norway::from_str(text).map_err(|e| EditError::NotYaml(e.to_string()))?;
    let policy = policy_mut(&mut file, name)?;
    let old = source_fields(policy);
    let is_source = |key: &Value| key.as_str().is_some_and(|k| SOURCE_FIELDS.contains(&k));
    let at = policy.keys().take_while(|key| !is_source(key)).count();
    let mut kept: Vec<(Value, Value)> = std::mem::take(policy).into_iter().filter(|(key, _)| !is_source(key)).collect();
    kept.splice(at..at, fields.clone());
    *policy = kept.into_iter().collect();
    let text = serde_norway::to_string(&file).map_err(|e| EditError::NotYaml(e.to_string()))?;
    Ok((text, old))
}

/// The source fields of policy `name` in `text`, in [`SOURCE_FIELDS`] order.
pub(crate) fn fields_of(text: &str, name: &str) -> Result<Mapping, EditError> {
    let mut file: Value = serde_norway::from_str(text).map_err(|e| EditError::NotYaml(e.to_string()))?;
    Ok(source_fields(policy_mut(&mut file, name)?))
}

/// A policy's source fields in [`SOURCE_FIELDS`] order, so two readings compare equal.
fn source_fields(policy: &Mapping) -> Mapping {
    SOURCE_FIELDS.iter().filter_map(|f| policy.get(*f).map(|v| (Value::from(*f), v.clone()))).collect()
}

fn policy_mut<'f>(file: &'f mut Value, name: &str) -> Result<&'f mut Mapping, EditError> {
    let policies = file.get_mut("policies").and_then(Value::as_sequence_mut).ok_or(EditError::NoPolicies)?;
    let named = |p: &Value| p.get("name").and_then(Value::as_str).map(str::to_owned);
    let known: Vec<String> = policies.iter().filter_map(named).collect();
    policies
        .iter_mut()
        .find(|p| named(p).as_deref() == Some(name))
        .and_then(Value::as_mapping_mut)
        .ok_or_else(|| EditError::NoSuchPolicy { name: name.to_owned(), known: shown_names(&known) })
}

/// The names of a file's policies for an error message, bounded.
fn shown_names(names: &[String]) -> String {
    const SHOWN: usize = 10;
    if names.is_empty() {
        return "no named policies".to_owned();
    }
    let mut text = names
        .iter()
        .take(SHOWN)
        .map(|n| format!("{:?}", crate::names::truncate(n, 63, 63)))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    text
}

/// The API server's bound on all of an object's annotations together (keys and values).
pub(crate) const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;
/// The API server's bound on a ConfigMap's `data` and `binaryData` together.
pub(crate) const MAX_CONFIGMAP_DATA_BYTES: usize = 1024 * 1024;
/// The prefix of the annotation that keeps, per policy, the sources before a key's cutovers.
pub(crate) const PREVIOUS_PREFIX: &str = "cutover.ingress-status-guard/previous.";

/// Why the edited ConfigMap would not be stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SizeError {
    #[error(
        "the previous sources kept for --rollback ({previous} bytes) would not fit in the ConfigMap's annotations: they would total {total} bytes, over the API server's limit of {MAX_ANNOTATIONS_BYTES}"
    )]
    Annotations { previous: usize, total: usize },
    #[error(
        "the ConfigMap's data would total {total} bytes, over the API server's limit of {MAX_CONFIGMAP_DATA_BYTES}"
    )]
    Data { total: usize },
    #[error(
        "the key's name is too long to name the annotation that keeps its previous value ({PREVIOUS_PREFIX}KEY: at most 63 characters after the `/`, starting and ending with a letter or digit)"
    )]
    KeyName,
}

/// The annotation that keeps `key`'s previous value: a qualified name whose name part is
/// `previous.KEY`, so each key of the ConfigMap has its own.
pub(crate) fn previous_annotation(key: &str) -> Result<String, SizeError> {
    let full = format!("{PREVIOUS_PREFIX}{key}");
    let name = full.rsplit_once('/').map_or(full.as_str(), |(_, n)| n);
    let edges = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let valid = name.len() <= 63
        && edges(name.chars().next())
        && edges(name.chars().last())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if valid { Ok(full) } else { Err(SizeError::KeyName) }
}

/// Checks that a ConfigMap whose `data` and annotations are `other_data` and
/// `other_annotations` (byte totals, without `key` and its annotation) can take `new` as
/// `key`'s value and `previous` in its annotation.
pub(crate) fn check_fits(
    key: &str,
    annotation: &str,
    new: &str,
    previous: &str,
    other_data: usize,
    other_annotations: usize,
) -> Result<(), SizeError> {
    let data = other_data + key.len() + new.len();
    if data > MAX_CONFIGMAP_DATA_BYTES {
        return Err(SizeError::Data { total: data });
    }
    let total = other_annotations + annotation.len() + previous.len();
    if total > MAX_ANNOTATIONS_BYTES {
        return Err(SizeError::Annotations { previous: previous.len(), total });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy;

    const FILE: &str = "\
# the guard's policies
policies:
  - name: nginx
    ingressClasses: [nginx]
    publishService: ingress-nginx/controller
    mode: enforce
  - name: pods
    ingressClasses: [other]
    publishPods: {namespace: kube-system, selector: app=x}
    reportNodeInternalIp: true
";

    /// `text` with policy `name`'s source replaced by `to`. Comments and layout are not kept (the
    /// file is written back as plain YAML).
    fn replace_source(text: &str, name: &str, to: &NewSource) -> Result<String, EditError> {
        replace_fields(text, name, &to.fields()).map(|(text, _)| text)
    }

    fn svc(text: &str) -> NewSource {
        NewSource::Service(crate::policy::ServiceRef::service(text).unwrap())
    }

    #[test]
    fn the_source_is_replaced_in_place_and_the_rest_is_kept() {
        let out = replace_source(FILE, "nginx", &svc("traefik/traefik")).unwrap();
        let policies = policy::parse_file("f", &out).unwrap();
        let p = policies.of(crate::kind::Kind::Ingress).find(|p| p.name == "nginx").unwrap();
        assert_eq!(policy::SourceList(&p.sources).to_string(), "service traefik/traefik");
        assert_eq!(p.scope.classes, ["nginx"]);
        // Field order is kept: the source sits where the old one was, before `mode`.
        let (source_at, mode_at) = (out.find("publishService").unwrap(), out.find("mode").unwrap());
        assert!(source_at < mode_at, "{out}");
        let other = policies.of(crate::kind::Kind::Ingress).find(|p| p.name == "pods").unwrap();
        assert!(policy::SourceList(&other.sources).to_string().starts_with("pods kube-system/"), "{out}");
    }

    #[test]
    fn every_old_source_field_goes() {
        let out =
            replace_source(FILE, "pods", &NewSource::status_address("192.0.2.1, lb.example.com").unwrap()).unwrap();
        let policies = policy::parse_file("f", &out).unwrap();
        let p = policies.of(crate::kind::Kind::Ingress).find(|p| p.name == "pods").unwrap();
        assert_eq!(policy::SourceList(&p.sources).to_string(), "static [192.0.2.1,lb.example.com]");
        assert!(!out.contains("reportNodeInternalIp") && !out.contains("publishPods"), "{out}");
        let many = "policies:\n  - name: a\n    sources:\n      - publishService: x/y\n      - publishStatusAddress: 192.0.2.9\n";
        let out = replace_source(many, "a", &svc("x/z")).unwrap();
        assert!(!out.contains("sources"), "{out}");
        assert!(policy::parse_file("f", &out).is_ok(), "{out}");
    }

    #[test]
    fn a_policy_moves_to_a_gateway_and_back() {
        let gw = NewSource::Gateway(GatewayRef::gateway("edge/public").unwrap());
        let out = replace_source(FILE, "nginx", &gw).unwrap();
        assert!(out.contains("publishGateway: edge/public") && !out.contains("publishService"), "{out}");
        let p = policy::parse_file("f", &out)
            .unwrap()
            .of(crate::kind::Kind::Ingress)
            .find(|p| p.name == "nginx")
            .cloned()
            .unwrap();
        assert_eq!(policy::SourceList(&p.sources).to_string(), "gateway edge/public");
        // From a Gateway back to a Service: the Gateway field goes as the others do.
        let back = replace_source(&out, "nginx", &svc("ingress-nginx/controller")).unwrap();
        assert!(!back.contains("publishGateway") && back.contains("publishService"), "{back}");
    }

    #[test]
    fn errors_say_what_is_missing() {
        assert_eq!(
            replace_source(FILE, "contour", &svc("a/b")),
            Err(EditError::NoSuchPolicy { name: "contour".into(), known: "\"nginx\", \"pods\"".into() })
        );
        assert_eq!(replace_source("a: 1\n", "x", &svc("a/b")), Err(EditError::NoPolicies));
        assert!(matches!(replace_source("policies: [", "x", &svc("a/b")), Err(EditError::NotYaml(_))));
        assert!(NewSource::status_address("192.0.2.1,not a host").is_err());
        let many: Vec<String> = (0..12).map(|i| format!("p{i}")).collect();
        assert!(shown_names(&many).ends_with("\"p9\" and 2 more"), "{}", shown_names(&many));
    }

    #[test]
    fn an_edit_that_the_guard_would_refuse_is_caught_with_its_error() {
        // Two policies of one class overlap: the guard's reload refuses such a file.
        let file = "policies:\n  - name: a\n    ingressClasses: [x]\n    publishService: n/a\n  - name: b\n    ingressClasses: [y]\n    publishService: n/b\n";
        let out = replace_source(file, "a", &svc("n/c")).unwrap();
        assert!(policy::parse_file("f", &out).is_ok());
        let err =
            policy::parse_file("configmap ns/cm, key config.yaml", "policies:\n  - name: a\n    publishService: bad\n")
                .unwrap_err();
        assert!(
            err.to_string().starts_with("config file configmap ns/cm, key config.yaml: policies[0].publishService"),
            "{err}"
        );
    }

    #[test]
    fn annotation_names_and_sizes_are_bounded() {
        assert_eq!(previous_annotation("config.yaml").unwrap(), "cutover.ingress-status-guard/previous.config.yaml");
        assert_eq!(previous_annotation(&"k".repeat(54)).unwrap().len(), PREVIOUS_PREFIX.len() + 54);
        for bad in ["k".repeat(55), "config.".into(), "a b".into()] {
            assert_eq!(previous_annotation(&bad), Err(SizeError::KeyName), "{bad}");
        }
        let a = "cutover.ingress-status-guard/previous.config.yaml";
        assert_eq!(check_fits("config.yaml", a, "new", "old", 0, 0), Ok(()));
        let big = "x".repeat(MAX_ANNOTATIONS_BYTES);
        assert!(matches!(check_fits("config.yaml", a, "new", &big, 0, 0), Err(SizeError::Annotations { .. })));
        assert!(matches!(
            check_fits("config.yaml", a, "new", "old", 0, MAX_ANNOTATIONS_BYTES - a.len() - 2),
            Err(SizeError::Annotations { .. })
        ));
        assert!(matches!(
            check_fits("config.yaml", a, "new", "old", MAX_CONFIGMAP_DATA_BYTES, 0),
            Err(SizeError::Data { .. })
        ));
    }
}
