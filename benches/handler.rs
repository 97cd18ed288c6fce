//! Handler cost in-process: AdmissionReview bytes in, response bytes out, through
//! `read_review` + `decide` + `render` and through the production router (`tower::ServiceExt::oneshot`), for a
//! typical review (~5 KB) and a large one (hundreds of rules), each as no patch / patch /
//! not governed; and a typical Gateway status review (`decide/gateway`), no patch / patch, and
//! its reading alone (`read/gateway`: the shipped reader against serde_json). Also
//! counts heap allocations per review with a counting global allocator.
//!
//! Run: `cargo bench --bench handler` (or `benches/run.sh`). With `ISG_BENCH_OUT=<dir>`, the
//! allocation counts are also written to `<dir>/allocations.json`.

use std::{
    alloc::{GlobalAlloc, Layout, System},
    hint::black_box,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use axum::{
    Router,
    body::{Body, Bytes},
    http::Request,
};
use criterion::{BenchmarkId, Criterion, Throughput};
use ingress_status_guard::{
    AppState, Mode, OnUnresolved, Policies, PolicySpec, SourceCache, Sources, read_review, render, webhook_router,
};
use serde_json::{Value, json};
use tower::ServiceExt;

/// Counts allocations (and bytes) while `COUNTING` is set; otherwise only a relaxed load.
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator.
#[allow(unsafe_code)] // a counting allocator forwards to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        }
        // SAFETY: same layout contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        }
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const FIXTURE: &str = include_str!("../tests/fixtures/ingress-status-update.apiserver-1.24.json");
const GOVERNED_CLASS: &str = "nginx";
const CANONICAL: &str = "192.0.2.10,lb.example.test";

/// The three cases of every size: (name, ingress class, written status, expected outcome).
fn cases() -> [(&'static str, &'static str, Value, &'static str); 3] {
    let canonical = json!([{"ip": "192.0.2.10"}, {"hostname": "lb.example.test"}]);
    let rogue = json!([{"ip": "10.7.7.7"}]);
    [
        ("no_patch", GOVERNED_CLASS, canonical, "unchanged"),
        ("patch", GOVERNED_CLASS, rogue.clone(), "patched"),
        ("not_governed", "traefik", rogue, "not_governed"),
    ]
}

/// The two sizes: (name, number of rules). 4 rules make the fixture about 5 KB.
const SIZES: [(&str, usize); 2] = [("typical", 4), ("large", 300)];

/// The fixture (a real API server's review), with `rules` rules in `spec` and in the
/// `last-applied-configuration` annotation of both `object` and `oldObject`, the given class,
/// and `written` as the new `status.loadBalancer.ingress`.
fn review_body(rules: usize, class: &str, written: &Value) -> Vec<u8> {
    let mut review: Value = serde_json::from_str(FIXTURE).expect("fixture is JSON");
    let rules: Vec<Value> = (0..rules)
        .map(|i| {
            json!({"host": format!("app-{i}.demo.example.test"), "http": {"paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": format!("app-{i}"), "port": {"number": 80}}}
            }]}})
        })
        .collect();
    for key in ["object", "oldObject"] {
        let object = &mut review["request"][key];
        object["spec"] = json!({"ingressClassName": class, "rules": rules});
        let applied = json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"annotations": {}, "name": "demo-ing", "namespace": "default"},
            "spec": object["spec"],
        });
        object["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
            Value::String(format!("{applied}\n"));
    }
    review["request"]["object"]["status"]["loadBalancer"]["ingress"] = written.clone();
    serde_json::to_vec(&review).expect("serializes")
}

fn policies() -> Policies {
    let policy = PolicySpec {
        publish_service: None,
        publish_status_address: Some(CANONICAL.into()),
        ingress_classes: vec![GOVERNED_CLASS.into()],
        watch_ingress_without_class: false,
        mode: Some(Mode::Enforce),
        keep_ports: false,
        on_unresolved: OnUnresolved::Allow,
        ..PolicySpec::default()
    };
    policy.into_policies().expect("valid policy")
}

/// What the handler does with a body, without HTTP: read, decide, render. The response and
/// the result label.
fn decide(body: &[u8], policies: &Policies, sources: &dyn Sources) -> (Vec<u8>, &'static str) {
    let review = read_review(body).expect("valid review");
    let verdict = review.decide(policies, sources);
    (render(&review, &verdict), verdict.result())
}

