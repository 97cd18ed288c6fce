#!/usr/bin/env bash
# Verifies a release directory as scripts/release.sh writes it (the files of a release page),
# the way an operator would before installing. It trusts nothing the directory holds: the key
# (or, for a keyless release, the signing identity and its issuer) and the source revision are
# arguments you give, got from somewhere other than the download (docs/release.md says where).
#
#   scripts/release-verify.sh --key FILE --revision COMMIT [options] DIR
#   scripts/release-verify.sh --certificate-identity-regexp RE --certificate-oidc-issuer URL \
#       --revision COMMIT [options] DIR
#
#   --key FILE                      the release's cosign public key (a key-signed release)
#   --certificate-identity[-regexp] X, --certificate-oidc-issuer URL
#                                   the signer of a keyless release (then SHA256SUMS.sigstore.json
#                                   replaces SHA256SUMS.sig)
#   --revision COMMIT               the git commit the release must be built from (the tag's commit)
#   --source DIR                    a git clone holding COMMIT (default: this script's checkout):
#                                   its Cargo.lock at COMMIT gives the crates' checksums
#   --platforms LIST                the platforms the image must hold (default linux/amd64,linux/arm64)
#   --tlog                          require transparency-log entries (a keyless release; key-signed
#                                   CI releases are signed without one)
#
# The checks, in order; each prints what it verified, and a failure names its check:
#   1. sums        SHA256SUMS's signature, every file against it, no file outside it
#   2. image       the image index's signature, for the digest in .image-digest (loaded with its
#                  signatures into a loopback registry: `cosign load`)
#   3. platforms   the index holds an image for every platform asked for
#   4. binaries    each platform's binary, extracted from its image, is the released binary (its
#                  sha256 in SHA256SUMS)
#   5. provenance  the SLSA provenance attestation: for this image, from COMMIT, Cargo.lock's
#                  sha256 at COMMIT, each binary's sha256; the attested statement is the
#                  .provenance.json
#   6. sbom        the CycloneDX attestation is the .cdx.json; its crates (name, version and
#                  checksum) are the ones each binary embeds (cargo auditable's .dep-v0, name and
#                  version), with the checksums Cargo.lock gives at COMMIT; each has a license
#   7. chart       the chart's OCI artifact: its signature, and `helm pull` of it gives the .tgz
#   8. krew        isg.yaml names each platform's archive and sha256; each archive holds that
#                  platform's binary
#   9. repro       REPRODUCIBILITY says each platform's two builds gave the same bytes
#
#   scripts/release-verify.sh --compare A B   compare two builds of the binary: prints whether
#                                             they are the same bytes and, if not, which sections
#                                             and strings differ (the input that differs)
#
# Tools: cosign and crane (ISG_RELEASE_TOOLS=DIR, else scripts/release-tools/build.sh builds them
# from the Go module proxy, cached), helm (ISG_HELM=PATH, else tests/helm/build.sh 3), python3
# (3.11 or later), git.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'release-verify.sh: %s\n' "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }
# fail CHECK MESSAGE
fail() { log "FAILED check $1: $2"; exit 1; }
ok() { log "ok $1: $2"; }

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
  python3 - "$a" "$b" <<'PY'
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
PY
  exit 1
fi

usage="usage: release-verify.sh (--key FILE | --certificate-identity[-regexp] X --certificate-oidc-issuer URL) --revision COMMIT [--source DIR] [--platforms LIST] [--tlog] DIR"
identity=() key="" revision="" source_dir=. platforms=linux/amd64,linux/arm64 tlog=false dir=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --key) key=$2; shift 2 ;;
    --certificate-identity|--certificate-identity-regexp|--certificate-oidc-issuer) identity+=("$1" "$2"); shift 2 ;;
    --revision) revision=$2; shift 2 ;;
    --source) source_dir=$2; shift 2 ;;
    --platforms) platforms=$2; shift 2 ;;
    --tlog) tlog=true; shift ;;
    -*) die "unknown option $1; $usage" ;;
    *) [[ -z "$dir" ]] || die "$usage"; dir=$1; shift ;;
  esac
