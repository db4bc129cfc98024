// Device kernels of the reduction (sum, mean, norm, var, max, min, argmax), softmax, loss (nll_loss,
// cross_entropy) and pooling (max_pool2d, avg_pool2d, adaptive_avg_pool2d) ops.
//
// Device numerics, on purpose not the reference's: elements are loaded into float32 (float16/bfloat16
// are rounded once, when stored); sums accumulate in float32 inside fixed blocks of kBlock elements, in
// blocked_sum.h's 8 lanes, and the block sums are then added pairwise (the order depends only on the
// shapes, never on the number of cores, so results are deterministic); exp and log are fast float32
// approximations (range reduction + polynomial, a few ulps). Every tensor may have arbitrary strides.
//
// Loss targets are device data, read only when the kernel runs, so a bad target cannot be reported by
// the call: a target outside [0, C) that is not ignore_index gives a NaN loss for its row (it still counts
// for the mean), and a NaN row of the gradient. Likewise max_pool2d_backward skips indices outside the
// input plane. The CPU reference does the same.
#include "blocked_sum.h"
#include "device.h"
#include "fast_exp.h"

#include "element.h"
#include "reduce_shapes.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace mlu {
namespace {

using reduce::allDims;
using reduce::Cursor;
using reduce::DimSplit;
using reduce::IndexSpace;
using reduce::PoolGeometry;
using reduce::splitAt;

constexpr std::int64_t kBlock = kSumBlock;  // elements summed (in lanes) before block sums are combined
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- fast float32 math ----

// e^x: x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), e^r by its degree-7 Taylor polynomial
// (truncation < 6e-9, well under an ulp), 2^n assembled in the exponent bits.
inline float fastExp(float x) {
  if (std::isnan(x)) return x;
  if (x > 88.72284f) return kInf;
  if (x < -103.9721f) return 0.0f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504f + kRound) - kRound;
  float r = std::fma(-n, 0.693145751953125f, x);  // ln2 high part (exact product)
  r = std::fma(-n, 1.42860677e-06f, r);           // ln2 low part
  float p = 1.0f / 5040.0f;
  p = std::fma(p, r, 1.0f / 720.0f);
  p = std::fma(p, r, 1.0f / 120.0f);
  p = std::fma(p, r, 1.0f / 24.0f);
  p = std::fma(p, r, 1.0f / 6.0f);
  p = std::fma(p, r, 0.5f);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  int e = static_cast<int>(n);
  // 2^e must be a normal float: move the excess into p first (results then may be subnormal or 2^128).
  if (e > 127) {
    p *= 2.0f;
    e -= 1;
  } else if (e < -126) {
    p *= 0x1p-64f;
    e += 64;
  }
  return p * std::bit_cast<float>(static_cast<std::uint32_t>(e + 127) << 23);
}

// ln x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s) with s = (m-1)/(m+1), |s| <= 0.1716,
// by its odd series up to s^9 (truncation < 1e-9 relative).
inline float fastLog(float x) {
  if (std::isnan(x) || x < 0.0f) return kNaN;
  if (x == 0.0f) return -kInf;
  if (std::isinf(x)) return x;
  int e = 0;
  if (x < 0x1p-126f) {  // subnormal: normalize first
    x *= 0x1p23f;
    e = -23;
  }
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  e += static_cast<int>(bits >> 23) - 127;
  float m = std::bit_cast<float>((bits & 0x7fffffu) | 0x3f800000u);
  if (m > 1.41421356f) {
    m *= 0.5f;
    e += 1;
  }
  const float s = (m - 1.0f) / (m + 1.0f);
  const float s2 = s * s;
  float p = 2.0f / 9.0f;
  p = std::fma(p, s2, 2.0f / 7.0f);
  p = std::fma(p, s2, 2.0f / 5.0f);
  p = std::fma(p, s2, 2.0f / 3.0f);
  p = std::fma(p, s2, 2.0f);
  const float fe = static_cast<float>(e);
  return std::fma(fe, 0.693145751953125f, std::fma(fe, 1.42860677e-06f, s * p));
}

// Calls f.template operator()<T>() for the device's floating storage types (validate and the device rules
// have already refused everything else).
template <typename F>
void dispatchDevice(mluopDataType_t dtype, F&& f) {
  switch (dtype) {
    case MLUOP_DTYPE_FLOAT:
      f.template operator()<float>();
      break;
    case MLUOP_DTYPE_HALF:
      f.template operator()<Half>();
      break;
    case MLUOP_DTYPE_BFLOAT16:
      f.template operator()<BFloat16>();
      break;
    default:
      break;
  }
}

// Chunk size for parallelFor: at least ~kWorkPerChunk elements of work per chunk.
constexpr std::int64_t kWorkPerChunk = 16384;
std::int64_t grainFor(std::int64_t work_per_item) {
  return std::max<std::int64_t>(1, kWorkPerChunk / std::max<std::int64_t>(1, work_per_item));
}

// ---- sum / mean / norm / var ----

// The blocks of a dim-list reduction: item i is (output o = i / blocks, block i % blocks), and a block
// covers kBlock consecutive reduced elements (row-major over the reduced dims) of its output.
struct BlockPlan {
  IndexSpace kept, reduced;
  std::int64_t outputs = 0, k = 0, blocks = 0;

  BlockPlan(const TensorView& x, std::uint32_t mask)
      : kept(reduce::dimsOf(x, mask, false)), reduced(reduce::dimsOf(x, mask, true)) {
    outputs = kept.count();
    k = reduced.count();
    blocks = (k + kBlock - 1) / kBlock;
  }
};

// Folds every block on its own, in parallel: partial[i] = fold(...fold(init, o, x0)..., o, xn) over the
// block's elements in order. The order depends only on the shapes, never on the number of cores.
// The one stride of an index space whose dims run on from one another (a contiguous tensor reduced whole,
// or a single reduced dim): element j at j * stride. 0 when they do not.
std::int64_t collapsedStride(const IndexSpace& space) {
  std::int64_t stride = 0, span = 0;  // the stride of the dims seen so far (innermost first) and their extent
  for (int d = space.ndim - 1; d >= 0; --d) {
    const auto u = static_cast<std::size_t>(d);
    if (space.sizes[u] == 1) continue;
    if (stride == 0) {
      stride = space.strides[u];
    } else if (space.strides[u] != span) {
      return 0;
    }
    span = space.strides[u] * space.sizes[u];
  }
  return stride > 0 ? stride : (space.count() == 1 ? 1 : 0);
}

// Adjacent outputs folded together when their elements are adjacent (foldBlocks).
constexpr std::int64_t kGroup = 16;

