#!/usr/bin/env bash
# A long fuzzing run on stable Rust, release build: every target (or the one named) for
# SECONDS seconds each (default 300), from the committed corpus in fuzz/corpus/. Crashing
# inputs are written to fuzz/crashes/<target>/ and make the run fail.
#   scripts/fuzz.sh [TARGET] [SECONDS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-}"
seconds="${2:-300}"
seed="${3:-$RANDOM}"
args=(--seconds "$seconds" --seed "$seed")
[ -n "$target" ] && args=("$target" "${args[@]}")
echo "fuzzing ${target:-every target} for ${seconds}s each, seed $seed"
cargo run -q --locked --release -p toolgate-fuzz -- "${args[@]}"
