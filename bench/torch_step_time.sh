#!/usr/bin/env bash
# The step time of the PyTorch examples on the simulated MLU beside the same script on PyTorch's own CPU
# backend, side by side in one run, alternating, ROUNDS times each: the per-step times the scripts print,
# their medians and the ratio device / CPU. The device's kernels use as many cores as PyTorch's CPU
# threads (both default to every core of the machine). Also the CPU on one thread.
#   mnist   examples/torch_mnist: 50 steps of batch 64 and the evaluation of 2,000 test digits (the data
#           generation left out)
#   resnet  examples/torch_resnet: torchvision's ResNet-18, 10 steps of batch 16 on 64x64 images
#   gpt     examples/torch_gpt: the GPT-2-style decoder (4 layers of width 128, batch 8 of 64 characters),
#           20 steps
# usage: bench/torch_step_time.sh [BUILD_DIR] [ROUNDS] [MODEL...]   (default build, 5, all three)
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
shift $(($# > 2 ? 2 : $#))
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(mnist resnet gpt)
python=/usr/bin/python3
repo=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$build/python:$repo/examples/torch_mnist"
step_ms() { "$@" 2>/dev/null | sed -n 's/.* in [0-9.]* s (\([0-9.]*\) ms per step.*/\1/p'; }
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for model in "${models[@]}"; do
  case $model in
    mnist)
      script=examples/torch_mnist/main.py args=(--max-steps 50 --batch-size 64 --test-size 2000)
      what="torch_mnist, 50 steps of batch 64 + evaluation of 2000 digits" ;;
    resnet)
      script=examples/torch_resnet/main.py args=(--steps 10 --batch-size 16 --no-eval)
      what="torch_resnet (ResNet-18), 10 steps of batch 16, 64x64" ;;
    gpt)
      script=examples/torch_gpt/main.py args=(--steps 20 --no-eval --sample-tokens 0)
      what="torch_gpt (4 layers, width 128, batch 8 x 64), 20 steps" ;;
    *) echo "torch_step_time.sh: unknown model $model (mnist, resnet or gpt)" >&2; exit 2 ;;
  esac
  mlu="" cpu="" cpu1=""
  for ((i = 1; i <= rounds; i++)); do
    mlu+=" $(step_ms "$python" "$repo/$script" "${args[@]}")"
    cpu+=" $(step_ms "$python" "$repo/$script" "${args[@]}" --no-mlu)"
    cpu1+=" $(OMP_NUM_THREADS=1 step_ms "$python" "$repo/$script" "${args[@]}" --no-mlu)"
  done
  m=$(median "$mlu") c=$(median "$cpu") c1=$(median "$cpu1")
  echo "$what, ms per step (median of $rounds):"
  echo "  MLU (torch_mlu)            $m   [$mlu ]"
  echo "  PyTorch CPU, $(nproc) threads     $c   [$cpu ]"
  echo "  PyTorch CPU, 1 thread      $c1   [$cpu1 ]"
  awk -v m="$m" -v c="$c" -v c1="$c1" 'BEGIN { printf "  ratio MLU / CPU: %.2f (1 thread: %.2f)\n", m / c, m / c1 }'
done
