#!/usr/bin/env python3
"""Writes a synthetic catalogue of N builtin::echo tools (tools.yaml + policy.yaml) into DIR.

Used by scripts/bench_catalogue.sh. The tools spread over securables and operation classes so
that every tier decision (allow, approval, deny) occurs; their hints follow the class rules.
"""
import sys
from pathlib import Path

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
out = Path(sys.argv[2] if len(sys.argv) > 2 else "target/bench-catalogue")
out.mkdir(parents=True, exist_ok=True)
securables = [f"Area{i}" for i in range(10)]
operations = [("Read", "read"), ("Write", "write"), ("Delete", "delete"), ("Execute", "execute")]
hints = {
    "read": (True, False, True),
    "write": (False, False, True),
    "delete": (False, True, True),
    "execute": (False, True, False),
}
lines = ["tools:"]
for i in range(n):
    securable = securables[i % len(securables)]
    operation, klass = operations[(i // len(securables)) % len(operations)]
    ro, de, idem = hints[klass]
    b = lambda v: "true" if v else "false"
    lines += [
        f"  - name: tool_{i:04d}",
        f"    title: Synthetic tool {i}",
        f"    description: Echoes its arguments ({securable}:{operation}); generated for benchmarks.",
        f"    securable: {securable}",
        f"    operation: {operation}",
        f"    annotations: {{readOnlyHint: {b(ro)}, destructiveHint: {b(de)}, idempotentHint: {b(idem)}, openWorldHint: false}}",
        "    inputSchema:",
        "      type: object",
        "      properties:",
        "        id: {type: string, minLength: 1, maxLength: 64}",
        "        count: {type: integer, minimum: 0, maximum: 1000}",
        "        tags: {type: array, items: {type: string}}",
        "      required: [id]",
        "      additionalProperties: false",
        "    outputSchema: {type: object}",
        "    handler: builtin::echo",
    ]
(out / "tools.yaml").write_text("\n".join(lines) + "\n")
(out / "policy.yaml").write_text(
    "securables: [" + ", ".join(securables) + "]\n"
    "operations: {" + ", ".join(f"{o}: {c}" for o, c in operations) + "}\n"
    """tiers:
  - name: readonly
    scope: toolgate:readonly
    allow: ["*:Read"]
  - name: operator
    scope: toolgate:operator
    allow: ["*:Read", "*:Write", "Area1:Delete"]
    approval: ["Area1:Delete"]
  - name: supervised
    scope: toolgate:supervised
    allow: ["*:*"]
    approval: ["*:Delete", "*:Execute"]
roles:
  - name: Administrator
    permissions: ["*:*"]
server:
  first_start_role: Administrator
  demo_token_tier: operator
  reviewer_permission: Area0:Write
  principal_admin_permission: Area0:Write
store_fault_retry:
  default_ms: 5000
"""
)
print(out)
