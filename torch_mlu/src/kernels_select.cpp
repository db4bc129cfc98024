// kernels_select.cpp — the native ATen kernels that compare, mask, select and bound: comparisons with
// tensors and scalars, where, masked_fill, clamp, maximum/minimum, reciprocal, norms (the path of
// clip_grad_norm_), and the common forms of advanced indexing (one index tensor; a boolean mask written
// with a value). Each is one or a few calls of the kernel library; other forms run on the CPU through the
// counting fallback.
#include <ATen/ATen.h>
#include <ATen/ops/_index_put_impl_ops.h>
#include <ATen/ops/clamp_max_ops.h>
#include <ATen/ops/clamp_min_ops.h>
#include <ATen/ops/clamp_ops.h>
#include <ATen/ops/eq_ops.h>
#include <ATen/ops/ge_ops.h>
#include <ATen/ops/gt_ops.h>
#include <ATen/ops/index_ops.h>
#include <ATen/ops/isnan_ops.h>
#include <ATen/ops/le_ops.h>
#include <ATen/ops/linalg_vector_norm_ops.h>
#include <ATen/ops/logical_and_ops.h>
#include <ATen/ops/logical_not_ops.h>
#include <ATen/ops/logical_or_ops.h>
#include <ATen/ops/logical_xor_ops.h>
#include <ATen/ops/lt_ops.h>
#include <ATen/ops/masked_fill_ops.h>
#include <ATen/ops/maximum_ops.h>
#include <ATen/ops/minimum_ops.h>
#include <ATen/ops/ne_ops.h>
#include <ATen/ops/norm_ops.h>
#include <ATen/ops/reciprocal_ops.h>
#include <ATen/ops/where_ops.h>
#include <torch/library.h>

#include <cmath>
#include <optional>
#include <vector>

#include "fallback.h"
#include "kernel_util.h"
#include "mlu_context.h"

