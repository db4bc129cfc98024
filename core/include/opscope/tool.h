// tool.h — the interface every opscope tool implements (capture, compare, overflow check, profiler,
// memcheck, fallback, OP_SYNC_EXEC, OP_DUMP_ARGS), and the table of the tools.
//
// The hook runs every op call through one pipeline of the enabled tools, in the fixed order of the table
// below, phase by phase: wants() (and OpCall::tools marks which took the call; the profiler labels
// opscope's own work around an op from it, not from other tools' settings), mark(), before(), the call —
// replaceOp() of the first tool that takes it (fallback runs a listed op on the CPU), else the real
// library, then replaceRefusedOp() when the device answered NOT_SUPPORTED (automatic fallback) — and
// after(). While a tool runs, the thread's recursion guard is set: the tool's own mlurt*/mluop* calls go
// straight to the real library and are not seen again.
#pragma once

#include <opscope/op_call.h>

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace opscope {

// The tools, one row each, in the order the hook runs them: X(id, name, key). The name is the tool's in
// messages and run.json's "findings"; the key its entry in run.json's "tools" (empty: none of its own —
// the database tool closes the run database after the tools that write to it; fallback's entry says
// whether a fallback list was set, as automatic fallback is on by default; OP_SYNC_EXEC and OP_DUMP_ARGS
// write no results). The out-of-memory snapshot (OP_OOM_SNAPSHOT without memcheck: memcheck's allocation
// table alone) is last: it only follows allocations.
#define OPSCOPE_FOR_EACH_TOOL(X)                     \
  X(kCapture, "capture", "capture")                  \
  X(kCompare, "autocompare", "compare")              \
  X(kOverflow, "overflow check", "overflow")         \
  X(kDtypeCast, "dtype cast", "dtype_cast")          \
  X(kPerturb, "perturbation check", "perturb")       \
  X(kProfiler, "profiler", "profile")                \
  X(kMemcheck, "memcheck", "memcheck")               \
  X(kRecorder, "flight recorder", "flight_recorder") \
  X(kDatabase, "capture.db", "")                     \
  X(kFallback, "fallback", "")                       \
  X(kSyncExec, "OP_SYNC_EXEC", "")                   \
  X(kDumpArgs, "OP_DUMP_ARGS", "")                   \
  X(kOomSnapshot, "out-of-memory snapshot", "oom_snapshot")

enum class ToolId : std::uint8_t {
#define OPSCOPE_TOOL_ID(id, name, key) id,
  OPSCOPE_FOR_EACH_TOOL(OPSCOPE_TOOL_ID)
#undef OPSCOPE_TOOL_ID
      kCount
};

struct ToolRow {
  std::string_view name;
  std::string_view key;
};
inline constexpr ToolRow kToolRows[] = {
#define OPSCOPE_TOOL_ROW(id, name, key) {name, key},
    OPSCOPE_FOR_EACH_TOOL(OPSCOPE_TOOL_ROW)
#undef OPSCOPE_TOOL_ROW
};

constexpr std::string_view toolName(ToolId id) { return kToolRows[static_cast<std::size_t>(id)].name; }
constexpr std::string_view toolKey(ToolId id) { return kToolRows[static_cast<std::size_t>(id)].key; }

// OpCall::tools' bit of a tool.
constexpr std::uint32_t toolBit(ToolId id) { return std::uint32_t{1} << static_cast<unsigned>(id); }

class Tool {
 public:
  virtual ~Tool() = default;
  virtual ToolId id() const = 0;
  std::string_view name() const { return toolName(id()); }
  // Whether it takes the call: this tool's list and disable list; O(1) per call, and without side effects.
  // Every call is offered, also one whose arguments could not be read (call.args_ok false: a NULL or unset
  // descriptor), which most tools decline.
  virtual bool wants(const OpCall& call) const = 0;
  // Before any tool's before(): what the others must know of the call (fallback marks the ops it will run
  // on the CPU, OpCall::fallback, so that auto-compare does not compare them).
  virtual void mark(OpCall&) {}
  // Before the real call (inputs are as the op will see them once its queue reaches it).
  virtual void before(OpCall&) {}
  // In place of the real call: a tool may run the op itself and return true, with call.status set; the
  // real call is then not made. The first tool in order that takes the call makes it.
  virtual bool replaceOp(OpCall&) { return false; }
  // After the real call answered NOT_SUPPORTED: a tool may run the op itself instead and return true.
  virtual bool replaceRefusedOp(OpCall&) { return false; }
  // After the call returned (status and host times set; the op may still be running on its queue).
  virtual void after(OpCall&) {}
  // Before every wrapped runtime call, for every installed tool (also when another tool then makes the call
  // itself): what it must do before the call, whoever makes it. A transfer of the collective library
  // (kCollective) comes with its buffers and sizes (not yet its status and seq): capture reads what it will
  // send; the flight recorder marks it.
  virtual void beforeRuntimeCall(const RuntimeCall&) {}
  // In place of a wrapped runtime call, and only that: a tool may make the call itself instead of the real
  // library (memcheck allocates with red zones and holds freed blocks in a quarantine; the profiler keeps
  // the runtime's activity-callback slot and chains the program's callback). It returns true when it did,
  // with call.status set (and, for an allocation, *call.out); the real call is then not made. The first tool
  // in order that takes a call makes it; the others see it in onRuntimeCall with call.replaced set.
  virtual bool replace(RuntimeCall&) { return false; }
  // After each wrapped runtime call.
  virtual void onRuntimeCall(const RuntimeCall&) {}
  // opscope_step(): the program finished a training step (on the program's thread); or, in a program that
  // never calls it, opscope_framework_step() (torch_mlu: each optimizer step).
  virtual void onStep() {}
  // Whether it reads the program's framework frames (onFrameworkFrame): the hook times them only then.
  virtual bool wantsFrameworkFrames() const { return false; }
  // A framework frame ended (on its thread; innermost first when several end together).
  virtual void onFrameworkFrame(const FrameworkFrame&) {}
  // opscope_program_end(): the program's own work is done (flush() follows at once). What it still holds
  // now, it held when it ended (memcheck: "still held at exit", not a leak).
  virtual void onProgramEnd() {}
  // Whether it reads RuntimeCall::host_start_ns/host_end_ns: the hook times runtime calls (two clock reads
  // each) only when some installed tool does (the profiler); otherwise they are 0.
  virtual bool timesRuntimeCalls() const { return false; }
  // At exit or on a fatal signal: write out everything. Called once.
  virtual void flush() {}
  // Instead of flush() when a fatal signal (SIGSEGV, SIGABRT, SIGTERM, SIGINT) ends the program: write out
  // what is there without waiting for the device or for locks another thread may hold.
  virtual void flushOnSignal() { flush(); }
  // After flush: what the tool found that has no file of its own, a JSON object (null for none). The hook
  // writes it into run.json's "findings" under the tool's name. (Defined in tool.cpp, so that this header
  // needs only nlohmann's forward declarations.)
  virtual nlohmann::json findings() const;
};

}  // namespace opscope
