#!/usr/bin/env bash
# Real MCP clients written by others against the real binary:
#   - the official Python SDK (auto mode, which probes 2026-07-28 first, and legacy mode):
#     connect with a token, list every tool, call one;
#   - the Python SDK on the dynamic tool list: enable_toolset, then list_changed (legacy mode);
#   - the MCP Inspector CLI: list with --strict (no schema errors or warnings) and call a tool;
#   - mcp-remote (Claude Desktop's bridge) running the entry the first start printed;
#   - an engine principal's credentials, rotated from the console commands, used by the
#     Python SDK through the overlap and after the confirm;
#   - the TypeScript SDK v2 (scripts/clients/ts2_client.mjs) on 2026-07-28 and the handshake
#     era: list, a call with progress, a held call approved and recalled;
#   - the official TypeScript SDK (scripts/clients/ts_client.mjs): connect, list, and a call
#     with a progress handler; the Python SDK too, in both eras: an instruction on the local
#     agent streams its progress (SSE) before its result;
#   - sign-in through a real OpenID Provider (oidc-provider): the Python SDK's OAuth flow and
#     the TypeScript SDK v2's on both eras
#     from the 401 to a call, and tokens for another audience, expired, or too small;
#   - the official conformance suite (0.1.16 active; alpha --requirements 2025-11-25 and
#     2026-07-28, the tasks extension's scenarios with it) against a binary built from
#     tests/conformance/tools.yaml, each run with its expected-failures file
#     (tests/conformance/expected-failures-*.yml); the skills extension's (SEP-2640) against
#     the shipped server (docs/conformance.md).
# Installs the clients first (scripts/clients/install_clients.sh: npm registry and PyPI only).
set -euo pipefail
cd "$(dirname "$0")/.."
export MCP_CLIENTS_DIR="${MCP_CLIENTS_DIR:-/tmp/mcp-clients}"
WORK="$(mktemp -d)"
bash scripts/clients/install_clients.sh "$MCP_CLIENTS_DIR" >"$WORK/install.log" 2>&1 || { cat "$WORK/install.log"; exit 1; }
PY="$MCP_CLIENTS_DIR/venv/bin/python"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

# The shipped binary and the conformance fixture, both from the suite's one build.
bash scripts/suite_build.sh
cp target/conformance/toolgate "$WORK/toolgate-conformance"
cp target/debug/toolgate "$WORK/toolgate"

start() { # name binary [serve flags] -> sets URL and TOKEN
  local out="$WORK/$1.out"
  "$2" serve --listen 127.0.0.1:0 --data-dir "$WORK/$1-data" "${@:3}" >"$out" 2>"$WORK/$1.err" &
  PIDS+=($!)
  for _ in $(seq 100); do grep -q 'serving MCP on' "$out" && break; sleep 0.1; done
  URL="$(grep -oE 'http://[0-9.:]+/mcp' "$out" | tail -1)"
  TOKEN="$(grep -oE 'tg_[A-Za-z0-9_-]+' "$out" | head -1)"
  [ -n "$URL" ] && [ -n "$TOKEN" ] || { echo "FAIL: $1 did not start"; cat "$out" "$WORK/$1.err"; exit 1; }
}

OK=0
check() { # description command... ; the command's output is kept for the expectations
  local what="$1"; shift
  if "$@" >"$WORK/last" 2>&1; then OK=$((OK + 1)); echo "ok: $what"; else echo "FAIL: $what"; cat "$WORK/last"; exit 1; fi
}
expect() { # pattern description
  if grep -qE "$1" "$WORK/last"; then OK=$((OK + 1)); echo "ok: $2"; else echo "FAIL: $2 (no /$1/)"; cat "$WORK/last"; exit 1; fi
}

absent() { # pattern description
  if grep -qE "$1" "$WORK/last"; then echo "FAIL: $2 (found /$1/)"; cat "$WORK/last"; exit 1; else OK=$((OK + 1)); echo "ok: $2"; fi
}

start shipped "$WORK/toolgate" --local-agent
# The local agent (this machine) enrolls within a second or two: tags act on real agents only.
for _ in $(seq 150); do
  AGENT="$("$WORK/toolgate" agent list --data-dir "$WORK/shipped-data" 2>/dev/null | grep -oE 'agt-[0-9a-f]{16}' || true)"
  [ -n "$AGENT" ] && break; sleep 0.2
