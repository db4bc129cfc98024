// time_diff.h — `opscope diff RUN_A RUN_B` of two profiled runs: where the time went from one to the other,
// from each run's time_measure.csv (the profiler's row per op call: name, host and device time, input
// shapes, and for a framework's program its module). Ops are matched by name, input signatures by op name and
// input shapes, modules by their path; each list is ordered by the change of its device time, largest first,
// with the calls and the mean time per call in both runs, and the signatures only one run has are listed
// apart (new in B, vanished from A). time_measure.csv may come from anyone: fields are read bounded and a
// row that does not parse is skipped and counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace opscope::analysis {

// Op calls summed: how many, and their device and host time.
struct TimeLine {
  std::uint64_t calls = 0;
  double device_ms = 0;
  double host_ms = 0;
  double deviceMean() const { return calls > 0 ? device_ms / static_cast<double>(calls) : 0; }
};

// One profiled run's op calls, summed by op, by input signature and by module.
struct TimeProfile {
  std::string path;  // its time_measure.csv
  TimeLine total;
  std::map<std::string, TimeLine> ops;                                 // by op name
  std::map<std::pair<std::string, std::string>, TimeLine> signatures;  // by (op name, input shapes)
  std::map<std::string, TimeLine> modules;                             // by module path (a framework's)
  std::size_t malformed = 0;                                           // rows skipped
};

// Whether `run` is a profiled run: a result directory holding time_measure.csv, or such a file (a .csv).
bool isProfiledRun(const std::filesystem::path& run);

// Reads a profiled run (as isProfiledRun). Throws DiffError (diff.h) when it cannot be read.
TimeProfile loadTimeProfile(const std::filesystem::path& run);

// One op, signature or module in both runs (a = {} when only B has it, b = {} when only A has it).
struct TimeChange {
  std::string what;  // "max_pool2d_forward", "linear [x float32[8,64], ...]", "model.layers.0.attn"
  TimeLine a, b;
  double change() const { return b.device_ms - a.device_ms; }
};

struct TimeDiff {
  std::string run_a, run_b;  // the time_measure.csv files
  TimeLine total_a, total_b;
  std::size_t malformed_a = 0, malformed_b = 0;
  // Device time grew (slower) or shrank (faster), largest change first, at most `top` of each.
  std::vector<TimeChange> slower_ops, faster_ops;
  std::vector<TimeChange> slower_signatures, faster_signatures;  // signatures both runs have
  std::vector<TimeChange> slower_modules, faster_modules;
  // Signatures only one run has, by their device time, at most `top`, and how many there are.
  std::vector<TimeChange> new_signatures, vanished_signatures;
  std::size_t new_count = 0, vanished_count = 0;
};

TimeDiff diffTimes(const TimeProfile& a, const TimeProfile& b, std::size_t top = 10);

// The comparison as text.
std::string renderTimeDiff(const TimeDiff& d);

// Its sections of a page (<section> elements, ids "time-total", "time-ops", "time-signatures",
// "time-modules", "time-only"), and a whole self-contained page in `style` (the report's).
std::string renderTimeDiffSections(const TimeDiff& d);
// `more`: further sections put at the end of the page (the runs' memory diff, memory_diff.h).
std::string renderTimeDiffHtml(const TimeDiff& d, std::string_view style, std::string_view more = {});

}  // namespace opscope::analysis
