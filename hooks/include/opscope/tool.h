// tool.h — the interface every opscope tool (capture, compare, overflow check, profiler, memcheck)
// implements.
//
// The hook runs the enabled tools in a fixed order — capture, compare, overflow check, profiler, memcheck —
// for before() and after() alike. Fallback is not a tool: the hook runs the op on the CPU in place of the
// real call (OpCall::fallback says so). While a tool runs, the thread's recursion guard is set: the tool's
// own mlurt*/mluop* calls go straight to the real library and are not seen again.
#pragma once

#include <opscope/op_call.h>

#include <string>
#include <string_view>

namespace opscope {

class Tool {
 public:
  virtual ~Tool() = default;
  virtual std::string_view name() const = 0;
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
  // After flush: what the tool found that has no file of its own, as the members of a JSON object (without
  // braces; empty for none). The hook writes them into run.json under the tool's name.
  virtual std::string findings() const { return {}; }
};

}  // namespace opscope