fn request(body: &Bytes) -> Request<Body> {
    Request::post("/mutate").header("content-type", "application/json").body(Body::from(body.clone())).expect("request")
}

async fn through_router(router: &Router, body: &Bytes) -> Bytes {
    let response = router.clone().oneshot(request(body)).await.expect("infallible");
    assert_eq!(response.status(), 200);
    axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime")
}

/// Allocations and bytes allocated per call of `f`, averaged over `n` calls after a warm-up.
fn allocations(n: u64, mut f: impl FnMut()) -> (f64, f64) {
    for _ in 0..10 {
        f();
    }
    ALLOCS.store(0, Ordering::Relaxed);
    BYTES.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    for _ in 0..n {
        f();
    }
    COUNTING.store(false, Ordering::Relaxed);
    (ALLOCS.load(Ordering::Relaxed) as f64 / n as f64, BYTES.load(Ordering::Relaxed) as f64 / n as f64)
}

/// The candidates for reading a review, compared in `read/<size>/<reader>`: the shipped reader
/// (`serde_json`, with the bounded visitors), and two SIMD libraries extracting the same fields: sonic-rs
/// (`get_many`, which skips unrequested subtrees lazily) and simd-json (a tape of the whole
/// document, then lookups). Each decodes the small sub-objects (`userInfo`, `status`) the same way.
mod candidates {
    use simd_json::prelude::ValueAsScalar as _;
    use sonic_rs::JsonValueTrait as _;

    /// What the decision needs, as the SIMD candidates extract it.
    #[derive(Default, Debug)]
    #[allow(dead_code)] // Compared through `Debug` only.
    pub(crate) struct Fields {
        pub api_version: String,
        pub kind: String,
        pub uid: String,
        pub group: String,
        pub resource_kind: String,
        pub sub_resource: String,
        pub operation: String,
        pub name: String,
        pub namespace: String,
        pub username: String,
        pub groups: Vec<String>,
        pub dry_run: bool,
        pub object_uid: Option<String>,
        pub class: Option<String>,
        pub annotation_class: Option<String>,
        pub addresses: Vec<(Option<String>, Option<String>)>,
    }

    #[derive(serde::Deserialize)]
    struct UserIn {
        #[serde(default)]
        username: String,
        #[serde(default)]
        groups: Vec<String>,
    }

    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct StatusIn {
        #[serde(default)]
        load_balancer: Option<LbIn>,
    }

    #[derive(serde::Deserialize)]
    struct LbIn {
        #[serde(default)]
        ingress: Option<Vec<AddrIn>>,
    }

    #[derive(serde::Deserialize)]
    struct AddrIn {
        ip: Option<String>,
        hostname: Option<String>,
    }

    const PATHS: &[&[&str]] = &[
        &["apiVersion"],
        &["kind"],
        &["request", "uid"],
        &["request", "kind", "group"],
        &["request", "kind", "kind"],
        &["request", "subResource"],
        &["request", "operation"],
        &["request", "name"],
        &["request", "namespace"],
        &["request", "userInfo"],
        &["request", "dryRun"],
        &["request", "object", "metadata", "uid"],
        &["request", "object", "metadata", "annotations", "kubernetes.io/ingress.class"],
        &["request", "object", "spec", "ingressClassName"],
        &["request", "object", "status"],
    ];

    pub(crate) fn sonic_tree() -> sonic_rs::PointerTree {
        let mut tree = sonic_rs::PointerTree::new();
        for path in PATHS {
            tree.add_path(path.iter().copied());
        }
        tree
    }

    fn lazy_string(v: &Option<sonic_rs::LazyValue<'_>>) -> Option<String> {
        let v = v.as_ref()?;
        match v.as_str() {
            Some(s) => Some(s.to_owned()),
            None => sonic_rs::from_str(v.as_raw_str()).ok(),
        }
    }

