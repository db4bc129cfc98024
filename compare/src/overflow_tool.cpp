// OP_OVERFLOW_CHECK=1: the first op whose outputs hold NaN or Inf while its inputs held none.
#include <opscope/compare/compare_tool.h>
#include <opscope/describe.h>
#include <opscope/tensor_snapshot.h>

#include <mlu/dtype.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <mutex>
#include <optional>
#include <type_traits>

namespace opscope::compare {
namespace {

struct NonFinite {
  std::int64_t nan = 0, inf = 0;
  bool any() const { return nan + inf > 0; }
};

NonFinite countNonFinite(const mlu::TensorView& t) {
  NonFinite n;
  if (!mlu::isFloating(t.dtype) || t.numel() == 0) return n;
  const Bytes data = snapshotTensor(t);
  const auto count = static_cast<std::size_t>(t.numel());
  for (std::size_t i = 0; i < count; ++i) {
    const double v = elementAsDouble(t.dtype, data.data(), i);
    if (std::isnan(v))
      ++n.nan;
    else if (std::isinf(v))
      ++n.inf;
  }
  return n;
}

// Counts NaN/Inf over the op's inputs (IN, INOUT) or outputs (OUT, INOUT); per tensor in `lines`.
NonFinite scan(const OpCall& call, bool inputs, std::string* lines) {
  NonFinite total;
  call.withArgs([&](const auto& args) {
    args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, mlu::TensorView>) {
        const bool in = meta.reads();
        const bool out = meta.writes();
        if (!value.present || !(inputs ? in : out)) return;
        const NonFinite n = countNonFinite(value);
        total.nan += n.nan;
        total.inf += n.inf;
        if (lines != nullptr && n.any()) {
          *lines += fmt::format("opscope:   output {}: {} NaN, {} Inf of {} elements\n", meta.name, n.nan,
                                n.inf, value.numel());
        }
      }
    });
  });
  return total;
}

class OverflowTool final : public Tool {
 public:
  ToolId id() const override { return ToolId::kOverflow; }
  bool wants(const OpCall& call) const override { return call.args_ok; }

  void before(OpCall& call) override {
    inputsFinite() = std::nullopt;
    if (mlurtQueueSync(call.queue) != MLURT_SUCCESS) return;
    inputsFinite() = std::pair{call.seq, !scan(call, true, nullptr).any()};
  }

  void after(OpCall& call) override {
    const auto state = inputsFinite();
    inputsFinite() = std::nullopt;
    if (!state || state->first != call.seq || !state->second || call.status != MLUOP_STATUS_SUCCESS) return;
    if (mlurtQueueSync(call.queue) != MLURT_SUCCESS) return;
    std::string detail;
    if (!scan(call, false, &detail).any()) return;
    std::lock_guard lock(mutex_);
    ++ops_;
    if (first_ && first_seq_ <= call.seq) return;
    const bool earlier_than_reported = first_.has_value();
    first_seq_ = call.seq;
    first_op_ = std::string(call.name);
    first_ = fmt::format("{} #{} ({}, thread {}, device {}, queue {}){}\n{}{}", call.name, call.seq,
                         call.symbol, call.thread, call.device, call.queue_id,
                         call.fallback != OpCall::Fallback::kNone ? " [ran on the CPU]" : "", detail,
                         describeArguments(call));
    // Said at once (the program may crash later); a report from another thread with a smaller sequence
    // number replaces it at exit.
    std::fprintf(stderr, "opscope: overflow: NaN/Inf %s in the outputs of %s",
                 earlier_than_reported ? "appears earlier (on another thread)" : "first appears",
                 first_->c_str());
  }

  void flush() override {
    std::lock_guard lock(mutex_);
    if (!first_) {
      std::fprintf(stderr, "opscope: overflow: no op produced NaN or Inf from finite inputs\n");
      return;
    }
    std::fprintf(stderr,
                 "opscope: overflow: %llu op call%s produced NaN/Inf from finite inputs; the first: %s",
                 static_cast<unsigned long long>(ops_), ops_ == 1 ? "" : "s", first_->c_str());
  }

  nlohmann::json findings() const override {
    std::lock_guard lock(mutex_);
    nlohmann::json j{{"ops", ops_}};
    if (first_) j["first"] = {{"op", first_op_}, {"seq", first_seq_}, {"detail", *first_}};
    return j;
  }

 private:
  // (seq, whether the inputs were finite) of the op between before() and after() on this thread.
  static std::optional<std::pair<std::uint64_t, bool>>& inputsFinite() {
    thread_local std::optional<std::pair<std::uint64_t, bool>> state;
    return state;
  }

  mutable std::mutex mutex_;
  std::string first_op_;
  std::uint64_t ops_ = 0;
  std::uint64_t first_seq_ = 0;
  std::optional<std::string> first_;
};

}  // namespace

std::unique_ptr<Tool> makeOverflowTool(const Config&) { return std::make_unique<OverflowTool>(); }

ToolRegistration overflowRegistration() {
  return {ToolId::kOverflow, [](const Config& c) { return c.overflow_check; }, true,
          [](const Config& c, const RunInfo&) { return makeOverflowTool(c); }};
}

}  // namespace opscope::compare
