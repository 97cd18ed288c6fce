#!/usr/bin/env python3
"""Draws docs/dashboard.png from a snapshot of a real run of the dashboard's queries.

    scripts/dashboard-png.py SNAPSHOT.json OUT.png

SNAPSHOT.json is what `ISG_DASHBOARD_SNAPSHOT=SNAPSHOT.json cargo test --test cluster -- dashboard::` writes
(tests/cluster/dashboard.rs): every panel of charts/ingress-status-guard/dashboards/ingress-status-guard.json,
each query's series as Prometheus answered /api/v1/query_range over the run. Nothing is made up
here: each line is one series of that answer, labelled by the panel's legendFormat, in panel
order, laid out in Grafana's dark colours. scripts/dashboard-png.sh runs both steps.
"""

import io
import json
import re
import sys

import matplotlib
from PIL import Image  # matplotlib depends on Pillow

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BACKGROUND = "#111217"
PANEL = "#181b1f"
TEXT = "#ccccdc"
GRID = "#2c3235"
# Grafana's classic palette, in its order.
COLOURS = ["#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#5794f2", "#b877d9", "#705da0", "#37872d"]
UNITS = {"ops": "per second", "reqps": "requests per second", "s": "seconds", "short": ""}
MAX_PANELS = 24
MAX_SERIES = 12


def legend(template, labels):
    """A legendFormat such as '{{writer}} {{action}}' filled in from one series' labels."""
    text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template).strip()
    return text or "value"


def gapped(points):
    """Times and values with a NaN wherever the series was absent for more than a step (the
    snapshot steps by 1 s), so a series that went and came back is drawn as two lines, as
    Grafana draws it, not joined across the gap."""
    t, v = [], []
    for time, value in points:
        if t and time - t[-1] > 1.5:
            t.append((time + t[-1]) / 2)
            v.append(float("nan"))
        t.append(time)
        v.append(value)
    return t, v


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: scripts/dashboard-png.py SNAPSHOT.json OUT.png")
    with open(argv[1], encoding="utf-8") as f:
        snapshot = json.load(f)
    panels = snapshot["panels"][:MAX_PANELS]
    if not panels:
        sys.exit(f"{argv[1]}: no panels")
    columns = 4
    rows = (len(panels) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(16, 3.1 * rows), facecolor=BACKGROUND, squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, panel in zip(axes.flat, panels):
        ax.set_facecolor(PANEL)
        ax.set_title(panel["title"], color=TEXT, fontsize=10, loc="left")
        ax.tick_params(colors=TEXT, labelsize=7)
        ax.grid(color=GRID, linewidth=0.5)
        for side in ax.spines.values():
            side.set_color(GRID)
        ax.set_ylabel(UNITS.get(panel["unit"], panel["unit"]), color=TEXT, fontsize=7)
        drawn = 0
        for query in panel["queries"]:
            for series in query["series"]:
                if drawn == MAX_SERIES or not series["points"]:
                    continue
                t, v = gapped(series["points"])
                colour = COLOURS[drawn % len(COLOURS)]
                ax.plot(t, v, color=colour, linewidth=1.2, label=legend(query["legend"], series["labels"]))
                drawn += 1
        if drawn:
            ax.legend(fontsize=6, facecolor=PANEL, edgecolor=GRID, labelcolor=TEXT, loc="upper left")
        ax.set_xlabel("seconds into the run", color=TEXT, fontsize=7)
    fig.suptitle(
        f"ingress-status-guard dashboard, from a real run: {snapshot['made_by']}, "
        f"Kubernetes {snapshot['kubernetes']}, {snapshot['seconds']:.0f} s, rates over {snapshot['rate_interval']}",
        color=TEXT,
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    # A palette of 64 colours keeps the PNG small (docs/deploy.md shows it) with no visible loss:
    # the figure has a dozen colours and their anti-aliased edges.
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=72, facecolor=BACKGROUND)
    buffer.seek(0)
    Image.open(buffer).convert("RGB").quantize(colors=64).save(argv[2], optimize=True)


if __name__ == "__main__":
    main(sys.argv)