    #[inline(never)]
    pub(crate) fn read_with_sonic_rs(body: &[u8], tree: &sonic_rs::PointerTree) -> Option<Fields> {
        let found = sonic_rs::get_many(body, tree).ok()?;
        let s = |i: usize| lazy_string(&found[i]);
        let user: UserIn = match &found[9] {
            Some(v) => sonic_rs::from_str(v.as_raw_str()).ok()?,
            None => UserIn { username: String::new(), groups: vec![] },
        };
        let status: Option<StatusIn> = match &found[14] {
            Some(v) => sonic_rs::from_str(v.as_raw_str()).ok()?,
            None => None,
        };
        Some(Fields {
            api_version: s(0)?,
            kind: s(1)?,
            uid: s(2)?,
            group: s(3).unwrap_or_default(),
            resource_kind: s(4).unwrap_or_default(),
            sub_resource: s(5).unwrap_or_default(),
            operation: s(6).unwrap_or_default(),
            name: s(7).unwrap_or_default(),
            namespace: s(8).unwrap_or_default(),
            username: user.username,
            groups: user.groups,
            dry_run: found[10].as_ref().and_then(sonic_rs::JsonValueTrait::as_bool).unwrap_or(false),
            object_uid: s(11),
            annotation_class: s(12),
            class: s(13),
            addresses: addresses(status),
        })
    }

    fn addresses(status: Option<StatusIn>) -> Vec<(Option<String>, Option<String>)> {
        status
            .and_then(|s| s.load_balancer)
            .and_then(|lb| lb.ingress)
            .unwrap_or_default()
            .into_iter()
            .map(|a| (a.ip, a.hostname))
            .collect()
    }

    /// simd-json parses in place: the body is copied into `scratch` (reused, as a server would).
    #[inline(never)]
    pub(crate) fn read_with_simd_json(
        body: &[u8],
        scratch: &mut Vec<u8>,
        buffers: &mut simd_json::Buffers,
    ) -> Option<Fields> {
        scratch.clear();
        scratch.extend_from_slice(body);
        let tape = simd_json::to_tape_with_buffers(scratch, buffers).ok()?;
        let v = tape.as_value();
        let request = v.get("request")?;
        let s = |v: Option<simd_json::tape::Value<'_, '_>>| v.and_then(|v| v.as_str().map(str::to_owned));
        let object = request.get("object");
        let metadata = object.and_then(|o| o.get("metadata"));
        let user = request.get("userInfo");
        let ingress = object
            .and_then(|o| o.get("status"))
            .and_then(|s| s.get("loadBalancer"))
            .and_then(|lb| lb.get("ingress"))
            .and_then(|i| i.as_array());
        Some(Fields {
            api_version: s(v.get("apiVersion"))?,
            kind: s(v.get("kind"))?,
            uid: s(request.get("uid"))?,
            group: s(request.get("kind").and_then(|k| k.get("group"))).unwrap_or_default(),
            resource_kind: s(request.get("kind").and_then(|k| k.get("kind"))).unwrap_or_default(),
            sub_resource: s(request.get("subResource")).unwrap_or_default(),
            operation: s(request.get("operation")).unwrap_or_default(),
            name: s(request.get("name")).unwrap_or_default(),
            namespace: s(request.get("namespace")).unwrap_or_default(),
            username: s(user.and_then(|u| u.get("username"))).unwrap_or_default(),
            groups: user
                .and_then(|u| u.get("groups"))
                .and_then(|g| g.as_array())
                .map(|g| g.iter().filter_map(|g| g.as_str().map(str::to_owned)).collect())
                .unwrap_or_default(),
            dry_run: request.get("dryRun").and_then(|d| d.as_bool()).unwrap_or(false),
            object_uid: s(metadata.and_then(|m| m.get("uid"))),
            annotation_class: s(metadata
                .and_then(|m| m.get("annotations"))
                .and_then(|a| a.get("kubernetes.io/ingress.class"))),
            class: s(object.and_then(|o| o.get("spec")).and_then(|s| s.get("ingressClassName"))),
            addresses: ingress
                .map(|list| list.iter().map(|a| (s(a.get("ip")), s(a.get("hostname")))).collect())
                .unwrap_or_default(),
        })
    }
}

/// The shipped reader, for callgrind's `--toggle-collect='*read_with_*'`.
#[inline(never)]
fn read_with_serde_json(body: &[u8]) -> Option<ingress_status_guard::Review<'_>> {
    read_review(body).ok()
}

