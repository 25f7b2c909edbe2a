# Shared by scripts/bench.sh and scripts/profile.sh (sourced): a server pinned to core 0, and
# a throwaway database for the PostgreSQL backend.

# start LOG COMMAND...: runs COMMAND on core 0, logging to LOG, until it says where it
# listens. Sets PID and URL (its /mcp endpoint); appends PID to PIDS for the exit trap.
start() {
  local log="$1"; shift
  taskset -c 0 "$@" >"$log" 2>&1 &
  PID=$!; PIDS+=("$PID")
  for _ in $(seq 200); do grep -qE 'listening on|serving MCP on' "$log" && break; sleep 0.05; done
  # The address on the line that announces it (the log names the database's address too).
  URL="http://$(grep -E 'listening on|serving MCP on' "$log" | grep -oE '127\.0\.0\.1:[0-9]+' | head -1)/mcp"
  sleep 0.5
}

# database_for BACKEND NAME: sets DATABASE to `serve`'s arguments for BACKEND: none for
# SQLite (the data directory's file), else a new database NAME on TOOLGATE_TEST_POSTGRES.
database_for() {
  DATABASE=()
  [ "$1" = postgres ] || return 0
  psql "$TOOLGATE_TEST_POSTGRES" -qc "CREATE DATABASE $2"
  DATABASE=(--database "${TOOLGATE_TEST_POSTGRES%/*}/$2" --replica "$2")
}

# fleet_ready N: what the fleet benchmarks (bench_fleet.sh, bench_experience.sh) need before
# they start: taskset, the release server and the load built, an open-file limit for N agents
# (every agent is a socket on each side), and a free port (sets PORT).
fleet_ready() {
  command -v taskset >/dev/null || { echo "needs taskset (util-linux)"; exit 1; }
  cargo build -q --profile dist --locked -p toolgate --bin toolgate && cargo build -q --profile dist --locked -p toolgate-agent-load
  ulimit -n "$(ulimit -Hn)"
  [ "$(ulimit -n)" -gt $(($1 + 1000)) ] || { echo "the open-file limit ($(ulimit -n)) is too low for $1 agents"; exit 1; }
  PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
}
