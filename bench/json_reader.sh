#!/usr/bin/env bash
# How fast opscope reads the JSON files a run leaves (the untrusted-JSON reader of core/include/opscope/results/json_input.h):
# `opscope analyze` of two ranks' flight-recorder dumps of ENTRIES collectives each, against Python's
# json.load of the same two files (the anchor), side by side in turn, ROUNDS times; prints each one's median
# seconds, MB/s of dump read, the ratio, and analyze's peak memory. The reader was quadratic before (an
# array of objects: 5 s for 2 x 18 MB, 19 s for 2 x 36 MB); it is linear now.
# usage: bench/json_reader.sh [BUILD_DIR] [ENTRIES] [ROUNDS]   (default build, 200000, 3)
set -euo pipefail
build=${1:-build}
entries=${2:-200000}
rounds=${3:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
python=/usr/bin/python3

# shellcheck source=bench/timing.sh
source "$(dirname "$0")/timing.sh"  # seconds, median

"$python" - "$out/folder" "$entries" <<'PY'
import json, os, sys
path, n = sys.argv[1], int(sys.argv[2])
for r in range(2):
    d = f"{path}/20261127-000000-rank{r}-1-abcdef"
    os.makedirs(d)
    json.dump({"rank": r, "world_size": 2}, open(d + "/run.json", "w"))
    with open(d + "/flight_recorder.json", "w") as f:
        f.write('{"format":"opscope-flight-recorder","rank":%d,"world_size":2,"dumped_unix_ns":1,'
                '"dumped_monotonic_ns":1,"backtraces":{},"comms":[{"comm":"1","size":2,"ring":%d,"recorded":%d,'
                '"last_enqueued":%d,"last_started":%d,"last_completed":%d,"entries":[' % (r, n, n, n, n, n))
        f.write(",".join('{"seq":%d,"collective":"allreduce","state":"completed","count":1024,"dtype":"float32",'
                         '"op":"sum","calling_ns":%d,"enqueued_ns":%d,"stack":0,"op_seq":%d}'
                         % (i + 1, 1000 + i, 1001 + i, i) for i in range(n)))
        f.write("]}]}")
PY
bytes=$(cat "$out"/folder/*/flight_recorder.json | wc -c)
mb=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
echo "== two dumps of $entries collectives each: $mb MB"
ours="" theirs=""
for _ in $(seq "$rounds"); do
  ours+=" $(seconds "$build/bin/opscope" analyze "$out/folder")"
  theirs+=" $(seconds "$python" -c 'import json, sys; [json.load(open(p)) for p in sys.argv[1:]]' "$out"/folder/*/flight_recorder.json)"
done
a=$(median "$ours")
b=$(median "$theirs")
awk -v a="$a" -v b="$b" -v mb="$mb" 'BEGIN {
  printf "opscope analyze   %7.3f s  %7.1f MB/s\n", a, mb / a
  printf "python json.load  %7.3f s  %7.1f MB/s\n", b, mb / b
  printf "ratio (analyze / json.load): %.2f\n", a / b }'
/usr/bin/time -f "opscope analyze peak memory: %M KiB" "$build/bin/opscope" analyze "$out/folder" >/dev/null
