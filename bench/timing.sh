# timing.sh — sourced by the bench scripts that time whole commands (compare_cost.sh, tool_cost.sh). The
# sourcing script sets $out to its scratch directory first.

# seconds COMMAND...: runs it quietly (its output in $out/last.log), prints its wall time in seconds; stops
# the script, with the log's tail, when it fails.
seconds() {
  local start end
  start=$(date +%s.%N)
  "$@" >"$out/last.log" 2>&1 || { echo "${0##*/}: failed: $*" >&2; tail -5 "$out/last.log" >&2; exit 1; }
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f\n", b - a }'
}

# median "T1 T2 ...": the median of space-separated numbers.
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