done
[ -n "$AGENT" ] || { echo "FAIL: the local agent did not enroll"; cat "$WORK/shipped.err"; exit 1; }
check "python SDK, auto mode: connect, list, call list_agents" "$PY" scripts/clients/py_client.py "$URL" "$TOKEN" --call list_agents --args '{}'
expect '^protocolVersion: 2026-07-28' "python SDK auto mode settled on 2026-07-28"
expect '^tools: [1-9]' "python SDK listed the tools"
expect '^isError: False' "python SDK call succeeded"
expect '^BEGIN_UNTRUSTED_AGENT_DATA$' "python SDK got list_agents' agent-reported text marked untrusted"
expect '^END_UNTRUSTED_AGENT_DATA$' "python SDK got the end of the untrusted block"
check "python SDK, legacy mode: connect, list, call list_plugin_config" "$PY" scripts/clients/py_client.py "$URL" "$TOKEN" --mode legacy --call list_plugin_config --args '{}'
expect '^protocolVersion: 2025-11-25' "python SDK legacy mode negotiated 2025-11-25"
expect '^isError: False' "python SDK legacy call succeeded"
# Toolsets (docs/toolsets.md): the dynamic list, grown by enable_toolset in a session, and
# the client told through notifications/tools/list_changed on its GET stream.
check "python SDK, legacy mode: the dynamic list grows with enable_toolset and list_changed" "$PY" scripts/clients/py_toolsets.py "$URL/x/dynamic" "$TOKEN" executions execute_instruction
expect '^notifications/tools/list_changed: received' "python SDK heard the list change"
check "inspector CLI: tools/list --strict" bash scripts/clients/inspector_list.sh "$URL" "$TOKEN" --strict
expect '^tools: [1-9]' "inspector listed the tools without schema errors"
absent 'schemaFindings' "inspector's strict lint found nothing to warn of either"
# The Inspector calls only what it listed: it chooses the toolset it calls from (the path).
CALL=set_tag ARGS="{\"agent_id\":\"$AGENT\",\"key\":\"env\",\"value\":\"prod\"}" check "inspector CLI: tools/call set_tag from /mcp/x/targeting" bash scripts/clients/inspector_list.sh "$URL/x/targeting" "$TOKEN"
expect '^isError: False' "inspector call succeeded"

# Claude Desktop's entry exactly as the first start printed it: mcp-remote (pinned) with its
# args and env, no shell, over stdio.
desktop() { (source "$MCP_CLIENTS_DIR/env.sh" && "$PY" scripts/clients/desktop_bridge.py "$WORK/shipped.out" --cwd "$MCP_CLIENTS_DIR/mcp-remote" "$@"); }
check "mcp-remote, the printed Claude Desktop entry as is: list, call list_agents" desktop --call list_agents
expect '^tools: [1-9]' "mcp-remote listed the tools through the bridge"
expect '^isError: False' "mcp-remote's call succeeded"

EXEC_ARGS="{\"definition\":\"os_facts\",\"agent_ids\":[\"$AGENT\"]}"
check "python SDK, auto mode: execute_instruction with a progress callback" "$PY" scripts/clients/py_client.py "$URL" "$TOKEN" --call execute_instruction --args "$EXEC_ARGS" --progress
expect '^last progress: 1/1' "python SDK (2026-07-28) received streamed progress up to 1 of 1 agents"
check "python SDK, legacy mode: execute_instruction with a progress callback" "$PY" scripts/clients/py_client.py "$URL" "$TOKEN" --mode legacy --call execute_instruction --args "$EXEC_ARGS" --progress
expect '^last progress: 1/1' "python SDK (2025-11-25) received streamed progress up to 1 of 1 agents"
ts_client() { (cd "$MCP_CLIENTS_DIR" && source ./env.sh && node "$OLDPWD/scripts/clients/ts_client.mjs" "$@"); }
check "typescript SDK: connect, list, execute_instruction with onprogress" ts_client "$URL" "$TOKEN" --call execute_instruction --args "$EXEC_ARGS" --progress
expect '"progressNotifications":[1-9]' "typescript SDK counted the streamed progress notifications"
expect '"isError":false' "typescript SDK call succeeded"