done
[[ -n "$dir" && -n "$revision" ]] || die "$usage"
[[ -n "$key" || ${#identity[@]} -gt 0 ]] || die "give the release's key (--key) or signer (--certificate-identity-regexp, --certificate-oidc-issuer): a key read from the release itself proves nothing; $usage"
[[ -z "$key" || ${#identity[@]} -eq 0 ]] || die "--key or the certificate identity, not both"
[[ -z "$key" || -f "$key" ]] || die "--key $key: no such file"
[[ -f "$dir/SHA256SUMS" ]] || fail sums "$dir has no SHA256SUMS"
IFS=, read -r -a want_platforms <<<"$platforms"

if [[ -n "${ISG_RELEASE_TOOLS:-}" ]]; then tools=$ISG_RELEASE_TOOLS; else tools=$(scripts/release-tools/build.sh | tail -n 1); fi
cosign="$tools/cosign"
crane="$tools/crane"
helm=${ISG_HELM:-$(tests/helm/build.sh 3 | tail -n 1)}
work=$(mktemp -d)
registry_pid=""
# shellcheck source=scripts/release-lib.sh
. scripts/release-lib.sh
trap 'stop_registry; rm -rf "$work"' EXIT

if [[ -n "$key" ]]; then
  trust=(--key "$key")
  signer="the key $key (sha256 $(sha256sum "$key" | cut -c1-16)...)"
else
  trust=("${identity[@]}")
  signer="the identity ${identity[*]}"
fi
$tlog || trust+=(--insecure-ignore-tlog=true)

# 1. Checksums, signed.
if [[ -f "$dir/SHA256SUMS.sigstore.json" ]]; then
  blob_sig=(--bundle "$dir/SHA256SUMS.sigstore.json")
else
  blob_sig=(--signature "$dir/SHA256SUMS.sig")
fi
"$cosign" verify-blob "${trust[@]}" "${blob_sig[@]}" "$dir/SHA256SUMS" >"$work/blob.log" 2>&1 \
  || fail sums "the signature of SHA256SUMS does not verify with $signer: $(tail -n 1 "$work/blob.log")"
(cd "$dir" && sha256sum --quiet --strict -c SHA256SUMS) >&2 || fail sums "a file does not match SHA256SUMS"
for f in "$dir"/*; do
  name=${f##*/}
  [[ "$name" == SHA256SUMS* ]] && continue
  awk -v n="$name" '$2 == n { found = 1 } END { exit !found }' "$dir/SHA256SUMS" || fail sums "$name is not in SHA256SUMS"
done
ok sums "SHA256SUMS signed by $signer; all $(wc -l <"$dir/SHA256SUMS") files match it, none outside it"
sum_of() { awk -v n="$1" '$2 == n { print $1 }' "$dir/SHA256SUMS"; }

version=$(ls "$dir" | sed -n 's/^ingress-status-guard-\(.*\)\.image-digest$/\1/p')
[[ -n "$version" ]] || fail sums "$dir has no ingress-status-guard-<version>.image-digest"
digest=$(cat "$dir/ingress-status-guard-$version.image-digest")
sbom="$dir/ingress-status-guard-$version.cdx.json"
provenance="$dir/ingress-status-guard-$version.provenance.json"

# 2. The image index, signed; loaded with its signatures and attestations into a loopback
#    registry, as into yours.
start_registry
repo="$registry/ingress-status-guard"
signed=$(untar "$dir/ingress-status-guard-$version.signed-oci.tar")
"$cosign" load --allow-http-registry --dir "$signed" "$repo:$version" >"$work/load.log" 2>&1 \
  || fail image "cosign load of the signed image: $(tail -n 1 "$work/load.log")"
loaded=$("$crane" digest --insecure "$repo:$version") || fail image "the registry has no $repo:$version"
[[ "$loaded" == "$digest" ]] || fail image "the signed layout holds $loaded, .image-digest says $digest"
plain=$(untar "$dir/ingress-status-guard-$version.oci.tar")
plain_digest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$plain/index.json")
[[ "$plain_digest" == "$digest" ]] || fail image "the .oci.tar holds $plain_digest, .image-digest says $digest"
ref="$repo@$digest"
reg_flags=(--allow-http-registry)
"$cosign" verify "${trust[@]}" "${reg_flags[@]}" "$ref" >"$work/verify.json" 2>"$work/verify.err" \
  || fail image "the image's signature does not verify with $signer: $(tail -n 1 "$work/verify.err")"
python3 - "$work/verify.json" "$digest" <<'PY' || fail image "the signature is not for $digest"
import json, sys
signed = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
signed = [s for item in signed for s in (item if isinstance(item, list) else [item])]
got = {s["critical"]["image"]["docker-manifest-digest"] for s in signed}
assert got == {sys.argv[2]}, f"signed: {got}"
PY
ok image "index $digest signed by $signer"

# 3. The platforms in the index.
"$crane" manifest --insecure "$ref" >"$work/index.json" || fail platforms "cannot read the index $ref"
have=$(python3 -c 'import json,sys
m = json.load(open(sys.argv[1]))
assert m.get("mediaType", "").endswith("image.index.v1+json"), "not an image index: " + str(m.get("mediaType"))
print(" ".join(sorted(d["platform"]["os"] + "/" + d["platform"]["architecture"] for d in m["manifests"])))' "$work/index.json") \
  || fail platforms "$ref is not an image index"
for p in "${want_platforms[@]}"; do
  [[ " $have " == *" $p "* ]] || fail platforms "the image index has no $p image (it has: $have)"
done
ok platforms "the index holds $have"

# 4. Each platform's binary, out of its image, is the released binary.
for p in "${want_platforms[@]}"; do
  name="ingress-status-guard-$version-${p/\//-}"
  want=$(sum_of "$name")
  [[ -n "$want" ]] || fail binaries "SHA256SUMS names no $name"
  got=$("$crane" export --insecure --platform "$p" "$ref" - | tar -xOf - usr/local/bin/ingress-status-guard | sha256sum | cut -d' ' -f1)
  [[ "$got" == "$want" ]] || fail binaries "the $p image's /usr/local/bin/ingress-status-guard is $got, the released $name is $want"
  ok binaries "the $p image's binary is $name (sha256 $got)"
done

# Cargo.lock at the revision, from the source clone: the trusted crate checksums.
git -C "$source_dir" cat-file -e "$revision^{commit}" 2>/dev/null \
  || fail provenance "the source clone $source_dir has no commit $revision (fetch the release's tag, or give --source)"
full=$(git -C "$source_dir" rev-parse "$revision^{commit}")
git -C "$source_dir" show "$full:Cargo.lock" >"$work/Cargo.lock"

# 5. Provenance.
"$cosign" verify-attestation "${trust[@]}" "${reg_flags[@]}" --type slsaprovenance1 "$ref" >"$work/provenance.att" 2>"$work/provenance.err" \
  || fail provenance "the SLSA provenance attestation does not verify with $signer: $(tail -n 1 "$work/provenance.err")"
bins=()
for p in "${want_platforms[@]}"; do bins+=("$p=$(sum_of "ingress-status-guard-$version-${p/\//-}")"); done
python3 - "$work/provenance.att" "$digest" "$provenance" "$full" "$work/Cargo.lock" "${bins[@]}" <<'PY' || fail provenance "(the line above)"
import base64, hashlib, json, sys
att, digest, file, commit, lock = sys.argv[1:6]
bins = dict(b.split("=", 1) for b in sys.argv[6:])
statements = [json.loads(base64.b64decode(json.loads(l)["payload"])) for l in open(att) if l.strip()]
def no(msg):
    print(f"release-verify.sh: FAILED check provenance: {msg}", file=sys.stderr)
    sys.exit(1)
if len(statements) != 1:
    no(f"{len(statements)} provenance statements, not one")
st = statements[0]
if st["predicateType"] != "https://slsa.dev/provenance/v1":
    no(f"predicate type {st['predicateType']}")
if [s["digest"]["sha256"] for s in st["subject"]] != [digest.removeprefix("sha256:")]:
    no(f"the statement is for {st['subject']}, not the image {digest}")
pred = st["predicate"]
if pred != json.load(open(file)):
    no("the attested provenance is not the release's .provenance.json")
source = pred["buildDefinition"]["externalParameters"]["source"]["revision"]
if source != commit:
    no(f"built from revision {source}, not {commit}")
deps = {d.get("name", "source"): d["digest"] for d in pred["buildDefinition"]["resolvedDependencies"]}
if deps.get("source", {}).get("gitCommit") != commit:
    no(f"its source material is {deps.get('source')}, not {commit}")
lock_sha = hashlib.sha256(open(lock, "rb").read()).hexdigest()
if deps.get("Cargo.lock", {}).get("sha256") != lock_sha:
    no(f"its Cargo.lock is {deps.get('Cargo.lock')}, Cargo.lock at {commit[:12]} is {lock_sha}")
made = {b["annotations"]["platform"]: b["digest"]["sha256"] for b in pred["runDetails"]["byproducts"]}
for p, sha in bins.items():
    if made.get(p) != sha:
        no(f"it says the {p} binary is {made.get(p)}, the release's is {sha}")
tools = "; ".join(pred["buildDefinition"]["internalParameters"]["toolchain"])
print(f"release-verify.sh: ok provenance: image {digest[:19]}... built by {pred['runDetails']['builder']['id']} "
      f"from {commit[:12]} (Cargo.lock sha256 {lock_sha[:12]}...), binaries {', '.join(sorted(bins))} as released; "
      f"command: {pred['buildDefinition']['externalParameters']['command']}; toolchain: {tools}", file=sys.stderr)
PY

# 6. The SBOM: attested, and the crates each binary embeds, with Cargo.lock's checksums.
"$cosign" verify-attestation "${trust[@]}" "${reg_flags[@]}" --type cyclonedx "$ref" >"$work/sbom.att" 2>"$work/sbom.err" \
  || fail sbom "the CycloneDX attestation does not verify with $signer: $(tail -n 1 "$work/sbom.err")"
deps=()
for p in "${want_platforms[@]}"; do deps+=("$p=$dir/ingress-status-guard-$version-${p/\//-}"); done
python3 - "$work/sbom.att" "$digest" "$sbom" "$work/Cargo.lock" "${deps[@]}" <<'PY' || fail sbom "(the line above)"
import base64, json, struct, sys, tomllib, zlib
att, digest, sbom_file, lock_file = sys.argv[1:5]
def no(msg):
    print(f"release-verify.sh: FAILED check sbom: {msg}", file=sys.stderr)
    sys.exit(1)
def dep_v0(path):
    """cargo auditable's .dep-v0 section of a 64-bit little-endian ELF file (any machine), read
    here rather than with the host's objcopy, which knows only the host's architecture."""
    data = open(path, "rb").read()
    if data[:6] != b"\x7fELF\x02\x01":
        no(f"{path} is not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_off = sections[shstrndx][4]
    for name, _type, _flags, _addr, off, size in sections:
        if data[names_off + name:data.index(b"\0", names_off + name)] == b".dep-v0":
            return data[off:off + size]
    no(f"{path} has no .dep-v0 section (not built with cargo auditable)")
bom = json.load(open(sbom_file))
statements = [json.loads(base64.b64decode(json.loads(l)["payload"])) for l in open(att) if l.strip()]
if not statements:
    no("no CycloneDX attestation")
for st in statements:
    if [s["digest"]["sha256"] for s in st["subject"]] != [digest.removeprefix("sha256:")]:
        no(f"the attestation is for {st['subject']}, not the image {digest}")
    if st["predicate"] != bom:
        no("the attested SBOM is not the release's .cdx.json")
lock = {(p["name"], p["version"]): p.get("checksum") for p in tomllib.load(open(lock_file, "rb"))["package"]}
root = bom["metadata"]["component"]
in_bom = {}
for c in bom["components"]:
    hashes = [h["content"] for h in c.get("hashes", []) if h.get("alg") == "SHA-256"]
    in_bom[(c["name"], c["version"])] = hashes[0] if hashes else None
unlicensed = [c["name"] for c in bom["components"] + [root] if not c.get("licenses")]
if unlicensed:
    no(f"components without a license: {unlicensed}")
# One SBOM for every platform: each binary's crates are in it, and it holds no crate that no
# binary embeds (the x86-only ones, e.g. safe_arch, are in the amd64 binary alone).
every = set()
for item in sys.argv[5:]:
    platform, path = item.split("=", 1)
    embedded = json.loads(zlib.decompress(dep_v0(path)))
    in_bin = {(p["name"], p["version"]) for p in embedded["packages"]} - {(root["name"], root["version"])}
    if not in_bin <= set(in_bom):
        no(f"{platform}: the binary embeds crates the SBOM lacks: {sorted(in_bin - set(in_bom))}")
    every |= in_bin
    wrong = [f"{n} {v}: SBOM {in_bom[(n, v)]}, Cargo.lock {lock.get((n, v))}" for n, v in sorted(in_bin) if in_bom[(n, v)] != lock.get((n, v))]
    if wrong:
        no(f"{platform}: checksums differ from Cargo.lock at the revision: {'; '.join(wrong[:5])}")
if every != set(in_bom):
    no(f"the SBOM names crates no binary embeds: {sorted(set(in_bom) - every)}")
linked = sum(c.get("scope") == "required" for c in bom["components"])
print(f"release-verify.sh: ok sbom: attested for the image; {len(in_bom)} crates ({linked} linked), each with a license; "
      f"name, version and checksum (Cargo.lock at the revision) match what each binary embeds "
      f"({', '.join(i.split('=')[0] for i in sys.argv[5:])})", file=sys.stderr)
PY

# 7. The chart: its OCI artifact signed, and helm pull of it gives the packaged chart.
chart="$dir/ingress-status-guard-$version.tgz"
chart_digest=$(cat "$dir/ingress-status-guard-$version.chart-digest")
chart_signed=$(untar "$dir/ingress-status-guard-$version.chart.signed-oci.tar")
"$cosign" load --allow-http-registry --dir "$chart_signed" "$registry/charts/ingress-status-guard:$version" >"$work/load.log" 2>&1 \
  || fail chart "cosign load of the chart: $(tail -n 1 "$work/load.log")"
chart_ref="$registry/charts/ingress-status-guard@$chart_digest"
"$cosign" verify "${trust[@]}" "${reg_flags[@]}" "$chart_ref" >"$work/chart-verify.json" 2>"$work/chart-verify.err" \
  || fail chart "the chart's signature does not verify with $signer: $(tail -n 1 "$work/chart-verify.err")"
mkdir -p "$work/pulled"
"$helm" pull "oci://$registry/charts/ingress-status-guard" --version "$version" --plain-http -d "$work/pulled" >"$work/pull.log" 2>&1 \
  || fail chart "helm pull: $(tail -n 1 "$work/pull.log")"
grep -q "Digest: $chart_digest" "$work/pull.log" || fail chart "helm pull got $(sed -n 's/^Digest: //p' "$work/pull.log"), not $chart_digest"
cmp -s "$work/pulled/ingress-status-guard-$version.tgz" "$chart" || fail chart "helm pull of $chart_digest is not the release's $(basename "$chart")"
chart_version=$(tar -xzOf "$chart" ingress-status-guard/Chart.yaml | awk '/^version:/ { print $2 }')
[[ "$chart_version" == "$version" ]] || fail chart "the chart archive holds version $chart_version, not $version"
ok chart "OCI artifact $chart_digest signed by $signer; helm pull of it is $(basename "$chart") (chart $chart_version)"

# 8. The krew archives and manifest.
for p in "${want_platforms[@]}"; do
  archive="kubectl-isg-$version-${p/\//-}.tar.gz"
  [[ -f "$dir/$archive" ]] || fail krew "no $archive"
  sha=$(sha256sum "$dir/$archive" | cut -d' ' -f1)
  python3 - "$dir/isg.yaml" "$p" "$archive" "$sha" <<'PY' || fail krew "isg.yaml does not name $archive with sha256 $sha for $p"
import re, sys
text, platform, archive, sha = open(sys.argv[1]).read(), *sys.argv[2:]
os_, arch = platform.split("/")
entries = re.split(r"\n  - selector:", text)[1:]
assert any(f"os: {os_}\n" in e and f"arch: {arch}\n" in e and f"/{archive}\"" in e and f"sha256: \"{sha}\"" in e for e in entries)
PY
  rm -rf "$work/krew" && mkdir "$work/krew"
  tar -xzf "$dir/$archive" -C "$work/krew" kubectl-isg
  cmp -s "$work/krew/kubectl-isg" "$dir/ingress-status-guard-$version-${p/\//-}" || fail krew "$archive's kubectl-isg is not the released $p binary"
done
ok krew "isg.yaml names each platform's archive and sha256 (${want_platforms[*]}); each holds its platform's binary"

# 9. Reproducibility, per platform.
for p in "${want_platforms[@]}"; do
  grep -q "^$p reproducible:" "$dir/REPRODUCIBILITY" || fail repro "$p: $(grep -A3 "^$p " "$dir/REPRODUCIBILITY" || echo 'not in REPRODUCIBILITY')"
  log "ok repro: $(grep "^$p reproducible:" "$dir/REPRODUCIBILITY")"
done
log "release $version in $dir verified"
