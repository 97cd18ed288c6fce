#!/usr/bin/env python3
"""Writes the CycloneDX 1.5 JSON SBOM of the ingress-status-guard binary, from Cargo.lock.

    cargo metadata --locked --offline --format-version 1 --filter-platform TARGET \
        | scripts/sbom.py Cargo.lock >SBOM.cdx.json

The components are the crates the binary is built from on TARGET, as Cargo.lock pins them: scope
"required" for those it links (what the root reaches through normal dependencies, proc-macros
not entered), "excluded" for those that only build it (proc-macros, build dependencies and what
they pull in); dev-dependencies are left out. Together they are the crates cargo auditable
embeds in the binary (which draws its runtime/build line elsewhere: syn counts as runtime). Each carries its license
(the SPDX expression of its Cargo.toml; a crate without one is an error), its purl, and the
SHA-256 of its .crate file from Cargo.lock; `dependencies` is the graph between them.

The output depends on its inputs only: the serial number is derived from Cargo.lock, and the
timestamp is SOURCE_DATE_EPOCH (scripts/release.sh sets it to the commit's time), else 0.
"""

import datetime
import hashlib
import json
import os
import re
import sys
import tomllib
import uuid


def purl(pkg):
    return f"pkg:cargo/{pkg['name']}@{pkg['version']}"


def license_expression(pkg):
    """The SPDX expression of a crate's `license` field; old-style `MIT/Apache-2.0` reads as OR."""
    text = (pkg.get("license") or "").strip()
    if not text:
        where = pkg.get("license_file") or "no license field"
        sys.exit(f"sbom.py: {pkg['name']} {pkg['version']} has no SPDX license expression ({where})")
    if "/" in text and not re.search(r"\b(OR|AND|WITH)\b", text):
        text = " OR ".join(part.strip() for part in text.split("/"))
    return text


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: cargo metadata ... | sbom.py Cargo.lock")
    lock_bytes = open(sys.argv[1], "rb").read()
    lock = tomllib.loads(lock_bytes.decode())
    checksums = {(p["name"], p["version"]): p.get("checksum") for p in lock["package"]}
    meta = json.load(sys.stdin)
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    root = meta["resolve"]["root"]

    def deps(node_id, kinds):
        for dep in nodes[node_id]["deps"]:
            if any(k["kind"] in kinds for k in dep["dep_kinds"]):
                yield dep["pkg"]

    def proc_macro(node_id):
        return any("proc-macro" in t["kind"] for t in packages[node_id]["targets"])

    def reach(start, kinds, through_proc_macros):
        seen, stack = set(start), list(start)
        while stack:
            node = stack.pop()
            if node != root and proc_macro(node) and not through_proc_macros:
                continue
            for dep in deps(node, kinds):
                if dep not in seen:
                    seen.add(dep)
                    stack.append(dep)
        return seen

    # Linked into the binary ("required"): what the root reaches through normal edges, proc-macros
    # not entered. Used only to build it ("excluded", as CycloneDX scopes go): proc-macros, build
    # dependencies and what they reach.
    required = {i for i in reach({root}, {None}, False) if i == root or not proc_macro(i)}
    everything = reach({root}, {None, "build"}, True)
    order = lambda i: (packages[i]["name"], packages[i]["version"])
    reached = sorted(everything - {root}, key=order)

    def component(pkg, kind):
        c = {
            "type": kind,
            "bom-ref": purl(pkg),
            "name": pkg["name"],
            "version": pkg["version"],
            "purl": purl(pkg),
            "licenses": [{"expression": license_expression(pkg)}],
        }
        if pkg.get("description"):
            c["description"] = " ".join(pkg["description"].split())
        sha = checksums.get((pkg["name"], pkg["version"]))
        if pkg.get("source", "") and sha:
            c["hashes"] = [{"alg": "SHA-256", "content": sha}]
            c["externalReferences"] = [{
                "type": "distribution",
                "url": f"https://crates.io/api/v1/crates/{pkg['name']}/{pkg['version']}/download",
            }]
        elif pkg.get("source"):
            sys.exit(f"sbom.py: {pkg['name']} {pkg['version']} comes from {pkg['source']} without a checksum in Cargo.lock")
        if pkg.get("repository"):
            c.setdefault("externalReferences", []).append({"type": "vcs", "url": pkg["repository"]})
        return c

    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    stamp = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    serial = uuid.uuid5(uuid.NAMESPACE_URL, "cargo-lock:" + hashlib.sha256(lock_bytes).hexdigest())
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": f"urn:uuid:{serial}",
        "version": 1,
        "metadata": {
            "timestamp": stamp,
            "tools": {"components": [{"type": "application", "name": "scripts/sbom.py (ingress-status-guard)"}]},
            "component": component(packages[root], "application"),
        },
        "components": [
            dict(component(packages[i], "library"), scope="required" if i in required else "excluded")
            for i in reached
        ],
        "dependencies": [
            {"ref": purl(packages[i]), "dependsOn": sorted({purl(packages[d]) for d in deps(i, {None, "build"})})}
            for i in [root] + reached
        ],
    }
    json.dump(bom, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
