// The tools of this build, in the fixed order the hook runs them (tool.h's table): capture, compare,
// overflow check, profiler, memcheck, the capture.db closer, then fallback, OP_SYNC_EXEC and OP_DUMP_ARGS.
#include "hook.h"

#include <opscope/private_file.h>

#include <opscope/capture/capture_tool.h>
#include <opscope/compare/compare_tool.h>
#include <opscope/fallback/fallback.h>
#include <opscope/memcheck/memcheck_tool.h>
#include <opscope/profiler/profiler_tool.h>

#include <cstdio>
#include <exception>

namespace opscope::hook {

namespace {

// A tool that cannot start (its file cannot be made: a full disk) is said and left out; the others run.
template <typename F>
void startTool(const char* what, F&& start) {
  try {
    start();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "opscope: %s: %s; it is off for this run\n", what, e.what());
  }
}

// The tools that write into the result directory (run: its RunInfo).
void installResultTools(const Config& config, const RunInfo& run, std::vector<std::unique_ptr<Tool>>& tools) {
  std::shared_ptr<rundb::CaptureWriter> database;
  if (config.capture || config.autocompare) {
    try {
      database = rundb::openRunDatabase(config, run);
    } catch (const std::exception& e) {
      noteWriteError(e.what());
      std::fprintf(stderr, "opscope: %s; %s off for this run\n", e.what(),
                   config.capture && config.autocompare ? "capture and autocompare are"
                   : config.capture                     ? "capture is"
                                                        : "autocompare is");
    }
  }
  if (config.capture && database) tools.push_back(capture::makeCaptureTool(config, database));
  if (config.autocompare && database) {
    startTool("autocompare", [&] { tools.push_back(compare::makeCompareTool(config, run, database)); });
  }
  if (config.overflow_check) tools.push_back(compare::makeOverflowTool(config));
  if (config.time_measure)
    startTool("profiler", [&] { tools.push_back(profiler::makeProfilerTool(config, run)); });
  if (config.mem_check)
    startTool("memcheck", [&] { tools.push_back(memcheck::makeMemcheckTool(config, run)); });
  if (database) tools.push_back(capture::makeDatabaseTool(config, database));
}

}  // namespace

void installTools(const Config& config, const RunInfo* run, std::vector<std::unique_ptr<Tool>>& tools) {
  if (run != nullptr) installResultTools(config, *run, tools);
  if (config.fallback || config.auto_fallback) tools.push_back(fallback::makeFallbackTool(config));
  if (config.sync_exec) tools.push_back(makeSyncExecTool());
  if (config.dump_args > 0) tools.push_back(makeDumpArgsTool(config.dump_args));
}

}  // namespace opscope::hook

// opscope.h: the program's opscope_step().
extern "C" OPSCOPE_EXPORT void opscope_hook_step(void) { opscope::profiler::step(); }
