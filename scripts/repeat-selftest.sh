#!/usr/bin/env bash
# Runs the self-test many times, several at once (to load the machine as a busy CI does), and
# reports every case that failed in any run: a flaky timing shows up here, not in a user's CI.
#
#   scripts/repeat-selftest.sh [RUNS] [AT_ONCE] [-- selftest arguments]
#
# RUNS (default 50) self-tests, AT_ONCE (default 2) at a time, of the release build (built
# first). Logs go to target/repeat-selftest/, with the HTML report (every case's journal) of each
# run that failed, so a flake can be read after the fact; the exit code is 1 when any run failed.
set -euo pipefail
cd "$(dirname "$0")/.."

runs="${1:-50}"
at_once="${2:-2}"
shift $(( $# > 2 ? 2 : $# ))
[ "${1:-}" = "--" ] && shift

cargo build --quiet --release -p harness-cli
out=target/repeat-selftest
rm -rf "$out"
mkdir -p "$out"

started=$(date +%s)
seq 1 "$runs" | xargs -P "$at_once" -I{} sh -c \
  'r='"$out"'/run-{}; ./target/release/harness selftest --quiet --report "html:$r.html" "$@" > "$r.log" 2>&1;
   rc=$?; echo $rc > "$r.rc"; [ $rc = 0 ] && rm -f "$r.html"; true' \
  sh "$@"
elapsed=$(( $(date +%s) - started ))

failed_runs=0
for rc in "$out"/run-*.rc; do
  [ "$(cat "$rc")" = 0 ] || failed_runs=$((failed_runs + 1))
done
echo "repeat-selftest: $runs runs, $at_once at a time, in ${elapsed}s: $failed_runs failed"
# Each run's summary line, then the cases that went wrong, counted over all runs.
grep -hE '^selftest: [0-9]+ passed' "$out"/run-*.log | sed -E 's/ in [0-9.]+s$//' | sort | uniq -c | sort -rn
grep -hE '^selftest: [0-9]+ passed' "$out"/run-*.log | sed -E 's/.* in ([0-9.]+)s$/\1/' | sort -n \
  | awk '{ t[NR] = $1 } END { if (NR) printf "each run: fastest %ss, median %ss, slowest %ss\n", t[1], t[int((NR + 1) / 2)], t[NR] }'
# Runs in which the machine itself stalled (see cli/src/stall.rs), with the longest stall.
grep -H '^selftest: timers ran late' "$out"/run-*.log | sed -E 's/\. A deadline.*//' || true
grep -hE '^(instance|device) ' "$out"/run-*.log | sed -E 's/ +[0-9]+ms / /' | sort | uniq -c | sort -rn || true
[ "$failed_runs" = 0 ]
