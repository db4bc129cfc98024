#!/usr/bin/env bash
# Issue 22's goal 1: OP_CAPTURE_MODE=stats (every op, every tensor) against the plain run, side by side:
# mnist_train --steps 20 --batch-size 32 --test-size 1000 (its evaluation included) and llama_train --steps
# 20 (the default OP_CAPTURE_RING=0), and mnist with a ring of 16 calls. Rounds run the plain and the stats
# command once each, in turn, so that a slow spell of this shared machine hits both alike; the medians and
# their ratio are printed with every run.
# usage: bench/stats_cost.sh [BUILD_DIR] [ROUNDS]   (default build, 5)
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
bin="$build/bin"
out=$(mktemp -d "${TMPDIR:-/tmp}/opscope_stats_cost.XXXXXX")
trap 'rm -rf "$out"' EXIT

# shellcheck source=bench/timing.sh
source "$(dirname "$0")/timing.sh"  # seconds, median

# measure NAME RING COMMAND...: COMMAND plain and under stats capture with OP_CAPTURE_RING=RING.
measure() {
  local name=$1 ring=$2
  shift 2
  local plain="" stats=""
  for ((r = 0; r < rounds; ++r)); do
    plain+="$(seconds "$@") "
    rm -rf "$out/r"
    stats+="$(seconds env OP_CAPTURE_RING="$ring" "$bin/opscope" run --capture --capture-mode=stats --out "$out/r" -- "$@") "
  done
  grep -E '^opscope: statistics' "$out/last.log" | sed 's/, to .*//; s/^opscope: //'
  local p s
  p=$(median "$plain")
  s=$(median "$stats")
  echo "$name: plain ${plain}(median $p s); stats ${stats}(median $s s): $(awk -v a="$s" -v b="$p" 'BEGIN { printf "%.2f", a / b }')x"
}

mnist=("$bin/mnist_train" --steps 20 --batch-size 32 --test-size 1000)
measure "mnist_train --steps 20 --batch-size 32 --test-size 1000" 0 "${mnist[@]}"
measure "llama_train --steps 20" 0 "$bin/llama_train" --steps 20
# The ring of the 16 calls before a trigger: every tensor copied as it is read.
measure "mnist_train --steps 20 --batch-size 32 --test-size 1000, OP_CAPTURE_RING=16" 16 "${mnist[@]}"
