#!/usr/bin/env bash
# The whole test suite, as README.md and CI run it. Needs only the Rust toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
# Snapshots are never written in CI: a stale one fails the run (see snapshots/).
export INSTA_UPDATE="${INSTA_UPDATE:-no}"
cargo test --workspace --locked
# The shipped files pass the author's check with no warnings.
summary="$(cargo run -q --locked -- check)"
echo "$summary"
grep -q ' 0 errors, 0 warnings' <<<"$summary" || { echo "toolgate check: the shipped files must check clean" >&2; exit 1; }
