#!/usr/bin/env bash
# The hot path, measured side by side in one run: a floor server (bare axum, the same
# precomputed tools/list bytes, compiled validators, no auth/gate/audit: bench/floor) and
# toolgate, built from the same generated catalogue of builtin::echo tools, each pinned to
# core 0 while wrk (pinned to core 1) loads it. For each catalogue size: tools/list, a read
# call, a state-changing call (audit row durable before the reply) and an invalid call,
# with varying bodies (scripts/bench/mcp.lua). Prints req/s, p50, p99 and the ratio to the
# floor; idle and peak RSS; and checks that the audit log holds exactly one row per answered
# call; then how soon SSE frames reach a client (scripts/bench/sse_latency.py, on the shipped
# catalogue with its local agent). Not a test: its table goes into docs/performance.md.
#
# toolgate runs on each backend in BENCH_BACKENDS: the embedded SQLite file, and PostgreSQL
# (a throwaway cluster from scripts/with_postgres.sh, unpinned: on two cores it shares them
# with the server and wrk, so its ratios are a floor on what a database host of its own gives).
#
#   scripts/bench.sh                      # 60 and 600 tools, 10 s per load after 2 s warm-up
#   BENCH_SIZES="100" BENCH_SECONDS=5 BENCH_BACKENDS=postgres scripts/bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BACKENDS="${BENCH_BACKENDS:-sqlite postgres}"
if [[ " $BACKENDS " == *" postgres "* ]] && [ -z "${TOOLGATE_TEST_POSTGRES:-}" ]; then
  exec bash scripts/with_postgres.sh bash "$0" "$@"
fi
SECONDS_PER_LOAD="${BENCH_SECONDS:-10}"
WARMUP="${BENCH_WARMUP:-2}"
SIZES="${BENCH_SIZES:-60 600}"
RSS_TOOLS="${BENCH_RSS_TOOLS:-100}"      # idle RSS and the 1M-call soak use this catalogue
SOAK_CALLS="${BENCH_SOAK_CALLS:-1000000}"
CONNECTIONS="${BENCH_CONNECTIONS:-16}"
SSE_CALLS="${BENCH_SSE_CALLS:-200}"      # streamed execute_instruction calls for the frame latency
OUT="target/bench"
mkdir -p "$OUT"
if ! command -v wrk >/dev/null; then
  echo "installing wrk (Debian package)"; apt-get update -qq && apt-get install -y -qq wrk >/dev/null
fi
[ "$(nproc)" -ge 2 ] || { echo "bench.sh needs 2 cores (server and load on separate ones)"; exit 1; }

# BENCH_NO_BUILD=1: measure the binaries an earlier run built (target/bench/toolgate-N).
[ -n "${BENCH_NO_BUILD:-}" ] || cargo build -q --locked --profile dist -p toolgate-floor
for n in $(printf '%s\n' $SIZES $RSS_TOOLS | sort -un); do
  [ -z "${BENCH_NO_BUILD:-}" ] || { python3 scripts/gen_catalogue.py "$n" "$OUT/catalogue-$n" >/dev/null; continue; }
  python3 scripts/gen_catalogue.py "$n" "$OUT/catalogue-$n" >/dev/null
  TOOLGATE_TOOLS="$OUT/catalogue-$n/tools.yaml" TOOLGATE_POLICY="$OUT/catalogue-$n/policy.yaml" \
    cargo build -q --locked --profile dist --bin toolgate
  cp target/dist/toolgate "$OUT/toolgate-$n"
done
[ -n "${BENCH_NO_BUILD:-}" ] || cargo build -q --locked --profile dist --bin toolgate   # the shipped catalogue again

PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null || true; }
trap cleanup EXIT
kib() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$PID/status"; }
mib() { awk -v k="$1" '{printf "%.1f", $1 / 1024}' <<<"$1"; }

start() { # log command... -> PID, URL
  local log="$1"; shift
  taskset -c 0 "$@" >"$log" 2>&1 &
  PID=$!
  for _ in $(seq 200); do grep -qE 'listening on|serving MCP on' "$log" && break; sleep 0.05; done
  # The address on the line that announces it (the log names the database's address too).
  URL="http://$(grep -E 'listening on|serving MCP on' "$log" | grep -oE '127\.0\.0\.1:[0-9]+' | head -1)/mcp"
  sleep 0.5
}

