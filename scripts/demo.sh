#!/usr/bin/env bash
# make demo: the product's showcase. A short mnist_train training with a bug planted in one kernel
# (MLU_SIM_FAULT), run under every tool at once; the bug bisected with --fallback; the failing op replayed
# offline with op-replay; a report page for each run; a three-line verdict. Then the tools' single-purpose
# runs (a planted delay found by the profiler, leaks found by memcheck) with their reports, and a
# data-parallel training over 4 ranks (mpirun) with one view of all ranks and their merged trace, and the
# PyTorch MNIST example on the MLU (torch_mlu) with the same bug planted, found and named with its module,
# the script's line and its aten op.
set -euo pipefail
build=${1:-build}
bin="$build/bin"
results="$PWD/opscope_results/demo-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$results"
log="$results/demo.log"
start=$(date +%s)

# The planted bug: conv2d_backward_filter's kernel (the weight gradient of both convolutions) is off by 0.1%
# in 5% of its outputs — the kind of precision bug a new kernel library ships with. Training still runs and
# the loss still falls, so nothing but a comparison against a reference shows it.
bug_op=conv2d_backward_filter
fault="$bug_op:scale=1.001@0.05"
train=("$bin/mnist_train" --steps 6 --batch-size 16 --no-eval --log-interval 2)

result_dir_of() { sed -n 's/^opscope: results in //p' "$1" | tail -1; }

echo "== examples/device_query: the simulated MLUs"
"$bin/device_query" | head -n 6
echo

echo "== 1. mnist_train under every tool at once, with a bug planted in $bug_op (MLU_SIM_FAULT=$fault)"
echo "   opscope run --capture --compare --profile --memcheck -- ${train[*]}"
MLU_SIM_FAULT="$fault" "$bin/opscope" run --capture --compare --profile --memcheck --out "$results/all-tools" -- \
  "${train[@]}" >"$log" 2>&1 || true
grep -E 'Loss:' "$log" | tail -n 2
grep -E '^opscope: autocompare: |^opscope memcheck: [0-9]|^opscope: captured' "$log" | cut -c1-150
all_dir=$(result_dir_of "$log")
"$bin/opscope" report "$all_dir" | tail -n 1
echo

echo "== 2. Bisect with --fallback: the same run with $bug_op on the CPU is clean, so the bug is in its kernel"
MLU_SIM_FAULT="$fault" "$bin/opscope" run --compare --fallback="$bug_op" --out "$results/fallback" -- \
  "${train[@]}" >"$log" 2>&1 || true
grep -E '^opscope: autocompare: [0-9]|^opscope: +[a-z_0-9]+ +[0-9]+ calls' "$log" | cut -c1-150
fallback_dir=$(result_dir_of "$log")
"$bin/opscope" report "$fallback_dir" | tail -n 1
echo

echo "== 3. op-replay --acc_check: the first failing op, replayed offline from the capture"
replay=$("$bin/opscope" summary "$all_dir" | sed -n 's/^  reproduce the first: //p')
echo "   MLU_SIM_FAULT=$fault $replay"
if [ -n "$replay" ]; then
  seq=$(printf '%s\n' "$replay" | sed -n 's/.*--seq \([0-9]*\).*/\1/p')
  (MLU_SIM_FAULT="$fault" "$bin/op-replay" "$all_dir" --seq "$seq" --acc_check 2>&1 || true) |
    grep -E 'allclose|replayed' | cut -c1-150
  echo "   and on a fixed kernel library (no MLU_SIM_FAULT): the same captured inputs now match the CPU"
  ("$bin/op-replay" "$all_dir" --seq "$seq" --acc_check 2>&1 || true) | grep -E '  allclose' | cut -c1-150
fi
echo

echo "== 4. The profiler alone: a 20 ms delay planted in max_pool2d_forward tops the table and the critical path"
MLU_SIM_FAULT=max_pool2d_forward:delay=20 "$bin/opscope" run --profile --out "$results/profile" -- \
  "$bin/mnist_train" --steps 3 --batch-size 8 --no-eval >"$log" 2>&1 || true
sed -n '/^opscope profiler: /,/^opscope: profiler: /p' "$log" | head -n 4 | cut -c1-150
profile_dir=$(result_dir_of "$log")
# Where the device time went: busy and idle, and the chain of work that set the steps' length.
"$bin/opscope" summary "$profile_dir" | grep -E -A2 '^    MLU 0: busy|^  Critical path' | grep -v 'the host meanwhile' |
  head -n 5 | cut -c1-150
