#!/usr/bin/env bash
# Redraws docs/dashboard.png from a real run:
#
#   scripts/dashboard-png.sh
#
# 1. `ISG_DASHBOARD_SNAPSHOT=target/dashboard-snapshot.json cargo test --test cluster -- dashboard::`: the
#    dashboard test (a real Prometheus scraping the built guard against the test kube-apiserver)
#    runs its scenario for two minutes and writes every panel's query range to the snapshot;
# 2. scripts/dashboard-png.py draws the snapshot with matplotlib, installed from PyPI into the
#    venv target/dashboard-venv (made on first use).
set -euo pipefail
cd "$(dirname "$0")/.."

snapshot=target/dashboard-snapshot.json
ISG_DASHBOARD_SNAPSHOT="$PWD/$snapshot" cargo test --locked --test cluster -- dashboard::every_panel
venv=target/dashboard-venv
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet 'matplotlib==3.11.2'
fi
"$venv/bin/python" scripts/dashboard-png.py "$snapshot" docs/dashboard.png
printf 'dashboard-png.sh: wrote docs/dashboard.png (%s bytes) from %s\n' "$(stat -c %s docs/dashboard.png)" "$snapshot" >&2
