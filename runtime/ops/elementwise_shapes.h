// elementwise_shapes.h — shape arithmetic of the elementwise ops, shared by their argument checks, device
// kernels and CPU reference: numpy broadcasting, broadcast views (stride 0 on broadcast dims), permuted
// views, and the self-overlap test for outputs. Pure functions on TensorView; header-only.
#pragma once

#include <mlu/op_args.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>

namespace mlu::elementwise {

// The numpy broadcast of the shapes of a and b (right-aligned; each dim equal or 1) as the dims of out
// (dtype, strides and data of out are left alone). False when they do not broadcast.
inline bool broadcastShapes(const TensorView& a, const TensorView& b, TensorView& out) {
  const int ndim = std::max(a.ndim, b.ndim);
  out.ndim = ndim;
  for (int i = 0; i < ndim; ++i) {
    const int ia = i - (ndim - a.ndim), ib = i - (ndim - b.ndim);  // negative: a missing leading dim
    const std::int64_t da = ia >= 0 ? a.dim(ia) : 1;
    const std::int64_t db = ib >= 0 ? b.dim(ib) : 1;
    if (da != db && da != 1 && db != 1) return false;
    out.dims[static_cast<std::size_t>(i)] = da == 1 ? db : da;
  }
  return true;
}

// t seen with the dims of `shape` (t's shape must broadcast to it): leading dims are added and broadcast
// dims get stride 0, so element i of the result in row-major order is t's element broadcast to position i.
inline TensorView broadcastTo(const TensorView& t, const TensorView& shape) {
  TensorView v = t;
  v.ndim = shape.ndim;
  const int lead = shape.ndim - t.ndim;
  for (int i = 0; i < shape.ndim; ++i) {
    const auto s = static_cast<std::size_t>(i);
    v.dims[s] = shape.dims[s];
    v.strides[s] = i < lead || t.dim(i - lead) == 1 ? 0 : t.stride(i - lead);
  }
  return v;
}

inline bool sameShape(const TensorView& a, const TensorView& b) {
  if (a.ndim != b.ndim) return false;
  for (int i = 0; i < a.ndim; ++i) {
    if (a.dim(i) != b.dim(i)) return false;
  }
  return true;
}

// "[1, 7]"
inline std::string stridesString(const TensorView& t) {
  std::string s = "[";
  for (int i = 0; i < t.ndim; ++i) s += (i ? ", " : "") + std::to_string(t.stride(i));
  return s + "]";
}

// A validated permute's dims with negative entries counted from the end (python-style): -1 -> ndim - 1.
inline IntList normalizedDims(const IntList& dims, int ndim) {
  IntList out(dims);
  for (int& d : out) d = d < 0 ? d + ndim : d;
  return out;
}

// x seen through the permutation `order` (already normalized to 0..ndim-1): dim i of the result is dim
// order[i] of x, so copying it contiguously performs the permute.
inline TensorView permutedView(const TensorView& x, const IntList& order) {
  TensorView v = x;
  for (int i = 0; i < x.ndim; ++i) {
    const auto s = static_cast<std::size_t>(i);
    v.dims[s] = x.dim(order[s]);
    v.strides[s] = x.stride(order[s]);
  }
  return v;
}

// Whether two different logical elements of t may share memory (a broadcast view, or strides too small
// for the dims below them). Conservative: sorts the dims of size > 1 by stride and requires each stride
// to step past everything the smaller-stride dims address, which every slice/permutation of a dense
// tensor satisfies.
inline bool overlapsItself(const TensorView& t) {
  if (t.numel() <= 1) return false;
  std::array<std::pair<std::int64_t, std::int64_t>, MLUOP_DIM_MAX> dims{};  // (stride, size)
  int n = 0;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.dim(i) > 1) dims[static_cast<std::size_t>(n++)] = {t.stride(i), t.dim(i)};
  }
  for (int i = 1; i < n; ++i) {  // insertion sort (at most 8 entries)
    for (int j = i; j > 0 && dims[static_cast<std::size_t>(j)] < dims[static_cast<std::size_t>(j - 1)]; --j) {
      std::swap(dims[static_cast<std::size_t>(j)], dims[static_cast<std::size_t>(j - 1)]);
    }
  }
  std::int64_t reach = 0;  // the furthest offset addressed by the dims sorted so far
  for (int i = 0; i < n; ++i) {
    const auto [stride, size] = dims[static_cast<std::size_t>(i)];
    if (stride <= reach) return true;
    reach += stride * (size - 1);
  }
  return false;
}

// The two halves a rotary embedding pairs up along the last dim of t [..., D]: t[..., :D/2] and
// t[..., D/2:] (GPT-NeoX style), or t[..., 0::2] and t[..., 1::2] (interleaved, GPT-J style). Each is a
// view of shape [..., D/2] into t's memory.
struct RotaryHalves {
  TensorView first, second;
};
inline RotaryHalves rotaryHalves(const TensorView& t, bool interleaved) {
  RotaryHalves h{t, t};
  const auto last = static_cast<std::size_t>(t.ndim - 1);
  const std::int64_t half = t.dims[last] / 2;
  h.first.dims[last] = h.second.dims[last] = half;
  const std::int64_t step = interleaved ? 1 : half;  // elements from the first half's start to the second's
  h.second.data =
      static_cast<char*>(t.data) + step * t.strides[last] * static_cast<std::int64_t>(t.elementSize());
  if (interleaved) h.first.strides[last] = h.second.strides[last] = 2 * t.strides[last];
  if (half == 0) h.second.data = t.data;  // nothing addressed
  return h;
}

}  // namespace mlu::elementwise
