//! `version`: this binary's version and revision and, unless `--client`, the guard's in the
//! cluster (its Deployments' images, its leader's Lease), with a warning for each minor-version
//! skew and, with `--config`, each policy field the running guard does not know.

use std::{process::ExitCode, time::Duration};

use clap::Args;
use k8s_openapi::api::{apps::v1::Deployment, coordination::v1::Lease};
use kube::{Api, api::ListParams};
use serde::Serialize;

use super::{client::ClientArgs, duration::Seconds, output::Format};
use crate::{
    client::{RequestError, bounded, connect_within},
    metrics::{REVISION, VERSION},
    reconcile::leader::{POLICY_FIELDS_ANNOTATION, VERSION_ANNOTATION},
};

/// The label the chart puts on the guard's Deployment.
const DEFAULT_SELECTOR: &str = "app.kubernetes.io/name=ingress-status-guard";

#[derive(Args, Debug)]
#[command(mut_arg("kubeconfig", |a| a.help(KUBECONFIG_HELP)))]
pub(crate) struct VersionArgs {
    /// Only this binary's version and revision; the cluster is not asked.
    #[arg(long)]
    pub client: bool,
    #[command(flatten)]
    pub target: ClientArgs,
    /// Longest wait for each request to the API server, in seconds (`30` or `30s`).
    #[arg(long, env = "ISG_REQUEST_TIMEOUT", default_value = "30", value_parser = Seconds::UP_TO_AN_HOUR)]
    pub request_timeout: Duration,
    /// The guard's leader Lease (`serve --leader-election-lease-name`; the chart's release
    /// fullname), on which the leader writes its version.
    #[arg(long, env = "ISG_LEADER_ELECTION_LEASE_NAME", default_value = crate::admission_policy::DEFAULT_LEASE)]
    pub leader_election_lease_name: String,
    /// Namespace of the guard (its Lease and Deployment); default: every namespace.
    #[arg(long, env = "ISG_LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// Label selector of the guard's Deployments.
    #[arg(long, env = "ISG_VERSION_SELECTOR", default_value = DEFAULT_SELECTOR)]
    pub selector: String,
    /// A policy file about to be rolled out: a warning names each field of its policies that a
    /// running guard does not know (and would refuse the file for).
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, env = "ISG_OUTPUT", value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

const KUBECONFIG_HELP: &str =
    "kubeconfig to read the guard's Deployments and Lease with; default: in-cluster config, then KUBECONFIG";

/// What `version` prints (`-o json|yaml`: this shape, camelCase).
#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Report {
    pub client: Build,
    /// Absent with `--client`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<InCluster>,
    pub warnings: Vec<String>,
}

/// A version and the revision it was built from.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct Build {
    pub version: String,
    pub revision: String,
}

/// The guard as found in the cluster.
#[derive(Debug, Serialize, PartialEq, Default)]
pub(crate) struct InCluster {
    pub deployments: Vec<Deployed>,
    pub leases: Vec<Leased>,
}

/// One container of a guard Deployment.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct Deployed {
    pub namespace: String,
    pub name: String,
    pub container: String,
    pub image: String,
    /// The image's tag without a leading `v`; absent for a digest-only or tag-less image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// One guard Lease and what its holder reports.
#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Leased {
    pub namespace: String,
    pub name: String,
    /// Empty when nobody holds it (released).
    pub holder: String,
    /// The holder's version annotation; absent when it writes none (a guard that predates it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The policy fields the holder knows; absent when it lists none (a guard that predates it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_fields: Option<Vec<String>>,
}

