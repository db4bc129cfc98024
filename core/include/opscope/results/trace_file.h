// trace_file.h — the contract of the profiler's trace (Chrome Trace Event Format, JSON object form), which
// the profiler writes and the report, the ranks view, trace-check and the trace repair read.
//
// Files, in the result directory:
//   trace.json                 the whole run (OP_TIME_MEASURE=1)
//   trace_step<N>.json         one active window of OP_TIME_MEASURE_SCHEDULE, N its first step
//   <name>.<n>.json            a segment past the first, n from 1 (OP_TRACE_SEGMENT_MB)
//   <name>.gz                  each of them gzip-compressed (OP_TRACE_GZIP)
//   <name>.tmp                 a file not finished yet, or left so by a run killed with SIGKILL (readable as
//                              far as it goes; trace-check --repair completes it)
// Processes: the host process by its pid; device d as kDevicePidBase + d ("MLU d", a thread per queue).
// The closing "otherData" object carries "format_version" (kTraceFormatVersion), the tool and the options.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace opscope::results {

inline constexpr std::int64_t kTraceFormatVersion = 1;

// Trace process ids of the devices: Linux pids stay below PID_MAX_LIMIT (2^22), so these never meet the
// host's.
inline constexpr long kDevicePidBase = 4'194'304;

inline constexpr std::string_view kTraceFile = "trace.json";
inline constexpr std::string_view kUnfinishedSuffix = ".tmp";

// trace_step<N>.json
inline std::string traceStepFile(std::uint64_t first_step) {
  return "trace_step" + std::to_string(first_step) + ".json";
}

// path with ".<n>" before its ".json": trace.json -> trace.1.json, trace_step3.json -> trace_step3.1.json.
inline std::string segmentPath(std::string_view path, int n) {
  const std::size_t dot = path.ends_with(".json") ? path.size() - 5 : path.size();
  return std::string(path.substr(0, dot)) + "." + std::to_string(n) + std::string(path.substr(dot));
}

// Whether a file name is an unfinished trace (<name>.json.tmp or <name>.json.gz.tmp).
constexpr bool isUnfinishedTrace(std::string_view name) {
  return name.ends_with(".json.tmp") || name.ends_with(".json.gz.tmp");
}

// Whether a file name in a result directory is one of the profiler's traces (finished or not, compressed or
// not, a segment or not).
constexpr bool isTraceFile(std::string_view name) {
  if (name.ends_with(kUnfinishedSuffix)) name.remove_suffix(kUnfinishedSuffix.size());
  if (name.ends_with(".gz")) name.remove_suffix(3);
  return (name.starts_with("trace.") || name.starts_with("trace_step")) && name.ends_with(".json");
}

// The name a finished trace has (the name without ".tmp").
constexpr std::string_view finishedName(std::string_view name) {
  return name.ends_with(kUnfinishedSuffix) ? name.substr(0, name.size() - kUnfinishedSuffix.size()) : name;
}

}  // namespace opscope::results
