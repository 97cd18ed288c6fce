//! Issue 33's soak of two releases in `--admission=policy` against a real kube-apiserver: two
//! helm installs of the chart in two namespaces, each guard run as its release's ServiceAccount
//! (the chart's RBAC, nothing more) with a policy named `default` of a class of its own and a
//! publish Service of its own, which moves every 23 s (release a) and 37 s (release b) for
//! `ISG_SOAK_SECONDS` (default 120; CI runs 900, `.ci/run`). Every second, throughout: each
//! release's MutatingAdmissionPolicy and binding carry its owner label and only its field
//! manager, and enforce its Service's current or previous address, never the other's; a rogue
//! status write to an Ingress of each class is stored as that class's own guard's current or
//! previous address, and an Ingress nobody writes (healed by the guard's reconciler) holds one
//! of its own guard's addresses. Each move is enforced (the MAP and a rogue write at the new
//! address) within 60 s, a correctness bound (a guard follows in about a second): the next move
//! waits for it.

#[allow(dead_code)]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use support::cluster::KubectlOutput;
use support::{Class, SENTINEL, SENTINEL_2, TestEnv, Webhook, addresses, create_ingress, eventually, write_status};

const CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/charts/ingress-status-guard");
/// How long a move may take to be enforced everywhere: generous, for a loaded CI machine.
const ENFORCED_WITHIN: Duration = Duration::from_secs(60);
/// The soak's length when `ISG_SOAK_SECONDS` is not set, and the bounds it is held to.
const DEFAULT_SECONDS: u64 = 120;
const SECONDS: std::ops::RangeInclusive<u64> = 60..=7200;

/// `ISG_SOAK_SECONDS`, or the default; anything else than a number of seconds in `SECONDS` is
/// refused, naming the variable.
fn soak_length() -> Duration {
    let seconds = match std::env::var("ISG_SOAK_SECONDS") {
        Err(_) => DEFAULT_SECONDS,
        Ok(text) => text.trim().parse::<u64>().ok().filter(|s| SECONDS.contains(s)).unwrap_or_else(|| {
            panic!("ISG_SOAK_SECONDS={text:?}: give whole seconds from {} to {}", SECONDS.start(), SECONDS.end())
        }),
    };
    Duration::from_secs(seconds)
}

/// One release: its namespace, names, class, addresses and guard.
struct Release {
    ns: String,
    fullname: String,
    class: String,
    /// The addresses its Service had, oldest first: the last is current.
    history: Vec<String>,
    /// The base of its addresses (`203.0.113.` or `198.51.100.`): the two never share one.
    base: &'static str,
    period: Duration,
    moved_at: Instant,
    /// Whether everything was seen at the current address since the last move.
    enforced: bool,
    /// What the last look found (MAP, rogue write, quiet Ingress), for a failure's message.
    last_seen: String,
    guard: Option<Webhook>,
}

impl Release {
    fn owner(&self) -> String {
        format!("{}.{}", self.ns, self.fullname)
    }
    /// The objects of policy `default`, the release's one Ingress policy: its kind's slot 0.
    fn object(&self) -> String {
        format!("{}-ingress-0", self.fullname)
    }
    fn current(&self) -> &str {
        self.history.last().expect("an address")
    }
    /// The current address and the one before it: what may be in force right after a move.
    fn allowed(&self) -> &[String] {
        &self.history[self.history.len().saturating_sub(2)..]
    }
    fn guard(&self) -> &Webhook {
        self.guard.as_ref().expect("the guard runs")
    }
}

fn helm(home: &Path, args: &[&str]) -> KubectlOutput {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/helm/build.sh");
    let out = Command::new("bash").arg(&script).arg("3").stderr(std::process::Stdio::inherit()).output().unwrap();
    let bin = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").trim().to_owned();
    assert!(out.status.success() && !bin.is_empty(), "{} 3 failed", script.display());
    let out = Command::new(bin)
        .args(args)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env_remove("KUBECONFIG")
        .output()
        .expect("run helm");
    KubectlOutput {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

async fn set_edge(admin: &kube::Client, ns: &str, ip: &str) {
    let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}});
    Api::<Service>::namespaced(admin.clone(), ns)
        .patch_status("edge", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("move the Service");
}

