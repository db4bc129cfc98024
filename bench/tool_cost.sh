#!/usr/bin/env bash
# Every row of the tool-cost table, each measured side by side with its anchor in this one run:
#  1. capture: stored bytes per second of added run time against `dd conv=fsync` writing the same number of
#     bytes to the same directory (mnist_train --steps 20 --batch-size 64 with its evaluation, every op
#     captured, OP_CAPTURE_MAX_MB raised so that nothing is left out);
#  2. capture's hashing and duplicate path per GiB of tensor data against memcpy (bench_capture);
#  3. memcheck per mlurtMalloc + mlurtFree pair against heaptrack per malloc + free (bench/memcheck_cost.sh);
#  4. the profiler's host cost per op call (bench_profiler: profiled minus unprofiled loop, same pace);
#  5. mnist_train --steps 20 --batch-size 64 (evaluation included) under each tool alone against plain.
# Rounds run every command once each (plain first), so that a slow spell of this shared machine hits all of
# them alike; the medians are shown with every run.
# usage: bench/tool_cost.sh [BUILD_DIR] [ROUNDS]   (default build, 3)
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
bin="$build/bin"
here=$(dirname "$0")
out=$(mktemp -d "${TMPDIR:-/tmp}/opscope_tool_cost.XXXXXX")
trap 'rm -rf "$out"' EXIT

# shellcheck source=bench/timing.sh
source "$(dirname "$0")/timing.sh"  # seconds, median
calc() { awk "BEGIN { printf \"$1\n\", $2 }"; }

mnist=("$bin/mnist_train" --steps 20 --batch-size 64)
echo "== mnist_train --steps 20 --batch-size 64 (evaluation included): $rounds rounds"
declare -A times
stored=0
for ((r = 0; r < rounds; ++r)); do
  times[plain]+="$(seconds "${mnist[@]}") "
  rm -rf "$out/r"
  times[capture]+="$(seconds "$bin/opscope" run --capture --capture-max-mb=1000000 --out "$out/r" -- "${mnist[@]}") "
  db=$(ls "$out"/r/*/capture.db)
  stored=$(stat -c %s "$db")
  grep -E '^opscope: captured' "$out/last.log" | sed 's/ to .*//' >"$out/captured.txt"
  rm -rf "$out/r"
  # The anchor: the same number of bytes written and fsynced to the same file system.
  times[disk]+="$(seconds dd if=/dev/zero of="$out/dd.bin" bs=1M count=$((stored >> 20)) conv=fsync) "
  rm -f "$out/dd.bin"
  # The issue's first measurement: the same without the evaluation (1.7 GiB stored instead of 7.1).
  times[plain_noeval]+="$(seconds "${mnist[@]}" --no-eval) "
  times[capture_noeval]+="$(seconds "$bin/opscope" run --capture --out "$out/r" -- "${mnist[@]}" --no-eval) "
  rm -rf "$out/r"
  for tool in memcheck profile; do
    times[$tool]+="$(seconds "$bin/opscope" run --$tool --out "$out/r" -- "${mnist[@]}") "
    rm -rf "$out/r"
  done
done
plain=$(median "${times[plain]}")
for k in plain capture memcheck profile disk plain_noeval capture_noeval; do
  printf '  %-14s %7.2f s  (runs: %s)\n' "$k" "$(median "${times[$k]}")" "${times[$k]% }"
done
echo "  $(cat "$out/captured.txt")"
added=$(calc '%.3f' "$(median "${times[capture]}") - $plain")
disk=$(median "${times[disk]}")
mib=$(calc '%.0f' "$stored / 1048576")
echo
echo "== 1. capture against the disk"
printf '  %s MiB stored in %.2f s of added run time: %s MiB/s; dd conv=fsync of as many bytes: %.2f s, %s MiB/s\n' \
  "$mib" "$added" "$(calc '%.0f' "$mib / $added")" "$disk" "$(calc '%.0f' "$mib / $disk")"
printf '  capture / disk = %s   (goal >= 0.5)\n' "$(calc '%.2f' "$disk / $added")"

# Where the time goes on this machine's cores: CPU seconds (user + sys) of one more run of each.
cpu() { /usr/bin/time -f '%U %S' "$@" 2>&1 >/dev/null | tail -1 | awk '{ printf "%.1f", $1 + $2 }'; }
if [ -x /usr/bin/time ]; then
  cpu_plain=$(cpu "${mnist[@]}")
  cpu_capture=$(cpu "$bin/opscope" run --capture --capture-max-mb=1000000 --out "$out/r" -- "${mnist[@]}")
  rm -rf "$out/r"
  cpu_dd=$(cpu dd if=/dev/zero of="$out/dd.bin" bs=1M count=$((stored >> 20)) conv=fsync)
  rm -f "$out/dd.bin"
  printf '  CPU seconds: plain %s, captured %s, dd of the stored bytes %s (%s cores here)\n' "$cpu_plain" \
    "$cpu_capture" "$cpu_dd" "$(nproc)"
fi

echo
echo "== 2. capture's hashing and duplicate path per GiB of tensor data (bench_capture, median of 3)"
"$bin/bench_capture" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>/dev/null |
  awk '/_median/ { for (i = 1; i <= NF; ++i) if ($i ~ /bytes_per_second=/) { split($i, v, "="); r = v[2] }
                   name = $1; sub(/_median$/, "", name); sub(/\/real_time/, "", name)
                   g = r; sub(/G\/s/, "", g); printf "  %-20s %8s  = %.0f ms per GiB\n", name, r, 1000 / g }'
