// attention_shapes.h — the shape rules of scaled_dot_product_attention shared by its argument checks, the
// device kernels and the CPU reference: the problem sizes read from q [B, H, Sq, D], k [B, Hkv, Sk, D] and
// v [B, Hkv, Sk, Dv] (grouped-query attention when Hkv < H), and the effective softmax scale. Header-only.
#pragma once

#include <mlu/op_args.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace mlu::attention {

struct Sizes {
  std::int64_t batch = 0, heads = 0, sq = 0, sk = 0, d = 0, dv = 0;
  std::int64_t kv_heads = 0;  // H / kv_heads query heads share each key/value head
  std::int64_t group() const { return kv_heads > 0 ? heads / kv_heads : 1; }
  // The key/value head of query head h.
  std::int64_t kvHead(std::int64_t h) const { return h / group(); }
};

// The sizes of a validated call.
inline Sizes sizesOf(const TensorView& q, const TensorView& k, const TensorView& v) {
  return Sizes{q.dim(0), q.dim(1), q.dim(2), k.dim(2), q.dim(3), v.dim(3), k.dim(1)};
}

// scale <= 0 means PyTorch's default 1/sqrt(D).
inline double effectiveScale(double scale, std::int64_t d) {
  return scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(d));
}

// The keys query i may see: [0, visibleKeys(i)) — all Sk, or j <= i with the causal mask (top-left aligned
// when Sq != Sk, as PyTorch's is_causal).
inline std::int64_t visibleKeys(bool causal, std::int64_t i, std::int64_t sk) {
  return causal ? (i + 1 < sk ? i + 1 : sk) : sk;
}

// ---- variable-length attention: packed sequences ----
// q [Tq, H, D], k [Tk, Hkv, D], v [Tk, Hkv, Dv], o [Tq, H, Dv], lse [H, Tq]; sequence b is rows
// [cu_q[b], cu_q[b + 1]) of q (and o, lse's columns) and [cu_k[b], cu_k[b + 1]) of k and v, attended as the
// dense op attends one batch entry.

// The offsets of a cu_seqlens tensor (int32 or int64, 1-d), read when the kernel runs (device data).
inline std::vector<std::int64_t> readOffsets(const TensorView& cu) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(cu.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::int64_t at = static_cast<std::int64_t>(i) * cu.stride(0);
    v[i] = cu.dtype == MLUOP_DTYPE_INT32 ? static_cast<const std::int32_t*>(cu.data)[at]
                                         : static_cast<const std::int64_t*>(cu.data)[at];
  }
  return v;
}

// Whether offsets describe sequences inside T rows: non-decreasing, from 0 up to at most T (rows past the
// last offset are padding, attended by no sequence).
inline bool validOffsets(const std::vector<std::int64_t>& cu, std::int64_t rows) {
  if (cu.empty() || cu.front() < 0 || cu.back() > rows) return false;
  for (std::size_t i = 1; i < cu.size(); ++i)
    if (cu[i] < cu[i - 1]) return false;
  return true;
}

// Rows [begin, end) of a packed [T, H, X] tensor as the dense op's [1, H, end - begin, X].
inline TensorView sequenceView(const TensorView& packed, std::int64_t begin, std::int64_t end) {
  TensorView v = packed;
  v.ndim = 4;
  v.dims = {};
  v.strides = {};
  v.dims[0] = 1;
  v.dims[1] = packed.dim(1);
  v.dims[2] = end - begin;
  v.dims[3] = packed.dim(2);
  v.strides[0] = 0;
  v.strides[1] = packed.stride(1);
  v.strides[2] = packed.stride(0);
  v.strides[3] = packed.stride(2);
  v.data = static_cast<char*>(packed.data) +
           begin * packed.stride(0) * static_cast<std::int64_t>(packed.elementSize());
  return v;
}

// Columns [begin, end) of lse [H, T] as the dense op's [1, H, end - begin].
inline TensorView sequenceLse(const TensorView& lse, std::int64_t begin, std::int64_t end) {
  TensorView v = lse;
  v.ndim = 3;
  v.dims = {};
  v.strides = {};
  v.dims[0] = 1;
  v.dims[1] = lse.dim(0);
  v.dims[2] = end - begin;
  v.strides[0] = 0;
  v.strides[1] = lse.stride(0);
  v.strides[2] = lse.stride(1);
  v.data =
      static_cast<char*>(lse.data) + begin * lse.stride(1) * static_cast<std::int64_t>(lse.elementSize());
  return v;
}

}  // namespace mlu::attention
