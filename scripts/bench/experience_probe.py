#!/usr/bin/env python3
"""Latency of the experience reads at scale, over one keep-alive connection (stdlib only):
get_dex_perf_fleet, list_dex_perf_devices and get_dex_perf_cohort_diff (tag KEY, even against
odd) at their default windows and at longer ones: the first call (which makes the summary the
server keeps for a sample interval), and p50 and p90 of COUNT calls each after it.

First, the floor: a ping and a one-agent list_agents page, p50 and p90 of 40 each.

usage: experience_probe.py HOST:PORT TOKEN COUNT TAG_KEY
"""
import sys
import time

from fleet_probe import caller, percentile, poster

# What fleet_probe.caller waits for an answer.
TIMEOUT_S = 60


def floor(address, token, count=40):
    """What any call waits for meanwhile: a ping and a one-agent page, p50 and p90."""
    post = poster(address, token)
    call = caller(address, token)
    for name, once in [
        ("ping", lambda: post("ping")),
        ("list_agents {'limit': 1}", lambda: call("list_agents", {"limit": 1})),
    ]:
        times = []
        for _ in range(count):
            start = time.perf_counter()
            once()
            times.append((time.perf_counter() - start) * 1000)
        print(f"RESULT floor {name}: p50 {percentile(times, 50):.1f} ms, p90 {percentile(times, 90):.1f} ms", flush=True)


def main():
    address, token, count, key = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    call = caller(address, token)
    floor(address, token)
    cohort = {"key": f"tag:{key}", "a": "even", "b": "odd"}
    # The default windows first: a long window's read goes on in the server after the probe
    # stops waiting for it, and would be timed with the reads after it.
    reads = [
        ("get_dex_perf_fleet", {}),
        ("list_dex_perf_devices", {"metric": "cpu"}),
        ("get_dex_perf_cohort_diff", dict(cohort)),
        ("get_dex_perf_fleet", {"window": "7d"}),
        ("list_dex_perf_devices", {"metric": "cpu", "window_minutes": 1440}),
        ("get_dex_perf_cohort_diff", dict(cohort, window="30d")),
    ]
    for tool, arguments in reads:
        start = time.perf_counter()
        try:
            call(tool, arguments)
        except TimeoutError:
            # A window the recent views do not hold may read for longer than the probe waits:
            # said, and the next read is timed on a new connection.
            print(f"RESULT {tool} {arguments}: first call over {TIMEOUT_S} s (timed out)", flush=True)
            call = caller(address, token)
            continue
        first = (time.perf_counter() - start) * 1000
        times = []
        for _ in range(count):
            start = time.perf_counter()
            answer = call(tool, arguments)
            times.append((time.perf_counter() - start) * 1000)
        shown = {k: answer[k] for k in ("count", "verdict", "devices") if k in answer and not isinstance(answer[k], list)}
        print(f"RESULT {tool} {arguments}: first {first:.0f} ms, then p50 {percentile(times, 50):.1f} ms, "
              f"p90 {percentile(times, 90):.1f} ms "
              f"({count} calls; {shown})", flush=True)


if __name__ == "__main__":
    main()
