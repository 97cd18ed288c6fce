#!/usr/bin/env bash
# Builds a release an operator can verify, into target/release-artifacts/ (not tracked), for
# linux/amd64 and linux/arm64 (cross-compiled with Debian's aarch64 toolchain):
#
#   ingress-status-guard-<v>-linux-<arch>       the static release binaries, their dependency
#                                               list embedded by cargo auditable (.dep-v0)
#   ingress-status-guard-<v>.cdx.json           CycloneDX 1.5 SBOM from Cargo.lock (scripts/sbom.py):
#                                               every linked crate, its license, purl and checksum
#   ingress-status-guard-<v>.provenance.json    the SLSA provenance predicate (scripts/provenance.py):
#                                               builder, source revision, build command, toolchain
#                                               versions, Cargo.lock's sha256, each binary's sha256
#   ingress-status-guard-<v>.oci.tar            the multi-platform image: an OCI layout whose one
#                                               image index names the amd64 and arm64 images
#                                               (scripts/image.sh, scripts/image-index.py)
#   ingress-status-guard-<v>.image-digest       the image index's digest (sha256:...), what to pin
#   ingress-status-guard-<v>.signed-oci.tar     the same index with its cosign signature and two
#                                               attestations, the SBOM and the provenance
#                                               (`cosign save` layout, tarred)
#   ingress-status-guard-<v>.tgz                the Helm chart (helm package)
#   ingress-status-guard-<v>.chart-digest       the chart's digest as an OCI artifact
#   ingress-status-guard-<v>.chart.signed-oci.tar the chart as an OCI artifact (helm push) with its
#                                               cosign signature (`cosign save` layout, tarred)
#   kubectl-isg-<v>-linux-<arch>.tar.gz, isg.yaml the krew archives and the manifest naming them
#   REPRODUCIBILITY                             the reproducibility check's result, per platform
#   SHA256SUMS, SHA256SUMS.sig                  checksums of every file above, and their signature
#
# The public key is not among them: it goes to target/release-key/cosign.pub, apart from the
# release, and scripts/release-verify.sh takes it as an argument (an operator gets a real
# release's key, or its keyless identity, from somewhere other than the download). Then
# release-verify.sh checks the directory as an operator would, and
# scripts/release-verify-negative.sh checks that it fails, naming the check, on tampered copies.
#
#   scripts/release.sh                 all of it
#   scripts/release.sh --repro-binary  only the second, independent builds of the binaries (from a
#                                      copy of the tracked files in a new mktemp -d directory,
#                                      into another target dir) that the reproducibility check
#                                      compares with the first; .ci/run builds them ahead
#
# Signing here uses a key pair made for the run, encrypted with a random password, in a mktemp -d
# directory removed on exit (no registry and no Sigstore service is reachable from CI): the image
# index and the chart are pushed to an in-memory registry on loopback (`crane registry serve`,
# `helm push`), signed, attested and saved with their signatures. A real release signs keyless
# in its release pipeline instead (docs/release.md). ISG_RELEASE_KEY=PREFIX signs with
# PREFIX.key / PREFIX.pub (COSIGN_PASSWORD as cosign reads it) instead of a new pair.
#
# Needs what scripts/image.sh needs (cargo, buildah), cargo-auditable (installed with cargo if
# missing), what scripts/cross-tools.sh installs (the aarch64 target, linker and qemu), go
# (cosign, crane and helm build from the Go module proxy, cached), python3.
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
commit=$(git rev-parse --verify -q "$revision^{commit}" 2>/dev/null || echo "$revision")
# The commit's time: the SBOM's timestamp, the archives' mtimes (image.sh takes the same). Not
# exported: the builds see the environment CI's first build saw.
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
host=$(rustc -vV | awk '/^host:/ { print $2 }')
[[ "$host" == x86_64-unknown-linux-gnu ]] || die "the release builds on linux/amd64; this host is $host"
targets=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu)
declare -A arch_of=([x86_64-unknown-linux-gnu]=amd64 [aarch64-unknown-linux-gnu]=arm64)
out=target/release-artifacts
build_cmd='RUSTFLAGS="-C target-feature=+crt-static" ISG_GIT_REVISION=<revision> cargo auditable build --release --locked --bin ingress-status-guard --target <target>'

if ! command -v cargo-auditable >/dev/null; then
  log "installing cargo-auditable $auditable_version"
  cargo install --locked "cargo-auditable@$auditable_version" >&2
fi
scripts/cross-tools.sh

