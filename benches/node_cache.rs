//! What the node-IP source's Node cache costs in memory: the live heap bytes of 1,000 Nodes kept
//! as the webhook keeps them (name and addresses only, `NodeAddrs`) against keeping whole `Node`
//! objects, as a plain reflector store would. The Nodes are shaped like a kubelet's (labels,
//! annotations, conditions, three addresses, 40 images).
//!
//! `cargo bench --bench node_cache` (or `-- 10000` for another node count).

use std::{
    alloc::{GlobalAlloc, Layout, System},
    collections::HashMap,
    sync::atomic::{AtomicI64, Ordering},
};

use ingress_status_guard::NodeAddrs;
use k8s_openapi::api::core::v1::Node;
use serde_json::json;

/// Tracks live heap bytes.
struct Live;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator.
#[allow(unsafe_code)] // a counting allocator forwards to the system allocator.
unsafe impl GlobalAlloc for Live {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: same layout contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Live = Live;

fn node(i: usize) -> Node {
    let name = format!("ip-10-0-{}-{}.eu-west-1.compute.internal", i / 250, i % 250);
    let images: Vec<_> = (0..40)
        .map(|k| {
            json!({"names": [format!("registry.example.com/team-{k}/service@sha256:{:064x}", k * 7919 + i),
                             format!("registry.example.com/team-{k}/service:v1.{k}.{i}")],
                   "sizeBytes": 50_000_000 + k})
        })
        .collect();
    let conditions: Vec<_> = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready", "NetworkUnavailable"]
        .iter()
        .map(|t| {
            json!({"type": t, "status": "False", "lastHeartbeatTime": "2026-11-30T20:00:00Z",
                   "lastTransitionTime": "2026-11-01T00:00:00Z", "reason": format!("Kubelet{t}"),
                   "message": format!("kubelet reports {t} as it should")})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "uid": format!("{:08x}-0000-4000-8000-{:012x}", i, i),
            "resourceVersion": "123456789",
            "labels": {
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "m6i.large", "topology.kubernetes.io/region": "eu-west-1",
                "topology.kubernetes.io/zone": format!("eu-west-1{}", ["a", "b", "c"][i % 3]),
                "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
                "node-role.kubernetes.io/worker": "", "pool": "general"
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "csi.volume.kubernetes.io/nodeid": format!("{{\"ebs.csi.aws.com\":\"i-{i:017x}\"}}")
            }
        },
        "spec": {"podCIDR": format!("10.1.{}.0/24", i % 250), "providerID": format!("aws:///eu-west-1a/i-{i:017x}")},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": format!("10.0.{}.{}", i / 250, i % 250)},
                {"type": "ExternalIP", "address": format!("203.0.{}.{}", i / 250, i % 250)},
                {"type": "Hostname", "address": name}
            ],
            "capacity": {"cpu": "2", "memory": "7927936Ki", "pods": "29", "ephemeral-storage": "83873772Ki"},
            "allocatable": {"cpu": "1930m", "memory": "7238784Ki", "pods": "29", "ephemeral-storage": "76224326324"},
            "conditions": conditions,
            "images": images,
            "nodeInfo": {"architecture": "amd64", "bootID": "b", "containerRuntimeVersion": "containerd://1.7.22",
                         "kernelVersion": "6.1.0", "kubeProxyVersion": "v1.31.0", "kubeletVersion": "v1.31.0",
                         "machineID": "m", "operatingSystem": "linux", "osImage": "Linux", "systemUUID": "u"}
        }
    }))
    .expect("a valid Node")
}

/// Live heap bytes held by what `build` returns.
fn held<T>(build: impl FnOnce() -> T) -> (T, i64) {
    let before = LIVE.load(Ordering::Relaxed);
    let kept = build();
    (kept, LIVE.load(Ordering::Relaxed) - before)
}

fn main() {
    let count: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(1_000);
    let mib = |b: i64| b as f64 / (1024.0 * 1024.0);

    let (lean, lean_bytes) = held(|| {
        (0..count)
            .map(|i| (format!("ip-10-0-{}-{}", i / 250, i % 250), NodeAddrs::of(&node(i))))
            .collect::<HashMap<_, _>>()
    });
    let (full, full_bytes) =
        held(|| (0..count).map(|i| (format!("ip-10-0-{}-{}", i / 250, i % 250), node(i))).collect::<HashMap<_, _>>());
    assert_eq!(lean.len(), count);
    assert_eq!(full.len(), count);
    let addresses: usize = lean.values().map(|a| a.external.len() + a.internal.len()).sum();
    assert_eq!(addresses, 2 * count, "every Node keeps its ExternalIP and InternalIP");

    println!("| Nodes | kept as `NodeAddrs` (the webhook) | whole `Node` objects | ratio |");
    println!("|---:|---:|---:|---:|");
    println!(
        "| {count} | {:.2} MiB ({} B per Node) | {:.2} MiB ({} B per Node) | {:.1}x |",
        mib(lean_bytes),
        lean_bytes / count as i64,
        mib(full_bytes),
        full_bytes / count as i64,
        full_bytes as f64 / lean_bytes as f64
    );
}
