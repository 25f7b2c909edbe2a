#!/usr/bin/env python3
"""Latency of fleet tools at scale, over one keep-alive connection (stdlib only).

usage: fleet_probe.py HOST:PORT TOKEN COUNT     -> prints one RESULT line per tool
       fleet_probe.py HOST:PORT TOKEN --online  -> prints the number of online agents
       fleet_probe.py HOST:PORT TOKEN --reported -> prints the fewest agents that reported any table
"""
import http.client
import json
import random
import sys
import time


def caller(address, token):
    conn = http.client.HTTPConnection(address, timeout=60)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
               "Accept": "application/json", "MCP-Protocol-Version": "2025-06-18"}

    def call(tool, arguments):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": tool, "arguments": arguments}})
        conn.request("POST", "/mcp", body, headers)
        answer = json.loads(conn.getresponse().read())
        result = answer.get("result") or {}
        if result.get("isError") or "error" in answer:
            raise SystemExit(f"{tool} failed: {answer}")
        return result["structuredContent"]
    return call


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))]


def main():
    address, token = sys.argv[1], sys.argv[2]
    call = caller(address, token)
    if sys.argv[3] == "--online":
        print(call("get_fleet_posture_fast", {})["online"])
        return
    if sys.argv[3] == "--reported":
        tables = call("list_inventory_tables", {})["tables"]
        print(min(t["agents_reported"] for t in tables if t["agents_reported"] > 0) if any(
            t["agents_reported"] for t in tables) else 0)
        return
    count = int(sys.argv[3])
    total = call("list_agents", {"limit": 1})["total"]
    loads = {
        "list_agents (page of 100)":
            lambda: call("list_agents", {"offset": random.randrange(max(1, total - 100)), "limit": 100}),
        "list_agents status=online, name prefix (page of 100)":
            lambda: call("list_agents", {"status": "online", "name_prefix": "load-0", "limit": 100}),
        "query_inventory users uid>=1000 (first page of 100)":
            lambda: call("query_inventory", {"table": "users", "limit": 100,
                                             "filters": [{"column": "uid", "op": ">=", "value": 1000}]}),
        "query_inventory listening_ports port=22 (first page of 100)":
            lambda: call("query_inventory", {"table": "listening_ports", "limit": 100,
                                             "filters": [{"column": "port", "op": "=", "value": 22}]}),
        "query_inventory users, a page at a random offset":
            lambda: call("query_inventory", {"table": "users", "limit": 100,
                                             "offset": random.randrange(max(1, total * 10))}),
        "get_fleet_posture_fast":
            lambda: call("get_fleet_posture_fast", {}),
    }
    for name, load in loads.items():
        for _ in range(5):
            load()
        times = []
        for _ in range(count):
            start = time.perf_counter()
            load()
            times.append((time.perf_counter() - start) * 1000)
        print(f"RESULT {name}: p50 {percentile(times, 50):.2f} ms, p99 {percentile(times, 99):.2f} ms ({count} calls, {total} agents)")


main()
