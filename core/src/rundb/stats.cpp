#include <opscope/rundb/stats.h>

#include <opscope/tensor_snapshot.h>

#include <mlu/dtype.h>

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace opscope::rundb {
namespace {

// Accumulates elements read as float64 by `get` (one loop per dtype, so that the dtype is not switched on
// per element).
template <typename Get>
void accumulate(std::int64_t n, Get&& get, TensorStats& s) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0, squares = 0;
  std::int64_t finite = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = get(i);
    if (std::isnan(v)) {
      ++s.nan;
    } else if (std::isinf(v)) {
      ++s.inf;
    } else {
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
      sum += v;
      squares += v * v;
      ++finite;
    }
  }
  if (finite > 0) {
    s.min = lo;
    s.max = hi;
    s.mean = sum / static_cast<double>(finite);
    s.l2 = std::sqrt(squares);
  }
}

// float32, the common case, eight lanes at a time (GCC/Clang vector extensions, one AVX2 register or two SSE
// ones: accumulateFloat picks the AVX2 build where the CPU has it; blends by bit masks, so that no lane takes
// a branch): sums and sums of squares in float32 lanes over blocks of 4096 elements (512 a lane: a rounding
// error of at most ~3e-5 of the sum of the magnitudes, ~1e-6 typically), the blocks' sums added in float64;
// the same bytes always give the same figures; min and max exact.
using Floats = float __attribute__((vector_size(32)));
using Ints = std::int32_t __attribute__((vector_size(32)));
constexpr int kLanes = 8;

// With copy_to set, each block is first copied there and read back from the copy while it is in L1: the
// copy and the statistics cost one pass over the source.
inline __attribute__((always_inline)) void accumulateFloatLanes(const std::byte* p, std::int64_t n,
                                                                TensorStats& s, std::byte* copy_to) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr std::int64_t kBlock = 4096;
  const Floats zero = {}, inf = zero + kInf;
  Floats lo = inf, hi = -inf;
  double sum = 0, squares = 0;
  std::int64_t nans = 0, infs = 0;
  float tail_lo = kInf, tail_hi = -kInf;
  for (std::int64_t start = 0; start < n; start += kBlock) {
    const std::int64_t m = std::min(kBlock, n - start);
    const std::byte* b = p + start * 4;
    if (copy_to != nullptr) {
      std::memcpy(copy_to + start * 4, b, static_cast<std::size_t>(m) * 4);
      b = copy_to + start * 4;
    }
    Floats bsum = zero, bsq = zero;
    Ints bnan = {}, binf = {};
    std::int64_t i = 0;
    // First the short loop for a block of finite values (nearly every block): sums, and minima and maxima
    // by plain comparisons (a NaN lane compares false and leaves them be); it counts the finite lanes, and a
    // block with another value is gone over again by the exact loop below.
    {
      Floats flo = lo, fhi = hi;
      Ints finite = {};
      std::int64_t j = 0;
      for (; j + kLanes <= m; j += kLanes) {
        Floats v;
        std::memcpy(&v, b + j * 4, sizeof v);
        const Floats a = reinterpret_cast<Floats>(reinterpret_cast<Ints>(v) & 0x7fffffff);  // |v|
        finite -= a < inf;
        bsum += v;
        bsq += v * v;
        flo = v < flo ? v : flo;
        fhi = v > fhi ? v : fhi;
      }
      std::int64_t counted = 0;
      for (int l = 0; l < kLanes; ++l) counted += finite[l];
      if (counted == j) {
        lo = flo;
        hi = fhi;
        i = j;
      } else {
        bsum = zero;
        bsq = zero;
      }
    }
    for (; i + kLanes <= m; i += kLanes) {
      Floats v;
      std::memcpy(&v, b + i * 4, sizeof v);
      const Floats a = reinterpret_cast<Floats>(reinterpret_cast<Ints>(v) & 0x7fffffff);  // |v|
      const Ints finite = a < inf;  // -1 per finite lane; NaN compares false
      // Blends by bit masks (no helper function: 32-byte vectors may not cross a call in the SSE build).
      const Ints bits = reinterpret_cast<Ints>(v);
      const Floats f = reinterpret_cast<Floats>(bits & finite);
      bsum += f;
      bsq += f * f;
      const Ints lower = finite & (v < lo), higher = finite & (v > hi);
      lo = reinterpret_cast<Floats>((bits & lower) | (reinterpret_cast<Ints>(lo) & ~lower));
      hi = reinterpret_cast<Floats>((bits & higher) | (reinterpret_cast<Ints>(hi) & ~higher));
      bnan -= v != v;
      binf -= a == inf;
    }
    double tail_sum = 0, tail_sq = 0;
    for (; i < m; ++i) {
      float v;
      std::memcpy(&v, b + i * 4, 4);
      if (v != v) {
        ++nans;
      } else if (std::fabs(v) == kInf) {
        ++infs;
      } else {
        tail_sum += v;
        tail_sq += static_cast<double>(v) * v;
        tail_lo = std::min(tail_lo, v);
        tail_hi = std::max(tail_hi, v);
      }
    }
    for (int l = 0; l < kLanes; ++l) {
      sum += bsum[l];
      squares += bsq[l];
      nans += bnan[l];
      infs += binf[l];
    }
    sum += tail_sum;
    squares += tail_sq;
  }
  s.nan = nans;
  s.inf = infs;
  const std::int64_t finite = n - nans - infs;
  if (finite > 0) {
    float min = tail_lo, max = tail_hi;
    for (int l = 0; l < kLanes; ++l) {
      min = std::min(min, lo[l]);
      max = std::max(max, hi[l]);
    }
    s.min = min;
    s.max = max;
    s.mean = sum / static_cast<double>(finite);
    s.l2 = std::sqrt(squares);
  }
}

