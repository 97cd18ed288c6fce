//! Where the probe listener binds without `--probe-listen`: in a Pod the kubelet's port; outside
//! one the admin listener's host with a port the OS picks, so a local run on loopback opens
//! nothing on other interfaces and a second local instance does not fail on a taken 8081.

use std::net::{Ipv4Addr, SocketAddr};

/// The probe address in a Pod, where the kubelet probes it.
pub(crate) const IN_POD: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::UNSPECIFIED), 8081);

/// Set by the kubelet in every Pod (kube's in-cluster detection reads it): "in a Pod" here.
const IN_CLUSTER_ENV: &str = "KUBERNETES_SERVICE_HOST";

/// `explicit` when given, else [`IN_POD`] in a Pod, else the admin host with an OS-picked port.
pub(crate) fn address(explicit: Option<SocketAddr>, admin: SocketAddr, in_pod: bool) -> SocketAddr {
    match explicit {
        Some(addr) => addr,
        None if in_pod => IN_POD,
        None => SocketAddr::new(admin.ip(), 0),
    }
}

/// Whether this process runs in a Pod: `KUBERNETES_SERVICE_HOST` set and not empty.
pub(crate) fn in_pod() -> bool {
    std::env::var_os(IN_CLUSTER_ENV).is_some_and(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_probe_address_follows_the_rule() {
        let cases = [
            // (name, --probe-listen, --admin-listen, in a Pod, want)
            ("explicit wins locally", Some("127.0.0.1:9000"), "127.0.0.1:8080", false, "127.0.0.1:9000"),
            ("explicit wins in a Pod", Some("[::]:9000"), "0.0.0.0:8080", true, "[::]:9000"),
            ("in a Pod: the kubelet's port", None, "0.0.0.0:8080", true, "0.0.0.0:8081"),
            ("in a Pod, admin on loopback: still the kubelet's", None, "127.0.0.1:8080", true, "0.0.0.0:8081"),
            ("local, admin on loopback: loopback, any port", None, "127.0.0.1:8080", false, "127.0.0.1:0"),
            ("local, admin on IPv6 loopback", None, "[::1]:8080", false, "[::1]:0"),
            ("local, admin on every interface: so is the probe", None, "0.0.0.0:8080", false, "0.0.0.0:0"),
        ];
        for (name, explicit, admin, in_pod, want) in cases {
            assert_eq!(address(explicit.map(addr), addr(admin), in_pod), addr(want), "{name}");
        }
    }
}