/// Installs release `name` in a namespace of its own, with its Service `edge` at `ip`, and
/// starts its guard as the release's ServiceAccount with the release's policy file.
async fn install(t: &TestEnv, home: &Path, name: &str, base: &'static str, period: Duration) -> Release {
    let ns = t.cluster.namespace(&t.admin, name).await;
    let (fullname, class) = (format!("{name}-ingress-status-guard"), format!("class-{name}"));
    let service: Service = serde_json::from_value(
        json!({"metadata": {"name": "edge"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}),
    )
    .unwrap();
    Api::<Service>::namespaced(t.admin.clone(), &ns).create(&PostParams::default(), &service).await.unwrap();
    let first = format!("{base}10");
    set_edge(&t.admin, &ns, &first).await;
    let values = home.join(format!("{name}.yaml"));
    let text = format!(
        // No kubelet runs the doctor hook Job, which helm would wait for.
        "admission: {{mode: policy}}\ndoctor: {{hook: {{enabled: false}}}}\npolicies:\n- {{name: default, ingressClasses: [{class}], publishService: {ns}/edge, mode: enforce}}\n"
    );
    std::fs::write(&values, text).unwrap();
    let kubeconfig = format!("--kubeconfig={}", t.cluster.admin_kubeconfig().display());
    let out = helm(home, &["install", name, CHART, "--namespace", &ns, "-f", values.to_str().unwrap(), &kubeconfig]);
    assert!(out.success, "helm install {name}: {}", out.stderr);
    // The guard's policy file is the release's ConfigMap, as the pod would mount it.
    let map = t.cluster.kubectl(
        t.cluster.admin_kubeconfig(),
        &["get", "configmap", &format!("{fullname}-config"), "-n", &ns, "-o", "jsonpath={.data.config\\.yaml}"],
    );
    assert!(map.success, "{}", map.stderr);
    let config: PathBuf = home.join(format!("{name}-config.yaml"));
    std::fs::write(&config, map.stdout).unwrap();
    let account =
        t.cluster.kubeconfig_for(&format!("system:serviceaccount:{ns}:{fullname}"), Some("system:serviceaccounts"));
    let (config_arg, lease_ns, lease) = (
        format!("--config={}", config.display()),
        format!("--leader-election-namespace={ns}"),
        format!("--leader-election-lease-name={fullname}"),
    );
    let args = ["--admission=policy", "--reconcile", &config_arg, &lease_ns, &lease];
    let guard = Webhook::start(t.cluster, &ns, &account, &args).await;
    create_ingress(&t.ingresses, &format!("web-{name}"), Class::Field(&class)).await;
    create_ingress(&t.ingresses, &format!("quiet-{name}"), Class::Field(&class)).await;
    Release {
        ns,
        fullname,
        class,
        history: vec![first],
        base,
        period,
        moved_at: Instant::now(),
        enforced: false,
        last_seen: String::new(),
        guard: Some(guard),
    }
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind), plural)
}

/// What one look at the cluster found for a release: its MAP's address (if the MAP carries
/// exactly one of its own), the rogue write's stored result, the quiet Ingress's status.
struct Seen {
    map: Option<String>,
    rogue: Vec<String>,
    quiet: Vec<String>,
}

