//! Canonical addresses published by a Service: ingress-nginx's `statusAddressFromService`, made
//! dual-stack and unable to produce an entry the API server would reject; and the Service's
//! wire for the publish-source cache ([`PublishService`]).

use k8s_openapi::api::core::v1::{LoadBalancerIngress, Service, ServiceSpec};

use super::{
    Unresolved,
    published::{News, Publish, Why, log_news},
};
use crate::{
    address::{self, Address, AddressError, PortStatus},
    policy::{Policies, ServiceRef},
};

/// Why a Service yields no address to publish.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    #[error(
        "is headless (clusterIP: None), so it has no address to publish; use a ClusterIP, NodePort or LoadBalancer Service"
    )]
    Headless,
    #[error("has no cluster IP yet (the API server allocates it when the Service is created)")]
    NoClusterIp,
    #[error("is of type LoadBalancer but has no load-balancer address yet (status.loadBalancer.ingress is empty)")]
    Pending,
    #[error(
        "is of type {0:?}, which has no address to publish (expected ClusterIP, NodePort, LoadBalancer or ExternalName)"
    )]
    UnsupportedType(String),
    #[error("has an address the API server would reject in an Ingress status: {0}")]
    InvalidAddress(#[from] AddressError),
}

/// The canonical, sorted, deduplicated addresses for a publish Service. `keep_ports` copies the
/// `ports` of load-balancer entries, as Contour and Traefik do; ingress-nginx drops them.
pub(crate) fn addresses(svc: &Service, keep_ports: bool) -> Result<Vec<Address>, ServiceError> {
    let spec = svc.spec.clone().unwrap_or_default();
    let external_ips = spec.external_ips.as_deref().unwrap_or_default();
    // The API server defaults an unset type to ClusterIP; manifests given to `resolve` may omit it.
    let entries = match spec.type_.as_deref().unwrap_or("ClusterIP") {
        "ExternalName" => vec![Address::parse(spec.external_name.as_deref().unwrap_or(""))?],
        "ClusterIP" => cluster_ips(&spec)?,
        "NodePort" if !external_ips.is_empty() => ips(external_ips)?,
        "NodePort" => cluster_ips(&spec)?,
        "LoadBalancer" => {
            let lb_entries = load_balancer_entries(svc);
            let mut entries = Vec::with_capacity(lb_entries.len() + external_ips.len());
            for lb in lb_entries {
                let ports = match (&lb.ports, keep_ports) {
                    (Some(ports), true) => ports
                        .iter()
                        .map(|p| PortStatus { port: p.port, protocol: p.protocol.clone(), error: p.error.clone() })
                        .collect(),
                    _ => Vec::new(),
                };
                entries.push(Address { ip: lb.ip.clone(), hostname: lb.hostname.clone(), ports }.sanitized()?);
            }
            for ip in ips(external_ips)? {
                let present = entries.iter().any(|e| e.ip == ip.ip || e.hostname == ip.ip);
                if !present {
                    entries.push(ip);
                }
            }
            if entries.is_empty() {
                return Err(ServiceError::Pending);
            }
            entries
        }
        other => return Err(ServiceError::UnsupportedType(other.to_owned())),
    };
    Ok(address::canonicalize(entries))
}

