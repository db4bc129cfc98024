// The dtype cast (OP_DTYPE_CAST=fp16:fp32,bf16:fp32 with OP_DTYPE_CAST_LIST): each listed op whose tensors
// are of a cast dtype runs on the device in the wider one, in place of the program's call — its inputs cast
// up into device memory of the tool's own, its outputs cast back into the program's tensors — as ditorch's
// OpDtypeCast does: whether running softmax in float32 heals a bfloat16 training is then one run away. An
// op the device refuses in the wider dtype runs as the program asked (said once per op).
#include <opscope/compare/compare_tool.h>
#include <opscope/device_run.h>

#include <mlu/dtype.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>
#include <atomic>
#include <cstdio>
#include <exception>
#include <string>
#include <type_traits>
#include <vector>

namespace opscope::compare {
namespace {

// The dtypes a cast may come from (OP_DTYPE_CAST's FROM), in the order of the counts.
constexpr std::array<mluopDataType_t, 2> kFromDtypes = {MLUOP_DTYPE_HALF, MLUOP_DTYPE_BFLOAT16};

int fromIndex(mluopDataType_t dtype) {
  for (std::size_t i = 0; i < kFromDtypes.size(); ++i)
    if (kFromDtypes[i] == dtype) return static_cast<int>(i);
  return -1;
}

class DtypeCastTool final : public Tool {
 public:
  explicit DtypeCastTool(const Config& config) : filter_(config.dtype_cast_ops) {
    for (const auto& [from, to] : config.dtype_cast) {
      if (const int i = fromIndex(from); i >= 0) to_[static_cast<std::size_t>(i)] = to;
    }
  }

  ToolId id() const override { return ToolId::kDtypeCast; }
  bool wants(const OpCall& call) const override { return call.args_ok && filter_.matches(call); }

  bool replaceOp(OpCall& call) override {
    if (call.fallback == OpCall::Fallback::kForced) return false;  // the CPU runs it: nothing to cast
    return call.withArgs([&]<typename Args>(const Args& args) { return runCast(call, args); });
  }

  void flush() override { std::fputs(report().c_str(), stderr); }

  nlohmann::json findings() const override {
    nlohmann::json ops = nlohmann::json::array();
    forEachCount([&](std::string_view op, mluopDataType_t from, mluopDataType_t to, std::uint64_t calls) {
      ops.push_back({{"op", std::string(op)},
                     {"from", std::string(mlu::dtypeName(from))},
                     {"to", std::string(mlu::dtypeName(to))},
                     {"calls", calls}});
    });
    nlohmann::json refused = nlohmann::json::array();
    for (std::size_t op = 0; op < mlu::kOpCount; ++op) {
      if (refused_[op].load() > 0)
        refused.push_back(
            {{"op", std::string(mlu::opName(static_cast<mlu::OpId>(op)))}, {"calls", refused_[op].load()}});
    }
    return {{"ops", ops}, {"refused", refused}};
  }

 private:
  // A tensor of the op in a cast dtype: the program's view and the wide copy the device runs on.
  struct Cast {
    mlu::TensorView original;
    mlu::TensorView wide;
    bool reads = false;
    bool writes = false;
    DeviceScratch memory;
  };

  template <typename Args>
  bool runCast(OpCall& call, const Args& args) {
    Args wide = args;
    std::vector<Cast> casts;
    DeviceScratch workspace;
    mluopDataType_t from = MLUOP_DTYPE_INVALID;
    try {
      wide.visit([&](const mlu::ArgMeta& meta, auto& value) {
        using V = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<V, mlu::TensorView>) {
          const int i = fromIndex(value.dtype);
          if (!value.present || i < 0 || to_[static_cast<std::size_t>(i)] == MLUOP_DTYPE_INVALID) return;
          from = value.dtype;
          Cast c;
          c.original = value;
          c.reads = meta.reads();
          c.writes = meta.writes();
          c.wide = value;
          c.wide.dtype = to_[static_cast<std::size_t>(i)];
          c.wide.setContiguousStrides();
          c.memory = DeviceScratch(call.device,
                                   static_cast<std::size_t>(value.numel()) * mlu::dtypeSize(c.wide.dtype));
          c.wide.data = c.memory.data();
          value = c.wide;
          casts.push_back(std::move(c));
        } else if constexpr (std::is_same_v<V, mlu::Workspace>) {
          // Sized by the program for its dtype: the wider one may need up to twice as much.
          if (value.size == 0) return;
          workspace = DeviceScratch(call.device, 2 * value.size);
          value = mlu::Workspace{workspace.data(), workspace.size()};
        }
      });
    } catch (const std::exception& e) {
      refuse(call, from, e.what());
      return false;
    }
    if (casts.empty()) return false;  // nothing of a cast dtype: it runs as it is

