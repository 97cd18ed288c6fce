#!/usr/bin/env python3
"""The plot of docs/scaling.md: the guard's peak RSS (VmHWM) against the Ingresses
in the API server, per build, drawn from the numbers `cargo bench --bench reconcile` wrote
(benches/results/scaling-*.json for dev builds, release-scaling-*.json for release builds,
committed): at the first sync, and after healing every governed Ingress. Usage:
python3 benches/scaling_plot.py [OUT.png] (default docs/scaling.png); needs matplotlib."""

import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = {
    "isg-before-7e25f33": "7e25f33, before the compact cache",
    "isg-main-2403246": "2403246, compact cache",
    "isg-8566237": "8566237, packed lists",
    "isg-2fe63d2": "2fe63d2, compact bookkeeping, streaming lists",
    "isg-2fe63d2-tuned": "2fe63d2, glibc arena_max=2",
    "isg-bcab07c": "bcab07c, compact bookkeeping (rerun)",
    "isg-d90aea9": "d90aea9, fingerprints, bounded line",
    "isg-fd0f048": "fd0f048, boxed records, nothing past the line",
}
# The runs of the bench's own build, by the file they are in.
OWN = {"scaling-10k.json": "after (filtered watch, pages of 500)", "scaling-50k.json": "after (filtered watch, pages of 500)",
       "release-scaling-10k.json": "8566237, packed lists"}


def label(path, run):
    name = os.path.basename(run["binary"])
    if name == "ingress-status-guard":
        return OWN.get(os.path.basename(path), name)
    return NAMES.get(name, name)


def points(pattern):
    found = {}
    for path in sorted(glob.glob(os.path.join(HERE, "results", pattern))):
        with open(path) as f:
            for run in json.load(f)["runs"]:
                watched = run["ingresses"] + run.get("others", 0)
                found.setdefault(label(path, run), []).append(
                    (watched, run["vm_hwm_at_sync_mib"], run["vm_hwm_mib"], run["ingresses"]))
    return found


def panel(ax, found, build):
    for i, (name, values) in enumerate(sorted(found.items())):
        values.sort()
        color = f"C{i}"
        ax.plot([v[0] for v in values], [v[2] for v in values], marker="o", color=color, label=f"{name}: healed all")
        ax.plot([v[0] for v in values], [v[1] for v in values], marker="x", linestyle="--", color=color,
                label=f"{name}: at sync")
        for watched, _, hwm, governed in values:
            ax.annotate(f"{hwm:.1f}", (watched, hwm), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlabel("Ingresses in the API server (half governed in the 20k and 200k runs)")
    ax.set_ylabel(f"guard VmHWM, MiB ({build} build)")
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "docs", "scaling.png")
    fig, (dev, release) = plt.subplots(1, 2, figsize=(12, 4.5))
    panel(dev, points("scaling-*.json"), "dev")
    panel(release, points("release-scaling-*.json"), "release")
    fig.suptitle("Peak RSS at the first sync and after healing every governed Ingress (qps 200)")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(out)


if __name__ == "__main__":
    main()