/// Runs `version`: prints the report; 2 when the cluster could not be read.
pub(crate) async fn version(args: VersionArgs) -> ExitCode {
    let client = Build { version: VERSION.to_owned(), revision: REVISION.to_owned() };
    let fail = |e: String| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    };
    let read = if args.client { None } else { Some(read(&args).await) };
    let cluster = match read.transpose() {
        Ok(found) => found,
        Err(e) => return fail(format!("{e}; pass --client for this binary's version alone")),
    };
    let used = match args.config.as_deref().map(fields_used).transpose() {
        Ok(used) => used,
        Err(e) => return fail(e),
    };
    let mut warnings = cluster.as_ref().map(|c| skew(VERSION, c, &args)).unwrap_or_default();
    if let (Some(found), Some(used)) = (&cluster, &used) {
        warnings.extend(unknown_fields(found, used, args.config.as_deref().unwrap_or(std::path::Path::new(""))));
    }
    let report = Report { client, cluster, warnings };
    print!("{}", args.output.document(&report, || report.table()));
    ExitCode::SUCCESS
}

/// Reads the guard's Deployments and Lease(s).
async fn read(args: &VersionArgs) -> Result<InCluster, RequestError> {
    let timeout = args.request_timeout;
    let client = connect_within(&args.target.target(), timeout).await?;
    let namespace = args.leader_election_namespace.as_deref();
    let (deployments, leases): (Api<Deployment>, Api<Lease>) = match namespace {
        Some(ns) => (Api::namespaced(client.clone(), ns), Api::namespaced(client, ns)),
        None => (Api::all(client.clone()), Api::all(client)),
    };
    let where_ = namespace.map_or_else(|| "in any namespace".to_owned(), |ns| format!("in namespace {ns}"));
    let selected = ListParams::default().labels(&args.selector);
    let what = || format!("list the Deployments labelled {} {where_}", args.selector);
    let deployments = bounded(what, timeout, deployments.list(&selected)).await?;
    let named = ListParams::default().fields(&format!("metadata.name={}", args.leader_election_lease_name));
    let what = || format!("list the Leases named {} {where_}", args.leader_election_lease_name);
    let leases = bounded(what, timeout, leases.list(&named)).await?;
    let mut found = InCluster::default();
    for d in deployments {
        let containers = d.spec.and_then(|s| s.template.spec).map(|s| s.containers).unwrap_or_default();
        for c in containers {
            let image = c.image.unwrap_or_default();
            found.deployments.push(Deployed {
                namespace: d.metadata.namespace.clone().unwrap_or_default(),
                name: d.metadata.name.clone().unwrap_or_default(),
                container: c.name,
                version: image_version(&image),
                image,
            });
        }
    }
    for l in leases {
        let mut annotations = l.metadata.annotations.unwrap_or_default();
        found.leases.push(Leased {
            namespace: l.metadata.namespace.unwrap_or_default(),
            name: l.metadata.name.unwrap_or_default(),
            holder: l.spec.and_then(|s| s.holder_identity).unwrap_or_default(),
            version: annotations.remove(VERSION_ANNOTATION),
            policy_fields: annotations
                .remove(POLICY_FIELDS_ANNOTATION)
                .map(|list| list.split(',').filter(|f| !f.is_empty()).map(str::to_owned).collect()),
        });
    }
    Ok(found)
}

/// The version an image's tag names: `repo/name:v0.2.1@sha256:…` is `0.2.1`.
fn image_version(image: &str) -> Option<String> {
    let image = image.split_once('@').map_or(image, |(name, _digest)| name);
    let last = image.rsplit_once('/').map_or(image, |(_, last)| last);
    let (_, tag) = last.split_once(':')?;
    let tag = tag.strip_prefix('v').unwrap_or(tag);
    (!tag.is_empty()).then(|| tag.to_owned())
}

