//! The end-to-end proof: a server-side dry-run status write of a governed Ingress must come back
//! as its policy's mode says. Nothing is stored: a dry run writes nothing, and no Event is made.

use std::time::Duration;

use k8s_openapi::api::networking::v1::Ingress;
use kube::{
    Api,
    api::{Patch, PatchParams},
    core::Request,
};
use serde_json::json;

use super::report::Finding;
use crate::{
    client::bounded,
    kind::{Kind, ingress},
    policy::{Mode, Policies, Policy},
};

const CHECK: &str = "dry-run-write";
/// Bytes of the API server's answer read, at most: an Ingress is far smaller.
const MAX_BODY: usize = 4 << 20;
/// Addresses of one status read, at most (the API server stores no more than that sensibly).
const MAX_ADDRESSES: usize = 64;
/// `Warning` headers kept, at most, and the characters kept of each.
const MAX_WARNINGS: usize = 8;
const MAX_WARNING_CHARS: usize = 240;
/// The field manager of the dry-run write, as the audit log and the webhook's finding name it.
pub(crate) const FIELD_MANAGER: &str = "ingress-status-guard-doctor";
/// Addresses from TEST-NET-1 (RFC 5737) that no real load balancer hands out.
const PROBES: [&str; 2] = ["192.0.2.77", "192.0.2.78"];

/// The Ingress policy that governs class `class` by the class alone (no reads of selectors).
fn governing<'p>(policies: &'p Policies, class: Option<&str>) -> Option<&'p Policy> {
    policies.of(Kind::Ingress).find(|p| {
        let scope = &p.scope;
        (scope.classes.is_empty() && scope.controllers.is_empty())
            || class.is_some_and(|c| scope.classes.iter().any(|x| x == c))
            || (class.is_none() && scope.without_class)
    })
}

fn class_of(ingress: &Ingress) -> Option<String> {
    let field = ingress.spec.as_ref().and_then(|s| s.ingress_class_name.clone());
    let annotation = ingress.metadata.annotations.as_ref().and_then(|a| a.get(ingress::CLASS_ANNOTATION).cloned());
    ingress::class(field, annotation).0
}

fn addresses(ingress: &Ingress) -> Vec<String> {
    let entries = ingress.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|lb| lb.ingress.as_ref());
    entries
        .into_iter()
        .flatten()
        .take(MAX_ADDRESSES)
        .map(|e| e.ip.clone().or_else(|| e.hostname.clone()).unwrap_or_default())
        .collect()
}

/// The Ingress `--probe` names, and the mode of the policy that governs it by its class.
pub(crate) async fn named(
    client: &kube::Client,
    probe: &(String, String),
    policies: &Policies,
    timeout: Duration,
) -> Result<(Ingress, Mode), Finding> {
    let (namespace, name) = probe;
    let api = Api::<Ingress>::namespaced(client.clone(), namespace);
    let found = bounded(|| format!("get Ingress {namespace}/{name}"), timeout, api.get_opt(name))
        .await
        .map_err(|e| Finding::fail(CHECK, e.to_string(), "give doctor an identity that may get that Ingress"))?;
    let Some(found) = found else {
        return Err(Finding::fail(
            CHECK,
            format!("Ingress {namespace}/{name} (--probe) not found"),
            "name an existing Ingress",
        ));
    };
    match governing(policies, class_of(&found).as_deref()) {
        Some(policy) => Ok((found, policy.mode)),
        None => Err(Finding::fail(
            CHECK,
            format!("no policy governs Ingress {namespace}/{name} by its class"),
            "name an Ingress of a governed class with --probe",
        )),
    }
}

/// Whether any policy governs Ingresses: the dry-run write probes Ingresses only.
pub(crate) fn skipped(policies: &Policies) -> Option<Finding> {
    let none = policies.of(Kind::Ingress).next().is_none();
    none.then(|| Finding::skip(CHECK, "no Ingress policy: the dry-run write probes Ingresses only", ""))
}

/// The dry-run write to `ingress`, governed in `mode`, and what it proves.
pub(crate) async fn dry_run(client: &kube::Client, ingress: &Ingress, mode: Mode, timeout: Duration) -> Finding {
    let namespace = ingress.metadata.namespace.clone().unwrap_or_default();
    let name = ingress.metadata.name.clone().unwrap_or_default();
    let stored = addresses(ingress);
    let written = if stored == [PROBES[0]] { PROBES[1] } else { PROBES[0] };
    match write(client, &namespace, &name, written, timeout).await {
        Ok(answer) => judge(&format!("{namespace}/{name}"), written, mode, &answer),
        Err(e) => Finding::fail(CHECK, e, "check that doctor may patch ingresses/status (the chart's doctor Role)"),
    }
}

/// What the API server answered to the dry-run write.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    code: u16,
    /// The addresses the object would be stored with (2xx), or the API server's message.
    addresses: Vec<String>,
    message: String,
    warnings: Vec<String>,
}