load() { # mode token -> the measured run's RESULT line, plus answered=N (warm-up included)
  # `list-c1`: tools/list over one keep-alive connection, where a stall per answer (Nagle's
  # algorithm against a delayed ACK) shows as a rate of tens per second.
  local mode="$1" token="$2" warm main conns="$CONNECTIONS"
  [ "$mode" = list-c1 ] && { mode=list; conns=1; }
  warm=$(BENCH_MODE="$mode" BENCH_TOKEN="$token" taskset -c 1 wrk -t1 -c"$conns" -d"${WARMUP}s" -s scripts/bench/mcp.lua "$URL" | grep RESULT)
  main=$(BENCH_MODE="$mode" BENCH_TOKEN="$token" taskset -c 1 wrk -t1 -c"$conns" -d"${SECONDS_PER_LOAD}s" -s scripts/bench/mcp.lua "$URL" | grep RESULT)
  echo "$main answered=$(( $(field requests "$warm") + $(field requests "$main") ))"
}
field() { sed -E "s/.*$1=([0-9.]+).*/\1/" <<<"$2"; }

echo "toolgate hot-path benchmark: $(nproc) cores, server on core 0, wrk -t1 -c$CONNECTIONS on core 1, ${WARMUP}s warm-up + ${SECONDS_PER_LOAD}s per load"
printf '%-6s %-9s %-8s %10s %9s %9s %8s\n' tools server load "req/s" "p50 ms" "p99 ms" ratio
for n in $SIZES; do
  declare -A FLOOR=()
  start "$OUT/floor-$n.log" target/dist/toolgate-floor "$OUT/catalogue-$n/tools.yaml" "$OUT/catalogue-$n/policy.yaml" operator 127.0.0.1:0
  floor_idle=$(kib VmRSS)
  for mode in list list-c1 read write invalid; do
    r=$(load "$mode" "")
    FLOOR[$mode]=$(field rps "$r")
    printf '%-6s %-9s %-8s %10.0f %9.2f %9.2f %8s\n' "$n" floor "$mode" "$(field rps "$r")" \
      "$(python3 -c "print($(field p50_us "$r")/1000)")" "$(python3 -c "print($(field p99_us "$r")/1000)")" "1.00x"
  done
  floor_peak=$(kib VmHWM); kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""

  for backend in $BACKENDS; do
    data="$OUT/data-$n"; rm -rf "$data"
    database=()
    if [ "$backend" = postgres ]; then
      db="bench_${n}_$$"
      psql "$TOOLGATE_TEST_POSTGRES" -qc "CREATE DATABASE $db"
      database=(--database "${TOOLGATE_TEST_POSTGRES%/*}/$db" --replica bench)
    fi
    start "$OUT/toolgate-$n-$backend.log" "$OUT/toolgate-$n" serve --listen 127.0.0.1:0 --data-dir "$data" "${database[@]}"
    token=$(grep -oE 'tg_[A-Za-z0-9_-]+' "$OUT/toolgate-$n-$backend.log" | head -1)
    tg_idle=$(kib VmRSS)
    calls=0
    for mode in list list-c1 read write invalid; do
      r=$(load "$mode" "$token")
      [[ "$mode" = list* ]] || calls=$((calls + $(field answered "$r")))
      [ "$(field non2xx "$r")" = 0 ] || echo "  warning: $(field non2xx "$r") non-2xx answers in $mode"
      printf '%-6s %-9s %-8s %10.0f %9.2f %9.2f %7.2fx\n' "$n" "tg-$backend" "$mode" "$(field rps "$r")" \
        "$(python3 -c "print($(field p50_us "$r")/1000)")" "$(python3 -c "print($(field p99_us "$r")/1000)")" \
        "$(python3 -c "print($(field rps "$r") / ${FLOOR[$mode]})")"
    done
    tg_peak=$(kib VmHWM); kill -TERM "$PID"; wait "$PID" 2>/dev/null || true; PID=""
    if [ "$backend" = postgres ]; then
      rows=$(psql "${TOOLGATE_TEST_POSTGRES%/*}/$db" -tAc "select count(*) from audit where action like 'mcp.%'")
    else
      rows=$(python3 -c "import sqlite3; c=sqlite3.connect('$data/toolgate.sqlite3'); print(c.execute(\"select count(*) from audit where action like 'mcp.%'\").fetchone()[0])")
    fi
    # wrk stops with up to CONNECTIONS requests in flight per run (6 call runs): the server
    # answered and audited them, wrk did not count them.
    inflight=$((rows - calls))
    verdict=$([ "$inflight" -ge 0 ] && [ "$inflight" -le $((6 * CONNECTIONS)) ] && echo "one row per call; +$inflight in flight when wrk stopped" || echo MISMATCH)
    printf '%-6s %s RSS idle/peak: floor %s/%s MiB, toolgate %s/%s MiB; audit rows %s for %s calls wrk counted (%s)\n' "$n" "$backend" \
      "$(mib "$floor_idle")" "$(mib "$floor_peak")" "$(mib "$tg_idle")" "$(mib "$tg_peak")" "$rows" "$calls" "$verdict"
  done