template <typename T, typename Fold, typename Combine>
std::vector<float> foldBlocks(const BlockPlan& p, const T* xd, int cores, float init, const Fold& fold,
                              const Combine& combine) {
  std::vector<float> partial(static_cast<std::size_t>(p.outputs * p.blocks));
  const std::int64_t step = collapsedStride(p.reduced);
  const auto combineTree = [&](const float* lane) {
    return combine(combine(combine(lane[0], lane[1]), combine(lane[2], lane[3])),
                   combine(combine(lane[4], lane[5]), combine(lane[6], lane[7])));
  };
  if (step > 1 && p.outputs >= kGroup && collapsedStride(p.kept) == 1) {
    // Adjacent outputs are adjacent elements (a sum over the leading dims, e.g. a bias gradient): kGroup
    // outputs at a time, each element j of a block read as one row of kGroup values, into lane j % 8 of
    // each output. Every output's order is the one below; the rows are read contiguously.
    const std::int64_t groups = (p.outputs + kGroup - 1) / kGroup;
    parallelFor(groups * p.blocks, grainFor(kBlock * kGroup), cores,
                [&](std::int64_t begin, std::int64_t end) {
                  for (std::int64_t i = begin; i < end; ++i) {
                    const std::int64_t o0 = i / p.blocks * kGroup, b = i % p.blocks;
                    const std::int64_t width = std::min(kGroup, p.outputs - o0);
                    const std::int64_t first = b * kBlock;
                    const std::int64_t n = std::min(kBlock, p.k - first);
                    const T* const line = xd + p.kept.offset(o0) + first * step;
                    float lane[kSumLanes][kGroup];
                    for (auto& l : lane) std::fill(l, l + kGroup, init);
                    for (std::int64_t j = 0; j < n; ++j) {
                      const T* const row = line + j * step;
                      float* const acc = lane[j % kSumLanes];
                      if (width == kGroup) {
                        for (std::int64_t t = 0; t < kGroup; ++t)
                          acc[t] = fold(acc[t], o0 + t, load<float>(row[t]));
                      } else {
                        for (std::int64_t t = 0; t < width; ++t)
                          acc[t] = fold(acc[t], o0 + t, load<float>(row[t]));
                      }
                    }
                    for (std::int64_t t = 0; t < width; ++t) {
                      float of_t[kSumLanes];
                      for (int l = 0; l < kSumLanes; ++l) of_t[l] = lane[l][t];
                      partial[static_cast<std::size_t>((o0 + t) * p.blocks + b)] = combineTree(of_t);
                    }
                  }
                });
    return partial;
  }
  parallelFor(p.outputs * p.blocks, grainFor(kBlock), cores, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t o = i / p.blocks;
      const std::int64_t first = (i % p.blocks) * kBlock;
      const std::int64_t n = std::min(kBlock, p.k - first);
      const std::int64_t base = p.kept.offset(o);
      // Element j of the block into lane j % kSumLanes (blocked_sum.h), each lane folded in order.
      float lane[kSumLanes];
      std::fill(lane, lane + kSumLanes, init);
      std::int64_t j = 0;
      if (step == 1) {  // contiguous: the lanes are one vector register
        const T* const line = xd + base + first;
        for (; j + kSumLanes <= n; j += kSumLanes) {
          for (int l = 0; l < kSumLanes; ++l) lane[l] = fold(lane[l], o, load<float>(line[j + l]));
        }
        for (; j < n; ++j) lane[j % kSumLanes] = fold(lane[j % kSumLanes], o, load<float>(line[j]));
      } else if (step > 0) {  // the same elements in the same order, without a cursor's step per element
        const T* const line = xd + base + first * step;
        for (; j < n; ++j) lane[j % kSumLanes] = fold(lane[j % kSumLanes], o, load<float>(line[j * step]));
      } else {
        Cursor c(p.reduced, first);
        for (; j < n; ++j, c.next()) {
          lane[j % kSumLanes] = fold(lane[j % kSumLanes], o, load<float>(xd[base + c.offset()]));
        }
      }
      partial[static_cast<std::size_t>(i)] = combineTree(lane);
    }
  });
  return partial;
}

// The combination of two lanes of a sum.
constexpr auto kAddLanes = [](float a, float b) { return a + b; };

// result(o, partials of o) for every output, stored into y.
template <typename T, typename Result>
void storeOutputs(const BlockPlan& p, const std::vector<float>& partial, const TensorView& y, int cores,
                  const Result& result) {
  const IndexSpace ys = allDims(y);
  T* yd = typed<T>(y);
  parallelFor(p.outputs, grainFor(p.blocks), cores, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t o = begin; o < end; ++o)
      yd[ys.offset(o)] = store<T>(result(o, partial.data() + o * p.blocks));
  });
}

// Every (output, block) pair is summed on its own, in parallel, and the blocks of an output are then added
// pairwise: the same order whether the outputs are many (batched rows) or one (a full reduction).
template <typename T>
void sumKernel(const TensorView& x, const TensorView& y, std::uint32_t mask, bool mean, int cores) {
  const BlockPlan p(x, mask);
  if (p.outputs == 0) return;
  if (p.k == 0) {  // the sum of nothing is 0; its mean is 0/0
    const IndexSpace ys = allDims(y);
    for (std::int64_t o = 0; o < p.outputs; ++o) typed<T>(y)[ys.offset(o)] = store<T>(mean ? kNaN : 0.0f);
    return;
  }
  const std::vector<float> partial = foldBlocks(
      p, typed<const T>(x), cores, 0.0f, [](float acc, std::int64_t, float v) { return acc + v; }, kAddLanes);
  const auto count = static_cast<float>(p.k);
  storeOutputs<T>(p, partial, y, cores, [&](std::int64_t, const float* blocks) {
    const float s = pairwiseSum(blocks, p.blocks);
    return mean ? s / count : s;
  });
}

// The L2 norm, scaled: a first pass finds max |x| of each output (NaN if any element is NaN), a second
// sums (x * 2^-e)^2 with 2^e near that max, so float32 squares neither overflow nor underflow to 0; the
// result is 2^e sqrt(sum). An infinite max gives inf (or NaN with a NaN), a zero max 0.
template <typename T>
void normKernel(const TensorView& x, const TensorView& y, std::uint32_t mask, int cores) {
  const BlockPlan p(x, mask);
  if (p.outputs == 0) return;
  const IndexSpace ys = allDims(y);
  if (p.k == 0) {  // the norm of nothing is 0
    for (std::int64_t o = 0; o < p.outputs; ++o) typed<T>(y)[ys.offset(o)] = store<T>(0.0f);
    return;
  }
  const T* xd = typed<const T>(x);
  const auto max_abs_fold = [](float acc, float v) {
    const float a = std::fabs(v);
    if (std::isnan(acc)) return acc;  // a NaN stays
    return a > acc || std::isnan(a) ? a : acc;
  };
  const std::vector<float> block_max = foldBlocks(
      p, xd, cores, 0.0f, [&](float acc, std::int64_t, float v) { return max_abs_fold(acc, v); },
      max_abs_fold);
  // Per output: the exponent of the scale (0 when the max is 0, infinite or NaN: nothing to scale).
  std::vector<float> max_abs(static_cast<std::size_t>(p.outputs));
  std::vector<float> scale(static_cast<std::size_t>(p.outputs));
  for (std::int64_t o = 0; o < p.outputs; ++o) {
    float m = 0.0f;
    for (std::int64_t b = 0; b < p.blocks; ++b) {
      const float v = block_max[static_cast<std::size_t>(o * p.blocks + b)];
      if (std::isnan(v) || v > m) m = v;
      if (std::isnan(m)) break;
    }
    max_abs[static_cast<std::size_t>(o)] = m;
    const int e = std::isfinite(m) && m > 0.0f ? std::clamp(std::ilogb(m), -126, 126) : 0;
    scale[static_cast<std::size_t>(o)] = std::ldexp(1.0f, -e);
  }
  const std::vector<float> partial = foldBlocks(
      p, xd, cores, 0.0f,
      [&](float acc, std::int64_t o, float v) {
        const float s = v * scale[static_cast<std::size_t>(o)];
        return acc + s * s;
      },
      kAddLanes);
  storeOutputs<T>(p, partial, y, cores, [&](std::int64_t o, const float* blocks) {
    const float m = max_abs[static_cast<std::size_t>(o)];
    if (!std::isfinite(m) || m == 0.0f) return m;  // NaN, inf or 0
    return std::sqrt(pairwiseSum(blocks, p.blocks)) / scale[static_cast<std::size_t>(o)];
  });
}

