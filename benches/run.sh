#!/usr/bin/env bash
# Runs the benchmarks below and prints the Markdown tables that BENCHMARKS.md quotes:
#   1. handler cost in-process (criterion, allocations, callgrind instruction counts)
#   2. HTTPS throughput and latency over loopback against the baseline server (h2load)
#   3. what a real kube-apiserver sees (tests/support harness; needs go or KUBEBUILDER_ASSETS)
#   4. resident memory, idle and under load
#   5. cold start to /readyz
# Installs what it needs (nghttp2-client and valgrind from apt, matplotlib from PyPI for the
# optional plot), builds release, writes everything under bench-results/<UTC time>/ and prints
# report.md. Benchmarks measure; nothing here asserts a time.
#
# Usage: benches/run.sh [--quick] [--no-apiserver] [--no-callgrind]
#   --quick         one short run of each load test (a smoke test of the suite, not numbers)
#   --no-apiserver  skip part 3 (it builds kube-apiserver and etcd from Go modules once)
#   --no-callgrind  skip the instruction counts
# ISG_BENCH_BEFORE=<an ingress-status-guard binary> measures it alongside in parts 2 and 3
# (a before/after table from one run).
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0 apiserver=1 callgrind=1
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --no-apiserver) apiserver=0 ;;
    --no-callgrind) callgrind=0 ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "benches/run.sh: unknown argument $arg (try --help)" >&2; exit 2 ;;
  esac
done

log() { printf '\n== %s\n' "$*" >&2; }

apt_updated=0
apt_install() {
  if [[ $apt_updated == 0 ]]; then
    apt-get update -qq >&2
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

log "tools"
command -v python3 >/dev/null || apt_install python3
command -v h2load >/dev/null || apt_install nghttp2-client
command -v taskset >/dev/null || apt_install util-linux
if [[ $callgrind == 1 ]] && ! command -v valgrind >/dev/null; then apt_install valgrind; fi
python3 -c 'import matplotlib' 2>/dev/null ||
  python3 -m pip install --quiet matplotlib >&2 ||
  echo "matplotlib unavailable: no latency plot" >&2

out="bench-results/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
out=$(cd "$out" && pwd)

busy() { ps -eo pid,pcpu,args --no-headers | grep -E '(^|/)(cargo|rustc|go|cc1|ld) ' | grep -v grep || true; }

log "build (release)"
cargo build --release --locked --bin ingress-status-guard >&2
benches=(--bench handler --bench baseline_server)
[[ $apiserver == 1 ]] && benches+=(--bench apiserver)
cargo bench --locked --no-run "${benches[@]}" --message-format=json >"$out/build.jsonl"
exe() {
  python3 -c '
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == sys.argv[2] and m.get("executable"):
        print(m["executable"])
' "$out/build.jsonl" "$1" | tail -1
}
handler=$(exe handler)
baseline=$(exe baseline_server)
webhook=target/release/ingress-status-guard

python3 - "$out/machine.json" <<EOF
import json, os, platform, subprocess, sys
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
mem = next((l.split(":", 1)[1].strip() for l in open("/proc/meminfo") if l.startswith("MemTotal")), "?")
json.dump({
    "nproc": os.cpu_count(),
    "cpu": cpu,
    "kernel": platform.release(),
    "memory": mem,
    "rustc": subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip(),
    "load average at start": open("/proc/loadavg").read().split()[:3],
    "other builds running at start": """$(busy | wc -l)""".strip(),
}, open(sys.argv[1], "w"), indent=1)
EOF

head -1 /proc/stat >"$out/cpu-start.txt"

# This machine's speed drifts over tens of seconds (shared host): three whole criterion runs,
# and the report takes the median of their medians.
for run in 1 2 3; do
  log "1. handler (criterion, run $run of 3)"
  CRITERION_HOME="$out/criterion/$run" ISG_BENCH_OUT="$out" "$handler" --bench | tee "$out/handler-$run.txt" >&2
done

if [[ $callgrind == 1 ]]; then
  log "1. handler (callgrind instruction counts)"
  echo "{" >"$out/instructions.json"
  sep=""
  for size in typical large; do
    for case in no_patch patch not_governed; do
      n=100
      [[ $size == large ]] && n=5
      total=$(ISG_BENCH_LOOP="decide/$size/$case:$n" valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        --toggle-collect='handler::decide*' "$handler" 2>&1 |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p')
      printf '%s "decide/%s/%s": %s\n' "$sep" "$size" "$case" "$((total / n))" >>"$out/instructions.json"
      sep=","
    done
  done
  echo "}" >>"$out/instructions.json"
fi

before=()
[[ -n ${ISG_BENCH_BEFORE:-} ]] && before=(--before "$(realpath "$ISG_BENCH_BEFORE")")

log "2, 4, 5. HTTPS load, memory, cold start"
if [[ $quick == 1 ]]; then
  python3 benches/loadtest.py https --bin "$webhook" --baseline "$baseline" --out "$out" --reps 1 --duration 3 --cold-starts 3 ${before[@]+"${before[@]}"} >&2
else
  python3 benches/loadtest.py https --bin "$webhook" --baseline "$baseline" --out "$out" --reps 5 ${before[@]+"${before[@]}"} >&2
fi

if [[ $apiserver == 1 ]]; then
  log "3. through a real kube-apiserver"
  writes=500
  [[ $quick == 1 ]] && writes=50
  "$(exe apiserver)" --run --writes "$writes" --out "$out/apiserver.json" ${before[@]+"${before[@]}"} >"$out/apiserver.txt"
fi

python3 - "$out/machine.json" <<EOF
import json, sys
m = json.load(open(sys.argv[1]))
m["load average at end"] = open("/proc/loadavg").read().split()[:3]
m["other builds running at end"] = """$(busy | wc -l)""".strip()
start = [int(x) for x in open("$out/cpu-start.txt").read().split()[1:]]
end = [int(x) for x in open("/proc/stat").readline().split()[1:]]
delta = [e - s for s, e in zip(start, end)]
m["CPU steal during the run"] = f"{100 * delta[7] / max(1, sum(delta[:8])):.2f}%"
json.dump(m, open(sys.argv[1], "w"), indent=1)
EOF

log "report: $out/report.md"
python3 benches/loadtest.py report --out "$out" --criterion "$out/criterion"
