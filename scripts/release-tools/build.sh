#!/usr/bin/env bash
# Provides the release tools scripts/release.sh runs, built from the Go module here (go.mod pins
# the releases; tools.go names the commands), and prints the directory holding them on the last
# line of stdout (everything else goes to stderr):
#
#   cosign    github.com/sigstore/cosign/v2/cmd/cosign: signs the image, attests its SBOM, signs
#             SHA256SUMS, and verifies all three
#   crane     github.com/google/go-containerregistry/cmd/crane: `crane registry serve`, an
#             in-memory registry on loopback to sign against (no registry is reachable from CI),
#             and `crane push` of the image's OCI layout into it
#
# Built once into ${ISG_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ingress-status-guard}/
# release-tools-<cosign version>/ under a flock, like tests/helm/build.sh. ISG_RELEASE_TOOLS=DIR
# holding both uses those instead.
set -euo pipefail

log() { printf 'scripts/release-tools/build.sh: %s\n' "$*" >&2; }

tools=(cosign crane)
has_all() { local t; for t in "${tools[@]}"; do [[ -x "$1/$t" ]] || return 1; done; }
if [[ -n "${ISG_RELEASE_TOOLS:-}" ]]; then
  if has_all "$ISG_RELEASE_TOOLS"; then
    printf '%s\n' "$ISG_RELEASE_TOOLS"
    exit 0
  fi
  log "ISG_RELEASE_TOOLS=$ISG_RELEASE_TOOLS lacks one of ${tools[*]}; building instead"
fi

mod=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
version_of() { awk -v m="$1" '$1 == m || ($1 == "require" && $2 == m) { print ($1 == "require" ? $3 : $2); exit }' "$mod/go.mod"; }
cosign_version=$(version_of github.com/sigstore/cosign/v2)
ggcr_version=$(version_of github.com/google/go-containerregistry)
out="${ISG_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ingress-status-guard}/release-tools-$cosign_version"
mkdir -p "$out"

# The stamp ties the binaries to the dependency set and to this recipe (its ldflags).
stamp_want=$(cat "$mod/go.mod" "$mod/go.sum" "$mod/tools.go" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)
is_built() { has_all "$out" && [[ "$(cat "$out/.stamp" 2>/dev/null)" == "$stamp_want" ]]; }

if ! is_built; then
  exec 9>"$out/.lock"
  if ! flock -n 9; then
    log "another process is building into $out; waiting for it"
    flock 9
  fi
  if ! is_built; then
    command -v go >/dev/null || { log "the go tool is not on PATH (or set ISG_RELEASE_TOOLS)"; exit 1; }
    log "building cosign $cosign_version and crane $ggcr_version into $out"
    start=$SECONDS
    rm -f "$out/.stamp"
    # The versions `cosign version` and `crane version` report, as their release builds set them.
    cosign_ldflags="-s -w -X sigs.k8s.io/release-utils/version.gitVersion=$cosign_version"
    ggcr_ldflags="-s -w -X github.com/google/go-containerregistry/cmd/crane/cmd.Version=$ggcr_version"
    (
      cd "$mod"
      go build -trimpath -ldflags="$cosign_ldflags" -o "$out/cosign.tmp" github.com/sigstore/cosign/v2/cmd/cosign
      go build -trimpath -ldflags="$ggcr_ldflags" -o "$out/crane.tmp" github.com/google/go-containerregistry/cmd/crane
    ) >&2
    for t in "${tools[@]}"; do mv -f "$out/$t.tmp" "$out/$t"; done
    printf '%s\n' "$stamp_want" >"$out/.stamp"
    log "built in $((SECONDS - start))s"
  fi
fi

printf '%s\n' "$out"
