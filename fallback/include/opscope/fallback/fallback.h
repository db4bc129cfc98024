// fallback.h — running ops on the CPU reference instead of the device: the ops OP_FALLBACK_LIST /
// OP_FALLBACK_DISABLE_LIST name (forced), and ops the device answers NOT_SUPPORTED (automatic, unless
// OP_AUTO_FALLBACK=0). The hook calls it in place of the real call, so the tools around it see a normal call.
//
// An op on the CPU: its queue is synced (the work before it is done), its tensors are copied to the host,
// the reference runs on them, and the outputs are copied back into the device buffers before the call
// returns — in queue order, so the program cannot tell.
#pragma once

#include <opscope/config.h>
#include <opscope/host_copy.h>
#include <opscope/op_call.h>
#include <opscope/tool.h>

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace opscope::fallback {

class Fallback {
 public:
  explicit Fallback(const Config& config);

  // The call is one OP_FALLBACK_LIST forces to the CPU.
  bool forced(const OpCall& call) const { return forced_enabled_ && filter_.matches(call); }
  // Automatic fallback is on (OP_AUTO_FALLBACK).
  bool automatic() const { return automatic_; }

  // Runs the call on the CPU (call.args_ok must be true). On success sets call.status to SUCCESS and
  // call.fallback to kind, counts it, and returns true. When the reference refuses the arguments (or a copy
  // fails) it says why once per op and returns false: the device's answer stands (the caller makes the real
  // call for a forced op, so the program gets the library's own status and message).
  bool run(OpCall& call, OpCall::Fallback kind);

  // Whether any call fell back so far.
  bool any() const { return any_.load(std::memory_order_relaxed); }

  // The ops that fell back, in schema order, with their forced and automatic call counts.
  struct Count {
    std::string_view op;
    std::uint64_t forced = 0, automatic = 0;
  };
  std::vector<Count> counts() const;

  // The per-op counts: "opscope: fallback: ..." lines, empty when nothing fell back.
  std::string report() const;

 private:
  bool forced_enabled_;
  OpFilter filter_;
  bool automatic_;
  std::atomic<bool> any_{false};
  std::array<std::atomic<std::uint64_t>, mlu::kOpCount> forced_calls_{};
  std::array<std::atomic<std::uint64_t>, mlu::kOpCount> automatic_calls_{};
  std::array<std::atomic<bool>, mlu::kOpCount> warned_{};  // the one-time NOT_SUPPORTED warning, per op
  std::array<std::atomic<bool>, mlu::kOpCount> failed_{};  // the one-time "the reference refused" message
  std::shared_ptr<BufferPool> pool_ = std::make_shared<BufferPool>();  // the host copies' memory
};

// The fallback tool of the hook's pipeline (OP_FALLBACK_LIST, OP_AUTO_FALLBACK): a Fallback that marks,
// replaces and recovers calls (tool.h's mark, replaceOp, replaceRefusedOp) and reports at exit.
std::unique_ptr<Tool> makeFallbackTool(const Config& config);

}  // namespace opscope::fallback
