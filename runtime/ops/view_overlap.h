// view_overlap.h — whether two strided tensor views share an element of memory, for the ops (attention,
// adamw) whose outputs must not alias their inputs or each other. Exact for views with equal element size
// and equal strides (e.g. q, k and v as interleaved [B, S, H, D] views of one fused buffer, which are
// disjoint although their byte ranges overlap); otherwise conservative (the byte ranges overlap).
// Header-only: runtime/ops is compiled into both the kernel library and the reference.
#pragma once

#include <mlu/op_args.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

namespace mlu::view_overlap {

namespace detail {

// One dim of the difference lattice: offset steps of `stride`, digit range [lo, hi].
struct Digit {
  std::int64_t stride;
  std::int64_t lo, hi;
};

// Whether delta = sum digit_d * stride_d has a solution with each digit in its range. The dims are sorted
// by stride, descending; reach_lo/reach_hi[d] bound what the dims after d can add.
inline bool solvable(const std::array<Digit, MLUOP_DIM_MAX>& digits, int n, int d, std::int64_t delta,
                     const std::array<std::int64_t, MLUOP_DIM_MAX + 1>& reach_lo,
                     const std::array<std::int64_t, MLUOP_DIM_MAX + 1>& reach_hi) {
  if (d == n) return delta == 0;
  const Digit& g = digits[static_cast<std::size_t>(d)];
  const std::int64_t rlo = reach_lo[static_cast<std::size_t>(d + 1)];
  const std::int64_t rhi = reach_hi[static_cast<std::size_t>(d + 1)];
  // delta - q * stride must lie in [rlo, rhi]: q in [ceil((delta - rhi) / s), floor((delta - rlo) / s)].
  const auto floorDiv = [](std::int64_t a, std::int64_t b) {
    return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
  };
  const std::int64_t qlo = std::max(g.lo, -floorDiv(-(delta - rhi), g.stride));
  const std::int64_t qhi = std::min(g.hi, floorDiv(delta - rlo, g.stride));
  for (std::int64_t q = qlo; q <= qhi; ++q) {
    if (solvable(digits, n, d + 1, delta - q * g.stride, reach_lo, reach_hi)) return true;
  }
  return false;
}

inline bool bytesOverlap(const TensorView& a, const TensorView& b) {
  const auto* a0 = static_cast<const char*>(a.data);
  const auto* b0 = static_cast<const char*>(b.data);
  return a0 < b0 + b.extentBytes() && b0 < a0 + a.extentBytes();
}

}  // namespace detail

// True when some element of a and some element of b occupy the same memory (empty views never overlap).
inline bool overlap(const TensorView& a, const TensorView& b) {
  if (!a.present || !b.present || a.numel() == 0 || b.numel() == 0) return false;
  if (!detail::bytesOverlap(a, b)) return false;
  const std::size_t es = a.elementSize();
  const std::int64_t byte_delta = static_cast<const char*>(b.data) - static_cast<const char*>(a.data);
  if (es != b.elementSize() || a.ndim != b.ndim || byte_delta % static_cast<std::int64_t>(es) != 0)
    return true;
  // Same strides on every dim that has more than one element in either view.
  std::array<detail::Digit, MLUOP_DIM_MAX> digits{};
  int n = 0;
  for (int i = 0; i < a.ndim; ++i) {
    if (a.dim(i) == 1 && b.dim(i) == 1) continue;
    if (a.stride(i) != b.stride(i) || a.stride(i) <= 0) return true;
    // a's element i_a meets b's element i_b where sum (i_a - i_b) * stride = delta.
    digits[static_cast<std::size_t>(n++)] = {a.stride(i), -(b.dim(i) - 1), a.dim(i) - 1};
  }
  for (int i = 1; i < n; ++i) {  // insertion sort, stride descending
    for (int j = i;
         j > 0 && digits[static_cast<std::size_t>(j)].stride > digits[static_cast<std::size_t>(j - 1)].stride;
         --j) {
      std::swap(digits[static_cast<std::size_t>(j)], digits[static_cast<std::size_t>(j - 1)]);
    }
  }
  std::array<std::int64_t, MLUOP_DIM_MAX + 1> reach_lo{}, reach_hi{};
  for (int d = n - 1; d >= 0; --d) {
    const detail::Digit& g = digits[static_cast<std::size_t>(d)];
    reach_lo[static_cast<std::size_t>(d)] = reach_lo[static_cast<std::size_t>(d + 1)] + g.lo * g.stride;
    reach_hi[static_cast<std::size_t>(d)] = reach_hi[static_cast<std::size_t>(d + 1)] + g.hi * g.stride;
    // The search below tries at most 2 digits per dim when the smaller dims span less than 2 strides (true
    // for views that do not overlap themselves); otherwise answer conservatively.
    if (reach_hi[static_cast<std::size_t>(d + 1)] - reach_lo[static_cast<std::size_t>(d + 1)] >=
        2 * g.stride) {
      return true;
    }
  }
  return detail::solvable(digits, n, 0, byte_delta / static_cast<std::int64_t>(es), reach_lo, reach_hi);
}

}  // namespace mlu::view_overlap
