#!/usr/bin/env python3
"""How soon SSE frames reach a client, over one keep-alive connection (stdlib only).

usage: sse_latency.py HOST:PORT TOKEN AGENT_ID CALLS -> prints one RESULT line per measure

Each call is execute_instruction os_facts on one agent with a progress token, answered as
Server-Sent Events: a first progress frame (written as soon as the execution is committed),
one more when the agent answers, then the result. Measured from the client's side:
  first   -- request sent to the first frame's last byte: the server's work plus transport
  result  -- the last progress frame to the result frame, which the server writes back to
             back: a Nagle/delayed-ACK stall (a small segment held for an ACK) shows here as
             ~40 ms, where a socket with TCP_NODELAY shows well under a millisecond
"""
import json
import socket
import sys
import time


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))]


def read_until(sock, buffer, needle):
    """Reads into buffer until needle is in it; returns the buffer and when needle arrived."""
    while needle not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            raise SystemExit(f"the server closed the stream before {needle!r}: {buffer[-400:]!r}")
        buffer += chunk
    return buffer, time.perf_counter()


def one_call(sock, host, token, agent, n):
    body = json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
        "name": "execute_instruction", "arguments": {"definition": "os_facts", "agent_ids": [agent]},
        "_meta": {"progressToken": n}}}).encode()
    head = (f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
            "MCP-Protocol-Version: 2025-06-18\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    sent = time.perf_counter()
    sock.sendall(head + body)
    buffer, first = read_until(sock, b"", b'"progress":0')
    buffer, _ = read_until(sock, buffer, b"\n\n")  # the first frame's end
    buffer, last_progress = read_until(sock, buffer, b'"progress":1')
    buffer, result = read_until(sock, buffer, b'"result"')
    # The chunked body's end, so the next request starts clean on this connection.
    read_until(sock, buffer, b"\r\n0\r\n\r\n")
    if b'"succeeded"' not in buffer:
        raise SystemExit(f"the call did not succeed: {buffer[-600:]!r}")
    return (first - sent) * 1000, (result - last_progress) * 1000


def main():
    address, token, agent, calls = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    firsts, gaps = [], []
    for n in range(calls):
        first, gap = one_call(sock, address, token, agent, n + 1)
        if n >= 5:  # warm-up
            firsts.append(first)
            gaps.append(gap)
    for name, values in (("first frame", firsts), ("result after last progress", gaps)):
        print(f"RESULT sse {name}: p50 {percentile(values, 50):.2f} ms, p99 {percentile(values, 99):.2f} ms, "
              f"max {max(values):.2f} ms over {len(values)} calls")


if __name__ == "__main__":
    main()
