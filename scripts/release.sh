#!/usr/bin/env bash
# Builds a release an operator can verify, into target/release-artifacts/ (not tracked):
#
#   ingress-status-guard-<v>-linux-amd64        the static release binary, its dependency list
#                                               embedded by cargo auditable (.dep-v0)
#   ingress-status-guard-<v>.cdx.json           CycloneDX 1.5 SBOM from Cargo.lock (scripts/sbom.py):
#                                               every linked crate, its license, purl and checksum
#   ingress-status-guard-<v>.oci.tar            the image (scripts/image.sh), as before
#   ingress-status-guard-<v>.image-digest       its manifest digest (sha256:...), what to pin
#   ingress-status-guard-<v>.signed-oci.tar     the same image with its cosign signature and the
#                                               SBOM attestation (`cosign save` layout, tarred):
#                                               `cosign load` puts all three in a registry
#   ingress-status-guard-<v>.tgz                the Helm chart (helm package)
#   kubectl-isg-<v>-linux-amd64.tar.gz, isg.yaml  the krew archive and manifest (plugin-archive.sh)
#   cosign.pub                                  the public key the signatures verify with
#   REPRODUCIBILITY                             the reproducibility check's result
#   SHA256SUMS, SHA256SUMS.sig                  checksums of every file above, and their signature
#
# Then scripts/release-verify.sh checks the directory as an operator would. Usage:
#
#   scripts/release.sh                 all of it
#   scripts/release.sh --repro-binary  only the second, independent build of the binary (from a
#                                      copy of the tracked files at another path, into another
#                                      target dir) that the reproducibility check compares with
#                                      the first; .ci/run builds it ahead, in the background
#
# Signing here uses a key pair made for the run (no registry and no Sigstore service is reachable
# from CI): the image is pushed to an in-memory registry on loopback (`crane registry serve`),
# signed and attested there with `cosign sign` / `cosign attest --type cyclonedx`, verified, and
# saved with its signature and attestation. A real release signs keyless in its release pipeline
# instead (docs/release.md). ISG_RELEASE_KEY=PREFIX signs with PREFIX.key / PREFIX.pub
# (COSIGN_PASSWORD as cosign reads it) instead of a new pair.
#
# Needs what scripts/image.sh needs (cargo, buildah), cargo-auditable (installed with cargo if
# missing), go (cosign, crane and helm build from the Go module proxy, cached), python3.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'release.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

mode=all
case "${1:-}" in
  "") ;;
  --repro-binary) mode=repro ;;
  *) die "unknown argument ${1}; usage: scripts/release.sh [--repro-binary]" ;;
esac

