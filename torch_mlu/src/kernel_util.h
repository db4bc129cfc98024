// kernel_util.h — what the native ATen kernels (kernels*.cpp) share: new device tensors, the tests of
// what the kernel library can take, reduction dims in its terms, and the kernel-library calls other
// kernels are built from (each one call the hook sees).
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <optional>
#include <vector>

#include "mlu_context.h"

namespace torch_mlu::kernels {

using at::Tensor;

// A new contiguous device tensor of these sizes and dtype, on the device of `like`.
inline Tensor newTensor(const Tensor& like, at::IntArrayRef sizes, at::ScalarType dtype) {
  return at::empty(sizes, like.options().dtype(dtype).memory_format(at::MemoryFormat::Contiguous));
}
inline Tensor newTensor(const Tensor& like) { return newTensor(like, like.sizes(), like.scalar_type()); }

// A 0-d tensor that came from a Python number or a CPU scalar tensor (PyTorch lets those mix with device
// tensors, as values).
inline bool isHostScalar(const Tensor& t) { return t.device().is_cpu() && t.dim() == 0; }

inline bool isFloating(const Tensor& t) {
  const auto s = t.scalar_type();
  return s == at::kFloat || s == at::kHalf || s == at::kBFloat16;
}

// A floating MLU tensor (the kernel library's float ops take float32, float16 and bfloat16).
inline bool isMluFloating(const Tensor& t) { return isMlu(t) && isFloating(t); }

inline void checkSameDevice(const Tensor& a, const Tensor& b, const char* op) {
  TORCH_CHECK(!b.defined() || isHostScalar(b) || a.device() == b.device(), "torch_mlu: ", op,
              ": expected all tensors to be on the same device, but found ", a.device(), " and ", b.device());
}

// dims normalized to [0, ndim) (PyTorch allows negative dims); all dims when `dims` is empty.
inline std::vector<int> reductionDims(at::OptionalIntArrayRef dims, int64_t ndim) {
  std::vector<int> out;
  if (!dims.has_value() || dims->empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(static_cast<int>(d));
    return out;
  }
  for (int64_t d : *dims) out.push_back(static_cast<int>(c10::maybe_wrap_dim(d, ndim)));
  return out;
}

inline std::vector<int64_t> reducedSizes(const Tensor& x, const std::vector<int>& dims, bool keepdim) {
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < x.dim(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced)
      sizes.push_back(x.size(d));
    else if (keepdim)
      sizes.push_back(1);
  }
  return sizes;
}

// A device tensor in dtype `type`: itself, or cast by a copy on the device.
inline Tensor castTo(const Tensor& t, at::ScalarType type) {
  return t.scalar_type() == type ? t : t.to(type);
}

// The result of a functional kernel written into an op's out= tensor (resized as PyTorch's out= ops do;
// the copy casts when out has another dtype).
inline Tensor& intoOut(const Tensor& result, Tensor& out) {
  if (out.sizes() != result.sizes()) out.resize_(result.sizes());
  out.copy_(result);
  return out;
}

// A 0-d device tensor of `dtype` holding `value` (one fill op), beside `like`.
inline Tensor deviceScalar(const Tensor& like, double value, at::ScalarType dtype) {
  Tensor t = newTensor(like, {}, dtype);
  const Descriptor d(t);
  checkOps(mluopFill(handle(), value, d.get(), t.data_ptr()), "fill");
  return t;
}

// y = cond ? a : b (broadcasting; y may be a or b itself, for the in-place forms).
inline void whereInto(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& y) {
  const Descriptor cd(cond), ad(a), bd(b), yd(y);
  checkOps(mluopWhere(handle(), cd.get(), cond.data_ptr(), ad.get(), a.data_ptr(), bd.get(), b.data_ptr(),
                      yd.get(), y.data_ptr()),
           "where");
}

// y = x * s and y = x + s (the kernel library's scalar ops; y may be x).
inline void mulScalarInto(const Tensor& x, double s, const Tensor& y) {
  const Descriptor xd(x), yd(y);
  checkOps(mluopMulScalar(handle(), xd.get(), x.data_ptr(), s, yd.get(), y.data_ptr()), "mul_scalar");
}
inline void addScalarInto(const Tensor& x, double s, const Tensor& y) {
  const Descriptor xd(x), yd(y);
  checkOps(mluopAddScalar(handle(), xd.get(), x.data_ptr(), s, yd.get(), y.data_ptr()), "add_scalar");
}

// y = clamp(x, min, max), either bound optional.
inline void clampInto(const Tensor& x, c10::optional<double> min, c10::optional<double> max,
                      const Tensor& y) {
  const Descriptor xd(x), yd(y);
  checkOps(mluopClamp(handle(), min.has_value(), min.value_or(0.0), max.has_value(), max.value_or(0.0),
                      xd.get(), x.data_ptr(), yd.get(), y.data_ptr()),
           "clamp");
}

// PyTorch's int[2] arguments (pooling's kernel, stride, padding, dilation) as two ints: one value means both
// dims, an empty list is `fallback` (stride defaults to the kernel); nothing for any other length.
inline std::optional<std::array<int, 2>> intPair(at::IntArrayRef v, at::IntArrayRef fallback) {
  if (v.empty()) v = fallback;
  if (v.size() == 1) return std::array<int, 2>{static_cast<int>(v[0]), static_cast<int>(v[0])};
  if (v.size() == 2) return std::array<int, 2>{static_cast<int>(v[0]), static_cast<int>(v[1])};
  return std::nullopt;
}

// The kernel library's unary ops (y = f(x)) and activation backward ops (grad_input from grad_output and
// the forward's input or output).
using UnaryFn = mluopStatus_t (*)(mluopHandle_t, const mluopTensorDescriptor_t, const void*,
                                  const mluopTensorDescriptor_t, void*);
using UnaryBackwardFn = mluopStatus_t (*)(mluopHandle_t, const mluopTensorDescriptor_t, const void*,
                                          const mluopTensorDescriptor_t, const void*,
                                          const mluopTensorDescriptor_t, void*);

inline void unaryInto(UnaryFn fn, const char* name, const Tensor& x, const Tensor& y) {
  const c10::DeviceGuard guard(x.device());
  const Descriptor xd(x), yd(y);
  checkOps(fn(handle(), xd.get(), x.data_ptr(), yd.get(), y.data_ptr()), name);
}

// grad_input (saved's shape and memory format) = fn(grad_output, saved).
inline Tensor unaryBackward(UnaryBackwardFn fn, const char* name, const Tensor& grad_output,
                            const Tensor& saved) {
  const c10::DeviceGuard guard(saved.device());
  Tensor grad_input = at::empty_like(saved, saved.suggest_memory_format());
  const Descriptor gd(grad_output), sd(saved), gid(grad_input);
  checkOps(fn(handle(), gd.get(), grad_output.data_ptr(), sd.get(), saved.data_ptr(), gid.get(),
              grad_input.data_ptr()),
           name);
  return grad_input;
}

}  // namespace torch_mlu::kernels