/// `major.minor` of a version (`0.2.1-rc.1` is `(0, 2)`); none when it does not start so.
fn minor(version: &str) -> Option<(u64, u64)> {
    let version = version.strip_prefix('v').unwrap_or(version);
    let mut parts = version.split(['.', '-', '+']);
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// The warnings: each minor-version skew, each holder reporting no version, no guard found.
fn skew(client: &str, found: &InCluster, args: &VersionArgs) -> Vec<String> {
    let ours = minor(client);
    let mut warnings = Vec::new();
    let compare = |warnings: &mut Vec<String>, what: String, theirs: &str| {
        if let (Some(ours), Some(minor_theirs)) = (ours, minor(theirs))
            && ours != minor_theirs
        {
            warnings.push(format!(
                "{what} runs version {theirs}, this client is {client}: they differ by a minor version; use a client of the cluster's version (or upgrade the guard)"
            ));
        }
    };
    for (d, v) in found.deployments.iter().filter_map(|d| Some((d, d.version.as_ref()?))) {
        compare(&mut warnings, format!("Deployment {}/{} (container {})", d.namespace, d.name, d.container), v);
    }
    for l in &found.leases {
        match &l.version {
            Some(v) => compare(&mut warnings, format!("the leader {:?} of Lease {}/{}", l.holder, l.namespace, l.name), v),
            None if !l.holder.is_empty() => warnings.push(format!(
                "the leader {:?} of Lease {}/{} reports no version: it predates the {VERSION_ANNOTATION} annotation, or is not this guard",
                l.holder, l.namespace, l.name
            )),
            None => {}
        }
    }
    if found.deployments.is_empty() && found.leases.is_empty() {
        let namespace =
            args.leader_election_namespace.as_deref().map_or_else(String::new, |ns| format!(" in namespace {ns}"));
        warnings.push(format!(
            "no guard found{namespace}: no Deployment labelled {} and no Lease named {}; pass --selector, --leader-election-lease-name or --leader-election-namespace",
            args.selector, args.leader_election_lease_name
        ));
    }
    warnings
}

/// The fields the policies of file `path` (and their `sources` entries) use, in order.
fn fields_used(path: &std::path::Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read --config {}: {e}", path.display()))?;
    let file: serde_json::Value =
        serde_norway::from_str(&text).map_err(|e| format!("--config {}: not YAML: {e}", path.display()))?;
    let mut used: Vec<String> = Vec::new();
    let mut add = |object: &serde_json::Value| {
        for key in object.as_object().into_iter().flat_map(|o| o.keys()) {
            if !used.contains(key) {
                used.push(key.clone());
            }
        }
    };
    for policy in file["policies"].as_array().into_iter().flatten() {
        add(policy);
        policy["sources"].as_array().into_iter().flatten().for_each(&mut add);
    }
    Ok(used)
}

/// A warning for each leader that does not know a field the file uses, or lists no fields.
fn unknown_fields(found: &InCluster, used: &[String], path: &std::path::Path) -> Vec<String> {
    let held = found.leases.iter().filter(|l| !l.holder.is_empty());
    held.filter_map(|l| {
        let leader = format!("the leader {:?} of Lease {}/{}", l.holder, l.namespace, l.name);
        let Some(known) = &l.policy_fields else {
            return Some(format!(
                "{leader} lists no policy fields ({POLICY_FIELDS_ANNOTATION}): it predates the list, so {} cannot be checked against it",
                path.display()
            ));
        };
        let unknown: Vec<&str> = used.iter().filter(|f| !known.contains(f)).map(String::as_str).collect();
        (!unknown.is_empty()).then(|| {
            format!(
                "{} uses {}, which {leader} does not know: it would refuse the file; upgrade the guard before the file",
                path.display(),
                unknown.join(", ")
            )
        })
    })
    .collect()
}

impl Report {
    /// Aligned columns (KIND, NAME, VERSION, DETAIL), then one line per warning.
    pub(crate) fn table(&self) -> String {
        let revision = format!("revision {}", self.client.revision);
        let client = ["client", "ingress-status-guard", &self.client.version, &revision].map(String::from).to_vec();
        let mut rows = vec![["KIND", "NAME", "VERSION", "DETAIL"].map(String::from).to_vec(), client];
        let unknown = |v: &Option<String>| v.clone().unwrap_or_else(|| "<unknown>".to_owned());
        let cluster = self.cluster.as_ref();
        for d in cluster.iter().flat_map(|c| &c.deployments) {
            let detail = format!("container {} image {}", d.container, d.image);
            rows.push(vec!["deployment".into(), format!("{}/{}", d.namespace, d.name), unknown(&d.version), detail]);
        }
        for l in cluster.iter().flat_map(|c| &c.leases) {
            let holder = if l.holder.is_empty() { "no holder".to_owned() } else { format!("holder {}", l.holder) };
            rows.push(vec!["lease".into(), format!("{}/{}", l.namespace, l.name), unknown(&l.version), holder]);
        }
        let warnings = self.warnings.iter().map(|w| format!("warning: {w}\n"));
        crate::check::align(rows) + &warnings.collect::<String>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[test]
    fn an_images_tag_is_its_version() {
        for (image, want) in [
            ("ghcr.io/acme/ingress-status-guard:v0.2.1", Some("0.2.1")),
            ("registry:5000/isg:0.3.0@sha256:abcd", Some("0.3.0")),
            ("registry:5000/isg@sha256:abcd", None),
            ("isg", None),
            ("isg:latest", Some("latest")),
        ] {
            assert_eq!(image_version(image).as_deref(), want, "{image}");
        }
        assert_eq!(minor("0.2.1-rc.1"), Some((0, 2)));
        assert_eq!(minor("v1.10"), Some((1, 10)));
        assert_eq!(minor("latest"), None);
    }

    fn args() -> VersionArgs {
        match super::super::Cli::parse_from(["isg", "version"]).command {
            super::super::Command::Version(args) => args,
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn a_minor_apart_is_a_warning_a_patch_apart_is_not() {
        let lease = |holder: &str, version: Option<&str>| Leased {
            namespace: "isg".into(),
            name: "ingress-status-guard".into(),
            holder: holder.into(),
            version: version.map(Into::into),
            policy_fields: None,
        };
        let image = |image: &str| Deployed {
            namespace: "isg".into(),
            name: "ingress-status-guard".into(),
            container: "guard".into(),
            image: image.into(),
            version: image_version(image),
        };
        let found = InCluster { deployments: vec![image("isg:v0.2.9")], leases: vec![lease("pod-a", Some("0.2.0"))] };
        assert_eq!(skew("0.2.3", &found, &args()), Vec::<String>::new());
        let warnings = skew("0.3.0", &found, &args());
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].starts_with("Deployment isg/ingress-status-guard (container guard) runs version 0.2.9"));
        assert!(
            warnings[1]
                .contains("\"pod-a\" of Lease isg/ingress-status-guard runs version 0.2.0, this client is 0.3.0")
        );
        let silent =
            InCluster { deployments: vec![image("isg:latest")], leases: vec![lease("pod-a", None), lease("", None)] };
        let warnings = skew("0.3.0", &silent, &args());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("reports no version"), "{warnings:?}");
        assert!(skew("0.3.0", &InCluster::default(), &args())[0].starts_with("no guard found"));
    }

    #[test]
    fn a_policy_field_the_leader_does_not_know_is_named() {
        let lease = |holder: &str, fields: Option<&[&str]>| Leased {
            namespace: "isg".into(),
            name: "l".into(),
            holder: holder.into(),
            version: Some("0.1.0".into()),
            policy_fields: fields.map(|f| f.iter().map(|f| (*f).to_owned()).collect()),
        };
        let used: Vec<String> = ["name", "kind", "publishService"].map(String::from).to_vec();
        let path = std::path::Path::new("p.yaml");
        let knows_all = InCluster { leases: vec![lease("a", Some(crate::policy::spec::FIELDS))], ..Default::default() };
        assert_eq!(unknown_fields(&knows_all, &used, path), Vec::<String>::new());
        let older = InCluster {
            leases: vec![lease("a", Some(&["name", "publishService"])), lease("b", None), lease("", None)],
            ..Default::default()
        };
        let warnings = unknown_fields(&older, &used, path);
        assert_eq!(warnings.len(), 2, "a released Lease is nobody's: {warnings:?}");
        assert!(
            warnings[0].starts_with("p.yaml uses kind, which the leader \"a\" of Lease isg/l does not know"),
            "{warnings:?}"
        );
        assert!(warnings[1].contains("\"b\" of Lease isg/l lists no policy fields"), "{warnings:?}");
    }
}