auditable_version=0.7.7
version=$(awk -F'"' '/^version = / { print $2; exit }' Cargo.toml)
revision=${ISG_GIT_REVISION:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
export ISG_GIT_REVISION=$revision
# The commit's time: the SBOM's timestamp, the archives' mtimes (image.sh takes the same). Not
# exported: the builds see the environment CI's first build saw.
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
target=$(rustc -vV | awk '/^host:/ { print $2 }')
[[ "$target" == x86_64-unknown-linux-gnu ]] || die "the release names linux/amd64; this host is $target"
out=target/release-artifacts
bin="target/$target/release/ingress-status-guard"

if ! command -v cargo-auditable >/dev/null; then
  log "installing cargo-auditable $auditable_version"
  cargo install --locked "cargo-auditable@$auditable_version" >&2
fi

# The second build: the tracked files copied to a path outside this tree (a fixed one per tree,
# so a warm run rebuilds nothing; tar keeps the files' mtimes, which cargo's freshness reads),
# built into a target dir of its own with the same command, flags and revision as the first.
repro_root="${TMPDIR:-/tmp}/isg-release-repro-$(printf '%s' "$PWD" | sha256sum | cut -c1-12)"
repro_target="$PWD/target/release-repro"
repro_bin="$repro_target/$target/release/ingress-status-guard"
repro_build() {
  log "second build of the binary: sources in $repro_root/src, target dir $repro_target"
  rm -rf "$repro_root/src"
  mkdir -p "$repro_root/src"
  git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$repro_root/src"
  (cd "$repro_root/src" && RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    CARGO_TARGET_DIR="$repro_target" cargo auditable build --release --locked --bin ingress-status-guard --target "$target")
}
if [[ $mode == repro ]]; then
  repro_build
  exit 0
fi

for tool in buildah python3 go flock; do
  command -v "$tool" >/dev/null || die "$tool is required"
done
tools=$(scripts/release-tools/build.sh | tail -n 1)
cosign="$tools/cosign"
crane="$tools/crane"
helm=$(tests/helm/build.sh 3 | tail -n 1)

rm -rf "$out"
mkdir -p "$out"
work=$(mktemp -d)
registry_pid=""
cleanup() {
  if [[ -n "$registry_pid" ]]; then
    kill "$registry_pid" 2>/dev/null || true
    wait "$registry_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# 1. The binary and the image (scripts/image.sh builds the binary with cargo auditable).
ISG_AUDITABLE=1 scripts/image.sh
rel_bin="$out/ingress-status-guard-$version-linux-amd64"
install -m 0755 "$bin" "$rel_bin"
# The image's digest is the same for the same binary (image.sh commits at the commit's time);
# repacked with fixed owner, order and time, so is the archive's sha256.
image_tar="$out/ingress-status-guard-$version.oci.tar"
mkdir -p "$work/layout"
tar -xf "target/image/ingress-status-guard-$version.oci.tar" -C "$work/layout"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -C "$work/layout" -cf "$image_tar" .

# 2. The SBOM, from Cargo.lock, for the crates the binary links on this target.
sbom="$out/ingress-status-guard-$version.cdx.json"
cargo metadata --locked --offline --format-version 1 --filter-platform "$target" | SOURCE_DATE_EPOCH=$epoch scripts/sbom.py Cargo.lock >"$sbom"

# 3. The chart and the krew archive.
# helm package stamps every entry with the current time; repacked with the commit's time, fixed
# owner and order (what helm reads is the same), the same chart gives the same bytes.
"$helm" package charts/ingress-status-guard --destination "$work/chart" >&2
mkdir -p "$work/chart/x"
tar -xzf "$work/chart/ingress-status-guard-$version.tgz" -C "$work/chart/x"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -C "$work/chart/x" -cf - ingress-status-guard \
  | gzip -n -9 >"$out/ingress-status-guard-$version.tgz"
"$helm" show chart "$out/ingress-status-guard-$version.tgz" >/dev/null
ISG_PLUGIN_BINARY="$rel_bin" ISG_PLUGIN_OUT="$out" scripts/plugin-archive.sh >/dev/null

# 4. Sign the image and attest its SBOM in a loopback registry, then save all three.
if [[ -n "${ISG_RELEASE_KEY:-}" ]]; then
  key="$ISG_RELEASE_KEY.key"
  cp "$ISG_RELEASE_KEY.pub" "$out/cosign.pub"
else
  export COSIGN_PASSWORD=""
  (cd "$work" && "$cosign" generate-key-pair --output-key-prefix run >&2)
  key="$work/run.key"
  cp "$work/run.pub" "$out/cosign.pub"
fi
: >"$work/registry.log"   # before the server's own redirection, which runs after the fork
"$crane" registry serve --address 127.0.0.1:0 2>>"$work/registry.log" &
registry_pid=$!
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$work/registry.log")
  [[ -n "$port" ]] && break
  kill -0 "$registry_pid" 2>/dev/null || die "crane registry serve stopped: $(cat "$work/registry.log")"
  sleep 0.1
done
[[ -n "$port" ]] || die "crane registry serve did not say its port: $(cat "$work/registry.log")"
repo="127.0.0.1:$port/ingress-status-guard"
pushed=$("$crane" push "$work/layout" "$repo:$version" 2>"$work/push.log") || die "crane push failed: $(cat "$work/push.log")"
digest=${pushed##*@}
# The digest in the registry is the archive's own manifest digest, not a re-encoding.
layout_digest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$work/layout/index.json")
[[ "$digest" == "$layout_digest" ]] || die "the registry holds $digest, the archive $layout_digest"
printf '%s\n' "$digest" >"$out/ingress-status-guard-$version.image-digest"
ref="$repo@$digest"
sign_flags=(--key "$key" --tlog-upload=false --yes --allow-http-registry)
"$cosign" sign "${sign_flags[@]}" "$ref" >&2
"$cosign" attest "${sign_flags[@]}" --type cyclonedx --predicate "$sbom" "$ref" >&2
# Verified in the registry here; release-verify.sh verifies the saved copy, as an operator would.
verify_flags=(--key "$out/cosign.pub" --insecure-ignore-tlog=true --allow-http-registry)
"$cosign" verify "${verify_flags[@]}" "$ref" >"$work/verify.json"
"$cosign" verify-attestation "${verify_flags[@]}" --type cyclonedx "$ref" >"$work/attestation.json"
"$cosign" save --dir "$work/signed" "$ref" >&2
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -C "$work/signed" \
  -cf "$out/ingress-status-guard-$version.signed-oci.tar" .

# 5. Reproducibility: a second build, elsewhere, must give the same bytes.
repro_build >&2
{
  scripts/release-verify.sh --compare "$rel_bin" "$repro_bin" || true
  printf 'built with: %s, %s, cargo-auditable %s, RUSTFLAGS=-C target-feature=+crt-static, ISG_GIT_REVISION=%s\n' \
    "$(rustc -V)" "$(cargo -V)" "$(cargo install --list | awk '$1 == "cargo-auditable" { print $2 }' | tr -d v:)" "$revision"
} >"$out/REPRODUCIBILITY"

# 6. Checksums over everything, and their signature.
(cd "$out" && find . -maxdepth 1 -type f ! -name 'SHA256SUMS*' -printf '%f\n' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
"$cosign" sign-blob --key "$key" --tlog-upload=false --yes --output-signature "$out/SHA256SUMS.sig" "$out/SHA256SUMS" >&2

log "release $version ($revision) in $out:"
(cd "$out" && ls -l --time-style=+ | awk 'NR > 1 { printf "  %10d  %s\n", $5, $NF }') >&2
log "$(head -n 1 "$out/REPRODUCIBILITY")"

scripts/release-verify.sh "$out"