/// Which rule of [`addresses`] applies to a Service, in words (`explain` shows it next to the
/// addresses). Reads the same fields in the same order as [`addresses`].
pub(crate) fn rule(svc: &Service) -> String {
    let spec = svc.spec.clone().unwrap_or_default();
    let has_external_ips = spec.external_ips.as_ref().is_some_and(|ips| !ips.is_empty());
    let cluster_ips = || {
        let all = all_cluster_ips(&spec);
        match all.len() {
            _ if all.iter().any(|ip| ip == "None") => "headless (clusterIP: None), no address".to_owned(),
            0 => "no cluster IP allocated yet".to_owned(),
            1 => "spec.clusterIP".to_owned(),
            _ => "spec.clusterIPs (dual-stack)".to_owned(),
        }
    };
    match spec.type_.as_deref().unwrap_or("ClusterIP") {
        "ExternalName" => "ExternalName Service: spec.externalName".to_owned(),
        "ClusterIP" => format!("ClusterIP Service: {}", cluster_ips()),
        "NodePort" if has_external_ips => "NodePort Service: spec.externalIPs".to_owned(),
        "NodePort" => format!("NodePort Service without externalIPs: {}", cluster_ips()),
        "LoadBalancer" => {
            let entries = load_balancer_entries(svc);
            let ip = entries.iter().any(|e| e.ip.is_some());
            let hostname = entries.iter().any(|e| e.hostname.is_some());
            let status = match (ip, hostname) {
                (true, true) => "status ip + hostname",
                (true, false) => "status ip",
                (false, true) => "status hostname",
                (false, false) if has_external_ips => "no status yet",
                (false, false) => "no status yet (pending)",
            };
            let external = if has_external_ips { ", externalIPs appended" } else { "" };
            format!("LoadBalancer Service: {status}{external}")
        }
        other => format!("Service of type {other:?}: no address to publish"),
    }
}

/// The wire of the `publishService` source for the [`super::published::Published`] cache.
#[derive(Debug)]
pub(crate) struct PublishService;

impl Publish for PublishService {
    type Ref = ServiceRef;
    type Object = Service;
    const KIND: &'static str = "Service";
    type Error = ServiceError;
    // Services are core API: always served, retried at kube's default backoff.
    const RETRY_CAP: Option<std::time::Duration> = None;
    const WATCH_METRIC: Option<&'static str> = None;

    fn refs(policies: &Policies) -> Vec<ServiceRef> {
        policies.services()
    }

    fn locate(svc: &ServiceRef) -> (&str, &str) {
        (&svc.namespace, &svc.name)
    }

    fn addresses(svc: &Service) -> Result<Vec<Address>, ServiceError> {
        addresses(svc, true)
    }

    fn unresolved(svc: &ServiceRef, why: Why<ServiceError>) -> Unresolved {
        let svc = svc.clone();
        match why {
            // Never served absent (core API): read as not synced if it ever were.
            Why::NotSynced | Why::ApiAbsent => Unresolved::NotSynced(svc),
            Why::Missing => Unresolved::Missing(svc),
            Why::Unusable(e) => Unresolved::Service(svc, e),
        }
    }

    fn log(svc: &ServiceRef, news: News<'_, ServiceError>) {
        log_news!(service, "Service", "its API", svc, news);
    }
}

fn load_balancer_entries(svc: &Service) -> &[LoadBalancerIngress] {
    svc.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|lb| lb.ingress.as_deref()).unwrap_or_default()
}

/// `clusterIPs`, which lists every family of a dual-stack Service (its first item equals
/// `clusterIP`), else `clusterIP`.
fn all_cluster_ips(spec: &ServiceSpec) -> Vec<String> {
    let one = || spec.cluster_ip.clone().into_iter().filter(|ip| !ip.is_empty()).collect();
    spec.cluster_ips.clone().filter(|all| !all.is_empty()).unwrap_or_else(one)
}

fn cluster_ips(spec: &ServiceSpec) -> Result<Vec<Address>, ServiceError> {
    let all = all_cluster_ips(spec);
    if all.is_empty() {
        return Err(ServiceError::NoClusterIp);
    }
    if all.iter().any(|ip| ip == "None") {
        return Err(ServiceError::Headless);
    }
    ips(&all)
}

