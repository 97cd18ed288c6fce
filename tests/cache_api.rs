//! Memory per cached object against a real kube-apiserver (issue 34): Ingresses created in the
//! API server of `support` (some of a class the policy governs, some of another), listed
//! in-process through the reconciler's own watch ([`IngressCache::listed`]: its pages and their
//! byte cap, its filter, its projection) under a counting global allocator. The bytes the cache
//! holds after the list are bounded per governed Ingress, and none are held for the others.
//! Counted bytes, not time. A binary of its own, as the allocator counts the whole process.

#[allow(dead_code)]
mod support;

mod counting;

use std::{sync::atomic::Ordering, time::Duration};

use futures::{StreamExt, stream};
use ingress_status_guard::{IngressCache, parse_file};

use counting::{Counting, HELD};
use support::{Class, TestEnv, create_ingress};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Ingresses the policy governs, and of another class. 3,500 fill the map's 4,096 slots to
/// 85 % (hashbrown doubles past 7/8): at 2,000, just past a doubling, the slots alone are 230
/// bytes an object. With the page size of 500, the list takes 9 pages or more.
const GOVERNED: usize = 3_500;
const OTHERS: usize = 1_000;
/// The bound of issue 34 per governed Ingress (what the others cost is counted in it).
const GOVERNED_BYTES: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_ingress_costs_at_most_300_bytes_and_one_of_another_class_nothing() {
    let t = TestEnv::new("cache-api").await;
    let (class, other) = (t.ns.clone(), format!("{}-other", t.ns));
    // Created 32 at a time: the API server answers each in a few milliseconds.
    let creates = (0..GOVERNED + OTHERS).map(|i| {
        let (api, class) = (&t.ingresses, if i < GOVERNED { &class } else { &other });
        async move { create_ingress(api, &format!("app-{i}"), Class::Field(class)).await }
    });
    stream::iter(creates).buffer_unordered(32).for_each(|_| async {}).await;

    let policies = parse_file(
        "p.yaml",
        &format!("policies: [{{name: p, ingressClasses: [{class}], publishStatusAddress: 192.0.2.1}}]"),
    )
    .expect("a policy");
    let client = t.cluster.admin().await;
    let before = HELD.load(Ordering::Relaxed);
    let cache =
        tokio::time::timeout(Duration::from_secs(120), IngressCache::listed(client, &policies)).await.expect("listed");
    // The client's connections end on tasks of their own once it is dropped.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = HELD.load(Ordering::Relaxed);
    assert_eq!(cache.held(), GOVERNED, "the governed Ingresses of the whole cluster, and no other");
    let per = after.saturating_sub(before) as f64 / GOVERNED as f64;
    eprintln!(
        "cache after listing {} Ingresses ({GOVERNED} governed): {} bytes, {per:.0} per governed Ingress",
        GOVERNED + OTHERS,
        after.saturating_sub(before)
    );
    assert!(per <= GOVERNED_BYTES as f64, "{per:.0} bytes per governed Ingress");
    drop(cache);
}
