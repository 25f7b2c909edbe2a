#!/usr/bin/env python3
"""A handshake-era client with the official Python SDK (2.x) grows its tool list on demand.

Usage: py_toolsets.py URL TOKEN TOOLSET EXPECTED_TOOL

URL chooses the dynamic list (e.g. http://127.0.0.1:3001/mcp/x/dynamic). The client:
  1. connects in legacy mode (initialize: a session, with its GET stream),
  2. lists the tools: EXPECTED_TOOL must not be there, find_tools and enable_toolset must,
  3. calls enable_toolset {toolset: TOOLSET},
  4. waits (10 s at most) for notifications/tools/list_changed through the SDK's message handler,
  5. lists again: EXPECTED_TOOL must be there now.
Prints one line per step; exit 0 when all held, 1 otherwise.
"""
from __future__ import annotations

import asyncio
import sys


async def run(url: str, token: str, toolset: str, expected: str) -> int:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import ToolListChangedNotification

    changed = asyncio.Event()

    async def on_message(message: object) -> None:
        root = getattr(message, "root", message)
        if isinstance(message, ToolListChangedNotification) or isinstance(root, ToolListChangedNotification):
            changed.set()

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30.0))
    async with http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode="legacy", cache=None, message_handler=on_message) as client:
            before = [t.name for t in (await client.list_tools()).tools]
            print(f"before: {len(before)} tools: {', '.join(before)}")
            if expected in before or "enable_toolset" not in before or "find_tools" not in before:
                print(f"FAILED: the dynamic list should hold find_tools and enable_toolset, not {expected}")
                return 1
            answer = await client.call_tool("enable_toolset", {"toolset": toolset})
            print(f"enable_toolset: isError={answer.is_error} {answer.structured_content}")
            try:
                await asyncio.wait_for(changed.wait(), timeout=10)
            except TimeoutError:
                print("FAILED: no notifications/tools/list_changed within 10 s")
                return 1
            print("notifications/tools/list_changed: received")
            after = [t.name for t in (await client.list_tools()).tools]
            print(f"after: {len(after)} tools")
            if expected not in after:
                print(f"FAILED: {expected} is not listed after enable_toolset")
                return 1
    return 0


def main() -> int:
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        return asyncio.run(run(*sys.argv[1:]))
    except BaseException as e:  # anyio wraps errors in ExceptionGroups
        while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
            e = e.exceptions[0]
        print(f"FAILED ({type(e).__name__}): {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
