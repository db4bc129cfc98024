// profiler_tool.h — the hook's profiler (OP_TIME_MEASURE=1).
//
// Every op call gets a host span (the API call on its thread) and, through the runtime's activity records,
// a device span per task it enqueued on its queue, joined by a flow arrow; runtime calls (copies, memsets,
// allocations, syncs, notifiers) are timed the same way, and a counter track follows the device memory in
// use. Nothing syncs the program's queues: the hook tags each call's work with a correlation id
// (mlurtSetCorrelationId) and the runtime reports each finished task on its queue's worker.
//
// Events go to per-thread buffers; a background thread writes them into trace.json (Chrome Trace Event
// Format, under a temporary name until the run ends, then renamed) and keeps the per-op statistics. At
// exit, and on SIGINT/SIGTERM/SIGSEGV/abort, the trace is completed, and summary.txt (per-op table, also
// printed) and time_measure.csv (one row per op call) are written.
#pragma once

#include <opscope/config.h>
#include <opscope/run_info.h>
#include <opscope/tool.h>
#include <opscope/tool_registration.h>

#include <memory>

namespace opscope::profiler {

// Starts the writer thread and installs the activity callback. Throws std::runtime_error when the trace
// file cannot be created.
std::unique_ptr<Tool> makeProfilerTool(const Config& config, const RunInfo& run);
// On with OP_TIME_MEASURE=1.
ToolRegistration registration();

}  // namespace opscope::profiler
