// sqlite.h — a small RAII layer over the SQLite C API for the capture writer and reader.
#pragma once

#include <sqlite3.h>

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace opscope::rundb::sql {

class Error : public std::runtime_error {
 public:
  Error(const std::string& what, int code) : std::runtime_error(what), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

class Db {
 public:
  Db(const std::string& path, int flags) {
    const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
    if (rc != SQLITE_OK) {
      const std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
      sqlite3_close(db_);
      db_ = nullptr;
      throw Error(message, rc);
    }
    sqlite3_extended_result_codes(db_, 0);
    sqlite3_busy_timeout(db_, 5000);
  }
  ~Db() { sqlite3_close(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  sqlite3* get() const { return db_; }

  void exec(const char* sql) {
    char* message = nullptr;
    const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &message);
    if (rc != SQLITE_OK) {
      const std::string text = message != nullptr ? message : sqlite3_errstr(rc);
      sqlite3_free(message);
      throw Error(text, rc);
    }
  }

 private:
  sqlite3* db_ = nullptr;
};

class Stmt {
 public:
  Stmt(Db& db, std::string_view sql) : db_(db.get()) {
    const int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr);
    if (rc != SQLITE_OK) throw Error(sqlite3_errmsg(db_), rc);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, std::int64_t v) {
    check(sqlite3_bind_int64(stmt_, i, v));
    return *this;
  }
  Stmt& bind(int i, double v) {
    check(sqlite3_bind_double(stmt_, i, v));
    return *this;
  }
  Stmt& bind(int i, std::string_view v) {
    check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bindNull(int i) {
    check(sqlite3_bind_null(stmt_, i));
    return *this;
  }
  Stmt& bindBlob(int i, const void* data, std::size_t n) { return bindBlob(i, data, n, SQLITE_TRANSIENT); }
  // The blob is not copied: data must stay alive until the statement is reset (run() resets it, also
  // when the step fails). Saves a copy of every tensor the writer stores.
  Stmt& bindBlobNoCopy(int i, const void* data, std::size_t n) { return bindBlob(i, data, n, SQLITE_STATIC); }
  // true: a row is ready; false: done.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw Error(sqlite3_errmsg(db_), rc);
  }
  void run() {
    try {
      step();
    } catch (...) {
      reset();
      throw;
    }
    reset();
  }

  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  std::int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  bool isNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string text(int col) const {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p != nullptr ? std::string(reinterpret_cast<const char*>(p),
                                      static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)))
                        : std::string();
  }
  const void* blob(int col) const { return sqlite3_column_blob(stmt_, col); }
  std::size_t bytes(int col) const { return static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)); }

 private:
  Stmt& bindBlob(int i, const void* data, std::size_t n, sqlite3_destructor_type lifetime) {
    // A zero-length blob, not NULL, for an empty tensor (np.frombuffer(b"") works, None does not).
    check(sqlite3_bind_blob64(stmt_, i, n ? data : "", n, lifetime));
    return *this;
  }
  void check(int rc) {
    if (rc != SQLITE_OK) throw Error(sqlite3_errmsg(db_), rc);
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace opscope::rundb::sql
