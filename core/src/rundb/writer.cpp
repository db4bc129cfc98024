#include <opscope/rundb/writer.h>

#include "schema.h"
#include "sqlite.h"

#include <opscope/nonfinite_scalars.h>
#include <opscope/op_call.h>
#include <opscope/private_file.h>
#include <opscope/rundb/stats.h>

#include <mlu/dtype.h>

#include <fmt/format.h>

#include <xxhash.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace opscope::rundb {
namespace {

constexpr std::size_t kMaxQueuedBytes = std::size_t{256} << 20;
// Stats mode: the most tensor data the ring of calls before a trigger holds (past it, fewer calls).
constexpr std::size_t kMaxRingBytes = std::size_t{256} << 20;
constexpr std::size_t kOpsPerTransaction = 256;
// A transaction is a journal written and synced: when the calls of a stats capture (every call, each small)
// arrive one by one, gather them this long before committing rather than pay that per call. (Whole-tensor
// calls are committed as they come: a program killed mid-run keeps all but the last.)
constexpr auto kGatherFor = std::chrono::milliseconds(50);

std::size_t dataBytes(const CapturedOp& op) {
  std::size_t n = 0;
  for (const auto& t : op.tensors) n += t.data.size();
  return n;
}

// Contents are identified by their 128-bit XXH3 (Debian's libxxhash; ~17 GB/s here, bench/bench_capture):
// two different tensors share one only by accident, with a chance of about n^2 / 2^129 for n distinct
// contents (1e-27 for a million), so a duplicate is not read back to be confirmed (that read cost as much
// as writing the tensor again).
struct ContentKey {
  std::uint64_t low = 0, high = 0;
  bool operator==(const ContentKey&) const = default;
};
struct ContentKeyHash {
  std::size_t operator()(const ContentKey& k) const { return static_cast<std::size_t>(k.low); }
};
ContentKey contentKey(const Bytes& data) {
  const XXH128_hash_t h = XXH3_128bits(data.data(), data.size());
  return {h.low64, h.high64};
}

// Written tensors' memory kept for the next snapshots (CaptureWriter::buffer): at most this many buffers
// and bytes; a buffer serves a tensor of at least half its size (or 1 MiB less), so that a large one is not
// spent on a small tensor.
constexpr std::size_t kMaxSpare = 64;
constexpr std::size_t kMaxSpareBytes = std::size_t{256} << 20;
bool fits(std::size_t capacity, std::size_t bytes) {
  return capacity >= bytes && capacity <= std::max(2 * bytes, bytes + (std::size_t{1} << 20));
}

std::string mib(std::uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

std::string summaryLine(const Summary& s) {
  if (s.stats_ops > 0) {
    return fmt::format(
        "opscope: statistics of {} ops ({} tensors){}; whole tensors of {} ops kept around {} trigger{} (the "
        "first NaN/Inf, auto-compare failures), {} stored{}, to {}",
        s.stats_ops, s.stats_tensors,
        s.collectives > 0 ? fmt::format(" and {} collective transfers", s.collectives) : std::string(),
        s.kept_ops, s.triggers, s.triggers == 1 ? "" : "s", mib(s.stored_bytes),
        !s.error.empty() ? fmt::format(", stopped by a write error ({})", s.error)
        : s.capped       ? std::string(", stopped at the cap")
                         : std::string(),
        s.path);
  }
  return fmt::format(
      "opscope: captured {} ops, {} tensors{}, {} of tensor data ({} stored after deduplication){} to {}",
      s.ops, s.tensors,
      s.collectives > 0 ? fmt::format(", {} collective transfers", s.collectives) : std::string(),
      mib(s.bytes), mib(s.stored_bytes),
      !s.error.empty() ? fmt::format(", stopped by a write error ({}),", s.error)
      : s.capped       ? std::string(", stopped at the cap,")
                       : std::string(),
      s.path);
}

std::string compareSummaryLine(const Summary& s) {
  return fmt::format("opscope: compare results of {} ops ({} failing, stored with their tensors) in {}",
                     s.compared_ops, s.failed_ops, s.path);
}

struct CaptureWriter::Impl {
  std::string path;
  std::uint64_t max_bytes;
  sql::Db db;
  sql::Stmt insert_op;
  sql::Stmt insert_blob;
  sql::Stmt insert_ref;
  sql::Stmt insert_scalar;
  sql::Stmt insert_compare;
  sql::Stmt insert_stats;
  sql::Stmt mark_captured;
  sql::Stmt insert_collective;
  sql::Stmt insert_buffer;
  sql::Stmt insert_site;
  std::unordered_set<std::uint32_t> sites_written;
  // Stats mode: the last op calls written without their tensors, whose data is kept until a trigger stores
  // it or newer calls push it out (at most ring + 1 calls, the trigger's own included, and kMaxRingBytes).
  std::size_t ring_size;
  std::deque<CapturedOp> ring;
  std::unordered_set<std::int64_t> kept;  // op_ids of the ring's calls a trigger stored already
  std::size_t ring_bytes = 0;
  bool nan_seen = false;            // the first NaN/Inf was a trigger already
  std::vector<Bytes> after_commit;  // tensors written in this transaction: spare once it is committed

  std::mutex mutex;
  std::condition_variable ready;    // work queued or closing
  std::condition_variable drained;  // room in the queue
  std::deque<CapturedOp> queue;
  std::size_t queued_bytes = 0;
  bool closing = false;
  std::atomic<bool> capped{false};
  std::atomic<bool> closed{false};
  Summary summary;
  std::unordered_map<ContentKey, std::int64_t, ContentKeyHash> blobs_by_content;
  std::mutex spare_mutex;
  std::vector<Bytes> spare;  // guarded by spare_mutex
  std::size_t spare_bytes = 0;
  std::int64_t next_op_id = 1;
  std::unordered_map<std::uint64_t, std::int64_t> op_by_seq;  // for records that attach to a captured op
  std::string error;  // the first write error; the writer stops after it
  std::thread thread;

  Impl(const std::string& p, std::uint64_t cap, std::size_t ring_ops)
      : path(p),
        max_bytes(cap),
        db(p, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW),
        insert_op(db, (createSchema(db), kInsertOp)),
        insert_blob(db, "INSERT INTO blobs(hash, nbytes, data) VALUES (?, ?, ?)"),
        insert_ref(db,
                   "INSERT INTO tensor_refs(op_id, role, arg_index, arg_name, dtype, layout, shape, strides, "
                   "nbytes, blob_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        insert_scalar(db, "INSERT INTO scalars(op_id, name, value) VALUES (?, ?, ?)"),
        insert_compare(
            db,
            "INSERT INTO compare_results(op_id, arg_name, allclose, max_abs_diff, max_rel_diff, mae, "
            "cosine, mismatch_ratio, diff1, diff2, diff3, dev_nan, ref_nan, atol, rtol, verdict, op_class, "
            "max_ulp, mean_ulp) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        insert_stats(
            db,
            "INSERT INTO tensor_stats(op_id, role, arg_index, arg_name, dtype, shape, numel, min, max, "
            "mean, l2, nan, inf, checksum) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        mark_captured(db, "UPDATE ops SET captured = 1 WHERE op_id = ?"),
        insert_collective(
            db,
            "INSERT INTO collectives(comm, seq, name, symbol, rank, world_size, count, dtype, op, "
            "peer, op_seq, thread, queue, host_start_ns, host_dur_ns, status) VALUES (?, ?, ?, "
            "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        insert_buffer(db,
                      "INSERT INTO collective_buffers(collective_id, role, dtype, numel, min, max, mean, l2, "
                      "nan, inf, checksum, nbytes, blob_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        insert_site(db,
                    "INSERT OR IGNORE INTO sites(site_id, module, source, forward_op) VALUES (?, ?, ?, ?)"),
        ring_size(ring_ops) {
    summary.path = p;
  }

  static void createSchema(sql::Db& db) {
    // A rollback journal, not WAL: the tensors go to pages appended past the end of the file, which a
    // rollback journal does not copy, so every byte is written once; WAL wrote it twice (the log, then the
    // checkpoint reading it back into the file), and capture ran at 0.35x the disk's speed instead of
    // 0.5-0.9x (bench/tool_cost.sh). A program killed mid-transaction leaves capture.db-journal, which the
    // readers roll back (recoverInterruptedWrite): the ops committed before stay.
    db.exec("PRAGMA page_size=65536; PRAGMA journal_mode=DELETE; PRAGMA synchronous=NORMAL;");
    db.exec(kSchema);
    db.exec(fmt::format("INSERT INTO meta VALUES ('format', 'opscope-capture'), ('schema_version', '{}');",
                        kSchemaVersion)
                .c_str());
  }
  static constexpr const char* kInsertOp =
      "INSERT INTO ops(op_id, seq, name, symbol, thread, queue, device, host_start_ns, host_dur_ns, "
      "device_dur_ns, status, fallback, captured, framework_op, site_id, region) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

  std::int64_t storeBlob(const Bytes& data) {
    const ContentKey key = contentKey(data);
    if (const auto found = blobs_by_content.find(key); found != blobs_by_content.end()) return found->second;
    insert_blob.bind(1, static_cast<std::int64_t>(key.low)).bind(2, static_cast<std::int64_t>(data.size()));
    insert_blob.bindBlobNoCopy(3, data.data(), data.size()).run();
    const std::int64_t id = sqlite3_last_insert_rowid(db.get());
    blobs_by_content.emplace(key, id);
    summary.stored_bytes += data.size();
    return id;
  }

  Bytes takeSpare(std::size_t bytes) {
    std::lock_guard lock(spare_mutex);
    auto best = spare.end();
    for (auto it = spare.begin(); it != spare.end(); ++it) {
      if (fits(it->capacity(), bytes) && (best == spare.end() || it->capacity() < best->capacity()))
        best = it;
    }
    if (best == spare.end()) return {};
    Bytes out = std::move(*best);
    spare.erase(best);
    spare_bytes -= out.capacity();
    return out;
  }

  void giveSpare(Bytes&& data) {
    if (data.capacity() == 0) return;
    data.clear();
    std::lock_guard lock(spare_mutex);
    spare_bytes += data.capacity();
    spare.push_back(std::move(data));
    auto by_capacity = [](const Bytes& a, const Bytes& b) { return a.capacity() < b.capacity(); };
    while (spare.size() > kMaxSpare || spare_bytes > kMaxSpareBytes) {
      // Past the count drop the smallest (the large ones are the costly ones to fault in again); past the
      // bytes the largest.
      const auto drop = spare.size() > kMaxSpare ? std::min_element(spare.begin(), spare.end(), by_capacity)
                                                 : std::max_element(spare.begin(), spare.end(), by_capacity);
      spare_bytes -= drop->capacity();
      spare.erase(drop);
    }
  }

  void writeTensor(std::int64_t op_id, const TensorRecord& t) {
    const std::int64_t blob = storeBlob(t.data);
    insert_ref.bind(1, op_id)
        .bind(2, t.role)
        .bind(3, static_cast<std::int64_t>(t.arg_index))
        .bind(4, t.arg_name)
        .bind(5, mlu::dtypeName(t.dtype))
        .bind(6, static_cast<std::int64_t>(t.layout))
        .bind(7, fmt::format("[{}]", fmt::join(t.shape, ", ")))
        .bind(8, fmt::format("[{}]", fmt::join(t.strides, ", ")))
        .bind(9, static_cast<std::int64_t>(t.data.size()))
        .bind(10, blob)
        .run();
    ++summary.tensors;
    summary.bytes += t.data.size();
  }

  // Returns whether a tensor failed.
  bool writeCompare(std::int64_t op_id, const CapturedOp& op) {
    bool failed = false;
    for (const auto& c : op.compare) {
      insert_compare.bind(1, op_id)
          .bind(2, c.arg_name)
          .bind(3, static_cast<std::int64_t>(c.allclose))
          .bind(4, c.max_abs_diff)
          .bind(5, c.max_rel_diff)
          .bind(6, c.mae)
          .bind(7, c.cosine)
          .bind(8, c.mismatch_ratio)
          .bind(9, c.diff1)
          .bind(10, c.diff2)
          .bind(11, c.diff3)
          .bind(12, c.dev_nan)
          .bind(13, c.ref_nan)
          .bind(14, c.atol)
          .bind(15, c.rtol)
          .bind(16, c.verdict)
          .bind(17, c.op_class)
          .bind(18, c.max_ulp)
          .bind(19, c.mean_ulp)
          .run();
      failed = failed || c.verdict != "pass";
    }
    if (!op.compare.empty()) ++summary.compared_ops;
    if (failed) ++summary.failed_ops;
    return failed;
  }

  // Stats mode: the statistics of each tensor of an op written as op_id. Returns whether the run's NaN/Inf
  // may be born here: an output holds one that no input held and no scalar argument asked for (a fill with
  // -inf, an attention mask: nonfinite_scalars.h).
  // (Each record keeps its statistics: the ring finds shared bytes by their checksum.)
  bool writeStats(std::int64_t op_id, CapturedOp& op) {
    bool nan_or_inf = false, input_nan_or_inf = false;
    for (auto& t : op.tensors) {
      if (!t.stats) t.stats = tensorStats(t);
      const TensorStats& s = *t.stats;
      if (s.nan > 0 || s.inf > 0) (t.role == "output" ? nan_or_inf : input_nan_or_inf) = true;
      insert_stats.bind(1, op_id)
          .bind(2, t.role)
          .bind(3, static_cast<std::int64_t>(t.arg_index))
          .bind(4, t.arg_name)
          .bind(5, mlu::dtypeName(t.dtype))
          .bind(6, fmt::format("[{}]", fmt::join(t.shape, ", ")))
          .bind(7, s.numel)
          .bind(8, s.min)
          .bind(9, s.max)
          .bind(10, s.mean)
          .bind(11, s.l2)
          .bind(12, s.nan)
          .bind(13, s.inf)
          .bind(14, fmt::format("{:016x}", s.checksum))
          .run();
      ++summary.stats_tensors;
    }
    ++summary.stats_ops;
    return nan_or_inf && !input_nan_or_inf && !hasNonFiniteScalarText(op.scalars);
  }

  // Stats mode, a tensor that shares the bytes of an earlier one (same_as_earlier) whose data the ring
  // holds: the ring tensor with those bytes, or null.
  const TensorRecord* ringCopyOf(const TensorRecord& t) const {
    if (!t.stats) return nullptr;
    const std::size_t bytes = static_cast<std::size_t>(t.stats->numel) * mlu::dtypeSize(t.dtype);
    for (const CapturedOp& op : ring) {
      for (const TensorRecord& u : op.tensors) {
        if (!u.data.empty() && u.data.size() == bytes && u.stats && u.stats->checksum == t.stats->checksum)
          return &u;
      }
    }
    return nullptr;
  }

  // A trigger: the calls in the ring keep their whole tensors (their op rows become captured ones, which
  // op-replay can run). A call one of whose tensors the ring no longer holds stays a statistics row. The
  // calls stay in the ring (stored once): the calls after them may share their bytes.
  void keepRing() {
    ++summary.triggers;
    for (CapturedOp& op : ring) {
      if (kept.contains(op.op_id)) continue;
      std::vector<std::pair<TensorRecord*, const TensorRecord*>> shared;  // tensor, the ring's copy of it
      bool whole = true;
      for (auto& t : op.tensors) {
        if (!t.data.empty()) continue;
        if (t.same_as_earlier) {
          shared.emplace_back(&t, ringCopyOf(t));
          whole = shared.back().second != nullptr;
        } else {  // not copied at all (OP_CAPTURE_RING=0 copies only a trigger's own call)
          whole = !t.stats || t.stats->numel == 0;
        }
        if (!whole) break;
      }
      if (!whole) continue;
      for (auto& t : op.tensors) {
        const auto copy =
            std::find_if(shared.begin(), shared.end(), [&](const auto& s) { return s.first == &t; });
        if (copy == shared.end()) {
          writeTensor(op.op_id, t);
        } else {
          TensorRecord filled = t;  // the shared bytes under this tensor's own row
          filled.data = copy->second->data;
          writeTensor(op.op_id, filled);
          after_commit.push_back(std::move(filled.data));
        }
      }
      mark_captured.bind(1, op.op_id).run();
      kept.insert(op.op_id);
      ++summary.kept_ops;
    }
  }

  // The oldest call leaves the ring: a later call in it that shares a tensor's bytes takes them over.
  void dropOldest() {
    for (TensorRecord& t : ring.front().tensors) {
      if (t.data.empty() || !t.stats) continue;
      for (auto op = std::next(ring.begin()); op != ring.end() && !t.data.empty(); ++op) {
        for (TensorRecord& u : op->tensors) {
          if (u.same_as_earlier && u.data.empty() && u.stats && u.stats->checksum == t.stats->checksum &&
              static_cast<std::size_t>(u.stats->numel) * mlu::dtypeSize(u.dtype) == t.data.size()) {
            u.data = std::move(t.data);
            break;
          }
        }
      }
    }
    ring_bytes -= dataBytes(ring.front());
    // (The tensors of a stored call stay until the transaction that wrote them is committed.)
    const bool stored = kept.erase(ring.front().op_id) > 0;
    for (auto& t : ring.front().tensors) {
      if (stored) {
        after_commit.push_back(std::move(t.data));
      } else {
        giveSpare(std::move(t.data));
      }
    }
    ring.pop_front();
  }

  // Stats mode: the call joins the ring (the oldest leave it past its size); a NaN or Inf in its outputs,
  // the first of the run, is a trigger.
  void intoRing(CapturedOp& op, bool nan_or_inf) {
    nan_or_inf = nan_or_inf && !nan_seen;
    ring_bytes += dataBytes(op);
    ring.push_back(std::move(op));
    while (ring.size() > ring_size + 1 || (ring_bytes > kMaxRingBytes && ring.size() > 1)) dropOldest();
    if (nan_or_inf) {
      nan_seen = true;
      keepRing();
    }
  }

  // A transfer of the collective library: its row, and its buffers' (statistics always, contents unless
  // in stats mode).
  void writeCollective(CapturedOp& op) {
    const CollectiveRecord& c = *op.collective;
    insert_collective.bind(1, std::to_string(c.comm))
        .bind(2, static_cast<std::int64_t>(c.seq))
        .bind(3, op.name)
        .bind(4, op.symbol)
        .bind(5, static_cast<std::int64_t>(c.rank))
        .bind(6, static_cast<std::int64_t>(c.world_size))
        .bind(7, static_cast<std::int64_t>(c.count))
        .bind(8, c.dtype >= MLUOP_DTYPE_FLOAT && c.dtype <= MLUOP_DTYPE_BOOL
                     ? std::string(mlu::dtypeName(static_cast<mluopDataType_t>(c.dtype)))
                     : std::to_string(c.dtype));
    if (!reduceOpName(c.op).empty()) {
      insert_collective.bind(9, reduceOpName(c.op));
    } else {
      insert_collective.bindNull(9);
    }
    insert_collective.bind(10, static_cast<std::int64_t>(c.peer))
        .bind(11, static_cast<std::int64_t>(c.op_seq))
        .bind(12, static_cast<std::int64_t>(op.thread))
        .bind(13, static_cast<std::int64_t>(op.queue))
        .bind(16, static_cast<std::int64_t>(op.status));
    if (op.host_start_ns != 0) {
      insert_collective.bind(14, op.host_start_ns).bind(15, op.host_dur_ns);
    } else {  // not timed (the hook times runtime calls only with the profiler on)
      insert_collective.bindNull(14).bindNull(15);
    }
    insert_collective.run();
    const std::int64_t id = sqlite3_last_insert_rowid(db.get());
    for (TensorRecord& t : op.tensors) {
      if (!t.stats) t.stats = tensorStats(t);
      const TensorStats& st = *t.stats;
      insert_buffer.bind(1, id)
          .bind(2, t.role)
          .bind(3, mlu::dtypeName(t.dtype))
          .bind(4, st.numel)
          .bind(5, st.min)
          .bind(6, st.max)
          .bind(7, st.mean)
          .bind(8, st.l2)
          .bind(9, st.nan)
          .bind(10, st.inf)
          .bind(11, fmt::format("{:016x}", st.checksum));
      const bool keep = !op.stats && (!t.data.empty() || st.numel == 0);
      insert_buffer.bind(12, static_cast<std::int64_t>(keep ? t.data.size() : 0));
      if (keep) {
        insert_buffer.bind(13, storeBlob(t.data));
        summary.bytes += t.data.size();
      } else {
        insert_buffer.bindNull(13);
      }
      insert_buffer.run();
    }
    ++summary.collectives;
  }

  void write(CapturedOp& op) {
    if (op.collective) return writeCollective(op);
    if (op.attach) {
      const auto found = op_by_seq.find(op.seq);
      if (found != op_by_seq.end()) {  // the op was captured: add the CPU outputs and the results to it
        for (const auto& t : op.tensors) {
          if (t.role == "cpu_output") writeTensor(found->second, t);
        }
        // Stats mode: a failure keeps the ring's tensors (the failing call's among them).
        if (writeCompare(found->second, op) && !ring.empty()) keepRing();
        return;
      }
    }
    const std::int64_t op_id = next_op_id++;
    if (!op.attach) op_by_seq.emplace(op.seq, op_id);
    insert_op.bind(1, op_id)
        .bind(2, static_cast<std::int64_t>(op.seq))
        .bind(3, op.name)
        .bind(4, op.symbol)
        .bind(5, static_cast<std::int64_t>(op.thread))
        .bind(6, static_cast<std::int64_t>(op.queue))
        .bind(7, static_cast<std::int64_t>(op.device))
        .bind(8, op.host_start_ns)
        .bind(9, op.host_dur_ns)
        .bind(10, op.device_dur_ns)
        .bind(11, static_cast<std::int64_t>(op.status))
        .bind(12, static_cast<std::int64_t>(op.fallback))
        .bind(13, static_cast<std::int64_t>(op.captured && !op.stats));
    if (op.framework_op.empty()) {
      insert_op.bindNull(14);
    } else {
      insert_op.bind(14, op.framework_op);
    }
    if (op.site_id == 0) {
      insert_op.bindNull(15);
    } else {
      insert_op.bind(15, static_cast<std::int64_t>(op.site_id));
      if (sites_written.insert(op.site_id).second) {
        insert_site.bind(1, static_cast<std::int64_t>(op.site_id)).bind(2, op.module).bind(3, op.source);
        insert_site.bind(4, op.forward_op).run();
      }
    }
    if (op.region.empty()) {
      insert_op.bindNull(16);
    } else {
      insert_op.bind(16, op.region);
    }
    insert_op.run();
    if (!op.stats) {
      for (const auto& t : op.tensors) writeTensor(op_id, t);
    }
    for (const auto& [name, value] : op.scalars)
      insert_scalar.bind(1, op_id).bind(2, name).bind(3, value).run();
    writeCompare(op_id, op);
    if (!op.attach) ++summary.ops;
    if (op.stats) {
      op.op_id = op_id;
      intoRing(op, writeStats(op_id, op));
    }
  }

  void loop() {
    std::unique_lock lock(mutex);
    for (;;) {
      ready.wait(lock, [&] { return closing || !queue.empty(); });
      if (queue.empty() && closing) return;
      if (queue.front().stats) {
        ready.wait_for(lock, kGatherFor, [&] {
          return closing || queue.size() >= kOpsPerTransaction || queued_bytes >= kMaxQueuedBytes / 2;
        });
      }
      std::vector<CapturedOp> batch;
      while (!queue.empty() && batch.size() < kOpsPerTransaction) {
        queued_bytes -= dataBytes(queue.front());
        batch.push_back(std::move(queue.front()));
        queue.pop_front();
      }
      drained.notify_all();
      lock.unlock();
      if (error.empty()) {
        const Summary committed = summary;  // the counts of what is in the file
        try {
          db.exec("BEGIN");
          for (auto& op : batch) {
            if (capped && !op.attach) continue;
            write(op);
            if (summary.stored_bytes > max_bytes && !capped.exchange(true)) {
              std::fprintf(
                  stderr,
                  "opscope: OP_CAPTURE_MAX_MB=%llu reached after %llu ops; capture stopped (what was "
                  "captured so far stays in %s)\n",
                  static_cast<unsigned long long>(max_bytes >> 20),
                  static_cast<unsigned long long>(summary.ops), path.c_str());
            }
          }
          db.exec("COMMIT");
          for (auto& op : batch) {
            for (auto& t : op.tensors) giveSpare(std::move(t.data));
          }
          for (auto& data : after_commit) giveSpare(std::move(data));
          after_commit.clear();
        } catch (const std::exception& e) {
          // The transaction is rolled back: the counts say what the file holds, not what was tried.
          summary.ops = committed.ops;
          summary.compared_ops = committed.compared_ops;
          summary.failed_ops = committed.failed_ops;
          summary.tensors = committed.tensors;
          summary.bytes = committed.bytes;
          summary.stored_bytes = committed.stored_bytes;
          summary.stats_ops = committed.stats_ops;
          summary.stats_tensors = committed.stats_tensors;
          summary.triggers = committed.triggers;
          summary.kept_ops = committed.kept_ops;
          summary.collectives = committed.collectives;
          error = e.what();
          noteWriteError(fmt::format("cannot write {}: {}", path, e.what()));
          std::fprintf(stderr, "opscope: capture: writing %s failed: %s; capture stopped\n", path.c_str(),
                       e.what());
          try {
            db.exec("ROLLBACK");
          } catch (const std::exception&) {
          }
          after_commit.clear();
          capped = true;
        }
      }
      lock.lock();
    }
  }
};

CaptureWriter::CaptureWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  impl_->thread = std::thread([this] { impl_->loop(); });
}

CaptureWriter::~CaptureWriter() { close(); }

std::unique_ptr<CaptureWriter> CaptureWriter::open(const std::string& path, const RunRecord& run,
                                                   std::uint64_t max_bytes, std::size_t ring) {
  std::error_code ec;
  for (const char* suffix : {"-journal", "-wal", "-shm"}) std::filesystem::remove(path + suffix, ec);
  // The file is made here, private (0600) and never through a symlink; SQLite then opens it (an empty
  // file is a new database) and gives its journal the same permissions.
  if (UniqueFile made = createPrivateFile(path); !made) {
    throw std::runtime_error(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  }
  std::unique_ptr<Impl> impl;
  try {
    impl = std::make_unique<Impl>(path, max_bytes, ring);
    sql::Stmt insert(
        impl->db,
        "INSERT INTO runs(pid, rank, command_line, start_time, start_unix_ns, opscope_version, options, "
        "world_size) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
    insert.bind(1, run.pid)
        .bind(2, static_cast<std::int64_t>(run.rank))
        .bind(3, run.command_line)
        .bind(4, run.start_time_iso)
        .bind(5, run.start_unix_ns)
        .bind(6, run.opscope_version)
        .bind(7, run.options_json)
        .bind(8, static_cast<std::int64_t>(run.world_size))
        .run();
  } catch (const sql::Error& e) {
    // No empty or half-made database is left to look like a capture.
    impl.reset();
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + suffix, ec);
    throw std::runtime_error(fmt::format("cannot create the capture database '{}': {}", path, e.what()));
  }
  return std::make_unique<CaptureWriter>(std::move(impl));
}

bool CaptureWriter::submit(CapturedOp&& op) {
  if ((impl_->capped && !op.attach) || impl_->closed) return false;
  const std::size_t bytes = dataBytes(op);
  std::unique_lock lock(impl_->mutex);
  impl_->drained.wait(lock, [&] { return impl_->queued_bytes < kMaxQueuedBytes || impl_->closing; });
  if (impl_->closing) return false;
  impl_->queued_bytes += bytes;
  impl_->queue.push_back(std::move(op));
  // Stats calls wake the writer for the first call of a batch, then only once the batch is full (else it
  // commits after kGatherFor): not a wake-up and a context switch per call.
  const std::size_t queued = impl_->queue.size();
  if (!impl_->queue.back().stats || queued == 1 || queued == kOpsPerTransaction ||
      impl_->queued_bytes >= kMaxQueuedBytes / 2)
    impl_->ready.notify_one();
  return true;
}

bool CaptureWriter::capped() const { return impl_->capped; }

Bytes CaptureWriter::buffer(std::size_t bytes) { return impl_->takeSpare(bytes); }

Summary CaptureWriter::close() {
  if (impl_->closed.exchange(true)) return impl_->summary;
  {
    std::lock_guard lock(impl_->mutex);
    impl_->closing = true;
  }
  impl_->ready.notify_all();
  impl_->drained.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->summary.capped = impl_->capped;
  impl_->summary.error = impl_->error;
  return impl_->summary;
}

RunRecord runRecord(const RunInfo& run, const std::vector<std::pair<std::string, std::string>>& options) {
  RunRecord record;
  record.pid = run.pid;
  record.rank = run.rank;
  record.world_size = run.world_size;
  record.command_line = run.command_line;
  record.start_time_iso = run.start_time_iso;
  record.start_unix_ns = run.start_unix_ns;
  record.opscope_version = OPSCOPE_VERSION;
  nlohmann::json set = nlohmann::json::object();
  for (const auto& [name, value] : options) set[name] = value;
  record.options_json = set.dump();
  return record;
}

std::shared_ptr<CaptureWriter> openRunDatabase(const Config& config, const RunInfo& run) {
  return CaptureWriter::open(run.result_dir + "/capture.db", runRecord(run, config.set_options),
                             config.capture_max_mb << 20, static_cast<std::size_t>(config.capture_ring));
}

}  // namespace opscope::rundb
