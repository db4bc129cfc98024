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
#include <functional>
#include <istream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace opscope::results {

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

// The path of an array whose elements are handed out one at a time as they are parsed, not kept: the keys
// of the objects on the way from the root, "[]" for any element of an array on the way. {"comms", "[]",
// "entries"} is root["comms"][i]["entries"] for every i.
using StreamedPath = std::vector<std::string>;
// Takes one element of the streamed array, with the index of each "[]" of the path (i above).
using ElementSink = std::function<void(const std::vector<std::size_t>& at, json&& element)>;

// Builds a JSON value from nlohmann's SAX events in one linear pass, with its nesting bounded (past
// kMaxJsonDepth it stops, too_deep set, and no value that deep is ever built), and the elements of one array
// (StreamedPath) handed to a sink instead of kept: a 200 MB dump whose bulk is one array of small objects is
// then never held as a tree, which takes about nine times its text.
// (nlohmann's parser with a callback, which can bound the depth as it goes, rescans a parent array at the
// end of each of its objects: quadratic in an array of objects, minutes for a 200 MB dump.)
class JsonBuilder final : public nlohmann::json_sax<json> {
 public:
  JsonBuilder() = default;
  JsonBuilder(StreamedPath streamed, ElementSink sink)
      : streamed_(std::move(streamed)), sink_(std::move(sink)) {}

  bool too_deep = false;
  json& value() { return root_; }

  bool null() override { return scalar(json(nullptr)); }
  bool boolean(bool b) override { return scalar(json(b)); }
  bool number_integer(number_integer_t n) override { return scalar(json(n)); }
  bool number_unsigned(number_unsigned_t n) override { return scalar(json(n)); }
  bool number_float(number_float_t x, const string_t&) override { return scalar(json(x)); }
  bool string(string_t& s) override { return scalar(json(std::move(s))); }
  bool binary(binary_t&) override { return false; }  // not in JSON text
  bool start_object(std::size_t) override { return open(json(json::value_t::object)); }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(json(json::value_t::array)); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  static constexpr std::size_t kNone = SIZE_MAX;

  // Where a new value goes: the root, a member of the open object, the end of the open array, or the
  // element being built of the streamed array.
  json* place(json&& v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json& top = *open_.back();
    if (top.is_object()) {
      json& slot = top[key_];
      slot = std::move(v);
      return &slot;
    }
    if (open_.size() - 1 == streamed_at_) {
      element_ = std::move(v);
      return &element_;
    }
    top.push_back(std::move(v));
    return &top.back();
  }
  bool scalar(json&& v) {
    place(std::move(v));
    if (!open_.empty() && open_.size() - 1 == streamed_at_) emit();
    return true;
  }
  bool open(json&& v) {
    if (open_.size() >= static_cast<std::size_t>(kMaxJsonDepth)) {
      too_deep = true;
      return false;
    }
    const bool in_array = !open_.empty() && open_.back()->is_array();
    const bool is_array = v.is_array();
    open_.push_back(place(std::move(v)));
    path_.push_back(open_.size() == 1 ? std::string() : in_array ? std::string("[]") : key_);
    if (is_array && streamed_at_ == kNone && !streamed_.empty() && path_.size() == streamed_.size() + 1 &&
        std::equal(streamed_.begin(), streamed_.end(), path_.begin() + 1))
      streamed_at_ = open_.size() - 1;
    return true;
  }
  bool close() {
    if (open_.size() - 1 == streamed_at_) streamed_at_ = kNone;
    open_.pop_back();
    path_.pop_back();
    if (!open_.empty() && open_.size() - 1 == streamed_at_) emit();
    return true;
  }
  void emit() {
    std::vector<std::size_t> at;
    for (std::size_t i = 0; i < streamed_at_; ++i)
      if (open_[i]->is_array()) at.push_back(open_[i]->size() - 1);
    sink_(at, std::move(element_));
    element_ = json();
  }

  StreamedPath streamed_;
  ElementSink sink_;
  json root_;
  json element_;                     // the element of the streamed array being built
  std::vector<json*> open_;          // the open arrays and objects, outermost first
  std::vector<std::string> path_;    // the key (or "[]") each open one is under
  std::string key_;                  // the key of the next member of the open object
  std::size_t streamed_at_ = kNone;  // the index in open_ of the streamed array while it is open
};

// JSON text parsed with its nesting bounded: discarded when not valid JSON; throws TooDeep when nested
// deeper than kMaxJsonDepth. With a streamed path, the elements of that array go to sink, not in the value.
inline json parseBounded(std::string_view text, StreamedPath streamed = {}, ElementSink sink = {}) {
  JsonBuilder builder(std::move(streamed), std::move(sink));
  if (!json::sax_parse(text, &builder, json::input_format_t::json, false)) {
    if (builder.too_deep) throw TooDeep{};
    return json(json::value_t::discarded);
  }
  return std::move(builder.value());
}

// A JSON file of the result directory (run.json, memcheck.json, a trace not in the profiler's line format):
// untrusted, so a regular file of bounded size and nesting. Throws naming the file.
// With a streamed path, the elements of that array go to sink as they are read (see JsonBuilder).
inline json readJsonFile(const fs::path& path, std::uintmax_t max_bytes, StreamedPath streamed = {},
                         ElementSink sink = {}) {
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
    j = parseBounded(text, std::move(streamed), std::move(sink));
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

}  // namespace opscope::results
