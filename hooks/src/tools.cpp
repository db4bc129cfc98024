// The tools of this build, in the fixed order the hook runs them (tool.h's table): capture, compare,
// overflow check, profiler, memcheck, the capture.db closer, then fallback, OP_SYNC_EXEC and OP_DUMP_ARGS.
// Capture, auto-compare and the database tool (which share the run database), fallback, OP_SYNC_EXEC and
// OP_DUMP_ARGS are installed here; every other tool registers itself (tool_registration.h).
#include "hook.h"

#include <opscope/private_file.h>

#include "../../runtime/common/no_destructor.h"

#include <opscope/capture/capture_tool.h>
#include <opscope/compare/compare_tool.h>
#include <opscope/fallback/fallback.h>

#include <algorithm>
#include <atomic>
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

// The run database capture and auto-compare share, whether installed when the run starts or by a region of
// the program later (global: the second must find the first's; the database tool made with it closes it).
std::shared_ptr<rundb::CaptureWriter>& runDatabase() {
  static mlu::NoDestructor<std::shared_ptr<rundb::CaptureWriter>> database;
  return database.get();
}

// The tools that write into the result directory (run: its RunInfo).
void installResultTools(const Config& config, const RunInfo& run, std::vector<std::unique_ptr<Tool>>& tools) {
  std::shared_ptr<rundb::CaptureWriter>& database = runDatabase();
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
  if (database) tools.push_back(capture::makeDatabaseTool(config, database));
}

bool anyRegistered(const Config& config, bool writing_only) {
  for (const ToolRegistration& r : registeredTools()) {
    if ((!writing_only || r.writes_results) && r.enabled(config)) return true;
  }
  return false;
}

}  // namespace

std::vector<std::unique_ptr<Tool>> makeRegionTools(ToolId id, const Config& config, const RunInfo& run) {
  std::vector<std::unique_ptr<Tool>> made;
  if (id == ToolId::kCapture || id == ToolId::kCompare) {
    std::shared_ptr<rundb::CaptureWriter>& database = runDatabase();
    if (database == nullptr) {
      database = rundb::openRunDatabase(config, run);
      made.push_back(capture::makeDatabaseTool(config, database));
    }
    made.push_back(id == ToolId::kCapture ? capture::makeCaptureTool(config, database)
                                          : compare::makeCompareTool(config, run, database));
  } else if (id == ToolId::kFallback) {
    made.push_back(fallback::makeFallbackTool(config));
  } else if (id == ToolId::kDumpArgs) {
    made.push_back(makeDumpArgsTool(config.dump_args));
  } else {
    for (const ToolRegistration& r : registeredTools()) {
      if (r.id == id && r.enabled(config)) made.push_back(r.make(config, run));
    }
  }
  return made;
}

void installTools(const Config& config, const RunInfo* run, std::vector<std::unique_ptr<Tool>>& tools) {
  if (run != nullptr) installResultTools(config, *run, tools);
  static const RunInfo kNoRun;  // for a tool that writes nothing, when no result directory could be made
  const RunInfo& run_info = run != nullptr ? *run : kNoRun;  // both outlive the tools
  for (const ToolRegistration& r : registeredTools()) {
    if (!r.enabled(config) || (r.writes_results && run == nullptr)) continue;
    const std::string name(toolName(r.id));
    startTool(name.c_str(), [&] { tools.push_back(r.make(config, run_info)); });
  }
  if (config.fallback || config.auto_fallback) tools.push_back(fallback::makeFallbackTool(config));
  if (config.sync_exec) tools.push_back(makeSyncExecTool());
  if (config.dump_args > 0) tools.push_back(makeDumpArgsTool(config.dump_args));
  // In the order of tool.h's table, whoever installed them.
  std::stable_sort(tools.begin(), tools.end(),
                   [](const auto& a, const auto& b) { return a->id() < b->id(); });
}

bool writesResults(const Config& config) { return config.writesResults() || anyRegistered(config, true); }
bool installsTools(const Config& config) { return config.installsTools() || anyRegistered(config, false); }
bool watchesOps(const Config& config) { return config.watchesOps() || anyRegistered(config, false); }

}  // namespace opscope::hook

namespace {
// Whether the program marks its steps itself (opscope_step): its framework's steps are then not counted.
std::atomic<bool> g_program_steps{false};
// Whether a framework step was counted (before the program's first step).
std::atomic<bool> g_framework_steps{false};
}  // namespace

// opscope.h: the program's opscope_step().
extern "C" OPSCOPE_EXPORT void opscope_hook_step(void) {
  // The program's first step ends the step its framework's last counted step ended (torch_mlu's optimizer
  // step, then opscope.step() in the same loop): it is not counted again.
  if (!g_program_steps.exchange(true) && g_framework_steps.load()) return;
  opscope::hook::stepTools();
}

// opscope.h: the framework's step (torch_mlu: an optimizer step), a step only in a program that marks none.
extern "C" OPSCOPE_EXPORT void opscope_hook_framework_step(void) {
  if (g_program_steps.load()) return;
  g_framework_steps = true;
  opscope::hook::stepTools();
}
