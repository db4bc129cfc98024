#include <opscope/rundb/reader.h>

#include "schema.h"
#include "sqlite.h"
#include "tensor_row.h"

#include <opscope/op_format.h>

#include <mlu/dtype.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace opscope::rundb {
namespace {

namespace fs = std::filesystem;

mluopDataType_t dtypeByName(const std::string& name) {
  for (int d = MLUOP_DTYPE_FLOAT; d <= MLUOP_DTYPE_BOOL; ++d) {
    const auto dtype = static_cast<mluopDataType_t>(d);
    if (mlu::dtypeName(dtype) == name) return dtype;
  }
  return MLUOP_DTYPE_INVALID;
}

// The SQLite header says how many pages the database has; a shorter file was cut off.
void checkNotTruncated(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<unsigned char, 100> header{};
  in.read(reinterpret_cast<char*>(header.data()), header.size());
  if (in.gcount() < 100 || std::memcmp(header.data(), "SQLite format 3", 16) != 0) {
    throw ReadError(fmt::format("'{}' is not an SQLite database (not a capture.db)", path));
  }
  std::uint32_t page_size = (header[16] << 8) | header[17];
  if (page_size == 1) page_size = 65536;
  const std::uint32_t pages =
      (std::uint32_t{header[28]} << 24) | (header[29] << 16) | (header[30] << 8) | header[31];
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (!ec && pages > 0 && size < std::uint64_t{page_size} * pages && !fs::exists(path + "-wal", ec)) {
    throw ReadError(fmt::format("'{}' is truncated: {} bytes, but its header says {} pages of {} bytes", path,
                                size, pages, page_size));
  }
}

}  // namespace

// How long one reader call (list, ids, load, run) may query before it is stopped: the tables are checked to
// be plain tables, so only a damaged or hostile file comes near it.
constexpr std::chrono::seconds kQueryDeadline{20};

struct CaptureReader::Impl {
  sql::Db db;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  int schema_version = kSchemaVersion;

