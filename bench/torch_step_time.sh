#!/usr/bin/env bash
# The step time of examples/torch_mnist (the PyTorch MNIST example) on the simulated MLU beside the same
# script on PyTorch's own CPU backend, side by side in one run, alternating, ROUNDS times each: the
# per-step times the script prints (50 steps of batch 64 and the evaluation of 2,000 test digits, the data
# generation left out), their medians and the ratio device / CPU. Also the CPU on one thread, the
# configuration whose losses the device reproduces step by step (see docs/torch_mlu.md).
# usage: bench/torch_step_time.sh [BUILD_DIR] [ROUNDS]   (default build, 3)
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
python=/usr/bin/python3
repo=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$build/python:$repo/examples/torch_mnist"
args=(--max-steps 50 --batch-size 64 --test-size 2000)
step_ms() { "$@" 2>/dev/null | sed -n 's/.* in [0-9.]* s (\([0-9.]*\) ms per step.*/\1/p'; }
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
mlu="" cpu="" cpu1=""
for ((i = 1; i <= rounds; i++)); do
  mlu+=" $(step_ms "$python" "$repo/examples/torch_mnist/main.py" "${args[@]}")"
  cpu+=" $(step_ms "$python" "$repo/examples/torch_mnist/main.py" "${args[@]}" --no-mlu)"
  cpu1+=" $(OMP_NUM_THREADS=1 step_ms "$python" "$repo/examples/torch_mnist/main.py" "${args[@]}" --no-mlu)"
done
m=$(median "$mlu") c=$(median "$cpu") c1=$(median "$cpu1")
echo "torch_mnist, 50 steps of batch 64 + evaluation of 2000 digits, ms per step (median of $rounds):"
echo "  MLU (torch_mlu)            $m   [$mlu ]"
echo "  PyTorch CPU, $(nproc) threads     $c   [$cpu ]"
echo "  PyTorch CPU, 1 thread      $c1   [$cpu1 ]"
awk -v m="$m" -v c="$c" -v c1="$c1" 'BEGIN { printf "  ratio MLU / CPU: %.2f (1 thread: %.2f)\n", m / c, m / c1 }'
