#!/usr/bin/env bash
# Builds dnswatch (main.go: external-dns's own Ingress source, polled for DNS target changes) for
# benches/fight.rs and prints its path on the last line of stdout (everything else goes to
# stderr). Like tests/k8s/build.sh: built from the Go module proxy with the ordinary `go` tool
# into ${ISG_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ingress-status-guard}/external-dns-<version>/,
# once per go.mod/go.sum/main.go (a stamp), under a flock so concurrent callers build it once.
# Only the fight benchmark runs this; no test and no CI step does.
set -euo pipefail

log() { printf 'benches/external-dns/build.sh: %s\n' "$*" >&2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
version=$(awk '$1 == "require" { $1 = ""; $0 = $0 } $1 == "sigs.k8s.io/external-dns" && $2 ~ /^v/ { print $2; exit }' "$here/go.mod")
if [[ -z "$version" ]]; then
  log "no 'require sigs.k8s.io/external-dns vX.Y.Z' line in $here/go.mod"
  exit 1
fi

out="${ISG_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ingress-status-guard}/external-dns-$version"
mkdir -p "$out"

# The stamp ties the binary to the exact dependency set and program, so editing any rebuilds.
stamp_want=$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" | sha256sum | cut -d' ' -f1)
is_built() { [[ -x "$out/dnswatch" && "$(cat "$out/.stamp" 2>/dev/null)" == "$stamp_want" ]]; }

if ! is_built; then
  exec 9>"$out/.lock"
  if ! flock -n 9; then
    log "another process is building into $out; waiting for it"
    flock 9
  fi
  if ! is_built; then
    command -v go >/dev/null || {
      log "the go tool is not on PATH: install Go (go.mod asks for $(awk '$1 == "go" { print $2 }' "$here/go.mod") or newer) to run the fight benchmark's external-dns watcher"
      exit 1
    }
    log "building dnswatch with sigs.k8s.io/external-dns $version into $out (a cold build takes minutes)"
    start=$SECONDS
    rm -f "$out/.stamp"
    (cd "$here" && go build -trimpath -ldflags="-s -w" -o "$out/dnswatch.tmp" .) >&2
    mv -f "$out/dnswatch.tmp" "$out/dnswatch"
    printf '%s\n' "$stamp_want" >"$out/.stamp"
    log "built in $((SECONDS - start))s"
  fi
fi

printf '%s\n' "$out/dnswatch"
