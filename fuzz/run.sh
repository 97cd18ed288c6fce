#!/usr/bin/env bash
# A long, bounded fuzz run of the review reader (tests/local/fuzz_reader.rs), reusing the test build.
# Usage: fuzz/run.sh [CASES_PER_STRATEGY] [SECONDS]   (defaults: 200000 cases, 600 s at most)
# Prints the inputs tried and the time of each strategy; exits non-zero on a crash or a timeout.
set -euo pipefail
cd "$(dirname "$0")/.."
cases="${1:-200000}"
seconds="${2:-600}"
ISG_FUZZ_CASES="$cases" timeout "$seconds" \
  cargo test --test local fuzz_reader:: -- --nocapture --test-threads=2 2>&1 | grep -E '^fuzz |test result|panicked'