// The p-norm for p != 2, in float32 over blocks as the sum: p = inf / -inf the max / min of |x|, p = 0 the
// count of nonzero elements (NaN counts), p = 1 the sum of |x|; other p > 0 scaled by the max |x| (as the
// L2 norm) so that |x|^p neither overflows nor underflows; p < 0 (sum |x|^p)^(1/p) directly (a zero gives
// inf, so the norm 0). NaN anywhere gives NaN (except p = 0). The empty reductions: 0 (validate() refuses
// p = ±inf and p < 0 there, which have no identity).
template <typename T>
void pNormKernel(const TensorView& x, const TensorView& y, std::uint32_t mask, float p, int cores) {
  const BlockPlan plan(x, mask);
  if (plan.outputs == 0) return;
  const IndexSpace ys = allDims(y);
  if (plan.k == 0) {
    for (std::int64_t o = 0; o < plan.outputs; ++o) typed<T>(y)[ys.offset(o)] = store<T>(0.0f);
    return;
  }
  const T* xd = typed<const T>(x);
  const auto extreme = [&](bool largest) {
    const float init = largest ? 0.0f : kInf;
    const auto fold = [largest](float acc, float v) {
      const float a = std::fabs(v);
      if (std::isnan(acc) || std::isnan(a)) return kNaN;
      return largest ? std::max(acc, a) : std::min(acc, a);
    };
    return foldBlocks(
        plan, xd, cores, init, [&](float acc, std::int64_t, float v) { return fold(acc, v); }, fold);
  };
  const auto combine = [&](const std::vector<float>& blocks, std::int64_t o, bool largest) {
    float m = largest ? 0.0f : kInf;
    for (std::int64_t b = 0; b < plan.blocks; ++b) {
      const float v = blocks[static_cast<std::size_t>(o * plan.blocks + b)];
      if (std::isnan(v)) return kNaN;
      m = largest ? std::max(m, v) : std::min(m, v);
    }
    return m;
  };
  if (std::isinf(p)) {
    const std::vector<float> blocks = extreme(p > 0);
    for (std::int64_t o = 0; o < plan.outputs; ++o)
      typed<T>(y)[ys.offset(o)] = store<T>(combine(blocks, o, p > 0));
    return;
  }
  if (p == 0.0f || p == 1.0f || p < 0.0f) {
    const std::vector<float> partial = foldBlocks(
        plan, xd, cores, 0.0f,
        [p](float acc, std::int64_t, float v) {
          if (p == 0.0f) return acc + (v != 0.0f ? 1.0f : 0.0f);  // NaN != 0
          if (p == 1.0f) return acc + std::fabs(v);
          return acc + std::pow(std::fabs(v), p);
        },
        kAddLanes);
    storeOutputs<T>(plan, partial, y, cores, [&](std::int64_t, const float* blocks) {
      const float sum = pairwiseSum(blocks, plan.blocks);
      return p < 0.0f ? std::pow(sum, 1.0f / p) : sum;
    });
    return;
  }
  const std::vector<float> block_max = extreme(true);
  std::vector<float> max_abs(static_cast<std::size_t>(plan.outputs));
  for (std::int64_t o = 0; o < plan.outputs; ++o)
    max_abs[static_cast<std::size_t>(o)] = combine(block_max, o, true);
  const std::vector<float> partial = foldBlocks(
      plan, xd, cores, 0.0f,
      [&](float acc, std::int64_t o, float v) {
        const float m = max_abs[static_cast<std::size_t>(o)];
        if (!std::isfinite(m) || m == 0.0f) return acc;
        return acc + std::pow(std::fabs(v) / m, p);
      },
      kAddLanes);
  storeOutputs<T>(plan, partial, y, cores, [&](std::int64_t o, const float* blocks) {
    const float m = max_abs[static_cast<std::size_t>(o)];
    if (!std::isfinite(m) || m == 0.0f) return m;  // NaN, inf or 0
    return m * std::pow(pairwiseSum(blocks, plan.blocks), 1.0f / p);
  });
}

// The variance in two passes: the mean of each output, then the sum of squared deviations from it,
// divided by N - 1 (unbiased) or N. A divisor <= 0 gives NaN, as PyTorch (which also warns).
template <typename T>
void varKernel(const TensorView& x, const TensorView& y, std::uint32_t mask, bool unbiased, int cores) {
  const BlockPlan p(x, mask);
  if (p.outputs == 0) return;
  const IndexSpace ys = allDims(y);
  const std::int64_t divisor = p.k - (unbiased ? 1 : 0);
  if (p.k == 0 || divisor <= 0) {
    for (std::int64_t o = 0; o < p.outputs; ++o) typed<T>(y)[ys.offset(o)] = store<T>(kNaN);
    return;
  }
  const T* xd = typed<const T>(x);
  const auto count = static_cast<float>(p.k);
  const std::vector<float> sums = foldBlocks(
      p, xd, cores, 0.0f, [](float acc, std::int64_t, float v) { return acc + v; }, kAddLanes);
  std::vector<float> mean(static_cast<std::size_t>(p.outputs));
  for (std::int64_t o = 0; o < p.outputs; ++o) {
    mean[static_cast<std::size_t>(o)] = pairwiseSum(sums.data() + o * p.blocks, p.blocks) / count;
  }
  const std::vector<float> partial = foldBlocks(
      p, xd, cores, 0.0f,
      [&](float acc, std::int64_t o, float v) {
        const float d = v - mean[static_cast<std::size_t>(o)];
        return acc + d * d;
      },
      kAddLanes);
  const auto div = static_cast<float>(divisor);
  storeOutputs<T>(p, partial, y, cores,
                  [&](std::int64_t, const float* blocks) { return pairwiseSum(blocks, p.blocks) / div; });
}

// The sum of an integer or bool tensor: exact, in 64-bit two's complement (wrapping as PyTorch's int64
// sum), stored into y's int64 or x's own type (wrapping again). The order does not matter.
template <typename T>
void integerSumKernel(const TensorView& x, const TensorView& y, std::uint32_t mask, int cores) {
  const IndexSpace kept = reduce::dimsOf(x, mask, false), reduced = reduce::dimsOf(x, mask, true);
  const IndexSpace ys = allDims(y);
  const std::int64_t outputs = kept.count(), k = reduced.count();
  const T* xd = typed<const T>(x);
  parallelFor(outputs, grainFor(k), cores, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t o = begin; o < end; ++o) {
      std::uint64_t acc = 0;
      const std::int64_t base = kept.offset(o);
      Cursor c(reduced, 0);
      for (std::int64_t j = 0; j < k; ++j, c.next()) {
        acc += static_cast<std::uint64_t>(static_cast<std::int64_t>(xd[base + c.offset()]));
      }
      const auto sum = static_cast<std::int64_t>(acc);
      if (y.dtype == MLUOP_DTYPE_INT64) {
        typed<std::int64_t>(y)[ys.offset(o)] = sum;
      } else {
        typed<T>(y)[ys.offset(o)] = static_cast<T>(sum);  // x's own type: modular (bool: != 0)
      }
    }
  });
}

template <typename Args>
Status sumLike(const Launch& launch, const Args& a, bool mean) {
  std::uint32_t mask = 0;
  MLU_RETURN_IF_ERROR(reduce::reducedDimMask(a.dims, a.x.ndim, mask));
  if (!isFloating(a.x.dtype)) {  // sum of integers or bools (validate() refused them for mean)
    return launch.enqueue([x = a.x, y = a.y, mask, cores = launch.cores()] {
      dispatchAll(x.dtype, [&]<typename T>() {
        if constexpr (std::is_integral_v<T>) integerSumKernel<T>(x, y, mask, cores);
      });
    });
  }
  return launch.enqueue([x = a.x, y = a.y, mask, mean, cores = launch.cores()] {
    dispatchDevice(x.dtype, [&]<typename T>() { sumKernel<T>(x, y, mask, mean, cores); });
  });
}

// ---- max / min / argmax ----

// First extremum along dim d (first NaN if any); values may be absent (argmax). Floating values compare in
// float32, integers and bool in their own type (exact).
template <typename T, bool kMax>
void extremumKernel(const TensorView& x, const TensorView& values, const TensorView& indices, int d,
                    int cores) {
  using C = std::conditional_t<std::is_integral_v<T>, T, float>;
  const auto valueOf = [](T v) -> C {
    if constexpr (std::is_integral_v<T>) {
      return v;
    } else {
      return load<float>(v);
    }
  };
  const auto isNan = [](C v) {
    if constexpr (std::is_integral_v<T>) {
      return false;
    } else {
      return std::isnan(v);
    }
  };
  const DimSplit s = splitAt(x, d);
  const IndexSpace vs = allDims(values);
  const IndexSpace is = allDims(indices);
  const std::int64_t outputs = s.others.count();
  const T* xd = typed<const T>(x);
  auto* id = typed<std::int64_t>(indices);
  parallelFor(outputs, grainFor(s.size), cores, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t o = begin; o < end; ++o) {
      const std::int64_t base = s.others.offset(o);
      C best = valueOf(xd[base]);
      std::int64_t best_k = 0;
      for (std::int64_t k = 1; k < s.size && !isNan(best); ++k) {
        const C v = valueOf(xd[base + k * s.stride]);
        if (isNan(v) || (kMax ? v > best : v < best)) {
          best = v;
          best_k = k;
        }
      }
      if (values.present) {
        if constexpr (std::is_integral_v<T>) {
          typed<T>(values)[vs.offset(o)] = best;
        } else {
          typed<T>(values)[vs.offset(o)] = store<T>(best);
        }
      }
      id[is.offset(o)] = best_k;
    }
  });
}

