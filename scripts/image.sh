#!/usr/bin/env bash
# Builds the ingress-status-guard container image without a registry: FROM scratch, holding only
# a statically linked release binary, as an OCI archive.
#
#   scripts/image.sh          build target/image/ingress-status-guard-<version>.oci.tar
#   scripts/image.sh --run    build, then smoke-run it: unpack the archive (umoci), run `serve`
#                             with a static source from the image's own rootfs under crun, and
#                             check /readyz and --version
#   scripts/image.sh --binary only the static release binary (step 1, cargo alone): .ci/run
#                             builds it ahead, beside the test suite, and the later build finds
#                             it fresh
#
# ISG_TARGET=aarch64-unknown-linux-gnu builds the linux/arm64 binary and image instead
# (target/image/ingress-status-guard-<version>-arm64.oci.tar), cross-compiled with Debian's
# aarch64 cross toolchain (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross; scripts/cross-tools.sh
# installs it and the rustup target); --run smoke-runs the host's image only.
#
# Load the archive elsewhere with `podman load -i FILE` or `skopeo copy oci-archive:FILE
# docker://registry.example.com/ingress-status-guard:<version>`.
#
# Needs: cargo (the gnu target, linked statically with crt-static: no musl toolchain), buildah;
# for --run, umoci and crun (Debian packages buildah, umoci, crun). The Dockerfile builds the
# same image with docker/podman where a registry is reachable.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'image.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

run=false
binary_only=false
case "${1:-}" in
  "") ;;
  --run) run=true ;;
  --binary) binary_only=true ;;
  *) die "unknown argument ${1}; usage: scripts/image.sh [--run | --binary]" ;;
esac

tools=(cargo buildah)
$binary_only && tools=(cargo)
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null || die "$tool is required (apt-get install buildah)"
done

version=$(awk -F'"' '/^version = / { print $2; exit }' Cargo.toml)
revision=${ISG_GIT_REVISION:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
host=$(rustc -vV | awk '/^host:/ { print $2 }')
[[ "$host" == *-linux-gnu ]] || die "expected a *-linux-gnu host, not $host"
target=${ISG_TARGET:-$host}
case "$target" in
  x86_64-unknown-linux-gnu) arch=amd64 ;;
  aarch64-unknown-linux-gnu) arch=arm64 ;;
  *) die "ISG_TARGET=$target: the images are built for x86_64- and aarch64-unknown-linux-gnu" ;;
esac
out=target/image
archive="$out/ingress-status-guard-$version.oci.tar"
if [[ "$target" != "$host" ]]; then
  archive="$out/ingress-status-guard-$version-$arch.oci.tar"
  $run && die "--run smoke-runs the host's image; the $arch binary smoke-runs under qemu (scripts/smoke-qemu.sh)"
  # Debian's cross linker and C compiler (ring's C and assembly), for this target only.
  env_target=${target//-/_}
  export "CARGO_TARGET_${env_target^^}_LINKER=${target%%-*}-linux-gnu-gcc"
  export "CC_$env_target=${target%%-*}-linux-gnu-gcc" "AR_$env_target=${target%%-*}-linux-gnu-ar"
  command -v "${target%%-*}-linux-gnu-gcc" >/dev/null || die "${target%%-*}-linux-gnu-gcc is required (scripts/cross-tools.sh)"
fi
mkdir -p "$out"

# 1. A static binary: glibc linked in (crt-static), so the image needs no libc. In-cluster the
#    Kubernetes client connects to KUBERNETES_SERVICE_HOST, an IP: no NSS/DNS lookups.
#    With cargo-auditable installed (scripts/release.sh and .ci/run install it), `cargo auditable
#    build` also embeds the dependency list (the .dep-v0 section: each crate's name, version and
#    source, compressed JSON) that `cargo audit bin` and SBOM scanners read; ISG_AUDITABLE=0 builds
#    without it, ISG_AUDITABLE=1 insists on it.
build=(cargo build)
case "${ISG_AUDITABLE:-auto}" in
  0) ;;
  1) command -v cargo-auditable >/dev/null || die "ISG_AUDITABLE=1: cargo-auditable is not installed (cargo install --locked cargo-auditable@0.7.7)"
     build=(cargo auditable build) ;;
  auto) command -v cargo-auditable >/dev/null && build=(cargo auditable build) ;;
  *) die "ISG_AUDITABLE=${ISG_AUDITABLE} is none of 0, 1 (or unset)" ;;