/// Reading alone, each candidate: the numbers behind the choice of parser (BENCHMARKS.md).
fn readers(c: &mut Criterion) {
    let tree = candidates::sonic_tree();
    let mut scratch = Vec::new();
    let mut buffers = simd_json::Buffers::new(256 * 1024);
    for (size, rules) in SIZES {
        let (_, class, written, _) = cases().into_iter().nth(1).expect("the patch case");
        let body = review_body(rules, class, &written);
        let fields = candidates::read_with_sonic_rs(&body, &tree).expect("sonic-rs reads the review");
        let same = candidates::read_with_simd_json(&body, &mut scratch, &mut buffers).expect("simd-json reads it");
        assert_eq!(format!("{fields:?}"), format!("{same:?}"), "the candidates read the same fields");
        assert_eq!(fields.uid, read_review(&body).expect("valid").uid);
        let mut group = c.benchmark_group(format!("read/{size}"));
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_function("serde_json", |b| b.iter(|| read_with_serde_json(black_box(&body))));
        group.bench_function("sonic_rs", |b| b.iter(|| candidates::read_with_sonic_rs(black_box(&body), &tree)));
        group.bench_function("simd_json", |b| {
            b.iter(|| candidates::read_with_simd_json(black_box(&body), &mut scratch, &mut buffers));
        });
        group.finish();
    }
}

fn handler(c: &mut Criterion) {
    let policies = policies();
    let sources: Arc<dyn Sources> = SourceCache::new(&policies);
    let router = webhook_router(AppState::new(policies.clone(), sources.clone()), 3 * 1024 * 1024);
    let rt = runtime();
    let mut counts = Vec::new();

    for (size, rules) in SIZES {
        let mut decide_group = c.benchmark_group(format!("decide/{size}"));
        let mut bodies = Vec::new();
        for (case, class, written, want) in cases() {
            let body = Bytes::from(review_body(rules, class, &written));
            let (response, result) = decide(&body, &policies, sources.as_ref());
            assert_eq!(result, want, "{size}/{case}: the input does not exercise the intended case");
            decide_group.throughput(Throughput::Bytes(body.len() as u64));
            decide_group.bench_with_input(BenchmarkId::from_parameter(case), &body, |b, body| {
                b.iter(|| decide(black_box(body), &policies, sources.as_ref()).0);
            });
            let (allocs, bytes) = allocations(1000, || {
                black_box(decide(black_box(&body), &policies, sources.as_ref()));
            });
            counts.push(json!({"path": "decide", "size": size, "case": case, "request_bytes": body.len(),
                               "response_bytes": response.len(), "allocs": allocs, "bytes": bytes}));
            bodies.push((case, body));
        }
        decide_group.finish();

        let mut router_group = c.benchmark_group(format!("router/{size}"));
        for (case, body) in &bodies {
            router_group.throughput(Throughput::Bytes(body.len() as u64));
            router_group.bench_with_input(BenchmarkId::from_parameter(case), body, |b, body| {
                b.iter(|| rt.block_on(through_router(&router, black_box(body))));
            });
            let (allocs, bytes) = allocations(1000, || {
                black_box(rt.block_on(through_router(&router, body)));
            });
            counts.push(json!({"path": "router", "size": size, "case": case, "request_bytes": body.len(),
                               "allocs": allocs, "bytes": bytes}));
        }
        router_group.finish();
    }

    println!("\nallocations per review (mean of 1000 after warm-up):");
    for c in &counts {
        println!(
            "  {:>6}/{:<7}/{:<12} request {:>7} B: {:>7.1} allocations, {:>9.0} bytes allocated",
            c["path"].as_str().unwrap_or_default(),
            c["size"].as_str().unwrap_or_default(),
            c["case"].as_str().unwrap_or_default(),
            c["request_bytes"],
            c["allocs"].as_f64().unwrap_or_default(),
            c["bytes"].as_f64().unwrap_or_default()
        );
    }
    if let Some(dir) = std::env::var_os("ISG_BENCH_OUT") {
        let path = std::path::Path::new(&dir).join("allocations.json");
        std::fs::create_dir_all(&dir).expect("create ISG_BENCH_OUT");
        std::fs::write(&path, serde_json::to_vec_pretty(&counts).expect("json")).expect("write allocations.json");
    }
}

