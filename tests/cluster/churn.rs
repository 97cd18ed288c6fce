//! Namespace churn against the reconciler, on a control plane of its own (its Ingresses and
//! their patches would reach every other test's guard): 2,000 governed Ingresses, then a new
//! Namespace entering the webhook's `namespaceSelector` every 2 s for a minute. Each one used
//! to restart the cluster-wide list of every Ingress; now each costs a list of its own
//! Namespace, the watch goes on, and a stale status written meanwhile (a write the unreachable
//! webhook, `failurePolicy: Ignore`, did not review) is healed, as are the stale Ingresses a
//! Namespace held before it entered.

use crate::support;

use std::{collections::HashSet, time::Duration};

use futures::StreamExt;
use k8s_openapi::api::{admissionregistration::v1::MutatingWebhookConfiguration, core::v1::Namespace};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

use support::guard::{await_synced_leader, reconciler_args, scoping_webhook};
use support::{Class, TestEnv, Webhook, create_ingress, eventually, stored, write_status};

/// Governed Ingresses in the test's Namespace: what a cluster-wide list costs.
const INGRESSES: usize = 2_000;
/// Namespaces entering the scope, one every [`EVERY`].
const NAMESPACES: usize = 30;
const EVERY: Duration = Duration::from_secs(2);
/// The label the webhook's `namespaceSelector` selects.
const SCOPE_LABEL: &str = "churn.ingress-status-guard.test/scope";
/// Cluster-wide lists of Ingresses the guard may start during the churn (it was one per
/// Namespace entering the scope).
const MAX_LISTS: usize = 5;
const CANONICAL: &str = "192.0.2.10";
const STALE: &str = "198.51.100.7";
/// How soon a stale status is healed.
const HEAL: Duration = Duration::from_secs(30);
/// The guard's user, so the audit log tells its requests from the test's.
const USER: &str = "isg-churn";

/// The guard's list and watch requests on Ingresses in the audit log, each once (by audit ID).
pub(crate) struct Requests(pub(crate) Vec<Value>);

impl Requests {
    /// Those of `user`, in the order the API server received them.
    pub(crate) fn read(t: &TestEnv, user: &str) -> Requests {
        let log = std::fs::read_to_string(t.cluster.audit_log()).unwrap_or_default();
        let mut seen = HashSet::new();
        let mut events: Vec<Value> = log
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|e| {
                e["user"]["username"] == user
                    && e["objectRef"]["resource"] == "ingresses"
                    && e["objectRef"]["subresource"].is_null()
                    && ["list", "watch"].contains(&e["verb"].as_str().unwrap_or(""))
            })
            .filter(|e| seen.insert(e["auditID"].as_str().unwrap_or("").to_owned()))
            .collect();
        // RFC 3339 with microseconds, all in UTC: text order is time order.
        events.sort_by(|a, b| a["requestReceivedTimestamp"].as_str().cmp(&b["requestReceivedTimestamp"].as_str()));
        Requests(events)
    }

    fn ids(&self) -> HashSet<String> {
        self.0.iter().map(|e| e["auditID"].as_str().unwrap_or("").to_owned()).collect()
    }

    /// Requests not among `before`'s.
    fn since<'a>(&'a self, before: &'a HashSet<String>) -> impl Iterator<Item = &'a Value> + 'a {
        self.0.iter().filter(|e| !before.contains(e["auditID"].as_str().unwrap_or("")))
    }
}

pub(crate) fn uri(e: &Value) -> &str {
    e["requestURI"].as_str().unwrap_or("")
}

pub(crate) fn cluster_wide(e: &Value) -> bool {
    e["objectRef"]["namespace"].is_null()
}

/// The start of a list of every Ingress: a first page (no continue token), or a streaming
/// list (a watch sending the initial events).
fn starts_a_list(e: &Value) -> bool {
    cluster_wide(e)
        && match e["verb"].as_str() {
            Some("list") => !uri(e).contains("continue="),
            Some("watch") => uri(e).contains("sendInitialEvents=true"),
            _ => false,
        }
}

/// Adds `SCOPE_LABEL=in` to Namespace `name`: it enters the scope.
async fn enter(t: &TestEnv, name: &str) {
    let labels = json!({"metadata": {"labels": {SCOPE_LABEL: "in"}}});
    Api::<Namespace>::all(t.admin.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .unwrap_or_else(|e| panic!("label Namespace {name}: {e}"));
}

async fn namespace(t: &TestEnv, name: &str, labels: Value) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    Api::<Namespace>::all(t.admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("create Namespace {name}: {e}"));
}

async fn healed(api: &Api<k8s_openapi::api::networking::v1::Ingress>, name: &str, what: &str) {
    eventually(what, HEAL, || async {
        let got = stored(api, name).await;
        if got == [CANONICAL] { Ok(()) } else { Err(format!("{got:?}")) }
    })
    .await;
}

