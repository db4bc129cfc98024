// kernels_nn.cpp — the native ATen kernels of the layers of vision models and transformers: batch norm
// (training and evaluation, with running statistics), layer norm (with and without weight and bias),
// GELU (exact and tanh), hardtanh (ReLU6), average and adaptive average pooling. Each is one or a few
// calls of the kernel library; arguments it cannot take run on the CPU through the counting fallback.
#include <ATen/ATen.h>
#include <ATen/ops/_adaptive_avg_pool2d_backward_ops.h>
#include <ATen/ops/_adaptive_avg_pool2d_ops.h>
#include <ATen/ops/avg_pool2d_backward_ops.h>
#include <ATen/ops/avg_pool2d_ops.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/hardsigmoid_backward_ops.h>
#include <ATen/ops/hardsigmoid_ops.h>
#include <ATen/ops/hardswish_backward_ops.h>
#include <ATen/ops/hardswish_ops.h>
#include <ATen/ops/hardtanh_backward_ops.h>
#include <ATen/ops/hardtanh_ops.h>
#include <ATen/ops/native_batch_norm_backward_ops.h>
#include <ATen/ops/native_batch_norm_ops.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <optional>
#include <tuple>
#include <vector>

#include "fallback.h"
#include "kernel_util.h"
#include "mlu_context.h"

