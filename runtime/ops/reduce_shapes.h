// reduce_shapes.h — shape rules of the reduction family (reductions, softmax, losses, pooling), shared by
// the argument checks, the device kernels and the CPU reference: Python-style dim normalization, the result
// shape of a reduction, pooling output sizes, and strided index spaces over a subset of a tensor's dims.
// Header-only: runtime/ops is compiled into both the kernel library and the reference.
#pragma once

#include <mlu/op_args.h>
#include <mlu/status.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mlu::reduce {

using Shape = std::vector<std::int64_t>;

inline Shape shapeOf(const TensorView& t) { return Shape(t.dims.begin(), t.dims.begin() + t.ndim); }

// "[2, 3]"
template <typename Ints>
std::string listString(const Ints& values) {
  std::string s = "[";
  bool first = true;
  for (const auto v : values) {
    s += (first ? "" : ", ") + std::to_string(v);
    first = false;
  }
  return s + "]";
}

// Turns a Python-style dim (negative counts from the end) of a tensor with ndim dims into 0..ndim-1. A 0-d
// tensor accepts -1 and 0, as PyTorch does (the result is then 0 and names no real dim). `what` names the
// argument in the message ("dim", "dims[1]").
inline Status normalizeDim(int dim, int ndim, std::string_view what, int& out) {
  const int range = ndim > 0 ? ndim : 1;
  if (dim < -range || dim >= range) {
    return badParam("{} = {} is out of range for x with {} dims (expected {} to {})", what, dim, ndim, -range,
                    range - 1);
  }
  out = dim < 0 ? dim + range : dim;
  return Status::success();
}

// The dims a sum/mean reduces, as a bit mask over x's dims; an empty list reduces every dim.
inline Status reducedDimMask(const IntList& dims, int ndim, std::uint32_t& mask) {
  mask = 0;
  if (dims.empty()) {
    mask = (1u << ndim) - 1u;
    return Status::success();
  }
  for (std::size_t i = 0; i < dims.size(); ++i) {
    int d = 0;
    MLU_RETURN_IF_ERROR(normalizeDim(dims[i], ndim, "dims[" + std::to_string(i) + "]", d));
    if (ndim == 0) continue;  // a 0-d tensor: nothing to reduce
    if (mask & (1u << d)) return badParam("dim {} appears more than once in dims {}", d, listString(dims));
    mask |= 1u << d;
  }
  return Status::success();
}

