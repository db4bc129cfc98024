// flight_recorder_file.h — the contract of flight_recorder.json, which the flight recorder of each rank
// dumps (at a timeout, a failed collective, SIGUSR1, another rank's request, and at exit) and `opscope
// analyze` reads: {"format": kFlightRecorderFormat, "format_version", "rank", "world_size", "pid",
// "reasons", "dumped_unix_ns", "dumped_monotonic_ns", "start_unix_ns", "comms": [{"comm", "rank", "size",
// "last_enqueued", "last_started", "last_completed", "entries": [...]}], "backtraces": {id: [frames]}}.
// (Dumps written before format_version was stored say "version": 1.)
#pragma once

#include <cstdint>
#include <string_view>

namespace opscope::results {

inline constexpr std::string_view kFlightRecorderFile = "flight_recorder.json";
inline constexpr std::string_view kFlightRecorderFormat = "opscope-flight-recorder";
inline constexpr std::int64_t kFlightRecorderFormatVersion = 1;
// The largest dump a reader reads.
inline constexpr std::uintmax_t kMaxFlightRecorderFileBytes = std::uintmax_t{256} << 20;

}  // namespace opscope::results