# The TypeScript SDK v2 (@modelcontextprotocol/client 2.4.0) on both of its eras: list, a call
# with progress, and a held call: the ticket, a person's decision, the recall.
ts2() { (cd "$MCP_CLIENTS_DIR" && source ./env.sh && node "$OLDPWD/scripts/clients/ts2_client.mjs" "$@"); }
SUPERVISED="$("$WORK/toolgate" token create --principal admin --tier supervised --expires-in 1d --data-dir "$WORK/shipped-data" | grep -oE 'tg_[A-Za-z0-9_-]+' | head -1)"
"$WORK/toolgate" principal add reviewer --role Administrator --data-dir "$WORK/shipped-data" >/dev/null
for era in modern legacy; do
  check "typescript SDK v2 ($era): connect, list, execute_instruction with onprogress" ts2 "$URL" "$TOKEN" --era "$era" --call execute_instruction --args "$EXEC_ARGS" --progress
  expect '"progressNotifications":[1-9]' "typescript SDK v2 ($era) counted the streamed progress notifications"
  expect '"isError":false' "typescript SDK v2 ($era) call succeeded"
  TAG="{\"agent_id\":\"$AGENT\",\"key\":\"ts2\""
  check "typescript SDK v2 ($era): set_tag" ts2 "$URL" "$SUPERVISED" --era "$era" --call set_tag --args "$TAG,\"value\":\"$era\"}"
  check "typescript SDK v2 ($era): delete_tag is held for a person" ts2 "$URL" "$SUPERVISED" --era "$era" --call delete_tag --args "$TAG}"
  expect '"held":true' "typescript SDK v2 ($era) got the ticket (-32006)"
  HELD="$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["call"]["approval_id"])' "$WORK/last")"
  "$WORK/toolgate" approvals approve "$HELD" --as reviewer --data-dir "$WORK/shipped-data" >/dev/null
  check "typescript SDK v2 ($era): the recall of the approved ticket" ts2 "$URL" "$SUPERVISED" --era "$era" --call delete_tag --args "$TAG,\"approval_id\":\"$HELD\"}"
  expect '"isError":false' "typescript SDK v2 ($era) recall ran the call"
done

# An engine principal (docs/identities.md), made and rotated with the console commands, its
# credentials used by the Python SDK: both work in the overlap; after the confirm the old one
# is refused (within the authentication cache's lifetime: 1 s by default).
TG=("$WORK/toolgate")
DATA=(--data-dir "$WORK/shipped-data")
"${TG[@]}" engine create engine:sdk-client --owner admin --display-name "SDK client" --justification "client tests" --classification internal "${DATA[@]}" >/dev/null
"${TG[@]}" engine assign engine:sdk-client Viewer "${DATA[@]}" >/dev/null
OLD_SECRET="$("${TG[@]}" engine mint engine:sdk-client --days 1 "${DATA[@]}" | grep -oE 'tg_[A-Za-z0-9_-]+')"
check "python SDK as an engine principal: list_agents" "$PY" scripts/clients/py_client.py "$URL" "$OLD_SECRET" --call list_agents --args '{}'
expect '^isError: False' "python SDK call with the engine principal's credential succeeded"
ROTATED="$("${TG[@]}" engine rotate engine:sdk-client --overlap-days 1 "${DATA[@]}")"
NEW_SECRET="$(grep -oE 'tg_[A-Za-z0-9_-]+' <<<"$ROTATED")"
NEW_ID="$(grep -oE 'tok_[0-9a-f]{16}' <<<"$ROTATED" | sed -n 2p)"
check "python SDK with the predecessor in the overlap" "$PY" scripts/clients/py_client.py "$URL" "$OLD_SECRET" --call list_agents --args '{}'
check "python SDK with the successor in the overlap" "$PY" scripts/clients/py_client.py "$URL" "$NEW_SECRET" --call list_agents --args '{}'
printf '%s\n' "$NEW_SECRET" | "${TG[@]}" engine confirm engine:sdk-client "$NEW_ID" "${DATA[@]}" >/dev/null
refused_old() {
  for _ in $(seq 50); do
    "$PY" scripts/clients/py_client.py "$URL" "$OLD_SECRET" >/dev/null 2>&1 || return 0
    sleep 0.2
  done
  echo "the predecessor still works after the confirm"; return 1
}
check "after the confirm the predecessor is refused" refused_old
check "python SDK with the successor after the confirm" "$PY" scripts/clients/py_client.py "$URL" "$NEW_SECRET" --call list_agents --args '{}'

