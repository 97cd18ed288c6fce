#!/usr/bin/env bash
# Provides the Traefik binary the migration tests run (tests/cluster/traefik.rs: the real second
# controller, its Kubernetes ingress-nginx provider) and prints its path on the last line of
# stdout (everything else goes to stderr).
#
# - ISG_TRAEFIK naming an executable: use it.
# - Otherwise build github.com/traefik/traefik/v3/cmd/traefik from the Go module here (its go.mod
#   pins v3.7.12) into
#   ${ISG_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ingress-status-guard}/traefik-<version>/,
#   once, under a flock (parallel test binaries build it once), like tests/k8s/build.sh.
#
# What differs from Traefik's release build, and why (only the Go module proxy is reachable):
# - v3.7.12, not newer: v3.7.13's ACME library pins DNS-provider SDK versions the proxy refuses.
# - github.com/traefik/traefik/dynamic/ext is a nested module of Traefik's repository that the
#   proxy does not serve (module zips leave nested modules out; Traefik's go.mod reaches it by a
#   `replace` into its own tree). ./dynamic-ext stands in for it: the two types Traefik embeds in
#   its dynamic configuration (ext.HTTP, ext.Router), empty. No provider fills them.
# - Traefik's fork of go-http-auth (github.com/containous/go-http-auth) is pinned by v3.7.11+ at a
#   version the proxy refuses (403); go.mod takes the fork's previous version, which v3.7.10 and
#   earlier pin. It serves only the BasicAuth/DigestAuth middlewares, which no test Ingress asks
#   for (no auth annotations): the code the tests run is Traefik v3.7.12's own.
# - `go mod tidy` adds a few modules (gin's JSON encoders and the like) only for the tests of
#   pre-module-pruning dependencies (nhooyr.io/websocket's); the binary does not link them.
set -euo pipefail

log() { printf 'tests/traefik/build.sh: %s\n' "$*" >&2; }

if [[ -n "${ISG_TRAEFIK:-}" ]]; then
  if [[ -x "$ISG_TRAEFIK" ]]; then
    printf '%s\n' "$ISG_TRAEFIK"
    exit 0
  fi
  log "ISG_TRAEFIK=$ISG_TRAEFIK is not an executable; building instead"
fi

mod=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module=github.com/traefik/traefik/v3
version=$(awk -v m="$module" '($1 == "require" && $2 == m) || $1 == m { print ($1 == "require" ? $3 : $2); exit }' "$mod/go.mod")
out="${ISG_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ingress-status-guard}/traefik-$version"
mkdir -p "$out"

# The stamp ties the binary to the dependency set, the stand-in and this recipe (its ldflags).
stamp_want=$(cat "$mod/go.mod" "$mod/go.sum" "$mod/dynamic-ext/go.mod" "$mod/dynamic-ext/ext.go" \
  "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)
is_built() { [[ -x "$out/traefik" && "$(cat "$out/.stamp" 2>/dev/null)" == "$stamp_want" ]]; }

if ! is_built; then
  exec 9>"$out/.lock"
  if ! flock -n 9; then
    log "another process is building into $out; waiting for it"
    flock 9
  fi
  if ! is_built; then
    command -v go >/dev/null || { log "the go tool is not on PATH (or set ISG_TRAEFIK)"; exit 1; }
    log "building traefik $version into $out"
    start=$SECONDS
    rm -f "$out/.stamp"
    # The version `traefik version` reports, as Traefik's release builds set it.
    ldflags="-s -w -X $module/pkg/version.Version=$version"
    (cd "$mod" && go build -trimpath -ldflags="$ldflags" -o "$out/traefik.tmp" "$module/cmd/traefik") >&2
    mv -f "$out/traefik.tmp" "$out/traefik"
    printf '%s\n' "$stamp_want" >"$out/.stamp"
    log "built in $((SECONDS - start))s"
  fi
fi

printf '%s\n' "$out/traefik"
