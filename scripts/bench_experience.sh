#!/usr/bin/env bash
# Experience at scale (a benchmark, not a test; docs/experience.md, "At scale"):
# 1. Ingest: N simulated agents (bench/agents with LOAD_EXPERIENCE=1: synthetic samples of every
#    declared metric, 12 programs and one interface) sample every 60 s and report every 60 s to a
#    release server on this machine. Over MEASURE_S seconds of steady load: the server's CPU
#    share (of one core, and by thread name: the agents' threads against the calls'), the
#    samples stored a second, and the store's growth per device.
# 2. Reads: experience_probe.py times get_dex_perf_fleet, list_dex_perf_devices and
#    get_dex_perf_cohort_diff while the agents go on reporting.
# Both run on a store with a history: the agents enrol first, then with the load and the server
# stopped bench/experience_backfill.py writes a synthetic history (HISTORY_DAYS days of hourly
# and daily rollups of HISTORY_METRICS, the last day of every metric, and a tag half/even|odd);
# then the server and the agents start again. Server pinned to core 0, the load to core 1.
# PROBE_ONLY=1 BENCH_WORK=DIR skips the enrolment and the history: it measures again on the
# store a previous run left in DIR (after a change). SETUP_ONLY=1 BENCH_WORK=DIR stops once the
# history is written (a later PROBE_ONLY run measures on it).
# Usage: scripts/bench_experience.sh [N]   (MEASURE_S=300 HISTORY_DAYS=30
#        HISTORY_METRICS=cpu_busy_pct,commit_bytes,disk_latency_ms: all 24 metrics for 30 days
#        take 3.9 MB per device in SQLite, 39 GB at 10,000 devices)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-10000}"
MEASURE_S="${MEASURE_S:-300}"
HISTORY_DAYS="${HISTORY_DAYS:-30}"
HISTORY_METRICS="${HISTORY_METRICS:-cpu_busy_pct,commit_bytes,disk_latency_ms}"
source scripts/bench/common.sh
fleet_ready "$N"
WORK="${BENCH_WORK:-$(mktemp -d)}"
SERVER=""; LOAD=""
cleanup() { [ -n "$LOAD" ] && kill "$LOAD" 2>/dev/null; [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; wait 2>/dev/null; [ -n "${BENCH_WORK:-}" ] || rm -rf "$WORK"; }
trap cleanup EXIT
DB="$WORK/data/toolgate.sqlite3"

start_server() {
  : >"$WORK/server.log"
  taskset -c 0 target/dist/toolgate serve --listen "127.0.0.1:$PORT" --data-dir "$WORK/data" \
    --experience-sample-interval 60s --experience-report-interval 60s \
    >>"$WORK/server.log" 2>"$WORK/server.err" &
  SERVER=$!
  for _ in $(seq 200); do grep -q 'serving MCP on' "$WORK/server.log" 2>/dev/null && return; sleep 0.05; done
  echo "the server did not start"; cat "$WORK/server.err"; exit 1
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Each thread's name and CPU ticks (utime + stime: the 12th and 13th fields after the name's
# closing parenthesis), so that the agents' threads (`toolgate-agents`, --agent-nice) and the
# calls' are told apart.
thread_ticks() { for t in /proc/"$1"/task/*; do sed 's/.*) //' "$t/stat" | awk -v name="$(cat "$t/comm")" '{print name, $12 + $13}'; done; }
stored() { python3 -c "import sqlite3,sys; c=sqlite3.connect('file:$DB?mode=ro', uri=True); print(c.execute('SELECT COUNT(*) FROM experience_sample').fetchone()[0])"; }
# Devices whose experience reached the server since the load started (a BENCH_WORK of an earlier
# run keeps its agents enrolled: they reconnect rather than enroll).
reporting() { python3 -c "import sqlite3; c=sqlite3.connect('file:$DB?mode=ro', uri=True); print(c.execute('SELECT COUNT(*) FROM experience_device WHERE received_at_ms >= $LOAD_STARTED_MS').fetchone()[0])"; }
store_bytes() { du -cb "$WORK"/data/toolgate.sqlite3* | tail -1 | cut -f1; }
rss_mib() { awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$SERVER/status"; }

# A token of the first start's administrator (a store of an earlier run prints none).
token() { target/dist/toolgate token create --principal admin --tier readonly --data-dir "$WORK/data" | grep -oE 'tg_[A-Za-z0-9_-]+' | head -1; }
enroll() { target/dist/toolgate enroll-token create --uses "$N" --expires-in 1h --data-dir "$WORK/data" | grep -oE 'tge_[A-Za-z0-9_-]+' | head -1; }
start_load() {
  LOAD_STARTED_MS=$(date +%s%3N)
  LOAD_EXPERIENCE=1 taskset -c 1 target/dist/toolgate-agent-load "http://127.0.0.1:$PORT" "$ENROLL" "$WORK/agents" "$N" 10000 2>"$WORK/load.err" &
  LOAD=$!
}
stop_both() {
  kill -TERM "$LOAD"; wait "$LOAD" 2>/dev/null || true; LOAD=""
  kill -TERM "$SERVER"; wait "$SERVER" 2>/dev/null || true; SERVER=""
}
# Every agent, or (past 900 s) at least 99% of them: the last few may still be reconnecting.
wait_reporting() {
  echo "$N simulated agents enrolling or reconnecting; waiting until every one has reported experience..."
  local t0; t0=$(date +%s)
  until [ "$(reporting)" -ge "$N" ] || { [ $(( $(date +%s) - t0 )) -ge 900 ] && [ "$(reporting)" -ge $(( N * 99 / 100 )) ]; }; do
    [ $(( $(date +%s) - t0 )) -lt 1800 ] || { echo "only $(reporting) of $N reported within 1800 s"; tail -5 "$WORK/load.err"; exit 1; }
    sleep 5
  done
  echo "RESULT $(reporting) of $N agents reporting experience $(( $(date +%s) - t0 )) s after the load started"
}
# A minute more, so that every agent is in its 60 s rhythm; then MEASURE_S seconds.
measure_ingest() {
  sleep 60
  local ticks0 rows0 bytes0 w0 ticks1 rows1 bytes1 w1
  ticks0=$(cpu_ticks "$SERVER"); rows0=$(stored); bytes0=$(store_bytes); w0=$(date +%s.%N)
  thread_ticks "$SERVER" >"$WORK/threads0"
  sleep "$MEASURE_S"
  ticks1=$(cpu_ticks "$SERVER"); rows1=$(stored); bytes1=$(store_bytes); w1=$(date +%s.%N)
  thread_ticks "$SERVER" >"$WORK/threads1"
  echo "RESULT server RSS under load: $(rss_mib) MiB"
  python3 - "$ticks0" "$ticks1" "$rows0" "$rows1" "$bytes0" "$bytes1" "$w0" "$w1" "$(getconf CLK_TCK)" "$N" <<'PY'
import sys
t0, t1, r0, r1, b0, b1 = map(int, sys.argv[1:7]); w0, w1 = map(float, sys.argv[7:9]); hz, n = int(sys.argv[9]), int(sys.argv[10])
wall = w1 - w0
print(f"RESULT ingest over {wall:.0f} s at {n} agents (a sample a minute each): server CPU {(t1 - t0) / hz / wall * 100:.1f}% of one core; "
      f"{(r1 - r0) / wall:.0f} metric values stored a second ({(r1 - r0) / wall * 60 / n:.1f} per agent a minute); "
      f"store grew {(b1 - b0) / wall * 86400 / n / 1e6:.2f} MB per device and day (raw samples before any retention sweep)")
PY
  python3 - "$WORK/threads0" "$WORK/threads1" "$w0" "$w1" "$(getconf CLK_TCK)" <<'PY'
import collections, sys
def by_name(path):
    ticks = collections.Counter()
    for line in open(path):
        name, t = line.rsplit(None, 1)
        ticks[name] += int(t)
    return ticks
before, after = by_name(sys.argv[1]), by_name(sys.argv[2])
wall, hz = float(sys.argv[4]) - float(sys.argv[3]), int(sys.argv[5])
# Threads that ended meanwhile took their ticks with them: a share is a lower bound.
shares = ", ".join(f"{name} {max(0, after[name] - before[name]) / hz / wall * 100:.1f}%" for name in sorted(after, key=lambda k: before[k] - after[k]))
print(f"RESULT server CPU by thread name (of one core): {shares}")
PY
}
# The reads, while the agents go on reporting (the last 15 minutes need their samples).
probe() {
  python3 scripts/bench/experience_probe.py "127.0.0.1:$PORT" "$TOKEN" "${PROBE_CALLS:-20}" half
  echo "RESULT server RSS after the reads: $(rss_mib) MiB"
}

if [ "${PROBE_ONLY:-0}" != 1 ]; then
  # Enrol the agents (the first start prints the administrator's demo token), then stop and
  # write the synthetic history into the store they are enrolled in.
  if [ -f "$DB" ]; then
    TOKEN="$(token)"; ENROLL="$(enroll)"; start_server
  else
    start_server; TOKEN="$(grep -oE 'tg_[A-Za-z0-9_-]+' "$WORK/server.log" | head -1)"; ENROLL="$(enroll)"
  fi
  start_load
  wait_reporting
  stop_both
  echo "writing a SYNTHETIC history: $HISTORY_DAYS days of $HISTORY_METRICS, a day of every metric..."
  python3 bench/experience_backfill.py "$WORK/data" --days "$HISTORY_DAYS" --metrics "$HISTORY_METRICS" --tag half
  python3 bench/experience_backfill.py "$WORK/data" --days 1
  [ "${SETUP_ONLY:-0}" != 1 ] || { echo "the store with its history is in $WORK"; exit 0; }
fi
# On the store with its history: the agents reconnect, ingest is measured, then the reads.
TOKEN="$(token)"; ENROLL="$(enroll)"
start_server
start_load
wait_reporting
measure_ingest
probe
