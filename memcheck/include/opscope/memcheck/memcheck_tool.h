// memcheck_tool.h — the hook's device-memory checker (MEM_CHECK=1).
//
// Keeps a table of the live device (mlurtMalloc) and pinned host (mlurtHostMalloc) allocations — pointer,
// size, device, thread, the op sequence number at the time, time — with, under MEM_CHECK_ENABLE_BACKTRACE=1,
// the allocating call's backtrace (libunwind; MEM_CHECK_BACKTRACE_DEPTH frames, opscope's own trimmed,
// each distinct stack kept once). Frees that match no live allocation are memory errors, reported once
// per call site with both backtraces: a double free, a free of a pointer inside an allocation, a free of a
// pointer never allocated (MEM_CHECK_ABORT_ON_ERROR=1 aborts at the first). At exit the allocations still
// live are the leaks: memcheck.txt and memcheck.json in the result directory, grouped by allocation site,
// largest first, symbolized then with elfutils' libdwfl, and a summary on stderr; with the peak of each
// device's memory in use and the op after which it happened.
#pragma once

#include <opscope/config.h>
#include <opscope/run_info.h>
#include <opscope/tool.h>
#include <opscope/tool_registration.h>

#include <memory>

namespace opscope::memcheck {

std::unique_ptr<Tool> makeMemcheckTool(const Config& config, const RunInfo& run);
// On with MEM_CHECK=1.
ToolRegistration registration();

// OP_OOM_SNAPSHOT=1 without MEM_CHECK (`opscope run` sets it): memcheck's allocation table with a backtrace
// per allocation and nothing else, for memory_snapshot.json when an mlurtMalloc finds no room (run.json's
// tools: oom_snapshot). No check, no report, no red zone.
std::unique_ptr<Tool> makeOomSnapshotTool(const Config& config, const RunInfo& run);
ToolRegistration oomSnapshotRegistration();

}  // namespace opscope::memcheck
