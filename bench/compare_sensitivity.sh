#!/usr/bin/env bash
# How small a fault auto-compare catches, per dtype, op class and verdict (OP_AUTOCOMPARE_VERDICT=class, the
# default, against =tolerance, the dtype's atol/rtol alone), and whether clean runs stay clean beside it.
#  1. For float32, float16 and bfloat16, one op of each class that llama_train runs (exact: embedding_forward;
#     elementwise: silu; reduction/GEMM: linear, rms_norm_forward), a fault scale=1+m on 1 % and 5 % of the
#     op's outputs (MLU_SIM_FAULT=op/dtype:scale=1+m@fraction), m = 1e-7, 1e-6, ..., 1e-1 in turn: the
#     smallest m for which that op is the first failing op of a one-step run (only that op compared).
#  2. Clean runs of every C++ demo in every dtype under auto-compare, and of the PyTorch examples: failed ops.
# Prints a markdown table (docs/compare.md's "Sensitivity" is one run of it).
# usage: bench/compare_sensitivity.sh [BUILD_DIR]   (default build; about 5 minutes on 2 cores)
set -euo pipefail
build=${1:-build}
bin="$build/bin"
hook="$(cd "$build/lib" && pwd)/libopscope.so"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
python=/usr/bin/python3

# caught DTYPE OP FRACTION VERDICT M: whether OP is the first failing op with the fault planted.
caught() {
  local dtype=$1 op=$2 fraction=$3 verdict=$4 m=$5
  local factor
  factor=$(awk -v m="$m" 'BEGIN { printf "%.10g", 1 + m }')
  for attempt in 1 2; do  # a run that ended without auto-compare's summary is run again once
    env LD_PRELOAD="$hook" OP_AUTOCOMPARE=1 OP_AUTOCOMPARE_LIST="$op" OP_AUTOCOMPARE_VERDICT="$verdict" \
      OPSCOPE_RESULT_DIR="$out" MLU_SIM_FAULT="$op/$dtype:scale=$factor@$fraction" \
      "$bin/llama_train" --steps 1 --dtype "$dtype" >"$out/log" 2>&1 || true
    grep -q "ops compared" "$out/log" && break
    echo "compare_sensitivity: $dtype $op $fraction $verdict $m: no summary: $(tail -1 "$out/log")" >&2
  done
  grep -q "first failing op: $op #" "$out/log"
}

# smallest DTYPE OP FRACTION VERDICT: the smallest m caught, or "> 1e-1"; "not run" when the op never ran
# (a fault below the dtype's resolution, 1 + 1e-4 in float16, changes nothing: the smallest m caught is at
# least about the dtype's epsilon).
smallest() {
  for m in 1e-7 1e-6 1e-5 1e-4 1e-3 1e-2 1e-1; do
    if caught "$@" "$m"; then
      echo "$m"
      return
    fi
    if ! grep -q "ops compared" "$out/log"; then
      echo "run failed"
      return
    fi
    if grep -q " 0 ops compared" "$out/log"; then
      echo "not run"
      return
    fi
  done
  echo "> 1e-1"
}

echo "| dtype | op (class) | fraction | smallest fault caught: class verdict | tolerance verdict |"
echo "|---|---|---|---|---|"
for dtype in float32 float16 bfloat16; do
  for op in "embedding_forward exact" "silu elementwise" "linear reduction" "rms_norm_forward reduction"; do
    set -- $op
    for fraction in 0.01 0.05; do
      echo "| $dtype | $1 ($2) | $(awk -v f="$fraction" 'BEGIN { print f * 100 }') % | $(smallest "$dtype" "$1" "$fraction" class) | $(smallest "$dtype" "$1" "$fraction" tolerance) |"
    done
  done
done

echo
echo "| clean run | ops compared | failed |"
echo "|---|---|---|"
clean() {
  local name=$1
  shift
  env LD_PRELOAD="$hook" OP_AUTOCOMPARE=1 OPSCOPE_RESULT_DIR="$out" PYTHONPATH="$build/python" "$@" >"$out/log" 2>&1 || true
  local line
  line=$(grep -o "autocompare: [0-9]* ops compared.*failed" "$out/log" || echo "autocompare: ? ops compared, ? failed")
  echo "| $name | $(echo "$line" | awk '{ print $2 }') | $(echo "$line" | sed -E 's/.* ([0-9?]+) failed/\1/') |"
}
for dtype in float32 float16 bfloat16; do
  clean "llama_train --dtype $dtype --steps 10" "$bin/llama_train" --dtype "$dtype" --steps 10
  clean "mnist_train --dtype $dtype --steps 20 --batch-size 32 --test-size 500" "$bin/mnist_train" \
    --dtype "$dtype" --steps 20 --batch-size 32 --test-size 500
done
if "$python" -c 'import torch' 2>/dev/null; then
  clean "torch_mnist --max-steps 10 (with evaluation)" "$python" examples/torch_mnist/main.py --epochs 1 \
    --max-steps 10 --train-size 640 --test-size 200
  clean "torch_gpt --steps 4 (evaluation, sampling)" "$python" examples/torch_gpt/main.py --steps 4 \
    --eval-iters 1 --sample-tokens 20
  clean "torch_resnet resnet18 --steps 2 --batch-size 8" "$python" examples/torch_resnet/main.py --steps 2 \
    --batch-size 8 --eval-batches 1
fi
