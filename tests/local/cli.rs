//! The binary's command line: `resolve` answers without a cluster, and bad flags or manifests
//! stop it with a message naming what to fix and a non-zero exit.

use std::{
    io::Write,
    process::{Command, Output, Stdio},
};

fn run(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ingress-status-guard"))
        .args(args)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn resolve_static_list() {
    let out = run(&["resolve", "--publish-status-address", " lb.example.com, 10.0.0.2,10.0.0.1,"], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json, serde_json::json!([{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"hostname": "lb.example.com"}]));
}

#[test]
fn resolve_service_manifests_from_stdin() {
    let yaml = "apiVersion: v1\nkind: Service\nmetadata: {name: lb, namespace: ingress}\nspec:\n  type: LoadBalancer\n  externalIPs: [203.0.113.9]\nstatus:\n  loadBalancer:\n    ingress:\n    - {ip: 203.0.113.5, hostname: lb.example.com, ports: [{port: 443, protocol: TCP}]}\n";
    let out = run(&["resolve", "-f", "-"], Some(yaml));
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json, serde_json::json!([{"ip": "203.0.113.9"}, {"ip": "203.0.113.5", "hostname": "lb.example.com"}]));

    let out = run(&["resolve", "-f", "-", "--keep-ports"], Some(yaml));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json[1]["ports"], serde_json::json!([{"port": 443, "protocol": "TCP"}]));

    let json_manifest = r#"{"kind":"Service","metadata":{"name":"cip"},"spec":{"type":"ClusterIP","clusterIPs":["10.0.0.5","fd00::5"]}}"#;
    let out = run(&["resolve", "-f", "-"], Some(json_manifest));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stdout(&out)).unwrap(),
        serde_json::json!([{"ip": "10.0.0.5"}, {"ip": "fd00::5"}])
    );
}

/// `resolve` shows the node-IP source offline, over a List and further YAML documents of Pods
/// and Nodes (what `kubectl get pods,nodes -o yaml` prints).
#[test]
fn resolve_node_ips_from_pods_and_nodes() {
    let manifest = r#"
apiVersion: v1
kind: List
items:
- kind: Pod
  metadata: {name: c1, namespace: ing, labels: {app: c}}
  spec: {nodeName: n1}
  status: {phase: Running, conditions: [{type: Ready, status: "True"}]}
- kind: Pod
  metadata: {name: c2, namespace: ing, labels: {app: c}}
  spec: {nodeName: n2}
  status: {phase: Running, conditions: [{type: Ready, status: "False"}]}
- kind: Pod
  metadata: {name: other, namespace: ing, labels: {app: other}}
  spec: {nodeName: n2}
  status: {phase: Running, conditions: [{type: Ready, status: "True"}]}
---
kind: Node
metadata: {name: n1}
status: {addresses: [{type: InternalIP, address: 10.0.0.1}, {type: ExternalIP, address: 203.0.113.1}]}
---
kind: Node
metadata: {name: n2}
status: {addresses: [{type: ExternalIP, address: 203.0.113.2}]}
"#;
    let args = ["resolve", "-f", "-", "--publish-pods-namespace", "ing", "--publish-pods-selector", "app=c"];
    let out = run(&args, Some(manifest));
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json, serde_json::json!([{"ip": "203.0.113.1"}]), "only the Ready pod's node, its ExternalIP");

    let mut internal = args.to_vec();
    internal.push("--report-node-internal-ip-address");
    let out = run(&internal, Some(manifest));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json, serde_json::json!([{"ip": "10.0.0.1"}]));
}

