#!/usr/bin/env python3
"""Writes the release's SLSA provenance predicate (https://slsa.dev/provenance/v1) as JSON on
stdout; `cosign attest --type slsaprovenance1` wraps it in an in-toto statement whose subject is
the image index's digest.

    provenance.py --revision FULL_SHA --cargo-lock Cargo.lock --builder ID \
        --command 'CMD' --toolchain 'rustc 1.x' [--toolchain ...] --platform linux/amd64=SHA256 ...

What it records: who built (builder id), from what (the source revision as a git commit, and
Cargo.lock by sha256: every crate's version and checksum), how (the exact build command, the
toolchain versions) and what came out (each platform's binary by sha256). No time and no host
name: the same inputs give the same bytes.
"""
import argparse
import hashlib
import json
import sys

REPO = "https://github.com/ingress-status-guard/ingress-status-guard"

p = argparse.ArgumentParser()
p.add_argument("--revision", required=True)
p.add_argument("--cargo-lock", required=True)
p.add_argument("--builder", required=True)
p.add_argument("--command", required=True)
p.add_argument("--toolchain", action="append", default=[])
p.add_argument("--platform", action="append", default=[], help="os/arch=sha256 of the binary")
p.add_argument("--version", required=True)
a = p.parse_args()

lock = hashlib.sha256(open(a.cargo_lock, "rb").read()).hexdigest()
binaries = []
for item in a.platform:
    platform, digest = item.split("=", 1)
    binaries.append({"name": f"ingress-status-guard-{a.version}-{platform.replace('/', '-')}",
                     "digest": {"sha256": digest}, "annotations": {"platform": platform}})

predicate = {
    "buildDefinition": {
        "buildType": f"{REPO}/blob/main/docs/release.md#provenance",
        "externalParameters": {
            "source": {"uri": f"git+{REPO}", "revision": a.revision},
            "command": a.command,
            "platforms": [b["annotations"]["platform"] for b in binaries],
        },
        "internalParameters": {"toolchain": a.toolchain},
        "resolvedDependencies": [
            {"uri": f"git+{REPO}@{a.revision}", "digest": {"gitCommit": a.revision}},
            {"uri": f"git+{REPO}@{a.revision}#Cargo.lock", "name": "Cargo.lock", "digest": {"sha256": lock}},
        ],
    },
    "runDetails": {
        "builder": {"id": a.builder},
        # No start or finish time: the same inputs give the same statement. Written out, since
        # cosign writes the empty object into the attested statement anyway.
        "metadata": {},
        "byproducts": binaries,
    },
}
json.dump(predicate, sys.stdout, indent=2, sort_keys=True)
sys.stdout.write("\n")
