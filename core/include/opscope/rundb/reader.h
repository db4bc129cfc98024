// reader.h — reading capture.db back (op-replay, tests). Opens the file read-only and refuses, with one
// clear line, a missing file, a file that is not SQLite, a truncated or corrupt database, and a database
// that is not a capture.
#pragma once

#include <opscope/rundb/record.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace opscope::rundb {

// Why a capture cannot be read: the message is one line naming the file.
class ReadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct OpSummary {
  std::int64_t op_id = 0;
  std::uint64_t seq = 0;
  std::string name;
  int thread = 0;
  int device = 0;
  // Its input tensors in the one-line form (op_format.h): "x float32[64,1,28,28]; w float32[32,1,3,3]"; a
  // tensor whose row cannot be read (dtype, shape or strides malformed) is "x ?".
  std::string inputs;
};

// A capture whose program was killed while the writer was in a transaction leaves <path>-journal beside
// it: a hot journal, which SQLite rolls back at the next read-write open and a read-only connection
// refuses ("attempt to write a readonly database"). This makes that open when the journal is there, so the
// file holds its last committed state again: every op committed before the kill, nothing half-written.
// Returns whether a journal was rolled back. Throws ReadError when it cannot be (the directory is not
// writable, the journal is not a regular file).
bool recoverInterruptedWrite(const std::string& path);

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
  // Whether open() rolled back an unfinished transaction (recoverInterruptedWrite): the capture was cut off.
  bool recovered() const { return recovered_; }

  struct Impl;
  CaptureReader(std::string path, std::unique_ptr<Impl> impl);  // use open()

 private:
  std::string path_;
  std::unique_ptr<Impl> impl_;
  bool recovered_ = false;
};

}  // namespace opscope::rundb
