#!/usr/bin/env bash
# Builds what the test suite runs, once, with one feature set: every test binary of the
# workspace and the `toolgate` binary the scripts start (target/debug/toolgate), as
# `cargo test` resolves features. A plain `cargo build` resolves them without the
# dev-dependencies' (tokio's test-util, bitflags' std, toolgate-store's fault-injection) and so
# compiles some thirty crates a second time; the scripts use this build instead.
#
# Also the conformance fixture: the same binary built from tests/conformance's catalogue
# (feature `conformance-catalogue` of the root crate; the dependencies' features are the
# same), kept at target/conformance/toolgate. Both stay built side by side: switching
# catalogues never recompiles the other one.
#
#   bash scripts/suite_build.sh          # a no-op when nothing changed
set -euo pipefail
cd "$(dirname "$0")/.."
# The conformance binary first: building it uplifts it to target/debug/toolgate, which the
# shipped build below then takes back. `--test layering` is a test that reads only
# Cargo.toml (it compiles against either catalogue); it makes cargo resolve the features as
# the whole suite does and build the server binary beside it.
executable="$(cargo test --workspace --locked --no-run -q --features toolgate/conformance-catalogue --test layering \
  --message-format=json-render-diagnostics \
  | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "toolgate" and "bin" in m["target"]["kind"]:
        print(m["executable"])')"
[ -x "$executable" ] || { echo "suite_build.sh: the conformance binary was not built" >&2; exit 1; }
mkdir -p target/conformance
cp -f "$executable" target/conformance/toolgate
cargo test --workspace --locked --no-run -q
