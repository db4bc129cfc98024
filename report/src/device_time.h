// device_time.h — where a profiled run's device time went, read from its trace: per device and queue, per
// marked step, the time busy (kernels, copies, collectives, and how much of them overlapped) and the time
// idle, split by cause (the host had not asked for the next task yet, and was doing what; the queue waited
// on a notifier; the task was asked for but not started), and the critical path of each step: the chain of
// host calls and device tasks, each waiting on the one before, that sets the step's length. The model's
// `device_time` section (report.h; docs/profiler.md "Where the device time went" defines each figure).
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace opscope::report {

struct DeviceTimeLimits {
  std::size_t max_spans = 8'000'000;  // host and device spans read, over all the trace's files
  std::size_t top = 8;                // names listed per figure (host spans in idle time, the path's)
  std::size_t step_rows = 200;        // steps listed (the slowest ones, in step order)
};

// Reads the trace files (the run's trace.json and its segments, in order) and returns the section, or null
// when they hold no device task. A file that cannot be read is a warning; its events so far still count.
nlohmann::json analyzeDeviceTime(const std::vector<std::filesystem::path>& traces,
                                 std::vector<std::string>& warnings, const DeviceTimeLimits& limits = {});

}  // namespace opscope::report
