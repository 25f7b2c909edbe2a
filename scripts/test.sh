#!/usr/bin/env bash
# The whole test suite, as README.md and CI run it. Needs the Rust toolchain, Python 3 and
# Node (the real MCP clients are installed from the npm registry and PyPI on first run).
set -euo pipefail
cd "$(dirname "$0")/.."
# Snapshots are never written in CI: a stale one fails the run (see snapshots/).
export INSTA_UPDATE="${INSTA_UPDATE:-no}"
# The network-isolation test changes nftables rules inside a network namespace it creates:
# it needs nft, ip and nsenter (Debian: nftables, iproute2, util-linux), installed here as
# root when missing. Elsewhere the test says what it needs.
if [ "$(id -u)" = 0 ] && ! { command -v nft && command -v ip && command -v nsenter; } >/dev/null; then
  echo "installing nftables and iproute2 (Debian packages) for the network-isolation test"
  apt-get update -qq && apt-get install -y -qq nftables iproute2 util-linux >/dev/null
fi
# The test bed (booted Debian endpoints, tests/suite/testbed.rs) needs debootstrap and
# systemd-nspawn; its image is built once per machine and cached (scripts/testbed/image.sh),
# here in the background while the suite compiles.
if [ "$(id -u)" = 0 ] && ! { command -v debootstrap && command -v systemd-nspawn; } >/dev/null; then
  echo "installing debootstrap and systemd-container (Debian packages) for the test bed"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap systemd-container >/dev/null
fi
mkdir -p target
bash scripts/testbed/image.sh >target/testbed-image.log 2>&1 &
image_build=$!
# Formatting and lints first: they are the cheapest to fail on.
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -q -- -D warnings
# Everything the rest runs, built once with one feature set (scripts/suite_build.sh).
bash scripts/suite_build.sh
# The systemd units under deploy/ (systemd-analyze verify).
bash scripts/lint_deploy.sh
# Real clients (Python SDK, Inspector) and the conformance suite against the real binary.
bash scripts/test_clients.sh
# The approver's console in a real browser (chromium over WebDriver).
bash scripts/test_console_browser.sh
# The shipped files pass the author's check with no warnings.
summary="$(target/debug/toolgate check)"
echo "$summary"
grep -q ' 0 errors, 0 warnings' <<<"$summary" || { echo "toolgate check: the shipped files must check clean" >&2; exit 1; }
wait "$image_build" || { cat target/testbed-image.log; echo "the test bed's image could not be built" >&2; exit 1; }
cat target/testbed-image.log
# Unit, fixture, snapshot, cross-check and end-to-end tests (last, so their summary closes the run),
# with a throwaway PostgreSQL cluster (installed from Debian's packages when missing): the store
# suite runs on SQLite and on PostgreSQL, and the replica tests run two servers on it.
bash scripts/with_postgres.sh cargo test --workspace --locked