/// A Namespace entering the scope every 2 s costs a list of that Namespace, not of every
/// Ingress: the guard's cluster-wide lists during a minute of churn stay at a handful, and
/// what is stale (written meanwhile, or held by a Namespace before it entered) is healed.
#[tokio::test]
async fn namespaces_entering_the_scope_are_listed_alone() {
    let t = TestEnv::private("churn").await;
    let class = t.ns.clone();
    enter(&t, &t.ns).await;
    let names: Vec<String> = (0..INGRESSES).map(|i| format!("i{i}")).collect();
    futures::stream::iter(&names)
        .for_each_concurrent(16, |name| async { drop(create_ingress(&t.ingresses, name, Class::Field(&class)).await) })
        .await;
    let name = format!("isg-{}", t.ns);
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": name},
        "webhooks": [scoping_webhook(
            "ingresses.churn.ingress-status-guard.test",
            "ingresses",
            json!({"matchLabels": {SCOPE_LABEL: "in"}}),
        )]
    }))
    .unwrap();
    let configs: Api<MutatingWebhookConfiguration> = Api::all(t.admin.clone());
    configs.create(&PostParams::default(), &config).await.unwrap();

    let extra = [
        format!("--publish-status-address={CANONICAL}"),
        format!("--ingress-class={class}"),
        format!("--webhook-configuration={name}"),
        "--reconcile-qps=500".to_owned(),
    ];
    let args = reconciler_args(&t, None, &extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let kubeconfig = t.cluster.kubeconfig_for(USER, Some("system:masters"));
    let webhook = Webhook::start(t.cluster, &t.ns, &kubeconfig, &args).await;
    await_synced_leader(&webhook, Duration::from_secs(60)).await;
    // Every Ingress was created without a status: each is healed once, before the churn.
    eventually("every Ingress healed", Duration::from_secs(120), || async {
        let patched =
            webhook.metric("ingress_status_guard_reconcile_patches_total{policy=\"default\",result=\"patched\"}");
        let drift = webhook.metric("ingress_status_guard_drift_ingresses{policy=\"default\"}");
        if patched >= INGRESSES as f64 && drift == 0.0 {
            Ok(())
        } else {
            Err(format!("{patched} patched, {drift} drift"))
        }
    })
    .await;
    let before = Requests::read(&t, USER).ids();

    let rogue = t.cluster.rogue().await;
    let mut held_stale = Vec::new();
    let churn = async {
        for i in 0..NAMESPACES {
            let ns = format!("{}-c{i}", t.ns);
            if i % 5 == 2 {
                // It holds a stale Ingress before it enters: only its list brings that in.
                namespace(&t, &ns, json!({})).await;
                let (admin, rogue) = (Api::namespaced(t.admin.clone(), &ns), Api::namespaced(rogue.clone(), &ns));
                create_ingress(&admin, "pre", Class::Field(&class)).await;
                write_status(&rogue, "pre", &[STALE], false).await.expect("a write out of scope");
                enter(&t, &ns).await;
                held_stale.push(ns);
            } else {
                namespace(&t, &ns, json!({SCOPE_LABEL: "in"})).await;
            }
            tokio::time::sleep(EVERY).await;
        }
    };
    let stale_write = async {
        tokio::time::sleep(EVERY * 8).await;
        let rogue = Api::namespaced(rogue.clone(), &t.ns);
        write_status(&rogue, "i7", &[STALE], false).await.expect("an unreviewed write");
        healed(&t.ingresses, "i7", "a stale status written during the churn is healed").await;
    };
    tokio::join!(churn, stale_write);
    for ns in &held_stale {
        let api = Api::namespaced(t.admin.clone(), ns);
        healed(&api, "pre", &format!("the stale Ingress {ns} held before it entered is healed")).await;
    }

    let requests = Requests::read(&t, USER);
    let during: Vec<&Value> = requests.since(&before).collect();
    let lists = during.iter().filter(|e| starts_a_list(e)).count();
    let wide = during.iter().filter(|e| cluster_wide(e)).count();
    let listed: HashSet<&str> = during
        .iter()
        .filter(|e| e["verb"] == "list" && !cluster_wide(e))
        .filter_map(|e| e["objectRef"]["namespace"].as_str())
        .collect();
    eprintln!(
        "during the churn: {lists} cluster-wide lists started, {wide} cluster-wide list or watch requests, {} Namespaces of {NAMESPACES} listed alone",
        listed.len()
    );
    assert!(
        lists <= MAX_LISTS,
        "{lists} cluster-wide lists of Ingresses during the churn (at most {MAX_LISTS}): {:#?}",
        during.iter().filter(|e| starts_a_list(e)).map(|e| uri(e)).collect::<Vec<_>>()
    );
    for i in 0..NAMESPACES {
        let ns = format!("{}-c{i}", t.ns);
        assert!(listed.contains(ns.as_str()), "Namespace {ns} entered the scope and was listed");
    }
    assert!(webhook.log().contains("Ingress cache synced"), "{}", webhook.log_tail());
}
