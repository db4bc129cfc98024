#!/usr/bin/env bash
# What each opscope tool costs on PyTorch programs: torchvision's ResNet-18 (examples/torch_resnet, batch 16
# on 64x64 images) and the GPT-2-style decoder (examples/torch_gpt, batch 8 of 64 characters), each under
# `opscope run TOOL` with a plain run before it, alternating, ROUNDS times: the scripts' ms per step, the
# medians, and the ratio tool / plain. Sampled auto-compare (OP_AUTOCOMPARE_SAMPLE=first:4) runs 50 steps
# beside a plain run of 50 steps, as issue 50 asks; every other row runs STEPS steps.
# usage: bench/tool_cost_torch.sh [BUILD_DIR] [ROUNDS] [STEPS] [MODEL...]   (default build, 5, 10, resnet gpt)
# Each row prints the ratio of the medians and the median of the rounds' own ratios ("pairs": each tool run
# over the plain run just before it, which a drift of the shared machine's speed moves less).
# TOOLS="profile memcheck stats compare compare-sampled" (the default) picks the rows; stats-sampled
# (OP_CAPTURE_SAMPLE=first:4, 50 steps) is one more.
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
steps=${3:-10}
shift $(($# > 3 ? 3 : $#))
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(resnet gpt)
read -r -a rows <<<"${TOOLS:-profile memcheck stats compare compare-sampled}"
python=/usr/bin/python3
repo=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$build/bin/opscope" ] || { echo "tool_cost_torch.sh: no $build/bin/opscope (make build first)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export PYTHONPATH="$build/python:$repo/examples/torch_mnist"
step_ms() {
  local ms
  ms=$("$@" 2>/dev/null | sed -n 's/.* in [0-9.]* s (\([0-9.]*\) ms per step.*/\1/p')
  [ -n "$ms" ] || { echo "tool_cost_torch.sh: no step time from: $*" >&2; exit 1; }
  echo "$ms"
}
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for model in "${models[@]}"; do
  case $model in
    resnet) script=examples/torch_resnet/main.py args=(--batch-size 16 --no-eval) ;;
    gpt) script=examples/torch_gpt/main.py args=(--no-eval --sample-tokens 0) ;;
    *) echo "tool_cost_torch.sh: unknown model $model (resnet or gpt)" >&2; exit 2 ;;
  esac
  echo "$model, ms per step (median of $rounds, each tool's runs alternating with plain runs):"
  for row in "${rows[@]}"; do
    n=$steps env=()
    case $row in
      profile) tool=(--profile) ;;
      memcheck) tool=(--memcheck) ;;
      stats) tool=(--capture --capture-mode=stats) ;;
      compare) tool=(--compare) ;;
      compare-sampled) tool=(--compare) env=(OP_AUTOCOMPARE_SAMPLE=first:4) n=50 ;;
      stats-sampled) tool=(--capture --capture-mode=stats) env=(OP_CAPTURE_SAMPLE=first:4) n=50 ;;
      *) echo "tool_cost_torch.sh: unknown row $row" >&2; exit 2 ;;
    esac
    plain="" with=""
    for ((i = 1; i <= rounds; i++)); do
      plain+=" $(step_ms "$python" "$repo/$script" "${args[@]}" --steps "$n")"
      with+=" $(step_ms env "${env[@]}" "$build/bin/opscope" run "${tool[@]}" --out "$out" -- "$python" \
        "$repo/$script" "${args[@]}" --steps "$n")"
      rm -rf "${out:?}"/*
    done
    p=$(median "$plain") t=$(median "$with")
    # Also each round's ratio (its tool run over the plain run just before it), and their median: a slow
    # spell of the machine then moves both runs of a pair, not one median.
    ratios=$(paste -d' ' <(tr ' ' '\n' <<<"$with" | grep .) <(tr ' ' '\n' <<<"$plain" | grep .) |
      awk '{ printf " %.3f", $1 / $2 }')
    awk -v row="$row ($n steps)" -v p="$p" -v t="$t" -v pl="$plain" -v w="$with" -v r="$(median "$ratios")" \
      -v rs="$ratios" 'BEGIN { printf "  %-26s %7.1f / plain %7.1f = %.2fx   pairs %.2fx [%s ]   [%s ] [%s ]\n",
                               row, t, p, t / p, r, rs, w, pl }'
  done
done