// The shape of x reduced over the dims in mask: those dims removed, or kept with size 1.
inline Shape reducedShape(const TensorView& x, std::uint32_t mask, bool keepdim) {
  Shape out;
  for (int d = 0; d < x.ndim; ++d) {
    if (!(mask & (1u << d))) {
      out.push_back(x.dim(d));
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

// An output's shape must be exactly the computed one.
inline Status expectShape(std::string_view name, const TensorView& t, const Shape& expected) {
  if (shapeOf(t) != expected) {
    return badParam("{} has shape {} but the result has shape {}", name, t.shapeString(),
                    listString(expected));
  }
  return Status::success();
}

// A row-major index space over some of a tensor's dims, with that tensor's strides: linear index -> element
// offset. Used to walk "all dims but the reduced ones" and "the reduced dims" of strided tensors.
struct IndexSpace {
  int ndim = 0;
  std::array<std::int64_t, MLUOP_DIM_MAX> sizes{};
  std::array<std::int64_t, MLUOP_DIM_MAX> strides{};

  std::int64_t count() const {
    std::int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= sizes[static_cast<std::size_t>(i)];
    return n;
  }
  std::int64_t offset(std::int64_t linear) const {
    std::int64_t off = 0;
    for (int i = ndim - 1; i >= 0; --i) {
      const auto u = static_cast<std::size_t>(i);
      if (sizes[u] == 0) return 0;  // an empty space has no element past its origin
      off += (linear % sizes[u]) * strides[u];
      linear /= sizes[u];
    }
    return off;
  }
};

// The dims of t whose bit in mask equals `selected`, in order.
inline IndexSpace dimsOf(const TensorView& t, std::uint32_t mask, bool selected) {
  IndexSpace s;
  for (int d = 0; d < t.ndim; ++d) {
    if (((mask >> d) & 1u) != (selected ? 1u : 0u)) continue;
    s.sizes[static_cast<std::size_t>(s.ndim)] = t.dim(d);
    s.strides[static_cast<std::size_t>(s.ndim)] = t.stride(d);
    ++s.ndim;
  }
  return s;
}

// All dims of t.
inline IndexSpace allDims(const TensorView& t) { return dimsOf(t, 0u, false); }

// Walks an IndexSpace in row-major order from a starting linear index, keeping the offset up to date with
// additions only (no divisions per step).
class Cursor {
 public:
  Cursor(const IndexSpace& space, std::int64_t start) : space_(space) {
    std::int64_t linear = start;
    for (int i = space_.ndim - 1; i >= 0; --i) {
      const auto u = static_cast<std::size_t>(i);
      if (space_.sizes[u] == 0) {  // an empty space: the cursor stays at the origin and is never advanced
        index_ = {};
        offset_ = 0;
        return;
      }
      index_[u] = linear % space_.sizes[u];
      linear /= space_.sizes[u];
      offset_ += index_[u] * space_.strides[u];
    }
  }
  std::int64_t offset() const { return offset_; }
  void next() {
    for (int i = space_.ndim - 1; i >= 0; --i) {
      const auto u = static_cast<std::size_t>(i);
      offset_ += space_.strides[u];
      if (++index_[u] < space_.sizes[u]) return;
      offset_ -= index_[u] * space_.strides[u];
      index_[u] = 0;
    }
  }

 private:
  const IndexSpace& space_;
  std::array<std::int64_t, MLUOP_DIM_MAX> index_{};
  std::int64_t offset_ = 0;
};

// The sizes of a dim-wise op (max/min/argmax/softmax) over dim d of a tensor: the other dims (outer), and
// the one dim (its size and stride). A 0-d tensor is one element with a reduced dim of size 1.
struct DimSplit {
  IndexSpace others;
  std::int64_t size = 1;
  std::int64_t stride = 0;
};
inline DimSplit splitAt(const TensorView& t, int d) {
  DimSplit s;
  if (t.ndim == 0) return s;
  s.others = dimsOf(t, 1u << d, false);
  s.size = t.dim(d);
  s.stride = t.stride(d);
  return s;
}

// The rows of a loss (nll_loss, cross_entropy): scores [C] (one row, a 0-d target), [N, C] or
// [N, C, d1, ..., dk] (N·d1···dk rows, target [N, d1, ..., dk], as PyTorch's); the classes run along dim 1
// (dim 0 for [C]). rowOffsets gives, in row-major order of the rows, each row's element offset in a tensor:
// the scores at class 0 (their class dim skipped), or the target / a per-row output (every element).
inline int lossClassDim(const TensorView& scores) { return scores.ndim == 1 ? 0 : 1; }
inline std::int64_t lossClasses(const TensorView& scores) { return scores.dim(lossClassDim(scores)); }
inline std::vector<std::int64_t> rowOffsets(const TensorView& t, int skip_dim) {
  IndexSpace space;
  for (int d = 0; d < t.ndim; ++d) {
    if (d == skip_dim) continue;
    space.sizes[static_cast<std::size_t>(space.ndim)] = t.dim(d);
    space.strides[static_cast<std::size_t>(space.ndim)] = t.stride(d);
    ++space.ndim;
  }
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(space.count()));
  for (std::size_t r = 0; r < offsets.size(); ++r) offsets[r] = space.offset(static_cast<std::int64_t>(r));
  return offsets;
}

// Geometry of a 2-d pooling: PyTorch's max_pool2d (dilation, ceil mode, an unbatched [C, H, W] input)
// and avg_pool2d (floor mode, dilation 1, 4-d).
struct PoolGeometry {
  std::int64_t n = 0, c = 0, h = 0, w = 0;  // input [N, C, H, W] ([C, H, W] with n = 1 when unbatched)
  std::int64_t ho = 0, wo = 0;              // output [N, C, Ho, Wo]
  std::int64_t kh = 0, kw = 0, sh = 0, sw = 0, ph = 0, pw = 0, dh = 1, dw = 1;
  bool unbatched = false;

  Shape outputShape() const { return unbatched ? Shape{c, ho, wo} : Shape{n, c, ho, wo}; }
};

// PyTorch's pooling output size along one axis: floor((in + 2p - d(k - 1) - 1) / s) + 1 (ceil in ceil
// mode, where a last window that would start in the right padding is dropped). May be <= 0.
inline std::int64_t poolOutputSize(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p,
                                   std::int64_t d, bool ceil_mode) {
  const std::int64_t numerator = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  // floor division of a possibly negative numerator
  std::int64_t out = (numerator >= 0 ? numerator / s : -((-numerator + s - 1) / s)) + 1;
  if (ceil_mode && out > 0 && (out - 1) * s >= in + p) --out;
  return out;
}

// A 3-d [C, H, W] view as [1, C, H, W] (the kernels walk 4-d planes); other views unchanged.
inline TensorView asBatched(TensorView t) {
  if (!t.present || t.ndim != 3) return t;
  for (int i = 3; i > 0; --i) {
    t.dims[static_cast<std::size_t>(i)] = t.dims[static_cast<std::size_t>(i - 1)];
    t.strides[static_cast<std::size_t>(i)] = t.strides[static_cast<std::size_t>(i - 1)];
  }
  t.dims[0] = 1;
  t.strides[0] = 0;
  t.ndim = 4;
  return t;
}

// Checks kernel/stride/padding (and dilation: empty means 1) and the input `input_name` (x, or grad_input
// for the backward ops: 4-d, or 3-d when `allow_unbatched`) and computes the output size.
inline Status poolGeometryOf(const IntList& kernel, const IntList& stride, const IntList& padding,
                             const IntList& dilation, bool ceil_mode, bool allow_unbatched,
                             std::string_view input_name, const TensorView& input, PoolGeometry& g) {
  const std::array<std::pair<std::string_view, const IntList*>, 3> lists{
      {{"kernel", &kernel}, {"stride", &stride}, {"padding", &padding}}};
  for (const auto& [name, list] : lists) {
    if (list->size() != 2) {
      return badParam("{} has {} values {}; expected 2 (H, W)", name, list->size(), listString(*list));
    }
  }
  if (!dilation.empty() && dilation.size() != 2) {
    return badParam("dilation has {} values {}; expected 2 (H, W), or none for 1", dilation.size(),
                    listString(dilation));
  }
  if (kernel[0] <= 0 || kernel[1] <= 0) return badParam("kernel {} must be positive", listString(kernel));
  if (stride[0] <= 0 || stride[1] <= 0) return badParam("stride {} must be positive", listString(stride));
  if (!dilation.empty() && (dilation[0] <= 0 || dilation[1] <= 0)) {
    return badParam("dilation {} must be positive", listString(dilation));
  }
  if (padding[0] < 0 || padding[1] < 0)
    return badParam("padding {} must not be negative", listString(padding));
  if (padding[0] > kernel[0] / 2 || padding[1] > kernel[1] / 2) {
    return badParam(
        "padding {} is more than half of kernel {}: pad should be at most half of effective kernel size",
        listString(padding), listString(kernel));
  }
  const bool unbatched = allow_unbatched && input.ndim == 3;
  if (input.ndim != 4 && !unbatched) {
    if (allow_unbatched) {
      return badParam("{} has shape {}; expected 3 or 4 dims ([C, H, W] or [N, C, H, W])", input_name,
                      input.shapeString());
    }
    return badParam("{} has shape {}; expected 4 dims [N, C, H, W]", input_name, input.shapeString());
  }
  const int base = unbatched ? 1 : 0;
  g.unbatched = unbatched;
  g.n = unbatched ? 1 : input.dim(0);
  g.c = input.dim(1 - base);
  g.h = input.dim(2 - base);
  g.w = input.dim(3 - base);
  g.kh = kernel[0];
  g.kw = kernel[1];
  g.sh = stride[0];
  g.sw = stride[1];
  g.ph = padding[0];
  g.pw = padding[1];
  g.dh = dilation.empty() ? 1 : dilation[0];
  g.dw = dilation.empty() ? 1 : dilation[1];
  g.ho = poolOutputSize(g.h, g.kh, g.sh, g.ph, g.dh, ceil_mode);
  g.wo = poolOutputSize(g.w, g.kw, g.sw, g.pw, g.dw, ceil_mode);
  if (g.ho < 1 || g.wo < 1) {
    return badParam(
        "{} of shape {} gives an output of size [{}, {}] with kernel {}, stride {}, padding {}, dilation {}: "
        "output size is too small",
        input_name, input.shapeString(), g.ho, g.wo, listString(kernel), listString(stride),
        listString(padding), dilation.empty() ? std::string("[1, 1]") : listString(dilation));
  }
  return Status::success();
}

// avg_pool2d's geometry: 4-d, floor mode, no dilation.
inline Status poolGeometry(const IntList& kernel, const IntList& stride, const IntList& padding,
                           std::string_view input_name, const TensorView& input, PoolGeometry& g) {
  return poolGeometryOf(kernel, stride, padding, {}, false, false, input_name, input, g);
}

// max_pool2d's geometry.
template <typename Args>
Status maxPoolGeometry(const Args& a, std::string_view input_name, const TensorView& input, PoolGeometry& g) {
  return poolGeometryOf(a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode, true, input_name, input, g);
}

}  // namespace mlu::reduce