# The cross linker and C compiler for a target other than the host's (Debian's cross toolchain).
cross_env() {
  local t=$1 e=${1//-/_}
  [[ "$t" == "$host" ]] && return 0
  export "CARGO_TARGET_${e^^}_LINKER=${t%%-*}-linux-gnu-gcc" "CC_$e=${t%%-*}-linux-gnu-gcc" "AR_$e=${t%%-*}-linux-gnu-ar"
}

# The second builds: the tracked files copied to a new private directory (mktemp -d: no path
# another user of the machine can predict or plant files in), built into a target dir of their
# own with the same command, flags and revision as the first. A new path every run: a path
# that leaks into the binary shows as a difference every time. Each second binary is kept under
# target/release-repro/built/ with a stamp of its inputs (what cargo reads to build the binary:
# the manifest, the lock file, build.rs and src/; the revision, the flags, the toolchain):
# .ci/run builds them ahead (--repro-binary) and the release then reuses them instead of
# building the same inputs a third time.
repro_target="$PWD/target/release-repro"
repro_stamp() {
  {
    git ls-files -z --cached --others --exclude-standard -- Cargo.toml Cargo.lock build.rs src \
      | tar --null -T - --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - | sha256sum
    printf '%s\n' "$1" "$revision" "${RUSTFLAGS:-}" "$(rustc -vV)" "$(cargo install --list | grep '^cargo-auditable')"
    [[ "$1" == "$host" ]] || "${1%%-*}-linux-gnu-gcc" --version | head -n 1
  } | sha256sum | cut -d' ' -f1
}
repro_build() {
  local t=$1 src stamp built="$repro_target/built/$1"
  stamp=$(repro_stamp "$t")
  if [[ -x "$built/ingress-status-guard" && "$(cat "$built/stamp" 2>/dev/null)" == "$stamp" ]]; then
    log "second build for $t: built already from these inputs ($built)"
    return 0
  fi
  src=$(mktemp -d)
  log "second build for $t: sources in $src, target dir $repro_target"
  git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$src"
  (cd "$src" && cross_env "$t" && RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    CARGO_TARGET_DIR="$repro_target" cargo auditable build --release --locked --bin ingress-status-guard --target "$t") \
    || { rm -rf "$src"; return 1; }
  rm -rf "$src"
  mkdir -p "$built"
  install -m 0755 "$repro_target/$t/release/ingress-status-guard" "$built/ingress-status-guard"
  printf '%s\n' "$stamp" >"$built/stamp"
}
if [[ $mode == repro ]]; then
  for t in "${targets[@]}"; do repro_build "$t"; done
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
mkdir -p "$out" target/release-key
work=$(mktemp -d)
keys=$(mktemp -d)
registry_pid=""
# shellcheck source=scripts/release-lib.sh
. scripts/release-lib.sh
cleanup() {
  stop_registry
  rm -rf "$work" "$keys"
}
trap cleanup EXIT

# 1. The binaries and the images (scripts/image.sh builds each binary with cargo auditable); the
#    arm64 binary smoke-runs under qemu.
images=()
binaries=()
platform_sums=()
for t in "${targets[@]}"; do
  arch=${arch_of[$t]}
  ISG_AUDITABLE=1 ISG_TARGET=$t scripts/image.sh
  rel_bin="$out/ingress-status-guard-$version-linux-$arch"
  install -m 0755 "target/$t/release/ingress-status-guard" "$rel_bin"
  image="target/image/ingress-status-guard-$version.oci.tar"
  [[ "$t" == "$host" ]] || image="target/image/ingress-status-guard-$version-$arch.oci.tar"
  images+=("linux/$arch=$image")
  binaries+=("linux/$arch=$rel_bin")
  platform_sums+=(--platform "linux/$arch=$(sha256sum "$rel_bin" | cut -d' ' -f1)")
done
scripts/smoke-qemu.sh "$out/ingress-status-guard-$version-linux-arm64" "$revision"

# 2. The multi-platform image: one OCI layout, one image index; its digest is the same for the
#    same binaries (image.sh commits at the commit's time, the index is canonical JSON).
layout="$work/layout"
image_digest=$(scripts/image-index.py "$layout" "$version" "${images[@]}")
tar_fixed "$layout" "$out/ingress-status-guard-$version.oci.tar"

# 3. The SBOM, from Cargo.lock, for the crates the binaries link on either platform; the
#    provenance.
sbom="$out/ingress-status-guard-$version.cdx.json"
cargo metadata --locked --offline --format-version 1 "${targets[@]/#/--filter-platform=}" \
  | SOURCE_DATE_EPOCH=$epoch scripts/sbom.py Cargo.lock >"$sbom"
provenance="$out/ingress-status-guard-$version.provenance.json"
auditable_installed=$(cargo install --list | awk '$1 == "cargo-auditable" { print $2 }' | tr -d v:)
scripts/provenance.py --version "$version" --revision "$commit" --cargo-lock Cargo.lock \
  --builder "${ISG_RELEASE_BUILDER:-https://github.com/ingress-status-guard/ingress-status-guard/blob/main/scripts/release.sh}" \
  --command "$build_cmd" \
  --toolchain "$(rustc -V)" --toolchain "$(cargo -V)" --toolchain "cargo-auditable $auditable_installed" \
  --toolchain "$(aarch64-linux-gnu-gcc --version | head -n 1)" \
  --toolchain "$(dpkg-query -W -f='libc6-dev-arm64-cross ${Version}' libc6-dev-arm64-cross 2>/dev/null || echo 'libc6-dev-arm64-cross unknown')" \
  "${platform_sums[@]}" >"$provenance"

# 4. The chart and the krew archives.
# helm package stamps every entry with the current time; repacked with the commit's time, fixed
# owner and order (what helm reads is the same), the same chart gives the same bytes.
chart="$out/ingress-status-guard-$version.tgz"
# The newest CHANGELOG.md entry becomes Chart.yaml's artifacthub.io/changes (release-chart.sh).
scripts/release-chart.sh "$helm" charts/ingress-status-guard "$work/chart" >/dev/null
mkdir -p "$work/chart/x"
tar -xzf "$work/chart/ingress-status-guard-$version.tgz" -C "$work/chart/x"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -C "$work/chart/x" -cf - ingress-status-guard \
  | gzip -n -9 >"$chart"
"$helm" show chart "$chart" >/dev/null
ISG_PLUGIN_BINARIES="${binaries[*]}" ISG_PLUGIN_OUT="$out" scripts/plugin-archive.sh >/dev/null

# 5. Sign in a loopback registry: the image index (signature, SBOM and provenance attestations)
#    and the chart (helm push, then its signature); save each with its signatures.
if [[ -n "${ISG_RELEASE_KEY:-}" ]]; then
  key="$ISG_RELEASE_KEY.key"
  pub="$ISG_RELEASE_KEY.pub"
else
  COSIGN_PASSWORD=$(head -c 24 /dev/urandom | base64)
  export COSIGN_PASSWORD
  (cd "$keys" && "$cosign" generate-key-pair --output-key-prefix run >&2)
  key="$keys/run.key"
  pub="$keys/run.pub"
fi
cp "$pub" target/release-key/cosign.pub
start_registry
repo="$registry/ingress-status-guard"
digest=$(sign_image "$layout" "$repo" "$key" "$sbom" "$provenance" "$out/ingress-status-guard-$version.signed-oci.tar")
[[ "$digest" == "$image_digest" ]] || die "the registry holds $digest, the layout's index is $image_digest"
printf '%s\n' "$digest" >"$out/ingress-status-guard-$version.image-digest"
verify_flags=(--key "$pub" --insecure-ignore-tlog=true --allow-http-registry)
"$cosign" verify "${verify_flags[@]}" "$repo@$digest" >/dev/null
"$cosign" verify-attestation "${verify_flags[@]}" --type slsaprovenance1 "$repo@$digest" >/dev/null

"$helm" push "$chart" "oci://$registry/charts" --plain-http >"$work/helm-push.log" 2>&1 \
  || die "helm push failed: $(cat "$work/helm-push.log")"
chart_digest=$(sed -n 's/^Digest: //p' "$work/helm-push.log")
[[ "$chart_digest" == sha256:* ]] || die "helm push printed no digest: $(cat "$work/helm-push.log")"
chart_ref="$registry/charts/ingress-status-guard@$chart_digest"
"$cosign" sign --key "$key" --tlog-upload=false --yes --allow-http-registry "$chart_ref" 2>"$work/sign.log" \
  || die "cosign sign of the chart: $(cat "$work/sign.log")"
"$cosign" save --dir "$work/chart-signed" "$chart_ref" >&2
tar_fixed "$work/chart-signed" "$out/ingress-status-guard-$version.chart.signed-oci.tar"
printf '%s\n' "$chart_digest" >"$out/ingress-status-guard-$version.chart-digest"
stop_registry

# 6. Reproducibility: a second build of each binary, elsewhere, must give the same bytes.
{
  for t in "${targets[@]}"; do
    arch=${arch_of[$t]}
    repro_build "$t" >&2
    printf 'linux/%s ' "$arch"
    scripts/release-verify.sh --compare "$out/ingress-status-guard-$version-linux-$arch" "$repro_target/built/$t/ingress-status-guard" || true
  done
  printf 'built with: %s, %s, cargo-auditable %s, %s, RUSTFLAGS=-C target-feature=+crt-static, ISG_GIT_REVISION=%s\n' \
    "$(rustc -V)" "$(cargo -V)" "$auditable_installed" "$(aarch64-linux-gnu-gcc --version | head -n 1)" "$revision"
} >"$out/REPRODUCIBILITY"

# 7. Checksums over everything, and their signature.
(cd "$out" && find . -maxdepth 1 -type f ! -name 'SHA256SUMS*' -printf '%f\n' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
"$cosign" sign-blob --key "$key" --tlog-upload=false --yes --output-signature "$out/SHA256SUMS.sig" "$out/SHA256SUMS" 2>"$work/sign.log" \
  || die "cosign sign-blob: $(cat "$work/sign.log")"

log "release $version ($revision) in $out:"
(cd "$out" && ls -l --time-style=+ | awk 'NR > 1 { printf "  %10d  %s\n", $5, $NF }') >&2
grep '^linux/' "$out/REPRODUCIBILITY" | while read -r line; do log "$line"; done

scripts/release-verify.sh --key target/release-key/cosign.pub --revision "$commit" "$out"
if [[ "${ISG_RELEASE_NEGATIVE:-1}" != 0 ]]; then
  ISG_NEGATIVE_KEY=$key scripts/release-verify-negative.sh --key target/release-key/cosign.pub --revision "$commit" "$out"
fi
