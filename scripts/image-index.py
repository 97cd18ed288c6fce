#!/usr/bin/env python3
"""Joins single-platform OCI image archives (scripts/image.sh) into one OCI layout whose
index.json names one multi-platform image index (application/vnd.oci.image.index.v1+json):

    image-index.py OUT_DIR VERSION linux/amd64=A.oci.tar linux/arm64=B.oci.tar ...

Prints the image index's digest. The index is canonical JSON in the order given, so the same
images give the same index digest. Every blob's sha256 is checked on the way in.
"""
import hashlib
import json
import os
import sys
import tarfile

out, version, items = sys.argv[1], sys.argv[2], sys.argv[3:]
blobs = os.path.join(out, "blobs", "sha256")
os.makedirs(blobs, exist_ok=True)
manifests = []
for item in items:
    platform, archive = item.split("=", 1)
    os_, arch = platform.split("/")
    with tarfile.open(archive) as t:
        index = json.load(t.extractfile("index.json"))
        for m in t.getmembers():
            if not m.isfile() or not m.name.lstrip("./").startswith("blobs/sha256/"):
                continue
            data = t.extractfile(m).read()
            digest = os.path.basename(m.name)
            if hashlib.sha256(data).hexdigest() != digest:
                sys.exit(f"image-index.py: {archive}: blob {digest} does not match its digest")
            with open(os.path.join(blobs, digest), "wb") as f:
                f.write(data)
    [desc] = index["manifests"]
    manifest = json.load(open(os.path.join(blobs, desc["digest"].removeprefix("sha256:"))))
    config = json.load(open(os.path.join(blobs, manifest["config"]["digest"].removeprefix("sha256:"))))
    if (config.get("os"), config.get("architecture")) != (os_, arch):
        sys.exit(f"image-index.py: {archive} is {config.get('os')}/{config.get('architecture')}, not {platform}")
    manifests.append({"mediaType": desc["mediaType"], "digest": desc["digest"], "size": desc["size"],
                      "platform": {"architecture": arch, "os": os_}})

image_index = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                          "manifests": manifests}, separators=(",", ":"), sort_keys=True).encode()
digest = hashlib.sha256(image_index).hexdigest()
with open(os.path.join(blobs, digest), "wb") as f:
    f.write(image_index)
layout_index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                "manifests": [{"mediaType": "application/vnd.oci.image.index.v1+json",
                               "digest": f"sha256:{digest}", "size": len(image_index),
                               "annotations": {"org.opencontainers.image.ref.name": version}}]}
json.dump(layout_index, open(os.path.join(out, "index.json"), "w"), separators=(",", ":"), sort_keys=True)
json.dump({"imageLayoutVersion": "1.0.0"}, open(os.path.join(out, "oci-layout"), "w"))
print(f"sha256:{digest}")
