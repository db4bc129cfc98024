// recover.h — rolling back what a killed capture left unfinished, for every reader of capture.db (op-replay,
// the report). Header-only, on SQLite's C API alone, so that the report needs nothing else of core (it is
// also built alone, for fuzzing).
#pragma once

#include <sqlite3.h>

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

namespace opscope::rundb {

// Why a capture cannot be read: the message is one line naming the file.
class ReadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A capture whose program was killed while the writer was in a transaction leaves <path>-journal beside
// it: a hot journal, which SQLite rolls back at the next read-write open and a read-only connection
// refuses ("attempt to write a readonly database"). This makes that open when the journal is there, so the
// file holds its last committed state again: every op committed before the kill, nothing half-written.
// Returns whether there was a journal. Throws ReadError when it cannot roll back (the directory is not
// writable, the journal is not a regular file, the capture is still being written).
inline bool recoverInterruptedWrite(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string journal = path + "-journal";
  std::error_code ec;
  const auto status = fs::symlink_status(journal, ec);
  if (ec || status.type() == fs::file_type::not_found) return false;
  const std::string quoted = "'" + path + "'";
  if (status.type() != fs::file_type::regular) {
    throw ReadError(quoted + " is beside a journal '" + journal + "' that is not a regular file");
  }
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW, nullptr);
  const std::unique_ptr<sqlite3, decltype(&sqlite3_close)> db(raw, &sqlite3_close);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(raw, 5000);
    sqlite3_db_config(raw, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
    sqlite3_db_config(raw, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
    // The first read takes the shared lock, and that is when SQLite plays a hot journal back.
    rc = sqlite3_exec(raw, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
  }
  if (rc == SQLITE_OK) return true;
  if ((rc & 0xff) == SQLITE_BUSY) {  // not a hot journal: the writer is alive and holds its lock
    throw ReadError(
        quoted +
        " is being written (is the capturing program still running?): try again once it has finished");
  }
  throw ReadError(
      quoted +
      " was left in the middle of a write (the capturing program was killed?) and its last transaction "
      "cannot be rolled back here: " +
      (raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)) +
      " (copy its directory somewhere writable)");
}

}  // namespace opscope::rundb
