#!/usr/bin/env python3
"""Runs the Claude Desktop entry a toolgate server printed on its first start, exactly as
Claude Desktop would: its `command`, `args` and `env`, no shell in between, spoken to over
stdio (newline-delimited JSON-RPC). Lists every tool and calls one.

    desktop_bridge.py SERVER_OUTPUT_FILE [--call NAME --args JSON] [--cwd DIR]

Prints `protocolVersion: …`, `tools: N` and, with --call, `isError: …`. Exit 0 when all of it
worked, 1 otherwise (with what the bridge said on stderr).
"""
import argparse
import json
import os
import subprocess
import sys
import threading

MARK = "Claude Desktop (claude_desktop_config.json):"


def printed_entry(path):
    """The `mcpServers` JSON printed after MARK, up to the blank line after it."""
    lines = open(path, encoding="utf-8").read().splitlines()
    start = lines.index(MARK) + 1
    end = lines.index("", start)
    return json.loads("\n".join(lines[start:end]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("server_output")
    p.add_argument("--call")
    p.add_argument("--args", default="{}")
    p.add_argument("--cwd", default=None, help="where npx runs (a directory holding the pinned mcp-remote)")
    a = p.parse_args()
    entry = printed_entry(a.server_output)["mcpServers"]["toolgate"]
    env = dict(os.environ)
    env.update(entry.get("env", {}))
    env["MCP_REMOTE_CONFIG_DIR"] = os.path.join(a.cwd or ".", ".mcp-auth")
    bridge = subprocess.Popen(
        [entry["command"], *entry["args"]],
        cwd=a.cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    said = []
    threading.Thread(target=lambda: said.extend(bridge.stderr), daemon=True).start()
    timer = threading.Timer(120, bridge.kill)
    timer.start()

    def ask(id_, method, params):
        bridge.stdin.write(json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + "\n")
        bridge.stdin.flush()
        for line in bridge.stdout:
            message = json.loads(line)
            if message.get("id") == id_:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]
        raise RuntimeError(f"the bridge ended before answering {method}")

    try:
        init = ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                     "clientInfo": {"name": "desktop-bridge-check", "version": "1"}})
        bridge.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        bridge.stdin.flush()
        print(f"protocolVersion: {init['protocolVersion']}")
        tools, cursor, n = [], None, 2
        while True:
            page = ask(n, "tools/list", {"cursor": cursor} if cursor else {})
            tools += page["tools"]
            cursor, n = page.get("nextCursor"), n + 1
            if not cursor:
                break
        print(f"tools: {len(tools)}")
        if a.call:
            result = ask(n, "tools/call", {"name": a.call, "arguments": json.loads(a.args)})
            print(f"isError: {result.get('isError', False)}")
    except Exception as e:  # noqa: BLE001 - everything here is a failed check
        print(f"FAIL: {e}", file=sys.stderr)
        print("".join(said[-40:]), file=sys.stderr)
        return 1
    finally:
        timer.cancel()
        bridge.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
