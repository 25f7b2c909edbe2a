#!/usr/bin/env bash
# Runs the bash block of docs/approvals.md against a built binary and checks what the doc
# promises, so the walk-through stays true. Usage: scripts/doc_walkthrough.sh BINARY
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
BLOCK="$(mktemp)"
# Any free port, taken by the server itself (a port picked beforehand can be taken meanwhile).
PORT=0
# The block, minus its build line (the binary is given).
awk '/^```bash$/ {on=1; next} /^```$/ {on=0} on' docs/approvals.md | grep -v '^cargo build' >"$BLOCK"
DATA="$(mktemp -d)"
# The server's own log says why, when the block fails (it could not bind, say).
failed() { echo "$OUT"; echo "--- the server's log:"; cat "$DATA/serve.log" 2>/dev/null; echo "FAIL: $1"; exit 1; }
OUT="$(TG="$BIN" PORT="$PORT" DATA="$DATA" bash "$BLOCK" 2>&1)" || failed "the walk-through block failed"
for expect in '"code":-32006' '"status":"approved"' '"deleted_value":"staging"' '"code":-32003' 'already consumed (replay)'; do
  grep -qF "$expect" <<<"$OUT" || failed "the walk-through did not show $expect"
done
rm -rf "$BLOCK" "$DATA"
