// run_file.h — the contract of run.json, which the hook writes in every result directory (when the run
// starts, with "ended": null, and again when it ends) and the report, the summary, the ranks view and
// `opscope analyze` read: the run (command, pid, rank, world_size, job, start_time, duration_s, ended,
// version: opscope's), the options in effect, which tools were on ("tools") and what they found that has no
// file of its own ("findings", under each tool's name).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace opscope::results {

inline constexpr std::string_view kRunFile = "run.json";
inline constexpr std::int64_t kRunFormatVersion = 1;

// findings["framework fallbacks"]: the framework's ops it ran on the CPU, by name (names past the limit are
// counted in "other_calls"), each name cut to kMaxFrameworkOpName bytes.
inline constexpr std::size_t kMaxFrameworkFallbacks = 512;
inline constexpr std::size_t kMaxFrameworkOpName = 256;
// findings["regions"]: the program's regions (opscope.compare() and the others) by label; regions past this
// many labels are only counted ("other_regions").
inline constexpr std::size_t kMaxRegionLabels = 512;
// What a reader shows of tools it does not know: how many, their names' length, each one's findings.
inline constexpr std::size_t kMaxTools = 32;
inline constexpr std::size_t kMaxToolName = 64;
inline constexpr std::size_t kMaxFindingBytes = 16 * 1024;
// The largest run.json a reader reads.
inline constexpr std::uintmax_t kMaxRunFileBytes = std::uintmax_t{16} << 20;

}  // namespace opscope::results