/// A typical Gateway status review, as an Envoy Gateway-style controller writes it: two
/// listeners, the `last-applied-configuration` annotation, managedFields, and a status with
/// addresses, conditions and listener conditions, in `object` and `oldObject`; `addresses` is the
/// written `status.addresses`.
fn gateway_body(addresses: &Value) -> Vec<u8> {
    let condition = |kind: &str| json!({"type": kind, "status": "True", "reason": kind, "message": "Gateway is programmed by the controller", "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"});
    let spec = json!({"gatewayClassName": "eg", "listeners": [
        {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}},
        {"name": "https", "port": 443, "protocol": "HTTPS", "hostname": "*.demo.example.test",
         "tls": {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "name": "demo-tls"}]}, "allowedRoutes": {"namespaces": {"from": "All"}}},
    ]});
    let listener = |name: &str| json!({"name": name, "attachedRoutes": 3, "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}, {"group": "gateway.networking.k8s.io", "kind": "GRPCRoute"}], "conditions": [condition("Accepted"), condition("Programmed"), condition("ResolvedRefs")]});
    let object = |addresses: &Value| {
        let applied = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"annotations": {}, "name": "public", "namespace": "gateway"}, "spec": spec});
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "public", "namespace": "gateway", "uid": "5c1e8f2a-8c1d-4d8e-9d64-2f7f1c9e8a11", "resourceVersion": "4711", "generation": 1,
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": format!("{applied}\n")},
                "managedFields": [
                    {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "gateway.networking.k8s.io/v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:gatewayClassName": {}, "f:listeners": {}}}},
                    {"manager": "envoy-gateway", "operation": "Update", "apiVersion": "gateway.networking.k8s.io/v1", "time": "2026-01-01T00:00:01Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:addresses": {}, "f:conditions": {}, "f:listeners": {}}}, "subresource": "status"},
                ]},
            "spec": spec,
            "status": {"addresses": addresses, "conditions": [condition("Accepted"), condition("Programmed")], "listeners": [listener("http"), listener("https")]},
        })
    };
    let canonical =
        json!([{"type": "IPAddress", "value": "192.0.2.10"}, {"type": "Hostname", "value": "lb.example.test"}]);
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "0f3cb218-7947-4a5f-839c-6e300a5ae86b",
            "kind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": "Gateway"},
            "resource": {"group": "gateway.networking.k8s.io", "version": "v1", "resource": "gateways"},
            "subResource": "status",
            "requestKind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": "Gateway"},
            "requestResource": {"group": "gateway.networking.k8s.io", "version": "v1", "resource": "gateways"},
            "requestSubResource": "status",
            "name": "public", "namespace": "gateway", "operation": "UPDATE",
            "userInfo": {"username": "system:serviceaccount:envoy-gateway-system:envoy-gateway", "uid": "3e1c", "groups": ["system:serviceaccounts", "system:serviceaccounts:envoy-gateway-system", "system:authenticated"]},
            "object": object(addresses), "oldObject": object(&canonical), "dryRun": false,
            "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "envoy-gateway"},
        }
    });
    serde_json::to_vec(&review).expect("serializes")
}

/// The typical Gateway review as no patch / patch, next to the Ingress one (`decide/typical`).
fn gateway(c: &mut Criterion) {
    let text = format!(
        "policies:\n  - {{name: ingress, ingressClasses: [{GOVERNED_CLASS}], publishStatusAddress: '{CANONICAL}'}}\n  - {{name: gateway, gatewayClasses: [eg], publishStatusAddress: '{CANONICAL}'}}\n"
    );
    let policies = ingress_status_guard::parse_file("bench.yaml", &text).expect("valid policies");
    let sources: Arc<dyn Sources> = SourceCache::new(&policies);
    let mut group = c.benchmark_group("decide/gateway");
    for (case, written, want) in [
        (
            "no_patch",
            json!([{"type": "IPAddress", "value": "192.0.2.10"}, {"type": "Hostname", "value": "lb.example.test"}]),
            "unchanged",
        ),
        ("patch", json!([{"type": "IPAddress", "value": "10.7.7.7"}]), "patched"),
    ] {
        let body = Bytes::from(gateway_body(&written));
        let (_, result) = decide(&body, &policies, sources.as_ref());
        assert_eq!(result, want, "gateway/{case}: the input does not exercise the intended case");
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(case), &body, |b, body| {
            b.iter(|| decide(black_box(body), &policies, sources.as_ref()).0);
        });
        let (allocs, bytes) = allocations(1000, || {
            black_box(decide(black_box(&body), &policies, sources.as_ref()));
        });
        println!(
            "decide/gateway/{case}: request {} B, {allocs:.1} allocations, {bytes:.0} bytes allocated",
            body.len()
        );
    }
    group.finish();
    // Reading alone, in the same run.
    let body = gateway_body(&json!([{"type": "IPAddress", "value": "10.7.7.7"}]));
    assert!(read_with_serde_json(&body).is_some(), "a Gateway review reads");
    let mut read = c.benchmark_group("read/gateway");
    read.throughput(Throughput::Bytes(body.len() as u64));
    read.bench_function("serde_json", |b| b.iter(|| read_with_serde_json(black_box(&body))));
    read.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(50)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3))
}

