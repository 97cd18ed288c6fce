#!/usr/bin/env bash
# Provides the `prometheus` server and `promtool` the alert tests (tests/cluster/alerts.rs) and the
# dashboard test (tests/cluster/dashboard.rs) run, and prints the directory holding both on the last
# line of stdout (everything else goes to stderr).
#
# - $PROMETHEUS (the dashboard test) or $PROMTOOL (the alert tests) naming an executable, e.g.
#   Debian's /usr/bin/prometheus: that test uses it and does not call this script.
# - Otherwise build cmd/prometheus and cmd/promtool from the Go module here (its go.mod pins
#   github.com/prometheus/prometheus, whose module versions v0.3xx.y are Prometheus 3.xx.y) into
#   ${ISG_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ingress-status-guard}/prometheus-<version>-<stamp>/,
#   once, under a flock (parallel test binaries build it once), like tests/k8s/build.sh. The
#   stamp (a hash of go.mod, go.sum, the build tags and the ldflags) is part of the directory's
#   name, so two checkouts with different module files never overwrite each other's binaries.
#
# Built without the web UI (no `builtinassets` tag: the tests use only the HTTP API and
# `/-/ready`) and with `remove_all_sd` (the dashboard test scrapes a static target: no cloud
# service discovery SDKs to compile, which halves a cold build: 347 s of CPU against 731 s
# without the tag, both with an empty Go build cache).
set -euo pipefail

log() { printf 'tests/prometheus/build.sh: %s\n' "$*" >&2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module=github.com/prometheus/prometheus
mod_version=$(awk -v m="$module" '$1 == m || ($1 == "require" && $2 == m) { print ($1 == "require" ? $3 : $2); exit }' "$here/go.mod")
if [[ ! "$mod_version" =~ ^v0\.([0-9])([0-9][0-9])\.([0-9]+)$ ]]; then
  log "tests/prometheus/go.mod: expected $module at a v0.3xx.y release, found '${mod_version}'"
  exit 1
fi
# v0.316.0 is Prometheus 3.16.0: the version `prometheus --version` reports, as a release's.
version="${BASH_REMATCH[1]}.$((10#${BASH_REMATCH[2]})).${BASH_REMATCH[3]}"
# The recipe: what besides the module files decides the binaries.
tags=remove_all_sd
pkg=github.com/prometheus/common/version
ldflags="-s -w -X $pkg.Version=$version -X $pkg.Revision=v$version -X $pkg.Branch=release"
ldflags+=" -X $pkg.BuildUser=ingress-status-guard-tests -X $pkg.BuildDate=unknown"
stamp=$( (cat "$here/go.mod" "$here/go.sum" && printf '%s\n' "$tags" "$ldflags") | sha256sum | cut -c1-12)
out="${ISG_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ingress-status-guard}/prometheus-v$version-$stamp"
mkdir -p "$out"

is_built() { [[ -x "$out/prometheus" && -x "$out/promtool" && -f "$out/.built" ]]; }

if ! is_built; then
  exec 9>"$out/.lock"
  if ! flock -n 9; then
    log "another process is building into $out; waiting for it"
    flock 9
  fi
  if ! is_built; then
    command -v go >/dev/null || { log "the go tool is not on PATH (or set PROMETHEUS and PROMTOOL)"; exit 1; }
    log "building prometheus and promtool $version into $out (a cold build takes minutes)"
    start=$SECONDS
    rm -f "$out/.built"
    # One go build for both: their shared packages compile once, in parallel.
    rm -rf "$out/tmp" && mkdir "$out/tmp"
    (cd "$here" && go build -trimpath -tags "$tags" -ldflags="$ldflags" -o "$out/tmp/" \
      "$module/cmd/prometheus" "$module/cmd/promtool") >&2
    mv -f "$out/tmp/prometheus" "$out/tmp/promtool" "$out/"
    rmdir "$out/tmp"
    touch "$out/.built"
    log "built in $((SECONDS - start))s"
  fi
fi

printf '%s\n' "$out"
