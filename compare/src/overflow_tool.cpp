// OP_OVERFLOW_CHECK=1: the first op whose outputs hold NaN or Inf while its inputs held none — or the first
// collective (all-reduce, reduce-scatter, all-gather, broadcast) whose result does while what this rank sent
// did not: it came from another rank, or from inside the collective. What the rank sent is read again after
// the transfer (the hook runs an in-place all-reduce out of place for it): when it went NaN/Inf meanwhile,
// this rank's part was written during the transfer, and the finding says so.
#include <opscope/bytes.h>
#include <opscope/compare/compare_tool.h>
#include <opscope/describe.h>
#include <opscope/nonfinite_scalars.h>
#include <opscope/tensor_snapshot.h>

#include <mlu/dtype.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

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

// A buffer of the collective library as a one-dimensional tensor (mluclDataType_t numbers mluopDataType_t's
// dtypes); nullopt for a dtype that cannot hold NaN/Inf.
std::optional<mlu::TensorView> bufferView(const void* data, std::size_t bytes, int dtype) {
  if (data == nullptr || dtype < MLUOP_DTYPE_FLOAT || dtype > MLUOP_DTYPE_BOOL) return std::nullopt;
  mlu::TensorView v;
  v.dtype = static_cast<mluopDataType_t>(dtype);
  if (!mlu::isFloating(v.dtype) || bytes < v.elementSize()) return std::nullopt;
  v.ndim = 1;
  v.dims[0] = static_cast<std::int64_t>(bytes / v.elementSize());
  v.strides[0] = 1;
  v.data = const_cast<void*>(data);
  v.present = true;
  return v;
}

