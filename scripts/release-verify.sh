#!/usr/bin/env bash
# Verifies a release directory as scripts/release.sh writes it (target/release-artifacts/ by
# default), the way an operator would before installing, with the directory's cosign.pub (or
# ISG_RELEASE_PUB=FILE, the key you got from elsewhere: trust a key you did not download beside
# the release):
#
#   1. SHA256SUMS: its signature (cosign verify-blob), then every file against it, and no file
#      outside it
#   2. the image: the cosign signature and the CycloneDX attestation of the saved, signed layout
#      (cosign verify / verify-attestation --local-image), both for the digest in .image-digest,
#      which is the plain .oci.tar's too; the attested SBOM is the .cdx.json
#   3. the SBOM: every component has a license; its crates are the ones the binary's embedded
#      dependency list (cargo auditable's .dep-v0) names
#   4. the krew manifest names the archive's sha256, the archive holds the binary; the chart
#      archive holds the chart of this version
#   5. REPRODUCIBILITY says the two builds gave the same bytes
#
#   scripts/release-verify.sh [DIR]
#   scripts/release-verify.sh --compare A B   compare two builds of the binary: prints whether
#                                             they are the same bytes and, if not, which sections
#                                             and strings differ (the input that differs)
#
# cosign: ISG_COSIGN=PATH, else scripts/release-tools/build.sh builds it (Go module proxy, cached).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'release-verify.sh: %s\n' "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

