#!/usr/bin/env bash
# The fleet at scale (a benchmark, not a test): N simulated agents (default 10,000) through the
# real agent loop and protocol (bench/agents) against a release server on this machine.
# Prints: time for all to enroll and connect, server memory per connected agent, latency of
# list_agents / query_inventory / posture at N agents, and the time for all N to reconnect
# after a server restart; then one read-only instruction to all N: time until every response
# is stored, peak server memory meanwhile, query_responses latency over the N rows.
# Then management groups: N/100-agent groups (100 at 10,000 agents) chosen by a rule on the
# hostname, a principal with Operator on one of them and a fleet-wide Viewer: confined and
# fleet-wide list_agents and query_inventory, interleaved in one run (BENCH_GROUPS=0 skips it).
# Server pinned to core 0, the load to core 1.
# Usage: scripts/bench_fleet.sh [N]   (LOAD_TABLES=users,listening_ports,installed_software for bigger reports)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-10000}"
source scripts/bench/common.sh
fleet_ready "$N"
WORK="$(mktemp -d)"
SERVER=""; LOAD=""
cleanup() { [ -n "$LOAD" ] && kill "$LOAD" 2>/dev/null; [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

start_server() {
  : >"$WORK/server.log"
  # Default limits: agents have their own handshake and connection caps.
  taskset -c 0 target/dist/toolgate serve --listen "127.0.0.1:$PORT" --data-dir "$WORK/data" \
    >>"$WORK/server.log" 2>"$WORK/server.err" &
  SERVER=$!
  for _ in $(seq 200); do grep -q 'serving MCP on' "$WORK/server.log" 2>/dev/null && return; sleep 0.05; done
  echo "the server did not start"; cat "$WORK/server.err"; exit 1
}
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
online() { python3 scripts/bench/fleet_probe.py "127.0.0.1:$PORT" "$TOKEN" --online; }
wait_online() { # -> seconds until N online
  local t0; t0=$(date +%s.%N)
  until [ "$(online)" -ge "$N" ]; do
    python3 -c "import sys; sys.exit($(date +%s.%N) - $t0 > 600)" || { echo "not all $N online after 600 s" >&2; tail -5 "$WORK/load.err" >&2; exit 1; }
    sleep 0.5
  done
  python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')"
}

start_server
TOKEN="$(grep -oE 'tg_[A-Za-z0-9_-]+' "$WORK/server.log" | head -1)"
sleep 1
RSS_IDLE=$(rss_kib "$SERVER")
ENROLL="$(target/dist/toolgate enroll-token create --uses "$N" --expires-in 1h --data-dir "$WORK/data" | grep -oE 'tge_[A-Za-z0-9_-]+' | head -1)"
taskset -c 1 target/dist/toolgate-agent-load "http://127.0.0.1:$PORT" "$ENROLL" "$WORK/agents" "$N" 10000 2>"$WORK/load.err" &
LOAD=$!
echo "enrolling and connecting $N agents..."
ENROLLED_IN=$(wait_online)
echo "RESULT all $N agents enrolled and online in $ENROLLED_IN s"
T0=$(date +%s.%N)
until [ "$(python3 scripts/bench/fleet_probe.py "127.0.0.1:$PORT" "$TOKEN" --reported)" -ge "$N" ]; do sleep 0.5; done
python3 -c "print(f'RESULT every agent\'s inventory stored {$(date +%s.%N) - $T0:.1f} s after all were online')"
sleep 2
RSS_FULL=$(rss_kib "$SERVER")
python3 -c "print(f'RESULT server RSS: idle {$RSS_IDLE/1024:.1f} MiB, with $N agents {$RSS_FULL/1024:.1f} MiB: {($RSS_FULL-$RSS_IDLE)*1024/$N/1024:.1f} KiB per connected agent')"
python3 scripts/bench/fleet_probe.py "127.0.0.1:$PORT" "$TOKEN" 200
if [ "${BENCH_GROUPS:-100}" -gt 0 ]; then
  cli() { target/dist/toolgate "$@" --data-dir "$WORK/data"; }
  echo "creating ${BENCH_GROUPS:-100} management groups by hostname..."
  T0=$(date +%s.%N)
  for g in $(seq 0 $(( ${BENCH_GROUPS:-100} - 1 ))); do
    suffix=$(printf '%02d' "$g")
    cli group create "bench-$suffix" --rule "hostname ~ \"load-???$suffix\"" >/dev/null
  done
  python3 -c "print(f'RESULT ${BENCH_GROUPS:-100} groups created (each judging all $N agents) in {$(date +%s.%N) - $T0:.1f} s')"
  GROUP="$(cli group list | awk '$2 == "bench-07" {print $1}')"
  cli principal add bench-team >/dev/null
  cli group assign "$GROUP" bench-team Operator >/dev/null
  cli principal add bench-viewer --role Viewer >/dev/null
  CONFINED="$(cli token create --principal bench-team --tier readonly | grep -oE 'tg_[A-Za-z0-9_-]+' | head -1)"
  VIEWER="$(cli token create --principal bench-viewer --tier readonly | grep -oE 'tg_[A-Za-z0-9_-]+' | head -1)"
  python3 scripts/bench/fleet_probe.py "127.0.0.1:$PORT" "$VIEWER" --confined "$CONFINED" 200
fi
echo "one read-only instruction (os_facts) to all $N agents..."
python3 scripts/bench/fleet_probe.py "127.0.0.1:$PORT" "$TOKEN" --execute "$SERVER" 100

echo "restarting the server..."
kill -TERM "$SERVER"; wait "$SERVER" 2>/dev/null || true
start_server
BACK_IN=$(wait_online)
echo "RESULT all $N agents back online $BACK_IN s after the restarted server listened"
RSS_BACK=$(rss_kib "$SERVER")
python3 -c "print(f'RESULT server RSS after the reconnection: {$RSS_BACK/1024:.1f} MiB')"
FAILED=$(grep -c 'refused' "$WORK/load.err" || true)
echo "RESULT agents refused for good during the run: $FAILED"