// The same loop built for AVX2 and for the baseline, chosen once by the CPU (not with target_clones: its
// ifunc resolver runs before ThreadSanitizer's runtime is up, and crashed every program linking it).
#if defined(__x86_64__)
__attribute__((target("avx2"))) void accumulateFloatAvx2(const std::byte* p, std::int64_t n, TensorStats& s,
                                                         std::byte* copy_to) {
  accumulateFloatLanes(p, n, s, copy_to);
}
#endif

void accumulateFloat(const std::byte* p, std::int64_t n, TensorStats& s, std::byte* copy_to) {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) {
    accumulateFloatAvx2(p, n, s, copy_to);
    return;
  }
#endif
  accumulateFloatLanes(p, n, s, copy_to);
}

// Any other dtype, element by element as float64 (the dtype a constant here, so its switch folds away).
template <mluopDataType_t D>
void accumulateAs(const std::byte* p, std::int64_t n, TensorStats& s, std::byte* copy_to) {
  if (copy_to != nullptr) {
    std::memcpy(copy_to, p, static_cast<std::size_t>(n) * mlu::dtypeSize(D));
    p = copy_to;
  }
  accumulate(
      n, [p](std::int64_t i) { return elementAsDouble(D, p, static_cast<std::size_t>(i)); }, s);
}

using Accumulate = void (*)(const std::byte*, std::int64_t, TensorStats&, std::byte*);
const std::pair<mluopDataType_t, Accumulate> kAccumulators[] = {
    {MLUOP_DTYPE_FLOAT, accumulateFloat},
    {MLUOP_DTYPE_HALF, accumulateAs<MLUOP_DTYPE_HALF>},
    {MLUOP_DTYPE_BFLOAT16, accumulateAs<MLUOP_DTYPE_BFLOAT16>},
    {MLUOP_DTYPE_DOUBLE, accumulateAs<MLUOP_DTYPE_DOUBLE>},
    {MLUOP_DTYPE_INT8, accumulateAs<MLUOP_DTYPE_INT8>},
    {MLUOP_DTYPE_INT16, accumulateAs<MLUOP_DTYPE_INT16>},
    {MLUOP_DTYPE_INT32, accumulateAs<MLUOP_DTYPE_INT32>},
    {MLUOP_DTYPE_INT64, accumulateAs<MLUOP_DTYPE_INT64>},
    {MLUOP_DTYPE_UINT8, accumulateAs<MLUOP_DTYPE_UINT8>},
    {MLUOP_DTYPE_BOOL, accumulateAs<MLUOP_DTYPE_BOOL>},
};

}  // namespace

#if OPSCOPE_CHECKSUM_AVX2
std::uint64_t checksumAvx2(const void* data, std::size_t bytes);  // checksum_avx2.cpp
#endif

std::uint64_t tensorChecksum(const std::byte* data, std::size_t bytes) {
#if OPSCOPE_CHECKSUM_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return checksumAvx2(data, bytes);
#endif
  return XXH3_64bits(data, bytes);  // libxxhash's SSE2 build
}

TensorStats tensorStats(mluopDataType_t dtype, const std::byte* data, std::size_t bytes) {
  return tensorStats(dtype, data, bytes, tensorChecksum(data, bytes));
}

TensorStats tensorStats(mluopDataType_t dtype, const std::byte* data, std::size_t bytes,
                        std::uint64_t checksum) {
  return copyWithStats(dtype, data, nullptr, bytes, checksum);
}

TensorStats copyWithStats(mluopDataType_t dtype, const std::byte* data, std::byte* copy_to, std::size_t bytes,
                          std::uint64_t checksum) {
  TensorStats s;
  const std::size_t size = mlu::dtypeSize(dtype);
  s.numel = size > 0 ? static_cast<std::int64_t>(bytes / size) : 0;
  s.checksum = checksum;
  bool copied = false;
  for (const auto& [d, accumulateOf] : kAccumulators) {
    if (d != dtype) continue;
    accumulateOf(data, s.numel, s, copy_to);
    copied = true;
  }
  if (copy_to != nullptr && !copied && bytes > 0) std::memcpy(copy_to, data, bytes);
  return s;
}

}  // namespace opscope::rundb
