#!/usr/bin/env bash
# Provides MetalLB's controller for the LoadBalancer Service test (tests/cluster/metallb.rs: the
# real load-balancer implementation, allocating from an IPAddressPool) and prints its path on
# the last line of stdout (everything else goes to stderr). Beside the binary, `crds/` holds
# MetalLB's CRDs and `rbac/role.yaml` its RBAC, both from the same module version.
#
# - ISG_METALLB naming an executable: use it (its directory must hold `crds/` and `rbac/` too).
# - Otherwise build go.universe.tf/metallb/controller from the Go module here (its go.mod pins
#   v0.15.2) into
#   ${ISG_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ingress-status-guard}/metallb-<version>/,
#   once, under a flock (parallel test binaries build it once), like tests/k8s/build.sh.
#
# The module proxy serves MetalLB as it is released: no stand-ins, no replaced dependencies. The
# speaker (which announces the addresses by ARP or BGP) is not built: the test needs only the
# controller, which allocates and writes `status.loadBalancer`.
set -euo pipefail

log() { printf 'tests/metallb/build.sh: %s\n' "$*" >&2; }

if [[ -n "${ISG_METALLB:-}" ]]; then
  if [[ -x "$ISG_METALLB" ]]; then
    printf '%s\n' "$ISG_METALLB"
    exit 0
  fi
  log "ISG_METALLB=$ISG_METALLB is not an executable; building instead"
fi

mod=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module=go.universe.tf/metallb
version=$(awk -v m="$module" '($1 == "require" && $2 == m) || $1 == m { print ($1 == "require" ? $3 : $2); exit }' "$mod/go.mod")
out="${ISG_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ingress-status-guard}/metallb-$version"
mkdir -p "$out"

# The stamp ties the binary (and the copied manifests) to the dependency set and this recipe.
stamp_want=$(cat "$mod/go.mod" "$mod/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)
is_built() { [[ -x "$out/controller" && "$(cat "$out/.stamp" 2>/dev/null)" == "$stamp_want" ]]; }

if ! is_built; then
  exec 9>"$out/.lock"
  if ! flock -n 9; then
    log "another process is building into $out; waiting for it"
    flock 9
  fi
  if ! is_built; then
    command -v go >/dev/null || { log "the go tool is not on PATH (or set ISG_METALLB)"; exit 1; }
    log "building metallb controller $version into $out"
    start=$SECONDS
    rm -f "$out/.stamp"
    (cd "$mod" && go build -trimpath -ldflags="-s -w" -o "$out/controller.tmp" "$module/controller") >&2
    # The module's own manifests, from the module cache the build just filled.
    src=$(cd "$mod" && go list -m -f '{{.Dir}}' "$module")
    rm -rf "$out/crds" "$out/rbac"
    mkdir -p "$out/crds" "$out/rbac"
    cp "$src"/config/crd/bases/*.yaml "$out/crds/"
    cp "$src/config/rbac/role.yaml" "$out/rbac/"
    chmod -R u+w "$out/crds" "$out/rbac"
    mv -f "$out/controller.tmp" "$out/controller"
    printf '%s\n' "$stamp_want" >"$out/.stamp"
    log "built in $((SECONDS - start))s"
  fi
fi

printf '%s\n' "$out/controller"
