#!/usr/bin/env bash
# Where a call's time goes: toolgate under one load at a time, profiled. For each LOAD (read,
# invalid, write, list; default all four) it starts a dist build with line tables on a
# generated catalogue of PROFILE_TOOLS tools, pinned to core 0 with wrk on core 1 as bench.sh
# runs it, records `perf` with DWARF call graphs for PROFILE_SECONDS, then writes
# docs/flamegraphs/LOAD-BACKEND.svg (inferno, from crates.io) and prints each component's share of the
# samples (scripts/bench/components.py). Not a test: its figures go into docs/performance.md.
#
#   scripts/profile.sh                    # 60 tools, SQLite, 4 s per load
#   PROFILE_BACKEND=postgres scripts/profile.sh read
#   PROFILE_BIN=path/to/toolgate scripts/profile.sh   # a binary built with line tables already
set -euo pipefail
cd "$(dirname "$0")/.."
BACKEND="${PROFILE_BACKEND:-sqlite}"
if [ "$BACKEND" = postgres ] && [ -z "${TOOLGATE_TEST_POSTGRES:-}" ]; then
  exec bash scripts/with_postgres.sh bash "$0" "$@"
fi
LOADS="${*:-read invalid write list}"
TOOLS="${PROFILE_TOOLS:-60}"
SECONDS_PER_LOAD="${PROFILE_SECONDS:-4}"
OUT=target/profile
mkdir -p "$OUT" docs/flamegraphs
command -v perf >/dev/null || { apt-get update -qq && apt-get install -y -qq linux-perf >/dev/null; }
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
INFERNO="$OUT/tools/bin"
[ -x "$INFERNO/inferno-flamegraph" ] || cargo install -q --locked inferno --version 0.12.8 --root "$OUT/tools"

BIN="${PROFILE_BIN:-$OUT/target/dist/toolgate}"
if [ -z "${PROFILE_BIN:-}" ]; then
  python3 scripts/gen_catalogue.py "$TOOLS" "$OUT/catalogue-$TOOLS" >/dev/null
  # Its own target directory: line tables change every crate's build, and must not evict the
  # benchmark's dist build.
  CARGO_TARGET_DIR="$OUT/target" CARGO_PROFILE_DIST_DEBUG=line-tables-only \
    TOOLGATE_TOOLS="$OUT/catalogue-$TOOLS/tools.yaml" TOOLGATE_POLICY="$OUT/catalogue-$TOOLS/policy.yaml" \
    cargo build -q --locked --profile dist --bin toolgate
fi

source scripts/bench/common.sh
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
for load in $LOADS; do
  data="$OUT/data-$load-$BACKEND"; rm -rf "$data"
  database_for "$BACKEND" "profile_${load}_$$"
  start "$OUT/server-$load-$BACKEND.log" "$BIN" serve --listen 127.0.0.1:0 --data-dir "$data" "${DATABASE[@]}"
  url="$URL"
  token=$(grep -oE 'tg_[A-Za-z0-9_-]+' "$OUT/server-$load-$BACKEND.log" | head -1)
  BENCH_MODE="$load" BENCH_TOKEN="$token" taskset -c 1 wrk -t1 -c16 -d1s -s scripts/bench/mcp.lua "$url" >/dev/null
  BENCH_MODE="$load" BENCH_TOKEN="$token" taskset -c 1 wrk -t1 -c16 -d"$((SECONDS_PER_LOAD + 2))s" \
    -s scripts/bench/mcp.lua "$url" >"$OUT/wrk-$load-$BACKEND.txt" &
  wrk_pid=$!
  sleep 0.5
  perf record -q -F 1999 -g --call-graph dwarf,32768 -p "$PID" -o "$OUT/$load-$BACKEND.data" -- sleep "$SECONDS_PER_LOAD" 2>/dev/null
  wait "$wrk_pid"
  kill -TERM "$PID"; wait "$PID" 2>/dev/null || true
  perf script -i "$OUT/$load-$BACKEND.data" 2>/dev/null >"$OUT/$load-$BACKEND.stacks"
  "$INFERNO/inferno-collapse-perf" <"$OUT/$load-$BACKEND.stacks" \
    | "$INFERNO/inferno-flamegraph" --minwidth 2 --title "toolgate $load call, $TOOLS tools, $BACKEND" >"docs/flamegraphs/$load-$BACKEND.svg"
  echo "== $load ($BACKEND, $TOOLS tools): $(grep RESULT "$OUT/wrk-$load-$BACKEND.txt" | sed -E 's/.*rps=([0-9.]+).*/\1 req\/s under perf/')"
  python3 scripts/bench/components.py <"$OUT/$load-$BACKEND.stacks"
done