/// `ISG_BENCH_LOOP=decide/typical/patch:N` (or `router/...`): run that case N times and exit,
/// for profilers (`valgrind --tool=callgrind`, `perf record`) instead of criterion.
fn profile_loop(spec: &str) {
    let (case, n) = spec.rsplit_once(':').unwrap_or((spec, "1000"));
    let n: u64 = n.parse().expect("ISG_BENCH_LOOP=<path>/<size>/<case>:<count>");
    let mut parts = case.split('/');
    let (path, size, case) = (parts.next(), parts.next(), parts.next());
    let rules = SIZES.iter().find(|(s, _)| Some(*s) == size).map(|(_, r)| *r).expect("size: typical or large");
    if path == Some("read") {
        return read_loop(rules, case.expect("read/<size>/<reader>"), n);
    }
    let (_, class, written, _) = cases().into_iter().find(|c| Some(c.0) == case).expect("case");
    let body = Bytes::from(review_body(rules, class, &written));
    let policies = policies();
    let sources: Arc<dyn Sources> = SourceCache::new(&policies);
    match path {
        Some("decide") => {
            for _ in 0..n {
                black_box(decide(black_box(&body), &policies, sources.as_ref()));
            }
        }
        Some("router") => {
            let router = webhook_router(AppState::new(policies.clone(), sources), 3 * 1024 * 1024);
            let rt = runtime();
            for _ in 0..n {
                black_box(rt.block_on(through_router(&router, &body)));
            }
        }
        _ => panic!("path: decide or router"),
    }
}

/// `ISG_BENCH_LOOP=read/<size>/<reader>:N`: one reader alone, for callgrind.
fn read_loop(rules: usize, reader: &str, n: u64) {
    let tree = candidates::sonic_tree();
    let mut scratch = Vec::new();
    let mut buffers = simd_json::Buffers::new(256 * 1024);
    let body = review_body(rules, GOVERNED_CLASS, &cases()[1].2);
    for _ in 0..n {
        match reader {
            "serde_json" => drop(black_box(read_with_serde_json(black_box(&body)))),
            "sonic_rs" => drop(black_box(candidates::read_with_sonic_rs(black_box(&body), &tree))),
            "simd_json" => {
                drop(black_box(candidates::read_with_simd_json(black_box(&body), &mut scratch, &mut buffers)));
            }
            _ => panic!("reader: serde_json, sonic_rs or simd_json"),
        }
    }
}

/// `ISG_BENCH_ALLOCS=1`: only the allocation counts of every case, without criterion.
fn allocation_counts() {
    let policies = policies();
    let sources: Arc<dyn Sources> = SourceCache::new(&policies);
    let router = webhook_router(AppState::new(policies.clone(), sources.clone()), 3 * 1024 * 1024);
    let rt = runtime();
    println!("allocations per review (mean of 1000 after warm-up): allocations, bytes");
    for (size, rules) in SIZES {
        for (case, class, written, _) in cases() {
            let body = Bytes::from(review_body(rules, class, &written));
            let (allocs, bytes) = allocations(1000, || {
                black_box(decide(black_box(&body), &policies, sources.as_ref()));
            });
            println!("  decide/{size}/{case}: {allocs:.1}, {bytes:.0}");
            let (allocs, bytes) = allocations(1000, || {
                black_box(rt.block_on(through_router(&router, &body)));
            });
            println!("  router/{size}/{case}: {allocs:.1}, {bytes:.0}");
        }
    }
}

fn main() {
    if let Ok(spec) = std::env::var("ISG_BENCH_LOOP") {
        profile_loop(&spec);
        return;
    }
    if std::env::var_os("ISG_BENCH_ALLOCS").is_some() {
        allocation_counts();
        return;
    }
    let mut c = config().configure_from_args();
    readers(&mut c);
    handler(&mut c);
    gateway(&mut c);
    c.final_summary();
}
