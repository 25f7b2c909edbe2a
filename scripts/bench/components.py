"""Where a server's CPU goes, from `perf script` output (call graphs): each sample is charged to
the nearest frame (leaf first) that names a component below, so a malloc inside the audit
writer counts as the audit writer's. Prints each component's share of the samples.

    perf script -i perf.data | python3 scripts/bench/components.py
"""
import collections
import re
import sys

# Checked in this order for each frame, leaf first: the first frame that matches decides.
COMPONENTS = [
    ("audit: SQLite insert", r"append_rows|toolgate_store::sqlite|sqlite3"),
    ("audit: PostgreSQL client", r"toolgate_store::postgres|tokio_postgres|deadpool"),
    ("audit: writer and row", r"audit_writer|AuditWriter|AuditEvent|about_agents|canonical_arguments|Targets::of|redact"),
    ("schema check", r"jsonschema|Schemas::check|non_integers|has_fraction"),
    ("denial answer", r"denied_retrying|Request::denied|InvalidArguments|Denial"),
    ("JSON-RPC parse", r"jsonrpc::parse|jsonrpc::Members"),
    ("authentication", r"mcp_caller|CachedCredentials|secret_digest|http::auth|oauth"),
    ("quota", r"http::quotas"),
    ("gate (tier, RBAC)", r"toolgate_gate"),
    ("handler", r"handlers::builtin|tools::dispatch|run_handler"),
    ("answer encoding", r"structured_success|result_raw|Era::success|Reply::|mcp_endpoint::render|mcp::reply|mcp::era"),
    ("metrics", r"metrics"),
    ("correlation id", r"correlation"),
    ("call context, cancellation", r"ToolContext|Listeners|CancellationToken"),
    ("tools/call (rest)", r"tools_call|runner::"),
    ("MCP (rest)", r"toolgate::mcp"),
    ("HTTP edge (rest)", r"toolgate::http"),
    ("kernel: socket write", r"writev|sendmsg|sendto"),
    ("kernel: socket read", r"recvfrom|recvmsg|__libc_recv"),
    ("kernel: epoll", r"epoll"),
    ("threads: futex, scheduling", r"futex|schedule|Condvar|park"),
    ("hyper", r"hyper|httparse|http::header"),
    ("tokio", r"tokio"),
]
PATTERNS = [(name, re.compile(p)) for name, p in COMPONENTS]


def charge(stack, counts):
    for frame in stack:
        for name, pattern in PATTERNS:
            if pattern.search(frame):
                counts[name] += 1
                return
    counts["other"] += 1


def main():
    counts, total, stack = collections.Counter(), 0, []
    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line.strip():
            if stack:
                total += 1
                charge(stack, counts)
            stack = []
        elif line.startswith((" ", "\t")):
            parts = line.strip().split(" ", 1)
            if len(parts) == 2:
                stack.append(parts[1].rsplit(" (", 1)[0])
    if stack:
        total += 1
        charge(stack, counts)
    print(f"{total} samples")
    for name, count in counts.most_common():
        print(f"{100 * count / total:6.2f}%  {name}")


if __name__ == "__main__":
    main()
