#!/usr/bin/env bash
# Two builds of the handler bench, alternated in one run: before, after, before, after, then
# the allocation counts of each. Build each with `cargo bench --locked --bench handler --no-run`
# in its own checkout and copy the printed executable aside (both checkouts name it alike).
# Usage: benches/ab.sh BEFORE_EXE AFTER_EXE [FILTER]  (FILTER as criterion takes it)
set -euo pipefail
before="$1" after="$2"
filter="${3:-decide/(typical|gateway)|read/gateway}"
for round in 1 2; do
  for side in before after; do
    exe="${!side}"
    echo "=== round $round: $side ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
    "$exe" --bench --noplot --warm-up-time 2 --measurement-time 5 "$filter" 2>&1 | grep -E '^(decide|read)/|time:'
  done
done
for side in before after; do
  echo "=== allocations: $side"
  ISG_BENCH_ALLOCS=1 "${!side}" 2>&1 | grep -E 'typical|gateway'
done