/// Checks the objects labelled as, or named for, `r`: its two objects only, its label, its
/// field manager alone, and a MAP enforcing one address of its own. An error says what is off.
fn check_objects(r: &Release, other: &Release, objects: &[(String, DynamicObject)]) -> Result<Option<String>, String> {
    let label = "ingress-status-guard/lease";
    let manager = format!("ingress-status-guard-admission-policy/{}", r.owner());
    let mut found = 0;
    let mut value = None;
    for (kind, o) in objects {
        let name = o.metadata.name.as_deref().unwrap_or_default();
        let owner = o.metadata.labels.as_ref().and_then(|l| l.get(label)).map(String::as_str);
        let (named, labelled) = (name == r.object(), owner == Some(r.owner().as_str()));
        if !named && !labelled {
            continue;
        }
        if !(named && labelled) {
            return Err(format!("{kind} {name}: label {owner:?}, this release's name {named}"));
        }
        found += 1;
        let managers: Vec<&str> =
            o.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.as_deref()).collect();
        if managers.is_empty() || managers.iter().any(|m| *m != manager) {
            return Err(format!("{kind} {name}: field managers {managers:?}, not only {manager}"));
        }
        // The two releases' addresses share no prefix: any of the other's anywhere is a flip.
        let spec = o.data["spec"].to_string();
        if spec.contains(other.base) {
            return Err(format!("{kind} {name} holds an address of {}: {spec}", other.class));
        }
        if kind == "MutatingAdmissionPolicyBinding" && o.data["spec"]["policyName"] != r.object().as_str() {
            return Err(format!("{kind} {name} binds {}", o.data["spec"]["policyName"]));
        }
        if kind == "MutatingAdmissionPolicy" {
            let expression = o.data["spec"]["mutations"][0]["jsonPatch"]["expression"].as_str().unwrap_or_default();
            let own: Vec<&String> = r.history.iter().filter(|ip| expression.contains(&format!("\"{ip}\""))).collect();
            match own.as_slice() {
                [ip] if r.allowed().contains(ip) => value = Some((*ip).clone()),
                _ => return Err(format!("{kind} {name} enforces {own:?}, not one of {:?}: {expression}", r.allowed())),
            }
        }
    }
    if found != 2 {
        return Err(format!("{found} objects of {}, not its MAP and binding", r.owner()));
    }
    Ok(value)
}

/// One look: the objects (listed once for both), a rogue write and the quiet Ingress, per release.
async fn look(t: &TestEnv, releases: [&Release; 2], flip: bool) -> Result<[Seen; 2], String> {
    let mut objects = Vec::new();
    for (kind, plural) in [
        ("MutatingAdmissionPolicy", "mutatingadmissionpolicies"),
        ("MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings"),
    ] {
        let api: Api<DynamicObject> = Api::all_with(t.admin.clone(), &resource(kind, plural));
        let list = api.list(&ListParams::default()).await.map_err(|e| format!("list {plural}: {e}"))?;
        objects.extend(list.items.into_iter().map(|o| (kind.to_owned(), o)));
    }
    let mut seen = Vec::new();
    for (i, r) in releases.iter().enumerate() {
        let map = check_objects(r, releases[1 - i], &objects)?;
        let written = if flip { SENTINEL } else { SENTINEL_2 };
        let name = format!("web-{}", &r.class["class-".len()..]);
        let rogue = write_status(&t.rogue, &name, &[written], false).await.map_err(|e| format!("rogue write: {e}"))?;
        let quiet =
            t.ingresses.get(&format!("quiet-{}", &r.class["class-".len()..])).await.map_err(|e| e.to_string())?;
        seen.push(Seen { map, rogue: addresses(&rogue), quiet: addresses(&quiet) });
    }
    let [a, b]: [Seen; 2] = seen.try_into().ok().expect("two releases");
    Ok([a, b])
}

/// A rogue write is stored as one of `r`'s addresses, current or previous (the sentinel, the
/// other's value or an older one of its own is a failure); the quiet Ingress holds one of
/// `r`'s own addresses, never the other's. Whether the MAP and the rogue write are at the
/// current address.
///
/// The quiet Ingress is not held to the current address: the reconciler patches one Ingress at
/// most 10 times an hour and then backs off (`reconcile/damping.rs`), while a source moving
/// every 23 s asks for 156; what keeps the value current is the admission policy.
fn judge(r: &Release, seen: &Seen) -> Result<bool, String> {
    if !(seen.rogue.len() == 1 && r.allowed().contains(&seen.rogue[0])) {
        return Err(format!("{}: the rogue write stored {:?}, not one of {:?}", r.class, seen.rogue, r.allowed()));
    }
    if !(seen.quiet.len() == 1 && r.history.contains(&seen.quiet[0])) {
        return Err(format!("{}: the quiet Ingress holds {:?}, none of {:?}", r.class, seen.quiet, r.history));
    }
    let current = r.current();
    Ok(seen.map.as_deref() == Some(current) && seen.rogue == [current])
}

