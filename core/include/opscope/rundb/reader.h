// reader.h — reading capture.db back (op-replay, tests). Opens the file read-only and refuses, with one
// clear line, a missing file, a file that is not SQLite, a truncated or corrupt database, and a database
// that is not a capture.
#pragma once

#include <opscope/rundb/record.h>
#include <opscope/rundb/recover.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace opscope::rundb {

struct OpSummary {
  std::int64_t op_id = 0;
  std::uint64_t seq = 0;
  std::string name;
  int thread = 0;
  int device = 0;
  // Its input tensors in the one-line form (op_format.h): "x float32[64,1,28,28]; w float32[32,1,3,3]"; a
  // tensor whose row cannot be read (dtype, shape or strides malformed) is "x ?".
  std::string inputs;
  // Where the program called it (capture.db schema 4's sites, op_call.h's siteText), "" when not known.
  std::string site;
};

class CaptureReader {
 public:
  // path: capture.db, or a result directory holding one.
  static std::unique_ptr<CaptureReader> open(const std::string& path);
  ~CaptureReader();
  CaptureReader(const CaptureReader&) = delete;
  CaptureReader& operator=(const CaptureReader&) = delete;

  const std::string& path() const { return path_; }
  std::vector<OpSummary> list();
  std::vector<std::int64_t> ids();
  // Throws ReadError for an unknown id.
  CapturedOp load(std::int64_t op_id);
  RunRecord run();
  // Whether open() rolled back an unfinished transaction (recoverInterruptedWrite, recover.h): the capture
  // was cut off.
  bool recovered() const { return recovered_; }

  struct Impl;
  CaptureReader(std::string path, std::unique_ptr<Impl> impl);  // use open()

 private:
  std::string path_;
  std::unique_ptr<Impl> impl_;
  bool recovered_ = false;
};

}  // namespace opscope::rundb
