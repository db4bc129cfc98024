// The tools of this build, in the fixed order the hook runs them: capture, compare, overflow check,
// profiler, memcheck, and last the capture.db closer. Fallback is not a tool: the hook runs it in place of
// the real call (hook.cpp).
#include "hook.h"

#include <opscope/capture/capture_tool.h>
#include <opscope/compare/compare_tool.h>
#include <opscope/memcheck/memcheck_tool.h>
#include <opscope/profiler/profiler_tool.h>

namespace opscope::hook {

void installTools(const Config& config, const RunInfo& run, std::vector<std::unique_ptr<Tool>>& tools) {
  std::shared_ptr<capture::CaptureWriter> database;
  if (config.capture || config.autocompare) database = capture::openRunDatabase(config, run);
  if (config.capture) tools.push_back(capture::makeCaptureTool(config, database));
  if (config.autocompare) tools.push_back(compare::makeCompareTool(config, run, database));
  if (config.overflow_check) tools.push_back(compare::makeOverflowTool(config));
  if (config.time_measure) tools.push_back(profiler::makeProfilerTool(config, run));
  if (config.mem_check) tools.push_back(memcheck::makeMemcheckTool(config, run));
  if (database) tools.push_back(capture::makeDatabaseTool(config, database));
}

}  // namespace opscope::hook

// opscope.h: the program's opscope_step().
extern "C" OPSCOPE_EXPORT void opscope_hook_step(void) { opscope::profiler::step(); }
