#include <opscope/capture/reader.h>

#include "sqlite.h"

#include <mlu/dtype.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace opscope::capture {
namespace {

namespace fs = std::filesystem;

mluopDataType_t dtypeByName(const std::string& name) {
  for (int d = MLUOP_DTYPE_FLOAT; d <= MLUOP_DTYPE_BOOL; ++d) {
    const auto dtype = static_cast<mluopDataType_t>(d);
    if (mlu::dtypeName(dtype) == name) return dtype;
  }
  return MLUOP_DTYPE_INVALID;
}

std::vector<std::int64_t> jsonArray(const std::string& text) {
  return nlohmann::json::parse(text).get<std::vector<std::int64_t>>();
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

struct CaptureReader::Impl {
  sql::Db db;
  explicit Impl(const std::string& path) : db(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX) {}
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
  checkNotTruncated(path);
  try {
    auto impl = std::make_unique<Impl>(path);
    sql::Stmt tables(
        impl->db,
        "SELECT count(*) FROM sqlite_master WHERE name IN ('ops', 'tensor_refs', 'blobs', 'scalars')");
    tables.step();
    if (tables.integer(0) != 4) {
      throw ReadError(
          fmt::format("'{}' is an SQLite database but not an opscope capture (no ops/tensor tables)", path));
    }
    return std::make_unique<CaptureReader>(path, std::move(impl));
  } catch (const sql::Error& e) {
    if (e.code() == SQLITE_NOTADB)
      throw ReadError(fmt::format("'{}' is not an SQLite database (not a capture.db)", path));
    if (e.code() == SQLITE_CORRUPT) throw ReadError(fmt::format("'{}' is corrupt: {}", path, e.what()));
    throw ReadError(fmt::format("cannot read '{}': {}", path, e.what()));
  }
}

namespace {
template <typename F>
auto readOrThrow(const std::string& path, F&& f) {
  try {
    return f();
  } catch (const sql::Error& e) {
    if (e.code() == SQLITE_CORRUPT || e.code() == SQLITE_NOTADB) {
      throw ReadError(fmt::format("'{}' is corrupt: {}", path, e.what()));
    }
    throw ReadError(fmt::format("cannot read '{}': {}", path, e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw ReadError(fmt::format("'{}' holds a malformed shape or strides: {}", path, e.what()));
  }
}
}  // namespace

std::vector<std::int64_t> CaptureReader::ids() {
  return readOrThrow(path_, [&] {
    std::vector<std::int64_t> out;
    sql::Stmt s(impl_->db, "SELECT op_id FROM ops WHERE captured ORDER BY op_id");
    while (s.step()) out.push_back(s.integer(0));
    return out;
  });
}

std::vector<OpSummary> CaptureReader::list() {
  return readOrThrow(path_, [&] {
    std::vector<OpSummary> out;
    sql::Stmt s(
        impl_->db,
        "SELECT o.op_id, o.seq, o.name, o.thread, o.device, "
        "  (SELECT group_concat(shape, ' ') FROM (SELECT shape FROM tensor_refs r WHERE r.op_id = o.op_id "
        "     AND r.role = 'input' ORDER BY arg_index)), "
        "  (SELECT group_concat(dtype, ' ') FROM (SELECT dtype FROM tensor_refs r WHERE r.op_id = o.op_id "
        "     AND r.role = 'input' ORDER BY arg_index)) "
        "FROM ops o WHERE o.captured ORDER BY o.op_id");
    while (s.step()) {
      OpSummary op;
      op.op_id = s.integer(0);
      op.seq = static_cast<std::uint64_t>(s.integer(1));
      op.name = s.text(2);
      op.thread = static_cast<int>(s.integer(3));
      op.device = static_cast<int>(s.integer(4));
      // shapes are "[a, b] [c]": split on "] "
      const std::string shapes = s.text(5);
      std::size_t start = 0;
      while (start < shapes.size()) {
        const auto end = shapes.find("] ", start);
        op.shapes.push_back(
            shapes.substr(start, end == std::string::npos ? std::string::npos : end + 1 - start));
        if (end == std::string::npos) break;
        start = end + 2;
      }
      const std::string dtypes = s.text(6);
      start = 0;
      while (start < dtypes.size()) {
        const auto end = dtypes.find(' ', start);
        op.dtypes.push_back(dtypes.substr(start, end == std::string::npos ? std::string::npos : end - start));
        if (end == std::string::npos) break;
        start = end + 1;
      }
      out.push_back(std::move(op));
    }
    return out;
  });
}

CapturedOp CaptureReader::load(std::int64_t op_id) {
  return readOrThrow(path_, [&] {
    CapturedOp op;
    sql::Stmt s(
        impl_->db,
        "SELECT op_id, seq, name, symbol, thread, queue, device, host_start_ns, host_dur_ns, device_dur_ns, "
        "status, fallback FROM ops WHERE op_id = ?");
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
      r.shape = jsonArray(t.text(5));
      r.strides = jsonArray(t.text(6));
      const auto* data = static_cast<const std::byte*>(t.blob(8));
      r.data.assign(data, data + t.bytes(8));
      if (r.dtype == MLUOP_DTYPE_INVALID || static_cast<std::int64_t>(r.data.size()) != t.integer(7)) {
        throw ReadError(fmt::format("'{}': tensor {} of op {} is damaged (dtype '{}', {} of {} bytes)", path_,
                                    r.arg_name, op_id, t.text(3), r.data.size(), t.integer(7)));
      }
      op.tensors.push_back(std::move(r));
    }
    sql::Stmt v(impl_->db, "SELECT name, value FROM scalars WHERE op_id = ? ORDER BY rowid");
    v.bind(1, op_id);
    while (v.step()) op.scalars.emplace_back(v.text(0), v.text(1));
    return op;
  });
}

RunRecord CaptureReader::run() {
  return readOrThrow(path_, [&] {
    RunRecord r;
    sql::Stmt s(
        impl_->db,
        "SELECT pid, rank, command_line, start_time, start_unix_ns, opscope_version, options FROM runs "
        "ORDER BY run_id LIMIT 1");
    if (s.step()) {
      r.pid = s.integer(0);
      r.rank = static_cast<int>(s.integer(1));
      r.command_line = s.text(2);
      r.start_time_iso = s.text(3);
      r.start_unix_ns = s.integer(4);
      r.opscope_version = s.text(5);
      r.options_json = s.text(6);
    }
    return r;
  });
}

}  // namespace opscope::capture
