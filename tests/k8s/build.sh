#!/usr/bin/env bash
# Provides the kube-apiserver and etcd binaries the end-to-end tests run, and prints the
# directory holding them on the last line of stdout (everything else goes to stderr).
#
# - KUBEBUILDER_ASSETS (the envtest convention) holding both binaries: use it, build nothing.
# - Otherwise build them from the Go module of the Kubernetes minor version ISG_K8S_VERSION
#   (default v1.37; `1.31`, `v1.31` and `v1.31.14` all select tests/k8s/v1.31/, whose go.mod
#   pins k8s.io/kubernetes, its staging modules and etcd) into
#   ${ISG_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ingress-status-guard}/k8s-<version>/,
#   once: later runs find the binaries and return at once. A flock serializes concurrent
#   callers (parallel test binaries), so only one of them builds.
#
# Supported versions: one directory per minor version here (see docs/testing.md, "Supported Kubernetes versions").
set -euo pipefail

DEFAULT_VERSION=v1.37

log() { printf 'tests/k8s/build.sh: %s\n' "$*" >&2; }

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  if [[ -x "$KUBEBUILDER_ASSETS/kube-apiserver" && -x "$KUBEBUILDER_ASSETS/etcd" ]]; then
    printf '%s\n' "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  log "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks an executable kube-apiserver or etcd; building instead"
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

want=${ISG_K8S_VERSION:-$DEFAULT_VERSION}
if [[ ! "$want" =~ ^v?1\.([0-9]+)(\.[0-9]+)?$ ]]; then
  log "ISG_K8S_VERSION=$want: expected a Kubernetes version like v1.37, 1.31 or v1.31.14"
  exit 1
fi
minor=${BASH_REMATCH[1]}
mod="$here/v1.$minor"
if [[ ! -f "$mod/go.mod" ]]; then
  log "ISG_K8S_VERSION=$want: no module for v1.$minor; supported: $(cd "$here" && ls -d v1.* | tr '\n' ' ')"
  exit 1
fi
K8S_VERSION=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$mod/go.mod")
if [[ -n "${BASH_REMATCH[2]}" && "v${want#v}" != "$K8S_VERSION" ]]; then
  log "ISG_K8S_VERSION=$want: tests/k8s/v1.$minor/go.mod pins $K8S_VERSION; use v1.$minor or $K8S_VERSION"
  exit 1
fi

out="${ISG_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ingress-status-guard}/k8s-$K8S_VERSION"
mkdir -p "$out"

# The stamp ties the binaries to the exact dependency set, so editing go.mod/go.sum rebuilds.
stamp_inputs=("$mod/go.mod" "$mod/go.sum" "$mod/cmd/etcd/main.go")
for extra in "$mod/prepare.sh" "$mod/openapi-packages.txt"; do
  [[ -f "$extra" ]] && stamp_inputs+=("$extra")
done
stamp_want=$(cat "${stamp_inputs[@]}" | sha256sum | cut -d' ' -f1)
is_built() {
  [[ -x "$out/kube-apiserver" && -x "$out/etcd" && "$(cat "$out/.stamp" 2>/dev/null)" == "$stamp_want" ]]
}

if ! is_built; then
  exec 9>"$out/.lock"
  if ! flock -n 9; then
    log "another process is building into $out; waiting for it"
    flock 9
  fi
  if ! is_built; then
    command -v go >/dev/null || { log "the go tool is not on PATH (or set KUBEBUILDER_ASSETS)"; exit 1; }
    log "building kube-apiserver $K8S_VERSION and etcd into $out (a cold build takes many minutes)"
    start=$SECONDS
    version_flags=""
    for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
      version_flags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
      version_flags+=" -X $pkg.gitTreeState=clean"
    done
    rm -f "$out/.stamp"
    (
      cd "$mod"
      modfile=()
      # A release whose module lacks generated code (v1.23) prepares a patched copy first.
      if [[ -x prepare.sh ]]; then
        modfile=(-modfile="$(./prepare.sh "$out/src")")
      fi
      go build "${modfile[@]}" -trimpath -ldflags="-s -w$version_flags" -o "$out/kube-apiserver.tmp" \
        k8s.io/kubernetes/cmd/kube-apiserver
      # Timed apart: what etcd adds after its kube-apiserver (they share most of the build cache)
      # is what one etcd for every version would save.
      etcd_start=$SECONDS
      go build "${modfile[@]}" -trimpath -ldflags="-s -w" -o "$out/etcd.tmp" ./cmd/etcd
      log "etcd built in $((SECONDS - etcd_start))s after kube-apiserver"
      rm -rf "$out/src"
    ) >&2
    mv -f "$out/kube-apiserver.tmp" "$out/kube-apiserver"
    mv -f "$out/etcd.tmp" "$out/etcd"
    printf '%s\n' "$stamp_want" >"$out/.stamp"
    log "built in $((SECONDS - start))s"
  fi
fi

printf '%s\n' "$out"
