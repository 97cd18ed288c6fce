#!/usr/bin/env python3
"""Per-phase status writes of a benches/fight.rs run, from every file of the API server's audit
log (kube-apiserver rotates it at 100 MB: audit.log plus audit-<time>.log backups).

benches/fight.rs before 2026-12-01 20:30 UTC read only audit.log from an offset, so a run whose
log rotated reported too few writes; this recounts them. Phases are told apart by the pauses in
the controllers' writes between them (at least --gap seconds; the bench pauses about 10 s).

Usage: benches/fight_audit.py target/tmp/e2e/run-<pid>/shared [--gap 8]
"""
import glob
import json
import os
import sys
from datetime import datetime, timezone


def stamp(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def percentile(values, p):
    if not values:
        return 0.0
    values = sorted(values)
    return values[round((len(values) - 1) * p)]


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    gap = float(args[args.index("--gap") + 1]) if "--gap" in args else 8.0
    files = sorted(glob.glob(os.path.join(args[0], "audit*.log")), key=os.path.getmtime)
    writes = []  # (received, latency ms, field manager)
    for path in files:
        with open(path, "rb") as f:
            for raw in f:
                try:
                    e = json.loads(raw)
                except ValueError:
                    continue
                uri = e.get("requestURI", "")
                if e.get("stage") != "ResponseComplete" or e.get("verb") != "patch" or "/ingresses/" not in uri:
                    continue
                manager = uri.split("fieldManager=")[1].split("&")[0] if "fieldManager=" in uri else "none"
                start, end = stamp(e["requestReceivedTimestamp"]), stamp(e["stageTimestamp"])
                writes.append((start, (end - start) * 1000.0, manager))
    writes.sort()
    phases, current, last = [], [], None
    for w in writes:
        if w[2].startswith("controller-"):
            if last is not None and w[0] - last >= gap:
                phases.append(current)
                current = []
            last = w[0]
        current.append(w)
    phases.append(current)
    for i, phase in enumerate(phases, 1):
        controllers = [w for w in phase if w[2].startswith("controller-")]
        if not controllers:
            continue
        begin, end = controllers[0][0], controllers[-1][0]
        # Writes in the pause before the next phase (the guard starting) are not the phase's.
        by, outside = {}, {}
        for w in phase:
            into = by if w[0] <= end else outside
            into.setdefault(w[2], []).append(w[1])
        latencies = [w[1] for w in controllers]
        print(json.dumps({
            "phase": i,
            "from": datetime.fromtimestamp(begin, timezone.utc).strftime("%H:%M:%S"),
            "to": datetime.fromtimestamp(end, timezone.utc).strftime("%H:%M:%S"),
            "writes_by_manager": {m: len(v) for m, v in sorted(by.items())},
            "writes_in_the_pause_after": {m: len(v) for m, v in sorted(outside.items())},
            "controller_writes_per_s": round(len(controllers) / max(end - begin, 1e-9), 1),
            "controller_write_p50_ms": round(percentile(latencies, 0.5), 1),
            "controller_write_p99_ms": round(percentile(latencies, 0.99), 1),
        }))


if __name__ == "__main__":
    main()
