#!/usr/bin/env bash
# Issue 37's load benches, on the release commands: fake-instance standing in for a web server,
# and one `fake-device --fleet` process driving it. Prints each process's peak memory (VmHWM),
# CPU time and wall time, and the fleet's summary. Nothing here asserts a number: the results go
# to docs/book/src/performance.md with the command that made them.
#
#   scripts/bench-load.sh prompting   # 1,000 devices, a prompt each every 10 s for a minute
#   scripts/bench-load.sh linked      # 50,000 devices linked and idle (FLEET_DEVICES to change)
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-prompting}"
devices="${FLEET_DEVICES:-$([ "$kind" = linked ] && echo 50000 || echo 1000)}"
cargo build --release -q -p fake-instance -p fake-device
bin=target/release
work="$(mktemp -d)"
trap 'pkill -P $$ 2>/dev/null || true; rm -rf "$work"' EXIT
seq 1 "$devices" | sed 's/^/tok-/' > "$work/tokens.txt"
port=$(( 20000 + RANDOM % 20000 ))
ulimit -n 200000 2>/dev/null || ulimit -n "$(ulimit -Hn)"

/usr/bin/time -f 'fake-instance: peak %M kB, cpu %U s user + %S s system, wall %e s' \
  "$bin/fake-instance" --listen "127.0.0.1:$port" --tokens "$work/tokens.txt" \
  > "$work/instance.out" 2> "$work/instance.err" &
timed_instance=$!
until grep -q listening "$work/instance.out" 2>/dev/null; do sleep 0.05; done

case "$kind" in
  prompting)
    cat > "$work/bench.workload.yaml" <<YAML
name: bench-prompting
stages:
  - { duration: 10s, devices: $devices }
  - { duration: 60s, devices: $devices }
start:
  - share_session: true
every:
  - every: 10s
    prompt: summarise the last commit in two lines
YAML
    fleet_args=(--workload "$work/bench.workload.yaml" --threshold 'terminal.turn.p99<1s') ;;
  linked)
    fleet_args=(--for "${FLEET_FOR:-90s}" --threshold "link.setup.count==$devices") ;;
  *) echo "usage: $0 prompting|linked" >&2; exit 2 ;;
esac

/usr/bin/time -f 'fake-device --fleet: peak %M kB, cpu %U s user + %S s system, wall %e s' \
  "$bin/fake-device" --instance "http://127.0.0.1:$port" --fleet "$devices" \
  --tokens "$work/tokens.txt" "${fleet_args[@]}" --report "json:$work/load.json" \
  > "$work/fleet.out" 2> "$work/fleet.err" || echo "fake-device exited $?"
grep -v '^$' "$work/fleet.err" | grep -v '^  \(notifications\|events\)\.' || true
# GNU time ignores SIGINT: the signal goes to fake-instance itself.
pkill -INT -P "$timed_instance" || true
wait "$timed_instance" 2>/dev/null || true
grep 'fake-instance:' "$work/instance.err" || true