    auto copy = [&](const mlu::TensorView& x, const mlu::TensorView& y) {
      mlu::copy_args a;
      a.x = x;
      a.y = y;
      return invokeOnDevice(call.handle, a);
    };
    mluopStatus_t status = MLUOP_STATUS_SUCCESS;
    for (const Cast& c : casts) {
      if (c.reads && c.original.numel() > 0 && status == MLUOP_STATUS_SUCCESS)
        status = copy(c.original, c.wide);
    }
    if (status == MLUOP_STATUS_SUCCESS) status = invokeOnDevice(call.handle, wide);
    if (status != MLUOP_STATUS_SUCCESS) {
      const std::string why = lastDeviceError();
      mlurtQueueSync(call.queue);  // before the scratch memory goes
      refuse(call, from, why.empty() ? fmt::format("status {}", static_cast<int>(status)) : why);
      return false;
    }
    for (const Cast& c : casts) {
      if (c.writes && c.original.numel() > 0 && status == MLUOP_STATUS_SUCCESS)
        status = copy(c.wide, c.original);
    }
    mlurtQueueSync(call.queue);  // the device is done with the scratch memory
    call.status = status;
    if (status == MLUOP_STATUS_SUCCESS) {
      calls_[static_cast<std::size_t>(call.op)][static_cast<std::size_t>(fromIndex(from))].fetch_add(
          1, std::memory_order_relaxed);
    }
    return true;
  }

  void refuse(const OpCall& call, mluopDataType_t from, const std::string& why) {
    const auto op = static_cast<std::size_t>(call.op);
    if (refused_[op].fetch_add(1) == 0) {
      std::fprintf(stderr, "opscope: dtype cast: %.*s #%llu cannot run in float32 (%s); it runs in %.*s\n",
                   static_cast<int>(call.name.size()), call.name.data(),
                   static_cast<unsigned long long>(call.seq), why.c_str(),
                   static_cast<int>(mlu::dtypeName(from).size()), mlu::dtypeName(from).data());
    }
  }

  template <typename F>
  void forEachCount(F&& f) const {
    for (std::size_t op = 0; op < mlu::kOpCount; ++op) {
      for (std::size_t i = 0; i < kFromDtypes.size(); ++i) {
        if (const std::uint64_t n = calls_[op][i].load(); n > 0)
          f(mlu::opName(static_cast<mlu::OpId>(op)), kFromDtypes[i], to_[i], n);
      }
    }
  }

  std::string report() const {
    std::string lines;
    std::size_t ops = 0;
    std::uint64_t calls = 0;
    forEachCount([&](std::string_view op, mluopDataType_t from, mluopDataType_t to, std::uint64_t n) {
      ++ops;
      calls += n;
      lines += fmt::format("opscope:   {:<28} {:>8} calls in {} instead of {}\n", op, n, mlu::dtypeName(to),
                           mlu::dtypeName(from));
    });
    if (ops == 0) {
      std::string dtypes;
      for (std::size_t i = 0; i < kFromDtypes.size(); ++i) {
        if (to_[i] != MLUOP_DTYPE_INVALID)
          dtypes += fmt::format("{}{}", dtypes.empty() ? "" : " or ", mlu::dtypeName(kFromDtypes[i]));
      }
      return fmt::format(
          "opscope: dtype cast: no listed op call had a {} tensor: nothing ran cast (the "
          "program's ops are in other dtypes)\n",
          dtypes);
    }
    return fmt::format(
        "opscope: dtype cast: {} op{} ran in a wider dtype on the device, {} call{} in all:\n{}", ops,
        ops == 1 ? "" : "s", calls, calls == 1 ? "" : "s", lines);
  }

  OpFilter filter_;
  std::array<mluopDataType_t, kFromDtypes.size()> to_{MLUOP_DTYPE_INVALID, MLUOP_DTYPE_INVALID};
  std::array<std::array<std::atomic<std::uint64_t>, kFromDtypes.size()>, mlu::kOpCount> calls_{};
  std::array<std::atomic<std::uint64_t>, mlu::kOpCount> refused_{};
};

}  // namespace

ToolRegistration dtypeCastRegistration() {
  return {ToolId::kDtypeCast, [](const Config& c) { return !c.dtype_cast.empty(); }, false,
          [](const Config& c, const RunInfo&) -> std::unique_ptr<Tool> {
            return std::make_unique<DtypeCastTool>(c);
          }};
}

}  // namespace opscope::compare