#[tokio::test]
async fn two_releases_with_moving_sources_never_flip_each_others_objects() {
    let t = TestEnv::new("soak").await;
    let resources =
        t.cluster.kubectl(t.cluster.admin_kubeconfig(), &["api-resources", "--api-group=admissionregistration.k8s.io"]);
    if !resources.stdout.contains("mutatingadmissionpolicies") {
        eprintln!("the API server serves no MutatingAdmissionPolicy: policy mode cannot run here");
        return;
    }
    let length = soak_length();
    let home = t.cluster.scratch_dir("soak-helm");
    let mut a = install(&t, &home, "soak-a", "203.0.113.", Duration::from_secs(23)).await;
    let mut b = install(&t, &home, "soak-b", "198.51.100.", Duration::from_secs(37)).await;
    let mut flip = false;
    eventually("both releases enforce their first address", ENFORCED_WITHIN, || {
        flip = !flip;
        let (t, a, b) = (&t, &a, &b);
        async move {
            let [sa, sb] = look(t, [a, b], flip).await?;
            if judge(a, &sa)? && judge(b, &sb)? { Ok(()) } else { Err("not yet".into()) }
        }
    })
    .await;
    a.enforced = true;
    b.enforced = true;
    let started = Instant::now();
    let (mut looks, mut moves) = (0u64, 0u64);
    while started.elapsed() < length {
        for r in [&mut a, &mut b] {
            // The next move once the last one is enforced; a move not enforced in time fails.
            if r.enforced && r.moved_at.elapsed() >= r.period {
                let next = format!("{}{}", r.base, 11 + r.history.len() % 200);
                set_edge(&t.admin, &r.ns, &next).await;
                r.history.push(next);
                (r.moved_at, r.enforced) = (Instant::now(), false);
                moves += 1;
            }
            assert!(
                r.enforced || r.moved_at.elapsed() < ENFORCED_WITHIN,
                "{}: the move to {} is not enforced after {ENFORCED_WITHIN:?} (last seen {}):\n{}",
                r.class,
                r.current(),
                r.last_seen,
                r.guard().log_tail()
            );
        }
        flip = !flip;
        let seen = look(&t, [&a, &b], flip).await;
        let [sa, sb] = seen.unwrap_or_else(|e| panic!("after {:?}: {e}", started.elapsed()));
        for (r, s) in [(&mut a, &sa), (&mut b, &sb)] {
            let current = judge(r, s).unwrap_or_else(|e| panic!("after {:?}: {e}", started.elapsed()));
            r.enforced |= current;
            r.last_seen = format!("MAP {:?}, rogue write {:?}, quiet Ingress {:?}", s.map, s.rogue, s.quiet);
        }
        looks += 1;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!("soak: {looks} looks and {moves} moves in {:?}", started.elapsed());
    for r in [&a, &b] {
        assert!(r.history.len() >= 2, "{}'s Service moved: {:?}", r.class, r.history);
        let guard = r.guard();
        let log = guard.log();
        let forbidden = guard.forbidden_lines();
        assert!(forbidden.is_empty(), "{}: forbidden in the guard's log: {forbidden:#?}\n{log}", r.class);
        assert!(!log.contains("held by another guard"), "{}: {log}", r.class);
        assert_eq!(guard.metric("ingress_status_guard_admission_policy_foreign_objects"), 0.0, "{}", r.class);
        assert_eq!(guard.metric("ingress_status_guard_leader"), 1.0, "{} leads throughout", r.class);
    }
}