template <bool kMax, typename Args>
Status maxMin(const Launch& launch, const Args& a) {
  int d = 0;
  MLU_RETURN_IF_ERROR(reduce::normalizeDim(a.dim, a.x.ndim, "dim", d));
  return launch.enqueue([x = a.x, values = a.values, indices = a.indices, d, cores = launch.cores()] {
    dispatchAll(x.dtype, [&]<typename T>() {
      if constexpr (!std::is_same_v<T, double>) extremumKernel<T, kMax>(x, values, indices, d, cores);
    });
  });
}

// ---- softmax / log_softmax ----

// e^a for softmax's a = x - max <= 0: fast_exp.h's, and 0 below -87 (e^a < 1.7e-38 there; a masked -inf
// gives exactly 0); a NaN stays NaN. The scalar and 8-lane forms give the same bits.
inline float softmaxExp(float x) {
  const float v = clampedExp(x);
  if (std::isnan(x)) return x;
  return x >= -87.0f ? v : 0.0f;
}

#if defined(__AVX2__) && defined(__FMA__)
inline __m256 softmaxExp8(__m256 x) {
  const __m256 kept = _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ), clampedExp8(x));
  return _mm256_blendv_ps(kept, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
#endif

// The row max of n contiguous floats, NaN skipped (-inf for none): m = v > m ? v : m, in 8 lanes.
inline float rowMax(const float* x, std::int64_t n) {
  float lane[kSumLanes];
  std::fill(lane, lane + kSumLanes, -kInf);
  std::int64_t j = 0;
  for (; j + kSumLanes <= n; j += kSumLanes) {
    for (int l = 0; l < kSumLanes; ++l) lane[l] = x[j + l] > lane[l] ? x[j + l] : lane[l];
  }
  for (; j < n; ++j) lane[j % kSumLanes] = x[j] > lane[j % kSumLanes] ? x[j] : lane[j % kSumLanes];
  float m = lane[0];
  for (int l = 1; l < kSumLanes; ++l) m = lane[l] > m ? lane[l] : m;
  return m;
}

// The sum of e^(x[j] - m) over n contiguous floats in the device's order (blocked_sum.h), each e^(x[j] - m)
// also stored into e when it is not null (e may be x).
inline float expSumRow(const float* x, float m, float* e, std::int64_t n) {
  return sumOfBlocks(n, [&](std::int64_t begin, std::int64_t end) {
    float lane[kSumLanes] = {};
    std::int64_t j = begin;
#if defined(__AVX2__) && defined(__FMA__)
    __m256 acc = _mm256_setzero_ps();
    const __m256 mv = _mm256_set1_ps(m);
    for (; j + kSumLanes <= end; j += kSumLanes) {
      const __m256 v = softmaxExp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), mv));
      if (e != nullptr) _mm256_storeu_ps(e + j, v);
      acc = _mm256_add_ps(acc, v);
    }
    _mm256_storeu_ps(lane, acc);
#endif
    for (; j < end; ++j) {
      const float v = softmaxExp(x[j] - m);
      if (e != nullptr) e[j] = v;
      lane[(j - begin) % kSumLanes] += v;
    }
    return combineLanes(lane);
  });
}

// softmax / log_softmax of one contiguous float32 row.
template <bool kLog>
void softmaxRow(const float* x, float* y, std::int64_t k) {
  const float m = rowMax(x, k);
  if constexpr (kLog) {
    const float log_sum = fastLog(expSumRow(x, m, nullptr, k));
    for (std::int64_t j = 0; j < k; ++j) y[j] = (x[j] - m) - log_sum;
  } else {
    const float inv = 1.0f / expSumRow(x, m, y, k);
    for (std::int64_t j = 0; j < k; ++j) y[j] *= inv;
  }
}

// Along dim d: m = max (NaN-free), s = sum e^(x-m); softmax = e^(x-m) / s, log_softmax = (x-m) - ln s.
// Contiguous float32 rows are computed in place; any other row is first gathered into float32 and
// scattered back (rounded once), so every layout and dtype runs the same float32 operations.
template <typename T, bool kLog>
void softmaxKernel(const TensorView& x, const TensorView& y, int d, int cores) {
  const DimSplit xs = splitAt(x, d);
  const DimSplit ys = splitAt(y, d);
  const std::int64_t rows = xs.others.count();
  const std::int64_t k = xs.size;
  if (k == 0) return;
  const T* xd = typed<const T>(x);
  T* yd = typed<T>(y);
  const bool dense = std::is_same_v<T, float> && xs.stride == 1 && ys.stride == 1;
  parallelFor(rows, grainFor(3 * k), cores, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> buf(dense ? 0 : static_cast<std::size_t>(k));
    for (std::int64_t r = begin; r < end; ++r) {
      const T* xr = xd + xs.others.offset(r);
      T* yr = yd + ys.others.offset(r);
      if constexpr (std::is_same_v<T, float>) {
        if (dense) {
          softmaxRow<kLog>(xr, yr, k);
          continue;
        }
      }
      for (std::int64_t j = 0; j < k; ++j) buf[static_cast<std::size_t>(j)] = load<float>(xr[j * xs.stride]);
      softmaxRow<kLog>(buf.data(), buf.data(), k);
      for (std::int64_t j = 0; j < k; ++j) yr[j * ys.stride] = store<T>(buf[static_cast<std::size_t>(j)]);
    }
  });
}

// One contiguous float32 row of the backward: softmax gi = y (g - sum(g y)); log_softmax
// gi = g - e^y sum(g) (gi may be g or y).
template <bool kLog>
void softmaxBackwardRow(const float* y, const float* g, float* gi, std::int64_t k) {
  if constexpr (kLog) {
    const float sum = blockedSum(k, [&](std::int64_t j) { return g[j]; });
    for (std::int64_t j = 0; j < k; ++j) gi[j] = std::fma(-softmaxExp(y[j]), sum, g[j]);
  } else {
    const float dot = blockedSum(k, [&](std::int64_t j) { return g[j] * y[j]; });
    for (std::int64_t j = 0; j < k; ++j) gi[j] = y[j] * (g[j] - dot);
  }
}

template <typename T, bool kLog>
void softmaxBackwardKernel(const TensorView& y, const TensorView& g, const TensorView& gi, int d, int cores) {
  const DimSplit ys = splitAt(y, d);
  const DimSplit gs = splitAt(g, d);
  const DimSplit is = splitAt(gi, d);
  const std::int64_t rows = ys.others.count();
  const std::int64_t k = ys.size;
  if (k == 0) return;
  const T* yd = typed<const T>(y);
  const T* gd = typed<const T>(g);
  T* id = typed<T>(gi);
  const bool dense = std::is_same_v<T, float> && ys.stride == 1 && gs.stride == 1 && is.stride == 1;
  parallelFor(rows, grainFor(3 * k), cores, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> yb(dense ? 0 : static_cast<std::size_t>(k)), gb(yb.size());
    for (std::int64_t r = begin; r < end; ++r) {
      const T* yr = yd + ys.others.offset(r);
      const T* gr = gd + gs.others.offset(r);
      T* ir = id + is.others.offset(r);
      if constexpr (std::is_same_v<T, float>) {
        if (dense) {
          softmaxBackwardRow<kLog>(yr, gr, ir, k);
          continue;
        }
      }
      for (std::int64_t j = 0; j < k; ++j) {
        yb[static_cast<std::size_t>(j)] = load<float>(yr[j * ys.stride]);
        gb[static_cast<std::size_t>(j)] = load<float>(gr[j * gs.stride]);
      }
      softmaxBackwardRow<kLog>(yb.data(), gb.data(), gb.data(), k);
      for (std::int64_t j = 0; j < k; ++j) ir[j * is.stride] = store<T>(gb[static_cast<std::size_t>(j)]);
    }
  });
}

