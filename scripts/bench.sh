#!/usr/bin/env bash
# The hot path, measured side by side in one run: a floor server (bare axum, the same
# precomputed tools/list bytes, compiled validators, no auth/gate/audit: bench/floor) and
# toolgate, built from the same generated catalogue of builtin::echo tools, both pinned to
# core 0 while wrk (pinned to core 1) loads one of them at a time. For each catalogue size and
# backend, every load runs ROUNDS times alternating floor and toolgate (A B A B ...): the
# ratio is toolgate's req/s over the floor's run just before it, reported as the median of
# the rounds with its spread. Loads: tools/list (16 connections and one), a read call, a
# state-changing call (audit row durable before the reply; alone on one connection too, for
# the latency a lone caller sees) and an invalid call, with varying bodies
# (scripts/bench/mcp.lua). Also: idle and peak RSS; the audit log holds exactly one row per
# answered call; the machine's load average before and after each load; a read call with an
# OAuth access token against one with a tg_ token (scripts/bench/oauth_issuer.py); then memory
# over a soak and how soon SSE frames reach a client (scripts/bench/sse_latency.py, on the
# shipped catalogue with its local agent). Not a test: its tables go into docs/performance.md.
#
# toolgate runs on each backend in BENCH_BACKENDS: the embedded SQLite file, and PostgreSQL
# (a throwaway cluster from scripts/with_postgres.sh, unpinned: on two cores it shares them
# with the server and wrk, so its own CPU is reported beside each of toolgate's loads).
#
#   scripts/bench.sh                      # 60 and 600 tools, 3 rounds of 4 s per load and server
#   BENCH_SIZES="100" BENCH_SECONDS=5 BENCH_ROUNDS=5 BENCH_BACKENDS=postgres scripts/bench.sh
#   BENCH_LOADS="read invalid" BENCH_SOAK_CALLS=0 BENCH_SSE_CALLS=0 scripts/bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BACKENDS="${BENCH_BACKENDS:-sqlite postgres}"
if [[ " $BACKENDS " == *" postgres "* ]] && [ -z "${TOOLGATE_TEST_POSTGRES:-}" ]; then
  exec bash scripts/with_postgres.sh bash "$0" "$@"
fi
SECONDS_PER_LOAD="${BENCH_SECONDS:-4}"
WARMUP="${BENCH_WARMUP:-1}"
ROUNDS="${BENCH_ROUNDS:-3}"
SIZES="${BENCH_SIZES:-60 600}"
LOADS="${BENCH_LOADS:-list list-c1 read write write-c1 invalid}"
RSS_TOOLS="${BENCH_RSS_TOOLS:-100}"      # idle RSS and the 1M-call soak use this catalogue
SOAK_CALLS="${BENCH_SOAK_CALLS:-1000000}"
CONNECTIONS="${BENCH_CONNECTIONS:-16}"
SSE_CALLS="${BENCH_SSE_CALLS:-200}"      # streamed execute_instruction calls for the frame latency
OAUTH_ROUNDS="${BENCH_OAUTH_ROUNDS:-$ROUNDS}"   # read calls with an OAuth token against a tg_ one
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

source scripts/bench/common.sh
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
kib() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/status"; }
mib() { awk '{printf "%.1f", $1 / 1024}' <<<"$1"; }
stop() { kill -TERM "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# PostgreSQL's CPU time so far, in clock ticks, over all its processes.
pg_ticks() {
  local total=0 pid
  for pid in $(pgrep -x postgres || true); do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
  done
  echo "$total"
}

load() { # url mode token -> the measured run's RESULT line, plus answered=N (warm-up included)
  # `list-c1`, `write-c1`: one keep-alive connection. A stall per answer (Nagle's algorithm
  # against a delayed ACK) shows as a rate of tens per second; a write's p50 there is the
  # latency of a lone call, which batching rows under load must not lengthen.
  local url="$1" mode="$2" token="$3" warm main conns="$CONNECTIONS"
  case "$mode" in *-c1) mode="${mode%-c1}"; conns=1 ;; esac
  warm=$(BENCH_MODE="$mode" BENCH_TOKEN="$token" taskset -c 1 wrk -t1 -c"$conns" -d"${WARMUP}s" -s scripts/bench/mcp.lua "$url" | grep RESULT)
  main=$(BENCH_MODE="$mode" BENCH_TOKEN="$token" taskset -c 1 wrk -t1 -c"$conns" -d"${SECONDS_PER_LOAD}s" -s scripts/bench/mcp.lua "$url" | grep RESULT)
  echo "$main answered=$(( $(field requests "$warm") + $(field requests "$main") ))"
}
field() { sed -E "s/.*$1=([0-9.]+).*/\1/" <<<"$2"; }
# ratio A B: A's req/s over B's (wrk RESULT lines)
ratio() { python3 -c "print($(field rps "$1") / $(field rps "$2"))"; }
# median and spread of numbers: "median min max"
stats() { python3 -c 'import statistics,sys; v=sorted(map(float,sys.argv[1:])); print(statistics.median(v), v[0], v[-1])' "$@"; }