check "python SDK, legacy mode: execute_instruction with log lines at info" "$PY" scripts/clients/py_client.py "$URL" "$TOKEN" --mode legacy --call execute_instruction --args "$EXEC_ARGS" --log-level info
expect '^log messages: [1-9]' "python SDK (2025-11-25, logging/setLevel) received the call's log lines on its stream"
check "python SDK, auto mode: execute_instruction with log lines at info" "$PY" scripts/clients/py_client.py "$URL" "$TOKEN" --call execute_instruction --args "$EXEC_ARGS" --log-level info
expect '^log messages: [1-9]' "python SDK (2026-07-28, _meta logLevel) received the call's log lines on its stream"
# policy.yaml confirm (supervised: PluginConfig:Write): the SDK's elicitation callback says yes.
CONFIRM_ARGS='{"plugin":"sync","key":"interval","value":"30"}'
check "python SDK, legacy mode: a confirm-kind call, confirmed through elicitation on its stream" "$PY" scripts/clients/py_client.py "$URL" "$SUPERVISED" --mode legacy --call set_plugin_config --args "$CONFIRM_ARGS" --elicit accept
expect '^elicitations: 1' "python SDK (2025-11-25) was asked once"
expect '^isError: False' "python SDK (2025-11-25) confirm-kind call ran"
check "python SDK, auto mode: a confirm-kind call, confirmed through input_required" "$PY" scripts/clients/py_client.py "$URL" "$SUPERVISED" --call set_plugin_config --args "$CONFIRM_ARGS" --elicit accept
expect '^elicitations: 1' "python SDK (2026-07-28) was asked once, in an input_required round"
expect '^isError: False' "python SDK (2026-07-28) confirm-kind call ran"

# Prompts and resources: a real prompt with an argument, a real agent's resource.
check "python SDK, auto mode: list prompts, get investigate_agent" "$PY" scripts/clients/py_client.py "$URL" "$TOKEN" --prompt investigate_agent --prompt-args "{\"agent_id\":\"$AGENT\"}"
expect '^listed: yes' "python SDK (2026-07-28) listed investigate_agent"
expect "^message\\[0\\] user: \"$AGENT\"\$" "python SDK got investigate_agent with the agent id JSON-quoted on its own line"
expect '^message\[0\] user: END_UNTRUSTED_MCP_ARGUMENT agent_id$' "python SDK saw the untrusted-argument markers"
check "python SDK, legacy mode: list resources, read the agent's resource" "$PY" scripts/clients/py_client.py "$URL" "$TOKEN" --mode legacy --read "agent://$AGENT"
expect '^listed: yes' "python SDK (2025-11-25) listed agent://$AGENT"
expect "^text: .*\"agent_id\":\"$AGENT\"" "python SDK read the agent's details from its resource"
check "python SDK, auto mode: read the agent's resource" "$PY" scripts/clients/py_client.py "$URL" "$TOKEN" --read "agent://$AGENT"
expect "^text: .*\"agent_id\":\"$AGENT\"" "python SDK (2026-07-28) read the agent's details from its resource"

check "docs/approvals.md walk-through (ticket, console approval, recall, replay refused)" bash scripts/doc_walkthrough.sh "$WORK/toolgate"
check "sign-in through oidc-provider with the python and typescript v2 SDKs' OAuth flows (docs/sign-in.md)" bash scripts/clients/sign_in.sh "$WORK/toolgate"
sed -n 's/^ok: /    /p' "$WORK/last"

SHIPPED_URL="$URL" SHIPPED_TOKEN="$TOKEN"
start conformance "$WORK/toolgate-conformance"
conformance() { # label expected-failures [args]
  local label="$1" expected="$2"; shift 2
  # The suite's closing "N passed, N failed" counts the expected failures too: say so.
  if bash scripts/clients/conformance.sh "$URL" "$TOKEN" -- --expected-failures "$expected" "$@" >"$WORK/last" 2>&1; then
    OK=$((OK + 1))
    echo "ok: conformance $label: $(grep -E '^conformance: scenarios' "$WORK/last" | sed -E 's/; failed: .*//') (the rest expected: $expected)"
    sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/    checks: \1 ok, \2 in expected-failure scenarios/p' "$WORK/last"
  else
    echo "FAIL: conformance $label"; cat "$WORK/last"; exit 1
  fi
}
conformance "0.1.16 active" tests/conformance/expected-failures-active.yml
CONFORMANCE=alpha conformance "alpha --requirements 2025-11-25" tests/conformance/expected-failures-2025-11-25.yml --requirements 2025-11-25
CONFORMANCE=alpha conformance "alpha --requirements 2026-07-28" tests/conformance/expected-failures-2026-07-28.yml --requirements 2026-07-28
# The skills extension's scenarios (SEP-2640), against the shipped server: toolgate declares
# no skills, so every check is not applicable (docs/conformance.md says why); they run so that
# the day it declares the extension, they judge it.
URL="$SHIPPED_URL" TOKEN="$SHIPPED_TOKEN"
for scenario in sep-2640-skills-directory sep-2640-skills-enumeration sep-2640-skills-manifest; do
  CONFORMANCE=alpha conformance "alpha $scenario (shipped server)" tests/conformance/expected-failures-2026-07-28.yml --scenario "$scenario"
  expect 'did not declare the io.modelcontextprotocol/skills extension' "$scenario: not applicable, as docs/conformance.md says"
done
echo "client tests: all $OK checks ok"