// MLU_SIM_FAULT's unstable softmax: no max-subtraction, and every exponential, the running sum and the
// result rounded to T (float32 arithmetic on values of T), as a naive half kernel computes. In float32 it
// overflows past logits of 88; in float16 and bfloat16 its sum drifts by many ULPs over a long row.
template <typename T, bool kLog>
void unstableSoftmaxKernel(const TensorView& x, const TensorView& y, int d) {
  const DimSplit xs = splitAt(x, d);
  const DimSplit ys = splitAt(y, d);
  const std::int64_t rows = xs.others.count();
  const std::int64_t k = xs.size;
  const T* xd = typed<const T>(x);
  T* yd = typed<T>(y);
  auto round = [](float v) { return load<float>(store<T>(v)); };
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = xd + xs.others.offset(r);
    T* yr = yd + ys.others.offset(r);
    float sum = 0;
    for (std::int64_t j = 0; j < k; ++j) sum = round(sum + round(std::exp(load<float>(xr[j * xs.stride]))));
    for (std::int64_t j = 0; j < k; ++j) {
      const float v = load<float>(xr[j * xs.stride]);
      yr[j * ys.stride] = store<T>(kLog ? v - round(std::log(sum)) : round(std::exp(v)) / sum);
    }
  }
}

template <bool kLog, typename Args>
Status softmaxForward(const Launch& launch, const Args& a) {
  int d = 0;
  MLU_RETURN_IF_ERROR(reduce::normalizeDim(a.dim, a.x.ndim, "dim", d));
  if (launch.hasFault(FaultKind::kUnstable)) {
    return launch.enqueue([x = a.x, y = a.y, d] {
      dispatchDevice(x.dtype, [&]<typename T>() { unstableSoftmaxKernel<T, kLog>(x, y, d); });
    });
  }
  return launch.enqueue([x = a.x, y = a.y, d, cores = launch.cores()] {
    dispatchDevice(x.dtype, [&]<typename T>() { softmaxKernel<T, kLog>(x, y, d, cores); });
  });
}

template <bool kLog, typename Args>
Status softmaxBackward(const Launch& launch, const Args& a) {
  int d = 0;
  MLU_RETURN_IF_ERROR(reduce::normalizeDim(a.dim, a.y.ndim, "dim", d));
  return launch.enqueue([y = a.y, g = a.grad_output, gi = a.grad_input, d, cores = launch.cores()] {
    dispatchDevice(y.dtype, [&]<typename T>() { softmaxBackwardKernel<T, kLog>(y, g, gi, d, cores); });
  });
}

// ---- nll_loss / cross_entropy ----

// The targets of a loss and the class weights: row r's target, whether it counts (not ignore_index), its
// weight (1 without weights; 1 for a target outside [0, C), whose loss is NaN anyway). Rows as
// reduce::rowOffsets numbers them ([C], [N, C] or [N, C, d1, ...] scores).
struct Targets {
  const std::int64_t* data;
  std::vector<std::int64_t> offsets;  // of each row's target
  std::int64_t ignore_index;
  std::int64_t classes;
  std::vector<float> weights;  // [C], empty: every class weighs 1

  std::int64_t rows() const { return static_cast<std::int64_t>(offsets.size()); }
  std::int64_t at(std::int64_t r) const { return data[offsets[static_cast<std::size_t>(r)]]; }
  bool ignored(std::int64_t r) const { return at(r) == ignore_index; }
  bool inRange(std::int64_t t) const { return t >= 0 && t < classes; }
  float weightOf(std::int64_t t) const {
    return weights.empty() || !inRange(t) ? 1.0f : weights[static_cast<std::size_t>(t)];
  }
  float weightOfClass(std::int64_t c) const {
    return weights.empty() ? 1.0f : weights[static_cast<std::size_t>(c)];
  }
  // The divisor of a mean: the summed weights of the rows that count (PyTorch's; their count without
  // weights). Out-of-range targets count: their loss is NaN.
  float meanDivisor() const {
    double total = 0.0;
    for (std::int64_t r = 0; r < rows(); ++r)
      total += ignored(r) ? 0.0 : static_cast<double>(weightOf(at(r)));
    return static_cast<float>(total);
  }
};

template <typename T>
Targets targetsOf(const TensorView& target, std::int64_t ignore_index, std::int64_t classes,
                  const TensorView& weight) {
  Targets t{typed<const std::int64_t>(target), reduce::rowOffsets(target, -1), ignore_index, classes, {}};
  if (weight.present) {
    t.weights.resize(static_cast<std::size_t>(classes));
    const T* w = typed<const T>(weight);
    for (std::int64_t c = 0; c < classes; ++c)
      t.weights[static_cast<std::size_t>(c)] = load<float>(w[c * weight.stride(0)]);
  }
  return t;
}

// The scores of a loss by row: row r's class c is at base[r] + c * class_stride.
struct ScoreRows {
  std::vector<std::int64_t> base;
  std::int64_t class_stride;
};
inline ScoreRows scoreRows(const TensorView& scores) {
  const int d = reduce::lossClassDim(scores);
  return ScoreRows{reduce::rowOffsets(scores, d), scores.stride(d)};
}

// loss_of(r) gives row r's loss (0 for ignored rows); the op's output is those (in the target's shape),
// their sum or their weighted mean.
template <typename T, typename LossOf>
void lossForwardKernel(int reduction, const TensorView& output, const Targets& targets, int cores,
                       std::int64_t work_per_row, LossOf&& loss_of) {
  T* out = typed<T>(output);
  const std::int64_t n = targets.rows();
  if (reduction == MLUOP_REDUCTION_NONE) {
    const std::vector<std::int64_t> at = reduce::rowOffsets(output, -1);
    parallelFor(n, grainFor(work_per_row), cores, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) out[at[static_cast<std::size_t>(r)]] = store<T>(loss_of(r));
    });
    return;
  }
  std::vector<float> losses(static_cast<std::size_t>(n));
  parallelFor(n, grainFor(work_per_row), cores, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) losses[static_cast<std::size_t>(r)] = loss_of(r);
  });
  float total = blockedSum(n, [&](std::int64_t r) { return losses[static_cast<std::size_t>(r)]; });
  if (reduction == MLUOP_REDUCTION_MEAN) total /= targets.meanDivisor();  // 0/0: NaN
  out[0] = store<T>(total);
}

// The gradient scale of row r: grad_output at r (none), grad_output[] (sum) or grad_output[] / the mean's
// divisor (a zero divisor makes the counted rows' gradient NaN, as PyTorch's g / total_weight).
template <typename T>
struct GradScale {
  const T* g;
  std::vector<std::int64_t> at_row;  // none: grad_output's offset of each row
  int reduction;
  float inv_divisor;

  float at(std::int64_t r) const {
    if (reduction == MLUOP_REDUCTION_NONE) return load<float>(g[at_row[static_cast<std::size_t>(r)]]);
    const float v = load<float>(g[0]);
    return reduction == MLUOP_REDUCTION_MEAN ? v * inv_divisor : v;
  }
};

template <typename T>
GradScale<T> gradScaleOf(int reduction, const TensorView& g, const Targets& targets) {
  GradScale<T> s{typed<const T>(g), {}, reduction, 1.0f};
  if (reduction == MLUOP_REDUCTION_NONE) s.at_row = reduce::rowOffsets(g, -1);
  if (reduction == MLUOP_REDUCTION_MEAN) s.inv_divisor = 1.0f / targets.meanDivisor();
  return s;
}

template <typename T>
void nllForwardKernel(const nll_loss_forward_args& a, int cores) {
  const Targets targets = targetsOf<T>(a.target, a.ignore_index, reduce::lossClasses(a.input), a.weight);
  const ScoreRows rows = scoreRows(a.input);
  const T* in = typed<const T>(a.input);
  lossForwardKernel<T>(a.reduction, a.output, targets, cores, 1, [&](std::int64_t r) {
    const std::int64_t t = targets.at(r);
    if (t == a.ignore_index) return 0.0f;
    return targets.inRange(t)
               ? -targets.weightOf(t) *
                     load<float>(in[rows.base[static_cast<std::size_t>(r)] + t * rows.class_stride])
               : kNaN;
  });
}

