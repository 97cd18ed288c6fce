#!/usr/bin/env bash
# Checks that scripts/release-verify.sh refuses a tampered release, naming the check that caught
# it. Each case tampers a copy of the release directory and, where the tampering would otherwise
# only break SHA256SUMS, signs the copy again with the release's own key (ISG_NEGATIVE_KEY, with
# COSIGN_PASSWORD: a signing pipeline that signs the wrong thing), so that the check meant to
# catch it is the one that does:
#
#   key         SHA256SUMS signed by another key                 -> check sums
#   binary      the arm64 image's binary is not the released one -> check binaries
#   sbom        one crate's checksum changed in the SBOM, attested -> check sbom
#   provenance  a provenance statement for another revision      -> check provenance
#   chart       the chart's OCI artifact without its signature   -> check chart
#   platform    an image index without linux/arm64, signed      -> check platforms
#
#   ISG_NEGATIVE_KEY=KEY scripts/release-verify-negative.sh --key PUB --revision COMMIT DIR
#
# scripts/release.sh runs it after verifying the release, with the run's key, before that key is
# removed.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'release-verify-negative.sh: %s\n' "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

[[ $# -eq 5 && $1 == --key && $3 == --revision ]] || die "usage: ISG_NEGATIVE_KEY=KEY release-verify-negative.sh --key PUB --revision COMMIT DIR"
pub=$2 revision=$4 dir=$5
key=${ISG_NEGATIVE_KEY:?ISG_NEGATIVE_KEY: the private key of the release, to sign the tampered copies}
tools=${ISG_RELEASE_TOOLS:-$(scripts/release-tools/build.sh | tail -n 1)}
export ISG_RELEASE_TOOLS=$tools
cosign="$tools/cosign"
crane="$tools/crane"
export ISG_HELM=${ISG_HELM:-$(tests/helm/build.sh 3 | tail -n 1)}
work=$(mktemp -d)
registry_pid=""
# shellcheck source=scripts/release-lib.sh
. scripts/release-lib.sh
trap 'stop_registry; rm -rf "$work"' EXIT
start_registry
version=$(ls "$dir" | sed -n 's/^ingress-status-guard-\(.*\)\.image-digest$/\1/p')
epoch=0

copy() { local d="$work/case-$1"; rm -rf "$d"; cp -a "$dir" "$d"; printf '%s\n' "$d"; }
resum() {
  local d=$1 k=${2:-$key}
  (cd "$d" && find . -maxdepth 1 -type f ! -name 'SHA256SUMS*' -printf '%f\n' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
  "$cosign" sign-blob --key "$k" --tlog-upload=false --yes --output-signature "$d/SHA256SUMS.sig" "$d/SHA256SUMS" 2>/dev/null
}
# Signs the copy's image layout again (index, SBOM and provenance as the copy holds them).
resign_image() {
  local d=$1 layout=$2 digest
  digest=$(sign_image "$layout" "$registry/case-$(basename "$d")" "$key" "$d/ingress-status-guard-$version.cdx.json" \
    "$d/ingress-status-guard-$version.provenance.json" "$d/ingress-status-guard-$version.signed-oci.tar")
  tar_fixed "$layout" "$d/ingress-status-guard-$version.oci.tar"
  printf '%s\n' "$digest" >"$d/ingress-status-guard-$version.image-digest"
}
# expect CASE CHECK DIR [verify args]: release-verify.sh must fail, naming CHECK.
failed=0
expect() {
  local name=$1 check=$2 d=$3
  shift 3
  if scripts/release-verify.sh --key "$pub" --revision "$revision" "$@" "$d" >"$work/$name.log" 2>&1; then
    log "case $name: release-verify.sh PASSED a tampered release"
    failed=1
    return
  fi
  local said
  said=$(grep 'FAILED' "$work/$name.log" | head -n 1)
  if [[ "$said" == *"FAILED check $check:"* ]]; then
    log "case $name: refused as expected: ${said#release-verify.sh: }"
  else
    log "case $name: refused, but not by check $check: ${said:-$(tail -n 3 "$work/$name.log")}"
    failed=1
  fi
}

# key: the list signed by a key that is not the release's.
d=$(copy key)
(cd "$work" && COSIGN_PASSWORD=other "$cosign" generate-key-pair --output-key-prefix other >/dev/null 2>&1)
COSIGN_PASSWORD=other resum "$d" "$work/other.key"
expect key sums "$d"

# binary: the released arm64 binary is not the one in the arm64 image.
d=$(copy binary)
printf 'x' >>"$d/ingress-status-guard-$version-linux-arm64"
resum "$d"
expect binary binaries "$d"

# sbom: one crate's checksum changed, the SBOM attested as it is.
d=$(copy sbom)
python3 - "$d/ingress-status-guard-$version.cdx.json" <<'PY'
import json, sys
bom = json.load(open(sys.argv[1]))
c = next(c for c in bom["components"] if c.get("hashes"))
c["hashes"][0]["content"] = "0" * 64
json.dump(bom, open(sys.argv[1], "w"), indent=2)
PY
resign_image "$d" "$(untar "$d/ingress-status-guard-$version.oci.tar")"
resum "$d"
expect sbom sbom "$d"

# provenance: a statement for another revision (the parent commit), attested as it is.
d=$(copy provenance)
other=$(git rev-parse "$revision^" 2>/dev/null || echo 0000000000000000000000000000000000000000)
python3 - "$d/ingress-status-guard-$version.provenance.json" "$revision" "$other" <<'PY'
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
open(path, "w").write(text.replace(old, new))
PY
resign_image "$d" "$(untar "$d/ingress-status-guard-$version.oci.tar")"
resum "$d"
expect provenance provenance "$d"

# chart: the chart's OCI artifact saved without its signature.
d=$(copy chart)
chart=$(untar "$d/ingress-status-guard-$version.chart.signed-oci.tar")
python3 - "$chart/index.json" <<'PY'
import json, sys
index = json.load(open(sys.argv[1]))
index["manifests"] = [m for m in index["manifests"] if m.get("annotations", {}).get("kind") != "dev.cosignproject.cosign/sigs"]
json.dump(index, open(sys.argv[1], "w"))
PY
tar_fixed "$chart" "$d/ingress-status-guard-$version.chart.signed-oci.tar"
resum "$d"
expect chart chart "$d"

# platform: an image index holding linux/amd64 only, signed and attested.
d=$(copy platform)
layout=$(untar "$d/ingress-status-guard-$version.oci.tar")
python3 - "$layout" <<'PY'
import hashlib, json, os, sys
layout = sys.argv[1]
top = json.load(open(os.path.join(layout, "index.json")))
blob = lambda digest: os.path.join(layout, "blobs", "sha256", digest.removeprefix("sha256:"))
index = json.load(open(blob(top["manifests"][0]["digest"])))
index["manifests"] = [m for m in index["manifests"] if m["platform"]["architecture"] != "arm64"]
data = json.dumps(index, separators=(",", ":"), sort_keys=True).encode()
digest = "sha256:" + hashlib.sha256(data).hexdigest()
open(blob(digest), "wb").write(data)
top["manifests"][0].update(digest=digest, size=len(data))
json.dump(top, open(os.path.join(layout, "index.json"), "w"))
PY
resign_image "$d" "$layout"
resum "$d"
expect platform platforms "$d"

[[ $failed == 0 ]] || die "release-verify.sh let a tampered release through or named the wrong check (logs above)"
log "release-verify.sh refused all 6 tampered copies, each by the check meant to catch it"
