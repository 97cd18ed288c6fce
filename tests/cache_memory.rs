//! Memory per cached object (issue 34): a counting global allocator over the reconciler's own
//! cache ([`IngressCache`]: the watch's reader, filter, projection and map), fed one list of
//! 10,000 Ingresses as the API server serves them (a 200-byte annotation, managedFields, rules;
//! varied names, namespaces and classes; one to four status addresses), of the classes a policy
//! governs, of other classes, or both. The bytes it holds after the list, per object, are
//! bounded. Deterministic: counted bytes, no clock.
//!
//! The same for LoadBalancer Services ([`ServiceCache`]): 10,000 Services of a governed
//! `loadBalancerClass` are held within the same bound, and as many ClusterIP Services (or of
//! another class) hold nothing.
//!
//! A global allocator counts every thread of the process, so this is a binary of its own, with
//! one test.

use std::sync::atomic::Ordering;

use ingress_status_guard::{IngressCache, ServiceCache, parse_file};

mod counting;
use counting::{Counting, HELD};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const N: usize = 10_000;
/// The bound of issue 34 per governed Ingress.
const GOVERNED_BYTES: usize = 300;
/// The bound of issue 34 per Ingress no policy governs.
const UNGOVERNED_BYTES: usize = 64;

/// A small deterministic generator (xorshift), so the objects vary without a seed file.
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

/// The status addresses of load balancer `lb` of a class: one to four entries, IPs and
/// hostnames; with `unique`, the Ingress's own (`i`) instead of its load balancer's.
fn addresses(lb: u64, count: u64, unique: Option<usize>) -> String {
    let tag = unique.map_or(lb, |i| i as u64 + 1_000);
    let entry = |k: u64| match k % 3 {
        0 => format!("{{\"ip\":\"10.{}.{}.{k}\"}}", tag / 250 % 250, tag % 250),
        1 => format!("{{\"hostname\":\"lb-{tag}-{k}.elb.eu-west-1.amazonaws.com\"}}"),
        _ => format!("{{\"ip\":\"2001:db8::{tag:x}:{k}\"}}"),
    };
    (0..count).map(entry).collect::<Vec<_>>().join(",")
}

/// Ingress `i` as a list serves it, of one of `classes`.
fn ingress(i: usize, rng: &mut Rng, unique: bool, classes: &[&str]) -> Vec<u8> {
    let class = classes[rng.next(classes.len() as u64) as usize];
    let namespace = format!("team-{:03}", rng.next(100));
    let name = format!("app-{i}-{}", ["web", "api", "grpc-backend", "x"][rng.next(4) as usize]);
    let lb = rng.next(8);
    let count = lb % 4 + 1;
    let list = addresses(lb, count, unique.then_some(i));
    let uid =
        format!("{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}", i, rng.next(1 << 16), i % 4096, rng.next(4096), i * 7919);
    format!(
        r#"{{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{{"name":"{name}","namespace":"{namespace}","uid":"{uid}","resourceVersion":"{rv}","generation":1,"creationTimestamp":"2026-12-02T10:00:00Z","annotations":{{"note":"{note}"}},"managedFields":[{{"manager":"kubectl","operation":"Update","apiVersion":"networking.k8s.io/v1","time":"2026-12-02T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:spec":{{}}}}}},{{"manager":"{class}-controller","operation":"Update","apiVersion":"networking.k8s.io/v1","time":"2026-12-02T10:00:01Z","fieldsType":"FieldsV1","fieldsV1":{{"f:status":{{"f:loadBalancer":{{"f:ingress":{{}}}}}}}},"subresource":"status"}}]}},"spec":{{"ingressClassName":"{class}","rules":[{{"host":"{name}.example.com","http":{{"paths":[{{"path":"/","pathType":"Prefix","backend":{{"service":{{"name":"{name}","port":{{"number":80}}}}}}}}]}}}}]}},"status":{{"loadBalancer":{{"ingress":[{list}]}}}}}}"#,
        rv = 100_000 + i * 3,
        note = "n".repeat(200),
    )
    .into_bytes()
}

/// Service `i` as a list serves it: `kind` (`LoadBalancer` of `class`, or `ClusterIP`), with a
/// 200-byte annotation, managedFields, ports, and one to four load-balancer entries (each IP's
/// with its `ipMode`) of one of eight load balancers.
fn service(i: usize, rng: &mut Rng, kind: &str, class: &str) -> Vec<u8> {
    let namespace = format!("team-{:03}", rng.next(100));
    let name = format!("svc-{i}-{}", ["web", "api", "grpc-backend", "x"][rng.next(4) as usize]);
    let lb = rng.next(8);
    let list = addresses(lb, lb % 4 + 1, None)
        .replace("\"}", "\",\"ipMode\":\"VIP\"}")
        .replace(".com\",\"ipMode\":\"VIP\"}", ".com\"}");
    let (class, status) = match kind {
        "LoadBalancer" => {
            (format!(r#","loadBalancerClass":"{class}""#), format!(r#"{{"loadBalancer":{{"ingress":[{list}]}}}}"#))
        }
        _ => (String::new(), "{}".to_owned()),
    };
    format!(
        r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"{name}","namespace":"{namespace}","uid":"{i:08x}-0000-4000-8000-{:012x}","resourceVersion":"{rv}","creationTimestamp":"2026-12-02T10:00:00Z","annotations":{{"note":"{note}"}},"managedFields":[{{"manager":"kubectl","operation":"Update","apiVersion":"v1","time":"2026-12-02T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:spec":{{}}}}}},{{"manager":"metallb-controller","operation":"Update","apiVersion":"v1","time":"2026-12-02T10:00:01Z","fieldsType":"FieldsV1","fieldsV1":{{"f:status":{{"f:loadBalancer":{{"f:ingress":{{}}}}}}}},"subresource":"status"}}]}},"spec":{{"type":"{kind}"{class},"clusterIP":"10.96.{}.{}","ports":[{{"name":"http","port":80,"protocol":"TCP","targetPort":8080}}],"selector":{{"app":"{name}"}}}},"status":{status}}}"#,
        i * 7919,
        i / 250 % 250,
        i % 250,
        rv = 100_000 + i * 3,
        note = "n".repeat(200),
    )
    .into_bytes()
}

