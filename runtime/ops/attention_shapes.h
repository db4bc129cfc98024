// attention_shapes.h — the shape rules of scaled_dot_product_attention shared by its argument checks, the
// device kernels and the CPU reference: the problem sizes read from q [B, H, Sq, D], k [B, Hkv, Sk, D] and
// v [B, Hkv, Sk, Dv] (grouped-query attention when Hkv < H), and the effective softmax scale. Header-only.
#pragma once

#include <mlu/op_args.h>

#include <cmath>
#include <cstdint>

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

}  // namespace mlu::attention