template <typename T>
void nllBackwardKernel(const nll_loss_backward_args& a, int cores) {
  const std::int64_t c = reduce::lossClasses(a.grad_input);
  const Targets targets = targetsOf<T>(a.target, a.ignore_index, c, a.weight);
  const GradScale<T> scale = gradScaleOf<T>(a.reduction, a.grad_output, targets);
  const ScoreRows rows = scoreRows(a.grad_input);
  T* gi = typed<T>(a.grad_input);
  parallelFor(targets.rows(), grainFor(c), cores, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const std::int64_t t = targets.at(r);
      const bool ignored = t == a.ignore_index;
      const bool valid = targets.inRange(t);
      T* row = gi + rows.base[static_cast<std::size_t>(r)];
      for (std::int64_t j = 0; j < c; ++j) {
        float v = 0.0f;
        if (!ignored) v = !valid ? kNaN : (j == t ? -targets.weightOf(t) * scale.at(r) : 0.0f);
        row[j * rows.class_stride] = store<T>(v);
      }
    }
  });
}

// Row r of logits: its max and ln(sum e^(x - max)).
struct RowStats {
  float max;
  float log_sum;
};
template <typename T>
RowStats rowStats(const T* row, std::int64_t c, std::int64_t stride) {
  float m = -kInf;
  for (std::int64_t j = 0; j < c; ++j) m = std::max(m, load<float>(row[j * stride]));
  const float sum = blockedSum(c, [&](std::int64_t j) { return fastExp(load<float>(row[j * stride]) - m); });
  return {m, fastLog(sum)};
}

// PyTorch's cross entropy with class weights w and label smoothing e over C classes, for a counted row:
// (1 - e) w_t (lse - x_t) + (e / C) sum_c w_c (lse - x_c), lse = ln sum e^x.
template <typename T>
void crossEntropyForwardKernel(const cross_entropy_forward_args& a, int cores) {
  const std::int64_t c = reduce::lossClasses(a.logits);
  const Targets targets = targetsOf<T>(a.target, a.ignore_index, c, a.weight);
  const ScoreRows rows = scoreRows(a.logits);
  const T* x = typed<const T>(a.logits);
  const std::int64_t s1 = rows.class_stride;
  const auto smoothing = static_cast<float>(a.label_smoothing);
  const float smooth_per_class = c > 0 ? smoothing / static_cast<float>(c) : 0.0f;
  lossForwardKernel<T>(a.reduction, a.output, targets, cores, 2 * c, [&](std::int64_t r) {
    const std::int64_t t = targets.at(r);
    if (t == a.ignore_index) return 0.0f;
    if (!targets.inRange(t)) return kNaN;
    const T* row = x + rows.base[static_cast<std::size_t>(r)];
    const RowStats st = rowStats(row, c, s1);
    const float lse = st.max + st.log_sum;
    float loss =
        (1.0f - smoothing) * targets.weightOf(t) * ((st.max - load<float>(row[t * s1])) + st.log_sum);
    if (smoothing != 0.0f) {
      const float smooth = blockedSum(
          c, [&](std::int64_t j) { return targets.weightOfClass(j) * (lse - load<float>(row[j * s1])); });
      loss += smooth_per_class * smooth;
    }
    return loss;
  });
}

// d loss_r / d x_c = (1 - e) w_t (p_c - [c = t]) + (e / C) (p_c W - w_c), W = sum_c w_c.
template <typename T>
void crossEntropyBackwardKernel(const cross_entropy_backward_args& a, int cores) {
  const std::int64_t c = reduce::lossClasses(a.logits);
  const Targets targets = targetsOf<T>(a.target, a.ignore_index, c, a.weight);
  const GradScale<T> scale = gradScaleOf<T>(a.reduction, a.grad_output, targets);
  const ScoreRows rows = scoreRows(a.logits), grad_rows = scoreRows(a.grad_logits);
  const T* x = typed<const T>(a.logits);
  T* gx = typed<T>(a.grad_logits);
  const std::int64_t s1 = rows.class_stride, g1 = grad_rows.class_stride;
  const auto smoothing = static_cast<float>(a.label_smoothing);
  const float smooth_per_class = c > 0 ? smoothing / static_cast<float>(c) : 0.0f;
  float weight_total = 0.0f;
  for (std::int64_t j = 0; j < c; ++j) weight_total += targets.weightOfClass(j);
  parallelFor(targets.rows(), grainFor(3 * c), cores, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const std::int64_t t = targets.at(r);
      T* out = gx + grad_rows.base[static_cast<std::size_t>(r)];
      if (t == a.ignore_index || !targets.inRange(t)) {
        const float v = t == a.ignore_index ? 0.0f : kNaN;
        for (std::int64_t j = 0; j < c; ++j) out[j * g1] = store<T>(v);
        continue;
      }
      const T* row = x + rows.base[static_cast<std::size_t>(r)];
      const RowStats st = rowStats(row, c, s1);
      const float g = scale.at(r);
      const float hard = (1.0f - smoothing) * targets.weightOf(t);
      for (std::int64_t j = 0; j < c; ++j) {
        const float p = fastExp((load<float>(row[j * s1]) - st.max) - st.log_sum);
        float d = hard * (p - (j == t ? 1.0f : 0.0f));
        if (smoothing != 0.0f) d += smooth_per_class * (p * weight_total - targets.weightOfClass(j));
        out[j * g1] = store<T>(d * g);
      }
    }
  });
}

// ---- pooling ----

// Element (n, c, h, w) of a 4-d tensor.
template <typename T>
struct Plane4 {
  T* data;
  std::array<std::int64_t, 4> s;

  explicit Plane4(const TensorView& t)
      : data(typed<T>(t)), s{t.stride(0), t.stride(1), t.stride(2), t.stride(3)} {}
  T& at(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    return data[n * s[0] + c * s[1] + h * s[2] + w * s[3]];
  }
};

// The input rows/cols [begin, end) of output position o along one axis, and its extent counting padding.
struct Window {
  std::int64_t begin, end, padded;
};
inline Window windowOf(std::int64_t o, std::int64_t stride, std::int64_t pad, std::int64_t kernel,
                       std::int64_t size) {
  const std::int64_t start = o * stride - pad;
  const std::int64_t padded_end = std::min(start + kernel, size + pad);
  return {std::max<std::int64_t>(start, 0), std::min(padded_end, size), padded_end - start};
}

// The divisor of an average window: its padded area, or its count of input elements.
inline float avgDivisor(const Window& wh, const Window& ww, bool count_include_pad) {
  return static_cast<float>(count_include_pad ? wh.padded * ww.padded
                                              : (wh.end - wh.begin) * (ww.end - ww.begin));
}

// Runs fn(n, c) for every [n, c] plane, the planes split across the cores.
template <typename Fn>
void forEachPlane(const PoolGeometry& g, std::int64_t work_per_plane, int cores, Fn&& fn) {
  parallelFor(g.n * g.c, grainFor(work_per_plane), cores, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t plane = begin; plane < end; ++plane) fn(plane / g.c, plane % g.c);
  });
}

// Runs fn(oh, ow, window rows, window cols) for every output position of a plane.
template <typename Fn>
void forEachWindow(const PoolGeometry& g, Fn&& fn) {
  for (std::int64_t oh = 0; oh < g.ho; ++oh) {
    const Window wh = windowOf(oh, g.sh, g.ph, g.kh, g.h);
    for (std::int64_t ow = 0; ow < g.wo; ++ow) fn(oh, ow, wh, windowOf(ow, g.sw, g.pw, g.kw, g.w));
  }
}

// Stores a plane's float32 gradient buffer (row-major H x W) into grad_input.
template <typename T>
void storePlane(const PoolGeometry& g, const std::vector<float>& acc, const Plane4<T>& out, std::int64_t n,
                std::int64_t c) {
  for (std::int64_t h = 0; h < g.h; ++h) {
    for (std::int64_t w = 0; w < g.w; ++w)
      out.at(n, c, h, w) = store<T>(acc[static_cast<std::size_t>(h * g.w + w)]);
  }
}

