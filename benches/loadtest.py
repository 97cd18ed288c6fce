#!/usr/bin/env python3
"""HTTPS load, memory and cold-start measurements of `ingress-status-guard serve`, against the
baseline server (benches/baseline_server.rs) on the same stack, and the Markdown report.

Subcommands (benches/run.sh calls them; every number is measured, nothing is asserted):
  https   start both servers, drive them with h2load over loopback (HTTP/1.1 keep-alive and
          HTTP/2; saturation and a fixed rate), sample their memory, time cold starts;
          writes <out>/https.json
  report  merge <out>/*.json and criterion's estimates into <out>/report.md (and latency.png)
"""

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests/fixtures/ingress-status-update.apiserver-1.24.json"
CANONICAL = "192.0.2.10,lb.example.test"
GOVERNED_CLASS = "nginx"


# ---------------------------------------------------------------------------------------------
# Request bodies: the fixture with 4 rules (~5.6 KB), as in benches/handler.rs.


def review_body(rules, cls, written):
    review = json.loads(FIXTURE.read_text())
    rule_list = [
        {
            "host": f"app-{i}.demo.example.test",
            "http": {
                "paths": [
                    {
                        "path": "/",
                        "pathType": "Prefix",
                        "backend": {"service": {"name": f"app-{i}", "port": {"number": 80}}},
                    }
                ]
            },
        }
        for i in range(rules)
    ]
    for key in ("object", "oldObject"):
        obj = review["request"][key]
        obj["spec"] = {"ingressClassName": cls, "rules": rule_list}
        applied = {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {"annotations": {}, "name": "demo-ing", "namespace": "default"},
            "spec": obj["spec"],
        }
        annotations = obj["metadata"]["annotations"]
        annotations["kubectl.kubernetes.io/last-applied-configuration"] = (
            json.dumps(applied, separators=(",", ":")) + "\n"
        )
    review["request"]["object"]["status"]["loadBalancer"]["ingress"] = written
    return json.dumps(review, separators=(",", ":")).encode()


BODIES = {
    "no_patch": review_body(4, GOVERNED_CLASS, [{"ip": "192.0.2.10"}, {"hostname": "lb.example.test"}]),
    "patch": review_body(4, GOVERNED_CLASS, [{"ip": "10.7.7.7"}]),
}


# ---------------------------------------------------------------------------------------------
# Processes


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_status(port, path):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            head = s.recv(64).decode(errors="replace")
            return int(head.split()[1])
    except (OSError, ValueError, IndexError):
        return None


def tcp_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def pin(cpu):
    """`taskset -c cpu` when the machine has a CPU for the server and one for the load."""
    return ["taskset", "-c", str(cpu)] if PIN else []


class Server:
    def __init__(self, name, argv, ready, log):
        self.name = name
        self.argv = argv
        self.ready = ready
        self.log = log
        self.proc = None

    def start(self, timeout=30.0):
        started = time.perf_counter()
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = started + timeout
        while not self.ready():
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited with {self.proc.returncode}: {' '.join(self.argv)}")
            if time.perf_counter() > deadline:
                raise SystemExit(f"{self.name} not ready after {timeout}s")
            time.sleep(0.001)
        return time.perf_counter() - started

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def status(self):
        out = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024.0  # MiB
        return out

    def cpu_seconds(self):
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def webhook_server(binary, certs, log, name="webhook"):
    port, admin = free_port(), free_port()
    # A `--before` binary older than the probe port has no --probe-listen (nor a port to bind).
    serve_help = subprocess.run([str(binary), "serve", "--help"], capture_output=True, text=True).stdout
    probe = ["--probe-listen=127.0.0.1:0"] if "--probe-listen" in serve_help else []
    argv = pin(SERVER_CPU) + [
        str(binary), "serve",
        f"--listen=127.0.0.1:{port}", f"--admin-listen=127.0.0.1:{admin}", *probe,
        f"--tls-cert={certs / 'tls.crt'}", f"--tls-key={certs / 'tls.key'}",
        f"--publish-status-address={CANONICAL}", f"--ingress-class={GOVERNED_CLASS}",
        # Without it, a class list makes the webhook watch IngressClasses (for the cluster's
        # default class, which only Ingresses without a class need), and so need an API server;
        # every review of this benchmark names its class, so the decision is the same.
        "--watch-ingress-without-class",
        "--no-events", "--log-format=json", "--log-level=info",
    ]  # fmt: skip
    server = Server(name, argv, lambda: http_status(admin, "/readyz") == 200, log)
    server.port = port
    return server


