// replay.h — re-running a captured op: its argument struct rebuilt from the capture (fresh copies of the
// inputs every run, so in-place ops replay from the values they had), run on the simulated MLU through the
// kernel library's C API, or on the CPU reference.
#pragma once

#include <opscope/rundb/record.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace opscope::capture {

using rundb::CapturedOp;
using rundb::TensorRecord;

enum class ReplayDevice { kMlu, kCpu };

struct ReplayResult {
  bool ok = false;
  std::string error;                  // why not ok: the library's message, or what the capture lacks
  std::vector<TensorRecord> outputs;  // role "output", packed like the capture's
  double elapsed_ms = 0;              // host time of the call (+ queue sync), or device time when asked
};

class Replayer {
 public:
  explicit Replayer(ReplayDevice device);
  ~Replayer();
  Replayer(const Replayer&) = delete;
  Replayer& operator=(const Replayer&) = delete;

  // device_time: measure the kernel with notifiers on the queue instead of host time.
  ReplayResult run(const CapturedOp& op, bool device_time = false);

  struct DeviceContext;

 private:
  DeviceContext& context(int device);
  ReplayDevice device_;
  std::map<int, std::unique_ptr<DeviceContext>> contexts_;
};

}  // namespace opscope::capture