"$bin/opscope" report "$profile_dir" | tail -n 1
echo

echo "== 5. memcheck alone: examples/leaky leaks device memory from three sites"
"$bin/opscope" run --memcheck --out "$results/memcheck" -- "$bin/leaky" >"$log" 2>&1 || true
grep -E '^opscope memcheck: [0-9]' "$log"
grep -A2 -E '^Leak of' "$(result_dir_of "$log")/memcheck.txt" | grep -E '^Leak|#0' | head -n 6 | cut -c1-150
leaky_dir=$(result_dir_of "$log")
"$bin/opscope" report "$leaky_dir" | tail -n 1
echo

echo "== 6. Four ranks: llama_train --ddp under mpirun, profiled and memchecked; one view of all ranks"
echo "   opscope run --profile --memcheck -- mpirun -np 4 --oversubscribe $bin/llama_train --ddp --steps 10"
# (Open MPI refuses to run as root unless told: the demo says so for itself.)
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$bin/opscope" run --profile --memcheck \
  --out "$results/ranks" -- mpirun -np 4 --oversubscribe "$bin/llama_train" --ddp --steps 10 --eval-batches 2 \
  >"$log" 2>&1 || true
grep -E '^step +10 |^opscope: results of' "$log" | cut -c1-150
ranks_dir=$(sed -n 's/^opscope: results of [0-9]* ranks\? in //p' "$log" | tail -1)
if [ -n "$ranks_dir" ]; then
  "$bin/opscope" report "$ranks_dir" | grep -E '^ +[0-9]+ |^steps:|^merged trace:|^report:' | cut -c1-150
fi
echo

torch_dir=""
torch_ddp_dir=""
if [ -f "$build/python/torch_mlu/libtorch_mlu.so" ]; then
  echo "== 7. A PyTorch program: the PyTorch MNIST example on the MLU (torch_mlu), the same bug planted"
  echo "   opscope run --compare -- /usr/bin/python3 examples/torch_mnist/main.py --max-steps 3 --no-eval"
  MLU_SIM_FAULT="$fault" PYTHONPATH="$build/python" "$bin/opscope" run --compare --out "$results/torch" -- \
    /usr/bin/python3 "$(dirname "$0")/../examples/torch_mnist/main.py" --max-steps 3 --no-eval --train-size 500 \
    >"$log" 2>&1 || true
  grep -E '^opscope: autocompare: |^torch_mlu: ' "$log" | cut -c1-190
  torch_dir=$(result_dir_of "$log")
  "$bin/opscope" report "$torch_dir" | tail -n 1
  echo
  echo "== 8. PyTorch DDP: the example on 2 ranks (torch.distributed's backend mlucl), profiled; one view of both"
  echo "   opscope run --profile -- mpirun -np 2 /usr/bin/python3 examples/torch_mnist/main.py --ddp --max-steps 10"
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONPATH="$build/python" "$bin/opscope" run --profile \
    --out "$results/torch_ddp" -- mpirun -np 2 --oversubscribe /usr/bin/python3 \
    "$(dirname "$0")/../examples/torch_mnist/main.py" --ddp --max-steps 10 --no-eval --train-size 1000 \
    >"$log" 2>&1 || true
  grep -E '^data parallel|^10 steps|^opscope: results of' "$log" | cut -c1-150
  torch_ddp_dir=$(sed -n 's/^opscope: results of [0-9]* ranks\? in //p' "$log" | tail -1)
  if [ -n "$torch_ddp_dir" ]; then
    "$bin/opscope" report "$torch_ddp_dir" | grep -E '^ +[0-9]+ |^flight recorder:|^merged trace:|^report:' |
      cut -c1-150
  fi
else
  echo "== 7. (skipped: torch_mlu was not built; scripts/install-deps.sh installs python3-torch and libtorch-dev)"
fi
echo

echo "== The reports (open them in a browser; each trace.json opens in https://ui.perfetto.dev or chrome://tracing)"
for d in "$all_dir" "$fallback_dir" "$profile_dir" "$leaky_dir" ${ranks_dir:+"$ranks_dir"} ${torch_dir:+"$torch_dir"} \
  ${torch_ddp_dir:+"$torch_ddp_dir"}; do
  echo "  $d/report.html"
done
echo "  (the same findings as text: $bin/opscope summary DIR; the demo's log: $log)"
echo
echo "== Verdict of the run with the planted bug ($(($(date +%s) - start)) s for the whole demo)"
"$bin/opscope" summary "$all_dir" | sed -n '/^Verdict:/,$p'