echo "toolgate hot-path benchmark: $(nproc) cores, servers on core 0, wrk -t1 -c$CONNECTIONS on core 1; per load $ROUNDS rounds of floor then toolgate, ${WARMUP}s warm-up + ${SECONDS_PER_LOAD}s each; medians [min-max]"
echo "machine load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-5s %-8s %-8s %9s %9s %8s %8s %8s %-19s %7s %s\n' tools backend load "floor/s" "tg/s" "fl p50" "tg p50" "tg p99" "ratio [spread]" "pg cpu" "load avg"
for n in $SIZES; do
  start "$OUT/floor-$n.log" target/dist/toolgate-floor "$OUT/catalogue-$n/tools.yaml" "$OUT/catalogue-$n/policy.yaml" operator 127.0.0.1:0
  floor_pid=$PID floor_url=$URL floor_idle=$(kib "$PID" VmRSS)
  for backend in $BACKENDS; do
    data="$OUT/data-$n"; rm -rf "$data"
    db="bench_${n}_$$"
    database_for "$backend" "$db"
    start "$OUT/toolgate-$n-$backend.log" "$OUT/toolgate-$n" serve --listen 127.0.0.1:0 --data-dir "$data" "${DATABASE[@]}"
    tg_pid=$PID tg_url=$URL
    token=$(grep -oE 'tg_[A-Za-z0-9_-]+' "$OUT/toolgate-$n-$backend.log" | head -1)
    tg_idle=$(kib "$tg_pid" VmRSS)
    calls=0 runs=0
    for mode in $LOADS; do
      fl_rps=() tg_rps=() ratios=() fl_p50=() tg_p50=() tg_p99=() pg=()
      load_before=$(cut -d' ' -f1 /proc/loadavg)
      for _ in $(seq "$ROUNDS"); do
        f=$(load "$floor_url" "$mode" "")
        ticks=$(pg_ticks); t0=$(date +%s.%N)
        r=$(load "$tg_url" "$mode" "$token")
        pg+=("$(python3 -c "print(($(pg_ticks) - $ticks) / $(getconf CLK_TCK) / ($(date +%s.%N) - $t0) * 100)")")
        [[ "$mode" = list* ]] || { calls=$((calls + $(field answered "$r"))); runs=$((runs + 1)); }
        [ "$(field non2xx "$r")" = 0 ] || echo "  warning: $(field non2xx "$r") non-2xx answers in $mode"
        fl_rps+=("$(field rps "$f")") tg_rps+=("$(field rps "$r")")
        ratios+=("$(ratio "$r" "$f")")
        fl_p50+=("$(field p50_us "$f")") tg_p50+=("$(field p50_us "$r")") tg_p99+=("$(field p99_us "$r")")
      done
      read -r ratio lo hi <<<"$(stats "${ratios[@]}")"
      pg_cpu=$([ "$backend" = postgres ] && printf '%.0f%%' "$(stats "${pg[@]}" | cut -d' ' -f1)" || echo -)
      printf '%-5s %-8s %-8s %9.0f %9.0f %8.2f %8.2f %8.2f %5.2fx [%.2f-%.2f]  %7s %s->%s\n' "$n" "$backend" "$mode" \
        "$(stats "${fl_rps[@]}" | cut -d' ' -f1)" "$(stats "${tg_rps[@]}" | cut -d' ' -f1)" \
        "$(python3 -c "print($(stats "${fl_p50[@]}" | cut -d' ' -f1)/1000)")" \
        "$(python3 -c "print($(stats "${tg_p50[@]}" | cut -d' ' -f1)/1000)")" \
        "$(python3 -c "print($(stats "${tg_p99[@]}" | cut -d' ' -f1)/1000)")" \
        "$ratio" "$lo" "$hi" "$pg_cpu" "$load_before" "$(cut -d' ' -f1 /proc/loadavg)"
    done
    tg_peak=$(kib "$tg_pid" VmHWM); stop "$tg_pid"
    if [ "$backend" = postgres ]; then
      rows=$(psql "${TOOLGATE_TEST_POSTGRES%/*}/$db" -tAc "select count(*) from audit where action like 'mcp.%'")
    else
      rows=$(python3 -c "import sqlite3; c=sqlite3.connect('$data/toolgate.sqlite3'); print(c.execute(\"select count(*) from audit where action like 'mcp.%'\").fetchone()[0])")
    fi
    # wrk stops with up to CONNECTIONS requests in flight per run (warm-up and measured): the
    # server answered and audited them, wrk did not count them.
    inflight=$((rows - calls))
    verdict=$([ "$inflight" -ge 0 ] && [ "$inflight" -le $((2 * runs * CONNECTIONS)) ] && echo "one row per call; +$inflight in flight when wrk stopped" || echo MISMATCH)
    printf '%-5s %s RSS idle/peak: floor %s MiB, toolgate %s/%s MiB; audit rows %s for %s calls wrk counted (%s)\n' "$n" "$backend" \
      "$(mib "$floor_idle")" "$(mib "$tg_idle")" "$(mib "$tg_peak")" "$rows" "$calls" "$verdict"
  done
  stop "$floor_pid"
