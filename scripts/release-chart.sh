#!/usr/bin/env bash
# Packages the chart for a release: a copy of charts/ingress-status-guard whose Chart.yaml gets the
# `artifacthub.io/changes` annotation from the newest entry of the chart's CHANGELOG.md, then
# `helm package`. Refuses when the newest entry is not the chart's version or an item is not under
# a kind Artifact Hub knows (added, changed, deprecated, removed, fixed, security).
#
#   scripts/release-chart.sh HELM CHART_DIR DEST_DIR    prints the path of the .tgz
set -euo pipefail
die() { echo "release-chart: $*" >&2; exit 1; }
[[ $# -eq 3 ]] || die "usage: $0 HELM CHART_DIR DEST_DIR"
helm=$1 chart=$2 dest=$3
[[ -f "$chart/Chart.yaml" && -f "$chart/CHANGELOG.md" ]] || die "$chart needs Chart.yaml and CHANGELOG.md"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$chart" "$work/"
copy="$work/$(basename "$chart")"
python3 - "$copy/Chart.yaml" "$copy/CHANGELOG.md" <<'PY' || exit 1
import re, sys
chart_path, log_path = sys.argv[1], sys.argv[2]
chart = open(chart_path).read()
version = re.search(r'^version:\s*"?([^"\s]+)"?\s*$', chart, re.M)
if not version:
    sys.exit("release-chart: Chart.yaml has no version")
version = version.group(1)
if re.search(r'^\s+artifacthub\.io/changes:', chart, re.M):
    sys.exit("release-chart: Chart.yaml already has artifacthub.io/changes; it is made from CHANGELOG.md, remove it")
entry, kind, changes = None, None, []
for line in open(log_path):
    line = line.rstrip("\n")
    if line.startswith("## "):
        if entry is not None:
            break
        entry = line[3:].strip()
        if entry != version:
            sys.exit(f"release-chart: the newest CHANGELOG.md entry is {entry!r}, not the chart's version {version!r}: add an entry for {version}")
    elif entry is not None and line.startswith("### "):
        kind = line[4:].strip().lower()
        if kind not in ("added", "changed", "deprecated", "removed", "fixed", "security"):
            sys.exit(f"release-chart: CHANGELOG.md {version}: section {line[4:]!r} is not one of Added, Changed, Deprecated, Removed, Fixed, Security")
    elif entry is not None and line.startswith("- "):
        if kind is None:
            sys.exit(f"release-chart: CHANGELOG.md {version}: item {line!r} is under no ### section")
        changes.append((kind, line[2:].strip()))
    elif entry is not None and line.startswith("  ") and changes:
        changes[-1] = (changes[-1][0], changes[-1][1] + " " + line.strip())
if entry is None:
    sys.exit("release-chart: CHANGELOG.md has no '## VERSION' entry")
if not changes:
    sys.exit(f"release-chart: CHANGELOG.md {version}: the entry lists no change")
def quoted(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
block = "  artifacthub.io/changes: |\n" + "".join(
    f"    - kind: {kind}\n      description: {quoted(text)}\n" for kind, text in changes)
if not re.search(r'^annotations:\s*$', chart, re.M):
    sys.exit("release-chart: Chart.yaml has no annotations: block to add artifacthub.io/changes to")
chart = re.sub(r'^annotations:\s*\n', lambda m: m.group(0) + block, chart, count=1, flags=re.M)
open(chart_path, "w").write(chart)
PY
mkdir -p "$dest"
"$helm" package "$copy" --destination "$dest" >&2
version=$(sed -n 's/^version:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}[[:space:]]*$/\1/p' "$copy/Chart.yaml")
printf '%s\n' "$dest/$(basename "$chart")-$version.tgz"