esac
log "building the static release binary for $target (${build[*]})"
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" ISG_GIT_REVISION="$revision" \
  "${build[@]}" --release --locked --bin ingress-status-guard --target "$target"
bin="target/$target/release/ingress-status-guard"
if readelf -d "$bin" | grep -q NEEDED; then
  die "$bin needs shared libraries: $(readelf -d "$bin" | grep NEEDED | tr '\n' ' ')"
fi
if $binary_only; then
  log "built $bin"
  exit 0
fi

# 2. The image. buildah keeps its storage under target/image, not in the system's.
export BUILDAH_ISOLATION=chroot
storage=(--root "$PWD/$out/storage" --runroot "$PWD/$out/run" --storage-driver vfs)
ctr=$(buildah "${storage[@]}" from scratch)
trap 'buildah "${storage[@]}" rm "$ctr" >/dev/null 2>&1 || true' EXIT
buildah "${storage[@]}" copy --chmod 0755 "$ctr" "$bin" /usr/local/bin/ingress-status-guard >/dev/null
buildah "${storage[@]}" config \
  --os linux --arch "$arch" \
  --user 65532:65532 \
  --entrypoint '["/usr/local/bin/ingress-status-guard"]' \
  --cmd serve \
  --port 8443 --port 8080 \
  --label org.opencontainers.image.title=ingress-status-guard \
  --label org.opencontainers.image.source=https://github.com/ingress-status-guard/ingress-status-guard \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.revision=$revision" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  "$ctr"
rm -f "$archive"
# Created at the commit's time (SOURCE_DATE_EPOCH if set): the same binary gives the same image
# digest, so the archive this smoke-runs is the one scripts/release.sh signs.
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
buildah "${storage[@]}" commit --format oci --quiet --timestamp "$epoch" "$ctr" "oci-archive:$archive:ingress-status-guard:$version" >/dev/null
log "built $archive ($(du -h "$archive" | cut -f1))"

$run || exit 0

# 3. Smoke run: what is inside the archive, not the binary built above.
for tool in umoci crun curl python3; do
  command -v "$tool" >/dev/null || die "--run needs $tool (apt-get install umoci crun curl)"
done
smoke="$out/smoke"
rm -rf "$smoke"
mkdir -p "$smoke/layout"
tar -xf "$archive" -C "$smoke/layout"
umoci unpack --image "$smoke/layout:ingress-status-guard:$version" "$smoke/bundle" >/dev/null
rootfs_bin="$smoke/bundle/rootfs/usr/local/bin/ingress-status-guard"
[[ -x "$rootfs_bin" ]] || die "the image has no /usr/local/bin/ingress-status-guard"
want="ingress-status-guard $version (revision $revision)"
[[ "$("$rootfs_bin" --version)" == "$want" ]] || die "the image's binary says $("$rootfs_bin" --version), not $want"

# The image's config as umoci turned it into a runtime spec: user and entrypoint.
python3 - "$smoke/bundle/config.json" "$revision" "$version" <<'EOF'
import json, sys
spec, revision, version = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
user = spec["process"]["user"]
assert (user["uid"], user["gid"]) == (65532, 65532), f"runs as {user}, not 65532:65532"
assert spec["process"]["args"] == ["/usr/local/bin/ingress-status-guard", "serve"], spec["process"]["args"]
labels = spec.get("annotations", {})
assert labels.get("org.opencontainers.image.revision") == revision, labels
assert labels.get("org.opencontainers.image.version") == version, labels
EOF