async fn write(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    address: &str,
    timeout: Duration,
) -> Result<Answer, String> {
    let params = PatchParams { dry_run: true, field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
    let patch = Patch::Merge(json!({"status": {"loadBalancer": {"ingress": [{"ip": address}]}}}));
    let url = Api::<Ingress>::namespaced(client.clone(), namespace).resource_url().to_owned();
    let request = Request::new(url).patch_subresource("status", name, &params, &patch).map_err(|e| e.to_string())?;
    let exchange = async {
        let response = client.send(request.map(kube::client::Body::from)).await?;
        let code = response.status().as_u16();
        let warnings: Vec<String> = response
            .headers()
            .get_all("warning")
            .iter()
            .take(MAX_WARNINGS)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).chars().take(MAX_WARNING_CHARS).collect())
            .collect();
        let body = response.into_body().collect_bytes().await?;
        Ok::<_, kube::Error>((code, warnings, body))
    };
    let (code, warnings, body) = match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => return Err(format!("cannot write: {}", crate::client::describe(&e))),
        Err(_) => return Err(format!("no answer to the dry-run write within {timeout:?} (--request-timeout)")),
    };
    if body.len() > MAX_BODY {
        return Err(format!("the API server answered with {} bytes, over {MAX_BODY}", body.len()));
    }
    if (200..300).contains(&code) {
        let ingress: Ingress = serde_json::from_slice(&body).map_err(|e| format!("unreadable answer: {e}"))?;
        return Ok(Answer { code, addresses: addresses(&ingress), message: String::new(), warnings });
    }
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let message = status["message"].as_str().unwrap_or("(no message)").chars().take(MAX_WARNING_CHARS * 2).collect();
    Ok(Answer { code, addresses: vec![], message, warnings })
}

/// What the answer proves for an object governed in `mode` (pure).
fn judge(object: &str, written: &str, mode: Mode, answer: &Answer) -> Finding {
    let wrote = format!("dry-run status write of {written} to Ingress {object}");
    // The webhook's refusal, or (policy mode) the ValidatingAdmissionPolicy's.
    let by_webhook = answer.message.contains("admission webhook") && answer.message.contains("denied the request");
    let by_policy = answer.message.contains("ValidatingAdmissionPolicy") && answer.message.contains("denied request");
    let outcome = match (answer.code, answer.addresses.as_slice()) {
        (200..=299, [only]) if only == written && answer.warnings.is_empty() => {
            return Finding::fail(
                CHECK,
                format!(
                    "{wrote} came back unchanged, with no warning: the webhook was not called, failed open (failurePolicy: Ignore) or does not govern it (policy mode: no admission policy matched it)"
                ),
                "see the checks above; the API server's log names the failed call (`failed calling webhook`)",
            );
        }
        (200..=299, [only]) if only == written => {
            (Mode::Audit, format!("let through with the webhook's warning: {}", answer.warnings.join("; ")))
        }
        (200..=299, stored) => (Mode::Enforce, format!("came back rewritten to [{}]", stored.join(","))),
        (_, _) if by_webhook || by_policy => (Mode::Deny, format!("refused: {}", answer.message)),
        (code, _) => {
            return Finding::fail(
                CHECK,
                format!("{wrote} failed (HTTP {code}): {}", answer.message),
                "a failed webhook call under failurePolicy: Fail blocks every status write: see the checks above",
            );
        }
    };
    let (shown, what) = outcome;
    if shown != mode {
        return Finding::fail(
            CHECK,
            format!("{wrote} {what}, as {shown} does; the policy governing it is in {mode}"),
            "give doctor the guard's policies (--config or the same policy flags)",
        );
    }
    Finding::pass(CHECK, format!("{wrote} {what} ({mode}): admission enforces the policy end to end"))
}

#[cfg(test)]
mod tests {
    use super::super::report::State;
    use super::*;

    fn answer(code: u16, addresses: &[&str], message: &str, warnings: &[&str]) -> Answer {
        Answer {
            code,
            addresses: addresses.iter().map(|s| (*s).to_owned()).collect(),
            message: message.into(),
            warnings: warnings.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn each_mode_has_its_proof() {
        let rewritten = answer(200, &["203.0.113.10"], "", &["rewritten"]);
        let warned = answer(200, &["192.0.2.77"], "", &["policy default: not canonical"]);
        let refused = answer(400, &[], "admission webhook \"x\" denied the request: canonical is ...", &[]);
        let unchanged = answer(200, &["192.0.2.77"], "", &[]);
        let failed = answer(500, &[], "Internal error occurred: failed calling webhook \"x\": connection refused", &[]);
        let judged = |mode, a: &Answer| judge("ns/web", "192.0.2.77", mode, a);
        assert_eq!(judged(Mode::Enforce, &rewritten).state, State::Pass);
        assert_eq!(judged(Mode::Audit, &warned).state, State::Pass);
        assert_eq!(judged(Mode::Deny, &refused).state, State::Pass);
        let refused_by_policy = answer(
            422,
            &[],
            "ingresses.networking.k8s.io \"web\" is forbidden: ValidatingAdmissionPolicy 'g-p' with binding 'g-p' denied request: canonical is ...",
            &[],
        );
        assert_eq!(judged(Mode::Deny, &refused_by_policy).state, State::Pass);
        let wrong_mode = judged(Mode::Deny, &rewritten);
        assert!(wrong_mode.found.contains("as enforce does; the policy governing it is in deny"), "{wrong_mode:?}");
        let silent = judged(Mode::Enforce, &unchanged);
        assert!(silent.found.contains("came back unchanged, with no warning"), "{silent:?}");
        let down = judged(Mode::Enforce, &failed);
        assert!(down.found.contains("HTTP 500") && down.found.contains("failed calling webhook"), "{down:?}");
    }
}
