// The tools of this build, in the fixed order the hook runs them: fallback, capture, compare, profiler,
// memcheck. A tool asked for but not built yet is said once and ignored.
#include "hook.h"

#include <opscope/capture/capture_tool.h>

#include <cstdio>

namespace opscope::hook {

void installTools(const Config& config, const RunInfo& run, std::vector<std::unique_ptr<Tool>>& tools) {
  auto notBuilt = [](const char* variable, const char* what) {
    std::fprintf(stderr, "opscope: %s: %s is not built into this version of libopscope.so yet; ignored\n",
                 variable, what);
  };
  if (config.fallback) notBuilt("OP_FALLBACK_LIST", "fallback");
  if (config.capture) tools.push_back(capture::makeCaptureTool(config, run));
  if (config.autocompare) notBuilt("OP_AUTOCOMPARE", "auto-compare");
  if (config.overflow_check) notBuilt("OP_OVERFLOW_CHECK", "the overflow check");
  if (config.time_measure) notBuilt("OP_TIME_MEASURE", "the profiler");
  if (config.mem_check) notBuilt("MEM_CHECK", "memcheck");
}

}  // namespace opscope::hook
