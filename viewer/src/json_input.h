// json_input.h — reading the JSON files of a result directory, which may come from anyone: regular files
// of bounded size, nesting bounded while parsing, traces read a line at a time with a bound per line.
// Shared by the report (load.cpp) and the view of a run's ranks (ranks.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <istream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace opscope::viewer {

namespace fs = std::filesystem;
using nlohmann::json;

// A file of the result directory about to be read: it must be a regular file (a FIFO would block the reader
// for ever, a link to /dev/zero would never end) of at most max_bytes. Throws naming the file.
inline void checkReadable(const fs::path& path, std::uintmax_t max_bytes) {
  const std::string name = path.filename().string();
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);  // follows a symlink: what would be read
  if (ec || !fs::exists(st)) throw std::runtime_error(fmt::format("{}: cannot open", name));
  if (!fs::is_regular_file(st)) throw std::runtime_error(fmt::format("{}: not a regular file", name));
  const std::uintmax_t bytes = fs::file_size(path, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot open: {}", name, ec.message()));
  if (bytes > max_bytes) {
    throw std::runtime_error(
        fmt::format("{}: {} bytes, more than the {} MiB such a file can be", name, bytes, max_bytes >> 20));
  }
}

// The deepest nesting accepted in run.json and memcheck.json (opscope writes 6 levels at most).
inline constexpr int kMaxJsonDepth = 64;

struct TooDeep {};

// Checks JSON text without building it: its nesting (past kMaxJsonDepth: too_deep) and its syntax.
class JsonShape final : public nlohmann::json_sax<json> {
 public:
  bool too_deep = false;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return deeper(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return shallower(); }
  bool start_array(std::size_t) override { return deeper(); }
  bool end_array() override { return shallower(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  bool deeper() {
    too_deep = ++depth_ > kMaxJsonDepth;
    return !too_deep;
  }
  bool shallower() {
    --depth_;
    return true;
  }
  int depth_ = 0;
};

// JSON text parsed with its nesting bounded: discarded when not valid JSON; throws TooDeep when nested
// deeper than kMaxJsonDepth (no value that deep is ever built). Two passes, both linear: the shape is checked
// first (nlohmann's parser with a callback, which could bound the depth as it goes, rescans a parent array
// at the end of each of its objects: quadratic in an array of objects, minutes for a 200 MB dump), then
// the value is built by the plain parser.
inline json parseBounded(std::string_view text) {
  JsonShape shape;
  if (!json::sax_parse(text, &shape, json::input_format_t::json, false)) {
    if (shape.too_deep) throw TooDeep{};
    return json(json::value_t::discarded);
  }
  return json::parse(text, nullptr, false);
}

// A JSON file of the result directory (run.json, memcheck.json, a trace not in the profiler's line format):
// untrusted, so a regular file of bounded size and nesting. Throws naming the file.
inline json readJsonFile(const fs::path& path, std::uintmax_t max_bytes) {
  checkReadable(path, max_bytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open", path.filename().string()));
  std::string text;
  {
    std::error_code ec;
    const std::uintmax_t bytes = fs::file_size(path, ec);
    if (!ec) text.reserve(static_cast<std::size_t>(std::min(bytes, max_bytes)));
    std::array<char, 1 << 16> buffer;
    // At most max_bytes (a file that grows while it is read is cut there, and is then not valid JSON).
    while (text.size() < max_bytes && in.read(buffer.data(), buffer.size()).gcount() > 0) {
      text.append(buffer.data(),
                  static_cast<std::size_t>(std::min<std::uintmax_t>(in.gcount(), max_bytes - text.size())));
    }
  }
  json j;
  try {
    j = parseBounded(text);
  } catch (const TooDeep&) {
    throw std::runtime_error(
        fmt::format("{}: nested deeper than {} levels", path.filename().string(), kMaxJsonDepth));
  }
  if (j.is_discarded()) throw std::runtime_error(fmt::format("{}: not valid JSON", path.filename().string()));
  return j;
}

// A whole-number member of an untrusted object (an unsigned one past INT64_MAX is INT64_MAX), or nullopt.
inline std::optional<std::int64_t> integer(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  if (it->is_number_unsigned())
    return static_cast<std::int64_t>(std::min<std::uint64_t>(it->get<std::uint64_t>(), INT64_MAX));
  if (it->is_number_integer()) return it->get<std::int64_t>();
  return std::nullopt;
}

// A string member of an untrusted object, or "".
inline std::string text(const json& j, const char* key) {
  if (!j.is_object()) return {};
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The size limit of a trace not in the profiler's line format, read whole.
inline constexpr std::uintmax_t kMaxWholeTraceBytes = std::uintmax_t{512} << 20;

// The longest line of a trace in the profiler's line format that is read: its events are a few hundred
// bytes (a host span with its shapes a few KiB). A longer line is skipped as malformed, so that a hostile
// file of one endless line cannot take all memory.
inline constexpr std::size_t kMaxTraceLineBytes = std::size_t{1} << 20;

// One line of in, without its newline, into line, keeping at most max bytes of it: a longer line is read
// to its end, *too_long set. False when nothing is left to read.
inline bool readBoundedLine(std::istream& in, std::string& line, std::size_t max, bool& too_long) {
  line.clear();
  too_long = false;
  std::array<char, 64 * 1024> buffer;
  bool any = false;
  for (;;) {
    in.getline(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    const bool whole = !in.fail() && !in.eof();  // the newline was read (and counted in got)
    const std::size_t chars = whole ? got - 1 : got;
    const std::size_t keep = std::min(chars, max - line.size());
    line.append(buffer.data(), keep);
    too_long |= keep < chars;
    any |= got > 0;
    if (whole) return true;
    if (in.eof()) return any;  // the last line, without a newline
    in.clear();                // the buffer was full: the line goes on
  }
}

}  // namespace opscope::viewer
