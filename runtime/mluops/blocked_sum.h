// blocked_sum.h — the device's float32 summation order, shared by the reduction and normalization kernels:
// sequential sums inside fixed blocks of kSumBlock terms, then the block sums added pairwise. The order
// depends only on the number of terms, never on how work was split across cores, so results are
// reproducible from run to run.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace mlu {

inline constexpr std::int64_t kSumBlock = 128;  // terms summed sequentially before block sums are combined

// Pairwise sum of v[0..n).
inline float pairwiseSum(const float* v, std::int64_t n) {
  if (n <= 8) {
    float s = 0.0f;
    for (std::int64_t i = 0; i < n; ++i) s += v[i];
    return s;
  }
  const std::int64_t half = n / 2;
  return pairwiseSum(v, half) + pairwiseSum(v + half, n - half);
}

// Sum of term(k) for k in [0, n): sequential float32 sums of blocks of kSumBlock terms, added pairwise.
template <typename Term>
float blockedSum(std::int64_t n, Term&& term) {
  const std::int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  std::array<float, 64> small{};
  std::vector<float> large;
  float* partial = small.data();
  if (blocks > static_cast<std::int64_t>(small.size())) {
    large.resize(static_cast<std::size_t>(blocks));
    partial = large.data();
  }
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t end = std::min(n, (b + 1) * kSumBlock);
    float s = 0.0f;
    for (std::int64_t k = b * kSumBlock; k < end; ++k) s += term(k);
    partial[b] = s;
  }
  return pairwiseSum(partial, blocks);
}

}  // namespace mlu