#[test]
fn bad_input_gets_a_precise_message_and_a_failure_exit() {
    let headless = "kind: Service\nmetadata: {name: hl}\nspec: {clusterIP: None}\n";
    let cases: [(&[&str], Option<&str>, &str); 20] = [
        (
            &["resolve", "--publish-status-address", "10.0.0.1,bad_host"],
            None,
            "--publish-status-address \"10.0.0.1,bad_host\": \"bad_host\" is neither an IP address nor a DNS-1123 hostname",
        ),
        (&["resolve", "-f", "-"], Some(headless), "<stdin>: Service hl is headless (clusterIP: None)"),
        (&["resolve", "-f", "-"], Some("kind: Deployment\n"), "<stdin>: kind is \"Deployment\"; expected a Service"),
        (&["resolve", "-f", "-"], Some("spec: [1"), "<stdin>: not YAML or JSON"),
        (&["resolve", "-f", "/nonexistent.yaml"], None, "/nonexistent.yaml: No such file"),
        (&["resolve"], None, "--publish-status-address"),
        (
            &["serve", "--admin-listen", "127.0.0.1:0", "--listen", "127.0.0.1:0"],
            None,
            "no address source: pass --publish-service NAMESPACE/NAME, --publish-status-address LIST, --publish-pods-namespace NS with --publish-pods-selector SELECTOR, or --config FILE",
        ),
        (
            &["serve", "--publish-pods-namespace", "Ingress", "--publish-pods-selector", "app=x"],
            None,
            "--publish-pods-namespace: \"Ingress\" is not a valid namespace name",
        ),
        (
            &["serve", "--publish-pods-namespace", "ingress", "--publish-pods-selector", "app in x"],
            None,
            "--publish-pods-selector \"app in x\": \"app in x\": expected KEY",
        ),
        (&["serve", "--publish-pods-namespace", "ingress"], None, "--publish-pods-selector <PUBLISH_PODS_SELECTOR>"),
        (
            &["serve", "--publish-status-address", "10.0.0.1", "--report-node-internal-ip-address"],
            None,
            "--publish-pods-namespace <PUBLISH_PODS_NAMESPACE>",
        ),
        (
            &["serve", "--publish-status-address", "10.0.0.1", "--controller-class="],
            None,
            "--controller-class: \"\": controller names must not be empty",
        ),
        (
            &["resolve", "-f", "-", "--publish-pods-namespace", "ing", "--publish-pods-selector", "app=c"],
            Some("kind: Service\nmetadata: {name: x}\n"),
            "<stdin>: object 1: kind is \"Service\"; expected Pod or Node",
        ),
        (
            &["resolve", "-f", "-", "--publish-pods-namespace", "ing", "--publish-pods-selector", "app=c"],
            Some("kind: Pod\nmetadata: {name: p, namespace: ing, labels: {app: c}}\n"),
            "<stdin>: pods ing/{app=c} (external node IPs): no Running and Ready pod matches",
        ),
        (
            &["serve", "--publish-service", "just-a-name"],
            None,
            "invalid value 'just-a-name' for '--publish-service <PUBLISH_SERVICE>': \"just-a-name\" must be NAMESPACE/NAME",
        ),
        (
            &["serve", "--publish-service", "a/b", "--publish-status-address", "10.0.0.1"],
            None,
            "the argument '--publish-service <PUBLISH_SERVICE>' cannot be used with '--publish-status-address <PUBLISH_STATUS_ADDRESS>'",
        ),
        (
            &["serve", "--publish-status-address", "10.0.0.1", "--reconcile-qps", "0"],
            None,
            "--reconcile-qps 0: must be between 0.1 and 1000",
        ),
        (
            &["serve", "--publish-status-address", "10.0.0.1", "--leader-election-renew-deadline", "20s"],
            None,
            "--leader-election-renew-deadline (20s) must be shorter than --leader-election-lease-duration (15s)",
        ),
        (
            &["serve", "--publish-status-address", "10.0.0.1", "--leader-election-retry-period", "1.5s"],
            None,
            "--leader-election-retry-period \"1.5s\": expected whole seconds, e.g. 15s or 1m",
        ),
        (
            &["serve", "--publish-status-address", "10.0.0.1", "--leader-election-namespace", "Not_A_Namespace"],
            None,
            "--leader-election-namespace \"Not_A_Namespace\": must be a valid Kubernetes name",
        ),
    ];
    for (args, stdin, want) in cases {
        let out = run(args, stdin);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr(&out).contains(want), "{args:?}\n  got:  {}\n  want: {want}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{args:?} panicked");
    }
}

#[test]
fn serve_refuses_bad_tls_and_config_files() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate").unwrap();
    let config = dir.path().join("policies.yaml");
    std::fs::write(&config, "policies:\n  - name: a\n    publishService: nope\n").unwrap();
    let junk = junk.to_str().unwrap();
    let missing = dir.path().join("no-kubeconfig");
    let missing = missing.to_str().unwrap();
    let cases: [(Vec<&str>, String); 5] = [
        (
            vec!["--tls-cert", junk, "--tls-key", junk, "--publish-status-address", "10.0.0.1"],
            format!("--tls-cert {junk}: no PEM certificate found"),
        ),
        (vec!["--tls-cert", junk, "--publish-status-address", "10.0.0.1"], "--tls-key <TLS_KEY>".to_owned()),
        (
            vec!["--config", config.to_str().unwrap()],
            format!("config file {}: policies[0].publishService: \"nope\" must be NAMESPACE/NAME", config.display()),
        ),
        // No cluster: the error says which flag needs one.
        (
            vec!["--publish-service", "edge/lb", "--kubeconfig", missing],
            format!("needed to watch the publish Service (--publish-service): kubeconfig {missing}"),
        ),
        (
            vec!["--publish-status-address", "10.0.0.1", "--ingress-class", "nginx", "--kubeconfig", missing],
            "needed to watch IngressClasses (--controller-class, or --ingress-class without --watch-ingress-without-class".to_owned(),
        ),
    ];
    for (args, want) in cases {
        let mut full =
            vec!["serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--probe-listen", "127.0.0.1:0"];
        full.extend(args.iter().copied());
        let out = run(&full, None);
        assert!(!out.status.success(), "{full:?} succeeded");
        assert!(stderr(&out).contains(&want), "{full:?}\n  got:  {}\n  want: {want}", stderr(&out));
    }
}

