// norm_shapes.h — shape rules of the normalization (layer_norm, rms_norm, batch_norm) and rotary embedding
// (rope) ops, shared by their argument checks, device kernels and CPU reference: the dtype of the saved
// statistics, and the split of x into rows (the leading dims) and the normalized dims. Header-only.
#pragma once

#include <mlu/dtype.h>
#include <mlu/op_args.h>

#include <cstdint>
#include <vector>

namespace mlu::norm {

using Shape = std::vector<std::int64_t>;

// The dtype of mean/rstd (layer_norm, rms_norm) and save_mean/save_invstd (batch_norm): float32 for the
// 16-bit float types, else x's own dtype.
inline mluopDataType_t statDtype(mluopDataType_t x) {
  return x == MLUOP_DTYPE_HALF || x == MLUOP_DTYPE_BFLOAT16 ? MLUOP_DTYPE_FLOAT : x;
}

// x.dims[0, n) — the leading ("row") dims.
inline Shape leadingShape(const TensorView& x, int n) { return Shape(x.dims.begin(), x.dims.begin() + n); }

// x.dims[n, ndim) — the normalized dims.
inline Shape trailingShape(const TensorView& x, int n) {
  return Shape(x.dims.begin() + n, x.dims.begin() + x.ndim);
}

inline std::int64_t product(const Shape& s) {
  std::int64_t p = 1;
  for (const std::int64_t d : s) p *= d;
  return p;
}

// Elements per channel of a batch_norm input [N, C, ...]: N times the trailing dims.
inline std::int64_t perChannelCount(const TensorView& x) {
  std::int64_t count = x.dim(0);
  for (int d = 2; d < x.ndim; ++d) count *= x.dim(d);
  return count;
}

// rope's largest position, S - 1 + position_offset, must be exact in float64 (at most 2^53).
constexpr std::int64_t kMaxRopePosition = std::int64_t{1} << 53;

}  // namespace mlu::norm
