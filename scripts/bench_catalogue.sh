#!/usr/bin/env bash
# Build-time cost of a large catalogue: generates N builtin::echo tools (default 1000) and
# builds toolgate from them with TOOLGATE_TOOLS / TOOLGATE_POLICY, next to the shipped
# catalogue, in one run on one machine (so compare the ratios, not the absolute numbers).
#
#   scripts/bench_catalogue.sh [N] [RUNS]
#
# Reports, for the shipped catalogue and for N tools: the build script's own run time
# (median of RUNS direct runs of the compiled build script) and the time to rebuild the
# toolgate crate after the catalogue changed (dev profile, as authors build; dependencies
# already built; median of RUNS). It leaves target/ built from the shipped catalogue again.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-1000}"
RUNS="${2:-3}"
TARGET="${CARGO_TARGET_DIR:-target}"
DIR="$(python3 scripts/gen_catalogue.py "$N" "target/bench-catalogue-$N")"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
now() { date +%s.%N; }

measure() { # label tools policy
  local label="$1" tools="$2" policy="$3"
  export TOOLGATE_TOOLS="$tools" TOOLGATE_POLICY="$policy"
  cargo build -q --target-dir "$TARGET" --bin toolgate            # warm: deps and this catalogue
  local script; script="$(ls -t "$TARGET"/debug/build/toolgate-*/build-script-build | head -1)"
  local out; out="$(mktemp -d)"
  local script_times=() build_times=()
  for _ in $(seq "$RUNS"); do
    local t0; t0=$(now)
    CARGO_MANIFEST_DIR="$PWD" OUT_DIR="$out" "$script" >/dev/null
    script_times+=("$(python3 -c "print($(now) - $t0)")")
    touch "$tools"
    t0=$(now)
    cargo build -q --target-dir "$TARGET" --bin toolgate
    build_times+=("$(python3 -c "print($(now) - $t0)")")
  done
  local s b
  s=$(printf '%s\n' "${script_times[@]}" | median)
  b=$(printf '%s\n' "${build_times[@]}" | median)
  local count; count=$(grep -c '^  - name:' "$tools")
  printf '%-10s %5d tools  build script %7.3f s   rebuild after a catalogue change %7.2f s   generated %s\n' \
    "$label" "$count" "$s" "$b" "$(du -sh "$out" | cut -f1)"
  RESULT="$s $b"
  rm -rf "$out"
}

echo "toolgate catalogue build benchmark: $RUNS runs each, medians; $(nproc) cores"
measure shipped "$PWD/tools.yaml" "$PWD/policy.yaml"; read -r s1 b1 <<<"$RESULT"
measure "n=$N" "$PWD/$DIR/tools.yaml" "$PWD/$DIR/policy.yaml"; read -r s2 b2 <<<"$RESULT"
printf 'ratio n=%s / shipped: build script x%.1f, rebuild x%.1f\n' "$N" "$(python3 -c "print($s2 / $s1)")" "$(python3 -c "print($b2 / $b1)")"
unset TOOLGATE_TOOLS TOOLGATE_POLICY
cargo build -q --target-dir "$TARGET" --bin toolgate