namespace torch_mlu {
namespace {

using at::Tensor;
using namespace kernels;  // NOLINT(google-build-using-namespace): the shared kernel helpers

using BinaryFn = mluopStatus_t (*)(mluopHandle_t, const mluopTensorDescriptor_t, const void*,
                                   const mluopTensorDescriptor_t, const void*, const mluopTensorDescriptor_t,
                                   void*);

void binaryInto(BinaryFn fn, const char* name, const Tensor& a, const Tensor& b, const Tensor& c) {
  const Descriptor ad(a), bd(b), cd(c);
  checkOps(fn(handle(), ad.get(), a.data_ptr(), bd.get(), b.data_ptr(), cd.get(), c.data_ptr()), name);
}

// Whether a Python number can stand for itself in a tensor of x's dtype (no type promotion): any number
// for a floating x, whole numbers for an integer x; never for bool.
bool scalarFits(const Tensor& x, const at::Scalar& s) {
  if (s.isComplex() || x.scalar_type() == at::kBool) return false;
  if (isFloating(x)) return true;
  if (!toMluDtype(x.scalar_type())) return false;
  if (s.isIntegral(false)) return true;
  const double v = s.toDouble();
  return std::isfinite(v) && std::trunc(v) == v && std::fabs(v) < 9007199254740992.0;
}

// ---- comparisons: a bool tensor of the broadcast shape ----

// a op b with b a device tensor of a's dtype or a host scalar; nothing when the kernel library cannot.
std::optional<Tensor> compare(BinaryFn fn, const char* name, const Tensor& a, const Tensor& b) {
  if (!isMlu(a) || !toMluDtype(a.scalar_type())) return std::nullopt;
  const c10::DeviceGuard guard(a.device());
  if (isHostScalar(b)) {
    const at::Scalar s = b.item();
    if (!scalarFits(a, s) || at::result_type(a, b) != a.scalar_type()) return std::nullopt;
    Tensor c = newTensor(a, a.sizes(), at::kBool);
    binaryInto(fn, name, a, deviceScalar(a, s.toDouble(), a.scalar_type()), c);
    return c;
  }
  if (!isMlu(b) || b.scalar_type() != a.scalar_type() || a.device() != b.device()) return std::nullopt;
  Tensor c = newTensor(a, at::infer_size(a.sizes(), b.sizes()), at::kBool);
  binaryInto(fn, name, a, b, c);
  return c;
}

std::optional<Tensor> compareScalar(BinaryFn fn, const char* name, const Tensor& a, const at::Scalar& s) {
  if (!isMlu(a) || !scalarFits(a, s)) return std::nullopt;
  const c10::DeviceGuard guard(a.device());
  Tensor c = newTensor(a, a.sizes(), at::kBool);
  binaryInto(fn, name, a, deviceScalar(a, s.toDouble(), a.scalar_type()), c);
  return c;
}

#define TORCH_MLU_COMPARE(op, Fn)                           \
  Tensor op##Tensor(const Tensor& a, const Tensor& b) {     \
    if (auto c = compare(Fn, #op, a, b)) return *c;         \
    return viaCpu<at::_ops::op##_Tensor>(a, b);             \
  }                                                         \
  Tensor op##Scalar(const Tensor& a, const at::Scalar& s) { \
    if (auto c = compareScalar(Fn, #op, a, s)) return *c;   \
    return viaCpu<at::_ops::op##_Scalar>(a, s);             \
  }
TORCH_MLU_COMPARE(eq, mluopEq)
TORCH_MLU_COMPARE(ne, mluopNe)
TORCH_MLU_COMPARE(lt, mluopLt)
TORCH_MLU_COMPARE(le, mluopLe)
TORCH_MLU_COMPARE(gt, mluopGt)
TORCH_MLU_COMPARE(ge, mluopGe)
#undef TORCH_MLU_COMPARE

// ---- logical ops and isnan: bool results ----

// a op b for device tensors of one dtype (or b a host scalar), into a bool tensor.
#define TORCH_MLU_LOGICAL(op, Fn)                                  \
  Tensor& op##Out(const Tensor& a, const Tensor& b, Tensor& out) { \
    if (auto c = compare(Fn, #op, a, b)) return intoOut(*c, out);  \
    return viaCpu<at::_ops::op##_out>(a, b, out);                  \
  }
TORCH_MLU_LOGICAL(logical_and, mluopLogicalAnd)
TORCH_MLU_LOGICAL(logical_or, mluopLogicalOr)
TORCH_MLU_LOGICAL(logical_xor, mluopLogicalXor)
#undef TORCH_MLU_LOGICAL

Tensor& logicalNotOut(const Tensor& x, Tensor& out) {
  if (!isMlu(x) || !toMluDtype(x.scalar_type())) return viaCpu<at::_ops::logical_not_out>(x, out);
  const c10::DeviceGuard guard(x.device());
  Tensor y = newTensor(x, x.sizes(), at::kBool);
  const Descriptor xd(x), yd(y);
  checkOps(mluopLogicalNot(handle(), xd.get(), x.data_ptr(), yd.get(), y.data_ptr()), "logical_not");
  return intoOut(y, out);
}

// NaN is the one value not equal to itself: isnan(x) = x != x.
Tensor isnan(const Tensor& x) {
  if (!isMlu(x) || !toMluDtype(x.scalar_type())) return viaCpu<at::_ops::isnan>(x);
  if (!isFloating(x)) return at::zeros(x.sizes(), x.options().dtype(at::kBool));
  const c10::DeviceGuard guard(x.device());
  Tensor y = newTensor(x, x.sizes(), at::kBool);
  binaryInto(mluopNe, "ne", x, x, y);
  return y;
}

// ---- where and masked_fill ----

bool isMask(const Tensor& m) {
  return isMlu(m) && (m.scalar_type() == at::kBool || m.scalar_type() == at::kByte);
}

// A value operand as a device tensor of `dtype`: itself, or a host scalar filled in on the device.
std::optional<Tensor> operand(const Tensor& v, const Tensor& like, at::ScalarType dtype) {
  if (isMlu(v) && v.scalar_type() == dtype && v.device() == like.device()) return v;
  if (isHostScalar(v) && scalarFits(like, v.item())) return deviceScalar(like, v.item().toDouble(), dtype);
  return std::nullopt;
}

Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other) {
  const Tensor& device_side = isMlu(self) ? self : other;
  const at::ScalarType dtype = at::result_type(self, other);
  if (isMask(condition) && isMlu(device_side) && toMluDtype(dtype) && device_side.scalar_type() == dtype) {
    const c10::DeviceGuard guard(condition.device());
    const auto a = operand(self, device_side, dtype), b = operand(other, device_side, dtype);
    if (a && b) {
      Tensor y = newTensor(device_side,
                           at::infer_size(condition.sizes(), at::infer_size(a->sizes(), b->sizes())), dtype);
      whereInto(condition, *a, *b, y);
      return y;
    }
  }
  return viaCpu<at::_ops::where_self>(condition, self, other);
}

// self = mask ? value : self, mask broadcast to self's shape.
bool maskedFill(const Tensor& self, const Tensor& mask, const Tensor& value) {
  if (!isMlu(self) || !toMluDtype(self.scalar_type()) || !isMask(mask) ||
      at::infer_size(self.sizes(), mask.sizes()) != self.sizes()) {
    return false;
  }
  const c10::DeviceGuard guard(self.device());
  if (!isMlu(value) && !isHostScalar(value)) return false;
  const auto v = operand(value, self, self.scalar_type());
  if (!v || v->dim() != 0) return false;
  whereInto(mask, *v, self, self);
  return true;
}

Tensor& maskedFillScalar(Tensor& self, const Tensor& mask, const at::Scalar& value) {
  if (isMlu(self) && scalarFits(self, value) &&
      maskedFill(self, mask, at::scalar_tensor(value, at::device(at::kCPU).dtype(self.scalar_type())))) {
    return self;
  }
  return viaCpu<at::_ops::masked_fill__Scalar>(self, mask, value);
}

Tensor& maskedFillTensor(Tensor& self, const Tensor& mask, const Tensor& value) {
  if (value.dim() == 0 && maskedFill(self, mask, value)) return self;
  return viaCpu<at::_ops::masked_fill__Tensor>(self, mask, value);
}

// ---- clamp, maximum, minimum, reciprocal ----

bool clampOk(const Tensor& x, const c10::optional<at::Scalar>& min, const c10::optional<at::Scalar>& max) {
  if (!isMlu(x) || (!min.has_value() && !max.has_value())) return false;
  return (!min.has_value() || scalarFits(x, *min)) && (!max.has_value() || scalarFits(x, *max));
}

c10::optional<double> bound(const c10::optional<at::Scalar>& s) {
  return s.has_value() ? c10::optional<double>(s->toDouble()) : c10::nullopt;
}

Tensor clampScalars(const Tensor& x, const c10::optional<at::Scalar>& min,
                    const c10::optional<at::Scalar>& max) {
  if (!clampOk(x, min, max)) return viaCpu<at::_ops::clamp>(x, min, max);
  const c10::DeviceGuard guard(x.device());
  Tensor y = at::empty_like(x, x.suggest_memory_format());
  clampInto(x, bound(min), bound(max), y);
  return y;
}
Tensor& clampInPlace(Tensor& x, const c10::optional<at::Scalar>& min, const c10::optional<at::Scalar>& max) {
  if (!clampOk(x, min, max)) return viaCpu<at::_ops::clamp_>(x, min, max);
  const c10::DeviceGuard guard(x.device());
  clampInto(x, bound(min), bound(max), x);
  return x;
}
Tensor clampMin(const Tensor& x, const at::Scalar& min) {
  if (!clampOk(x, min, c10::nullopt)) return viaCpu<at::_ops::clamp_min>(x, min);
  return clampScalars(x, min, c10::nullopt);
}
Tensor& clampMinInPlace(Tensor& x, const at::Scalar& min) {
  if (!clampOk(x, min, c10::nullopt)) return viaCpu<at::_ops::clamp_min_>(x, min);
  return clampInPlace(x, min, c10::nullopt);
}
Tensor clampMax(const Tensor& x, const at::Scalar& max) {
  if (!clampOk(x, c10::nullopt, max)) return viaCpu<at::_ops::clamp_max>(x, max);
  return clampScalars(x, c10::nullopt, max);
}
Tensor& clampMaxInPlace(Tensor& x, const at::Scalar& max) {
  if (!clampOk(x, c10::nullopt, max)) return viaCpu<at::_ops::clamp_max_>(x, max);
  return clampInPlace(x, c10::nullopt, max);
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  if (!isMlu(a) || !isMlu(b) || a.scalar_type() != b.scalar_type() || !toMluDtype(a.scalar_type()))
    return viaCpu<at::_ops::maximum>(a, b);
  const c10::DeviceGuard guard(a.device());
  Tensor c = newTensor(a, at::infer_size(a.sizes(), b.sizes()), a.scalar_type());
  binaryInto(mluopMaximum, "maximum", a, b, c);
  return c;
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  if (!isMlu(a) || !isMlu(b) || a.scalar_type() != b.scalar_type() || !toMluDtype(a.scalar_type()))
    return viaCpu<at::_ops::minimum>(a, b);
  const c10::DeviceGuard guard(a.device());
  Tensor c = newTensor(a, at::infer_size(a.sizes(), b.sizes()), a.scalar_type());
  binaryInto(mluopMinimum, "minimum", a, b, c);
  return c;
}

void reciprocalInto(const Tensor& x, const Tensor& y) {
  const c10::DeviceGuard guard(x.device());
  const Descriptor xd(x), yd(y);
  checkOps(mluopReciprocal(handle(), xd.get(), x.data_ptr(), yd.get(), y.data_ptr()), "reciprocal");
}
Tensor reciprocal(const Tensor& x) {
  if (!isMluFloating(x)) return viaCpu<at::_ops::reciprocal>(x);
  Tensor y = at::empty_like(x, x.suggest_memory_format());
  reciprocalInto(x, y);
  return y;
}
Tensor& reciprocalInPlace(Tensor& x) {
  if (!isMluFloating(x)) return viaCpu<at::_ops::reciprocal_>(x);
  reciprocalInto(x, x);
  return x;
}

// ---- norms ----

// The p-norm of x over dims (all when empty), or nothing when the kernel library cannot take it.
std::optional<Tensor> pnorm(const Tensor& x, double p, at::OptionalIntArrayRef dims, bool keepdim) {
  if (!isMluFloating(x) || x.dim() == 0 || std::isnan(p)) return std::nullopt;
  const c10::DeviceGuard guard(x.device());
  const auto d = reductionDims(dims, x.dim());
  Tensor y = newTensor(x, reducedSizes(x, d, keepdim), x.scalar_type());
  const Descriptor xd(x), yd(y);
  checkOps(mluopReduceNorm(handle(), p, d.data(), static_cast<int>(d.size()), keepdim, xd.get(), x.data_ptr(),
                           yd.get(), y.data_ptr()),
           "norm");
  return y;
}

Tensor normScalar(const Tensor& x, const at::Scalar& p) {
  if (auto y = pnorm(x, p.toDouble(), c10::nullopt, false)) return *y;
  return viaCpu<at::_ops::norm_Scalar>(x, p);
}

Tensor normDims(const Tensor& x, const c10::optional<at::Scalar>& p, at::IntArrayRef dims, bool keepdim) {
  if (auto y = pnorm(x, p.has_value() ? p->toDouble() : 2.0, dims, keepdim)) return *y;
  return viaCpu<at::_ops::norm_ScalarOpt_dim>(x, p, dims, keepdim);
}

Tensor linalgVectorNorm(const Tensor& x, const at::Scalar& ord, at::OptionalIntArrayRef dims, bool keepdim,
                        c10::optional<at::ScalarType> dtype) {
  if (!dtype.has_value() || *dtype == x.scalar_type()) {
    if (auto y = pnorm(x, ord.toDouble(), dims, keepdim)) return *y;
  }
  return viaCpu<at::_ops::linalg_vector_norm>(x, ord, dims, keepdim, dtype);
}

// ---- advanced indexing ----

// The one index tensor of `indices` and its dim, when every other entry is absent.
std::optional<std::pair<Tensor, int64_t>> singleIndex(const c10::List<c10::optional<Tensor>>& indices) {
  std::optional<std::pair<Tensor, int64_t>> found;
  for (size_t i = 0; i < indices.size(); ++i) {
    const c10::optional<Tensor> t = indices.get(i);
    if (!t.has_value() || !t->defined()) continue;
    if (found) return std::nullopt;
    found.emplace(*t, static_cast<int64_t>(i));
  }
  return found;
}

// index < 0 ? index + size : index, flattened, on x's device (an index counts from the end when negative).
Tensor wrappedIndex(const Tensor& x, const Tensor& index, int64_t d) {
  Tensor idx = index.device() == x.device() ? index.reshape({-1}) : index.reshape({-1}).to(x.device());
  Tensor negative = newTensor(idx, idx.sizes(), at::kBool);
  binaryInto(mluopLt, "lt", idx, deviceScalar(idx, 0.0, at::kLong), negative);
  Tensor shifted = newTensor(idx);
  addScalarInto(idx, static_cast<double>(x.size(d)), shifted);
  Tensor wrapped = newTensor(idx);
  whereInto(negative, shifted, idx, wrapped);
  return wrapped;
}

// x's sizes with dim d replaced by `middle`.
std::vector<int64_t> sizesAround(const Tensor& x, int64_t d, at::IntArrayRef middle) {
  std::vector<int64_t> out(x.sizes().begin(), x.sizes().begin() + d);
  out.insert(out.end(), middle.begin(), middle.end());
  out.insert(out.end(), x.sizes().begin() + d + 1, x.sizes().end());
  return out;
}

// x[..., index, ...] along dim d for an int64 index of any shape: one index_select of the wrapped index.
Tensor indexAlong(const Tensor& x, const Tensor& index, int64_t d) {
  const Tensor wrapped = wrappedIndex(x, index, d);
  Tensor y = newTensor(x, sizesAround(x, d, {wrapped.numel()}), x.scalar_type());
  const Descriptor xd(x), id(wrapped), yd(y);
  checkOps(mluopIndexSelect(handle(), static_cast<int>(d), xd.get(), x.data_ptr(), id.get(),
                            wrapped.data_ptr(), yd.get(), y.data_ptr()),
           "index_select");
  return y.view(sizesAround(x, d, index.sizes()));
}

// x[..., index, ...] += values along dim d (the backward of indexAlong; repeated indices add up): one
// scatter_add of values, in the flattened index's shape, with the index broadcast over the other dims.
void indexAddAlong(const Tensor& x, const Tensor& index, int64_t d, const Tensor& values) {
  const Tensor wrapped = wrappedIndex(x, index, d);
  const std::vector<int64_t> flat = sizesAround(x, d, {wrapped.numel()});
  const Tensor src = castTo(values, x.scalar_type()).expand(sizesAround(x, d, index.sizes())).reshape(flat);
  std::vector<int64_t> index_sizes(static_cast<size_t>(x.dim()), 1);
  index_sizes[static_cast<size_t>(d)] = wrapped.numel();
  const Tensor idx = wrapped.view(index_sizes).expand(flat);
  const Descriptor xd(x), id(idx), sd(src);
  checkOps(mluopScatterAdd(handle(), static_cast<int>(d), xd.get(), x.data_ptr(), id.get(), idx.data_ptr(),
                           sd.get(), src.data_ptr()),
           "scatter_add");
}

Tensor index(const Tensor& self, const c10::List<c10::optional<Tensor>>& indices) {
  const auto single = singleIndex(indices);
  if (isMlu(self) && toMluDtype(self.scalar_type()) && self.dim() > 0 && single &&
      single->second < self.dim() && single->first.scalar_type() == at::kLong &&
      (isMlu(single->first) || single->first.device().is_cpu())) {
    const c10::DeviceGuard guard(self.device());
    return indexAlong(self, single->first, single->second);
  }
  return viaCpu<at::_ops::index_Tensor>(self, indices);
}

// Two forms natively: self[mask] = value with a boolean mask of self's shape (top-k sampling's
// logits[logits < v] = -inf), a masked fill; and self[..., index, ...] += values (index's backward).
Tensor& indexPut(Tensor& self, const c10::List<c10::optional<Tensor>>& indices, const Tensor& values,
                 bool accumulate, bool unsafe) {
  const auto single = singleIndex(indices);
  if (!accumulate && single && single->second == 0 && single->first.scalar_type() == at::kBool &&
      single->first.sizes() == self.sizes() && values.numel() == 1 &&
      maskedFill(self, single->first, values.dim() == 0 ? values : values.reshape({}))) {
    return self;
  }
  if (accumulate && single && isMlu(self) && toMluDtype(self.scalar_type()) &&
      self.scalar_type() != at::kBool && self.dim() > 0 && single->second < self.dim() &&
      single->first.scalar_type() == at::kLong && isMlu(values) &&
      at::result_type(self, values) == self.scalar_type() &&
      (isMlu(single->first) || single->first.device().is_cpu())) {
    const c10::DeviceGuard guard(self.device());
    indexAddAlong(self, single->first, single->second, values);
    return self;
  }
  return viaCpu<at::_ops::_index_put_impl_>(self, indices, values, accumulate, unsafe);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("eq.Tensor", TORCH_FN(eqTensor));
  m.impl("eq.Scalar", TORCH_FN(eqScalar));
  m.impl("ne.Tensor", TORCH_FN(neTensor));
  m.impl("ne.Scalar", TORCH_FN(neScalar));
  m.impl("lt.Tensor", TORCH_FN(ltTensor));
  m.impl("lt.Scalar", TORCH_FN(ltScalar));
  m.impl("le.Tensor", TORCH_FN(leTensor));
  m.impl("le.Scalar", TORCH_FN(leScalar));
  m.impl("gt.Tensor", TORCH_FN(gtTensor));
  m.impl("gt.Scalar", TORCH_FN(gtScalar));
  m.impl("ge.Tensor", TORCH_FN(geTensor));
  m.impl("ge.Scalar", TORCH_FN(geScalar));
  m.impl("where.self", TORCH_FN(where));
  m.impl("masked_fill_.Scalar", TORCH_FN(maskedFillScalar));
  m.impl("masked_fill_.Tensor", TORCH_FN(maskedFillTensor));
  m.impl("clamp", TORCH_FN(clampScalars));
  m.impl("clamp_", TORCH_FN(clampInPlace));
  m.impl("clamp_min", TORCH_FN(clampMin));
  m.impl("clamp_min_", TORCH_FN(clampMinInPlace));
  m.impl("clamp_max", TORCH_FN(clampMax));
  m.impl("clamp_max_", TORCH_FN(clampMaxInPlace));
  m.impl("maximum", TORCH_FN(maximum));
  m.impl("minimum", TORCH_FN(minimum));
  m.impl("reciprocal", TORCH_FN(reciprocal));
  m.impl("reciprocal_", TORCH_FN(reciprocalInPlace));
  m.impl("norm.Scalar", TORCH_FN(normScalar));
  m.impl("norm.ScalarOpt_dim", TORCH_FN(normDims));
  m.impl("linalg_vector_norm", TORCH_FN(linalgVectorNorm));
  m.impl("logical_and.out", TORCH_FN(logical_andOut));
  m.impl("logical_or.out", TORCH_FN(logical_orOut));
  m.impl("logical_xor.out", TORCH_FN(logical_xorOut));
  m.impl("logical_not.out", TORCH_FN(logicalNotOut));
  m.impl("isnan", TORCH_FN(isnan));
  m.impl("index.Tensor", TORCH_FN(index));
  m.impl("_index_put_impl_", TORCH_FN(indexPut));
}

}  // namespace
}  // namespace torch_mlu
