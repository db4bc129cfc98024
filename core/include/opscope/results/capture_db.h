// capture_db.h — a capture.db opened for reading by the report and the analyses (opscope diff, the
// collectives check): untrusted.
#pragma once

#include <opscope/rundb/recover.h>
#include <opscope/rundb/schema_version.h>
#include <opscope/text.h>

#include <fmt/format.h>
#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace opscope::results {

// A text column of the current row ("" for NULL), all its bytes.
inline std::string columnText(sqlite3_stmt* s, int column) {
  const auto* p = sqlite3_column_text(s, column);
  return p != nullptr ? std::string(reinterpret_cast<const char*>(p),
                                    static_cast<std::size_t>(sqlite3_column_bytes(s, column)))
                      : std::string();
}

// capture.db, read-only and untrusted: its schema may not run functions with side effects, the tables the
// readers' queries must be tables (a view could recurse without end), and no query runs past a deadline.
class CaptureDb {
 public:
  static constexpr std::chrono::seconds kDeadline{10};

  explicit CaptureDb(const std::filesystem::path& path) {
    try {
      opscope::rundb::recoverInterruptedWrite(path.string());  // a killed run's unfinished transaction
    } catch (const opscope::rundb::ReadError& e) {
      throw std::runtime_error(fmt::format("capture.db: {}", e.what()));
    }
    sqlite3* db = nullptr;
    const int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
    db_.reset(db);
    if (rc != SQLITE_OK) {
      throw std::runtime_error(fmt::format("capture.db: {}", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    }
    sqlite3_busy_timeout(db, 2000);
    // A page cache of up to 64 MiB (SQLite's default is 2 MB): opscope diff walks ops in call order by
    // their index and each call's rows by theirs, which the default cache makes a read of the file per
    // row (a 200 k-call capture: 7 s against 0.9 s). The cache grows only as pages are read.
    sqlite3_exec(db, "PRAGMA cache_size = -65536", nullptr, nullptr, nullptr);
    sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
    sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
    // A larger file may take longer to sort before its first row (2 M calls, 1 GB: over 10 s): kDeadline
    // and as much again per 100 MB. A small hostile file is still stopped after kDeadline.
    std::error_code size_error;
    const std::uintmax_t bytes = std::filesystem::file_size(path, size_error);
    budget_ = kDeadline + std::chrono::seconds(size_error ? 0 : bytes / 100'000'000 * kDeadline.count());
    deadline_ = std::chrono::steady_clock::now() + budget_;
    sqlite3_progress_handler(
        db, 10000,
        [](void* self) {
          return std::chrono::steady_clock::now() > static_cast<CaptureDb*>(self)->deadline_ ? 1 : 0;
        },
        this);
    query(
        "SELECT name, type FROM sqlite_master WHERE name IN ('ops', 'compare_results', 'tensor_refs', "
        "'blobs', 'tensor_stats')",
        [](sqlite3_stmt* s) {
          const auto* type = reinterpret_cast<const char*>(sqlite3_column_text(s, 1));
          if (type == nullptr || std::string_view(type) != "table") {
            const auto* name = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
            throw std::runtime_error(fmt::format("capture.db: '{}' is not a table as opscope writes it",
                                                 name != nullptr ? name : ""));
          }
        });
    // A capture of a schema this build does not know (or none) is refused, as op-replay does: its columns
    // may mean something else.
    bool meta = false;
    query("SELECT count(*) FROM sqlite_master WHERE name = 'meta' AND type = 'table'",
          [&](sqlite3_stmt* s) { meta = sqlite3_column_int64(s, 0) > 0; });
    std::string version = "(none)";
    if (meta) {
      query("SELECT value FROM meta WHERE key = 'schema_version'",
            [&](sqlite3_stmt* s) { version = columnText(s, 0); });
    }
    bool known = false;
    for (int v = rundb::kOldestSchemaVersion; v <= rundb::kSchemaVersion; ++v)
      known |= version == std::to_string(v);
    if (!known) {
      throw std::runtime_error(fmt::format(
          "capture.db: capture schema version {}{}; this opscope reads versions {} to {}",
          printable(version).substr(0, 20), meta ? "" : " (no meta table: not a capture opscope wrote)",
          rundb::kOldestSchemaVersion, rundb::kSchemaVersion));
    }
  }
  CaptureDb(const CaptureDb&) = delete;
  CaptureDb& operator=(const CaptureDb&) = delete;

  // A long read (opscope diff loading tensor after tensor) gives each of its queries the budget anew.
  void renewDeadline() { deadline_ = std::chrono::steady_clock::now() + budget_; }

  class Rows;

  // A query's rows one by one (opscope diff reads two runs side by side): step() until it is false.
  Rows rows(const std::string& sql);

  // Runs a query, calling row(stmt) per row. Throws with SQLite's message.
  template <typename F>
  void query(const std::string& sql, F&& row);
  template <typename F>
  void query(const char* sql, F&& row) {
    query(std::string(sql), std::forward<F>(row));
  }

 private:
  struct Close {
    void operator()(sqlite3* db) const { sqlite3_close(db); }
  };
  std::unique_ptr<sqlite3, Close> db_;
  std::chrono::seconds budget_ = kDeadline;
  std::chrono::steady_clock::time_point deadline_;
};

// The rows of one query on a CaptureDb, stepped by the reader. The deadline bounds a query that makes no
// progress: each 1,024 rows delivered renew it (a 2 M-call capture's ops and statistics are one query of
// a minute).
class CaptureDb::Rows {
 public:
  Rows(CaptureDb& db, const std::string& sql) : db_(&db) {
    sqlite3_stmt* raw = nullptr;
    if (sqlite3_prepare_v2(db.db_.get(), sql.c_str(), -1, &raw, nullptr) != SQLITE_OK) {
      throw std::runtime_error(fmt::format("capture.db: {}", sqlite3_errmsg(db.db_.get())));
    }
    stmt_.reset(raw);
  }

  // The next row (true), or the end (false). Throws with SQLite's message.
  bool step() {
    if (stmt_ == nullptr) return false;
    const int rc = sqlite3_step(stmt_.get());
    if (rc == SQLITE_ROW) {
      if (++rows_ % 1024 == 0) db_->renewDeadline();
      return true;
    }
    const std::string error = rc == SQLITE_DONE ? std::string() : sqlite3_errmsg(db_->db_.get());
    stmt_.reset();
    if (rc == SQLITE_INTERRUPT) {
      throw std::runtime_error(fmt::format(
          "capture.db: a query went {} s without a row (a damaged or hostile file?)", db_->budget_.count()));
    }
    if (rc != SQLITE_DONE) throw std::runtime_error(fmt::format("capture.db: {}", error));
    return false;
  }
  // The current row (after step() gave true).
  sqlite3_stmt* row() const { return stmt_.get(); }

 private:
  struct Finalize {
    void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
  };
  CaptureDb* db_;
  std::unique_ptr<sqlite3_stmt, Finalize> stmt_;
  std::uint64_t rows_ = 0;
};

inline CaptureDb::Rows CaptureDb::rows(const std::string& sql) { return Rows(*this, sql); }

template <typename F>
void CaptureDb::query(const std::string& sql, F&& row) {
  Rows rows(*this, sql);
  while (rows.step()) row(rows.row());
}

}  // namespace opscope::results