echo "  (goal: hashing >= 2 GB/s; xxHash's own figure for XXH3 is 3.4x memcpy on its authors' machine)"

echo
echo "== 3. memcheck per pair against heaptrack"
"$here/memcheck_cost.sh" "$build" | sed 's/^/  /'
echo "  (goals, added to direct: table only <= +150 ns; depth 32 <= heaptrack's added cost; defaults <= +2 us)"

echo
echo "== 4. profiler, host cost per op call (bench_profiler, median of 3)"
"$bin/bench_profiler" --benchmark_filter='BM_ProfiledOpCall/|BM_UnprofiledOpCall/' --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true 2>/dev/null |
  awk '/_median/ { for (i = 1; i <= NF; ++i) if ($(i + 1) == "ns") { t[$1] = $i; break } }
       END { for (p in t) if (p ~ /^BM_ProfiledOpCall/) {
               split(p, a, "/"); u = "BM_UnprofiledOpCall/" a[2] "/repeats:3_median"
               printf "  pace %-5s ns: profiled %6.0f ns, unprofiled %6.0f ns: +%.0f ns per op call\n", a[2], t[p], t[u], t[p] - t[u] } }' |
  sort -n -k2
"$bin/bench_profiler" --benchmark_filter=BM_ProfiledOpCallTimed --benchmark_report_aggregates_only=true 2>/dev/null |
  awk '/_median/ { g = ($1 ~ /gzip:1/) ? ", OP_TRACE_GZIP=1" : ""
                   printf "  timed directly, bursts of 16 calls paced 1 us apart%s: %s ns per op call\n", g, $2 }'
echo "  (goal <= +50 ns at the paced rate, <= 150 ns with gzip; pace 0 is a burst faster than the writer"
echo "   drains; the direct timing leaves out the loop's own clock reads that the difference of two loops"
echo "   subtracts)"

echo
echo "== 5. mnist_train under each tool alone, against plain (goals: capture <= 2x, memcheck <= 1.05x, profile <= 1.05x)"
for k in capture memcheck profile; do
  printf '  %-9s %5sx\n' "$k" "$(calc '%.2f' "$(median "${times[$k]}") / $plain")"
done
printf '  capture without the evaluation (--no-eval) %5sx\n' \
  "$(calc '%.2f' "$(median "${times[capture_noeval]}") / $(median "${times[plain_noeval]}")")"
