// hook.h — the inside of libopscope.so: the process-wide hook state, the recursion guard, the real symbols,
// and the two entry points every wrapper goes through (runOp, runRuntime).
#pragma once

#include <opscope/config.h>
#include <opscope/op_call.h>
#include <opscope/run_info.h>
#include <opscope/tool.h>

#include <dlfcn.h>

#include <memory>
#include <vector>

#define OPSCOPE_EXPORT __attribute__((visibility("default")))

namespace opscope::hook {

// Set while a tool (or the real library under an op wrapper) runs on this thread: calls made then are
// forwarded without being looked at.
extern thread_local bool t_inside;

// Read-only after the constructor ran: whether op calls / runtime calls are looked at at all.
extern bool g_watch_ops;
extern bool g_watch_runtime;
// OP_AUTO_FALLBACK: an op the device answers NOT_SUPPORTED is run on the CPU even when nothing looks at ops.
extern bool g_auto_fallback;
// OP_TIME_MEASURE: real calls run with the thread's correlation id set, and count the tasks they enqueue.
extern bool g_correlate;

// The real definition of a wrapped symbol (the next one after libopscope.so in lookup order). Aborts with
// a message when there is none (a wrapper is only called by a program linked to the real library).
void* findReal(const char* symbol);

template <typename Fn>
Fn real(const char* symbol) {
  return reinterpret_cast<Fn>(findReal(symbol));
}

// A callable passed down without allocating.
template <typename R>
struct Callback {
  void* object;
  R (*call)(void*);
  R operator()() const { return call(object); }
  template <typename F>
  static Callback of(F& f) {
    return {&f, [](void* o) -> R { return (*static_cast<F*>(o))(); }};
  }
};

// Starts the run (prints the options, makes the result directory, installs the tools) if it has not
// started: runOp and runRuntime do so at the first device use, an unwrapped call that needs the tools in
// place (mlurtSetActivityCallback) calls it itself.
void startRun();

// Runs an op call through the tools; call.args and call.args_ok are filled by the wrapper.
mluopStatus_t runOp(OpCall& call, mluopHandle_t handle, Callback<mluopStatus_t> forward);

// Runs a runtime call and reports it to the tools; fill() completes the record after the call.
mlurtStatus_t runRuntime(RuntimeCall& call, Callback<mlurtStatus_t> forward, Callback<void> fill);

// OP_DUMP_ARGS output (dump.cpp), and the tool that prints it.
void dumpBefore(const OpCall& call, int level);
void dumpAfter(const OpCall& call, int level);
std::unique_ptr<Tool> makeDumpArgsTool(int level);

// OP_SYNC_EXEC (sync_exec.cpp).
std::unique_ptr<Tool> makeSyncExecTool();

// The tools this build has, in the fixed order of tool.h's table (tools.cpp). run is null when no result
// directory could be made: the tools that write results are then left out.
void installTools(const Config& config, const RunInfo* run, std::vector<std::unique_ptr<Tool>>& tools);

}  // namespace opscope::hook
