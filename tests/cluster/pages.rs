//! The reconciler's cluster-wide list of Ingresses in pages (a control plane of its own, with
//! streaming lists off where the API server has them): a page over its bytes is asked again at
//! the same position in a smaller page, and the list goes on from there instead of starting
//! over, as the API server's audit log shows; every governed Ingress, before and after the big
//! ones, is still seen and healed.

use std::{path::PathBuf, time::Duration};

use futures::StreamExt;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::churn::{Requests, cluster_wide, uri};
use crate::support;
use support::guard::{await_synced_leader, reconciler_args};
use support::{Class, TestEnv, Webhook, create_ingress, eventually, stored, write_status};

/// Small governed Ingresses before the big ones (by name, the order of a list): more than the
/// first page of 500 holds, so the page over its bytes is not the list's first.
const BEFORE: usize = 600;
/// Big governed Ingresses, [`BIG_BYTES`] of annotation each: together past the 4 MiB a page
/// may take (a page of 125 holding the last 100 small ones and 25 big ones is too).
const BIG: usize = 30;
const BIG_BYTES: usize = 200 * 1024;
/// Small governed Ingresses after the big ones.
const AFTER: usize = 100;
const CANONICAL: &str = "192.0.2.10";
const STALE: &str = "198.51.100.7";
/// The guard's user, so the audit log tells its requests from the test's.
const USER: &str = "isg-pages";

/// A list call's `param=` value in its request URI.
fn param<'e>(e: &'e Value, name: &str) -> Option<&'e str> {
    let query = uri(e).split_once('?')?.1;
    query.split('&').find_map(|p| p.strip_prefix(name)?.strip_prefix('='))
}

/// A page over its bytes continues the list at the same position with fewer objects: the
/// guard's cluster-wide list never starts over for it, and the Ingresses after the big ones
/// (and the big ones) are healed.
#[tokio::test]
async fn a_page_over_its_bytes_continues_the_list() {
    let t = TestEnv::private_in_pages("pages").await;
    let class = t.ns.clone();
    let small = |i: usize, at: &str| format!("{at}{i:04}");
    let names: Vec<String> = (0..BEFORE).map(|i| small(i, "a")).chain((0..AFTER).map(|i| small(i, "c"))).collect();
    futures::stream::iter(&names)
        .for_each_concurrent(16, |name| async { drop(create_ingress(&t.ingresses, name, Class::Field(&class)).await) })
        .await;
    let notes = "n".repeat(BIG_BYTES);
    let big: Vec<String> = (0..BIG).map(|i| format!("b-big-{i:02}")).collect();
    let (env, notes, class_name) = (&t, &notes, &class);
    futures::stream::iter(&big)
        .for_each_concurrent(4, |name| async move {
            let ingress: Ingress = serde_json::from_value(json!({
                "metadata": {"name": name, "annotations": {"example.test/notes": notes}},
                "spec": {"ingressClassName": class_name, "defaultBackend": {"service": {"name": "backend", "port": {"number": 80}}}}
            }))
            .unwrap();
            env.ingresses.create(&PostParams::default(), &ingress).await.unwrap_or_else(|e| panic!("create {name}: {e}"));
        })
        .await;
    // Stale statuses among the big ones and at the end of the list: no webhook reviews them.
    let stale = [big[BIG / 2].clone(), small(AFTER - 1, "c")];
    for name in &stale {
        write_status(&t.rogue, name, &[STALE], false).await.unwrap_or_else(|e| panic!("status of {name}: {e}"));
    }

    let extra = [format!("--publish-status-address={CANONICAL}"), format!("--ingress-class={class}")];
    let args = reconciler_args(&t, None, &extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let kubeconfig = t.cluster.kubeconfig_for(USER, Some("system:masters"));
    // An older build named by ISG_COMPARE_BINARY gives the "before" figures (it fails the test).
    let binary = std::env::var_os("ISG_COMPARE_BINARY").map_or_else(|| support::webhook::BINARY.into(), PathBuf::from);
    let webhook = Webhook::start_binary(t.cluster, &t.ns, &binary, &kubeconfig, &args, &[]).await;
    await_synced_leader(&webhook, Duration::from_secs(120)).await;
    let governed = BEFORE + BIG + AFTER;
    eventually("every governed Ingress healed", Duration::from_secs(120), || async {
        let patched =
            webhook.metric("ingress_status_guard_reconcile_patches_total{policy=\"default\",result=\"patched\"}");
        let drift = webhook.metric("ingress_status_guard_drift_ingresses{policy=\"default\"}");
        if patched >= governed as f64 && drift == 0.0 {
            Ok(())
        } else {
            Err(format!("{patched} patched, {drift} drift"))
        }
    })
    .await;
    for name in &stale {
        assert_eq!(stored(&t.ingresses, name).await, [CANONICAL], "{name}, stale, is healed");
    }

    let log = webhook.log();
    assert!(log.contains("a list page was over its bytes"), "a page was over its bytes: {}", webhook.log_tail());
    // The guard's cluster-wide list calls, split where a watch call comes between.
    let requests = Requests::read(&t, USER);
    let wide: Vec<&Value> = requests.0.iter().filter(|e| cluster_wide(e)).collect();
    let lists: Vec<Vec<&Value>> =
        wide.split(|e| e["verb"] != "list").filter(|calls| !calls.is_empty()).map(<[_]>::to_vec).collect();
    let limit = |e: &Value| -> u32 { param(e, "limit").and_then(|l| l.parse().ok()).expect("a list call's limit") };
    // Each smaller page after a larger one, by whether it asked the same position again.
    let (mut continued, mut started_over) = (0, 0);
    for pair in lists.iter().flat_map(|calls| calls.windows(2)) {
        if limit(pair[1]) < limit(pair[0]) {
            match param(pair[1], "continue") == param(pair[0], "continue") {
                true => continued += usize::from(param(pair[0], "continue").is_some()),
                false => started_over += 1,
            }
        }
    }
    let show = |calls: &[&Value]| calls.iter().map(|e| uri(e).to_owned()).collect::<Vec<_>>();
    let first = lists.first().map(Vec::as_slice).unwrap_or_default();
    let starts = first.iter().filter(|e| param(e, "continue").is_none()).count();
    eprintln!(
        "the guard's first cluster-wide list: {} calls, {starts} without a continue token; smaller pages: {continued} continuing a page past the first, {started_over} starting the list over",
        first.len()
    );
    // Before, a page over its bytes started the list over: a first page again, no token.
    assert_eq!(started_over, 0, "a smaller page is the same position asked again: {:#?}", show(first));
    assert_eq!(starts, 1, "the first list began once: {:#?}", show(first));
    assert!(continued >= 1, "a page past the first was over its bytes and continued: {:#?}", show(first));
}