namespace torch_mlu {
namespace {

using at::Tensor;
using namespace kernels;  // NOLINT(google-build-using-namespace): the shared kernel helpers

bool present(const c10::optional<Tensor>& t) { return t.has_value() && t->defined(); }

// A descriptor of an optional tensor, or none.
std::optional<Descriptor> optionalDescriptor(const c10::optional<Tensor>& t) {
  if (!present(t)) return std::nullopt;
  return std::optional<Descriptor>(std::in_place, *t);
}
mluopTensorDescriptor_t descOf(const std::optional<Descriptor>& d) { return d ? d->get() : nullptr; }
void* dataOf(const c10::optional<Tensor>& t) { return present(t) ? t->data_ptr() : nullptr; }

// The dtype of the kernel library's saved statistics: float32 for the 16-bit floats, else x's.
at::ScalarType statType(const Tensor& x) {
  return x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16 ? at::kFloat : x.scalar_type();
}

// An optional per-channel or normalized-shape parameter the kernel library can take beside x.
bool paramOk(const c10::optional<Tensor>& t, const Tensor& x) {
  return !present(t) || (isMlu(*t) && t->scalar_type() == x.scalar_type());
}

// An output like x (its memory format kept, as PyTorch's CPU kernels keep channels_last).
Tensor newLike(const Tensor& x) { return at::empty_like(x, x.suggest_memory_format()); }

// ---- batch norm ----

std::tuple<Tensor, Tensor, Tensor> nativeBatchNorm(const Tensor& input, const c10::optional<Tensor>& weight,
                                                   const c10::optional<Tensor>& bias,
                                                   const c10::optional<Tensor>& running_mean,
                                                   const c10::optional<Tensor>& running_var, bool training,
                                                   double momentum, double eps) {
  const bool stats_ok =
      present(running_mean) == present(running_var) &&
      (!present(running_mean) ||
       (isMlu(*running_mean) && running_var->scalar_type() == running_mean->scalar_type() &&
        (running_mean->scalar_type() == input.scalar_type() || running_mean->scalar_type() == at::kFloat)));
  if (!isMluFloating(input) || input.dim() < 2 || !paramOk(weight, input) || !paramOk(bias, input) ||
      !stats_ok || (!training && !present(running_mean))) {
    return viaCpu<at::_ops::native_batch_norm>(input, weight, bias, running_mean, running_var, training,
                                               momentum, eps);
  }
  const c10::DeviceGuard guard(input.device());
  Tensor y = newLike(input);
  const int64_t channels = input.size(1);
  // In evaluation PyTorch's CPU kernel returns empty statistics (its backward reads the running ones).
  Tensor save_mean = newTensor(input, {training ? channels : 0}, statType(input));
  Tensor save_invstd = newTensor(input, {training ? channels : 0}, statType(input));
  const Descriptor xd(input), yd(y);
  const auto wd = optionalDescriptor(weight), bd = optionalDescriptor(bias);
  const auto rmd = optionalDescriptor(running_mean), rvd = optionalDescriptor(running_var);
  std::optional<Descriptor> smd, sid;
  if (training) smd.emplace(save_mean), sid.emplace(save_invstd);
  checkOps(mluopBatchNormForward(handle(), training, momentum, eps, xd.get(), input.data_ptr(), descOf(wd),
                                 dataOf(weight), descOf(bd), dataOf(bias), descOf(rmd), dataOf(running_mean),
                                 descOf(rvd), dataOf(running_var), yd.get(), y.data_ptr(), descOf(smd),
                                 training ? save_mean.data_ptr() : nullptr, descOf(sid),
                                 training ? save_invstd.data_ptr() : nullptr),
           "batch_norm_forward");
  return {y, save_mean, save_invstd};
}

std::tuple<Tensor, Tensor, Tensor> nativeBatchNormBackward(
    const Tensor& grad_out, const Tensor& input, const c10::optional<Tensor>& weight,
    const c10::optional<Tensor>& running_mean, const c10::optional<Tensor>& running_var,
    const c10::optional<Tensor>& save_mean, const c10::optional<Tensor>& save_invstd, bool train, double eps,
    std::array<bool, 3> output_mask) {
  const auto stat_ok = [&](const c10::optional<Tensor>& t) {
    return present(t) && isMlu(*t) && t->scalar_type() == statType(input) && t->dim() == 1 &&
           t->size(0) == input.size(1);
  };
  if (!train || !isMluFloating(input) || input.dim() < 2 || grad_out.scalar_type() != input.scalar_type() ||
      !isMlu(grad_out) || !paramOk(weight, input) || !stat_ok(save_mean) || !stat_ok(save_invstd)) {
    return viaCpu<at::_ops::native_batch_norm_backward>(grad_out, input, weight, running_mean, running_var,
                                                        save_mean, save_invstd, train, eps, output_mask);
  }
  const c10::DeviceGuard guard(input.device());
  Tensor grad_input = newLike(input);  // the kernel library always writes it
  const int64_t channels = input.size(1);
  Tensor grad_weight, grad_bias;
  if (output_mask[1]) grad_weight = newTensor(input, {channels}, input.scalar_type());
  if (output_mask[2]) grad_bias = newTensor(input, {channels}, input.scalar_type());
  const Descriptor god(grad_out), xd(input), smd(*save_mean), sid(*save_invstd), gid(grad_input);
  const auto wd = optionalDescriptor(weight);
  const auto gwd = optionalDescriptor(grad_weight), gbd = optionalDescriptor(grad_bias);
  checkOps(mluopBatchNormBackward(handle(), god.get(), grad_out.data_ptr(), xd.get(), input.data_ptr(),
                                  descOf(wd), dataOf(weight), smd.get(), save_mean->data_ptr(), sid.get(),
                                  save_invstd->data_ptr(), gid.get(), grad_input.data_ptr(), descOf(gwd),
                                  dataOf(grad_weight), descOf(gbd), dataOf(grad_bias)),
           "batch_norm_backward");
  return {output_mask[0] ? grad_input : Tensor(), grad_weight, grad_bias};
}

// ---- layer norm ----

// PyTorch's mean and rstd have x's shape with the normalized dims kept as 1; the kernel library's have
// the leading shape: the same contiguous memory, described without the trailing 1s.
std::vector<int64_t> statSizes(const Tensor& x, int64_t normalized_ndim, bool keep) {
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end() - normalized_ndim);
  if (keep) sizes.insert(sizes.end(), normalized_ndim, 1);
  return sizes;
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t i = sizes.size(); i-- > 1;) strides[i - 1] = strides[i] * std::max<int64_t>(sizes[i], 1);
  return strides;
}

class StatDescriptor {
 public:
  StatDescriptor(const Tensor& stat, const Tensor& x, int64_t normalized_ndim)
      : sizes_(statSizes(x, normalized_ndim, false)),
        strides_(contiguousStrides(sizes_)),
        desc_(stat, sizes_, strides_) {}
  mluopTensorDescriptor_t get() const { return desc_.get(); }

 private:
  std::vector<int64_t> sizes_;
  std::vector<int64_t> strides_;
  Descriptor desc_;
};

