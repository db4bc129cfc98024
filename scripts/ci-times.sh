#!/usr/bin/env bash
# What .ci/run does (and `make ci`): the README's test command (make test), then the sanitizer stages
# (make test-asan, make test-tsan), each build and each test run timed apart. Ends with the wall time of
# every stage, the ten slowest tests of each suite, and one closing line "ci: N passed, N failed".
# Every stage runs even when an earlier one failed (CI then shows all that is wrong at once); the exit
# status is non-zero when any failed.
#
#   scripts/ci-times.sh                  all stages
#   scripts/ci-times.sh test test-asan   only these test stages (each with its build)
#   scripts/ci-times.sh --report         the report again, from the last run's files
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

times=ci-times.txt  # "stage seconds status", one line a stage (git-ignored)
build_of() {
  case $1 in
    test) echo "${BUILD:-build}" ;;
    test-asan) echo "${ASAN_BUILD:-build-asan}" ;;
    test-tsan) echo "${TSAN_BUILD:-build-tsan}" ;;
  esac
}

report() {
  echo
  echo "== ci-times: wall time of each stage"
  # (local: read leaves its variables empty at the end of the file, and the script's own exit status is
  # kept in overall)
  local total=0 passed=0 failed=0 stage seconds status
  while read -r stage seconds status; do
    printf '  %-12s %5d s  (%d min %02d s)  %s\n' "$stage" "$seconds" $((seconds / 60)) $((seconds % 60)) "$status"
    total=$((total + seconds))
    # A build that failed ran no test: it counts as one failure in the closing line.
    # So does a fuzz run that crashed (its input is saved under build-fuzz/crash-*).
    case "$stage:$status" in build*:FAILED* | fuzz:FAILED*) failed=$((failed + 1)) ;; esac
  done <"$times"
  printf '  %-12s %5d s  (%d min %02d s)\n' total "$total" $((total / 60)) $((total % 60))
  for stage in test test-asan test-tsan; do
    local junit
    junit="$(build_of "$stage")/ctest-junit.xml"
    [ -f "$junit" ] || continue
    echo
    echo "== ci-times: the ten slowest tests of $stage"
    read -r p f < <(python3 - "$junit" <<'EOF'
import sys, xml.etree.ElementTree as ET
cases = ET.parse(sys.argv[1]).getroot().iter("testcase")
rows = []
passed = failed = 0
for c in cases:
    status = c.get("status", "run")
    bad = c.find("failure") is not None or c.find("error") is not None or status == "fail"
    skipped = c.find("skipped") is not None or status in ("notrun", "disabled")
    if bad: failed += 1
    elif not skipped: passed += 1
    name = c.get("name", "?").split("  # GetParam()")[0]  # a parameter's bytes say nothing
    rows.append((float(c.get("time", "0")), name, "FAILED" if bad else ""))
rows.sort(reverse=True)
for t, name, mark in rows[:10]:
    print(f"  {t:8.1f} s  {name} {mark}", file=sys.stderr)
print(passed, failed)
EOF
    )
    passed=$((passed + p))
    failed=$((failed + f))
  done
  echo
  # The closing line CI reads: every test of every suite that ran.
  echo "ci: $passed passed, $failed failed"
}

if [ "${1:-}" = "--report" ]; then
  report 2>&1
  exit 0
fi

stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(test test-asan test-tsan)
for stage in "${stages[@]}"; do
  case $stage in
    test | test-asan | test-tsan | fuzz) ;;
    *)
      echo "ci-times: unknown stage '$stage' (expected test, test-asan, test-tsan or fuzz)" >&2
      exit 2
      ;;
  esac
done
: >"$times"
for stage in test test-asan test-tsan; do rm -f "$(build_of "$stage")/ctest-junit.xml"; done
overall=0
for stage in "${stages[@]}"; do
  build_target="build${stage#test}"  # build, build-asan, build-tsan first
  [ "$stage" = fuzz ] && build_target=build-fuzz
  for target in "$build_target" "$stage"; do
    echo "== ci-times: make $target"
    start=$(date +%s)
    if [ "$target" = "$stage" ]; then
      make --no-print-directory "$target" CTEST_ARGS="--output-on-failure -j $(nproc) --output-junit ctest-junit.xml"
    else
      make --no-print-directory "$target"
    fi
    rc=$?
    end=$(date +%s)
    result=ok
    if [ $rc -ne 0 ]; then
      result="FAILED (exit $rc)"
      overall=1
    fi
    echo "$target $((end - start)) $result" >>"$times"
    # A stage's tests are not run on a build that failed.
    [ $rc -eq 0 ] || break
  done
done
report 2>&1
exit $overall