// Window maxima and their flat h * W + w indices: the first maximum, or the first NaN, over the window's
// taps (every dh-th row, dw-th column) inside the input; padding is -inf, so it never wins. The index
// starts at the first tap inside the input, as PyTorch's. The taps inside are worked out once per window
// row and column, and a plane's rows are read through a pointer (the 4-d index per tap was most of the
// kernel's time).
template <typename T>
void maxPoolForwardKernel(const PoolGeometry& g, const TensorView& x, const TensorView& y,
                          const TensorView& indices, int cores) {
  const Plane4<const T> xp(x);
  const Plane4<T> yp(y);
  const Plane4<std::int64_t> ip(indices);
  // The taps [first, last) of a window starting at `start` that fall inside [0, size).
  auto inside = [](std::int64_t start, std::int64_t dilation, std::int64_t kernel, std::int64_t size) {
    std::int64_t first = 0, last = kernel;
    while (first < kernel && start + first * dilation < 0) ++first;
    while (last > first && start + (last - 1) * dilation >= size) --last;
    return std::pair{first, last};
  };
  forEachPlane(g, g.ho * g.wo * g.kh * g.kw, cores, [&](std::int64_t n, std::int64_t c) {
    const T* plane = &xp.at(n, c, 0, 0);
    const std::int64_t row_stride = xp.s[2], col_stride = xp.s[3];
    for (std::int64_t oh = 0; oh < g.ho; ++oh) {
      const std::int64_t h0 = oh * g.sh - g.ph;
      const auto [i0, i1] = inside(h0, g.dh, g.kh, g.h);
      for (std::int64_t ow = 0; ow < g.wo; ++ow) {
        const std::int64_t w0 = ow * g.sw - g.pw;
        const auto [j0, j1] = inside(w0, g.dw, g.kw, g.w);
        float best = -kInf;
        std::int64_t best_index = (h0 + i0 * g.dh) * g.w + (w0 + j0 * g.dw);
        // Without branches on the values (a max of random data mispredicts every other tap); a NaN is
        // only noted, and its window looked at again tap by tap.
        bool nan = false;
        for (std::int64_t i = i0; i < i1; ++i) {
          const std::int64_t h = h0 + i * g.dh;
          const T* row = plane + h * row_stride;
          for (std::int64_t j = j0; j < j1; ++j) {
            const std::int64_t w = w0 + j * g.dw;
            const float v = load<float>(row[w * col_stride]);
            const bool take = v > best;
            best = take ? v : best;
            best_index = take ? h * g.w + w : best_index;
            nan |= v != v;
          }
        }
        if (nan) {  // the first NaN wins
          for (std::int64_t i = i0, found = 0; i < i1 && !found; ++i) {
            const std::int64_t h = h0 + i * g.dh;
            for (std::int64_t j = j0; j < j1 && !found; ++j) {
              const std::int64_t w = w0 + j * g.dw;
              const float v = load<float>(plane[h * row_stride + w * col_stride]);
              if (std::isnan(v)) {
                best = v;
                best_index = h * g.w + w;
                found = 1;
              }
            }
          }
        }
        yp.at(n, c, oh, ow) = store<T>(best);
        ip.at(n, c, oh, ow) = best_index;
      }
    }
  });
}

// Scatter-adds grad_output at the indices into a float32 plane, then rounds the plane into grad_input.
template <typename T>
void maxPoolBackwardKernel(const PoolGeometry& g, const TensorView& grad_output, const TensorView& indices,
                           const TensorView& grad_input, int cores) {
  const Plane4<const T> gp(grad_output);
  const Plane4<const std::int64_t> ip(indices);
  const Plane4<T> out(grad_input);
  const std::int64_t plane_size = g.h * g.w;
  forEachPlane(g, plane_size + g.ho * g.wo, cores, [&](std::int64_t n, std::int64_t c) {
    std::vector<float> acc(static_cast<std::size_t>(plane_size), 0.0f);
    for (std::int64_t oh = 0; oh < g.ho; ++oh) {
      for (std::int64_t ow = 0; ow < g.wo; ++ow) {
        const std::int64_t index = ip.at(n, c, oh, ow);
        if (index < 0 || index >= plane_size) continue;  // names no input position: nothing to route
        acc[static_cast<std::size_t>(index)] += load<float>(gp.at(n, c, oh, ow));
      }
    }
    storePlane(g, acc, out, n, c);
  });
}

template <typename T>
void avgPoolForwardKernel(const PoolGeometry& g, bool count_include_pad, const TensorView& x,
                          const TensorView& y, int cores) {
  const Plane4<const T> xp(x);
  const Plane4<T> yp(y);
  forEachPlane(g, g.ho * g.wo * g.kh * g.kw, cores, [&](std::int64_t n, std::int64_t c) {
    forEachWindow(g, [&](std::int64_t oh, std::int64_t ow, const Window& wh, const Window& ww) {
      float s = 0.0f;
      for (std::int64_t h = wh.begin; h < wh.end; ++h) {
        for (std::int64_t w = ww.begin; w < ww.end; ++w) s += load<float>(xp.at(n, c, h, w));
      }
      yp.at(n, c, oh, ow) = store<T>(s / avgDivisor(wh, ww, count_include_pad));
    });
  });
}

// Spreads each grad_output / divisor over its window in a float32 plane, then rounds the plane out.
template <typename T>
void avgPoolBackwardKernel(const PoolGeometry& g, bool count_include_pad, const TensorView& grad_output,
                           const TensorView& grad_input, int cores) {
  const Plane4<const T> gp(grad_output);
  const Plane4<T> out(grad_input);
  forEachPlane(g, g.h * g.w + g.ho * g.wo * g.kh * g.kw, cores, [&](std::int64_t n, std::int64_t c) {
    std::vector<float> acc(static_cast<std::size_t>(g.h * g.w), 0.0f);
    forEachWindow(g, [&](std::int64_t oh, std::int64_t ow, const Window& wh, const Window& ww) {
      const float share = load<float>(gp.at(n, c, oh, ow)) / avgDivisor(wh, ww, count_include_pad);
      for (std::int64_t h = wh.begin; h < wh.end; ++h) {
        for (std::int64_t w = ww.begin; w < ww.end; ++w) acc[static_cast<std::size_t>(h * g.w + w)] += share;
      }
    });
    storePlane(g, acc, out, n, c);
  });
}

// ---- adaptive_avg_pool2d ----

// PyTorch's adaptive window of output o along an axis of `in` inputs and `out` outputs:
// [floor(o in / out), ceil((o + 1) in / out)).
inline Window adaptiveWindow(std::int64_t o, std::int64_t in, std::int64_t out) {
  const std::int64_t begin = o * in / out;
  const std::int64_t end = ((o + 1) * in + out - 1) / out;
  return {begin, end, end - begin};
}

PoolGeometry adaptiveGeometry(const TensorView& in, const TensorView& out) {
  PoolGeometry g;
  g.n = in.dim(0);
  g.c = in.dim(1);
  g.h = in.dim(2);
  g.w = in.dim(3);
  g.ho = out.dim(2);
  g.wo = out.dim(3);
  return g;
}

template <typename T>
void adaptiveAvgPoolForwardKernel(const PoolGeometry& g, const TensorView& x, const TensorView& y,
                                  int cores) {
  const Plane4<const T> xp(x);
  const Plane4<T> yp(y);
  forEachPlane(g, g.h * g.w + g.ho * g.wo, cores, [&](std::int64_t n, std::int64_t c) {
    for (std::int64_t oh = 0; oh < g.ho; ++oh) {
      const Window wh = adaptiveWindow(oh, g.h, g.ho);
      for (std::int64_t ow = 0; ow < g.wo; ++ow) {
        const Window ww = adaptiveWindow(ow, g.w, g.wo);
        float s = 0.0f;
        for (std::int64_t h = wh.begin; h < wh.end; ++h) {
          for (std::int64_t w = ww.begin; w < ww.end; ++w) s += load<float>(xp.at(n, c, h, w));
        }
        yp.at(n, c, oh, ow) = store<T>(s / static_cast<float>(wh.padded * ww.padded));
      }
    }
  });
}

