//! Memory per review is bounded by construction (issue 20): a property test with a counting
//! global allocator. For any review up to `--max-body-bytes`, whatever its entry count, the most
//! bytes held at once while reading, deciding and rendering it stay under a fixed bound plus
//! the body itself. Before the bounded reader, a million three-byte `{}` entries took 72 bytes
//! each, and were copied again to compare them.
//!
//! A global allocator counts every thread of the process, so this is a binary of its own, with
//! one test, and proptest runs its cases on that one thread.

use std::sync::atomic::Ordering;

use counting::{Counting, HELD, PEAK};
use ingress_status_guard::{SourceCache, parse_file, read_review, render};
use proptest::prelude::*;

mod counting;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// `--max-body-bytes`' default.
const MAX_BODY: usize = 3 << 20;
/// What a review may hold beyond its body: the kept entries (256 of 72 bytes, 1,024 ports of 56
/// bytes), the bounded caller strings, the response and its bounded texts, and the copy
/// serde_json makes of one escaped string it decodes (its scratch buffer, then the string).
const FIXED: usize = 512 << 10;

const FIXTURE: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ingress-status-update.apiserver-1.24.json"));

/// One written entry, as JSON text.
fn entry() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("{}".to_owned()),
        any::<[u8; 4]>().prop_map(|b| format!("{{\"ip\":\"{}\"}}", std::net::IpAddr::from(b))),
        "[a-z]{1,12}\\.example\\.test".prop_map(|h| format!("{{\"hostname\":\"{h}\"}}")),
        (1..64usize).prop_map(|n| format!(
            "{{\"ip\":\"192.0.2.10\",\"ports\":[{}]}}",
            vec!["{\"port\":443,\"protocol\":\"TCP\"}"; n].join(",")
        )),
        (1..200_000usize).prop_map(|n| format!("{{\"hostname\":\"{}\"}}", "h".repeat(n))),
        (1..2_000usize).prop_map(|n| format!("{{\"hostname\":\"{}\"}}", "h\\n".repeat(n))),
    ]
}

/// A review as the API server sends it (the fixture, compact), with `entries` copies of `entry`
/// in its status list (fewer if they would not fit in the body limit), a username of `username` bytes and
/// `groups` groups; with `gateway`, the same review of a Gateway of class `eg` whose
/// `status.addresses` is that list (an Ingress entry reads as a Gateway entry of no value).
/// The stored object (`oldObject`, whose class fields the reader reads whatever the kind) has a
/// class field of the other kind of `old_class` bytes, read and dropped.
fn review(
    entry: &str,
    entries: usize,
    username: usize,
    groups: usize,
    gateway: bool,
    old_class: usize,
) -> (Vec<u8>, usize) {
    let groups = vec!["\"system:authenticated\""; groups].join(",");
    let mut body = FIXTURE
        .replacen("\"username\":\"kubernetes-admin\"", &format!("\"username\":\"{}\"", "u".repeat(username)), 1)
        .replacen("\"groups\":[\"system:masters\",\"system:authenticated\"]", &format!("\"groups\":[{groups}]"), 1);
    let room = MAX_BODY.saturating_sub(body.len() + old_class + 256) / (entry.len() + 1);
    let entries = entries.min(room);
    let list = vec![entry; entries].join(",");
    let written = "\"ingress\":[{\"ip\":\"10.7.7.7\"}]}}},\"oldObject\"";
    assert!(body.contains(written), "the fixture's status list");
    if gateway {
        body = body
            .replacen(
                "\"networking.k8s.io\",\"version\":\"v1\",\"kind\":\"Ingress\"",
                "\"gateway.networking.k8s.io\",\"version\":\"v1\",\"kind\":\"Gateway\"",
                1,
            )
            .replacen("\"spec\":{\"rules\"", "\"spec\":{\"gatewayClassName\":\"eg\",\"rules\"", 2)
            .replacen(
                "\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"10.7.7.7\"}]}}},\"oldObject\"",
                &["\"status\":{\"addresses\":[", &list, "]}},\"oldObject\""].concat(),
                1,
            );
    } else {
        body = body.replacen(written, &["\"ingress\":[", &list, "]}}},\"oldObject\""].concat(), 1);
    }
    let other_kind = if gateway { "ingressClassName" } else { "gatewayClassName" };
    let old_spec = body.find("\"oldObject\":").and_then(|o| body[o..].find("\"spec\":{").map(|s| o + s + 8));
    let class = format!("\"{other_kind}\":\"{}\",", "c".repeat(old_class));
    body.insert_str(old_spec.expect("the fixture's stored spec"), &class);
    (body.into_bytes(), entries)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_review_holds_at_most_a_fixed_bound_plus_its_body(
        entry in entry(),
        entries in prop_oneof![0..300usize, 300..2_000_000usize],
        username in prop_oneof![0..600usize, 600..(1usize << 20)],
        groups in prop_oneof![0..70usize, 70..50_000usize],
        gateway in any::<bool>(),
        old_class in prop_oneof![0..300usize, 300..(1usize << 20)],
    ) {
        let policies = parse_file("p.yaml", "policies:\n  - {name: ingress, watchIngressWithoutClass: true, publishStatusAddress: 192.0.2.10}\n  - {name: gateway, gatewayClasses: [eg], publishStatusAddress: 192.0.2.10}\n").unwrap();
        let sources = SourceCache::new(&policies);
        let (body, entries) = review(&entry, entries, username, groups, gateway, old_class);
        prop_assert!(body.len() <= MAX_BODY);

        PEAK.store(HELD.load(Ordering::Relaxed), Ordering::Relaxed);
        let before = HELD.load(Ordering::Relaxed);
        let review = read_review(&body).expect("a review the API server could send");
        let verdict = review.decide(&policies, sources.as_ref());
        let judged = verdict.result();
        let response = render(&review, &verdict);
        drop((verdict, review, response));
        let peak = PEAK.load(Ordering::Relaxed) - before;
        // Each kind is read and judged as its kind (a governed write), not passed over.
        prop_assert!(matches!(judged, "patched" | "canonical"), "{} review judged {}", if gateway { "Gateway" } else { "Ingress" }, judged);

        eprintln!("{} bytes of body, {entries} entries of {} bytes (Gateway: {gateway}): peak {peak} bytes", body.len(), entry.len());
        prop_assert!(peak <= FIXED + body.len(), "peak {} bytes for a body of {}", peak, body.len());
    }
}
