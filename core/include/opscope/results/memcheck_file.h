// memcheck_file.h — the contract of memcheck.json, which memcheck writes at the end of a run (beside its
// text report, memcheck_report.txt) and the report and the summary read: the leaks and the allocations
// still held at exit, by site, the memory errors, and their backtraces.
#pragma once

#include <cstdint>
#include <string_view>

namespace opscope::results {

inline constexpr std::string_view kMemcheckFile = "memcheck.json";
inline constexpr std::int64_t kMemcheckFormatVersion = 1;
// The largest memcheck.json a reader reads.
inline constexpr std::uintmax_t kMaxMemcheckFileBytes = std::uintmax_t{256} << 20;

// memory_snapshot.json: what memcheck found live when an mlurtMalloc failed for lack of device memory (the
// last such failure of the run): format_version, tool, command, pid, failures (how many mlurtMalloc calls
// failed so far), failed_request {bytes, place, device, op_seq, stack}, live_summary {bytes, allocations,
// sites}, live (by allocation site, as memcheck.json's leaks: bytes, allocations, place, first, stack),
// peaks (as memcheck.json's), program_allocator {segments, segment_bytes, pieces, piece_bytes, free_bytes}
// (a program's own allocator: the device blocks it holds and the pieces of them it has handed out).
inline constexpr std::string_view kMemorySnapshotFile = "memory_snapshot.json";
inline constexpr std::int64_t kMemorySnapshotFormatVersion = 1;

}  // namespace opscope::results
