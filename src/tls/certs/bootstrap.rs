//! `certs bootstrap` (a Job): a serving certificate without cert-manager, as ingress-nginx's
//! kube-webhook-certgen does. The Secret is created, or renewed when it does not verify or
//! expires soon; writes carry the resourceVersion read, so racing bootstraps never overwrite
//! each other. Every webhook's `caBundle` then gets the Secret's CA, and after a renewal the old
//! one too, so pods still serving the old certificate stay trusted until they reload.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant, SystemTime},
};

use k8s_openapi::{ByteString, api::admissionregistration::v1::MutatingWebhookConfiguration, api::core::v1::Secret};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use rustls::pki_types::{CertificateDer, pem::PemObject};
use serde_json::json;

use super::{Ca, CertError, days, service_names, verify_serving};

const SECRET_TYPE: &str = "kubernetes.io/tls";
const FIELD_MANAGER: &str = "ingress-status-guard-certs";

/// What `certs bootstrap` keeps.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub service: String,
    pub namespace: String,
    pub secret: String,
    pub webhook_configuration: String,
    /// Renew the certificate when it expires within this many days.
    pub renew_before_days: u32,
    pub validity_days: u32,
    /// How long to wait for the webhook configuration to exist.
    pub wait: Duration,
}

/// What `ensure_secret` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SecretAction {
    Created,
    Renewed { reason: String },
    Kept,
}

/// Ensures the Secret, then the caBundles, and logs what was done.
pub(crate) async fn run(client: Client, args: &Settings) -> Result<(), CertError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &args.namespace);
    let (action, ca_pem, previous_ca) = ensure_secret(&secrets, args).await?;
    match &action {
        SecretAction::Created => tracing::info!(secret = %args.secret, "created the serving Secret"),
        SecretAction::Renewed { reason } => {
            tracing::info!(secret = %args.secret, %reason, "renewed the serving Secret");
        }
        SecretAction::Kept => tracing::info!(secret = %args.secret, "the serving Secret is valid; kept it"),
    }
    let configs: Api<MutatingWebhookConfiguration> = Api::all(client);
    let patched = patch_ca_bundles(&configs, args, &ca_pem, previous_ca.as_deref()).await?;
    tracing::info!(
        secret = %format!("{}/{}", args.namespace, args.secret),
        action = ?action,
        webhook_configuration = %args.webhook_configuration,
        patched = %patched.join(","),
        "certificates bootstrapped"
    );
    Ok(())
}

