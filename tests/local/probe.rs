//! The probe listener's default outside a Pod: it follows the admin listener's host on a port
//! the OS picks, so two local instances with default probe settings both start and nothing is
//! opened beyond loopback; and a listener whose port is taken names its flag and environment
//! variable.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};

/// Environment that would set the probe address or make the child think it is in a Pod.
const UNSET: [&str; 5] =
    ["KUBECONFIG", "KUBERNETES_SERVICE_HOST", "ISG_PROBE_LISTEN", "ISG_ADMIN_LISTEN", "ISG_LISTEN"];

fn serve(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ingress-status-guard"));
    command
        .arg("serve")
        .args(args)
        .args(["--publish-status-address", "192.0.2.10", "--log-format", "json", "--no-events", "--reconcile=false"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for name in UNSET {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    command
}

/// A running local instance and the probe address it logged.
struct Instance {
    child: Child,
    probe: SocketAddr,
}

impl Instance {
    /// Starts `serve` on loopback with default probe settings; waits until it listens.
    fn start() -> Instance {
        let mut child = serve(&["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"], &[]).spawn().unwrap();
        let mut probe = None;
        let mut seen = String::new();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        for line in lines.by_ref() {
            let line = line.unwrap();
            seen.push_str(&line);
            seen.push('\n');
            // A start-up error is plain text: show it.
            let json: serde_json::Value =
                serde_json::from_str(&line).unwrap_or_else(|_| panic!("the instance did not start:\n{seen}"));
            if json["message"] == "probe server listening (/livez, /readyz)" {
                probe = json["address"].as_str().map(|a| a.parse().expect("a socket address"));
            }
            if json["message"] == "webhook listening (HTTPS, POST /mutate)" {
                break;
            }
        }
        // Keep reading, so the instance never writes its log into a closed pipe.
        std::thread::spawn(move || lines.for_each(drop));
        let probe = probe.unwrap_or_else(|| panic!("no probe address logged; the instance said:\n{seen}"));
        Instance { child, probe }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn get(addr: SocketAddr, path: &str) -> String {
    let mut tcp = TcpStream::connect(addr).unwrap();
    write!(tcp, "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    tcp.read_to_string(&mut text).unwrap();
    text
}

#[test]
fn two_local_instances_with_default_probe_settings_both_start_on_loopback() {
    let first = Instance::start();
    let second = Instance::start();
    for instance in [&first, &second] {
        assert!(
            instance.probe.ip().is_loopback(),
            "the probe listener follows --admin-listen's host: {}",
            instance.probe
        );
        let ready = get(instance.probe, "/readyz");
        assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    }
    assert_ne!(first.probe, second.probe);
}

#[test]
fn a_taken_port_names_the_flag_and_its_environment_variable() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let addr = addr.as_str();
    let free = ["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--probe-listen", "127.0.0.1:0"];
    // (the listener's flag, its environment variable, whether the taken address comes by it)
    let cases = [
        ("--probe-listen", "ISG_PROBE_LISTEN", false),
        ("--probe-listen", "ISG_PROBE_LISTEN", true),
        ("--admin-listen", "ISG_ADMIN_LISTEN", false),
        ("--listen", "ISG_LISTEN", false),
    ];
    for (flag, var, by_env) in cases {
        // The other listeners on free ports; this one on the taken port, by flag or by env.
        let mut args: Vec<&str> = free.chunks(2).filter(|pair| pair[0] != flag).flatten().copied().collect();
        let env = if by_env { vec![(var, addr)] } else { Vec::new() };
        if !by_env {
            args.extend([flag, addr]);
        }
        let out = serve(&args, &env).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flag} (by env: {by_env}): started on a taken port");
        let want = format!("{flag} {addr}: cannot listen");
        assert!(stderr.contains(&want), "want {want:?} in\n{stderr}");
        assert!(stderr.contains(var), "the error does not name {var}:\n{stderr}");
    }
    drop(taken);
}
