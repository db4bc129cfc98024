// The perturbation check (OP_PERTURB=1 with OP_PERTURB_LIST): a check that needs no reference. Each listed
// op with floating-point inputs runs again on the device, on device memory of the tool's own, with its
// inputs perturbed in ways its result should barely feel:
//   noise    each input element times (1 + u·4ε), u uniform in [-1, 1] (ε: the dtype's epsilon);
//   bitflip  the lowest mantissa bit of one element in eight flipped;
//   upcast   (a float16 or bfloat16 op) every tensor in float32, the outputs rounded back: what a kernel
//            that computes in its storage dtype, or drops precision on the way, cannot match;
//   swap     (a commutative op: add with alpha 1, mul, maximum, minimum, the logical and bitwise pairs,
//            eq, ne) the operands exchanged: the result must not change by a bit.
// An op is flagged when an output moves more than the change explains: for noise and bitflip, its change
// (the largest element difference over the larger of the output's and the inputs' largest magnitudes: an
// output that cancels to near zero, a row's mean, moves with its inputs' rounding) beyond kAmplification
// times the inputs' (their largest change over their largest magnitude, or the output dtype's epsilon when
// that is larger: a narrower output cannot show a finer change), or a
// NaN/Inf the unperturbed run did not have; for upcast, more than kUpcastUlps ULPs of the output's dtype; for
// swap, any difference. Ops whose result is not continuous in their inputs (floor, round, sign, the backward
// of relu and max-pool, ...) get only the swap and upcast checks. Every check is a row of perturb.csv; the
// flagged ones are printed at once (up to kMaxPrinted) and the first is named at the end and in run.json.
#include <opscope/compare/compare_tool.h>
#include <opscope/compare/metrics.h>
#include <opscope/device_run.h>
#include <opscope/host_copy.h>
#include <opscope/private_file.h>
#include <opscope/text.h>

#include <mlu/dtype.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace opscope::compare {
namespace {

constexpr double kAmplification = 64;  // noise, bitflip: the output's change over the input's
constexpr double kUpcastUlps = 4;      // upcast: ULPs of the output's dtype
constexpr std::uint64_t kMaxPrinted = 50;

enum class Perturbation { kNoise, kBitflip, kUpcast, kSwap };
constexpr std::string_view kPerturbationNames[] = {"noise", "bitflip", "upcast", "swap"};

bool commutative(mlu::OpId op) {
  using mlu::OpId;
  switch (op) {
    case OpId::add:  // with alpha 1 (checked at the call)
    case OpId::mul:
    case OpId::maximum:
    case OpId::minimum:
    case OpId::eq:
    case OpId::ne:
    case OpId::logical_and:
    case OpId::logical_or:
    case OpId::logical_xor:
    case OpId::bitwise_and:
    case OpId::bitwise_or:
    case OpId::bitwise_xor:
      return true;
    default:
      return false;
  }
}

// Ops whose outputs jump when an input crosses a point (rounding, comparisons, masks by an input's sign, the
// position of a maximum): a perturbation may move them by a whole step, rightly.
bool discontinuous(mlu::OpId op) {
  using mlu::OpId;
  switch (op) {
    case OpId::floor:
    case OpId::ceil:
    case OpId::round:
    case OpId::trunc:
    case OpId::sign:
    case OpId::remainder:
    case OpId::floor_divide:
    case OpId::relu_backward:
    case OpId::max_pool2d_backward:
    case OpId::hardsigmoid_backward:
    case OpId::hardswish_backward:
    case OpId::argmax:
    case OpId::eq:
    case OpId::ne:
    case OpId::lt:
    case OpId::le:
    case OpId::gt:
    case OpId::ge:
      return true;
    default:
      return false;
  }
}

double epsilonOf(mluopDataType_t dtype) {
  switch (dtype) {
    case MLUOP_DTYPE_HALF:
      return 0x1p-10;
    case MLUOP_DTYPE_BFLOAT16:
      return 0x1p-7;
    default:
      return 0x1p-23;
  }
}

void storeValue(mluopDataType_t dtype, std::byte* p, float f) {
  std::uint16_t h = 0;
  switch (dtype) {
    case MLUOP_DTYPE_HALF:
      h = mlu::floatToHalf(f);
      std::memcpy(p, &h, 2);
      break;
    case MLUOP_DTYPE_BFLOAT16:
      h = mlu::floatToBfloat16(f);
      std::memcpy(p, &h, 2);
      break;
    default:
      std::memcpy(p, &f, 4);
  }
}

// The lowest mantissa bit of the value at p flipped (the dtypes are little-endian: it is in the first byte).
void flipLowestBit(std::byte* p) { p[0] ^= std::byte{1}; }

// The smallest normal value of dtype.
double normalMin(mluopDataType_t dtype) {
  switch (dtype) {
    case MLUOP_DTYPE_HALF:
      return 0x1p-14;
    default:  // float32 and bfloat16 share their exponent range
      return 0x1p-126;
  }
}

// f(offset) for each element of v, its offset in elements from v.data, in row-major order.
template <typename F>
void forEachOffset(const mlu::TensorView& v, F&& f) {
  const std::int64_t n = v.numel();
  if (n == 0) return;
  std::array<std::int64_t, MLUOP_DIM_MAX> index{};
  std::int64_t offset = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    f(offset);
    for (int d = v.ndim - 1; d >= 0; --d) {
      const auto k = static_cast<std::size_t>(d);
      offset += v.strides[k];
      if (++index[k] < v.dims[k]) break;
      offset -= v.strides[k] * v.dims[k];
      index[k] = 0;
    }
  }
}

