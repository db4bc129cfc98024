// Argument checks of the normalization (layer_norm, rms_norm, batch_norm, forward and backward) and rotary
// position embedding (rope, forward and backward) ops. The shape rules live in norm_shapes.h, shared with
// the device kernels and the CPU reference. Messages say what is wrong with the actual values; the entry
// point prefixes the op.
#include "norm_shapes.h"
#include "validate.h"

#include "checks.h"
#include "elementwise_shapes.h"
#include "reduce_shapes.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <utility>

namespace mlu {
namespace {

using norm::Shape;
using reduce::listString;
using reduce::shapeOf;

using Named = std::pair<std::string_view, const TensorView*>;

// An optional tensor, when present, is checked like a required one.
Status optionalTensor(std::string_view name, const TensorView& t) {
  return t.present ? checks::tensor(name, t) : Status::success();
}

Status sameDtypeIfPresent(std::string_view name, const TensorView& t, std::string_view ref_name,
                          const TensorView& ref) {
  return t.present ? checks::sameDtype(name, t, ref_name, ref) : Status::success();
}

Status checkSameShape(std::string_view name, const TensorView& t, std::string_view ref_name,
                      const TensorView& ref) {
  if (shapeOf(t) == shapeOf(ref)) return Status::success();
  return badParam("{} has shape {} but {} has shape {}; they must be equal", name, t.shapeString(), ref_name,
                  ref.shapeString());
}

// A saved statistic (mean, rstd, save_mean, save_invstd): float32 for a 16-bit x, else x's dtype.
Status checkStatDtype(std::string_view name, const TensorView& t, std::string_view x_name,
                      const TensorView& x) {
  if (!t.present) return Status::success();
  const mluopDataType_t want = norm::statDtype(x.dtype);
  if (t.dtype == want) return Status::success();
  return badParam("{} is {} but must be {} for a {} {}", name, dtypeName(t.dtype), dtypeName(want),
                  dtypeName(x.dtype), x_name);
}

// Any finite eps, negative ones too, as PyTorch (which checks none): 1/sqrt(var + eps) is then NaN where
// var + eps < 0 and inf where it is 0 (DIOPI's layer_norm cases use eps -1e-5 and -3).
Status checkEps(double eps) {
  if (std::isfinite(eps)) return Status::success();
  return badParam("eps = {}; expected a finite eps", eps);
}

// An output must address a distinct element at every logical position (no broadcast views).
Status checkNoSelfOverlap(std::string_view name, const TensorView& t) {
  if (!t.present || !elementwise::overlapsItself(t)) return Status::success();
  return badParam(
      "{} (shape {}, strides {}) overlaps itself; an output needs a distinct element at every "
      "position",
      name, t.shapeString(), elementwise::stridesString(t));
}

// Whether the bytes a and b address intersect (conservative: two interleaved views of one buffer count).
bool memoryIntersects(const TensorView& a, const TensorView& b) {
  if (!a.present || !b.present || a.extentBytes() == 0 || b.extentBytes() == 0) return false;
  const auto a0 = reinterpret_cast<std::uintptr_t>(a.data);
  const auto b0 = reinterpret_cast<std::uintptr_t>(b.data);
  return a0 < b0 + b.extentBytes() && b0 < a0 + a.extentBytes();
}

// The outputs (and in-place tensors) must not overlap themselves, each other or any input.
Status checkOutputs(std::initializer_list<Named> outputs, std::initializer_list<Named> inputs) {
  for (auto it = outputs.begin(); it != outputs.end(); ++it) {
    MLU_RETURN_IF_ERROR(checkNoSelfOverlap(it->first, *it->second));
    for (auto other = outputs.begin(); other != it; ++other) {
      if (memoryIntersects(*it->second, *other->second)) {
        return badParam("{} and {} overlap in memory; outputs must not share memory", other->first,
                        it->first);
      }
    }
    for (const Named& in : inputs) {
      if (memoryIntersects(*it->second, *in.second)) {
        return badParam("{} overlaps {} in memory; an output must not share memory with an input", it->first,
                        in.first);
      }
    }
  }
  return Status::success();
}

// ---- layer_norm / rms_norm ----

// normalized_ndim names the last dims of x: 1 to x.ndim of them.
Status checkNormalizedNdim(int normalized_ndim, const TensorView& x, std::string_view x_name) {
  if (normalized_ndim >= 1 && normalized_ndim <= x.ndim) return Status::success();
  if (x.ndim == 0) return badParam("{} is 0-d; layer_norm and rms_norm need at least 1 dim", x_name);
  return badParam("normalized_ndim = {} is out of range for a {}-d {} (expected 1 to {})", normalized_ndim,
                  x.ndim, x_name, x.ndim);
}

// weight, bias, grad_weight, grad_bias: the normalized shape of x.
Status checkParamShape(std::string_view name, const TensorView& t, const TensorView& x, int lead) {
  if (!t.present) return Status::success();
  const Shape want = norm::trailingShape(x, lead);
  if (shapeOf(t) == want) return Status::success();
  return badParam("{} has shape {} but the normalized shape of x {} is {} (its last {} dims)", name,
                  t.shapeString(), x.shapeString(), listString(want), x.ndim - lead);
}

// mean and rstd: the leading shape of x.
Status checkStatShape(std::string_view name, const TensorView& t, const TensorView& x, int lead) {
  const Shape want = norm::leadingShape(x, lead);
  if (shapeOf(t) == want) return Status::success();
  return badParam("{} has shape {} but x {} has leading shape {} (its dims before the last {})", name,
                  t.shapeString(), x.shapeString(), listString(want), x.ndim - lead);
}

// The checks layer_norm and rms_norm forward share; mean is absent for rms_norm.
Status validateNormForward(int normalized_ndim, double eps, const TensorView& x, const TensorView& weight,
                           const TensorView& bias, const TensorView& y, const TensorView& mean,
                           const TensorView& rstd) {
  MLU_RETURN_IF_ERROR(checks::tensor("x", x));
  MLU_RETURN_IF_ERROR(optionalTensor("weight", weight));
  MLU_RETURN_IF_ERROR(optionalTensor("bias", bias));
  MLU_RETURN_IF_ERROR(checks::tensor("y", y));
  MLU_RETURN_IF_ERROR(optionalTensor("mean", mean));
  MLU_RETURN_IF_ERROR(checks::tensor("rstd", rstd));
  MLU_RETURN_IF_ERROR(checks::floating("x", x));
  MLU_RETURN_IF_ERROR(checkNormalizedNdim(normalized_ndim, x, "x"));
  MLU_RETURN_IF_ERROR(checkEps(eps));
  MLU_RETURN_IF_ERROR(sameDtypeIfPresent("weight", weight, "x", x));
  MLU_RETURN_IF_ERROR(sameDtypeIfPresent("bias", bias, "x", x));
  MLU_RETURN_IF_ERROR(checks::sameDtype("y", y, "x", x));
  MLU_RETURN_IF_ERROR(checkStatDtype("mean", mean, "x", x));
  MLU_RETURN_IF_ERROR(checkStatDtype("rstd", rstd, "x", x));
  const int lead = x.ndim - normalized_ndim;
  MLU_RETURN_IF_ERROR(checkParamShape("weight", weight, x, lead));
  MLU_RETURN_IF_ERROR(checkParamShape("bias", bias, x, lead));
  MLU_RETURN_IF_ERROR(checkSameShape("y", y, "x", x));
  if (mean.present) MLU_RETURN_IF_ERROR(checkStatShape("mean", mean, x, lead));
  MLU_RETURN_IF_ERROR(checkStatShape("rstd", rstd, x, lead));
  return checkOutputs({{"y", &y}, {"mean", &mean}, {"rstd", &rstd}},
                      {{"x", &x}, {"weight", &weight}, {"bias", &bias}});
}

// The checks layer_norm and rms_norm backward share; mean and grad_bias are absent for rms_norm.
Status validateNormBackward(int normalized_ndim, const TensorView& grad_output, const TensorView& x,
                            const TensorView& mean, const TensorView& rstd, const TensorView& weight,
                            const TensorView& grad_input, const TensorView& grad_weight,
                            const TensorView& grad_bias) {
  MLU_RETURN_IF_ERROR(checks::tensor("grad_output", grad_output));
  MLU_RETURN_IF_ERROR(checks::tensor("x", x));
  MLU_RETURN_IF_ERROR(optionalTensor("mean", mean));
  MLU_RETURN_IF_ERROR(checks::tensor("rstd", rstd));
  MLU_RETURN_IF_ERROR(optionalTensor("weight", weight));
  MLU_RETURN_IF_ERROR(checks::tensor("grad_input", grad_input));
  MLU_RETURN_IF_ERROR(optionalTensor("grad_weight", grad_weight));
  MLU_RETURN_IF_ERROR(optionalTensor("grad_bias", grad_bias));
  MLU_RETURN_IF_ERROR(checks::floating("x", x));
  MLU_RETURN_IF_ERROR(checkNormalizedNdim(normalized_ndim, x, "x"));
  MLU_RETURN_IF_ERROR(checks::sameDtype("grad_output", grad_output, "x", x));
  MLU_RETURN_IF_ERROR(checkStatDtype("mean", mean, "x", x));
  MLU_RETURN_IF_ERROR(checkStatDtype("rstd", rstd, "x", x));
  MLU_RETURN_IF_ERROR(sameDtypeIfPresent("weight", weight, "x", x));
  MLU_RETURN_IF_ERROR(checks::sameDtype("grad_input", grad_input, "x", x));
  MLU_RETURN_IF_ERROR(sameDtypeIfPresent("grad_weight", grad_weight, "x", x));
  MLU_RETURN_IF_ERROR(sameDtypeIfPresent("grad_bias", grad_bias, "x", x));
  const int lead = x.ndim - normalized_ndim;
  MLU_RETURN_IF_ERROR(checkSameShape("grad_output", grad_output, "x", x));
  if (mean.present) MLU_RETURN_IF_ERROR(checkStatShape("mean", mean, x, lead));
  MLU_RETURN_IF_ERROR(checkStatShape("rstd", rstd, x, lead));
  MLU_RETURN_IF_ERROR(checkParamShape("weight", weight, x, lead));
  MLU_RETURN_IF_ERROR(checkSameShape("grad_input", grad_input, "x", x));
  MLU_RETURN_IF_ERROR(checkParamShape("grad_weight", grad_weight, x, lead));
  MLU_RETURN_IF_ERROR(checkParamShape("grad_bias", grad_bias, x, lead));
  return checkOutputs(
      {{"grad_input", &grad_input}, {"grad_weight", &grad_weight}, {"grad_bias", &grad_bias}},
      {{"grad_output", &grad_output}, {"x", &x}, {"mean", &mean}, {"rstd", &rstd}, {"weight", &weight}});
}

// ---- batch_norm ----

// x (or grad_output) must be [N, C, ...].
Status checkBatchInput(std::string_view name, const TensorView& x) {
  if (x.ndim >= 2) return Status::success();
  return badParam("{} has shape {}; expected at least 2 dims [N, C, ...]", name, x.shapeString());
}

// A per-channel tensor: shape [C].
Status checkChannelShape(std::string_view name, const TensorView& t, const TensorView& x) {
  if (!t.present || shapeOf(t) == Shape{x.dim(1)}) return Status::success();
  return badParam("{} has shape {} but x {} has {} channels; expected [{}]", name, t.shapeString(),
                  x.shapeString(), x.dim(1), x.dim(1));
}

// running_mean/running_var: both or neither; float32 or x's dtype, the same for both.
Status checkRunningStats(const TensorView& running_mean, const TensorView& running_var, const TensorView& x) {
  if (running_mean.present != running_var.present) {
    return badParam("{} is given without {}; give both running stats or neither",
                    running_mean.present ? "running_mean" : "running_var",
                    running_mean.present ? "running_var" : "running_mean");
  }
  if (!running_mean.present) return Status::success();
  if (running_mean.dtype != x.dtype && running_mean.dtype != MLUOP_DTYPE_FLOAT) {
    return badParam("running_mean is {} but x is {}; the running stats must be float32 or x's dtype",
                    dtypeName(running_mean.dtype), dtypeName(x.dtype));
  }
  MLU_RETURN_IF_ERROR(checks::sameDtype("running_var", running_var, "running_mean", running_mean));
  MLU_RETURN_IF_ERROR(checkChannelShape("running_mean", running_mean, x));
  return checkChannelShape("running_var", running_var, x);
}

// ---- rope ----

// x (or grad_output) must be [B, S, H, D] with D even; the positions must be exact in float64.
Status checkRopeInput(std::string_view name, const TensorView& x, double theta,
                      std::int64_t position_offset) {
  if (x.ndim != 4) return badParam("{} has shape {}; expected 4 dims [B, S, H, D]", name, x.shapeString());
  if (x.dim(3) % 2 != 0) {
    return badParam("{} has shape {}: its head dim D = {} is odd; rope pairs element i with i + D/2", name,
                    x.shapeString(), x.dim(3));
  }
  if (!(std::isfinite(theta) && theta > 0)) return badParam("theta = {}; expected a finite theta > 0", theta);
  if (position_offset < 0) return badParam("position_offset = {} is negative", position_offset);
  if (position_offset > norm::kMaxRopePosition - x.dim(1)) {
    return badParam("position_offset = {} with {} positions exceeds 2^53, where positions stop being exact",
                    position_offset, x.dim(1));
  }
  return Status::success();
}

// y may be x itself (same data, dims and strides: the rotation is done in place), else separate memory.
bool sameView(const TensorView& a, const TensorView& b) {
  if (a.data != b.data || a.dtype != b.dtype || shapeOf(a) != shapeOf(b)) return false;
  for (int d = 0; d < a.ndim; ++d) {
    if (a.dim(d) > 1 && a.stride(d) != b.stride(d)) return false;
  }
  return true;
}

Status validateRope(double theta, std::int64_t position_offset, std::string_view x_name, const TensorView& x,
                    std::string_view y_name, const TensorView& y) {
  MLU_RETURN_IF_ERROR(checks::tensor(x_name, x));
  MLU_RETURN_IF_ERROR(checks::tensor(y_name, y));
  MLU_RETURN_IF_ERROR(checks::floating(x_name, x));
  MLU_RETURN_IF_ERROR(checks::sameDtype(y_name, y, x_name, x));
  MLU_RETURN_IF_ERROR(checkRopeInput(x_name, x, theta, position_offset));
  MLU_RETURN_IF_ERROR(checkSameShape(y_name, y, x_name, x));
  MLU_RETURN_IF_ERROR(checkNoSelfOverlap(y_name, y));
  if (!sameView(x, y) && memoryIntersects(x, y)) {
    return badParam(
        "{} partially overlaps {} in memory; it may be {} itself (same data and strides) or "
        "separate memory",
        y_name, x_name, x_name);
  }
  return Status::success();
}

}  // namespace

Status validate(const layer_norm_forward_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("mean", a.mean));
  return validateNormForward(a.normalized_ndim, a.eps, a.x, a.weight, a.bias, a.y, a.mean, a.rstd);
}

