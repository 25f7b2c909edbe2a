#!/usr/bin/env python3
"""Latency of fleet tools at scale, over one keep-alive connection (stdlib only).

usage: fleet_probe.py HOST:PORT TOKEN COUNT     -> prints one RESULT line per tool
       fleet_probe.py HOST:PORT TOKEN --online  -> prints the number of online agents
       fleet_probe.py HOST:PORT TOKEN --reported -> prints the fewest agents that reported any table
       fleet_probe.py HOST:PORT TOKEN --execute PID COUNT -> one read-only instruction to every
           online agent: seconds until every response is stored, the server's peak RSS (PID)
           meanwhile, then query_responses latency over those rows
       fleet_probe.py HOST:PORT TOKEN --confined CONFINED_TOKEN COUNT -> list_agents and
           query_inventory as TOKEN (fleet-wide) and as CONFINED_TOKEN (one management group),
           the two callers' calls interleaved: each one's p50 and the ratio
"""
import http.client
import json
import random
import sys
import time


def poster(address, token):
    """A function that posts one JSON-RPC request (METHOD, PARAMS) over one keep-alive
    connection and returns the decoded answer."""
    conn = http.client.HTTPConnection(address, timeout=60)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
               "Accept": "application/json", "MCP-Protocol-Version": "2025-06-18"}

    def post(method, params=None):
        request = {"jsonrpc": "2.0", "id": 1, "method": method}
        if params is not None:
            request["params"] = params
        conn.request("POST", "/mcp", json.dumps(request), headers)
        return json.loads(conn.getresponse().read())
    return post


def caller(address, token):
    post = poster(address, token)

    def call(tool, arguments):
        answer = post("tools/call", {"name": tool, "arguments": arguments})
        result = answer.get("result") or {}
        if result.get("isError") or "error" in answer:
            raise SystemExit(f"{tool} failed: {answer}")
        return result["structuredContent"]
    return call


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))


def execute(call, pid, count):
    start = time.perf_counter()
    started = call("execute_instruction", {"definition": "os_facts", "scope": "status = online"})
    accepted = time.perf_counter() - start
    execution, targeted = started["execution_id"], started["targeted"]
    peak = rss_kib(pid)
    while True:
        status = call("get_execution_status", {"execution_id": execution, "limit": 1})
        peak = max(peak, rss_kib(pid))
        if status["finished"]:
            break
        time.sleep(0.1)
    elapsed = time.perf_counter() - start
    print(f"RESULT execute_instruction os_facts to {targeted} agents: answered in {accepted * 1000:.0f} ms, "
          f"every response stored in {elapsed:.1f} s ({status['counts']}); server peak RSS meanwhile {peak / 1024:.1f} MiB")
    # Walk every page by cursor, keeping each page's start for the random reads below.
    rows, cursors, cursor = 0, [None], None
    while True:
        args = {"execution_id": execution, "limit": 100}
        if cursor is not None:
            args["cursor"] = cursor
        page = call("query_responses", args)
        rows += len(page["rows"])
        cursor = page["next_cursor"]
        if not page["result_truncated_by_cap"] or cursor is None:
            break
        cursors.append(cursor)
    loads = {
        f"query_responses over {rows} rows, a page of 100 from a random cursor":
            lambda: call("query_responses", dict({"execution_id": execution, "limit": 100},
                                                 **({"cursor": c} if (c := random.choice(cursors)) else {}))),
        f"query_responses over {rows} rows, where arch = this host's (every row matches; first page)":
            lambda: call("query_responses", {"execution_id": execution, "limit": 100, "where": {"arch": "x86_64"}}),
        f"aggregate_responses over {rows} rows, group by kernel":
            lambda: call("aggregate_responses", {"execution_id": execution, "group_by": "kernel", "of": "cpu_count"}),
    }
    for name, load in loads.items():
        for _ in range(3):
            load()
        times = []
        for _ in range(count):
            t0 = time.perf_counter()
            load()
            times.append((time.perf_counter() - t0) * 1000)
        print(f"RESULT {name}: p50 {percentile(times, 50):.2f} ms, p99 {percentile(times, 99):.2f} ms ({count} calls)")


def confined(address, token, confined_token, count):
    callers = {"fleet-wide": caller(address, token), "confined": caller(address, confined_token)}
    loads = {
        "list_agents (first page of 100)": ("list_agents", {"limit": 100}),
        "query_inventory users (first page of 100)": ("query_inventory", {"table": "users", "limit": 100}),
    }
    for name, (tool, arguments) in loads.items():
        times = {who: [] for who in callers}
        seen = {who: call(tool, arguments) for who, call in callers.items()}
        for _ in range(5):
            for call in callers.values():
                call(tool, arguments)
        for _ in range(count):
            for who, call in callers.items():
                start = time.perf_counter()
                call(tool, arguments)
                times[who].append((time.perf_counter() - start) * 1000)
        p50 = {who: percentile(t, 50) for who, t in times.items()}
        sizes = {who: len(answer.get("agents", answer.get("rows", []))) for who, answer in seen.items()}
        total = seen["confined"].get("total")
        print(f"RESULT {name}: fleet-wide p50 {p50['fleet-wide']:.2f} ms ({sizes['fleet-wide']} on the page), "
              f"confined p50 {p50['confined']:.2f} ms ({sizes['confined']} on the page"
              + (f", {total} in its group" if total is not None else "") + f"): ratio {p50['confined'] / p50['fleet-wide']:.2f}x ({count} calls each)")


def main():
    address, token = sys.argv[1], sys.argv[2]
    call = caller(address, token)
    if sys.argv[3] == "--online":
        # While thousands of agents connect from this one address, the server's cap on
        # unauthenticated connections per address may turn the probe away: none seen yet.
        try:
            print(call("get_fleet_posture_fast", {})["online"])
        except OSError:
            print(0)
        return
    if sys.argv[3] == "--reported":
        tables = call("list_inventory_tables", {})["tables"]
        print(min(t["agents_reported"] for t in tables if t["agents_reported"] > 0) if any(
            t["agents_reported"] for t in tables) else 0)
        return
    if sys.argv[3] == "--execute":
        execute(call, int(sys.argv[4]), int(sys.argv[5]))
        return
    if sys.argv[3] == "--confined":
        confined(address, token, sys.argv[4], int(sys.argv[5]))
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


if __name__ == "__main__":
    main()
