#!/usr/bin/env bash
# What the multi-rank tools cost a whole data-parallel run: `mpirun -np 4 llama_train --ddp` (its default
# sizes, evaluation included) under libopscope.so with
#   none         OP_FLIGHT_RECORDER=0: the hook loaded, no tool on (the anchor)
#   recorder     the flight recorder (on by default in a rank of several)          goal: <= 2 % over none
#   consistency  the recorder and OP_RANK_CONSISTENCY=1 (hashes, the calls kept,
#                the ranks' files compared during the run)                         goal: <= 10 % over none
# Rounds run each setting once, in turn (each round starting with the next one), so that a slow spell of
# this shared machine hits all of them alike; the medians and every run are shown, and the ratios of the
# medians.
# usage: bench/ddp_cost.sh [BUILD_DIR] [ROUNDS] [STEPS] [RANKS]   (default build, 5, 100, 4)
# (4 ranks on a 2-core machine share cores: what one rank adds also slows the others, as they wait for it
# in the next collective; RANKS=2 gives each rank a core, as on a cluster.)
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
steps=${3:-100}
ranks=${4:-4}
bin="$build/bin"
out=$(mktemp -d "${TMPDIR:-/tmp}/opscope_ddp_cost.XXXXXX")
trap 'rm -rf "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # CI and this machine run as root

# shellcheck source=bench/timing.sh
source "$(dirname "$0")/timing.sh"  # seconds, median

job=(mpirun -np "$ranks" --oversubscribe "$bin/llama_train" --ddp --steps "$steps")
declare -A env=([none]="OP_FLIGHT_RECORDER=0" [recorder]="" [consistency]="OP_RANK_CONSISTENCY=1")
declare -A times round
settings=(none recorder consistency)
echo "== mpirun -np $ranks llama_train --ddp --steps $steps (evaluation included): $rounds rounds"
for ((r = 0; r < rounds; ++r)); do
  # Each round starts with the next setting: the place in a round matters on this machine (the first run
  # of a round was the fastest by a few per cent whatever it ran).
  for ((i = 0; i < ${#settings[@]}; ++i)); do
    s=${settings[$(((r + i) % ${#settings[@]}))]}
    rm -rf "$out/results"
    # shellcheck disable=SC2086  # the setting's variable, or none
    t=$(seconds env ${env[$s]} "$bin/opscope" run --out "$out/results" -- "${job[@]}")
    times[$s]+="$t "
    round[$s,$r]=$t
  done
done
for s in "${settings[@]}"; do
  printf '%-12s median %7.2f s   runs: %s\n' "$s" "$(median "${times[$s]}")" "${times[$s]}"
done
base=$(median "${times[none]}")
for s in recorder consistency; do
  # The ratio of the medians, and the median of the rounds' own ratios (each against the run with no tool
  # of the same round: less swayed by a slow spell).
  ratios=""
  for ((r = 0; r < rounds; ++r)); do
    ratios+="$(awk -v a="${round[$s,$r]}" -v b="${round[none,$r]}" 'BEGIN { printf "%.4f", a / b }') "
  done
  awk -v a="$(median "${times[$s]}")" -v b="$base" -v s="$s" -v p="$(median "$ratios")" \
    'BEGIN { printf "%-12s %.3fx the run with no tool (%+.1f %%); rounds: median ratio %.3f (%+.1f %%)\n",
             s, a / b, (a / b - 1) * 100, p, (p - 1) * 100 }'
done
