#!/usr/bin/env bash
# Builds the kubectl plugin's release archive and its krew manifest:
#
#   scripts/plugin-archive.sh [URL-BASE]
#     target/plugin/kubectl-isg-<version>-linux-amd64.tar.gz   holding kubectl-isg and LICENSE
#     target/plugin/isg.yaml                                    dist/krew/isg.yaml, filled in
#
# URL-BASE is where the archive will be published (default: the GitHub release of the version);
# the manifest's uri is URL-BASE/<archive>. The binary is the static release build of
# scripts/image.sh; ISG_PLUGIN_BINARY=PATH archives a binary built elsewhere instead.
# The archive holds the binary as a regular file named kubectl-isg: krew unpacks regular files
# only, and under that name the binary answers as `kubectl isg`.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'plugin-archive.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

version=$(awk -F'"' '/^version = / { print $2; exit }' Cargo.toml)
base=${1:-https://github.com/ingress-status-guard/ingress-status-guard/releases/download/v$version}
[[ $# -le 1 ]] || die "usage: scripts/plugin-archive.sh [URL-BASE]"
out=${ISG_PLUGIN_OUT:-target/plugin}
name="kubectl-isg-$version-linux-amd64.tar.gz"

if [[ -n "${ISG_PLUGIN_BINARY:-}" ]]; then
  bin=$ISG_PLUGIN_BINARY
else
  target=$(rustc -vV | awk '/^host:/ { print $2 }')
  [[ "$target" == x86_64-unknown-linux-gnu ]] || die "the manifest names linux/amd64; this host is $target"
  log "building the static release binary"
  RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    cargo build --release --locked --bin ingress-status-guard --target "$target"
  bin="target/$target/release/ingress-status-guard"
fi
[[ -x "$bin" ]] || die "$bin is not an executable"

mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
install -m 0755 "$bin" "$stage/kubectl-isg"
# krew-index asks for the license inside the archive, installed beside the binary.
install -m 0644 LICENSE "$stage/LICENSE"
# Reproducible: fixed owner, order and time, so the sha256 depends on the binary alone.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$stage" -czf "$out/$name" LICENSE kubectl-isg
sha=$(sha256sum "$out/$name" | cut -d' ' -f1)
sed -e "s|@VERSION@|$version|g" -e "s|@URL@|$base/$name|g" -e "s|@SHA256@|$sha|g" \
  dist/krew/isg.yaml >"$out/isg.yaml"
log "built $out/$name (sha256 $sha) and $out/isg.yaml"
printf '%s\n' "$out/$name" "$out/isg.yaml"
