// blocked_sum.h — the device's float32 summation order, shared by the reduction and normalization kernels:
// fixed blocks of kSumBlock terms; inside a block, term k goes to lane k % kSumLanes of kSumLanes running
// sums (each lane sequential), and the lanes are combined as ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 +
// l7)); the block sums are then added pairwise. The order depends only on the number of terms, never on how
// work was split across cores or on the instruction set (an 8-lane AVX2 register holds the lanes exactly),
// so results are reproducible from run to run, and the lanes' independent chains let a core overlap the
// additions instead of waiting on each.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace mlu {

inline constexpr std::int64_t kSumBlock = 128;  // terms summed in lanes before block sums are combined
inline constexpr int kSumLanes = 8;             // running sums inside a block (term k in lane k % 8)

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

// The lanes of a block combined: ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).
inline float combineLanes(const float* lane) {
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// The sum of one block: term(k) for k in [begin, end), end - begin <= kSumBlock, in lanes.
template <typename Term>
float laneSum(std::int64_t begin, std::int64_t end, Term&& term) {
  float lane[kSumLanes] = {};
  std::int64_t k = begin;
  for (; k + kSumLanes <= end; k += kSumLanes) {
    for (int l = 0; l < kSumLanes; ++l) lane[l] += term(k + l);
  }
  for (int l = 0; k < end; ++k, ++l) lane[l] += term(k);
  return combineLanes(lane);
}

// The blocks of n terms added pairwise: block_sum(begin, end) sums terms [begin, end) of one block (at most
// kSumBlock of them, in lanes).
template <typename BlockSum>
float sumOfBlocks(std::int64_t n, BlockSum&& block_sum) {
  const std::int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  if (blocks <= 1) return block_sum(std::int64_t{0}, n);
  std::array<float, 64> small{};
  std::vector<float> large;
  float* partial = small.data();
  if (blocks > static_cast<std::int64_t>(small.size())) {
    large.resize(static_cast<std::size_t>(blocks));
    partial = large.data();
  }
  for (std::int64_t b = 0; b < blocks; ++b)
    partial[b] = block_sum(b * kSumBlock, std::min(n, (b + 1) * kSumBlock));
  return pairwiseSum(partial, blocks);
}

// Sum of term(k) for k in [0, n): blocks of kSumBlock terms summed in lanes, the block sums added pairwise.
template <typename Term>
float blockedSum(std::int64_t n, Term&& term) {
  return sumOfBlocks(n, [&](std::int64_t begin, std::int64_t end) { return laneSum(begin, end, term); });
}

}  // namespace mlu
