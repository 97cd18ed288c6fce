//! Support for the tests that need a control plane (`tests/cluster/`, the binaries that measure
//! allocations against one, the soak, and the benches): a real kube-apiserver + etcd on
//! loopback (`cluster`), the webhook binary as a child process and its registration
//! (`webhook`), certificates (`pki`), child-process lifetime (`process`), and small helpers
//! for Ingresses and their status.
//!
//! The binaries come from `tests/k8s/build.sh` (built once from Go modules and cached, or
//! taken from `KUBEBUILDER_ASSETS`).

pub(crate) mod cluster;
pub(crate) mod gateway;
pub(crate) mod guard;
pub(crate) mod kubeconfig;
pub(crate) mod pki;
pub(crate) mod process;
pub(crate) mod proxy;
pub(crate) mod webhook;

use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

pub(crate) use cluster::{Cluster, ROGUE_USER};
pub(crate) use webhook::{FailurePolicy, Webhook};

/// Calls `attempt` every 200 ms until it returns `Ok`, and panics with `what` and the last
/// error once `timeout` has passed. For state that settles asynchronously (webhook
/// registrations, watch caches); the assertion is on the final state, never on the duration.
pub(crate) async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut attempt: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match attempt().await {
            Ok(value) => return value,
            Err(e) if Instant::now() > deadline => {
                panic!("{what}: still not true after {timeout:?}; last: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Which way an Ingress names its class.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Class<'a> {
    /// `spec.ingressClassName`
    Field(&'a str),
    /// the legacy annotation `kubernetes.io/ingress.class`
    Annotation(&'a str),
    None,
}

/// Creates an Ingress with one rule routing to Service `backend:80`.
pub(crate) async fn create_ingress(api: &Api<Ingress>, name: &str, class: Class<'_>) -> Ingress {
    let mut ingress = json!({
        "metadata": {"name": name},
        "spec": {"rules": [{"host": format!("{name}.example.test"), "http": {"paths": [{
            "path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "backend", "port": {"number": 80}}}
        }]}}]}
    });
    match class {
        Class::Field(c) => ingress["spec"]["ingressClassName"] = json!(c),
        Class::Annotation(c) => ingress["metadata"]["annotations"] = json!({"kubernetes.io/ingress.class": c}),
        Class::None => {}
    }
    let ingress: Ingress = serde_json::from_value(ingress).expect("Ingress object");
    api.create(&PostParams::default(), &ingress).await.unwrap_or_else(|e| panic!("create Ingress {name}: {e}"))
}

/// `status.loadBalancer.ingress` as a JSON array from short strings: `"1.2.3.4"` is an IP
/// entry, `"lb.example.com"` a hostname entry, `"1.2.3.4/lb.example.com"` an entry with both,
/// and a `:80` suffix adds a TCP port.
pub(crate) fn entries(addresses: &[&str]) -> Value {
    Value::Array(
        addresses
            .iter()
            .map(|a| {
                let (addr, port) = match a.rsplit_once(':') {
                    Some((addr, port)) if !addr.contains(':') => (addr, port.parse::<i32>().ok()),
                    _ => (*a, None),
                };
                let mut entry = match addr.split_once('/') {
                    Some((ip, host)) => json!({"ip": ip, "hostname": host}),
                    None if addr.parse::<std::net::IpAddr>().is_ok() => json!({"ip": addr}),
                    None => json!({"hostname": addr}),
                };
                if let Some(port) = port {
                    entry["ports"] = json!([{"port": port, "protocol": "TCP"}]);
                }
                entry
            })
            .collect(),
    )
}

/// The inverse of `entries`: an Ingress's `status.loadBalancer.ingress` in the same short
/// form, order kept.
pub(crate) fn addresses(ingress: &Ingress) -> Vec<String> {
    ingress
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .map(|list| {
            list.iter()
                .map(|e| {
                    let mut s = match (&e.ip, &e.hostname) {
                        (Some(ip), Some(host)) => format!("{ip}/{host}"),
                        (Some(ip), None) => ip.clone(),
                        (None, Some(host)) => host.clone(),
                        (None, None) => "<empty>".into(),
                    };
                    for p in e.ports.iter().flatten() {
                        s.push_str(&format!(":{}", p.port));
                    }
                    s
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Merge-patches `status.loadBalancer.ingress` through the status subresource (replacing the
/// list), as a controller would; returns what the API server stored (or, on dry run, would).
pub(crate) async fn write_status(
    api: &Api<Ingress>,
    name: &str,
    addresses: &[&str],
    dry_run: bool,
) -> kube::Result<Ingress> {
    let params = PatchParams { field_manager: Some(ROGUE_USER.into()), dry_run, ..PatchParams::default() };
    let patch = json!({"status": {"loadBalancer": {"ingress": entries(addresses)}}});
    api.patch_status(name, &params, &Patch::Merge(&patch)).await
}

/// Reads an Ingress's stored addresses.
pub(crate) async fn stored(api: &Api<Ingress>, name: &str) -> Vec<String> {
    let ingress = api.get(name).await.unwrap_or_else(|e| panic!("get Ingress {name}: {e}"));
    addresses(&ingress)
}

/// IPs no canonical set contains: what rogue probe writes put in.
pub(crate) const SENTINEL: &str = "192.0.2.254";
pub(crate) const SENTINEL_2: &str = "192.0.2.253";

/// One test's slice of the shared cluster: its namespace, an admin and a rogue view of the
/// Ingresses in it, and the webhook it registered.
pub(crate) struct TestEnv {
    pub cluster: &'static Cluster,
    pub admin: kube::Client,
    pub ns: String,
    /// Ingresses in `ns`, as the administrator sees them.
    pub ingresses: Api<Ingress>,
    /// Ingresses in `ns`, as `rogue-controller` (may only read them and write their status).
    pub rogue: Api<Ingress>,
    /// Stops a private control plane when the test ends; `None` for the shared one.
    _private: Option<Private>,
}

/// Stops a control plane started by [`TestEnv::private`] when dropped.
struct Private(&'static Cluster);

impl Drop for Private {
    fn drop(&mut self) {
        self.0.stop();
    }
}

impl TestEnv {
    /// A namespace `<prefix>-<n>` in the shared control plane.
    pub(crate) async fn new(prefix: &str) -> TestEnv {
        TestEnv::on(Cluster::shared().await, prefix, None).await
    }

    /// As [`TestEnv::new`], on a control plane of the test's own (stopped when the `TestEnv`
    /// is dropped): for a test that stops the API server, lists cluster-scoped objects expecting
    /// only its own, or creates what every namespace sees (a default IngressClass).
    #[allow(dead_code)] // Only tests/cluster needs one.
    pub(crate) async fn private(prefix: &str) -> TestEnv {
        let cluster = Cluster::private().await;
        TestEnv::on(cluster, prefix, Some(Private(cluster))).await
    }

    /// As [`TestEnv::private`], on a control plane without streaming lists
    /// ([`Cluster::private_in_pages`]).
    #[allow(dead_code)] // Only tests/cluster needs one.
    pub(crate) async fn private_in_pages(prefix: &str) -> TestEnv {
        let cluster = Cluster::private_in_pages().await;
        TestEnv::on(cluster, prefix, Some(Private(cluster))).await
    }

    async fn on(cluster: &'static Cluster, prefix: &str, private: Option<Private>) -> TestEnv {
        let admin = cluster.admin().await;
        let ns = cluster.namespace(&admin, prefix).await;
        TestEnv {
            ingresses: Api::namespaced(admin.clone(), &ns),
            rogue: Api::namespaced(cluster.rogue().await, &ns),
            cluster,
            admin,
            ns,
            _private: private,
        }
    }

    /// Starts the webhook with the administrator's kubeconfig and `args`.
    pub(crate) async fn start_webhook(&self, args: &[&str]) -> Webhook {
        Webhook::start(self.cluster, &self.ns, self.cluster.admin_kubeconfig(), args).await
    }

    /// Registers `webhook` for this namespace and waits until the API server calls it: an
    /// Ingress `probe` (of `class`) gets rogue writes of `SENTINEL` until the stored status is
    /// `canonical`.
    pub(crate) async fn register(
        &self,
        webhook: &Webhook,
        policy: FailurePolicy,
        class: Class<'_>,
        canonical: &[&str],
    ) {
        webhook.register(&self.admin, &self.ns, policy).await;
        self.await_governed(webhook, "probe", class, canonical).await;
    }

    /// Creates Ingress `name` (of `class`) and writes `SENTINEL` to its status as the rogue
    /// identity until the stored status is `canonical`.
    pub(crate) async fn await_governed(&self, webhook: &Webhook, name: &str, class: Class<'_>, canonical: &[&str]) {
        create_ingress(&self.ingresses, name, class).await;
        let mut flip = false;
        eventually(
            &format!(
                "a rogue status write on Ingress {}/{name} is stored as {canonical:?} (webhook log: {})",
                self.ns,
                webhook.log_path().display()
            ),
            Duration::from_secs(30),
            || {
                // Alternate two values so that every attempt is a real change.
                flip = !flip;
                let written = if flip { SENTINEL } else { SENTINEL_2 };
                async move {
                    let stored = write_status(&self.rogue, name, &[written], false).await.map_err(|e| e.to_string())?;
                    let stored = addresses(&stored);
                    if stored == canonical { Ok(()) } else { Err(format!("stored {stored:?}")) }
                }
            },
        )
        .await;
    }

    /// The audited webhook verdicts on status writes of Ingress `name`, oldest first, once
    /// there are at least `count` of them.
    pub(crate) async fn audited(&self, name: &str, count: usize) -> Vec<Audited> {
        eventually(
            &format!("{count} audited status writes of Ingress {}/{name}", self.ns),
            Duration::from_secs(10),
            || async {
                let events = self.cluster.ingress_status_audit(&self.ns, name);
                if events.len() >= count {
                    Ok(events.iter().map(Audited::from_event).collect())
                } else {
                    Err(format!("{} events", events.len()))
                }
            },
        )
        .await
    }
}

/// The `events.k8s.io/v1` Events in `ns` regarding Ingress `name`.
pub(crate) async fn events_about(client: &kube::Client, ns: &str, name: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await
        .unwrap_or_else(|e| panic!("list Events in {ns}: {e}"))
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect()
}

impl TestEnv {
    /// Waits for the webhook's Event about Ingress `name` (written off the request path).
    pub(crate) async fn await_event(&self, webhook: &Webhook, name: &str) -> Event {
        eventually(
            &format!("an Event regarding Ingress {}/{name} (webhook log: {})", self.ns, webhook.log_path().display()),
            Duration::from_secs(15),
            || async {
                events_about(&self.admin, &self.ns, name).await.pop().ok_or_else(|| "no Event yet".to_string())
            },
        )
        .await
    }
}

/// What the API server's audit log says about one status write and the mutating webhooks.
/// Annotation keys end in `round_<r>_index_<i>`, `i` counting every registered webhook, so
/// they are found by prefix; a test namespace is selected by one webhook only.
#[derive(Debug)]
pub(crate) struct Audited {
    pub user: String,
    pub code: i64,
    /// `mutation.webhook.admission.k8s.io/*`: the webhook was called; `mutated` says whether
    /// its patch changed the object.
    pub mutated: Option<bool>,
    /// `patch.webhook.admission.k8s.io/*`: the webhook answered with a non-empty patch
    /// (recorded even when the patch changes nothing).
    pub patch: Option<Value>,
    /// `failed-open.mutation.webhook.admission.k8s.io/*`: the call failed and
    /// `failurePolicy: Ignore` let the write through.
    pub failed_open: bool,
}

impl Audited {
    fn from_event(event: &Value) -> Audited {
        let annotation = |prefix: &str| -> Option<Value> {
            let (_, text) = event["annotations"].as_object()?.iter().find(|(key, _)| key.starts_with(prefix))?;
            let text = text.as_str()?;
            serde_json::from_str(text).ok().or(Some(Value::String(text.into())))
        };
        Audited {
            user: event["user"]["username"].as_str().unwrap_or_default().into(),
            code: event["responseStatus"]["code"].as_i64().unwrap_or_default(),
            mutated: annotation("mutation.webhook.admission.k8s.io/").and_then(|v| v["mutated"].as_bool()),
            patch: annotation("patch.webhook.admission.k8s.io/"),
            failed_open: annotation("failed-open.mutation.webhook.admission.k8s.io/").is_some(),
        }
    }
}