done

# Memory: idle with RSS_TOOLS tools, then after a first short load (>= 10k read calls) and
# after SOAK_CALLS or more, counted by wrk.
data="$OUT/data-soak"; rm -rf "$data"
start "$OUT/toolgate-soak.log" "$OUT/toolgate-$RSS_TOOLS" serve --listen 127.0.0.1:0 --data-dir "$data"
token=$(grep -oE 'tg_[A-Za-z0-9_-]+' "$OUT/toolgate-soak.log" | head -1)
idle=$(kib VmRSS)
soak() { BENCH_MODE=read BENCH_TOKEN="$token" taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d"$1" -s scripts/bench/mcp.lua "$URL" | grep RESULT; }
first=$(field requests "$(soak 1s)"); after_first=$(kib VmRSS)
total=$first
while [ "$total" -lt "$SOAK_CALLS" ]; do total=$((total + $(field requests "$(soak 10s)"))); done
after_soak=$(kib VmRSS)
kill -TERM "$PID"; wait "$PID" 2>/dev/null || true; PID=""
printf 'RSS with %s tools: idle %s MiB; after %s read calls %s MiB; after %s %s MiB (%+.1f%%)\n' "$RSS_TOOLS" \
  "$(mib "$idle")" "$first" "$(mib "$after_first")" "$total" "$(mib "$after_soak")" \
  "$(python3 -c "print(100 * ($after_soak - $after_first) / $after_first)")"

# SSE frames: a streamed execute_instruction on the local agent, over one keep-alive
# connection. A frame held back for an ACK (no TCP_NODELAY) would show as ~40 ms.
data="$OUT/data-sse"; rm -rf "$data"
start "$OUT/toolgate-sse.log" target/dist/toolgate serve --listen 127.0.0.1:0 --data-dir "$data" --local-agent
token=$(grep -oE 'tg_[A-Za-z0-9_-]+' "$OUT/toolgate-sse.log" | head -1)
address="${URL#http://}"; address="${address%/mcp}"
agent=""
for _ in $(seq 100); do
  agent=$(python3 - "$address" "$token" <<'PY' || true
import http.client, json, sys
c = http.client.HTTPConnection(sys.argv[1], timeout=10)
c.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
          "params": {"name": "list_agents", "arguments": {"status": "online"}}}),
          {"Authorization": f"Bearer {sys.argv[2]}", "Content-Type": "application/json",
           "Accept": "application/json", "MCP-Protocol-Version": "2025-06-18"})
agents = json.loads(c.getresponse().read())["result"]["structuredContent"]["agents"]
print(agents[0]["agent_id"] if agents else "")
PY
)
  [ -n "$agent" ] && break; sleep 0.1
done
[ -n "$agent" ] || { echo "the local agent never came online"; exit 1; }
taskset -c 1 python3 scripts/bench/sse_latency.py "$address" "$token" "$agent" "$SSE_CALLS"
kill -TERM "$PID"; wait "$PID" 2>/dev/null || true; PID=""