// The collectives whose result the check reads (send / recv are left out: waiting for one to complete
// before the program posts its peer's counterpart could deadlock a program that is right).
bool checked(Collective collective) {
  return collective == Collective::kAllReduce || collective == Collective::kReduceScatter ||
         collective == Collective::kAllGather || collective == Collective::kBroadcast;
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
    // A fill with -inf (an attention mask) was asked for its infinities: not an overflow.
    if (call.withArgs([](const auto& args) { return hasNonFiniteScalar(args); })) {
      asked_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    std::lock_guard lock(mutex_);
    ++ops_;
    if (first_ && first_seq_ <= call.seq) return;
    const bool earlier_than_reported = first_.has_value();
    first_seq_ = call.seq;
    first_op_ = std::string(call.name);
    first_collective_.reset();
    // Where the program called it (its module and line, when its framework says), then its framework ops.
    std::string where = siteText(call.site);
    if (!call.framework_op.empty()) where += (where.empty() ? "" : "; ") + std::string(call.framework_op);
    first_site_ = siteText(call.site);
    first_ = fmt::format("{} #{} ({}, thread {}, device {}, queue {}){}{}\n{}{}", call.name, call.seq,
                         call.symbol, call.thread, call.device, call.queue_id,
                         call.fallback != OpCall::Fallback::kNone ? " [ran on the CPU]" : "",
                         where.empty() ? "" : "\n  in " + where, detail, describeArguments(call));
    // Said at once (the program may crash later); a report from another thread with a smaller sequence
    // number replaces it at exit.
    std::fprintf(stderr, "opscope: overflow: NaN/Inf %s in the outputs of %s",
                 earlier_than_reported ? "appears earlier (on another thread)" : "first appears",
                 first_->c_str());
  }

  // A collective: what this rank sends, read once the work before it on its queue is done.
  void beforeRuntimeCall(const RuntimeCall& call) override {
    if (call.kind != RuntimeCallKind::kCollective) return;
    sentFinite() = std::nullopt;
    const CollectiveCall& c = call.collective;
    const auto sent = bufferView(c.send, c.send_bytes, c.dtype);
    if (!checked(c.kind) || !sent || mlurtQueueSync(call.queue) != MLURT_SUCCESS) return;
    sentFinite() = !countNonFinite(*sent).any();
  }

  // Its result, once the transfer is done (every rank has reached it).
  void onRuntimeCall(const RuntimeCall& call) override {
    if (call.kind != RuntimeCallKind::kCollective) return;
    const std::optional<bool> finite = std::exchange(sentFinite(), std::nullopt);
    const CollectiveCall& c = call.collective;
    const auto result = bufferView(c.result != nullptr ? c.result : c.recv, c.recv_bytes, c.dtype);
    if (!finite || !*finite || c.status != 0 || !result || mlurtQueueSync(call.queue) != MLURT_SUCCESS)
      return;
    const NonFinite n = countNonFinite(*result);
    if (!n.any()) return;
    // What this rank sent, again: still there unless the result overwrote it.
    NonFinite sent;
    if (const auto again = bufferView(c.send, c.send_bytes, c.dtype);
        again && (c.result != nullptr || !bytesOverlap(c.send, c.send_bytes, c.recv, c.recv_bytes)))
      sent = countNonFinite(*again);
    std::lock_guard lock(mutex_);
    ++ops_;
    if (first_ && first_seq_ <= call.op_seq) return;  // an op at or before the last op before it
    first_seq_ = call.op_seq;
    first_op_ = std::string(c.name());
    first_site_ = siteText(call.site);
    first_collective_ = {c.comm, c.seq};
    sent_changed_ = sent.any();
    first_ = fmt::format(
        "{} #{} on communicator {} (rank {} of {}; after op #{}): its result holds {} NaN, {} Inf of {} "
        "elements, {}\n",
        c.name(), c.seq, c.comm, c.rank, c.size, call.op_seq, n.nan, n.inf, result->numel(),
        sent_changed_ ? fmt::format("and what this rank sent, finite when the collective was posted, held {} "
                                    "NaN, {} Inf once it had run: this rank's part was written during the "
                                    "transfer",
                                    sent.nan, sent.inf)
                      : std::string("what this rank sent held none (another rank's data, or the collective "
                                    "itself)"));
    std::fprintf(stderr, "opscope: overflow: NaN/Inf first appears in the result of %s", first_->c_str());
  }

  void flush() override {
    std::lock_guard lock(mutex_);
    if (const std::uint64_t asked = asked_.load(); asked > 0) {
      std::fprintf(
          stderr,
          "opscope: overflow: %llu op call%s wrote the NaN/Inf a scalar argument asked for (a fill with "
          "-inf, as an attention mask): not counted\n",
          static_cast<unsigned long long>(asked), asked == 1 ? "" : "s");
    }
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
    if (const std::uint64_t asked = asked_.load(); asked > 0) j["asked_by_scalars"] = asked;
    if (first_)
      j["first"] = {{"op", first_op_}, {"seq", first_seq_}, {"detail", *first_}, {"site", first_site_}};
    if (first_ && first_collective_)
      j["first"]["collective"] = {{"comm", std::to_string(first_collective_->first)},
                                  {"seq", first_collective_->second},
                                  {"sent_changed", sent_changed_}};
    return j;
  }

 private:
  // Whether what the collective between beforeRuntimeCall() and onRuntimeCall() sends was finite.
  static std::optional<bool>& sentFinite() {
    thread_local std::optional<bool> state;
    return state;
  }
  // (seq, whether the inputs were finite) of the op between before() and after() on this thread.
  static std::optional<std::pair<std::uint64_t, bool>>& inputsFinite() {
    thread_local std::optional<std::pair<std::uint64_t, bool>> state;
    return state;
  }

  mutable std::mutex mutex_;
  std::string first_op_;
  std::string first_site_;
  std::uint64_t ops_ = 0;
  std::atomic<std::uint64_t> asked_{0};  // calls whose NaN/Inf a non-finite scalar argument asked for
  std::uint64_t first_seq_ = 0;
  std::optional<std::string> first_;
  std::optional<std::pair<std::uint64_t, std::uint64_t>> first_collective_;  // (comm, seq) when one was first
  bool sent_changed_ = false;  // and what this rank sent to it went NaN/Inf during the transfer
};

}  // namespace

std::unique_ptr<Tool> makeOverflowTool(const Config&) { return std::make_unique<OverflowTool>(); }

ToolRegistration overflowRegistration() {
  return {ToolId::kOverflow, [](const Config& c) { return c.overflow_check; }, true,
          [](const Config& c, const RunInfo&) { return makeOverflowTool(c); }};
}

}  // namespace opscope::compare
