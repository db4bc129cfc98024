#!/usr/bin/env bash
# What auto-compare and the other tools cost on real-sized work, measured side by side in one run:
#  1. the CPU reference's conv2d_forward on MNIST's evaluation shape (x [500, 32, 26, 26], w [64, 32, 3, 3])
#     against PyTorch's float64 CPU convolution on the same shape and cores (the anchor), beside the device
#     and OpenBLAS (bench_reference, bench_gemm);
#  2. the three training commands plain and under the tools, as wall-time ratios to the plain run:
#       mnist_train --steps 20 --batch-size 32 --test-size 1000  (evaluation included), under OP_AUTOCOMPARE=1
#       llama_train --steps 20, under OP_AUTOCOMPARE=1
#       the mnist command under each of `opscope run --capture/--compare/--profile/--memcheck`, under the
#       three that do not write tensors to disk, and under all four;
#  3. op-replay --acc_check of every op of a 3-step MNIST capture with its full evaluation.
# usage: bench/compare_cost.sh [BUILD_DIR] [ROUNDS]   (default build, 3; PyTorch from python3-torch,
#        skipped without)
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
bin="$build/bin"
hook="$build/lib/libopscope.so"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
python=/usr/bin/python3

# shellcheck source=bench/timing.sh
source "$(dirname "$0")/timing.sh"  # seconds, median
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f\n", a / b }'; }

echo "== conv2d_forward, x [500, 32, 26, 26] float32, w [64, 32, 3, 3] (MNIST's evaluation batch)"
"$bin/bench_reference" --benchmark_filter='BM_RefConv2dForward/shape:1|BM_BlasDgemmOfConv/shape:1' \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>/dev/null | grep -E '_median' || true
ref_ms=$("$bin/bench_reference" --benchmark_filter='BM_RefConv2dForward/shape:1' --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true --benchmark_format=csv 2>/dev/null |
  awk -F, '/_median/ { print $3 }')  # real_time, in the benchmark's unit (ms)
"$bin/bench_gemm" --benchmark_filter=BM_DeviceConv2dForwardMnist 2>/dev/null | grep -E '^BM_' || true
if "$python" -c 'import torch' 2>/dev/null; then
  torch_ms=$("$python" - <<'PY'
import os, time, torch
torch.set_num_threads(os.cpu_count())  # the same cores the reference's OpenBLAS uses
torch.manual_seed(0)
x = torch.rand(500, 32, 26, 26, dtype=torch.float32).double()
w = torch.rand(64, 32, 3, 3, dtype=torch.float32).double()
b = torch.rand(64, dtype=torch.float64)
torch.nn.functional.conv2d(x, w, b)  # warm-up
times = []
for _ in range(3):
    t = time.perf_counter()
    torch.nn.functional.conv2d(x, w, b)
    times.append(time.perf_counter() - t)
print(sorted(times)[1] * 1000, torch.get_num_threads())
PY
)
  read -r torch_ms torch_threads <<<"$torch_ms"
  printf 'reference %.1f ms, PyTorch float64 CPU %.1f ms (%d threads): reference/PyTorch = %s\n' "$ref_ms" "$torch_ms" \
    "$torch_threads" "$(ratio "$ref_ms" "$torch_ms")"
else
  echo "PyTorch: not installed (apt-get install python3-torch), no anchor"
fi

echo
echo "== trainings: median wall time of $rounds rounds, each round running every command once (plain first),"
echo "   so that a slow spell of this shared machine hits all of them alike; the ratio to the plain run"
mnist=("$bin/mnist_train" --steps 20 --batch-size 32 --test-size 1000)
llama=("$bin/llama_train" --steps 20)
all4="--capture --compare --profile --memcheck"
labels=("mnist plain" "mnist OP_AUTOCOMPARE=1" "mnist opscope run --capture" "mnist opscope run --compare"
  "mnist opscope run --profile" "mnist opscope run --memcheck" "mnist opscope run --compare --profile --memcheck"
  "mnist opscope run $all4" "llama plain" "llama OP_AUTOCOMPARE=1")
run_case() {  # index into labels
  case $1 in
    0) seconds "${mnist[@]}" ;;
    1) seconds env LD_PRELOAD="$hook" OPSCOPE_RESULT_DIR="$out/r" OP_AUTOCOMPARE=1 "${mnist[@]}" ;;
    2) seconds "$bin/opscope" run --capture --out "$out/r" -- "${mnist[@]}" ;;
    3) seconds "$bin/opscope" run --compare --out "$out/r" -- "${mnist[@]}" ;;
    4) seconds "$bin/opscope" run --profile --out "$out/r" -- "${mnist[@]}" ;;
    5) seconds "$bin/opscope" run --memcheck --out "$out/r" -- "${mnist[@]}" ;;
    6) seconds "$bin/opscope" run --compare --profile --memcheck --out "$out/r" -- "${mnist[@]}" ;;
    # shellcheck disable=SC2086
    7) seconds "$bin/opscope" run $all4 --out "$out/r" -- "${mnist[@]}" ;;
    8) seconds "${llama[@]}" ;;
    9) seconds env LD_PRELOAD="$hook" OPSCOPE_RESULT_DIR="$out/r" OP_AUTOCOMPARE=1 "${llama[@]}" ;;
  esac
  rm -rf "$out/r"  # a capture of this run is ~1.5 GiB
}
declare -A times
for ((r = 0; r < rounds; ++r)); do
  for c in "${!labels[@]}"; do times[$c]+="$(run_case "$c") "; done
done
mnist_plain=$(median "${times[0]}")
llama_plain=$(median "${times[8]}")
for c in "${!labels[@]}"; do
  t=$(median "${times[$c]}")
  base=$mnist_plain
  [ "$c" -ge 8 ] && base=$llama_plain
  printf '%-52s %7.2f s  %6sx   (runs: %s)\n' "${labels[$c]}" "$t" "$(ratio "$t" "$base")" "${times[$c]% }"
done

echo
echo "== op-replay --acc_check of every op of a 3-step MNIST capture with its full evaluation"
rm -rf "$out/cap"
OP_CAPTURE=1 OPSCOPE_RESULT_DIR="$out/cap" LD_PRELOAD="$hook" "$bin/mnist_train" --steps 3 >/dev/null 2>&1
db=$(ls -d "$out"/cap/*/capture.db)
ops=$(sqlite3 "$db" 'SELECT count(*) FROM ops')
t=$(seconds "$bin/op-replay" "$db" --acc_check)
printf 'op-replay --acc_check: %s ops in %.1f s; %s\n' "$ops" "$t" "$(grep -E '^op-replay: replayed' "$out/last.log")"
