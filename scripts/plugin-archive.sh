#!/usr/bin/env bash
# Builds the kubectl plugin's release archive and its krew manifest:
#
#   scripts/plugin-archive.sh [URL-BASE]
#     target/plugin/kubectl-isg-<version>-<os>-<arch>.tar.gz   holding kubectl-isg and LICENSE,
#                                                               one per platform
#     target/plugin/isg.yaml                                    dist/krew/isg.yaml, filled in
#                                                               with a platform entry for each
#
# URL-BASE is where the archives will be published (default: the GitHub release of the version);
# each platform's uri is URL-BASE/<archive>. The binary is the static linux/amd64 release build
# of scripts/image.sh; ISG_PLUGIN_BINARY=PATH archives a linux/amd64 binary built elsewhere
# instead, and ISG_PLUGIN_BINARIES="linux/amd64=PATH linux/arm64=PATH ..." one per platform.
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

if [[ -n "${ISG_PLUGIN_BINARIES:-}" ]]; then
  read -r -a binaries <<<"$ISG_PLUGIN_BINARIES"
elif [[ -n "${ISG_PLUGIN_BINARY:-}" ]]; then
  binaries=("linux/amd64=$ISG_PLUGIN_BINARY")
else
  target=$(rustc -vV | awk '/^host:/ { print $2 }')
  [[ "$target" == x86_64-unknown-linux-gnu ]] || die "the manifest names linux/amd64; this host is $target"
  log "building the static release binary"
  RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    cargo build --release --locked --bin ingress-status-guard --target "$target"
  binaries=("linux/amd64=target/$target/release/ingress-status-guard")
fi

mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
platforms="$stage/platforms.yaml"
: >"$platforms"
archives=()
for item in "${binaries[@]}"; do
  platform=${item%%=*} bin=${item#*=}
  [[ "$platform" =~ ^[a-z]+/[a-z0-9]+$ ]] || die "$item: expected OS/ARCH=PATH"
  [[ -x "$bin" ]] || die "$bin is not an executable"
  name="kubectl-isg-$version-${platform/\//-}.tar.gz"
  rm -rf "$stage/files" && mkdir "$stage/files"
  install -m 0755 "$bin" "$stage/files/kubectl-isg"
  # krew-index asks for the license inside the archive, installed beside the binary.
  install -m 0644 LICENSE "$stage/files/LICENSE"
  # Reproducible: fixed owner, order and time, so the sha256 depends on the binary alone.
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$stage/files" -cf - LICENSE kubectl-isg \
    | gzip -n -9 >"$out/$name"
  sha=$(sha256sum "$out/$name" | cut -d' ' -f1)
  cat >>"$platforms" <<YAML
  - selector:
      matchLabels:
        os: ${platform%/*}
        arch: ${platform#*/}
    uri: "$base/$name"
    sha256: "$sha"
    files:
    - from: kubectl-isg
      to: .
    - from: LICENSE
      to: .
    bin: kubectl-isg
YAML
  archives+=("$out/$name")
  log "built $out/$name (sha256 $sha)"
done
# The template's platforms: list ends the file; each platform built gets an entry.
sed -e "s|@VERSION@|$version|g" -e '/^  platforms:$/q' dist/krew/isg.yaml >"$out/isg.yaml"
cat "$platforms" >>"$out/isg.yaml"
log "wrote $out/isg.yaml (${#archives[@]} platforms)"
printf '%s\n' "${archives[@]}" "$out/isg.yaml"
