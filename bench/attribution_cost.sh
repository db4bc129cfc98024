#!/usr/bin/env bash
# What attributing each library call to the program's module and Python line costs under each tool, on
# torchvision's ResNet-18 (examples/torch_resnet, 10 steps of batch 16 on 64x64 images) and the GPT example
# (20 steps): the step time under `opscope run TOOL` with torch_mlu's attribution (the default) and with
# TORCH_MLU_ATTRIBUTION=0, side by side, alternating, ROUNDS times each, beside the plain run; medians and
# the ratios on / off (the cost of attribution) and on / plain (the tool's whole cost).
# usage: bench/attribution_cost.sh [BUILD_DIR] [ROUNDS] [TOOL...]   (default build, 5, --profile --memcheck)
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
shift $(($# > 2 ? 2 : $#))
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(--profile --memcheck)
python=/usr/bin/python3
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export PYTHONPATH="$build/python:$repo/examples/torch_mnist"
step_ms() { "$@" 2>/dev/null | sed -n 's/.* in [0-9.]* s (\([0-9.]*\) ms per step.*/\1/p'; }
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for model in resnet gpt; do
  case $model in
    resnet) script=examples/torch_resnet/main.py args=(--steps 10 --batch-size 16 --no-eval) ;;
    gpt) script=examples/torch_gpt/main.py args=(--steps 20 --no-eval --sample-tokens 0) ;;
  esac
  for tool in "${tools[@]}"; do
    plain="" on="" off=""
    for ((i = 1; i <= rounds; i++)); do
      plain+=" $(step_ms "$python" "$repo/$script" "${args[@]}")"
      on+=" $(step_ms "$build/bin/opscope" run "$tool" --out "$out" -- "$python" "$repo/$script" "${args[@]}")"
      off+=" $(TORCH_MLU_ATTRIBUTION=0 step_ms "$build/bin/opscope" run "$tool" --out "$out" -- "$python" \
        "$repo/$script" "${args[@]}")"
      rm -rf "${out:?}"/*
    done
    p=$(median "$plain") a=$(median "$on") b=$(median "$off")
    echo "$model $tool, ms per step (median of $rounds):"
    echo "  plain                         $p   [$plain ]"
    echo "  $tool, attribution off   $b   [$off ]"
    echo "  $tool, attribution on    $a   [$on ]"
    awk -v p="$p" -v a="$a" -v b="$b" \
      'BEGIN { printf "  attribution: %.3fx (on / off); the tool: %.2fx (on / plain)\n", a / b, a / p }'
  done
done