done
echo "machine load at end: $(cut -d' ' -f1-3 /proc/loadavg)"

# OAuth: the read call with an issuer's access token (verified once, then its caller cached
# until the token expires) against the same call with a tg_ token, one server, interleaved.
if [ "$OAUTH_ROUNDS" -gt 0 ]; then
  n="${SIZES%% *}" data="$OUT/data-oauth"; rm -rf "$data"; mkdir -p "$data"
  # The token's tier and role are the demo token's, as the generated policy names them.
  policy="$OUT/catalogue-$n/policy.yaml"
  tier=$(sed -n 's/^  demo_token_tier: //p' "$policy") role=$(sed -n 's/^  first_start_role: //p' "$policy")
  scope=$(awk -v t="$tier" '$0 == "  - name: " t {found = 1; next} found && /^    scope: / {print $2; exit}' "$policy")
  [ -n "$scope" ] || { echo "$policy: tier $tier has no scope, so no access token can have it"; exit 1; }
  # The server's resource URI must be in the token, so its port is chosen before it starts.
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  taskset -c 1 python3 scripts/bench/oauth_issuer.py "http://127.0.0.1:$port/mcp" "$scope" bench-people \
    >"$OUT/issuer.log" 2>&1 &
  PIDS+=("$!")
  for _ in $(seq 200); do grep -q '^token: ' "$OUT/issuer.log" && break; sleep 0.05; done
  issuer=$(sed -n 's/^issuer: //p' "$OUT/issuer.log") jwt=$(sed -n 's/^token: //p' "$OUT/issuer.log")
  [ -n "$jwt" ] || { echo "the bench issuer did not start:"; cat "$OUT/issuer.log"; exit 1; }
  printf 'public_url: http://127.0.0.1:%s\noauth:\n  issuers:\n    - issuer: %s\n      provisioning: on_first_use\n  group_roles:\n    - {idp_group: bench-people, role: %s}\n' \
    "$port" "$issuer" "$role" >"$data/settings.yaml"
  start "$OUT/toolgate-oauth.log" "$OUT/toolgate-$n" serve --listen "127.0.0.1:$port" --data-dir "$data" --config "$data/settings.yaml"
  token=$(grep -oE 'tg_[A-Za-z0-9_-]+' "$OUT/toolgate-oauth.log" | head -1)
  tg_rps=() oa_rps=() ratios=()
  for _ in $(seq "$OAUTH_ROUNDS"); do
    t=$(load "$URL" read "$token") o=$(load "$URL" read "$jwt")
    for r in "$t" "$o"; do [ "$(field non2xx "$r")" = 0 ] || { echo "OAuth load: $(field non2xx "$r") non-2xx answers"; exit 1; }; done
    tg_rps+=("$(field rps "$t")") oa_rps+=("$(field rps "$o")")
    ratios+=("$(ratio "$o" "$t")")
  done
  read -r ratio lo hi <<<"$(stats "${ratios[@]}")"
  printf '%-5s sqlite   read (%s tier): tg_ token %.0f/s, OAuth access token %.0f/s: %.2fx [%.2f-%.2f] (%s rounds)\n' "$n" "$tier" \
    "$(stats "${tg_rps[@]}" | cut -d' ' -f1)" "$(stats "${oa_rps[@]}" | cut -d' ' -f1)" "$ratio" "$lo" "$hi" "$OAUTH_ROUNDS"
  stop "$PID"
fi

# Memory: idle with RSS_TOOLS tools, then after a first short load (>= 10k read calls) and
# after SOAK_CALLS or more, counted by wrk.
if [ "$SOAK_CALLS" -gt 0 ]; then
data="$OUT/data-soak"; rm -rf "$data"
start "$OUT/toolgate-soak.log" "$OUT/toolgate-$RSS_TOOLS" serve --listen 127.0.0.1:0 --data-dir "$data"
token=$(grep -oE 'tg_[A-Za-z0-9_-]+' "$OUT/toolgate-soak.log" | head -1)
idle=$(kib "$PID" VmRSS)
soak() { BENCH_MODE=read BENCH_TOKEN="$token" taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d"$1" -s scripts/bench/mcp.lua "$URL" | grep RESULT; }
first=$(field requests "$(soak 1s)"); after_first=$(kib "$PID" VmRSS)
total=$first
while [ "$total" -lt "$SOAK_CALLS" ]; do total=$((total + $(field requests "$(soak 10s)"))); done
after_soak=$(kib "$PID" VmRSS)
stop "$PID"
printf 'RSS with %s tools: idle %s MiB; after %s read calls %s MiB; after %s %s MiB (%+.1f%%)\n' "$RSS_TOOLS" \
  "$(mib "$idle")" "$first" "$(mib "$after_first")" "$total" "$(mib "$after_soak")" \
  "$(python3 -c "print(100 * ($after_soak - $after_first) / $after_first)")"
fi

# SSE frames: a streamed execute_instruction on the local agent, over one keep-alive
# connection. A frame held back for an ACK (no TCP_NODELAY) would show as ~40 ms.
[ "$SSE_CALLS" -gt 0 ] || exit 0
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
stop "$PID"