fn kube_error(what: String) -> impl FnOnce(kube::Error) -> CertError {
    move |source| CertError::Kube { what, source }
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Returns what was done, the CA now in the Secret, and the CA it replaced (on renewal).
async fn ensure_secret(
    api: &Api<Secret>,
    args: &Settings,
) -> Result<(SecretAction, String, Option<String>), CertError> {
    let names = service_names(&args.service, &args.namespace);
    let shown = format!("Secret {}/{}", args.namespace, args.secret);
    let validity = days(args.validity_days);
    let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    for _ in 0..5 {
        let existing = api.get_opt(&args.secret).await.map_err(kube_error(format!("get {shown}")))?;
        let Some(existing) = existing else {
            let (secret, ca_pem) = new_secret(args, &names, validity, None)?;
            match api.create(&params, &secret).await {
                Ok(_) => return Ok((SecretAction::Created, ca_pem, None)),
                Err(e) if is_status(&e, 409) => continue, // another bootstrap created it first
                Err(e) => return Err(kube_error(format!("create {shown}"))(e)),
            }
        };
        if existing.type_.as_deref() != Some(SECRET_TYPE) {
            return Err(CertError::Usage(format!(
                "{shown} has type {:?}, not {SECRET_TYPE}; delete it and run again",
                existing.type_.as_deref().unwrap_or("")
            )));
        }
        let renew_before = days(args.renew_before_days);
        let reason = match assess(&existing, &names, renew_before, SystemTime::now()) {
            Ok(ca_pem) => return Ok((SecretAction::Kept, ca_pem, None)),
            Err(reason) => reason,
        };
        // Kept in the caBundle until the next renewal, if it is a readable CA bundle.
        let previous_ca = data(&existing, "ca.crt").filter(|ca| {
            CertificateDer::pem_slice_iter(ca.as_bytes()).all(|c| c.is_ok()) && !der_set(ca.as_bytes()).is_empty()
        });
        let (mut secret, ca_pem) = new_secret(args, &names, validity, Some(&existing))?;
        secret.metadata.resource_version = existing.metadata.resource_version.clone();
        match api.replace(&args.secret, &params, &secret).await {
            Ok(_) => return Ok((SecretAction::Renewed { reason }, ca_pem, previous_ca)),
            Err(e) if is_status(&e, 409) => continue, // changed since read: look again
            Err(e) => return Err(kube_error(format!("update {shown}"))(e)),
        }
    }
    Err(CertError::Contended(shown))
}

fn data(secret: &Secret, key: &str) -> Option<String> {
    secret.data.as_ref()?.get(key).and_then(|b| String::from_utf8(b.0.clone()).ok())
}

/// `Ok(ca.crt)` when the Secret serves `names` correctly for longer than `renew_before` from
/// `now`; else why it must be renewed.
pub(crate) fn assess(
    secret: &Secret,
    names: &[String],
    renew_before: Duration,
    now: SystemTime,
) -> Result<String, String> {
    let get = |key: &str| data(secret, key).ok_or_else(|| format!("{key} is missing or not UTF-8"));
    let (cert, key, ca) = (get("tls.crt")?, get("tls.key")?, get("ca.crt")?);
    let expiry = verify_serving(cert.as_bytes(), key.as_bytes(), ca.as_bytes(), names)?;
    let left = expiry.duration_since(now).unwrap_or_default();
    if left <= renew_before {
        return Err(format!(
            "expires in {} days (renewing {} days before)",
            left.as_secs() / 86400,
            renew_before.as_secs() / 86400
        ));
    }
    Ok(ca)
}

fn new_secret(
    args: &Settings,
    names: &[String],
    validity: Duration,
    existing: Option<&Secret>,
) -> Result<(Secret, String), CertError> {
    let ca = Ca::new(&super::ca_name(&args.service, &args.namespace), validity)?;
    let (cert_pem, key_pem) = ca.issue(names, validity)?;
    let ca_pem = ca.pem();
    let mut metadata = existing.map(|s| s.metadata.clone()).unwrap_or_default();
    metadata.name = Some(args.secret.clone());
    metadata.namespace = Some(args.namespace.clone());
    metadata.managed_fields = None;
    metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert("app.kubernetes.io/name".into(), "ingress-status-guard".into());
    let data = [("ca.crt", &ca_pem), ("tls.crt", &cert_pem), ("tls.key", &key_pem)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
        .collect();
    let secret = Secret { metadata, type_: Some(SECRET_TYPE.into()), data: Some(data), ..Default::default() };
    Ok((secret, ca_pem))
}

/// Sets the caBundle of every webhook that does not trust `ca_pem` yet to `ca_pem` and
/// `previous_ca` (the CA a renewal just replaced); returns the names of the webhooks patched.
async fn patch_ca_bundles(
    api: &Api<MutatingWebhookConfiguration>,
    args: &Settings,
    ca_pem: &str,
    previous_ca: Option<&str>,
) -> Result<Vec<String>, CertError> {
    let name = &args.webhook_configuration;
    let shown = format!("MutatingWebhookConfiguration {name}");
    let deadline = Instant::now() + args.wait;
    let config = loop {
        match api.get_opt(name).await.map_err(kube_error(format!("get {shown}")))? {
            Some(config) => break config,
            None if Instant::now() < deadline => {
                tracing::info!(webhook_configuration = %name, "waiting for the webhook configuration to exist");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            None => return Err(CertError::NotFound { what: shown, seconds: args.wait.as_secs() }),
        }
    };
    let want = der_set(ca_pem.as_bytes());
    let bundle = match previous_ca {
        Some(old) if der_set(old.as_bytes()) != want => format!("{}\n{}", ca_pem.trim_end(), old.trim_end()) + "\n",
        _ => ca_pem.to_owned(),
    };
    let encoded = super::ca_bundle(&bundle);
    let mut patched = Vec::new();
    for webhook in config.webhooks.iter().flatten() {
        let current = webhook.client_config.ca_bundle.as_ref().map(|b| der_set(&b.0)).unwrap_or_default();
        if want.iter().all(|ca| current.contains(ca)) {
            continue;
        }
        patched.push(webhook.name.clone());
    }
    if patched.is_empty() {
        return Ok(patched);
    }
    // Strategic merge: webhooks merge by name, so only their caBundle changes.
    let webhooks: Vec<_> = patched.iter().map(|w| json!({"name": w, "clientConfig": {"caBundle": encoded}})).collect();
    let patch = json!({"webhooks": webhooks});
    let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    api.patch(name, &params, &Patch::Strategic(&patch)).await.map_err(kube_error(format!("patch {shown}")))?;
    Ok(patched)
}

/// The DER of every certificate in a PEM bundle (unparsable blocks are skipped).
fn der_set(pem: &[u8]) -> Vec<Vec<u8>> {
    CertificateDer::pem_slice_iter(pem).filter_map(Result::ok).map(|c| c.as_ref().to_vec()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> Settings {
        Settings {
            service: "isg".into(),
            namespace: "ns".into(),
            secret: "isg-tls".into(),
            webhook_configuration: "isg".into(),
            renew_before_days: 30,
            validity_days: 365,
            wait: Duration::ZERO,
        }
    }

    #[test]
    fn assess_secrets() {
        let a = args();
        let names = service_names(&a.service, &a.namespace);
        let (secret, ca) = new_secret(&a, &names, days(365), None).unwrap();
        assert_eq!(secret.type_.as_deref(), Some(SECRET_TYPE));
        let now = SystemTime::now();
        assert_eq!(assess(&secret, &names, days(30), now), Ok(ca));

        let soon = now + days(340);
        let reason = assess(&secret, &names, days(30), soon).unwrap_err();
        assert!(reason.starts_with("expires in 2"), "{reason}");

        let other_names = service_names("other", "ns");
        assert!(assess(&secret, &other_names, days(30), now).unwrap_err().contains("other.ns.svc"));

        let mut broken = secret.clone();
        broken.data.as_mut().unwrap().remove("tls.key");
        assert_eq!(assess(&broken, &names, days(30), now).unwrap_err(), "tls.key is missing or not UTF-8");

        let (other, _) = new_secret(&a, &names, days(365), None).unwrap();
        let mut mixed = secret.clone();
        mixed.data.as_mut().unwrap().insert("ca.crt".into(), other.data.as_ref().unwrap()["ca.crt"].clone());
        let reason = assess(&mixed, &names, days(30), now).unwrap_err();
        assert!(reason.contains("UnknownIssuer"), "{reason}");
    }

    #[test]
    fn renewal_keeps_the_existing_metadata() {
        let a = args();
        let names = service_names(&a.service, &a.namespace);
        let (mut first, _) = new_secret(&a, &names, days(1), None).unwrap();
        first.metadata.annotations = Some([("keep".to_owned(), "me".to_owned())].into());
        let (second, _) = new_secret(&a, &names, days(1), Some(&first)).unwrap();
        assert_eq!(second.metadata.annotations, first.metadata.annotations);
        assert_ne!(second.data, first.data);
    }

    #[test]
    fn der_sets() {
        let a = generate_pair();
        let b = generate_pair();
        assert_eq!(der_set(a.as_bytes()).len(), 1);
        assert_eq!(der_set(format!("{a}{b}").as_bytes()).len(), 2);
        assert!(der_set(b"garbage").is_empty());
    }

    fn generate_pair() -> String {
        super::super::generate("ca", &["x.ns.svc".into()]).unwrap().ca_pem
    }
}
