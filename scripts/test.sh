#!/usr/bin/env bash
# The whole test suite, as README.md and CI run it. Needs the Rust toolchain, Python 3 and
# Node (the real MCP clients are installed from the npm registry and PyPI on first run).
set -euo pipefail
cd "$(dirname "$0")/.."
# Snapshots are never written in CI: a stale one fails the run (see snapshots/).
export INSTA_UPDATE="${INSTA_UPDATE:-no}"
# Formatting and lints first: they are the cheapest to fail on.
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -q -- -D warnings
# Real clients (Python SDK, Inspector) and the conformance suite against the real binary.
bash scripts/test_clients.sh
# The shipped files pass the author's check with no warnings.
summary="$(cargo run -q --locked -- check)"
echo "$summary"
grep -q ' 0 errors, 0 warnings' <<<"$summary" || { echo "toolgate check: the shipped files must check clean" >&2; exit 1; }
# Unit, fixture, snapshot, cross-check and end-to-end tests (last, so their summary closes the run).
cargo test --workspace --locked
