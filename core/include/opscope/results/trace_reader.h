// trace_reader.h — the one reader of trace files (opscope/results/trace_file.h's contract), for the report
// and the ranks view: the profiler's line format a line at a time (bounded), any other Chrome trace whole
// (bounded), gzip-compressed ones inflated whole, an unfinished one (".tmp", a killed run's) as far as it
// goes. A trace in a newer format version than this opscope reads is refused before any event is handed on.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string_view>

namespace opscope::results {

struct TraceCallbacks {
  // Each event object (a malformed one is counted, not handed on).
  std::function<void(nlohmann::json& event)> take;
  // The trace's otherData object, when it has one.
  std::function<void(const nlohmann::json& other)> other;
  // The profiler's line format only: whether an event line is worth parsing (false: skipped unparsed; the
  // report skips the millions of host spans it does not show). Unset: every line is parsed.
  std::function<bool(std::string_view line)> wanted;
};

// Reads one trace file; returns the number of malformed events skipped. Throws std::runtime_error (with the
// file's name) when it cannot be read, is no trace, or is in a newer format version.
std::size_t readTrace(const std::filesystem::path& path, const TraceCallbacks& callbacks);
inline std::size_t readTrace(const std::filesystem::path& path,
                             const std::function<void(nlohmann::json&)>& take,
                             const std::function<void(const nlohmann::json&)>& other) {
  return readTrace(path, TraceCallbacks{take, other, {}});
}

}  // namespace opscope::results
