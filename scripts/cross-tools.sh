#!/usr/bin/env bash
# Installs what the linux/arm64 release build and its smoke run need, when missing: the rustup
# target aarch64-unknown-linux-gnu, Debian's aarch64 cross toolchain (gcc-aarch64-linux-gnu and
# libc6-dev-arm64-cross: the linker, and the static glibc that crt-static links in) and
# qemu-user-static (runs the arm64 binary on this host). Debian packages need root (CI runs as
# root); elsewhere install them yourself and this only checks.
#
# Why Debian's toolchain and not `cargo zigbuild`: the release binaries are the gnu targets
# linked statically (crt-static, for an image FROM scratch), and zig links glibc only
# dynamically; the Debian packages are also smaller than the ziglang wheel and pinned by the
# distribution's release.
set -euo pipefail

log() { printf 'scripts/cross-tools.sh: %s\n' "$*" >&2; }

target=aarch64-unknown-linux-gnu
if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  log "adding the rustup target $target"
  rustup target add "$target" >&2
fi

want=()
command -v aarch64-linux-gnu-gcc >/dev/null || want+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v qemu-aarch64-static >/dev/null || want+=(qemu-user-static)
if [[ ${#want[@]} -gt 0 ]]; then
  [[ $(id -u) == 0 ]] || { log "missing ${want[*]} (Debian packages); install them (apt-get install ${want[*]})"; exit 1; }
  log "installing ${want[*]}"
  # One apt at a time on a machine where other scripts install packages too.
  exec 9>/var/lib/apt/lists/isg-cross-tools.lock
  flock 9
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}" >&2
fi