// The values of v (its elements in row-major order) from a host extent of its layout, as float32 (which holds
// every value of the three floating dtypes exactly).
using Loader = float (*)(const std::byte*);
Loader loaderOf(mluopDataType_t dtype) {
  switch (dtype) {
    case MLUOP_DTYPE_HALF:
      return [](const std::byte* p) {
        std::uint16_t h;
        std::memcpy(&h, p, 2);
        return mlu::halfToFloat(h);
      };
    case MLUOP_DTYPE_BFLOAT16:
      return [](const std::byte* p) {
        std::uint16_t h;
        std::memcpy(&h, p, 2);
        return mlu::bfloat16ToFloat(h);
      };
    case MLUOP_DTYPE_FLOAT:
      return [](const std::byte* p) {
        float f;
        std::memcpy(&f, p, 4);
        return f;
      };
    default:  // integers and bool: compared bit for bit (swap), as their bytes
      return [](const std::byte* p) { return static_cast<float>(std::to_integer<unsigned>(p[0])); };
  }
}

std::vector<float> valuesOf(const mlu::TensorView& v, const std::byte* extent) {
  std::vector<float> out(static_cast<std::size_t>(v.numel()));
  if (v.dtype == MLUOP_DTYPE_FLOAT && v.contiguous()) {
    std::memcpy(out.data(), extent, out.size() * 4);
    return out;
  }
  const Loader load = loaderOf(v.dtype);
  const std::size_t size = v.elementSize();
  std::size_t k = 0;
  if (mlu::isFloating(v.dtype)) {
    forEachOffset(v, [&](std::int64_t o) { out[k++] = load(extent + o * size); });
  } else {  // every byte of each element, so that a swap that changes any is seen
    out.resize(out.size() * size);
    forEachOffset(v, [&](std::int64_t o) {
      for (std::size_t b = 0; b < size; ++b) out[k++] = load(extent + o * size + b);
    });
  }
  return out;
}

// How far b is from a: the largest element difference over a's largest magnitude (both finite), the NaN/Inf
// b has where a is finite, and (with ulps) the largest difference in ULPs of dtype.
struct Change {
  double relative = 0;
  std::uint64_t new_nonfinite = 0;
  double max_ulp = 0;
  bool identical = true;
};

// scale_floor: the inputs' largest magnitude, below which a's own is not taken as its scale (an output that
// cancels to near zero, the mean of a row, moves by the inputs' rounding, not its own).
Change changeOf(const std::vector<float>& a, const std::vector<float>& b, mluopDataType_t dtype, bool ulps,
                float scale_floor = 0) {
  Change c;
  float scale = 0, diff = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const float x = a[i], y = b[i];
    if (x == y) {
      scale = std::max(scale, std::fabs(x));
      continue;
    }
    const bool fx = std::isfinite(x), fy = std::isfinite(y);
    if (fx) scale = std::max(scale, std::fabs(x));
    if (std::isnan(x) && std::isnan(y)) continue;
    c.identical = false;
    if (fx && !fy) ++c.new_nonfinite;
    if (fx && fy) {
      const float d = std::fabs(y - x);
      diff = std::max(diff, d);
      if (ulps) c.max_ulp = std::max(c.max_ulp, d / ulpOf(dtype, x));
    }
  }
  scale = std::max(scale, scale_floor);
  c.relative = scale > 0 ? diff / scale : diff;
  return c;
}