Status validate(const layer_norm_backward_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("mean", a.mean));
  return validateNormBackward(a.normalized_ndim, a.grad_output, a.x, a.mean, a.rstd, a.weight, a.grad_input,
                              a.grad_weight, a.grad_bias);
}

Status validate(const rms_norm_forward_args& a) {
  return validateNormForward(a.normalized_ndim, a.eps, a.x, a.weight, TensorView{}, a.y, TensorView{},
                             a.rstd);
}

Status validate(const rms_norm_backward_args& a) {
  return validateNormBackward(a.normalized_ndim, a.grad_output, a.x, TensorView{}, a.rstd, a.weight,
                              a.grad_input, a.grad_weight, TensorView{});
}

Status validate(const batch_norm_forward_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("x", a.x));
  MLU_RETURN_IF_ERROR(optionalTensor("weight", a.weight));
  MLU_RETURN_IF_ERROR(optionalTensor("bias", a.bias));
  MLU_RETURN_IF_ERROR(optionalTensor("running_mean", a.running_mean));
  MLU_RETURN_IF_ERROR(optionalTensor("running_var", a.running_var));
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  MLU_RETURN_IF_ERROR(optionalTensor("save_mean", a.save_mean));
  MLU_RETURN_IF_ERROR(optionalTensor("save_invstd", a.save_invstd));
  MLU_RETURN_IF_ERROR(checks::floating("x", a.x));
  MLU_RETURN_IF_ERROR(checkBatchInput("x", a.x));
  // Any finite momentum, as PyTorch's batch_norm takes (DIOPI's cases use -0.1): running = (1 - m) running +
  // m batch.
  if (!std::isfinite(a.momentum)) return badParam("momentum = {}; expected a finite number", a.momentum);
  MLU_RETURN_IF_ERROR(checkEps(a.eps));
  MLU_RETURN_IF_ERROR(sameDtypeIfPresent("weight", a.weight, "x", a.x));
  MLU_RETURN_IF_ERROR(sameDtypeIfPresent("bias", a.bias, "x", a.x));
  MLU_RETURN_IF_ERROR(checks::sameDtype("y", a.y, "x", a.x));
  MLU_RETURN_IF_ERROR(checkStatDtype("save_mean", a.save_mean, "x", a.x));
  MLU_RETURN_IF_ERROR(checkStatDtype("save_invstd", a.save_invstd, "x", a.x));
  MLU_RETURN_IF_ERROR(checkChannelShape("weight", a.weight, a.x));
  MLU_RETURN_IF_ERROR(checkChannelShape("bias", a.bias, a.x));
  MLU_RETURN_IF_ERROR(checkRunningStats(a.running_mean, a.running_var, a.x));
  MLU_RETURN_IF_ERROR(checkSameShape("y", a.y, "x", a.x));
  MLU_RETURN_IF_ERROR(checkChannelShape("save_mean", a.save_mean, a.x));
  MLU_RETURN_IF_ERROR(checkChannelShape("save_invstd", a.save_invstd, a.x));
  if (!a.training && !a.running_mean.present) {
    return badParam(
        "inference (training = false) normalizes with the running stats, but running_mean and "
        "running_var are absent");
  }
  if (a.training && a.x.dim(1) > 0 && norm::perChannelCount(a.x) == 1) {
    return badParam("training needs more than 1 value per channel, but x {} has 1", a.x.shapeString());
  }
  return checkOutputs({{"y", &a.y},
                       {"running_mean", &a.running_mean},
                       {"running_var", &a.running_var},
                       {"save_mean", &a.save_mean},
                       {"save_invstd", &a.save_invstd}},
                      {{"x", &a.x}, {"weight", &a.weight}, {"bias", &a.bias}});
}