fn ips(items: &[String]) -> Result<Vec<Address>, ServiceError> {
    items
        .iter()
        .map(|ip| Address { ip: Some(ip.clone()), ..Default::default() }.sanitized().map_err(Into::into))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(value: serde_json::Value) -> Service {
        serde_json::from_value(value).expect("test Service must deserialize")
    }

    fn shown(result: Result<Vec<Address>, ServiceError>) -> Result<Vec<String>, ServiceError> {
        result.map(|entries| entries.iter().map(Address::to_string).collect())
    }

    #[test]
    fn service_types() {
        let cases: Vec<(&str, serde_json::Value, Result<Vec<&str>, ServiceError>)> = vec![
            // ingress-nginx status_test.go TestStatusAddressFromService cases, then ours.
            ("clusterip", json!({"spec": {"type": "ClusterIP", "clusterIP": "1.1.1.1"}}), Ok(vec!["1.1.1.1"])),
            ("type defaults to clusterip", json!({"spec": {"clusterIP": "1.1.1.1"}}), Ok(vec!["1.1.1.1"])),
            (
                "dual-stack clusterips",
                json!({"spec": {"type": "ClusterIP", "clusterIP": "10.0.0.5", "clusterIPs": ["10.0.0.5", "fd00::5"]}}),
                Ok(vec!["10.0.0.5", "fd00::5"]),
            ),
            (
                "clusterip ignores externalips",
                json!({"spec": {"type": "ClusterIP", "clusterIP": "1.1.1.1", "externalIPs": ["2.2.2.2"]}}),
                Ok(vec!["1.1.1.1"]),
            ),
            (
                "headless",
                json!({"spec": {"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"]}}),
                Err(ServiceError::Headless),
            ),
            ("clusterip not allocated", json!({"spec": {"type": "ClusterIP"}}), Err(ServiceError::NoClusterIp)),
            (
                "nodeport without externalips",
                json!({"spec": {"type": "NodePort", "clusterIP": "1.1.1.1"}}),
                Ok(vec!["1.1.1.1"]),
            ),
            (
                "nodeport with externalips",
                json!({"spec": {"type": "NodePort", "clusterIP": "1.1.1.1", "externalIPs": ["10.0.0.2", "10.0.0.1"]}}),
                Ok(vec!["10.0.0.1", "10.0.0.2"]),
            ),
            (
                "nodeport empty externalips",
                json!({"spec": {"type": "NodePort", "clusterIP": "1.1.1.1", "externalIPs": []}}),
                Ok(vec!["1.1.1.1"]),
            ),
            ("externalname", json!({"spec": {"type": "ExternalName", "externalName": "foo.bar"}}), Ok(vec!["foo.bar"])),
            (
                "externalname ip becomes ip",
                json!({"spec": {"type": "ExternalName", "externalName": "10.1.1.1"}}),
                Ok(vec!["10.1.1.1"]),
            ),
            (
                "externalname empty",
                json!({"spec": {"type": "ExternalName"}}),
                Err(ServiceError::InvalidAddress(AddressError::Empty)),
            ),
            (
                "loadbalancer ip",
                json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}}),
                Ok(vec!["10.0.0.1"]),
            ),
            (
                "loadbalancer hostname",
                json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": [{"hostname": "foo.bar"}]}}}),
                Ok(vec!["foo.bar"]),
            ),
            (
                "loadbalancer keeps ip and hostname together",
                json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1", "hostname": "foo.bar"}]}}}),
                Ok(vec!["foo.bar (10.0.0.1)"]),
            ),
            (
                "loadbalancer plus externalips, lb ip deduplicated",
                json!({"spec": {"type": "LoadBalancer", "externalIPs": ["10.0.0.1", "10.0.0.2"]},
                       "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}, {"hostname": "foo.bar"}]}}}),
                Ok(vec!["10.0.0.1", "10.0.0.2", "foo.bar"]),
            ),
            (
                "loadbalancer pending",
                json!({"spec": {"type": "LoadBalancer", "clusterIP": "1.1.1.1"}}),
                Err(ServiceError::Pending),
            ),
            (
                "loadbalancer pending with externalips",
                json!({"spec": {"type": "LoadBalancer", "externalIPs": ["10.0.0.9"]}}),
                Ok(vec!["10.0.0.9"]),
            ),
            (
                "loadbalancer invalid entry",
                json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": [{"ip": "not-an-ip"}]}}}),
                Err(ServiceError::InvalidAddress(AddressError::Invalid("not-an-ip".into()))),
            ),
            ("empty type", json!({"spec": {"type": ""}}), Err(ServiceError::UnsupportedType(String::new()))),
            ("unknown type", json!({"spec": {"type": "Magic"}}), Err(ServiceError::UnsupportedType("Magic".into()))),
        ];
        for (name, input, want) in cases {
            let want = want.map(|v| v.into_iter().map(String::from).collect());
            assert_eq!(shown(addresses(&svc(input), false)), want, "case {name}");
        }
    }

    #[test]
    fn rules_say_which_fields_gave_the_addresses() {
        let cases: Vec<(&str, serde_json::Value, &str)> = vec![
            (
                "externalname",
                json!({"spec": {"type": "ExternalName", "externalName": "foo.bar"}}),
                "ExternalName Service: spec.externalName",
            ),
            (
                "clusterip",
                json!({"spec": {"type": "ClusterIP", "clusterIP": "1.1.1.1"}}),
                "ClusterIP Service: spec.clusterIP",
            ),
            (
                "type defaults to clusterip",
                json!({"spec": {"clusterIP": "1.1.1.1"}}),
                "ClusterIP Service: spec.clusterIP",
            ),
            (
                "dual-stack",
                json!({"spec": {"type": "ClusterIP", "clusterIP": "10.0.0.5", "clusterIPs": ["10.0.0.5", "fd00::5"]}}),
                "ClusterIP Service: spec.clusterIPs (dual-stack)",
            ),
            (
                "headless",
                json!({"spec": {"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"]}}),
                "ClusterIP Service: headless (clusterIP: None), no address",
            ),
            ("not allocated", json!({"spec": {"type": "ClusterIP"}}), "ClusterIP Service: no cluster IP allocated yet"),
            (
                "nodeport with externalips",
                json!({"spec": {"type": "NodePort", "clusterIP": "1.1.1.1", "externalIPs": ["10.0.0.1"]}}),
                "NodePort Service: spec.externalIPs",
            ),
            (
                "nodeport empty externalips",
                json!({"spec": {"type": "NodePort", "clusterIP": "1.1.1.1", "externalIPs": []}}),
                "NodePort Service without externalIPs: spec.clusterIP",
            ),
            (
                "lb ip + hostname + externalips",
                json!({"spec": {"type": "LoadBalancer", "externalIPs": ["10.0.0.2"]},
                       "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1", "hostname": "foo.bar"}]}}}),
                "LoadBalancer Service: status ip + hostname, externalIPs appended",
            ),
            (
                "lb ip",
                json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}}),
                "LoadBalancer Service: status ip",
            ),
            (
                "lb hostname",
                json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": [{"hostname": "foo.bar"}]}}}),
                "LoadBalancer Service: status hostname",
            ),
            ("lb pending", json!({"spec": {"type": "LoadBalancer"}}), "LoadBalancer Service: no status yet (pending)"),
            (
                "lb pending with externalips",
                json!({"spec": {"type": "LoadBalancer", "externalIPs": ["10.0.0.9"]}}),
                "LoadBalancer Service: no status yet, externalIPs appended",
            ),
            ("unknown type", json!({"spec": {"type": "Magic"}}), "Service of type \"Magic\": no address to publish"),
        ];
        for (name, input, want) in cases {
            assert_eq!(rule(&svc(input)), want, "case {name}");
        }
    }

    #[test]
    fn ports_dropped_unless_kept() {
        let s = svc(json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": [
            {"ip": "10.0.0.1", "ports": [{"port": 443, "protocol": "TCP"}]}]}}}));
        assert!(addresses(&s, false).unwrap()[0].ports.is_empty());
        let kept = addresses(&s, true).unwrap();
        assert_eq!(kept[0].ports, vec![PortStatus { port: 443, protocol: "TCP".into(), error: None }]);
    }
}
