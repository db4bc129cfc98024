#!/usr/bin/env bash
# How `opscope diff` scales: two statistics captures of CALLS op calls each (a real 2-step mnist_train
# capture, its ops repeated with their statistics and scalars until there are CALLS), the second with one
# output changed in its last call, so the diff reads both to the end. Times the diff and takes its peak
# memory, against the anchor: the sqlite3 CLI reading the same rows (ops joined with their statistics) of
# both files. ROUNDS of each in turn; prints the medians and the ratio.
# usage: bench/diff_scale.sh [BUILD_DIR] [CALLS] [ROUNDS]   (default build, 2000000, 3)
set -euo pipefail
build=${1:-build}
calls=${2:-2000000}
rounds=${3:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# shellcheck source=bench/timing.sh
source "$(dirname "$0")/timing.sh"  # seconds, median

OP_CAPTURE_LIST='.*' "$build/bin/opscope" run --capture --capture-mode=stats --out "$out/base" -- \
  "$build/bin/mnist_train" --steps 2 >/dev/null 2>&1
base=$(find "$out/base" -name capture.db | head -1)

/usr/bin/python3 - "$base" "$out/a.db" "$out/b.db" "$calls" <<'PY'
import shutil, sqlite3, sys
base, a, b, calls = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
shutil.copy(base, a)
db = sqlite3.connect(a)
n, top_op, top_seq = db.execute("SELECT count(*), max(op_id), max(seq) FROM ops").fetchone()
copies = -(-calls // n)
db.execute("CREATE TEMP TABLE k(k INTEGER)")
db.executemany("INSERT INTO k VALUES (?)", [(i,) for i in range(1, copies)])
def columns(table):
    return [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
ops = columns("ops")
shifted = {"op_id": f"op_id + k * {top_op}", "seq": f"seq + k * {top_seq}"}
db.execute(f"INSERT INTO ops ({','.join(ops)}) SELECT {','.join(shifted.get(c, c) for c in ops)} FROM ops, k")
for table in ("tensor_stats", "scalars"):
    cols = columns(table)
    sel = ",".join(f"op_id + k * {top_op}" if c == "op_id" else c for c in cols)
    db.execute(f"INSERT INTO {table} ({','.join(cols)}) SELECT {sel} FROM {table}, k")
db.execute("DELETE FROM ops WHERE seq > (SELECT seq FROM ops ORDER BY seq LIMIT 1 OFFSET ?)", (calls - 1,))
db.commit()
db.close()
shutil.copy(a, b)
db = sqlite3.connect(b)
last = db.execute("SELECT max(op_id) FROM ops").fetchone()[0]
db.execute("UPDATE tensor_stats SET mean = mean + 1, l2 = l2 + 1, checksum = 'changed' "
           "WHERE op_id = ? AND role = 'output'", (last,))
db.commit()
print(f"diff_scale: {db.execute('SELECT count(*) FROM ops').fetchone()[0]} calls a file, "
      f"{db.execute('SELECT count(*) FROM tensor_stats').fetchone()[0]} tensor statistics")
PY
ls -l "$out/a.db" | awk '{printf "diff_scale: %.0f MB a file\n", $5 / 1e6}'

diff_times=()
read_times=()
rss=0
for ((i = 0; i < rounds; i++)); do
  # (exit status 1: the runs differ, as planted)
  t=$(seconds sh -c "/usr/bin/time -f %M -o '$out/rss' '$build/bin/opscope' diff '$out/a.db' '$out/b.db'; [ \$? -le 1 ]")
  diff_times+=("$t")
  r=$(tail -1 "$out/rss")
  [ "$r" -gt "$rss" ] && rss=$r
  q="SELECT o.seq, o.name, s.* FROM ops o JOIN tensor_stats s ON s.op_id = o.op_id ORDER BY o.seq"
  read_times+=("$(seconds sh -c "sqlite3 '$out/a.db' \"$q\" >/dev/null; sqlite3 '$out/b.db' \"$q\" >/dev/null")")
done
d=$(median "${diff_times[*]}")
s=$(median "${read_times[*]}")
echo "opscope diff:         median $d s, peak $((rss / 1024)) MB"
echo "sqlite3 reading both: median $s s"
awk -v d="$d" -v s="$s" 'BEGIN { printf "ratio (diff / sqlite3): %.2f\n", d / s }'
"$build/bin/opscope" diff "$out/a.db" "$out/b.db" | head -5 || true