/// `--admission=policy` opens no webhook port: a flag or variable that would configure one is
/// refused (exit 2) naming it, before any cluster is needed, instead of being ignored.
#[test]
fn policy_mode_refuses_the_webhook_ports_flags() {
    let cert = "/nonexistent/tls.crt";
    let cases: [(Vec<&str>, &[(&str, &str)], &str); 4] = [
        (vec!["--listen", "127.0.0.1:0"], &[], "--listen"),
        (vec!["--tls-cert", cert, "--tls-key", cert], &[], "--tls-cert"),
        (vec!["--tls-cert", cert, "--tls-key", cert, "--client-ca", cert], &[], "--tls-cert"),
        (vec![], &[("ISG_LISTEN", "0.0.0.0:8443")], "--listen"),
    ];
    for (args, env, flag) in cases {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ingress-status-guard"));
        command.args(["serve", "--admission=policy", "--publish-status-address", "192.0.2.1"]).args(&args);
        let out = command.envs(env.iter().copied()).env_remove("KUBECONFIG").output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {}", stderr(&out));
        let want = format!("error: {flag}: --admission=policy opens no webhook port");
        assert!(stderr(&out).contains(&want), "{args:?} {env:?}\n  got:  {}\n  want: {want}", stderr(&out));
    }
}

#[test]
fn serve_starts_with_no_setup_and_stops_cleanly_on_sigterm() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_ingress-status-guard"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--probe-listen",
            "127.0.0.1:0",
            "--publish-status-address",
            "192.0.2.10",
        ])
        .args(["--log-format", "json", "--no-events"])
        .env_remove("KUBECONFIG")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut admin = None;
    let mut ca_bundle = None;
    for line in lines.by_ref() {
        let line: serde_json::Value =
            serde_json::from_str(&line.unwrap()).expect("--log-format json writes JSON lines");
        if let Some(path) = line["ca_bundle"].as_str() {
            ca_bundle = Some(path.to_owned());
        }
        if line["message"] == "admin server listening (/livez, /readyz, /metrics)" {
            admin = line["address"].as_str().map(String::from);
        }
        if line["message"] == "webhook listening (HTTPS, POST /mutate)" {
            break;
        }
    }
    let ca = std::fs::read_to_string(ca_bundle.expect("the ephemeral CA bundle path is logged")).unwrap();
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"));
    let admin = admin.expect("admin address logged");
    let ready = http_get(&admin, "/readyz");
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");

    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "exit after SIGTERM: {exit:?}");
    let rest: String = lines.map(|l| l.unwrap() + "\n").collect();
    assert!(
        rest.contains("shutting down: not ready, draining in-flight reviews") && rest.contains("\"stopped\""),
        "{rest}"
    );
}

fn http_get(addr: &str, path: &str) -> String {
    use std::io::Read;
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    write!(tcp, "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    tcp.read_to_string(&mut text).unwrap();
    text
}

#[test]
fn version_names_the_release_and_the_revision() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ingress-status-guard")).arg("--version").output().unwrap();
    assert!(out.status.success());
    let line = String::from_utf8(out.stdout).unwrap();
    let revision = line
        .trim_end()
        .strip_prefix(concat!("ingress-status-guard ", env!("CARGO_PKG_VERSION"), " (revision "))
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{line:?}"));
    // Built from this checkout: its HEAD (build.rs), unless overridden or outside git.
    let head = std::process::Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    match (std::env::var("ISG_GIT_REVISION").ok().filter(|r| !r.is_empty()), head) {
        (Some(set), _) => assert_eq!(revision, set),
        (None, Some(head)) => assert_eq!(revision, head),
        (None, None) => assert_eq!(revision, "unknown"),
    }
}
