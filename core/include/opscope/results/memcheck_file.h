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

}  // namespace opscope::results
