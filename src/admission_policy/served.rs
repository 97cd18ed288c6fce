//! Whether the API server can take admission policies, and in which version: read from
//! `/version` and the discovery of `admissionregistration.k8s.io`, once, when `serve` starts in
//! `--admission=policy`. The choice is pure ([`choose`]); [`discover`] only reads.

use kube::Client;

use super::ApiVersion;
use crate::client::{CALL_TIMEOUT, within};

/// Why `--admission=policy` cannot run against this API server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotServed {
    #[error(
        "--admission=policy: the API server ({version}) serves no MutatingAdmissionPolicy: it is GA (admissionregistration.k8s.io/v1) from Kubernetes 1.36; on 1.34 and 1.35 start kube-apiserver with --feature-gates=MutatingAdmissionPolicy=true and --runtime-config=admissionregistration.k8s.io/v1beta1=true; older versions have none (use --admission=webhook)"
    )]
    Missing { version: String },
    #[error(
        "--admission=policy: the API server ({version}) serves no ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA since Kubernetes 1.30), which audit and deny policies become"
    )]
    NoValidating { version: String },
    #[error("--admission=policy: cannot read the API server's {what}: {reason}")]
    Unreadable { what: &'static str, reason: String },
}

/// What discovery says is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Served {
    /// `mutatingadmissionpolicies` in `admissionregistration.k8s.io/v1`.
    pub(crate) mutating_v1: bool,
    /// `mutatingadmissionpolicies` in `admissionregistration.k8s.io/v1beta1`.
    pub(crate) mutating_v1beta1: bool,
    /// `validatingadmissionpolicies` in `admissionregistration.k8s.io/v1`.
    pub(crate) validating_v1: bool,
}

/// The MutatingAdmissionPolicy version to write: `v1` when served (1.36+), else `v1beta1` when
/// served (1.34 and 1.35 with the gate); the ValidatingAdmissionPolicy is needed either way.
/// Discovery decides, not the version number: a distribution may back-port or disable a group.
pub(crate) fn choose(version: &str, served: Served) -> Result<ApiVersion, NotServed> {
    let version = version.to_owned();
    let api = if served.mutating_v1 {
        ApiVersion::V1
    } else if served.mutating_v1beta1 {
        ApiVersion::V1beta1
    } else {
        return Err(NotServed::Missing { version });
    };
    if !served.validating_v1 {
        return Err(NotServed::NoValidating { version });
    }
    Ok(api)
}

/// Reads `/version` and the two group versions' resources; a 404 reads as not served.
pub(crate) async fn discover(client: &Client) -> Result<ApiVersion, NotServed> {
    let info = within(CALL_TIMEOUT, client.apiserver_version())
        .await
        .map_err(|e| NotServed::Unreadable { what: "version (/version)", reason: e.to_string() })?;
    let mut served = Served::default();
    for group_version in ["admissionregistration.k8s.io/v1", "admissionregistration.k8s.io/v1beta1"] {
        let resources = match within(CALL_TIMEOUT, client.list_api_group_resources(group_version)).await {
            Ok(list) => list.resources,
            Err(crate::client::CallError::Api(kube::Error::Api(status))) if status.code == 404 => Vec::new(),
            Err(e) => return Err(NotServed::Unreadable { what: "API discovery", reason: e.to_string() }),
        };
        let has = |name: &str| resources.iter().any(|r| r.name == name);
        if group_version.ends_with("/v1") {
            served.mutating_v1 = has("mutatingadmissionpolicies");
            served.validating_v1 = has("validatingadmissionpolicies");
        } else {
            served.mutating_v1beta1 = has("mutatingadmissionpolicies");
        }
    }
    let chosen = choose(&info.git_version, served)?;
    tracing::info!(server_version = %info.git_version, api_version = chosen.group_version(), "admission policy mode: the API server serves MutatingAdmissionPolicy");
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_picks_the_version_or_names_what_to_turn_on() {
        let all = Served { mutating_v1: true, mutating_v1beta1: true, validating_v1: true };
        assert_eq!(choose("v1.37.2", all), Ok(ApiVersion::V1));
        let beta = Served { mutating_v1: false, ..all };
        assert_eq!(choose("v1.35.0", beta), Ok(ApiVersion::V1beta1));
        let none = Served { mutating_v1: false, mutating_v1beta1: false, validating_v1: true };
        let e = choose("v1.31.14", none).unwrap_err().to_string();
        for needed in [
            "v1.31.14",
            "--feature-gates=MutatingAdmissionPolicy=true",
            "--runtime-config=admissionregistration.k8s.io/v1beta1=true",
            "1.36",
        ] {
            assert!(e.contains(needed), "{e} lacks {needed}");
        }
        let old = Served::default();
        assert!(matches!(choose("v1.23.17", old), Err(NotServed::Missing { .. })));
        let no_vap = Served { validating_v1: false, ..all };
        assert!(choose("v1.37.2", no_vap).unwrap_err().to_string().contains("ValidatingAdmissionPolicy"));
    }
}