port=$((20000 + RANDOM % 20000))
admin=$((port + 1))
# Smoke-run settings: the host's network (to reach /readyz), a writable /tmp for the ephemeral
# certificate's CA file, a static source, no Kubernetes client. Inside this project's build
# machines (themselves containers) crun cannot apply the rlimits umoci puts in the spec
# (setrlimit is refused) nor manage cgroups, so rlimits and resources are removed and crun runs
# with --cgroup-manager=disabled; the process, rootfs, user and arguments are the image's.
python3 - "$smoke/bundle/config.json" "$port" "$admin" <<'EOF'
import json, sys
path, port, admin = sys.argv[1], sys.argv[2], sys.argv[3]
spec = json.load(open(path))
spec["process"].pop("rlimits", None)
spec["linux"].pop("resources", None)
spec["linux"].pop("cgroupsPath", None)
spec["process"]["terminal"] = False
spec["process"]["args"] += ["--publish-status-address=192.0.2.10", "--no-events",
    f"--listen=127.0.0.1:{port}", f"--admin-listen=127.0.0.1:{admin}", "--probe-listen=127.0.0.1:0"]
spec["linux"]["namespaces"] = [n for n in spec["linux"]["namespaces"] if n["type"] != "network"]
spec["mounts"].append({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]})
spec["root"]["readonly"] = True
json.dump(spec, open(path, "w"), indent=2)
EOF

name="isg-smoke-$$"
crun_log="$smoke/crun.log"
# crun refuses a "hybrid" cgroup layout (v1 controllers plus a cgroup2 mount, as here) even with
# cgroups disabled: it then runs in a private mount namespace without the cgroup2 mount.
if [[ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" != cgroup2fs ]] && grep -q ' cgroup2 ' /proc/self/mounts; then
  cgroup2=$(awk '$3 == "cgroup2" { print $2 }' /proc/self/mounts | tr '\n' ' ')
  unshare -m sh -c "for m in $cgroup2; do umount \"\$m\"; done; exec crun --cgroup-manager=disabled run --bundle '$smoke/bundle' '$name'" \
    >"$smoke/serve.log" 2>"$crun_log" &
else
  crun --cgroup-manager=disabled run --bundle "$smoke/bundle" "$name" >"$smoke/serve.log" 2>"$crun_log" &
fi
crun_pid=$!
trap 'crun kill "$name" KILL >/dev/null 2>&1 || true; wait "$crun_pid" 2>/dev/null || true; crun delete -f "$name" >/dev/null 2>&1 || true; buildah "${storage[@]}" rm "$ctr" >/dev/null 2>&1 || true' EXIT
ready=""
for _ in $(seq 1 100); do
  if ready=$(curl -fsS "http://127.0.0.1:$admin/readyz" 2>/dev/null); then break; fi
  kill -0 "$crun_pid" 2>/dev/null || break
  sleep 0.1
done
if [[ -z "$ready" ]]; then
  log "the container did not become ready; crun said:"
  cat "$crun_log" >&2
  log "serve said:"
  cat "$smoke/serve.log" >&2
  exit 1
fi
log "serve in the image answered /readyz: $ready"
# Read whole before matching: `grep -q` stops at the first match, and curl, still writing a
# page larger than the pipe's buffer, then fails the pipeline (exit 23).
metrics=$(curl -fsS "http://127.0.0.1:$admin/metrics") || die "cannot read /metrics of the image's guard"
grep -q "^ingress_status_guard_build_info{version=\"$version\",revision=\"$revision\"} 1" <<<"$metrics" \
  || die "/metrics lacks build_info for $version $revision"
# The user the process runs as, seen from outside.
pid=$(crun state "$name" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
uid=$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status")
[[ "$uid" == 65532 ]] || die "serve runs as UID $uid, not 65532"
log "smoke run passed: UID $uid, build_info $version $revision"
