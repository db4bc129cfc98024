// index_shapes.h — shape rules of the indexing, joining and comparison ops (embedding, index_select,
// gather, scatter_add, concat, split, where, eq/lt/gt), shared by their argument checks, device kernels and
// CPU reference: Python-style dim normalization, narrowed views (one dim cut to a range) and the memory
// overlap tests between an output and an input. Header-only: runtime/ops is compiled into both the kernel
// library and the reference.
#pragma once

#include "elementwise_shapes.h"

#include <mlu/op_args.h>
#include <mlu/status.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mlu::index_shapes {

// Turns a Python-style dim (negative counts from the end) of the ndim-d tensor `name` into 0..ndim-1.
// These ops need at least one dim.
inline Status normalizeDim(int dim, int ndim, std::string_view name, int& out) {
  if (ndim == 0) return badParam("{} is 0-d; the op needs a tensor with at least 1 dim", name);
  if (dim < -ndim || dim >= ndim) {
    return badParam("dim {} is out of range for a {}-d {} (expected {} to {})", dim, ndim, name, -ndim,
                    ndim - 1);
  }
  out = dim < 0 ? dim + ndim : dim;
  return Status::success();
}

// t, or for a 0-d tensor the 1-d tensor of its one element: gather takes a 0-d x or index as 1-d of size 1,
// as PyTorch does (its shape checks use max(ndim, 1)).
inline TensorView atLeast1d(TensorView t) {
  if (t.ndim == 0) {
    t.ndim = 1;
    t.dims[0] = 1;
    t.strides[0] = 1;
  }
  return t;
}

// A validated dim, normalized (device kernels and the reference run after validate).
inline int dimOf(int dim, int ndim) { return dim < 0 ? dim + ndim : dim; }

// t with dim d cut to [begin, begin + size): the data pointer moved to element `begin` of d.
inline TensorView narrowed(const TensorView& t, int d, std::int64_t begin, std::int64_t size) {
  TensorView v = t;
  v.dims[static_cast<std::size_t>(d)] = size;
  if (size > 0 && t.data != nullptr) {
    v.data = static_cast<char*>(t.data) +
             static_cast<std::ptrdiff_t>(begin * t.stride(d) * static_cast<std::int64_t>(t.elementSize()));
  }
  return v;
}

// Whether the bytes two tensors address (from their first to past their last element; strides are never
// negative) intersect. Empty tensors address nothing.
inline bool memoryOverlaps(const TensorView& a, const TensorView& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  const auto* a0 = static_cast<const char*>(a.data);
  const auto* b0 = static_cast<const char*>(b.data);
  return a0 < b0 + b.extentBytes() && b0 < a0 + a.extentBytes();
}

// Whether input `in`, broadcast to the shape of `out`, is exactly out's memory element for element (same
// data, element size and strides): safe for ops that read element i of every input before writing
// element i of the output.
inline bool exactAlias(const TensorView& in, const TensorView& out) {
  if (in.data != out.data || in.elementSize() != out.elementSize()) return false;
  const int lead = out.ndim - in.ndim;
  if (lead < 0) return false;
  for (int i = 0; i < out.ndim; ++i) {
    if (out.dim(i) == 1) continue;
    const bool broadcast = i < lead || in.dim(i - lead) == 1;
    if (broadcast || in.stride(i - lead) != out.stride(i)) return false;
  }
  return true;
}

// An output must address a distinct element at every logical position (no broadcast views).
inline Status checkOutput(std::string_view name, const TensorView& t) {
  if (!elementwise::overlapsItself(t)) return Status::success();
  return badParam(
      "{} (shape {}, strides {}) overlaps itself; an output needs a distinct element at every position", name,
      t.shapeString(), elementwise::stridesString(t));
}

// An output must not share memory with an input the kernel reads while it writes.
inline Status checkDisjoint(std::string_view out_name, const TensorView& out, std::string_view in_name,
                            const TensorView& in) {
  if (!memoryOverlaps(out, in)) return Status::success();
  return badParam("{} overlaps {} in memory; an output must not share memory with an input", out_name,
                  in_name);
}

}  // namespace mlu::index_shapes
