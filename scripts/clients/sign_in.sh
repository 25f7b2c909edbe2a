#!/usr/bin/env bash
# Sign-in through a real OpenID Provider (docs/sign-in.md), end to end:
#   sign_in.sh TOOLGATE_BINARY
# starts oidc-provider (scripts/clients/oidc_provider.mjs, installed by install_clients.sh)
# and toolgate with deployment settings that trust it, then runs the official Python SDK's
# OAuth flow and the bad-token checks (scripts/clients/py_oauth.py), and the TypeScript SDK
# v2's OAuth flow on both eras (scripts/clients/ts2_oauth.mjs). Everything binds 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN="$1"
export MCP_CLIENTS_DIR="${MCP_CLIENTS_DIR:-/tmp/mcp-clients}"
WORK="$(mktemp -d)"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
OP_PORT="$(free_port)"
TG_PORT="$(free_port)"
ISSUER="http://127.0.0.1:$OP_PORT"
MCP="http://127.0.0.1:$TG_PORT/mcp"

(cd "$MCP_CLIENTS_DIR" && source ./env.sh && exec node "$OLDPWD/scripts/clients/oidc_provider.mjs" "$OP_PORT" "$MCP") \
  >"$WORK/provider.out" 2>"$WORK/provider.err" &
PIDS+=($!)
for _ in $(seq 100); do grep -q '^issuer: ' "$WORK/provider.out" && break; sleep 0.1; done
grep -q '^issuer: ' "$WORK/provider.out" || { echo "the provider did not start"; cat "$WORK/provider.err"; exit 1; }

mkdir -p "$WORK/data"
cat >"$WORK/data/toolgate.yaml" <<YAML
public_url: http://127.0.0.1:$TG_PORT
oauth:
  issuers:
    - issuer: $ISSUER
      # The expiry check waits for a 2-second token to lapse.
      leeway: 1s
  group_roles:
    - {idp_group: fleet-viewers, role: Viewer}
    - {idp_group: fleet-ops, role: Operator}
    - {idp_group: fleet-admins, role: Administrator}
YAML
"$BIN" serve --listen "127.0.0.1:$TG_PORT" --data-dir "$WORK/data" >"$WORK/toolgate.out" 2>"$WORK/toolgate.err" &
PIDS+=($!)
for _ in $(seq 100); do grep -q 'serving MCP on' "$WORK/toolgate.out" && break; sleep 0.1; done
grep -q 'serving MCP on' "$WORK/toolgate.out" || { echo "toolgate did not start"; cat "$WORK/toolgate.out" "$WORK/toolgate.err"; exit 1; }

if ! "$MCP_CLIENTS_DIR/venv/bin/python" scripts/clients/py_oauth.py "$MCP" "$ISSUER" 2>"$WORK/py.err"; then
  echo "--- python"; tail -30 "$WORK/py.err"
  echo "--- provider"; grep -v 'WARNING\|NOTICE' "$WORK/provider.err" || true
  echo "--- toolgate"; tail -20 "$WORK/toolgate.err"
  exit 1
fi
# The TypeScript SDK v2's OAuth client, on each era it speaks.
for era in modern legacy; do
  if ! (cd "$MCP_CLIENTS_DIR" && source ./env.sh && node "$OLDPWD/scripts/clients/ts2_oauth.mjs" "$MCP" --era "$era") 2>"$WORK/ts2.err"; then
    echo "--- typescript v2 ($era)"; tail -30 "$WORK/ts2.err"
    echo "--- toolgate"; tail -20 "$WORK/toolgate.err"
    exit 1
  fi
done
# The audit log names the person: ana was provisioned at her first sign-in.
"$BIN" principal list --data-dir "$WORK/data" | grep -E "^ana .* ana at $ISSUER \(ana@example.com\)" >/dev/null ||
  { echo "FAIL: ana is not listed with her sign-in"; "$BIN" principal list --data-dir "$WORK/data"; exit 1; }
echo "ok: ana's principal names her issuer, subject and email"
