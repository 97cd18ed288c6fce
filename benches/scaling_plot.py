#!/usr/bin/env python3
"""The plot of docs/scaling.md (issue 34): the guard's peak RSS (VmHWM) against the Ingresses
it watches, per build, drawn from the numbers `cargo bench --bench reconcile` wrote
(benches/results/issue34-*.json, committed). Usage: python3 benches/scaling_plot.py [OUT.png]
(default docs/scaling.png); needs matplotlib."""

import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = {
    "ingress-status-guard": "after (filtered watch, pages of 500)",
    "isg-main-2403246": "main 2403246 (compact cache)",
    "isg-before-7e25f33": "before 7e25f33 (before issue 34)",
}


def label(binary):
    return NAMES.get(os.path.basename(binary), os.path.basename(binary))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "docs", "scaling.png")
    points = {}
    for path in sorted(glob.glob(os.path.join(HERE, "results", "issue34-*.json"))):
        with open(path) as f:
            for run in json.load(f)["runs"]:
                watched = run["ingresses"] + run.get("others", 0)
                points.setdefault(label(run["binary"]), []).append((watched, run["vm_hwm_mib"], run["ingresses"]))
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, values in sorted(points.items()):
        values.sort()
        ax.plot([v[0] for v in values], [v[1] for v in values], marker="o", label=name)
        for watched, hwm, governed in values:
            ax.annotate(f"{hwm:.1f} ({governed:,} governed)", (watched, hwm), textcoords="offset points",
                        xytext=(4, 4), fontsize=7)
    ax.set_xlabel("Ingresses in the API server")
    ax.set_ylabel("guard VmHWM, MiB (dev build)")
    ax.set_title("Peak RSS while healing every governed Ingress (qps 200)")
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(out)


if __name__ == "__main__":
    main()