def baseline_server(binary, certs, log):
    port = free_port()
    argv = pin(SERVER_CPU) + [
        str(binary), f"--listen=127.0.0.1:{port}",
        f"--tls-cert={certs / 'tls.crt'}", f"--tls-key={certs / 'tls.key'}",
    ]  # fmt: skip
    server = Server("baseline", argv, lambda: tcp_open(port), log)
    server.port = port
    return server


# ---------------------------------------------------------------------------------------------
# h2load


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    rank = min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))
    return sorted_values[rank]


def h2load(server, protocol, body_file, mode, duration, workdir, tag):
    """One h2load run; returns throughput, latency percentiles (ms) and the server's CPU time."""
    log_file = workdir / f"h2load-{tag}.log"
    argv = pin(LOAD_CPU) + ["h2load", f"https://127.0.0.1:{server.port}/mutate", "-d", str(body_file)]
    argv += ["-H", "content-type: application/json", "-D", str(duration), "--warm-up-time", "1"]
    argv += ["--log-file", str(log_file)]
    if protocol == "h1":
        argv += ["--h1"]
    if mode == "saturation":
        argv += ["-c", str(SATURATION[protocol][0]), "-m", str(SATURATION[protocol][1])]
    else:
        clients = FIXED_CLIENTS
        argv += ["-c", str(clients), "-m", str(FIXED_STREAMS[protocol]), "--rps", str(RATE // clients)]
    rss = []
    stop = threading.Event()

    def sample():
        while not stop.wait(0.25):
            try:
                rss.append(server.status()["VmRSS"])
            except (OSError, KeyError):
                pass

    sampler = threading.Thread(target=sample, daemon=True)
    cpu_before = server.cpu_seconds()
    sampler.start()
    run = subprocess.run(argv, capture_output=True, text=True)
    stop.set()
    sampler.join()
    cpu = server.cpu_seconds() - cpu_before
    (workdir / f"h2load-{tag}.out").write_text(" ".join(argv) + "\n" + run.stdout + run.stderr)
    if run.returncode != 0:
        raise SystemExit(f"h2load failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
    rps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", run.stdout).group(1))
    counts = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed", run.stdout)
    status_2xx = int(re.search(r"status codes: (\d+) 2xx", run.stdout).group(1))
    latencies = []
    for line in log_file.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[1] == "200":
            latencies.append(int(parts[2]) / 1000.0)
    log_file.unlink()
    latencies.sort()
    done = int(counts.group(2))
    return {
        "rps": rps,
        "done": done,
        "failed": int(counts.group(4)),
        "status_2xx": status_2xx,
        "p50_ms": percentile(latencies, 0.50),
        "p99_ms": percentile(latencies, 0.99),
        "p999_ms": percentile(latencies, 0.999),
        "max_ms": latencies[-1] if latencies else float("nan"),
        "server_cpu_s": cpu,
        "server_cpu_us_per_request": cpu / done * 1e6 if done else float("nan"),
        "rss_max_mib": max(rss) if rss else float("nan"),
        "latency_sample": latencies[:: max(1, len(latencies) // 2000)],
    }


# ---------------------------------------------------------------------------------------------
# https subcommand


def cmd_https(args):
    global PIN, SERVER_CPU, LOAD_CPU
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    work.mkdir(exist_ok=True)
    cpus = sorted(os.sched_getaffinity(0))
    PIN = len(cpus) >= 2 and shutil.which("taskset") is not None and not args.no_pin
    SERVER_CPU, LOAD_CPU = (cpus[-1], cpus[0]) if PIN else (None, None)

    certs = work / "certs"
    subprocess.run(
        [args.bin, "certs", "generate", "--out", str(certs), "--force"], check=True, capture_output=True
    )
    body_files = {}
    for case, body in BODIES.items():
        body_files[case] = work / f"review-{case}.json"
        body_files[case].write_bytes(body)

    results = {
        "config": {
            "duration_s": args.duration,
            "reps": args.reps,
            "rate": RATE,
            "saturation": SATURATION,
            "fixed_clients": FIXED_CLIENTS,
            "fixed_streams": FIXED_STREAMS,
            "pinned": PIN,
            "server_cpu": SERVER_CPU,
            "load_cpu": LOAD_CPU,
            "request_bytes": {k: len(v) for k, v in BODIES.items()},
            "h2load": subprocess.run(["h2load", "--version"], capture_output=True, text=True).stdout.strip(),
            "webhook_flags": "--log-format=json --log-level=info (stderr to /dev/null), --no-events, static source, "
            "--watch-ingress-without-class",
        },
        "runs": [],
        "memory": {},
        "cold_start": {},
    }

    # Cold start first, on an idle machine: process start to /readyz 200 (webhook) or to an
    # accepting listener (baseline), several times each, alternating.
    starts = {"webhook": [], "baseline": []}
    for _ in range(args.cold_starts):
        for name, make in (("webhook", webhook_server), ("baseline", baseline_server)):
            binary = args.bin if name == "webhook" else args.baseline
            server = make(binary, certs, subprocess.DEVNULL)
            starts[name].append(server.start() * 1e3)
            server.stop()
    results["cold_start"] = {k: {"runs_ms": v, "median_ms": statistics.median(v)} for k, v in starts.items()}
    print(f"cold start (median ms): { {k: round(v['median_ms'], 1) for k, v in results['cold_start'].items()} }")

    # Logs go to /dev/null: the patch case logs one WARN line per review by design, and what
    # writing it to a file or a pipe costs depends on where it goes, not on the webhook.
    webhook = webhook_server(args.bin, certs, subprocess.DEVNULL)
    baseline = baseline_server(args.baseline, certs, subprocess.DEVNULL)
    # With --before: another build of the webhook (e.g. main) measured in the same run,
    # alternated with the others, for a before/after table from one run.
    before = webhook_server(args.before, certs, subprocess.DEVNULL, "before") if args.before else None
    servers = {"webhook": webhook, "baseline": baseline, **({"before": before} if before else {})}
    for server in servers.values():
        server.start()
    time.sleep(1)
    results["memory"]["idle"] = {name: server.status() for name, server in servers.items()}
    try:
        targets = [
            ("baseline", baseline, "no_patch"),
            ("webhook", webhook, "no_patch"),
            ("webhook", webhook, "patch"),
        ]
        if before:
            targets += [("before", before, "no_patch"), ("before", before, "patch")]
        for rep in range(args.reps):
            for mode in ("saturation", "fixed"):
                for protocol in ("h1", "h2"):
                    # Alternate the order so that drift on a shared machine hits every target alike.
                    order = targets if rep % 2 == 0 else list(reversed(targets))
                    for name, server, case in order:
                        tag = f"{rep}-{mode}-{protocol}-{name}-{case}"
                        r = h2load(server, protocol, body_files[case], mode, args.duration, work, tag)
                        r.update({"rep": rep, "mode": mode, "protocol": protocol, "server": name, "case": case})
                        results["runs"].append(r)
                        print(
                            f"rep {rep} {mode:<10} {protocol} {name:<8} {case:<8} {r['rps']:>9.0f} req/s  "
                            f"p50 {r['p50_ms']:.3f} p99 {r['p99_ms']:.3f} p99.9 {r['p999_ms']:.3f} ms  "
                            f"cpu {r['server_cpu_us_per_request']:.1f} us/req  rss {r['rss_max_mib']:.1f} MiB  "
                            f"failed {r['failed']}",
                            flush=True,
                        )
        results["memory"]["after_load"] = {name: server.status() for name, server in servers.items()}
    finally:
        for server in servers.values():
            server.stop()
    (out / "https.json").write_text(json.dumps(results, indent=1))


# ---------------------------------------------------------------------------------------------
# report subcommand


def fmt(x, digits=2):
    if x is None or (isinstance(x, float) and x != x):
        return "n/a"
    return f"{x:.{digits}f}"


def handler_section(criterion_dir, allocations, instructions):
    runs = sorted(d for d in criterion_dir.iterdir() if d.is_dir()) if criterion_dir.exists() else []
    lines = [
        f"### 1. Handler cost in-process (criterion; median of {len(runs)} runs' medians, range in brackets)",
        "",
        "| path | review | case | request | time per review | allocations | bytes allocated | instructions (callgrind) |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    allocs = {(a["path"], a["size"], a["case"]): a for a in allocations}
    found = False
    for path in ("decide", "router"):
        for size in ("typical", "large"):
            for case in ("no_patch", "patch", "not_governed"):
                medians = []
                for run in runs:
                    est = run / f"{path}_{size}" / case / "new" / "estimates.json"
                    if est.exists():
                        medians.append(json.loads(est.read_text())["median"]["point_estimate"] / 1000)
                if not medians:
                    continue
                found = True
                a = allocs.get((path, size, case), {})
                t = f"{statistics.median(medians):.1f} µs [{min(medians):.1f}–{max(medians):.1f}]"
                instr = instructions.get(f"{path}/{size}/{case}")
                lines.append(
                    f"| {path} | {size} | {case} | {a.get('request_bytes', 0) / 1024:.1f} KiB | {t} | "
                    f"{fmt(a.get('allocs'), 0)} | {fmt(a.get('bytes'), 0)} | "
                    f"{f'{instr:,.0f}' if instr else 'n/a'} |"
                )
    return lines if found else ["### 1. Handler cost in-process", "", "(not run)"]


def median(values):
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


def https_section(https):
    runs = https["runs"]
    cfg = https["config"]
    lines = [
        "### 2. HTTPS over loopback (h2load; median of %d runs of %ds each)" % (cfg["reps"], cfg["duration_s"]),
        "",
        f"Server pinned to CPU {cfg['server_cpu']}, h2load to CPU {cfg['load_cpu']}."
        if cfg["pinned"]
        else "Server and h2load not pinned.",
        f"Saturation: h1 {cfg['saturation']['h1'][0]} connections; h2 {cfg['saturation']['h2'][0]} connections "
        f"x {cfg['saturation']['h2'][1]} streams. Fixed rate: {cfg['rate']} req/s over {cfg['fixed_clients']} "
        f"connections. Request {cfg['request_bytes']['no_patch']} bytes. Webhook: {cfg['webhook_flags']}.",
        "",
        "**Throughput at saturation**",
        "",
        "| protocol | server | case | req/s | ratio to baseline | server CPU per request | p50 | p99 | p99.9 | failed |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for protocol in ("h1", "h2"):
        base = {r["rep"]: r for r in runs if r["mode"] == "saturation" and r["protocol"] == protocol and r["server"] == "baseline"}
        for server, case in TARGETS:
            sel = [r for r in runs if r["mode"] == "saturation" and r["protocol"] == protocol and r["server"] == server and r["case"] == case]
            if not sel:
                continue
            ratio = median([r["rps"] / base[r["rep"]]["rps"] for r in sel if r["rep"] in base])
            lines.append(
                f"| {protocol} | {server} | {case if server != 'baseline' else 'fixed response'} | "
                f"{median([r['rps'] for r in sel]):,.0f} | {ratio * 100:.1f}% | "
                f"{median([r['server_cpu_us_per_request'] for r in sel]):.1f} µs | "
                f"{fmt(median([r['p50_ms'] for r in sel]), 3)} ms | {fmt(median([r['p99_ms'] for r in sel]), 3)} ms | "
                f"{fmt(median([r['p999_ms'] for r in sel]), 3)} ms | {sum(r['failed'] for r in sel)} |"
            )
    lines += [
        "",
        f"**Latency at a fixed {cfg['rate']} req/s**",
        "",
        "| protocol | server | case | achieved req/s | p50 | p99 | p99.9 | max | server CPU per request |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for protocol in ("h1", "h2"):
        for server, case in TARGETS:
            sel = [r for r in runs if r["mode"] == "fixed" and r["protocol"] == protocol and r["server"] == server and r["case"] == case]
            if not sel:
                continue
            lines.append(
                f"| {protocol} | {server} | {case if server != 'baseline' else 'fixed response'} | "
                f"{median([r['rps'] for r in sel]):,.0f} | {fmt(median([r['p50_ms'] for r in sel]), 3)} ms | "
                f"{fmt(median([r['p99_ms'] for r in sel]), 3)} ms | {fmt(median([r['p999_ms'] for r in sel]), 3)} ms | "
                f"{fmt(median([r['max_ms'] for r in sel]), 3)} ms | "
                f"{median([r['server_cpu_us_per_request'] for r in sel]):.1f} µs |"
            )
    mem = https["memory"]
    sat = lambda s: median([r["rss_max_mib"] for r in runs if r["server"] == s and r["mode"] == "saturation"])
    sat_max = lambda s: max([r["rss_max_mib"] for r in runs if r["server"] == s and r["mode"] == "saturation"] or [float("nan")])
    lines += [
        "",
        "### 4. Resident memory (from /proc/PID/status)",
        "",
        "| server | VmRSS idle | VmRSS under saturation (median of runs' peaks) | highest sample | VmHWM after all runs |",
        "|---|---:|---:|---:|---:|",
    ]
    for s in [s for s in ("webhook", "before", "baseline") if s in mem["idle"]]:
        lines.append(
            f"| {s} | {fmt(mem['idle'][s].get('VmRSS'), 1)} MiB | {fmt(sat(s), 1)} MiB | {fmt(sat_max(s), 1)} MiB | "
            f"{fmt(mem.get('after_load', {}).get(s, {}).get('VmHWM'), 1)} MiB |"
        )
    cold = https["cold_start"]
    lines += [
        "",
        "### 5. Cold start: process start to ready",
        "",
        "| server | ready when | median | runs |",
        "|---|---|---:|---|",
        f"| webhook (static source) | `/readyz` answers 200 | {cold['webhook']['median_ms']:.1f} ms | "
        + ", ".join(f"{v:.1f}" for v in cold["webhook"]["runs_ms"]) + " |",
        f"| baseline | listener accepts | {cold['baseline']['median_ms']:.1f} ms | "
        + ", ".join(f"{v:.1f}" for v in cold["baseline"]["runs_ms"]) + " |",
    ]
    return lines


def apiserver_section(api):
    lines = [
        "### 3. What the API server sees (real kube-apiserver + etcd on loopback)",
        "",
        f"{api['writes_per_scenario']} sequential status writes per scenario (after {api['warm_up_rounds']} warm-up "
        "rounds), interleaved in a shuffled order every round; latency measured by the writing client.",
        "",
        "| scenario | n | p50 | p90 | p99 | mean |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for s in api["scenarios"]:
        m = s["summary"]
        lines.append(
            f"| {s['name']} | {m['n']} | {m['p50_ms']:.2f} ms | {m['p90_ms']:.2f} ms | {m['p99_ms']:.2f} ms | "
            f"{m['mean_ms']:.2f} ms |"
        )
    lines += ["", "| added by the webhook | p50 | p99 |", "|---|---:|---:|"]
    for a in api["added"]:
        lines.append(f"| {a['with']} vs {a['without']} | {a['added_p50_ms']:+.2f} ms | {a['added_p99_ms']:+.2f} ms |")
    for key, who in (
        ("apiserver_histogram", "the webhook (both its scenarios with a governed class and the ungoverned one)"),
        ("apiserver_histogram_fixed_no_patch", "the fixed-response webhook without a patch"),
        ("apiserver_histogram_fixed_patch", "the fixed-response webhook with the patch"),
        ("apiserver_histogram_before", "the --before webhook (both its scenarios)"),
    ):
        h = api.get(key)
        if not h:
            continue
        buckets = ", ".join(f"≤{b['le']}s: {b['count']:.0f}" for b in h["buckets"])
        lines += [
            "",
            f"API server's `apiserver_admission_webhook_admission_duration_seconds` for {who} over the measured "
            f"writes: {h['count']:.0f} calls, mean {h['mean_ms']:.3f} ms (sum/count), interpolated p50 "
            f"{h['p50_ms_interpolated']:.2f} ms, p99 {h['p99_ms_interpolated']:.2f} ms; cumulative buckets: {buckets}.",
        ]
    return lines


def plot(https, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, protocol in zip(axes, ("h1", "h2")):
        for server, case, style in (("baseline", "no_patch", "-"), ("webhook", "no_patch", "--"), ("webhook", "patch", ":")):
            sel = [r for r in https["runs"] if r["mode"] == "fixed" and r["protocol"] == protocol and r["server"] == server and r["case"] == case]
            if not sel:
                continue
            sample = sorted(sel[len(sel) // 2]["latency_sample"])
            n = len(sample)
            # Inverted CDF: the latency at each percentile, on a log axis of 1/(1-q).
            qs = [(i + 0.5) / n for i in range(n)]
            label = "baseline" if server == "baseline" else f"webhook, {case.replace('_', ' ')}"
            ax.plot([1 / (1 - q) for q in qs], sample, style, label=label)
        ax.set_xscale("log")
        ax.set_xticks([2, 10, 100, 1000])
        ax.set_xticklabels(["p50", "p90", "p99", "p99.9"])
        ax.set_title(f"{'HTTP/1.1' if protocol == 'h1' else 'HTTP/2'} at {https['config']['rate']} req/s")
        ax.set_xlabel("percentile")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    axes[0].set_ylabel("latency (ms)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    return True


def cmd_report(args):
    out = Path(args.out)
    lines = []
    meta = out / "machine.json"
    if meta.exists():
        m = json.loads(meta.read_text())
        lines += ["### Machine", "", *[f"- {k}: {v}" for k, v in m.items()], ""]
    allocations = json.loads((out / "allocations.json").read_text()) if (out / "allocations.json").exists() else []
    instructions = json.loads((out / "instructions.json").read_text()) if (out / "instructions.json").exists() else {}
    lines += handler_section(Path(args.criterion), allocations, instructions) + [""]
    if (out / "https.json").exists():
        https = json.loads((out / "https.json").read_text())
        lines += https_section(https) + [""]
        if plot(https, out / "latency.png"):
            lines += [f"Latency plot: `{out / 'latency.png'}`", ""]
    if (out / "apiserver.json").exists():
        lines += apiserver_section(json.loads((out / "apiserver.json").read_text())) + [""]
    text = "\n".join(lines)
    (out / "report.md").write_text(text)
    print(text)


PIN, SERVER_CPU, LOAD_CPU = False, None, None
RATE = 1000
SATURATION = {"h1": (16, 1), "h2": (4, 16)}
FIXED_CLIENTS = 4
FIXED_STREAMS = {"h1": 1, "h2": 4}
TARGETS = (("baseline", "no_patch"), ("webhook", "no_patch"), ("webhook", "patch"), ("before", "no_patch"), ("before", "patch"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    https = sub.add_parser("https")
    https.add_argument("--bin", required=True, help="the release ingress-status-guard binary")
    https.add_argument("--baseline", required=True, help="the baseline_server bench binary")
    https.add_argument("--before", help="another ingress-status-guard binary to measure alongside (before/after)")
    https.add_argument("--out", required=True)
    https.add_argument("--reps", type=int, default=3)
    https.add_argument("--duration", type=int, default=10, help="seconds per h2load run (plus 1 s warm-up)")
    https.add_argument("--cold-starts", type=int, default=7)
    https.add_argument("--no-pin", action="store_true", help="do not pin server and load generator to CPUs")
    report = sub.add_parser("report")
    report.add_argument("--out", required=True)
    report.add_argument("--criterion", required=True, help="criterion's output directory (target/criterion)")
    args = parser.parse_args()
    {"https": cmd_https, "report": cmd_report}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
