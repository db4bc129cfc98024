// device_time.h — where a profiled run's device time went, read from its trace: per device and queue, per
// marked step, the time busy (kernels, copies, collectives, and how much of them overlapped) and the time
// idle, split by cause (the host had not asked for the next task yet, and was doing what; the queue waited
// on a notifier; the task was asked for but not started), and the critical path of each step: the chain of
// host calls and device tasks, each waiting on the one before, that sets the step's length. The model's
// `device_time` section (report.h; docs/profiler.md "Where the device time went" defines each figure).
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace opscope::report {

struct DeviceTimeLimits {
  std::size_t max_spans = 6'000'000;  // host and device spans read, over all the trace's files (~0.3 GB)
  std::size_t top = 8;                // names listed per figure (host spans in idle time, the path's)
  std::size_t step_rows = 200;        // steps listed (the slowest ones, in step order)
};

// Takes a run's trace events as the report reads them (one pass over its files), then analyses them.
class DeviceTimeReader {
 public:
  explicit DeviceTimeReader(const DeviceTimeLimits& limits = {});
  ~DeviceTimeReader();
  DeviceTimeReader(const DeviceTimeReader&) = delete;
  DeviceTimeReader& operator=(const DeviceTimeReader&) = delete;

  // A line of the profiler's own format: read without parsing it when it is plain; true when it is not and
  // must be parsed and handed to event().
  bool line(std::string_view line);
  // An event parsed whole: from a trace not in the line format, or a line line() could not read.
  void event(const nlohmann::json& e);
  // The section, or null when no device task was read; warnings when the spans were too many.
  nlohmann::json finish(std::vector<std::string>& warnings);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace opscope::report
