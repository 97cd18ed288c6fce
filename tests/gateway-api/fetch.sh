#!/usr/bin/env bash
# Provides the Gateway API CRDs the Gateway tests apply to the test API server, and prints the
# directory holding them on the last line of stdout (everything else goes to stderr).
#
# They come from the released Go module sigs.k8s.io/gateway-api at the version pinned below,
# fetched (and checked against the Go checksum database) by `go mod download` through the Go
# module proxy, as tests/k8s/build.sh fetches kube-apiserver: never a hand-written schema.
# `config/crd/standard/*.yaml` (the standard channel, including its ValidatingAdmissionPolicy,
# which needs an API server of 1.30 or later) is copied to
# ${ISG_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ingress-status-guard}/gateway-api-<version>/,
# once: later runs find it and return at once. A flock serializes concurrent callers.
#
# v1.6.3 is the newest release that builds on Go 1.26 (v1.7.0 needs Go 1.27).
set -euo pipefail

VERSION=v1.6.3
MODULE=sigs.k8s.io/gateway-api

log() { printf 'tests/gateway-api/fetch.sh: %s\n' "$*" >&2; }

out="${ISG_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ingress-status-guard}/gateway-api-$VERSION"
mkdir -p "$out"
is_fetched() { [[ -f "$out/.stamp" && "$(cat "$out/.stamp")" == "$MODULE@$VERSION" ]]; }

if ! is_fetched; then
  exec 9>"$out/.lock"
  if ! flock -n 9; then
    log "another process is fetching into $out; waiting for it"
    flock 9
  fi
  if ! is_fetched; then
    command -v go >/dev/null || { log "the go tool is not on PATH"; exit 1; }
    log "fetching $MODULE@$VERSION through the Go module proxy"
    # Outside any module, so no go.mod of this repository is read or changed.
    json=$(cd / && GOFLAGS=-mod=mod go mod download -json "$MODULE@$VERSION")
    dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    if [[ -z "$dir" || ! -d "$dir/config/crd/standard" ]]; then
      log "go mod download gave no module directory with config/crd/standard:"
      printf '%s\n' "$json" >&2
      exit 1
    fi
    rm -f "$out/.stamp" "$out"/*.yaml
    cp "$dir"/config/crd/standard/*.yaml "$out/"
    chmod u+w "$out"/*.yaml
    printf '%s\n' "$MODULE@$VERSION" >"$out/.stamp"
    log "copied $(ls "$out"/*.yaml | wc -l) manifests of config/crd/standard into $out"
  fi
fi

printf '%s\n' "$out"
