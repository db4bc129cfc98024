#!/usr/bin/env bash
# Runs the demo workloads from a build directory and says where their results are.
set -euo pipefail
build=${1:-build}
echo "== examples/device_query: the simulated MLUs and a copy round trip"
"$build/bin/device_query"
echo
echo "== examples/mnist_train: a short training of the MNIST network on the simulated MLU"
"$build/bin/mnist_train" --steps 100 --batch-size 64 --test-size 2000
echo
echo "== examples/llama_train: a short training of a tiny Llama-style model on Shakespeare, characters as tokens"
"$build/bin/llama_train" --steps 50
echo
results="$PWD/opscope_results"
echo "== opscope run --capture: the convolutions of a short mnist_train run captured to SQLite"
"$build/bin/opscope" run --capture='conv2d_forward' --out "$results" -- \
  "$build/bin/mnist_train" --steps 10 --batch-size 32 --no-eval 2>&1 | tee /tmp/opscope_demo_run.$$
run_dir=$(sed -n 's/^opscope: results in //p' /tmp/opscope_demo_run.$$ | tail -1)
rm -f /tmp/opscope_demo_run.$$
echo
echo "== op-replay: the captured ops replayed on the simulated MLU and checked against the CPU reference"
listing=$("$build/bin/op-replay" "$run_dir" --list)
replay=$("$build/bin/op-replay" "$run_dir" --acc_check)
printf '%s\n' "$listing" | sed -n '1,4p'
printf '%s\n' "$replay" | tail -n 3
echo
echo "== opscope run --compare: a bug planted in relu (MLU_SIM_FAULT=relu:scale=1.01), found by comparing"
echo "   every op against the CPU reference"
MLU_SIM_FAULT=relu:scale=1.01 "$build/bin/opscope" run --compare --out "$results" -- \
  "$build/bin/mnist_train" --steps 3 --batch-size 8 --no-eval >/tmp/opscope_demo_run.$$ 2>&1 || true
grep -E '^OpAutoCompare' /tmp/opscope_demo_run.$$ | head -n 2 | cut -c1-160
grep -E '^opscope: autocompare: ' /tmp/opscope_demo_run.$$ || true
compare_dir=$(sed -n 's/^opscope: results in //p' /tmp/opscope_demo_run.$$ | tail -1)
rm -f /tmp/opscope_demo_run.$$
echo
echo "== opscope run --fallback=relu: the same run with relu on the CPU; nothing is wrong any more"
MLU_SIM_FAULT=relu:scale=1.01 "$build/bin/opscope" run --compare --fallback=relu --out "$results" -- \
  "$build/bin/mnist_train" --steps 3 --batch-size 8 --no-eval 2>&1 |
  grep -E '^opscope: (autocompare|fallback)|^opscope: +[a-z_0-9]+ +[0-9]+ calls' || true
echo
echo "== opscope run --profile: every op timed on the host and on the device queue, with a 20 ms delay"
echo "   planted in max_pool2d_forward (MLU_SIM_FAULT=max_pool2d_forward:delay=20): it tops the table"
MLU_SIM_FAULT=max_pool2d_forward:delay=20 "$build/bin/opscope" run --profile --out "$results" -- \
  "$build/bin/mnist_train" --steps 5 --batch-size 8 --no-eval >/tmp/opscope_demo_run.$$ 2>&1 || true
sed -n '/^opscope profiler: /,/^opscope: profiler: /p' /tmp/opscope_demo_run.$$ | head -n 8 | cut -c1-160
profile_dir=$(sed -n 's/^opscope: results in //p' /tmp/opscope_demo_run.$$ | tail -1)
rm -f /tmp/opscope_demo_run.$$
echo
echo "demo done: the programs are in $build/bin, the libraries in $build/lib; the capture is in $run_dir"
echo "(read it with: $build/bin/op-replay $run_dir --list, or sqlite3 $run_dir/capture.db)"
echo "the compare results of the planted bug are in $compare_dir (autocompare.csv, capture.db)"
echo "the timeline is $profile_dir/trace.json: open it in https://ui.perfetto.dev or chrome://tracing"
echo "(the per-op table is in summary.txt, one row per op call in time_measure.csv)"
