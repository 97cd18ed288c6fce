#!/usr/bin/env bash
# Provides the helm command line the chart tests run (tests/cluster/chart.rs), and prints its path on the
# last line of stdout (everything else goes to stderr). Usage: build.sh 3|4.
#
# - ISG_HELM<major> (e.g. ISG_HELM3=/usr/local/bin/helm) naming an executable: use it.
# - Otherwise build helm.sh/helm/v<major>/cmd/helm from the Go module v<major>/ here (its go.mod
#   pins the release) into
#   ${ISG_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ingress-status-guard}/helm-<version>/,
#   once, under a flock (parallel test binaries build it once), like tests/k8s/build.sh.
set -euo pipefail

log() { printf 'tests/helm/build.sh: %s\n' "$*" >&2; }

major=${1:-}
if [[ "$major" != 3 && "$major" != 4 ]]; then
  log "usage: build.sh 3|4 (the Helm major version)"
  exit 2
fi
override_var="ISG_HELM$major"
if [[ -n "${!override_var:-}" ]]; then
  if [[ -x "${!override_var}" ]]; then
    printf '%s\n' "${!override_var}"
    exit 0
  fi
  log "$override_var=${!override_var} is not an executable; building instead"
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/v$major"
version=$(awk -v m="helm.sh/helm/v$major" '$1 == m || ($1 == "require" && $2 == m) { print ($1 == "require" ? $3 : $2); exit }' "$mod/go.mod")
out="${ISG_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ingress-status-guard}/helm-$version"
mkdir -p "$out"

# The stamp ties the binary to the dependency set and to this recipe (its ldflags).
stamp_want=$(cat "$mod/go.mod" "$mod/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)
is_built() { [[ -x "$out/helm" && "$(cat "$out/.stamp" 2>/dev/null)" == "$stamp_want" ]]; }

if ! is_built; then
  exec 9>"$out/.lock"
  if ! flock -n 9; then
    log "another process is building into $out; waiting for it"
    flock 9
  fi
  if ! is_built; then
    command -v go >/dev/null || { log "the go tool is not on PATH (or set $override_var)"; exit 1; }
    log "building helm $version into $out"
    start=$SECONDS
    rm -f "$out/.stamp"
    # The version helm reports (`helm version`), as its release builds set it.
    ldflags="-s -w -X helm.sh/helm/v$major/internal/version.version=$version"
    if [[ $major == 3 ]]; then
      # Helm 3's release builds set the Kubernetes version of `helm template` and `helm lint`
      # (else v1.20) from the client-go they link; Helm 4 reads it from the module itself.
      k8s_minor=$(awk '$1 == "k8s.io/client-go" { split($2, v, "."); print v[2]; exit }' "$mod/go.mod")
      for pkg in pkg/lint/rules pkg/chartutil; do
        ldflags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$k8s_minor"
      done
    fi
    (cd "$mod" && go build -trimpath -ldflags="$ldflags" -o "$out/helm.tmp" "helm.sh/helm/v$major/cmd/helm") >&2
    mv -f "$out/helm.tmp" "$out/helm"
    printf '%s\n' "$stamp_want" >"$out/.stamp"
    log "built in $((SECONDS - start))s"
  fi
fi

printf '%s\n' "$out/helm"