bool layerNormArgsOk(const Tensor& input, at::IntArrayRef normalized_shape,
                     const c10::optional<Tensor>& weight, const c10::optional<Tensor>& bias) {
  const auto n = static_cast<int64_t>(normalized_shape.size());
  if (!isMluFloating(input) || n < 1 || n > input.dim() || !paramOk(weight, input) || !paramOk(bias, input))
    return false;
  return input.sizes().slice(input.dim() - n) == normalized_shape;
}

std::tuple<Tensor, Tensor, Tensor> nativeLayerNorm(const Tensor& input, c10::SymIntArrayRef normalized_shape,
                                                   const c10::optional<Tensor>& weight,
                                                   const c10::optional<Tensor>& bias, double eps) {
  const at::IntArrayRef shape = c10::asIntArrayRefSlow(normalized_shape);
  if (!layerNormArgsOk(input, shape, weight, bias)) {
    return viaCpuSymint<at::_ops::native_layer_norm>(input, normalized_shape, weight, bias, eps);
  }
  const c10::DeviceGuard guard(input.device());
  const auto n = static_cast<int64_t>(shape.size());
  Tensor y = newTensor(input);
  Tensor mean = newTensor(input, statSizes(input, n, true), statType(input));
  Tensor rstd = newTensor(input, statSizes(input, n, true), statType(input));
  const Descriptor xd(input), yd(y);
  const StatDescriptor md(mean, input, n), rd(rstd, input, n);
  const auto wd = optionalDescriptor(weight), bd = optionalDescriptor(bias);
  checkOps(mluopLayerNormForward(handle(), static_cast<int>(n), eps, xd.get(), input.data_ptr(), descOf(wd),
                                 dataOf(weight), descOf(bd), dataOf(bias), yd.get(), y.data_ptr(), md.get(),
                                 mean.data_ptr(), rd.get(), rstd.data_ptr()),
           "layer_norm_forward");
  return {y, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> nativeLayerNormBackward(const Tensor& grad_out, const Tensor& input,
                                                           c10::SymIntArrayRef normalized_shape,
                                                           const Tensor& mean, const Tensor& rstd,
                                                           const c10::optional<Tensor>& weight,
                                                           const c10::optional<Tensor>& bias,
                                                           std::array<bool, 3> output_mask) {
  const at::IntArrayRef shape = c10::asIntArrayRefSlow(normalized_shape);
  const auto n = static_cast<int64_t>(shape.size());
  const auto stat_ok = [&](const Tensor& t) {
    return isMlu(t) && t.scalar_type() == statType(input) && t.is_contiguous() &&
           t.sizes().vec() == statSizes(input, n, true);
  };
  if (!layerNormArgsOk(input, shape, weight, bias) || !isMlu(grad_out) ||
      grad_out.scalar_type() != input.scalar_type() || !stat_ok(mean) || !stat_ok(rstd)) {
    return viaCpuSymint<at::_ops::native_layer_norm_backward>(grad_out, input, normalized_shape, mean, rstd,
                                                              weight, bias, output_mask);
  }
  const c10::DeviceGuard guard(input.device());
  Tensor grad_input = newTensor(input);
  Tensor grad_weight, grad_bias;
  if (output_mask[1] && present(weight)) grad_weight = newTensor(*weight);
  if (output_mask[2] && present(bias)) grad_bias = newTensor(*bias);
  const Descriptor god(grad_out), xd(input), gid(grad_input);
  const StatDescriptor md(mean, input, n), rd(rstd, input, n);
  const auto wd = optionalDescriptor(weight);
  const auto gwd = optionalDescriptor(grad_weight), gbd = optionalDescriptor(grad_bias);
  checkOps(mluopLayerNormBackward(handle(), static_cast<int>(n), god.get(), grad_out.data_ptr(), xd.get(),
                                  input.data_ptr(), md.get(), mean.data_ptr(), rd.get(), rstd.data_ptr(),
                                  descOf(wd), dataOf(weight), gid.get(), grad_input.data_ptr(), descOf(gwd),
                                  dataOf(grad_weight), descOf(gbd), dataOf(grad_bias)),
           "layer_norm_backward");
  return {output_mask[0] ? grad_input : Tensor(), grad_weight, grad_bias};
}

// ---- activations ----

// approximate is "none" (the exact erf form) or "tanh"; anything else is PyTorch's error, on the CPU.
std::optional<bool> geluTanh(c10::string_view approximate) {
  if (approximate == "none") return false;
  if (approximate == "tanh") return true;
  return std::nullopt;
}

void geluInto(const Tensor& x, bool tanh, const Tensor& y) {
  const c10::DeviceGuard guard(x.device());
  const Descriptor xd(x), yd(y);
  checkOps(mluopGelu(handle(), tanh, xd.get(), x.data_ptr(), yd.get(), y.data_ptr()), "gelu");
}

Tensor gelu(const Tensor& x, c10::string_view approximate) {
  const auto tanh = geluTanh(approximate);
  if (!isMluFloating(x) || !tanh) return viaCpu<at::_ops::gelu>(x, approximate);
  Tensor y = newLike(x);
  geluInto(x, *tanh, y);
  return y;
}

Tensor& geluInPlace(Tensor& x, c10::string_view approximate) {
  const auto tanh = geluTanh(approximate);
  if (!isMluFloating(x) || !tanh) return viaCpu<at::_ops::gelu_>(x, approximate);
  geluInto(x, *tanh, x);
  return x;
}

Tensor geluBackward(const Tensor& grad_output, const Tensor& x, c10::string_view approximate) {
  const auto tanh = geluTanh(approximate);
  if (!isMluFloating(x) || !tanh || !isMlu(grad_output) || grad_output.scalar_type() != x.scalar_type() ||
      grad_output.sizes() != x.sizes()) {
    return viaCpu<at::_ops::gelu_backward>(grad_output, x, approximate);
  }
  const c10::DeviceGuard guard(x.device());
  Tensor grad_input = newLike(x);
  const Descriptor gd(grad_output), xd(x), gid(grad_input);
  checkOps(mluopGeluBackward(handle(), *tanh, gd.get(), grad_output.data_ptr(), xd.get(), x.data_ptr(),
                             gid.get(), grad_input.data_ptr()),
           "gelu_backward");
  return grad_input;
}

// hardtanh (ReLU6 is hardtanh(0, 6)): a clamp.
Tensor hardtanh(const Tensor& x, const at::Scalar& min, const at::Scalar& max) {
  if (!isMluFloating(x)) return viaCpu<at::_ops::hardtanh>(x, min, max);
  const c10::DeviceGuard guard(x.device());
  Tensor y = newLike(x);
  clampInto(x, min.toDouble(), max.toDouble(), y);
  return y;
}

Tensor& hardtanhInPlace(Tensor& x, const at::Scalar& min, const at::Scalar& max) {
  if (!isMluFloating(x)) return viaCpu<at::_ops::hardtanh_>(x, min, max);
  const c10::DeviceGuard guard(x.device());
  clampInto(x, min.toDouble(), max.toDouble(), x);
  return x;
}

// The gradient passes where min < x < max, else 0 (PyTorch's rule at the bounds): x <= min or x >= max
// picks a zero.
Tensor hardtanhBackward(const Tensor& grad_output, const Tensor& x, const at::Scalar& min,
                        const at::Scalar& max) {
  if (!isMluFloating(x) || !isMlu(grad_output) || grad_output.scalar_type() != x.scalar_type() ||
      grad_output.sizes() != x.sizes()) {
    return viaCpu<at::_ops::hardtanh_backward>(grad_output, x, min, max);
  }
  const c10::DeviceGuard guard(x.device());
  const Tensor lo = deviceScalar(x, min.toDouble(), x.scalar_type());
  const Tensor hi = deviceScalar(x, max.toDouble(), x.scalar_type());
  Tensor below = newTensor(x, x.sizes(), at::kBool), above = newTensor(x, x.sizes(), at::kBool);
  {
    const Descriptor xd(x), lod(lo), hid(hi), bd(below), ad(above);
    checkOps(mluopLe(handle(), xd.get(), x.data_ptr(), lod.get(), lo.data_ptr(), bd.get(), below.data_ptr()),
             "le");
    checkOps(mluopGe(handle(), xd.get(), x.data_ptr(), hid.get(), hi.data_ptr(), ad.get(), above.data_ptr()),
             "ge");
    checkOps(mluopLogicalOr(handle(), bd.get(), below.data_ptr(), ad.get(), above.data_ptr(), bd.get(),
                            below.data_ptr()),
             "logical_or");
  }
  Tensor grad_input = newLike(x);
  whereInto(below, deviceScalar(x, 0.0, x.scalar_type()), grad_output, grad_input);
  return grad_input;
}

// MobileNetV3's hardsigmoid and hardswish, each one kernel-library op forward and one backward.
bool backwardOk(const Tensor& grad_output, const Tensor& x) {
  return isMluFloating(x) && isMlu(grad_output) && grad_output.scalar_type() == x.scalar_type() &&
         grad_output.sizes() == x.sizes();
}

#define TORCH_MLU_HARD_ACTIVATION(op, Fn, BackwardFnName)                                    \
  Tensor op(const Tensor& x) {                                                               \
    if (!isMluFloating(x)) return viaCpu<at::_ops::op>(x);                                   \
    Tensor y = newLike(x);                                                                   \
    unaryInto(Fn, #op, x, y);                                                                \
    return y;                                                                                \
  }                                                                                          \
  Tensor& op##InPlace(Tensor& x) {                                                           \
    if (!isMluFloating(x)) return viaCpu<at::_ops::op##_>(x);                                \
    unaryInto(Fn, #op, x, x);                                                                \
    return x;                                                                                \
  }                                                                                          \
  Tensor& op##Out(const Tensor& x, Tensor& out) {                                            \
    if (!isMluFloating(x) || !isMlu(out)) return viaCpu<at::_ops::op##_out>(x, out);         \
    return intoOut((op)(x), out);                                                            \
  }                                                                                          \
  Tensor op##Backward(const Tensor& grad_output, const Tensor& x) {                          \
    if (!backwardOk(grad_output, x)) return viaCpu<at::_ops::op##_backward>(grad_output, x); \
    return unaryBackward(BackwardFnName, #op "_backward", grad_output, x);                   \
  }
TORCH_MLU_HARD_ACTIVATION(hardsigmoid, mluopHardsigmoid, mluopHardsigmoidBackward)
TORCH_MLU_HARD_ACTIVATION(hardswish, mluopHardswish, mluopHardswishBackward)
#undef TORCH_MLU_HARD_ACTIVATION

Tensor& hardsigmoidBackwardOut(const Tensor& grad_output, const Tensor& x, Tensor& grad_input) {
  if (!backwardOk(grad_output, x) || !isMlu(grad_input))
    return viaCpu<at::_ops::hardsigmoid_backward_grad_input>(grad_output, x, grad_input);
  return intoOut(hardsigmoidBackward(grad_output, x), grad_input);
}

// ---- pooling ----

std::vector<int64_t> avgPoolOutputSizes(const Tensor& x, const std::array<int, 2>& k,
                                        const std::array<int, 2>& s, const std::array<int, 2>& p) {
  std::vector<int64_t> sizes = x.sizes().vec();
  for (int i = 0; i < 2; ++i) {
    const int64_t in = x.size(x.dim() - 2 + i);
    sizes[x.dim() - 2 + i] = (in + 2 * p[i] - k[i]) / s[i] + 1;
  }
  return sizes;
}

Tensor avgPool2d(const Tensor& x, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                 at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                 c10::optional<int64_t> divisor_override) {
  const auto k = intPair(kernel_size, kernel_size), s = intPair(stride, kernel_size),
             p = intPair(padding, {0});
  if (!isMluFloating(x) || (x.dim() != 3 && x.dim() != 4) || ceil_mode || divisor_override.has_value() ||
      !k || !s || !p) {
    return viaCpu<at::_ops::avg_pool2d>(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                        divisor_override);
  }
  const c10::DeviceGuard guard(x.device());
  Tensor y =
      at::empty(avgPoolOutputSizes(x, *k, *s, *p), x.options().memory_format(x.suggest_memory_format()));
  const Descriptor xd(x), yd(y);
  checkOps(mluopAvgPool2dForward(handle(), k->data(), 2, s->data(), 2, p->data(), 2, count_include_pad,
                                 xd.get(), x.data_ptr(), yd.get(), y.data_ptr()),
           "avg_pool2d_forward");
  return y;
}

Tensor avgPool2dBackward(const Tensor& grad_output, const Tensor& x, at::IntArrayRef kernel_size,
                         at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                         bool count_include_pad, c10::optional<int64_t> divisor_override) {
  const auto k = intPair(kernel_size, kernel_size), s = intPair(stride, kernel_size),
             p = intPair(padding, {0});
  if (!isMluFloating(x) || (x.dim() != 3 && x.dim() != 4) || ceil_mode || divisor_override.has_value() ||
      !k || !s || !p || !isMlu(grad_output) || grad_output.scalar_type() != x.scalar_type()) {
    return viaCpu<at::_ops::avg_pool2d_backward>(grad_output, x, kernel_size, stride, padding, ceil_mode,
                                                 count_include_pad, divisor_override);
  }
  const c10::DeviceGuard guard(x.device());
  Tensor grad_input = newLike(x);
  const Descriptor god(grad_output), gid(grad_input);
  checkOps(mluopAvgPool2dBackward(handle(), k->data(), 2, s->data(), 2, p->data(), 2, count_include_pad,
                                  god.get(), grad_output.data_ptr(), gid.get(), grad_input.data_ptr()),
           "avg_pool2d_backward");
  return grad_input;
}

Tensor adaptiveAvgPool2d(const Tensor& x, c10::SymIntArrayRef output_size) {
  const at::IntArrayRef out = c10::asIntArrayRefSlow(output_size);
  if (!isMluFloating(x) || (x.dim() != 3 && x.dim() != 4) || out.size() != 2 || out[0] <= 0 || out[1] <= 0) {
    return viaCpuSymint<at::_ops::_adaptive_avg_pool2d>(x, output_size);
  }
  const c10::DeviceGuard guard(x.device());
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes[x.dim() - 2] = out[0];
  sizes[x.dim() - 1] = out[1];
  Tensor y = at::empty(sizes, x.options().memory_format(x.suggest_memory_format()));
  const Descriptor xd(x), yd(y);
  checkOps(mluopAdaptiveAvgPool2dForward(handle(), xd.get(), x.data_ptr(), yd.get(), y.data_ptr()),
           "adaptive_avg_pool2d_forward");
  return y;
}

Tensor adaptiveAvgPool2dBackward(const Tensor& grad_output, const Tensor& x) {
  if (!isMluFloating(x) || (x.dim() != 3 && x.dim() != 4) || !isMlu(grad_output) ||
      grad_output.scalar_type() != x.scalar_type()) {
    return viaCpu<at::_ops::_adaptive_avg_pool2d_backward>(grad_output, x);
  }
  const c10::DeviceGuard guard(x.device());
  Tensor grad_input = newLike(x);
  const Descriptor god(grad_output), gid(grad_input);
  checkOps(mluopAdaptiveAvgPool2dBackward(handle(), god.get(), grad_output.data_ptr(), gid.get(),
                                          grad_input.data_ptr()),
           "adaptive_avg_pool2d_backward");
  return grad_input;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", TORCH_FN(nativeBatchNorm));
  m.impl("native_batch_norm_backward", TORCH_FN(nativeBatchNormBackward));
  m.impl("native_layer_norm", TORCH_FN(nativeLayerNorm));
  m.impl("native_layer_norm_backward", TORCH_FN(nativeLayerNormBackward));
  m.impl("gelu", TORCH_FN(gelu));
  m.impl("gelu_", TORCH_FN(geluInPlace));
  m.impl("gelu_backward", TORCH_FN(geluBackward));
  m.impl("hardtanh", TORCH_FN(hardtanh));
  m.impl("hardtanh_", TORCH_FN(hardtanhInPlace));
  m.impl("hardtanh_backward", TORCH_FN(hardtanhBackward));
  m.impl("hardsigmoid", TORCH_FN(hardsigmoid));
  m.impl("hardsigmoid_", TORCH_FN(hardsigmoidInPlace));
  m.impl("hardsigmoid.out", TORCH_FN(hardsigmoidOut));
  m.impl("hardsigmoid_backward", TORCH_FN(hardsigmoidBackward));
  m.impl("hardsigmoid_backward.grad_input", TORCH_FN(hardsigmoidBackwardOut));
  m.impl("hardswish", TORCH_FN(hardswish));
  m.impl("hardswish_", TORCH_FN(hardswishInPlace));
  m.impl("hardswish.out", TORCH_FN(hardswishOut));
  m.impl("hardswish_backward", TORCH_FN(hardswishBackward));
  m.impl("avg_pool2d", TORCH_FN(avgPool2d));
  m.impl("avg_pool2d_backward", TORCH_FN(avgPool2dBackward));
  m.impl("_adaptive_avg_pool2d", TORCH_FN(adaptiveAvgPool2d));
  m.impl("_adaptive_avg_pool2d_backward", TORCH_FN(adaptiveAvgPool2dBackward));
}

}  // namespace
}  // namespace torch_mlu
