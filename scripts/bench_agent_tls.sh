#!/usr/bin/env bash
# Server memory per connected agent, plain against mutual TLS (a benchmark, not a test): N
# simulated agents (default 2,000) through the real agent loop (bench/agents), first to a
# server whose agent listener is plain HTTP, then to one whose agent listener asks for client
# certificates (a KEK, an agent CA, a localhost pair made here with openssl), one after the
# other in one run. Each agent enrolls, takes its certificate and reconnects with it. Prints the
# server's RSS idle and with N agents, per agent, for both, and the ratio.
# Server pinned to core 0, the load to core 1.
# Usage: scripts/bench_agent_tls.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-2000}"
command -v taskset >/dev/null || { echo "needs taskset (util-linux)"; exit 1; }
command -v openssl >/dev/null || { echo "needs openssl (the localhost certificate)"; exit 1; }
cargo build -q --profile dist --locked -p toolgate --bin toolgate && cargo build -q --profile dist --locked -p toolgate-agent-load
ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -gt $((N * 2 + 1000)) ] || { echo "the open-file limit ($(ulimit -n)) is too low for $N agents"; exit 1; }
WORK="$(mktemp -d)"
SERVER=""; LOAD=""
cleanup() { [ -n "$LOAD" ] && kill "$LOAD" 2>/dev/null; [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# A CA and a localhost certificate it signed, for the agent listener.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=bench CA" -days 2 \
  -keyout "$WORK/ca.key" -out "$WORK/ca.pem" -addext basicConstraints=critical,CA:TRUE 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
  -keyout "$WORK/server.key" -out "$WORK/server.csr" 2>/dev/null
openssl x509 -req -in "$WORK/server.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -CAcreateserial -days 2 \
  -extfile <(printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE') -out "$WORK/server.pem" 2>/dev/null
target/dist/toolgate kek generate --version 1 >"$WORK/kek.txt"

# measure NAME SCHEME [SERVER FLAGS...]: prints "NAME idle_kib full_kib"
measure() {
  local name=$1 scheme=$2; shift 2
  local port agents data="$WORK/$name"
  port=$(free_port); agents=$(free_port)
  : >"$WORK/$name.log"
  taskset -c 0 target/dist/toolgate serve --listen "127.0.0.1:$port" --agent-listen "127.0.0.1:$agents" \
    --data-dir "$data" "$@" >>"$WORK/$name.log" 2>"$WORK/$name.err" &
  SERVER=$!
  for _ in $(seq 200); do grep -q 'serving MCP on' "$WORK/$name.log" 2>/dev/null && break; sleep 0.05; done
  local token; token="$(grep -oE 'tg_[A-Za-z0-9_-]+' "$WORK/$name.log" | head -1)"
  sleep 1
  local idle; idle=$(rss_kib "$SERVER")
  local enroll; enroll="$(target/dist/toolgate enroll-token create --uses "$N" --expires-in 1h --data-dir "$data" | grep -oE 'tge_[A-Za-z0-9_-]+' | head -1)"
  LOAD_CA="$WORK/ca.pem" taskset -c 1 target/dist/toolgate-agent-load "$scheme://localhost:$agents" "$enroll" "$WORK/$name-agents" "$N" 5000 2>"$WORK/$name-load.err" &
  LOAD=$!
  local t0; t0=$(date +%s)
  until [ "$(python3 scripts/bench/fleet_probe.py "127.0.0.1:$port" "$token" --online)" -ge "$N" ]; do
    [ $(( $(date +%s) - t0 )) -lt 600 ] || { echo "not all $N online in $name after 600 s" >&2; tail -5 "$WORK/$name-load.err" >&2; exit 1; }
    sleep 0.5
  done
  # Every agent's reports stored and the connections settled (mutual TLS: every agent has
  # reconnected with its certificate by now).
  sleep 5
  local full; full=$(rss_kib "$SERVER")
  kill "$LOAD"; wait "$LOAD" 2>/dev/null || true; LOAD=""
  kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; SERVER=""
  echo "$name $idle $full"
}

echo "$N agents, plain agent listener..."
read -r _ PLAIN_IDLE PLAIN_FULL < <(measure plain http)
echo "$N agents, agent listener with mutual TLS..."
read -r _ MTLS_IDLE MTLS_FULL < <(measure mtls https --kek-file "$WORK/kek.txt" \
  --agent-tls-cert "$WORK/server.pem" --agent-tls-key "$WORK/server.key")
python3 - "$N" "$PLAIN_IDLE" "$PLAIN_FULL" "$MTLS_IDLE" "$MTLS_FULL" <<'PY'
import sys
n, pi, pf, mi, mf = (int(x) for x in sys.argv[1:])
plain, mtls = (pf - pi) / n, (mf - mi) / n
print(f"RESULT plain: idle {pi/1024:.1f} MiB, with {n} agents {pf/1024:.1f} MiB: {plain:.1f} KiB per connected agent")
print(f"RESULT mutual TLS: idle {mi/1024:.1f} MiB, with {n} agents {mf/1024:.1f} MiB: {mtls:.1f} KiB per connected agent")
print(f"RESULT mutual TLS / plain per agent: {mtls/plain:.2f}x")
PY