// Spreads each grad_output / window size over its window in a float32 plane (windows may overlap), then
// rounds the plane into grad_input (overwritten, not accumulated).
template <typename T>
void adaptiveAvgPoolBackwardKernel(const PoolGeometry& g, const TensorView& grad_output,
                                   const TensorView& grad_input, int cores) {
  const Plane4<const T> gp(grad_output);
  const Plane4<T> out(grad_input);
  forEachPlane(g, g.h * g.w + g.ho * g.wo, cores, [&](std::int64_t n, std::int64_t c) {
    std::vector<float> acc(static_cast<std::size_t>(g.h * g.w), 0.0f);
    for (std::int64_t oh = 0; oh < g.ho; ++oh) {
      const Window wh = adaptiveWindow(oh, g.h, g.ho);
      for (std::int64_t ow = 0; ow < g.wo; ++ow) {
        const Window ww = adaptiveWindow(ow, g.w, g.wo);
        const float share = load<float>(gp.at(n, c, oh, ow)) / static_cast<float>(wh.padded * ww.padded);
        for (std::int64_t h = wh.begin; h < wh.end; ++h) {
          for (std::int64_t w = ww.begin; w < ww.end; ++w)
            acc[static_cast<std::size_t>(h * g.w + w)] += share;
        }
      }
    }
    storePlane(g, acc, out, n, c);
  });
}

}  // namespace

Status device(const Launch& launch, const sum_args& a) { return sumLike(launch, a, false); }

Status device(const Launch& launch, const mean_args& a) { return sumLike(launch, a, true); }

Status device(const Launch& launch, const norm_args& a) {
  std::uint32_t mask = 0;
  MLU_RETURN_IF_ERROR(reduce::reducedDimMask(a.dims, a.x.ndim, mask));
  const auto p = static_cast<float>(a.p);
  return launch.enqueue([x = a.x, y = a.y, mask, p, cores = launch.cores()] {
    dispatchDevice(x.dtype, [&]<typename T>() {
      if (p == 2.0f) {
        normKernel<T>(x, y, mask, cores);
      } else {
        pNormKernel<T>(x, y, mask, p, cores);
      }
    });
  });
}

Status device(const Launch& launch, const var_args& a) {
  std::uint32_t mask = 0;
  MLU_RETURN_IF_ERROR(reduce::reducedDimMask(a.dims, a.x.ndim, mask));
  return launch.enqueue([x = a.x, y = a.y, mask, unbiased = a.unbiased, cores = launch.cores()] {
    dispatchDevice(x.dtype, [&]<typename T>() { varKernel<T>(x, y, mask, unbiased, cores); });
  });
}

Status device(const Launch& launch, const max_args& a) { return maxMin<true>(launch, a); }

Status device(const Launch& launch, const min_args& a) { return maxMin<false>(launch, a); }

Status device(const Launch& launch, const argmax_args& a) {
  int d = 0;
  MLU_RETURN_IF_ERROR(reduce::normalizeDim(a.dim, a.x.ndim, "dim", d));
  return launch.enqueue([x = a.x, indices = a.indices, d, cores = launch.cores()] {
    dispatchAll(x.dtype, [&]<typename T>() {
      if constexpr (!std::is_same_v<T, double> && !std::is_same_v<T, bool>) {
        extremumKernel<T, true>(x, TensorView{}, indices, d, cores);
      }
    });
  });
}

Status device(const Launch& launch, const softmax_forward_args& a) {
  return softmaxForward<false>(launch, a);
}

Status device(const Launch& launch, const softmax_backward_args& a) {
  return softmaxBackward<false>(launch, a);
}

Status device(const Launch& launch, const log_softmax_forward_args& a) {
  return softmaxForward<true>(launch, a);
}

Status device(const Launch& launch, const log_softmax_backward_args& a) {
  return softmaxBackward<true>(launch, a);
}

Status device(const Launch& launch, const nll_loss_forward_args& a) {
  return launch.enqueue([a, cores = launch.cores()] {
    dispatchDevice(a.input.dtype, [&]<typename T>() { nllForwardKernel<T>(a, cores); });
  });
}

Status device(const Launch& launch, const nll_loss_backward_args& a) {
  return launch.enqueue([a, cores = launch.cores()] {
    dispatchDevice(a.grad_output.dtype, [&]<typename T>() { nllBackwardKernel<T>(a, cores); });
  });
}

Status device(const Launch& launch, const cross_entropy_forward_args& a) {
  return launch.enqueue([a, cores = launch.cores()] {
    dispatchDevice(a.logits.dtype, [&]<typename T>() { crossEntropyForwardKernel<T>(a, cores); });
  });
}

Status device(const Launch& launch, const cross_entropy_backward_args& a) {
  return launch.enqueue([a, cores = launch.cores()] {
    dispatchDevice(a.logits.dtype, [&]<typename T>() { crossEntropyBackwardKernel<T>(a, cores); });
  });
}

Status device(const Launch& launch, const max_pool2d_forward_args& a) {
  PoolGeometry g;
  MLU_RETURN_IF_ERROR(reduce::maxPoolGeometry(a, "x", a.x, g));
  return launch.enqueue([g, x = reduce::asBatched(a.x), y = reduce::asBatched(a.y),
                         indices = reduce::asBatched(a.indices), cores = launch.cores()] {
    dispatchDevice(x.dtype, [&]<typename T>() { maxPoolForwardKernel<T>(g, x, y, indices, cores); });
  });
}

Status device(const Launch& launch, const max_pool2d_backward_args& a) {
  PoolGeometry g;
  MLU_RETURN_IF_ERROR(reduce::maxPoolGeometry(a, "grad_input", a.grad_input, g));
  return launch.enqueue([g, go = reduce::asBatched(a.grad_output), indices = reduce::asBatched(a.indices),
                         gi = reduce::asBatched(a.grad_input), cores = launch.cores()] {
    dispatchDevice(go.dtype, [&]<typename T>() { maxPoolBackwardKernel<T>(g, go, indices, gi, cores); });
  });
}

Status device(const Launch& launch, const avg_pool2d_forward_args& a) {
  PoolGeometry g;
  MLU_RETURN_IF_ERROR(reduce::poolGeometry(a.kernel, a.stride, a.padding, "x", a.x, g));
  return launch.enqueue([g, cip = a.count_include_pad, x = a.x, y = a.y, cores = launch.cores()] {
    dispatchDevice(x.dtype, [&]<typename T>() { avgPoolForwardKernel<T>(g, cip, x, y, cores); });
  });
}

Status device(const Launch& launch, const avg_pool2d_backward_args& a) {
  PoolGeometry g;
  MLU_RETURN_IF_ERROR(reduce::poolGeometry(a.kernel, a.stride, a.padding, "grad_input", a.grad_input, g));
  return launch.enqueue(
      [g, cip = a.count_include_pad, go = a.grad_output, gi = a.grad_input, cores = launch.cores()] {
        dispatchDevice(go.dtype, [&]<typename T>() { avgPoolBackwardKernel<T>(g, cip, go, gi, cores); });
      });
}

Status device(const Launch& launch, const adaptive_avg_pool2d_forward_args& a) {
  const PoolGeometry g = adaptiveGeometry(a.x, a.y);
  return launch.enqueue([g, x = a.x, y = a.y, cores = launch.cores()] {
    dispatchDevice(x.dtype, [&]<typename T>() { adaptiveAvgPoolForwardKernel<T>(g, x, y, cores); });
  });
}

Status device(const Launch& launch, const adaptive_avg_pool2d_backward_args& a) {
  const PoolGeometry g = adaptiveGeometry(a.grad_input, a.grad_output);
  return launch.enqueue([g, go = a.grad_output, gi = a.grad_input, cores = launch.cores()] {
    dispatchDevice(go.dtype, [&]<typename T>() { adaptiveAvgPoolBackwardKernel<T>(g, go, gi, cores); });
  });
}

}  // namespace mlu
