# Sourced by scripts/release.sh, release-verify.sh and release-verify-negative.sh: a loopback
# registry to push, sign and verify against (no registry is reachable from CI), and the signing
# of an image index. Needs $crane, $cosign and $work (a mktemp -d directory) set, and die().

# Starts `crane registry serve` (in memory) on a free loopback port; sets $registry
# (127.0.0.1:PORT) and $registry_pid. The caller's EXIT trap calls stop_registry.
start_registry() {
  : >"$work/registry.log"   # before the server's own redirection, which runs after the fork
  "$crane" registry serve --address 127.0.0.1:0 2>>"$work/registry.log" &
  registry_pid=$!
  local port="" _
  for _ in $(seq 1 100); do
    port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$work/registry.log")
    [[ -n "$port" ]] && break
    kill -0 "$registry_pid" 2>/dev/null || die "crane registry serve stopped: $(cat "$work/registry.log")"
    sleep 0.1
  done
  [[ -n "$port" ]] || die "crane registry serve did not say its port: $(cat "$work/registry.log")"
  registry="127.0.0.1:$port"
}
stop_registry() {
  if [[ -n "${registry_pid:-}" ]]; then
    kill "$registry_pid" 2>/dev/null || true
    wait "$registry_pid" 2>/dev/null || true
    registry_pid=""
  fi
}

# Untars a file into a new directory under $work and prints its path.
untar() {
  local dir
  dir=$(mktemp -d -p "$work")
  tar -xf "$1" -C "$dir"
  printf '%s\n' "$dir"
}

# Tars a directory with fixed owner, order and time ($epoch).
tar_fixed() {
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@${epoch:-0}" -C "$1" -cf "$2" .
}

# sign_image LAYOUT REPO KEY SBOM PROVENANCE OUT_TAR: pushes the OCI layout's one image index to
# REPO in the loopback registry, signs it with KEY (COSIGN_PASSWORD as cosign reads it), attests
# the CycloneDX SBOM and the SLSA provenance to it, and saves index, signature and attestations
# (`cosign save` layout) tarred to OUT_TAR. Prints the index digest.
sign_image() {
  local layout=$1 repo=$2 key=$3 sbom=$4 provenance=$5 out_tar=$6 pushed digest
  pushed=$("$crane" push "$layout" "$repo:release" 2>"$work/push.log") || die "crane push failed: $(cat "$work/push.log")"
  digest=${pushed##*@}
  local flags=(--key "$key" --tlog-upload=false --yes --allow-http-registry)
  "$cosign" sign "${flags[@]}" "$repo@$digest" >&2 2>"$work/sign.log" || die "cosign sign: $(cat "$work/sign.log")"
  "$cosign" attest "${flags[@]}" --replace --type cyclonedx --predicate "$sbom" "$repo@$digest" 2>"$work/sign.log" \
    || die "cosign attest --type cyclonedx: $(cat "$work/sign.log")"
  "$cosign" attest "${flags[@]}" --replace --type slsaprovenance1 --predicate "$provenance" "$repo@$digest" 2>"$work/sign.log" \
    || die "cosign attest --type slsaprovenance1: $(cat "$work/sign.log")"
  local saved
  saved=$(mktemp -d -p "$work")
  "$cosign" save --dir "$saved" "$repo@$digest" 2>"$work/sign.log" || die "cosign save: $(cat "$work/sign.log")"
  tar_fixed "$saved" "$out_tar"
  printf '%s\n' "$digest"
}