if [[ "${1:-}" == --compare ]]; then
  [[ $# -eq 3 ]] || die "usage: release-verify.sh --compare A B"
  a=$2 b=$3
  sa=$(sha256sum "$a" | cut -d' ' -f1)
  sb=$(sha256sum "$b" | cut -d' ' -f1)
  if [[ "$sa" == "$sb" ]]; then
    printf 'reproducible: both builds are %s (%d bytes)\n' "$sa" "$(stat -c %s "$a")"
    printf '  first:  %s\n  second: %s\n' "$a" "$b"
    exit 0
  fi
  printf 'NOT reproducible: %s is %s, %s is %s\n' "$a" "$sa" "$b" "$sb"
  python3 - "$a" "$b" <<'EOF'
import re, subprocess, sys, hashlib
def sections(path):
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True, check=True).stdout
    data = open(path, "rb").read()
    res = {}
    for m in re.finditer(r"\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)", out):
        name, off, size = m.group(1), int(m.group(2), 16), int(m.group(3), 16)
        res[name] = (size, hashlib.sha256(data[off:off + size]).hexdigest())
    return res, data
sa, da = sections(sys.argv[1])
sb, db = sections(sys.argv[2])
diff = [n for n in sorted(set(sa) | set(sb)) if sa.get(n) != sb.get(n)]
print("  sections that differ: " + (", ".join(f"{n} ({sa.get(n, (0,))[0]} vs {sb.get(n, (0,))[0]} bytes)" for n in diff) or "none"))
strs = lambda d: set(re.findall(rb"[\x20-\x7e]{8,}", d))
only_a, only_b = sorted(strs(da) - strs(db))[:15], sorted(strs(db) - strs(da))[:15]
for label, items in (("only in the first", only_a), ("only in the second", only_b)):
    print(f"  strings {label}:")
    for s in items:
        print("    " + s.decode()[:160])
EOF
  exit 1
fi

dir=${1:-target/release-artifacts}
[[ $# -le 1 ]] || die "usage: release-verify.sh [DIR] | --compare A B"
[[ -f "$dir/SHA256SUMS" ]] || die "$dir has no SHA256SUMS"
cosign=${ISG_COSIGN:-$(scripts/release-tools/build.sh | tail -n 1)/cosign}
pub=${ISG_RELEASE_PUB:-$dir/cosign.pub}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 1. Checksums, signed.
"$cosign" verify-blob --key "$pub" --insecure-ignore-tlog=true --signature "$dir/SHA256SUMS.sig" "$dir/SHA256SUMS" >&2 \
  || die "the signature of SHA256SUMS does not verify with $pub"
(cd "$dir" && sha256sum --quiet --strict -c SHA256SUMS) || die "a file does not match SHA256SUMS"
for f in "$dir"/*; do
  name=${f##*/}
  [[ "$name" == SHA256SUMS* ]] && continue
  awk -v n="$name" '$2 == n { found = 1 } END { exit !found }' "$dir/SHA256SUMS" || die "$name is not in SHA256SUMS"
done
log "SHA256SUMS: signature verified, $(wc -l <"$dir/SHA256SUMS") files match"

version=$(ls "$dir" | sed -n 's/^ingress-status-guard-\(.*\)\.image-digest$/\1/p')
[[ -n "$version" ]] || die "$dir has no ingress-status-guard-<version>.image-digest"
digest=$(cat "$dir/ingress-status-guard-$version.image-digest")
sbom="$dir/ingress-status-guard-$version.cdx.json"
bin="$dir/ingress-status-guard-$version-linux-amd64"

# 2. The image: signature and attestation of the saved layout, for the plain archive's digest.
mkdir -p "$work/plain" "$work/signed"
tar -xf "$dir/ingress-status-guard-$version.oci.tar" -C "$work/plain"
plain_digest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$work/plain/index.json")
[[ "$plain_digest" == "$digest" ]] || die "the .oci.tar holds $plain_digest, .image-digest says $digest"
tar -xf "$dir/ingress-status-guard-$version.signed-oci.tar" -C "$work/signed"
"$cosign" verify --key "$pub" --insecure-ignore-tlog=true --local-image "$work/signed" >"$work/verify.json" 2>"$work/verify.err" \
  || die "the image's signature does not verify: $(tail -n 1 "$work/verify.err")"
"$cosign" verify-attestation --key "$pub" --insecure-ignore-tlog=true --type cyclonedx --local-image "$work/signed" \
  >"$work/attestation.json" 2>"$work/attestation.err" || die "the SBOM attestation does not verify: $(tail -n 1 "$work/attestation.err")"
python3 - "$work/verify.json" "$work/attestation.json" "$digest" "$sbom" <<'EOF' || die "the signature or attestation is not for this image and SBOM"
import base64, json, sys
verify, attestation, digest, sbom = sys.argv[1:]
signed = [json.loads(l) for l in open(verify) if l.strip()]
signed = [s for item in signed for s in (item if isinstance(item, list) else [item])]
got = {s["critical"]["image"]["docker-manifest-digest"] for s in signed}
assert got == {digest}, f"signed: {got}, want {digest}"
want = json.load(open(sbom))
statements = [json.loads(base64.b64decode(json.loads(l)["payload"])) for l in open(attestation) if l.strip()]
assert statements, "no attestation"
for st in statements:
    assert st["predicateType"] == "https://cyclonedx.org/bom", st["predicateType"]
    assert [s["digest"]["sha256"] for s in st["subject"]] == [digest.removeprefix("sha256:")], st["subject"]
    assert st["predicate"] == want, "the attested SBOM is not the release's .cdx.json"
EOF
log "image $digest: signature and CycloneDX attestation verified (the attested SBOM is the .cdx.json)"

# 3. The SBOM and the binary's embedded dependency list name the same crates.
objcopy --dump-section .dep-v0="$work/dep-v0" "$bin" "$work/bin.copy" 2>"$work/objcopy.err" \
  || die "$bin has no .dep-v0 section (not built with cargo auditable): $(cat "$work/objcopy.err")"
python3 - "$work/dep-v0" "$sbom" <<'EOF' || die "the SBOM and the binary's dependency list disagree"
import json, sys, zlib
embedded = json.loads(zlib.decompress(open(sys.argv[1], "rb").read()))
bom = json.load(open(sys.argv[2]))
root = bom["metadata"]["component"]
# All of them: cargo auditable's runtime/build line differs from the SBOM's required/excluded one
# (it counts syn, quote and what else proc-macros pull in as runtime).
in_bin = {(p["name"], p["version"]) for p in embedded["packages"]} - {(root["name"], root["version"])}
in_bom = {(c["name"], c["version"]) for c in bom["components"]}
linked = sum(c.get("scope") == "required" for c in bom["components"])
unlicensed = [c["name"] for c in bom["components"] + [root] if not c.get("licenses")]
assert not unlicensed, f"components without a license: {unlicensed}"
assert in_bin == in_bom, f"only in the binary: {sorted(in_bin - in_bom)}; only in the SBOM: {sorted(in_bom - in_bin)}"
print(f"release-verify.sh: SBOM: {len(in_bom)} crates ({linked} linked), each with a license: the ones the binary embeds", file=sys.stderr)
EOF

# 4. The krew archive and manifest, the chart.
krew="$dir/kubectl-isg-$version-linux-amd64.tar.gz"
want=$(sha256sum "$krew" | cut -d' ' -f1)
grep -q "sha256: \"$want\"" "$dir/isg.yaml" || die "isg.yaml does not name the archive's sha256 $want"
tar -xzf "$krew" -C "$work" kubectl-isg
cmp -s "$work/kubectl-isg" "$bin" || die "the krew archive's kubectl-isg is not the release binary"
chart_version=$(tar -xzOf "$dir/ingress-status-guard-$version.tgz" ingress-status-guard/Chart.yaml | awk '/^version:/ { print $2 }')
[[ "$chart_version" == "$version" ]] || die "the chart archive holds version $chart_version, not $version"
log "krew archive (sha256 $want, as isg.yaml says) and chart $chart_version checked"

# 5. Reproducibility.
head -n 1 "$dir/REPRODUCIBILITY" | grep -q '^reproducible:' || die "$(cat "$dir/REPRODUCIBILITY")"
log "$(head -n 1 "$dir/REPRODUCIBILITY")"
log "release $version in $dir verified"