Status validate(const batch_norm_backward_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("grad_output", a.grad_output));
  MLU_RETURN_IF_ERROR(checks::tensor("x", a.x));
  MLU_RETURN_IF_ERROR(optionalTensor("weight", a.weight));
  MLU_RETURN_IF_ERROR(checks::tensor("save_mean", a.save_mean));
  MLU_RETURN_IF_ERROR(checks::tensor("save_invstd", a.save_invstd));
  MLU_RETURN_IF_ERROR(checks::tensor("grad_input", a.grad_input));
  MLU_RETURN_IF_ERROR(optionalTensor("grad_weight", a.grad_weight));
  MLU_RETURN_IF_ERROR(optionalTensor("grad_bias", a.grad_bias));
  MLU_RETURN_IF_ERROR(checks::floating("x", a.x));
  MLU_RETURN_IF_ERROR(checkBatchInput("x", a.x));
  MLU_RETURN_IF_ERROR(checks::sameDtype("grad_output", a.grad_output, "x", a.x));
  MLU_RETURN_IF_ERROR(sameDtypeIfPresent("weight", a.weight, "x", a.x));
  MLU_RETURN_IF_ERROR(checkStatDtype("save_mean", a.save_mean, "x", a.x));
  MLU_RETURN_IF_ERROR(checkStatDtype("save_invstd", a.save_invstd, "x", a.x));
  MLU_RETURN_IF_ERROR(checks::sameDtype("grad_input", a.grad_input, "x", a.x));
  MLU_RETURN_IF_ERROR(sameDtypeIfPresent("grad_weight", a.grad_weight, "x", a.x));
  MLU_RETURN_IF_ERROR(sameDtypeIfPresent("grad_bias", a.grad_bias, "x", a.x));
  MLU_RETURN_IF_ERROR(checkSameShape("grad_output", a.grad_output, "x", a.x));
  MLU_RETURN_IF_ERROR(checkChannelShape("weight", a.weight, a.x));
  MLU_RETURN_IF_ERROR(checkChannelShape("save_mean", a.save_mean, a.x));
  MLU_RETURN_IF_ERROR(checkChannelShape("save_invstd", a.save_invstd, a.x));
  MLU_RETURN_IF_ERROR(checkSameShape("grad_input", a.grad_input, "x", a.x));
  MLU_RETURN_IF_ERROR(checkChannelShape("grad_weight", a.grad_weight, a.x));
  MLU_RETURN_IF_ERROR(checkChannelShape("grad_bias", a.grad_bias, a.x));
  return checkOutputs(
      {{"grad_input", &a.grad_input}, {"grad_weight", &a.grad_weight}, {"grad_bias", &a.grad_bias}},
      {{"grad_output", &a.grad_output},
       {"x", &a.x},
       {"weight", &a.weight},
       {"save_mean", &a.save_mean},
       {"save_invstd", &a.save_invstd}});
}

Status validate(const rope_forward_args& a) {
  return validateRope(a.theta, a.position_offset, "x", a.x, "y", a.y);
}

Status validate(const rope_backward_args& a) {
  return validateRope(a.theta, a.position_offset, "grad_output", a.grad_output, "grad_input", a.grad_input);
}

}  // namespace mlu