  explicit Impl(const std::string& path) : db(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX) {
    // The file is untrusted: its schema may not run functions with side effects, and no query runs on
    // past the deadline (a progress handler every 10,000 virtual machine steps).
    sqlite3_db_config(db.get(), SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
    sqlite3_db_config(db.get(), SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
    sqlite3_progress_handler(
        db.get(), 10000,
        [](void* self) {
          return std::chrono::steady_clock::now() > static_cast<Impl*>(self)->deadline ? 1 : 0;
        },
        this);
  }
};

CaptureReader::CaptureReader(std::string path, std::unique_ptr<Impl> impl)
    : path_(std::move(path)), impl_(std::move(impl)) {}
CaptureReader::~CaptureReader() = default;

std::unique_ptr<CaptureReader> CaptureReader::open(const std::string& given) {
  std::error_code ec;
  std::string path = given;
  if (fs::is_directory(path, ec)) path = (fs::path(path) / "capture.db").string();
  if (!fs::exists(path, ec)) throw ReadError(fmt::format("'{}': no such file", path));
  if (!fs::is_regular_file(path, ec)) throw ReadError(fmt::format("'{}' is not a regular file", path));
  // The rollback first: mid-transaction the header may already count pages not yet written.
  const bool recovered = recoverInterruptedWrite(path);
  checkNotTruncated(path);
  try {
    auto impl = std::make_unique<Impl>(path);
    impl->deadline = std::chrono::steady_clock::now() + kQueryDeadline;
    // The tables the reader queries must be tables as the writer makes them: a view (which could recurse
    // without end) in their place is refused.
    sql::Stmt tables(impl->db,
                     "SELECT name, type FROM sqlite_master WHERE name IN ('ops', 'tensor_refs', 'blobs', "
                     "'scalars', 'runs', 'meta')");
    int found = 0;
    bool meta = false;
    while (tables.step()) {
      const std::string name = tables.text(0), type = tables.text(1);
      if (type != "table") {
        throw ReadError(fmt::format("'{}' is not a capture as opscope writes it: '{}' is a {}, not a table",
                                    path, name, type));
      }
      found += name == "ops" || name == "tensor_refs" || name == "blobs" || name == "scalars" ? 1 : 0;
      meta = meta || name == "meta";
    }
    if (found != 4) {
      throw ReadError(
          fmt::format("'{}' is an SQLite database but not an opscope capture (no ops/tensor tables)", path));
    }
    std::string v = "(none)";
    if (meta) {
      sql::Stmt version(impl->db, "SELECT value FROM meta WHERE key = 'schema_version'");
      if (version.step()) v = version.text(0);
    }
    for (int known = kOldestSchemaVersion; known <= kSchemaVersion; ++known) {
      if (v == std::to_string(known)) impl->schema_version = known;
    }
    if (v != std::to_string(impl->schema_version)) {
      throw ReadError(
          fmt::format("'{}' has capture schema version {:.20}; this op-replay reads versions {} to {}", path,
                      v, kOldestSchemaVersion, kSchemaVersion));
    }
    impl->deadline = std::chrono::steady_clock::time_point::max();
    auto reader = std::make_unique<CaptureReader>(path, std::move(impl));
    reader->recovered_ = recovered;
    return reader;
  } catch (const sql::Error& e) {
    if (e.code() == SQLITE_NOTADB)
      throw ReadError(fmt::format("'{}' is not an SQLite database (not a capture.db)", path));
    if (e.code() == SQLITE_CORRUPT) throw ReadError(fmt::format("'{}' is corrupt: {}", path, e.what()));
    if (e.code() == SQLITE_INTERRUPT) {
      throw ReadError(fmt::format("'{}': reading its tables took over {} s (a damaged or hostile file?)",
                                  path, kQueryDeadline.count()));
    }
    throw ReadError(fmt::format("cannot read '{}': {}", path, e.what()));
  }
}

namespace {
// Runs one reader call under the query deadline, turning every failure into one ReadError line.
template <typename F>
auto readOrThrow(const std::string& path, CaptureReader::Impl& impl, F&& f) {
  impl.deadline = std::chrono::steady_clock::now() + kQueryDeadline;
  struct Reset {
    CaptureReader::Impl& impl;
    ~Reset() { impl.deadline = std::chrono::steady_clock::time_point::max(); }
  } reset{impl};
  try {
    return f();
  } catch (const sql::Error& e) {
    if (e.code() == SQLITE_CORRUPT || e.code() == SQLITE_NOTADB) {
      throw ReadError(fmt::format("'{}' is corrupt: {}", path, e.what()));
    }
    if (e.code() == SQLITE_INTERRUPT) {
      throw ReadError(fmt::format("'{}': a query took over {} s (a damaged or hostile file?)", path,
                                  kQueryDeadline.count()));
    }
    throw ReadError(fmt::format("cannot read '{}': {}", path, e.what()));
  }
}
}  // namespace

std::vector<std::int64_t> CaptureReader::ids() {
  return readOrThrow(path_, *impl_, [&] {
    std::vector<std::int64_t> out;
    sql::Stmt s(impl_->db, "SELECT op_id FROM ops WHERE captured ORDER BY op_id");
    while (s.step()) out.push_back(s.integer(0));
    return out;
  });
}

std::vector<OpSummary> CaptureReader::list() {
  return readOrThrow(path_, *impl_, [&] {
    std::vector<OpSummary> out;
    std::vector<NamedTensor> inputs;
    auto finish = [&] {
      if (!out.empty()) out.back().inputs = tensorsLine(inputs);
      inputs.clear();
    };
    sql::Stmt s(impl_->db,
                impl_->schema_version >= 4
                    ? "SELECT o.op_id, o.seq, o.name, o.thread, o.device, r.arg_name, r.dtype, r.shape, "
                      "r.strides, s.module, s.source, s.forward_op FROM ops o LEFT JOIN tensor_refs r ON "
                      "r.op_id = o.op_id AND r.role = 'input' LEFT JOIN sites s ON s.site_id = o.site_id "
                      "WHERE o.captured ORDER BY o.op_id, r.arg_index"
                    : "SELECT o.op_id, o.seq, o.name, o.thread, o.device, r.arg_name, r.dtype, r.shape, "
                      "r.strides, NULL, NULL, NULL FROM ops o LEFT JOIN tensor_refs r ON r.op_id = o.op_id "
                      "AND r.role = 'input' WHERE o.captured ORDER BY o.op_id, r.arg_index");
    while (s.step()) {
      const std::int64_t op_id = s.integer(0);
      if (out.empty() || out.back().op_id != op_id) {
        finish();
        OpSummary op;
        op.op_id = op_id;
        op.seq = static_cast<std::uint64_t>(s.integer(1));
        op.name = s.text(2);
        op.thread = static_cast<int>(s.integer(3));
        op.device = static_cast<int>(s.integer(4));
        auto text = [&](int column) { return s.isNull(column) ? std::string() : s.text(column); };
        op.site = siteText(text(9), text(10), text(11)).substr(0, 1000);
        out.push_back(std::move(op));
      }
      if (s.isNull(5)) continue;  // an op with no input
      // Untrusted text: shown only when it parses (the dtype one the library knows, the arrays of integers).
      const mluopDataType_t dtype = dtypeByName(s.text(6));
      const auto shape = parseIntArray(s.text(7));
      const auto strides = parseIntArray(s.text(8));
      inputs.push_back({s.text(5), dtype != MLUOP_DTYPE_INVALID && shape && strides
                                       ? tensorText(mlu::dtypeName(dtype), *shape, *strides)
                                       : std::string("?")});
    }
    finish();
    return out;
  });
}

CapturedOp CaptureReader::load(std::int64_t op_id) {
  return readOrThrow(path_, *impl_, [&] {
    CapturedOp op;
    sql::Stmt s(
        impl_->db,
        impl_->schema_version >= 5
            ? "SELECT op_id, seq, name, symbol, thread, queue, device, host_start_ns, host_dur_ns, "
              "device_dur_ns, status, fallback, captured, framework_op, s.module, s.source, "
              "s.forward_op, region FROM ops LEFT JOIN sites s ON s.site_id = ops.site_id WHERE op_id = ?"
        : impl_->schema_version >= 4
            ? "SELECT op_id, seq, name, symbol, thread, queue, device, host_start_ns, host_dur_ns, "
              "device_dur_ns, status, fallback, captured, framework_op, s.module, s.source, "
              "s.forward_op, NULL FROM ops LEFT JOIN sites s ON s.site_id = ops.site_id WHERE op_id = ?"
        : impl_->schema_version >= 3
            ? "SELECT op_id, seq, name, symbol, thread, queue, device, host_start_ns, host_dur_ns, "
              "device_dur_ns, status, fallback, captured, framework_op, NULL, NULL, NULL, NULL FROM ops "
              "WHERE op_id = ?"
            : "SELECT op_id, seq, name, symbol, thread, queue, device, host_start_ns, host_dur_ns, "
              "device_dur_ns, status, fallback, captured, NULL, NULL, NULL, NULL, NULL FROM ops WHERE "
              "op_id = ?");
    s.bind(1, op_id);
    if (!s.step())
      throw ReadError(fmt::format("'{}' has no op with id {} (op-replay --list shows them)", path_, op_id));
    op.op_id = s.integer(0);
    op.seq = static_cast<std::uint64_t>(s.integer(1));
    op.name = s.text(2);
    op.symbol = s.text(3);
    op.thread = static_cast<std::uint32_t>(s.integer(4));
    op.queue = static_cast<std::uint64_t>(s.integer(5));
    op.device = static_cast<int>(s.integer(6));
    op.host_start_ns = s.integer(7);
    op.host_dur_ns = s.integer(8);
    op.device_dur_ns = s.integer(9);
    op.status = static_cast<int>(s.integer(10));
    op.fallback = static_cast<int>(s.integer(11));
    op.captured = s.integer(12) != 0;
    if (!s.isNull(13)) op.framework_op = s.text(13);
    if (!s.isNull(14)) op.module = s.text(14);
    if (!s.isNull(15)) op.source = s.text(15);
    if (!s.isNull(16)) op.forward_op = s.text(16);
    if (!s.isNull(17)) op.region = s.text(17).substr(0, 256);
    if (!mlu::findOp(op.name, &op.op)) {
      throw ReadError(
          fmt::format("'{}': op {} is '{}', which this build does not know", path_, op_id, op.name));
    }
    sql::Stmt t(
        impl_->db,
        "SELECT r.role, r.arg_index, r.arg_name, r.dtype, r.layout, r.shape, r.strides, r.nbytes, b.data "
        "FROM tensor_refs r JOIN blobs b ON b.blob_id = r.blob_id WHERE r.op_id = ? ORDER BY r.rowid");
    t.bind(1, op_id);
    while (t.step()) {
      TensorRecord r;
      r.role = t.text(0);
      r.arg_index = static_cast<int>(t.integer(1));
      r.arg_name = t.text(2);
      r.dtype = dtypeByName(t.text(3));
      r.layout = static_cast<mluopTensorLayout_t>(t.integer(4));
      auto damaged = [&](const std::string& what) {
        return ReadError(fmt::format("'{}': tensor {} (argument {}, {}) of op {} ({}) is damaged: {}", path_,
                                     r.arg_name, r.arg_index, r.role, op_id, op.name, what));
      };
      const std::optional<std::vector<std::int64_t>> shape = parseIntArray(t.text(5)),
                                                     strides = parseIntArray(t.text(6));
      if (!shape) throw damaged(fmt::format("its shape '{:.40}' is not an array of integers", t.text(5)));
      if (!strides)
        throw damaged(fmt::format("its strides '{:.40}' are not an array of integers", t.text(6)));
      r.shape = *shape;
      r.strides = *strides;
      if (r.dtype == MLUOP_DTYPE_INVALID) throw damaged(fmt::format("dtype '{:.40}' is unknown", t.text(3)));
      const auto* data = static_cast<const std::byte*>(t.blob(8));
      r.data.assign(data, data + t.bytes(8));
      if (const std::string problem = tensorRowProblem(r, t.integer(7)); !problem.empty())
        throw damaged(problem);
      op.tensors.push_back(std::move(r));
    }
    sql::Stmt v(impl_->db, "SELECT name, value FROM scalars WHERE op_id = ? ORDER BY rowid");
    v.bind(1, op_id);
    while (v.step()) op.scalars.emplace_back(v.text(0), v.text(1));
    return op;
  });
}

RunRecord CaptureReader::run() {
  return readOrThrow(path_, *impl_, [&] {
    RunRecord r;
    sql::Stmt s(impl_->db, impl_->schema_version >= 2
                               ? "SELECT pid, rank, command_line, start_time, start_unix_ns, "
                                 "opscope_version, options, world_size FROM runs ORDER BY run_id LIMIT 1"
                               : "SELECT pid, rank, command_line, start_time, start_unix_ns, "
                                 "opscope_version, options, 0 FROM runs ORDER BY run_id LIMIT 1");
    if (s.step()) {
      r.pid = s.integer(0);
      r.rank = static_cast<int>(s.integer(1));
      r.command_line = s.text(2);
      r.start_time_iso = s.text(3);
      r.start_unix_ns = s.integer(4);
      r.opscope_version = s.text(5);
      r.options_json = s.text(6);
      r.world_size = static_cast<int>(std::clamp<std::int64_t>(s.integer(7), 0, 1 << 24));
    }
    return r;
  });
}

}  // namespace opscope::rundb
