#!/usr/bin/env bash
# Smoke-runs a linux/arm64 release binary on this (amd64) host under qemu-user
# (qemu-aarch64-static, Debian's qemu-user-static; scripts/cross-tools.sh installs it):
#
#   scripts/smoke-qemu.sh BINARY [REVISION]
#
#   1. `--version` names this crate's version (and REVISION, when given)
#   2. `resolve` of a static list prints the canonical addresses, IPs first
#   3. `serve` with a static source answers /readyz, and one AdmissionReview posted to /mutate
#      (tests/fixtures' status UPDATE of a class-less Ingress) gets its uid back, allowed, with a
#      JSONPatch that sets the status to the static address
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'smoke-qemu.sh: %s\n' "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

[[ $# -ge 1 && $# -le 2 ]] || die "usage: scripts/smoke-qemu.sh BINARY [REVISION]"
bin=$1 revision=${2:-}
qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64) || die "qemu-aarch64(-static) is required (scripts/cross-tools.sh)"
readelf -h "$bin" | grep -q 'Machine:.*AArch64' || die "$bin is not an AArch64 executable"
version=$(awk -F'"' '/^version = / { print $2; exit }' Cargo.toml)

said=$("$qemu" "$bin" --version) || die "$bin --version failed under qemu"
want="ingress-status-guard $version"
[[ "$said" == "$want"* ]] || die "--version says $said, not $want"
[[ -z "$revision" || "$said" == *"(revision $revision)" ]] || die "--version says $said, not revision $revision"
log "--version under $(basename "$qemu"): $said"

resolved=$("$qemu" "$bin" resolve --publish-status-address=lb.example.test,192.0.2.1) || die "resolve failed under qemu"
python3 - "$resolved" <<'PY' || die "resolve printed $resolved"
import json, sys
doc = json.loads(sys.argv[1])
text = json.dumps(doc)
assert text.index("192.0.2.1") < text.index("lb.example.test"), "the IP comes first"
PY
log "resolve under qemu: $(tr -d ' \n' <<<"$resolved" | cut -c1-120)"

work=$(mktemp -d)
serve_pid=""
cleanup() {
  if [[ -n "$serve_pid" ]]; then kill "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
port=$((20000 + RANDOM % 20000))
admin=$((port + 1))
TMPDIR=$work "$qemu" "$bin" serve --publish-status-address=192.0.2.10 --watch-ingress-without-class --no-events \
  --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" --probe-listen 127.0.0.1:0 >"$work/serve.log" 2>&1 &
serve_pid=$!
ready=""
for _ in $(seq 1 300); do
  if ready=$(curl -fsS "http://127.0.0.1:$admin/readyz" 2>/dev/null); then break; fi
  kill -0 "$serve_pid" 2>/dev/null || break
  sleep 0.1
done
[[ -n "$ready" ]] || die "serve under qemu did not become ready: $(tail -n 20 "$work/serve.log")"
fixture=tests/fixtures/ingress-status-update.apiserver-1.24.json
curl -fsS -k -H 'Content-Type: application/json' --data-binary "@$fixture" "https://127.0.0.1:$port/mutate" >"$work/review.json" \
  || die "POST /mutate failed: $(tail -n 20 "$work/serve.log")"
python3 - "$fixture" "$work/review.json" <<'PY' || die "the review's answer is wrong: $(head -c 600 "$work/review.json")"
import base64, json, sys
request = json.load(open(sys.argv[1]))["request"]
answer = json.load(open(sys.argv[2]))
response = answer["response"]
assert answer["apiVersion"] == "admission.k8s.io/v1", answer["apiVersion"]
assert response["uid"] == request["uid"], response["uid"]
assert response["allowed"] is True, response
assert response["patchType"] == "JSONPatch", response
patch = json.loads(base64.b64decode(response["patch"]))
assert "192.0.2.10" in json.dumps(patch), patch
print(f"smoke-qemu.sh: POST /mutate under qemu: uid {response['uid']}, allowed, JSONPatch {json.dumps(patch)}", file=sys.stderr)
PY
log "the arm64 binary passed under qemu: --version, resolve, a review posted to serve"
