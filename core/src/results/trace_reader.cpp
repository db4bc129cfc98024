#include <opscope/results/trace_reader.h>

#include <opscope/results/json_input.h>

#include <opscope/gunzip.h>
#include <opscope/results/format_version.h>
#include <opscope/results/trace_file.h>

#include <fmt/format.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

namespace opscope::results {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The profiler's closing line holds otherData: ],"displayTimeUnit":"ms","otherData":{...}}
constexpr std::string_view kOtherDataKey = "\"otherData\":";

// otherData of a closing line, or discarded.
json otherDataOf(std::string_view line) {
  const auto at = line.find(kOtherDataKey);
  if (!line.starts_with("],") || at == std::string_view::npos || !line.ends_with("}}"))
    return json(json::value_t::discarded);
  const std::size_t from = at + kOtherDataKey.size();
  try {
    return parseBounded(line.substr(from, line.size() - from - 1));
  } catch (const TooDeep&) {
    return json(json::value_t::discarded);
  }
}

// The last line of a text (without its newline).
std::string_view lastLine(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  const auto nl = text.rfind('\n');
  return nl == std::string_view::npos ? text : text.substr(nl + 1);
}

// The closing line's otherData of a file in the line format, read from its end (before its events are read:
// a newer format is refused before any is handed on). Discarded when it has none (an unfinished trace).
json tailOtherData(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (!in || size <= 0) return json(json::value_t::discarded);
  const std::streamoff from = size > static_cast<std::streamoff>(kMaxTraceLineBytes)
                                  ? size - static_cast<std::streamoff>(kMaxTraceLineBytes)
                                  : 0;
  in.seekg(from);
  std::string tail(static_cast<std::size_t>(size - from), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  tail.resize(static_cast<std::size_t>(in.gcount()));
  return otherDataOf(lastLine(tail));
}

void checkVersion(const std::string& name, const json& other) {
  if (const std::string error = results::formatVersionError(name, other, results::kTraceFormatVersion);
      !error.empty())
    throw std::runtime_error(error);
}

}  // namespace

std::size_t readTrace(const fs::path& path, const TraceCallbacks& callbacks) {
  const std::string name = path.filename().string();
  const std::string_view finished = results::finishedName(name);
  const bool gzip = finished.ends_with(".gz");
  std::unique_ptr<std::istream> stream;
  std::string inflated;
  if (gzip) {
    // OP_TRACE_GZIP: inflated whole (as far as it goes: a killed run's file is cut), then read as text.
    inflated = opscope::gunzipFile(path.string(), kMaxWholeTraceBytes).text;
    if (const json other = otherDataOf(lastLine(inflated)); other.is_object()) checkVersion(name, other);
    stream = std::make_unique<std::istringstream>(std::move(inflated));
  } else {
    checkReadable(path, ~std::uintmax_t{0});
    stream = std::make_unique<std::ifstream>(path);
    if (!*stream) throw std::runtime_error(fmt::format("{}: cannot open", name));
  }
  std::string line;
  bool too_long = false;
  readBoundedLine(*stream, line, kMaxTraceLineBytes, too_long);
  std::size_t bad = 0;
  if (line != "{\"traceEvents\":[") {
    // Another writer's trace (or the merged one of an older opscope): read whole, bounded.
    if (gzip) throw std::runtime_error(fmt::format("{}: not a trace written by opscope", name));
    stream.reset();
    json whole = readJsonFile(path, kMaxWholeTraceBytes);
    const bool has_other = whole.is_object() && whole.contains("otherData");
    if (has_other) checkVersion(name, whole["otherData"]);
    if (has_other && callbacks.other) callbacks.other(whole["otherData"]);
    json& events = whole.is_object() && whole.contains("traceEvents") ? whole["traceEvents"] : whole;
    if (!events.is_array()) throw std::runtime_error(fmt::format("{}: no traceEvents", name));
    for (json& e : events) {
      if (e.is_object())
        callbacks.take(e);
      else
        ++bad;
    }
    return bad;
  }
  if (!gzip) {
    if (const json other = tailOtherData(path); other.is_object()) checkVersion(name, other);
  }
  while (readBoundedLine(*stream, line, kMaxTraceLineBytes, too_long)) {
    if (too_long) {
      ++bad;
      continue;
    }
    if (line.starts_with("],")) {
      if (const json o = otherDataOf(line); o.is_object() && callbacks.other) callbacks.other(o);
      continue;
    }
    if (line.empty() || line[0] != '{') continue;
    if (line.back() == ',') line.pop_back();
    if (callbacks.wanted && !callbacks.wanted(line)) continue;
    json e;
    try {
      e = parseBounded(line);
    } catch (const TooDeep&) {
      e = json(json::value_t::discarded);
    }
    if (!e.is_object()) {
      ++bad;
      continue;
    }
    callbacks.take(e);
  }
  return bad;
}

}  // namespace opscope::results
