#!/usr/bin/env bash
# memcheck's cost per mlurtMalloc + mlurtFree pair, each setting in turn, and heaptrack's per malloc + free
# pair on the same loop, in one run: prints the median of each.
# usage: bench/memcheck_cost.sh [BUILD_DIR]   (default build)
set -euo pipefail
build=${1:-build}
bench="$build/bin/bench_memcheck"
hook="$build/lib/libopscope.so"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
args=(--benchmark_repetitions=5 --benchmark_report_aggregates_only=true)

median() {  # name of the benchmark, then the command; prints "<label>: <median ns>"
  local filter=$1
  shift
  "$@" --benchmark_filter="$filter" "${args[@]}" 2>/dev/null |
    awk '/_median/ { for (i = 1; i <= NF; ++i) if ($(i + 1) == "ns") { t = $i; break } ; label = $0; sub(/.*ns +[0-9]+ /, "", label); print label ": " t " ns"; exit }'
}

echo "mlurtMalloc + mlurtFree (256 bytes, 40 frames deep), median of 5:"
median BM_DeviceMallocFree "$bench"
median BM_DeviceMallocFree env LD_PRELOAD="$hook" OPSCOPE_RESULT_DIR="$out" "$bench"
# The allocation table alone (no red zones, no quarantine: what heaptrack records), then with backtraces.
table=(MEM_CHECK=1 MEM_CHECK_REDZONE=0 MEM_CHECK_QUARANTINE_MB=0)
echo -n "table only, "
median BM_DeviceMallocFree env LD_PRELOAD="$hook" OPSCOPE_RESULT_DIR="$out" "${table[@]}" "$bench"
for depth in 16 32; do
  echo -n "table only, "
  median BM_DeviceMallocFree env LD_PRELOAD="$hook" OPSCOPE_RESULT_DIR="$out" "${table[@]}" \
    MEM_CHECK_ENABLE_BACKTRACE=1 MEM_CHECK_BACKTRACE_DEPTH=$depth "$bench"
done
# The defaults: red zones (64 bytes) and the 64 MiB quarantine.
echo -n "red zones + quarantine, "
median BM_DeviceMallocFree env LD_PRELOAD="$hook" OPSCOPE_RESULT_DIR="$out" MEM_CHECK=1 "$bench"
echo -n "red zones + quarantine, "
median BM_DeviceMallocFree env LD_PRELOAD="$hook" OPSCOPE_RESULT_DIR="$out" MEM_CHECK=1 \
  MEM_CHECK_ENABLE_BACKTRACE=1 MEM_CHECK_BACKTRACE_DEPTH=32 "$bench"
echo "malloc + free (256 bytes, 40 frames deep), median of 5:"
median BM_HostMallocFree "$bench"
if command -v heaptrack >/dev/null 2>&1; then
  echo -n "heaptrack "
  bench_path=$(realpath "$bench")
  (cd "$out" && median BM_HostMallocFree heaptrack "$bench_path")
else
  echo "heaptrack: not installed (scripts/install-deps.sh installs it)"
fi
