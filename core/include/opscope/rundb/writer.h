// writer.h — writes captured ops to capture.db on a background thread.
//
// submit() hands an op over and returns at once (it waits only when more than 256 MiB are queued). The
// writer stores identical tensor contents once (weights read every step), commits in batches, and stops
// taking ops once the stored tensor data passes the cap, with one warning. close() drains and commits.
// The memory of written tensors is kept for the next snapshots (buffer()), up to 256 MiB.
#pragma once

#include <opscope/config.h>
#include <opscope/run_info.h>
#include <opscope/rundb/record.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace opscope::rundb {

struct Summary {
  std::uint64_t ops = 0;           // captured ops (records without `attach`)
  std::uint64_t compared_ops = 0;  // ops with compare results
  std::uint64_t failed_ops = 0;    // of which some tensor failed
  std::uint64_t tensors = 0;
  std::uint64_t bytes = 0;         // tensor data captured
  std::uint64_t stored_bytes = 0;  // after deduplication
  // OP_CAPTURE_MODE=stats: ops and tensors with statistics, the triggers met (the first NaN/Inf, each
  // auto-compare failure) and the ops whose whole tensors were kept for them.
  std::uint64_t stats_ops = 0;
  std::uint64_t stats_tensors = 0;
  std::uint64_t triggers = 0;
  std::uint64_t kept_ops = 0;
  std::uint64_t collectives = 0;  // transfers of the collective library (capture.db's collectives)
  bool capped = false;
  std::string error;  // the write error that stopped the capture, if one did
  std::string path;
};

// "opscope: captured 120 ops, 480 tensors, 12.3 MiB of tensor data (8.1 MiB stored) to <path>"; in stats
// mode "opscope: statistics of 1200 ops (4800 tensors); whole tensors of 17 ops kept around 1 trigger (the
// first NaN/Inf, auto-compare failures), 3.2 MiB stored, to <path>"
std::string summaryLine(const Summary& s);
// "opscope: compare results of 1200 ops (2 failing, stored with their tensors) in <path>"
std::string compareSummaryLine(const Summary& s);

class CaptureWriter {
 public:
  // Creates (or replaces) the database at path. Throws std::runtime_error with a clear message.
  // ring: in stats mode, how many op calls before a trigger keep their whole tensors too.
  static std::unique_ptr<CaptureWriter> open(const std::string& path, const RunRecord& run,
                                             std::uint64_t max_bytes, std::size_t ring = 16);
  ~CaptureWriter();
  CaptureWriter(const CaptureWriter&) = delete;
  CaptureWriter& operator=(const CaptureWriter&) = delete;

  // false once the cap was reached (the op is dropped; records with `attach` are still taken) or after
  // close().
  bool submit(CapturedOp&& op);
  // Drains the queue, commits and closes the database. Idempotent.
  Summary close();
  bool capped() const;
  // An empty buffer with room for at least `bytes` when one is spare (the tensors of ops already written
  // come back here; thread-safe), otherwise an empty one: for the snapshots of the next op.
  Bytes buffer(std::size_t bytes);

  struct Impl;
  explicit CaptureWriter(std::unique_ptr<Impl> impl);  // use open()

 private:
  std::unique_ptr<Impl> impl_;
};

// The run's record for a database's runs row: the process, and the options set ({"OP_CAPTURE":"1",...}).
RunRecord runRecord(const RunInfo& run, const std::vector<std::pair<std::string, std::string>>& options);

// Creates <run.result_dir>/capture.db with the run's record: the database capture and auto-compare write
// to. Throws std::runtime_error when it cannot.
std::shared_ptr<CaptureWriter> openRunDatabase(const Config& config, const RunInfo& run);

}  // namespace opscope::rundb
