#include <opscope/fallback/fallback.h>
#include <opscope/host_copy.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <exception>

namespace opscope::fallback {

Fallback::Fallback(const Config& config)
    : forced_enabled_(config.fallback), filter_(config.fallback_ops), automatic_(config.auto_fallback) {}

bool Fallback::run(OpCall& call, OpCall::Fallback kind) {
  const auto op = static_cast<std::size_t>(call.op);
  if (kind == OpCall::Fallback::kAutomatic && !warned_[op].exchange(true)) {
    std::fprintf(
        stderr,
        "opscope: warning: the device does not support %.*s (#%llu: NOT_SUPPORTED); it runs on the CPU "
        "from now on (OP_AUTO_FALLBACK=0 turns this off)\n",
        static_cast<int>(call.name.size()), call.name.data(), static_cast<unsigned long long>(call.seq));
  }
  mlu::Status status;
  try {
    if (const mlurtStatus_t s = mlurtQueueSync(call.queue); s != MLURT_SUCCESS) {
      status = {MLUOP_STATUS_EXECUTION_FAILED,
                fmt::format("the work queued before it failed (runtime status {})", static_cast<int>(s))};
    } else {
      status = call.withArgs([&]<typename Args>(const Args& args) {
        HostCopy<Args> host(args, *pool_);
        mlu::Status s = host.runReference();
        if (s.ok()) host.writeBack();
        return s;
      });
    }
  } catch (const std::exception& e) {
    status = {MLUOP_STATUS_EXECUTION_FAILED, e.what()};
  }
  if (!status.ok()) {
    if (!failed_[op].exchange(true)) {
      std::fprintf(stderr,
                   "opscope: fallback: %.*s #%llu cannot run on the CPU: %s; the device's answer stands\n",
                   static_cast<int>(call.name.size()), call.name.data(),
                   static_cast<unsigned long long>(call.seq), status.message.c_str());
    }
    return false;
  }
  call.fallback = kind;
  call.status = MLUOP_STATUS_SUCCESS;
  (kind == OpCall::Fallback::kForced ? forced_calls_ : automatic_calls_)[op].fetch_add(
      1, std::memory_order_relaxed);
  any_.store(true, std::memory_order_relaxed);
  return true;
}

std::vector<Fallback::Count> Fallback::counts() const {
  std::vector<Count> out;
  for (std::size_t i = 0; i < mlu::kOpCount; ++i) {
    const std::uint64_t forced = forced_calls_[i].load(), automatic = automatic_calls_[i].load();
    if (forced + automatic > 0) out.push_back({mlu::opName(static_cast<mlu::OpId>(i)), forced, automatic});
  }
  return out;
}

std::string Fallback::report() const {
  std::string lines;
  std::size_t ops = 0;
  std::uint64_t calls = 0;
  for (const auto& [name, forced, automatic] : counts()) {
    ++ops;
    calls += forced + automatic;
    if (forced > 0)
      lines += fmt::format("opscope:   {:<28} {:>8} calls (forced by the fallback list)\n", name, forced);
    if (automatic > 0) {
      lines += fmt::format("opscope:   {:<28} {:>8} calls (automatic: the device answered NOT_SUPPORTED)\n",
                           name, automatic);
    }
  }
  if (ops == 0) return {};
  return fmt::format("opscope: fallback: {} op{} ran on the CPU instead of the device, {} call{} in all:\n{}",
                     ops, ops == 1 ? "" : "s", calls, calls == 1 ? "" : "s", lines);
}

namespace {

// The fallback as a tool of the pipeline: it marks the calls the list forces to the CPU before the other
// tools look at them, runs them there in place of the real call, and runs on the CPU a call the device
// refused; at the end it says which ops ran on the CPU and how often (and run.json's findings hold the
// counts).
class FallbackTool final : public Tool {
 public:
  explicit FallbackTool(const Config& config) : fallback_(config) {}

  ToolId id() const override { return ToolId::kFallback; }
  bool wants(const OpCall& call) const override {
    return call.args_ok && (fallback_.forced(call) || fallback_.automatic());
  }
  void mark(OpCall& call) override {
    if (fallback_.forced(call)) call.fallback = OpCall::Fallback::kForced;
  }
  bool replaceOp(OpCall& call) override {
    if (call.fallback != OpCall::Fallback::kForced) return false;
    call.fallback = OpCall::Fallback::kNone;  // set again by run() when the CPU ran it
    return fallback_.run(call, OpCall::Fallback::kForced);
  }
  bool replaceRefusedOp(OpCall& call) override {
    return fallback_.automatic() && fallback_.run(call, OpCall::Fallback::kAutomatic);
  }
  void flush() override { std::fputs(fallback_.report().c_str(), stderr); }
  nlohmann::json findings() const override {
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& c : fallback_.counts()) {
      ops.push_back({{"op", std::string(c.op)}, {"forced", c.forced}, {"automatic", c.automatic}});
    }
    return {{"ops", ops}};
  }

 private:
  Fallback fallback_;
};

}  // namespace

std::unique_ptr<Tool> makeFallbackTool(const Config& config) {
  return std::make_unique<FallbackTool>(config);
}

}  // namespace opscope::fallback