std::uint64_t mix(std::uint64_t z) {  // splitmix64: a fixed, well-spread choice per element
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The op's tensors on the host as they were before it ran, and its outputs as the device left them.
struct Pending {
  std::uint64_t seq = 0;
  std::shared_ptr<void> copy;  // HostCopy<Args>
};

class PerturbTool final : public Tool {
 public:
  PerturbTool(const Config& config, const RunInfo& run) : filter_(config.perturb_ops) {
    csv_path_ = run.result_dir + "/perturb.csv";
    csv_ = createResultFile(csv_path_);
    std::fputs(
        "seq,op,perturbation,tensor,dtype,shape,input_change,output_change,amplification,max_ulp,bound,"
        "new_nonfinite,verdict,module,source\n",
        csv_.get());
  }

  ToolId id() const override { return ToolId::kPerturb; }
  bool wants(const OpCall& call) const override { return call.args_ok && filter_.matches(call); }

  void before(OpCall& call) override {
    pending().reset();
    if (call.fallback != OpCall::Fallback::kNone) return;
    call.withArgs([&]<typename Args>(const Args& args) {
      bool floating = false;
      for (const mlu::TensorArg& t : mlu::tensorArgs(args))
        floating = floating || (t.view->present && t.meta.reads() && mlu::isFloating(t.view->dtype));
      if (!floating || mlurtQueueSync(call.queue) != MLURT_SUCCESS) return;
      pending() = Pending{call.seq, std::make_shared<HostCopy<Args>>(args, *pool_)};
    });
  }

  void after(OpCall& call) override {
    auto& slot = pending();
    if (!slot || slot->seq != call.seq) return;
    const Pending p = std::move(*slot);
    slot.reset();
    if (call.status != MLUOP_STATUS_SUCCESS || call.fallback != OpCall::Fallback::kNone) return;
    if (mlurtQueueSync(call.queue) != MLURT_SUCCESS) return;
    call.withArgs([&]<typename Args>(const Args& device_args) {
      try {
        check(call, device_args, *std::static_pointer_cast<HostCopy<Args>>(p.copy));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "opscope: perturb: %.*s #%llu: %s\n", static_cast<int>(call.name.size()),
                     call.name.data(), static_cast<unsigned long long>(call.seq), e.what());
      }
    });
  }

  void flush() override {
    std::lock_guard lock(mutex_);
    std::fflush(csv_.get());
    std::fprintf(stderr,
                 "opscope: perturb: %llu ops checked (%llu runs on perturbed inputs), %llu flagged; "
                 "details in %s\n",
                 static_cast<unsigned long long>(checked_), static_cast<unsigned long long>(runs_),
                 static_cast<unsigned long long>(flagged_), csv_path_.c_str());
    if (first_) std::fprintf(stderr, "opscope: perturb: first flagged op: %s\n", first_->c_str());
  }

  nlohmann::json findings() const override {
    std::lock_guard lock(mutex_);
    nlohmann::json j = {{"checked", checked_}, {"runs", runs_}, {"flagged", flagged_}};
    if (first_) j["first"] = *first_;
    return j;
  }

 private:
  // One run of the op on perturbed tensors: the host extents (as the op's layout) of each tensor, in schema
  // order, and the dtype each runs in.
  template <typename Args>
  void check(const OpCall& call, const Args& device_args, const HostCopy<Args>& before) {
    const std::vector<mlu::TensorArg> device = mlu::tensorArgs(device_args);
    const std::vector<mlu::TensorArg> host = mlu::tensorArgs(before.args());
    // The unperturbed outputs, as the device left them.
    std::vector<std::vector<float>> base(device.size());
    bool any_output = false;
    for (std::size_t i = 0; i < device.size(); ++i) {
      const mlu::TensorView& v = *device[i].view;
      if (!v.present || !device[i].meta.writes() || v.numel() == 0) continue;
      std::vector<std::byte> extent(v.extentBytes());
      if (mlurtMemcpy(extent.data(), v.data, extent.size(), MLURT_MEMCPY_DEVICE_TO_HOST) != MLURT_SUCCESS)
        throw std::runtime_error("cannot read an output back from the device");
      base[i] = valuesOf(v, extent.data());
      any_output = true;
    }
    if (!any_output) return;

    std::vector<Perturbation> kinds;
    if (!discontinuous(call.op)) kinds = {Perturbation::kNoise, Perturbation::kBitflip};
    bool half = false;
    for (const mlu::TensorArg& t : host) half = half || (t.view->present && mlu::isHalfType(t.view->dtype));
    if (half) kinds.push_back(Perturbation::kUpcast);
    if constexpr (requires {
                    device_args.a;
                    device_args.b;
                  }) {
      bool swappable = commutative(call.op);
      if constexpr (requires { device_args.alpha; }) swappable = swappable && device_args.alpha == 1.0f;
      if (swappable) kinds.push_back(Perturbation::kSwap);
    }
    {
      std::lock_guard lock(mutex_);
      ++checked_;
    }
    for (const Perturbation kind : kinds) runPerturbed(call, device_args, device, host, base, kind);
  }

  template <typename Args>
  void runPerturbed(const OpCall& call, const Args& device_args, const std::vector<mlu::TensorArg>& device,
                    const std::vector<mlu::TensorArg>& host, const std::vector<std::vector<float>>& base,
                    Perturbation kind) {
    Args args = device_args;
    std::vector<mlu::MutableTensorArg> tensors = mlu::tensorArgs(args);
    if (kind == Perturbation::kSwap) {
      if constexpr (requires {
                      args.a;
                      args.b;
                    })
        std::swap(args.a, args.b);
      tensors = mlu::tensorArgs(args);
    }
    std::vector<DeviceScratch> memory(tensors.size());
    double input_change = 0;
    float input_scale = 0;  // the perturbed inputs' largest magnitude
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      mlu::TensorView& v = *tensors[i].view;
      if (!v.present || v.numel() == 0) continue;
      // The tensor's host extent before the op ran (after a swap, the other operand's).
      std::size_t from = i;
      if (kind == Perturbation::kSwap) {
        for (std::size_t j = 0; j < device.size(); ++j)
          if (device[j].view->data == v.data && device[j].meta.reads()) from = j;
      }
      const mlu::TensorView& h = *host[from].view;
      std::vector<std::byte> extent(h.extentBytes());
      std::memcpy(extent.data(), h.data, extent.size());
      const bool perturbed_input = tensors[i].meta.reads() && mlu::isFloating(v.dtype);
      if (perturbed_input && (kind == Perturbation::kNoise || kind == Perturbation::kBitflip)) {
        const auto [scale, diff] = perturb(v, extent.data(), kind, call.seq * 131 + i);
        input_scale = std::max(input_scale, scale);
        if (scale > 0) input_change = std::max(input_change, static_cast<double>(diff / scale));
      }
      if (kind == Perturbation::kUpcast && mlu::isHalfType(v.dtype)) {
        // Gathered into a contiguous float32 tensor.
        const std::vector<float> values = valuesOf(v, extent.data());
        v.dtype = MLUOP_DTYPE_FLOAT;
        v.setContiguousStrides();
        extent.assign(values.size() * 4, std::byte{0});
        std::memcpy(extent.data(), values.data(), extent.size());
      }
      memory[i] = DeviceScratch(call.device, extent.size());
      if (mlurtMemcpy(memory[i].data(), extent.data(), extent.size(), MLURT_MEMCPY_HOST_TO_DEVICE) !=
          MLURT_SUCCESS)
        throw std::runtime_error("cannot copy a perturbed input to the device");
      v.data = memory[i].data();
    }
    DeviceScratch workspace;
    args.visit([&](const mlu::ArgMeta&, auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, mlu::Workspace>) {
        if (value.size == 0) return;
        workspace = DeviceScratch(call.device, kind == Perturbation::kUpcast ? 2 * value.size : value.size);
        value = mlu::Workspace{workspace.data(), workspace.size()};
      }
    });
    const mluopStatus_t status = invokeOnDevice(call.handle, args);
    mlurtQueueSync(call.queue);
    if (status != MLUOP_STATUS_SUCCESS) return;  // refused in float32, say: nothing to learn
    {
      std::lock_guard lock(mutex_);
      ++runs_;
    }
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const mlu::TensorView& v = *tensors[i].view;
      if (base[i].empty()) continue;
      std::vector<std::byte> extent(v.extentBytes());
      if (mlurtMemcpy(extent.data(), v.data, extent.size(), MLURT_MEMCPY_DEVICE_TO_HOST) != MLURT_SUCCESS)
        throw std::runtime_error("cannot read a perturbed output back from the device");
      std::vector<float> values = valuesOf(v, extent.data());
      const mluopDataType_t dtype = device[i].view->dtype;
      if (kind == Perturbation::kUpcast && dtype != v.dtype) {  // rounded back to the op's dtype
        std::byte b[4];
        const Loader load = loaderOf(dtype);
        for (float& x : values) {
          storeValue(dtype, b, x);
          x = load(b);
        }
      }
      record(call, tensors[i].meta, *device[i].view, kind, input_change,
             changeOf(base[i], values, dtype, kind == Perturbation::kUpcast, input_scale));
    }
  }

  // Perturbs v's elements in its host extent; returns their largest magnitude and largest change.
  static std::pair<float, float> perturb(const mlu::TensorView& v, std::byte* extent, Perturbation kind,
                                         std::uint64_t salt) {
    const float eps = static_cast<float>(epsilonOf(v.dtype));
    const float normal_min = static_cast<float>(normalMin(v.dtype));
    std::uint64_t state = mix(salt) | 1;  // xorshift64*: a fixed stream per tensor, cheap per element
    auto next = [&state] {
      state ^= state >> 12;
      state ^= state << 25;
      state ^= state >> 27;
      return state * 0x2545f4914f6cdd1dull;
    };
    float scale = 0, diff = 0;
    // One element: x its value; returns the perturbed value (bitflip: through the stored bits, at p).
    auto one = [&](float x, std::byte* p, auto&& store, auto&& load) {
      const std::uint64_t r = next();
      if (!std::isfinite(x)) return;
      scale = std::max(scale, std::fabs(x));
      if (kind == Perturbation::kBitflip) {
        // Normal values only: the lowest bit of a zero is a subnormal, which no computation makes from
        // nothing (and which the vector units take a slow path for).
        if ((r & 7) == 0 && std::fabs(x) >= normal_min) flipLowestBit(p);
      } else {
        store(p, x * (1 + 4 * eps * (static_cast<float>(r >> 40) * 0x1p-24f * 2 - 1)));
      }
      diff = std::max(diff, std::fabs(load(p) - x));
    };
    if (v.dtype == MLUOP_DTYPE_FLOAT && v.contiguous()) {  // the common case, without indirection
      auto load = [](const std::byte* p) {
        float f;
        std::memcpy(&f, p, 4);
        return f;
      };
      auto store = [](std::byte* p, float f) { std::memcpy(p, &f, 4); };
      for (std::int64_t i = 0, n = v.numel(); i < n; ++i)
        one(load(extent + 4 * i), extent + 4 * i, store, load);
      return {scale, diff};
    }
    const std::size_t size = v.elementSize();
    const Loader load = loaderOf(v.dtype);
    auto store = [&](std::byte* p, float f) { storeValue(v.dtype, p, f); };
    forEachOffset(v, [&](std::int64_t o) { one(load(extent + o * size), extent + o * size, store, load); });
    return {scale, diff};
  }

  void record(const OpCall& call, const mlu::ArgMeta& meta, const mlu::TensorView& original,
              Perturbation kind, double input_change, const Change& c) {
    const mluopDataType_t dtype = original.dtype;
    const bool floating = mlu::isFloating(dtype);
    double bound = 0;
    bool flagged = false;
    // The output's change over the inputs' — over its own dtype's epsilon when the inputs changed by less:
    // an output of a narrower dtype (a copy from float32 to bfloat16) cannot show a change finer than that.
    const double amplification = kind == Perturbation::kNoise || kind == Perturbation::kBitflip
                                     ? c.relative / std::max(input_change, epsilonOf(dtype))
                                     : 0;
    switch (kind) {
      case Perturbation::kSwap:
        flagged = !c.identical;
        break;
      case Perturbation::kUpcast:
        bound = kUpcastUlps;
        flagged = floating && (c.max_ulp > bound || c.new_nonfinite > 0);
        break;
      default:
        bound = kAmplification;
        flagged = floating && (c.new_nonfinite > 0 || amplification > kAmplification);
    }
    if (!floating && kind != Perturbation::kSwap) return;  // indices move with ties: not a measure
    const std::string_view name = kPerturbationNames[static_cast<std::size_t>(kind)];
    const std::string tensor = fmt::format("{} {}", meta.writes() ? "output" : "input", meta.name);
    const std::string module = call.site != nullptr ? call.site->module : std::string();
    const std::string source = call.site != nullptr ? call.site->source : std::string();
    std::lock_guard lock(mutex_);
    std::fprintf(csv_.get(), "%llu,%.*s,%.*s,%s,%.*s,\"%s\",%.3e,%.3e,%.3g,%.3g,%.3g,%llu,%s,%s,%s\n",
                 static_cast<unsigned long long>(call.seq), static_cast<int>(call.name.size()),
                 call.name.data(), static_cast<int>(name.size()), name.data(), tensor.c_str(),
                 static_cast<int>(mlu::dtypeName(dtype).size()), mlu::dtypeName(dtype).data(),
                 original.shapeString().c_str(), input_change, c.relative, amplification, c.max_ulp, bound,
                 static_cast<unsigned long long>(c.new_nonfinite), flagged ? "flagged" : "pass",
                 csvQuoted(module).c_str(), csvQuoted(source).c_str());
    if (!flagged) return;
    ++flagged_;
    const std::string what =
        kind == Perturbation::kSwap     ? "its operands swapped changed the result"
        : kind == Perturbation::kUpcast ? fmt::format(
                                              "run in float32 it differs by {:.3g} ULPs (bound {:.3g}): "
                                              "it computes with less precision than its dtype allows",
                                              c.max_ulp, bound)
        : c.new_nonfinite > 0
            ? fmt::format("{} NaN/Inf appeared for a change of {:.2e} in its inputs", c.new_nonfinite,
                          input_change)
            : fmt::format(
                  "its output moved {:.2e} for a change of {:.2e} in its inputs ({:.3g}x; bound {:.3g}x)",
                  c.relative, input_change, amplification, bound);
    if (!first_ || call.seq < first_seq_) {
      first_seq_ = call.seq;
      first_ = fmt::format("{} #{} ({}, {})", call.name, call.seq, name, tensor);
    }
    if (flagged_ <= kMaxPrinted) {
      std::fprintf(stderr, "OpPerturb: %.*s #%llu %s %.*s %s: %s%s%s\n", static_cast<int>(call.name.size()),
                   call.name.data(), static_cast<unsigned long long>(call.seq), tensor.c_str(),
                   static_cast<int>(mlu::dtypeName(dtype).size()), mlu::dtypeName(dtype).data(), name.data(),
                   what.c_str(), module.empty() ? "" : " in module ", module.c_str());
    } else if (flagged_ == kMaxPrinted + 1) {
      std::fprintf(stderr, "OpPerturb: more flagged ops go to %s only\n", csv_path_.c_str());
    }
  }

  static std::optional<Pending>& pending() {
    thread_local std::optional<Pending> p;
    return p;
  }

  OpFilter filter_;
  std::shared_ptr<BufferPool> pool_ = std::make_shared<BufferPool>();
  std::string csv_path_;
  UniqueFile csv_;
  mutable std::mutex mutex_;
  std::uint64_t checked_ = 0, runs_ = 0, flagged_ = 0;  // guarded by mutex_
  std::optional<std::string> first_;
  std::uint64_t first_seq_ = 0;
};

}  // namespace

ToolRegistration perturbRegistration() {
  return {ToolId::kPerturb, [](const Config& c) { return c.perturb; }, true,
          [](const Config& c, const RunInfo& run) -> std::unique_ptr<Tool> {
            return std::make_unique<PerturbTool>(c, run);
          }};
}

}  // namespace opscope::compare