/// Bytes a Service cache (one policy governing class `metallb.io/pool`) holds after one list of
/// `N` Services of each `(type, class)` of `lists`, interleaved; and the Services held.
fn services_after_list(lists: &[(&str, &str)]) -> (usize, usize) {
    let policies = parse_file(
        "p.yaml",
        "policies: [{name: p, kind: Service, loadBalancerClasses: [metallb.io/pool], publishService: lb/edge}]",
    )
    .expect("a Service policy");
    let mut cache = ServiceCache::governed_by(&policies);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let objects: Vec<Vec<u8>> = (0..N * lists.len())
        .map(|i| {
            let (kind, class) = lists[i % lists.len()];
            service(i, &mut rng, kind, class)
        })
        .collect();
    let before = HELD.load(Ordering::Relaxed);
    let held = cache.list(objects.iter().map(Vec::as_slice));
    let after = HELD.load(Ordering::Relaxed);
    drop(cache);
    (after - before, held)
}

/// The classes the guard's policy governs, and others' (which no policy governs).
const GOVERNED: [&str; 3] = ["nginx", "internal", "public"];
const OTHERS: [&str; 3] = ["traefik", "haproxy", "cilium"];

/// A cache as the watch keeps it, under one policy governing the [`GOVERNED`] classes.
fn cache() -> IngressCache {
    let policies = parse_file(
        "p.yaml",
        "policies: [{name: p, ingressClasses: [nginx, internal, public], publishStatusAddress: 192.0.2.1}]",
    )
    .expect("a policy");
    IngressCache::governed_by(&policies)
}

/// Bytes the cache holds after one list of `N` Ingresses of each of `lists`' classes (one
/// list with all of them, interleaved), and the Ingresses held.
fn bytes_after_list(unique: bool, lists: &[&[&str]]) -> (usize, usize) {
    let mut cache = cache();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let objects: Vec<Vec<u8>> =
        (0..N * lists.len()).map(|i| ingress(i, &mut rng, unique, lists[i % lists.len()])).collect();
    let before = HELD.load(Ordering::Relaxed);
    let held = cache.list(objects.iter().map(Vec::as_slice));
    let after = HELD.load(Ordering::Relaxed);
    drop(cache);
    (after - before, held)
}

#[test]
fn a_cached_ingress_costs_at_most_300_bytes_and_an_ungoverned_one_at_most_64() {
    let per = |bytes: usize| bytes as f64 / N as f64;
    let (shared, held) = bytes_after_list(false, &[&GOVERNED]);
    assert_eq!(held, N, "every governed Ingress is held");
    let (unique, _) = bytes_after_list(true, &[&GOVERNED]);
    let (ungoverned, held) = bytes_after_list(false, &[&OTHERS]);
    assert_eq!(held, 0, "no Ingress of another class is held");
    let (mixed, held) = bytes_after_list(false, &[&GOVERNED, &OTHERS]);
    assert_eq!(held, N, "of both, the governed are held");
    eprintln!(
        "cache: {:.0} bytes per governed Ingress (load balancers' lists shared), {:.0} (a list of its own each); \
         {:.0} per ungoverned Ingress; {:.0} per governed Ingress listed beside as many ungoverned ones",
        per(shared),
        per(unique),
        per(ungoverned),
        per(mixed),
    );
    assert!(per(shared) <= GOVERNED_BYTES as f64, "{:.0} bytes per governed Ingress", per(shared));
    assert!(
        per(unique) <= GOVERNED_BYTES as f64,
        "{:.0} bytes per governed Ingress with a list of its own",
        per(unique)
    );
    assert!(per(ungoverned) <= UNGOVERNED_BYTES as f64, "{:.0} bytes per ungoverned Ingress", per(ungoverned));
    assert!(
        mixed <= N * (GOVERNED_BYTES + UNGOVERNED_BYTES),
        "{mixed} bytes for {N} governed and {N} ungoverned Ingresses"
    );

    // LoadBalancer Services of the governed class, within the Ingress's bound; ClusterIP
    // Services and those of another class hold nothing.
    let (governed, held) = services_after_list(&[("LoadBalancer", "metallb.io/pool")]);
    assert_eq!(held, N, "every governed Service is held");
    let (others, held) = services_after_list(&[("ClusterIP", ""), ("LoadBalancer", "kube-vip.io/kube-vip-class")]);
    assert_eq!(held, 0, "no ClusterIP Service and no Service of another class is held");
    eprintln!(
        "cache: {:.0} bytes per governed LoadBalancer Service; {:.0} per ClusterIP Service or Service of another class",
        per(governed),
        others as f64 / (2 * N) as f64,
    );
    assert!(per(governed) <= GOVERNED_BYTES as f64, "{:.0} bytes per governed Service", per(governed));
    assert!(others <= 2 * N * UNGOVERNED_BYTES, "{others} bytes for {} ungoverned Services", 2 * N);
}
