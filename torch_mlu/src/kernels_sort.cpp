// kernels_sort.cpp — the native ATen kernels of sequences, sorting and sampling: arange, cumsum, sort,
// topk, exponential_ and multinomial (a language model's top-k sampling). Each is one or a few calls of
// the kernel library; arguments it cannot take run on the CPU through the counting fallback.
#include <ATen/ATen.h>
#include <ATen/ops/arange_ops.h>
#include <ATen/ops/cumsum_ops.h>
#include <ATen/ops/flip_ops.h>
#include <ATen/ops/multinomial_ops.h>
#include <ATen/ops/sort_ops.h>
#include <ATen/ops/topk_ops.h>
#include <torch/library.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "fallback.h"
#include "kernel_util.h"
#include "mlu_context.h"

namespace torch_mlu {
namespace {

using at::Tensor;
using namespace kernels;  // NOLINT(google-build-using-namespace): the shared kernel helpers

// An out= tensor given the result's sizes (PyTorch's out= ops resize a tensor of another size).
void resizeOut(const Tensor& out, at::IntArrayRef sizes) {
  if (out.sizes() != sizes) out.resize_(sizes);
}

bool sortable(const Tensor& x) {
  return isMlu(x) && toMluDtype(x.scalar_type()) && x.scalar_type() != at::kDouble;
}

// ---- arange ----

// PyTorch's length of arange(start, end, step), or -1 where PyTorch refuses the arguments (its CPU kernel
// then says why).
int64_t arangeLength(double start, double end, double step) {
  if (!std::isfinite(start) || !std::isfinite(end) || step == 0 || !std::isfinite(step)) return -1;
  if ((step > 0 && end < start) || (step < 0 && end > start)) return -1;
  return static_cast<int64_t>(std::ceil((end - start) / step));
}

Tensor& arangeOut(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, Tensor& out) {
  const int64_t n = arangeLength(start.toDouble(), end.toDouble(), step.toDouble());
  const bool integral = at::isIntegralType(out.scalar_type(), false);
  const bool whole =
      !integral || (start.isIntegral(false) && step.isIntegral(false)) ||
      (std::trunc(start.toDouble()) == start.toDouble() && std::trunc(step.toDouble()) == step.toDouble());
  if (!isMlu(out) || !toMluDtype(out.scalar_type()) || out.scalar_type() == at::kBool ||
      out.scalar_type() == at::kDouble || n < 0 || !whole) {
    return viaCpu<at::_ops::arange_start_out>(start, end, step, out);
  }
  const c10::DeviceGuard guard(out.device());
  resizeOut(out, {n});
  if (n == 0) return out;
  const Descriptor yd(out);
  checkOps(mluopArange(handle(), start.toDouble(), step.toDouble(), yd.get(), out.data_ptr()), "arange");
  return out;
}

// ---- cumsum ----

// The dtype of cumsum's result: dtype when given, else int64 for an integer or bool x, else x's.
at::ScalarType cumsumType(const Tensor& x, c10::optional<at::ScalarType> dtype) {
  if (dtype.has_value()) return *dtype;
  return at::isIntegralType(x.scalar_type(), true) ? at::kLong : x.scalar_type();
}

bool cumsumOk(const Tensor& x, at::ScalarType type) {
  return sortable(x) &&
         (type == x.scalar_type() ? x.scalar_type() != at::kBool
                                  : type == at::kLong && at::isIntegralType(x.scalar_type(), true));
}

void cumsumInto(const Tensor& x, int64_t dim, const Tensor& y) {
  const Descriptor xd(x), yd(y);
  checkOps(mluopCumsum(handle(), static_cast<int>(c10::maybe_wrap_dim(dim, std::max<int64_t>(x.dim(), 1))),
                       xd.get(), x.data_ptr(), yd.get(), y.data_ptr()),
           "cumsum");
}

Tensor cumsum(const Tensor& x, int64_t dim, c10::optional<at::ScalarType> dtype) {
  const at::ScalarType type = cumsumType(x, dtype);
  if (!cumsumOk(x, type)) return viaCpu<at::_ops::cumsum>(x, dim, dtype);
  const c10::DeviceGuard guard(x.device());
  Tensor y = newTensor(x, x.sizes(), type);
  cumsumInto(x, dim, y);
  return y;
}

Tensor& cumsumInPlace(Tensor& x, int64_t dim, c10::optional<at::ScalarType> dtype) {
  if (!cumsumOk(x, x.scalar_type()) || (dtype.has_value() && *dtype != x.scalar_type()))
    return viaCpu<at::_ops::cumsum_>(x, dim, dtype);
  const c10::DeviceGuard guard(x.device());
  cumsumInto(x, dim, x);
  return x;
}

Tensor& cumsumOut(const Tensor& x, int64_t dim, c10::optional<at::ScalarType> dtype, Tensor& out) {
  const at::ScalarType type = cumsumType(x, dtype);
  if (!cumsumOk(x, type) || out.scalar_type() != type || !isMlu(out))
    return viaCpu<at::_ops::cumsum_out>(x, dim, dtype, out);
  const c10::DeviceGuard guard(x.device());
  resizeOut(out, x.sizes());
  cumsumInto(x, dim, out);
  return out;
}

// ---- flip (cumsum's backward flips) ----

// Each flipped dim is one index_select with the indices size-1, ..., 0 (an arange).
Tensor flip(const Tensor& x, at::IntArrayRef dims) {
  if (!isMlu(x) || !toMluDtype(x.scalar_type()) || x.scalar_type() == at::kDouble)
    return viaCpu<at::_ops::flip>(x, dims);
  const c10::DeviceGuard guard(x.device());
  Tensor y = x;
  for (const int64_t dim : dims) {
    const int d = static_cast<int>(c10::maybe_wrap_dim(dim, x.dim()));
    const int64_t size = x.size(d);
    Tensor reversed = newTensor(x, {size}, at::kLong);
    Tensor flipped = newTensor(x, x.sizes(), x.scalar_type());
    if (size > 0) {
      const Descriptor rd(reversed), yd(y), fd(flipped);
      checkOps(mluopArange(handle(), static_cast<double>(size - 1), -1.0, rd.get(), reversed.data_ptr()),
               "arange");
      checkOps(mluopIndexSelect(handle(), d, yd.get(), y.data_ptr(), rd.get(), reversed.data_ptr(), fd.get(),
                                flipped.data_ptr()),
               "index_select");
    }
    y = flipped;
  }
  return y.is_same(x) ? x.clone() : y;
}

// ---- sort and topk ----

int wrapDim(int64_t dim, const Tensor& x) {
  return static_cast<int>(c10::maybe_wrap_dim(dim, std::max<int64_t>(x.dim(), 1)));
}

void sortInto(const Tensor& x, int64_t dim, bool descending, const Tensor& values, const Tensor& indices) {
  const Descriptor xd(x), vd(values), id(indices);
  checkOps(mluopSort(handle(), wrapDim(dim, x), descending, xd.get(), x.data_ptr(), vd.get(),
                     values.data_ptr(), id.get(), indices.data_ptr()),
           "sort");
}

// The kernel library's sort is stable: what PyTorch's unstable sort may return, and its stable one must.
std::tuple<Tensor, Tensor> sortStable(const Tensor& x, c10::optional<bool> stable, int64_t dim,
                                      bool descending) {
  if (!sortable(x)) return viaCpu<at::_ops::sort_stable>(x, stable, dim, descending);
  const c10::DeviceGuard guard(x.device());
  Tensor values = newTensor(x), indices = newTensor(x, x.sizes(), at::kLong);
  sortInto(x, dim, descending, values, indices);
  return {values, indices};
}

std::tuple<Tensor&, Tensor&> sortStableOut(const Tensor& x, c10::optional<bool> stable, int64_t dim,
                                           bool descending, Tensor& values, Tensor& indices) {
  if (!sortable(x) || !isMlu(values) || !isMlu(indices) || values.scalar_type() != x.scalar_type() ||
      indices.scalar_type() != at::kLong) {
    return viaCpu<at::_ops::sort_values_stable>(x, stable, dim, descending, values, indices);
  }
  const c10::DeviceGuard guard(x.device());
  resizeOut(values, x.sizes());
  resizeOut(indices, x.sizes());
  sortInto(x, dim, descending, values, indices);
  return {values, indices};
}

std::vector<int64_t> topkSizes(const Tensor& x, int64_t k, int64_t dim) {
  std::vector<int64_t> sizes = x.sizes().vec();
  if (!sizes.empty()) sizes[static_cast<size_t>(wrapDim(dim, x))] = k;
  return sizes;
}

bool topkOk(const Tensor& x, int64_t k, int64_t dim) {
  if (!sortable(x)) return false;
  const int64_t size = x.dim() == 0 ? 1 : x.size(wrapDim(dim, x));
  return k >= 0 && k <= size;
}

void topkInto(const Tensor& x, int64_t k, int64_t dim, bool largest, const Tensor& values,
              const Tensor& indices) {
  const Descriptor xd(x), vd(values), id(indices);
  checkOps(mluopTopk(handle(), k, wrapDim(dim, x), largest, xd.get(), x.data_ptr(), vd.get(),
                     values.data_ptr(), id.get(), indices.data_ptr()),
           "topk");
}

// The kernel library's topk is always sorted: what PyTorch's sorted=False may return too.
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  if (!topkOk(x, k, dim)) return viaCpu<at::_ops::topk>(x, k, dim, largest, sorted);
  const c10::DeviceGuard guard(x.device());
  const auto sizes = topkSizes(x, k, dim);
  Tensor values = newTensor(x, sizes, x.scalar_type()), indices = newTensor(x, sizes, at::kLong);
  topkInto(x, k, dim, largest, values, indices);
  return {values, indices};
}

std::tuple<Tensor&, Tensor&> topkOut(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted,
                                     Tensor& values, Tensor& indices) {
  if (!topkOk(x, k, dim) || !isMlu(values) || !isMlu(indices) || values.scalar_type() != x.scalar_type() ||
      indices.scalar_type() != at::kLong) {
    return viaCpu<at::_ops::topk_values>(x, k, dim, largest, sorted, values, indices);
  }
  const c10::DeviceGuard guard(x.device());
  const auto sizes = topkSizes(x, k, dim);
  resizeOut(values, sizes);
  resizeOut(indices, sizes);
  topkInto(x, k, dim, largest, values, indices);
  return {values, indices};
}

// ---- sampling ----

// Exponential numbers from PyTorch's CPU generator, drawn on the host as the CPU backend draws them (like
// bernoulli_, kernels.cpp), then copied to the device: a sampling on the MLU then picks what the same
// script picks on the CPU with the same seed.
Tensor& exponentialInPlace(Tensor& self, double lambd, c10::optional<at::Generator> generator) {
  Tensor host = at::empty(self.sizes(), self.options().device(at::kCPU));
  host.exponential_(lambd, generator);
  queueCopyFromHost(self, std::move(host));
  return self;
}

// PyTorch's own algorithm for draws without replacement (with replacement: on the CPU): the indices of the
// largest p / q with q ~ Exp(1) (the Gumbel-max trick), after its checks of the probabilities. With the
// exponential numbers drawn as the CPU's, the device picks the CPU's samples.
Tensor multinomial(const Tensor& self, int64_t num_samples, bool replacement,
                   c10::optional<at::Generator> generator) {
  if (!isMluFloating(self) || (self.dim() != 1 && self.dim() != 2) || num_samples <= 0 || replacement ||
      num_samples > self.size(-1)) {
    return viaCpu<at::_ops::multinomial>(self, num_samples, replacement, generator);
  }
  const c10::DeviceGuard guard(self.device());
  const Tensor bad = (self < 0).logical_or(self.isnan()).logical_or(self == INFINITY);
  TORCH_CHECK(!bad.sum().item<int64_t>(), "probability tensor contains either `inf`, `nan` or element < 0");
  TORCH_CHECK(!(self.sum(-1) == 0).sum().item<int64_t>(),
              "invalid multinomial distribution (sum of probabilities <= 0)");
  Tensor q = at::empty_like(self);
  exponentialInPlace(q, 1.0, generator);
  const Tensor ratio = self / q;
  if (num_samples == 1) return ratio.argmax(-1, true);
  return std::get<1>((topk)(ratio, num_samples, -1, true, true));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("arange.start_out", TORCH_FN(arangeOut));
  m.impl("cumsum", TORCH_FN(cumsum));
  m.impl("cumsum_", TORCH_FN(cumsumInPlace));
  m.impl("cumsum.out", TORCH_FN(cumsumOut));
  m.impl("flip", TORCH_FN(flip));
  m.impl("sort.stable", TORCH_FN(sortStable));
  m.impl("sort.values_stable", TORCH_FN(sortStableOut));
  m.impl("topk", TORCH_FN(topk));
  m.impl("topk.values", TORCH_FN(topkOut));
  m.impl("exponential_", TORCH_FN(exponentialInPlace));
  m.impl("multinomial", TORCH_FN(multinomial));
}

}  // namespace
}  // namespace torch_mlu
