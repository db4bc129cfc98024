// tool.h — the interface every opscope tool (capture, compare, overflow check, profiler, memcheck)
// implements.
//
// The hook runs the enabled tools in a fixed order — capture, compare, overflow check, profiler, memcheck —
// for before() and after() alike, and marks in OpCall::tools which took the call (the profiler labels
// opscope's own work around an op from it, not from other tools' settings). Fallback is not a tool: the hook
// runs the op on the CPU in place of the real call (OpCall::fallback says so). While a tool runs, the
// thread's recursion guard is set: the tool's own mlurt*/mluop* calls go straight to the real library and are
// not seen again.
#pragma once

#include <opscope/op_call.h>

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace opscope {

// The tools, one row each, in the order the hook runs them: X(id, name, key). The name is the tool's in
// messages and run.json's "findings"; the key its entry in run.json's "tools" (empty: not a tool the user
// turns on — the database tool closes the run database after every other tool).
#define OPSCOPE_FOR_EACH_TOOL(X)             \
  X(kCapture, "capture", "capture")          \
  X(kCompare, "autocompare", "compare")      \
  X(kOverflow, "overflow check", "overflow") \
  X(kProfiler, "profiler", "profile")        \
  X(kMemcheck, "memcheck", "memcheck")       \
  X(kDatabase, "capture.db", "")

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
  // This tool's list and disable list; O(1) per call.
  virtual bool wants(const OpCall& call) const = 0;
  // Before the real call (inputs are as the op will see them once its queue reaches it).
  virtual void before(OpCall&) {}
  // After the real call returned (status and host times set; the op may still be running on its queue).
  virtual void after(OpCall&) {}
  // Before a wrapped runtime call: a tool may make the call itself instead of the real library (memcheck
  // allocates with red zones and holds freed blocks in a quarantine). It returns true when it did, with
  // call.status set (and, for an allocation, *call.out); the real call is then not made. The first tool in
  // order that takes a call makes it.
  virtual bool replace(RuntimeCall&) { return false; }
  // After each wrapped runtime call.
  virtual void onRuntimeCall(const RuntimeCall&) {}
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
