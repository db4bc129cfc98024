#include <opscope/compare/metrics.h>

#include <opscope/tensor_snapshot.h>

#include <mlu/dtype.h>

#include <fmt/format.h>

#include <emmintrin.h>
#include <immintrin.h>
#include <cmath>
#include <cstring>
#include <future>
#include <limits>
#include <type_traits>

namespace opscope::compare {
namespace {

// Below 1 by far more than rounding: d > kScreen * best * ay whenever d / ay >= best and d > 0 (and d = 0
// never raises a maximum, which starts at 0).
constexpr double kScreen = 0.999;

// Storage tags of the two 16-bit float formats (their raw bits).
struct Half {};
struct BFloat16 {};

// Element i of packed data stored as S, as float64 (as elementAsDouble, without its per-element switch).
template <typename S>
double elementAt(const std::byte* data, std::int64_t i) {
  if constexpr (std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>) {
    std::uint16_t bits;
    std::memcpy(&bits, data + static_cast<std::size_t>(i) * 2, 2);
    return std::is_same_v<S, Half> ? mlu::halfToFloat(bits) : mlu::bfloat16ToFloat(bits);
  } else if constexpr (std::is_same_v<S, bool>) {
    return data[static_cast<std::size_t>(i)] != std::byte{0} ? 1.0 : 0.0;
  } else {
    S v;
    std::memcpy(&v, data + static_cast<std::size_t>(i) * sizeof(S), sizeof v);
    return static_cast<double>(v);
  }
}

// Calls f.template operator()<S>() with the storage type of dtype (nothing for INVALID).
template <typename F>
void dispatch(mluopDataType_t dtype, F&& f) {
  switch (dtype) {
    case MLUOP_DTYPE_FLOAT:
      return f.template operator()<float>();
    case MLUOP_DTYPE_HALF:
      return f.template operator()<Half>();
    case MLUOP_DTYPE_BFLOAT16:
      return f.template operator()<BFloat16>();
    case MLUOP_DTYPE_DOUBLE:
      return f.template operator()<double>();
    case MLUOP_DTYPE_INT8:
      return f.template operator()<std::int8_t>();
    case MLUOP_DTYPE_INT16:
      return f.template operator()<std::int16_t>();
    case MLUOP_DTYPE_INT32:
      return f.template operator()<std::int32_t>();
    case MLUOP_DTYPE_INT64:
      return f.template operator()<std::int64_t>();
    case MLUOP_DTYPE_UINT8:
      return f.template operator()<std::uint8_t>();
    case MLUOP_DTYPE_BOOL:
      return f.template operator()<bool>();
    case MLUOP_DTYPE_INVALID:
      return;
  }
}

// The precision of a float dtype, for its ULPs: p the bits of its mantissa (without the implicit one), emin
// the exponent of its smallest normal value.
struct UlpScale {
  int p = 0;
  int emin = 0;
};
UlpScale ulpScale(mluopDataType_t dtype) {
  switch (dtype) {
    case MLUOP_DTYPE_FLOAT:
      return {23, -126};
    case MLUOP_DTYPE_HALF:
      return {10, -14};
    case MLUOP_DTYPE_BFLOAT16:
      return {7, -126};
    case MLUOP_DTYPE_DOUBLE:
      return {52, -1022};
    default:  // integers and bool: no ULPs (their metrics are zeroed)
      return {0, 0};
  }
}

// The spacing of the dtype's values at ay = |y| >= 0, finite (no smaller than 2^-1023, which float64's
// subnormals are taken as, so that its inverse is a normal float64).
double ulpAt(double ay, UlpScale u) {
  const int e = ay > 0 ? std::max(std::ilogb(ay), u.emin) : u.emin;
  return std::ldexp(1.0, std::max(e - u.p, -1023));
}

// One accumulator of the metrics loop.
struct Lane {
  double sum_abs = 0, sum_abs_ref = 0, sum_sq = 0, sum_sq_ref = 0, dot = 0, sum_sq_dev = 0;
  double max_abs = 0, max_rel = 0, diff3 = 0;
  double max_ulp = 0, sum_ulp = 0;
  std::int64_t mismatches = 0;
};

// What the lanes share: the counts of the (rare) pairs with a NaN or an infinity.
struct NonFinite {
  std::int64_t pairs = 0, dev_nan = 0, ref_nan = 0, dev_inf = 0, ref_inf = 0;
};

// Adds the pair (device x, reference y) to a lane.
[[gnu::always_inline]] inline void accumulate(Lane& l, NonFinite& nf, double x, double y, Tolerance tol,
                                              double th, UlpScale u) {
  bool close;
  if (std::isfinite(x) && std::isfinite(y)) [[likely]] {
    const double d = std::fabs(x - y);
    const double ay = std::fabs(y);
    const double ulp = ulpAt(ay, u);
    close = d <= tol.atol + tol.rtol * ay + tol.ulps * ulp;
    l.max_abs = std::max(l.max_abs, d);
    // d / ay only where it may raise a maximum (a multiplication screens it first): the maxima rarely
    // move, and a division per element would cost more than the rest of the loop.
    if (y != 0 && d > kScreen * l.max_rel * ay) [[unlikely]]
      l.max_rel = std::max(l.max_rel, d / ay);
    if (ay > th) {
      if (d > kScreen * l.diff3 * ay) [[unlikely]]
        l.diff3 = std::max(l.diff3, d / ay);
    } else {
      l.diff3 = std::max(l.diff3, d);
    }
    const double ulps = d / ulp;
    l.max_ulp = std::max(l.max_ulp, ulps);
    l.sum_ulp += ulps;
    l.sum_abs += d;
    l.sum_abs_ref += ay;
    l.sum_sq += d * d;
    l.sum_sq_ref += y * y;
    l.sum_sq_dev += x * x;
    l.dot += x * y;
  } else {
    ++nf.pairs;
    nf.dev_nan += std::isnan(x);
    nf.ref_nan += std::isnan(y);
    nf.dev_inf += std::isinf(x);
    nf.ref_inf += std::isinf(y);
    close = (std::isnan(x) || std::isnan(y)) ? std::isnan(x) && std::isnan(y) : x == y;
  }
  l.mismatches += close ? 0 : 1;
}

// Adds lane b into lane a. (By reference, inlined: a loop over the lanes' addresses would keep the lanes
// in memory instead of registers during the main loop, at 2-3x its time.)
[[gnu::always_inline]] inline void merge(Lane& a, const Lane& b) {
  a.sum_abs += b.sum_abs;
  a.sum_abs_ref += b.sum_abs_ref;
  a.sum_sq += b.sum_sq;
  a.sum_sq_ref += b.sum_sq_ref;
  a.dot += b.dot;
  a.sum_sq_dev += b.sum_sq_dev;
  a.max_abs = std::max(a.max_abs, b.max_abs);
  a.max_rel = std::max(a.max_rel, b.max_rel);
  a.diff3 = std::max(a.diff3, b.diff3);
  a.max_ulp = std::max(a.max_ulp, b.max_ulp);
  a.sum_ulp += b.sum_ulp;
  a.mismatches += b.mismatches;
}

// The vector loops' accumulators, stored as v[accumulator][lane] in VecLane's order, added into a scalar
// lane one lane after another.
template <std::size_t N>
void mergeStored(const double (&v)[12][N], Lane& out) {
  for (std::size_t k = 0; k < N; ++k) {
    Lane l;
    l.sum_abs = v[0][k];
    l.sum_abs_ref = v[1][k];
    l.sum_sq = v[2][k];
    l.sum_sq_ref = v[3][k];
    l.dot = v[4][k];
    l.sum_sq_dev = v[5][k];
    l.max_abs = v[6][k];
    l.max_rel = v[7][k];
    l.diff3 = v[8][k];
    l.mismatches = static_cast<std::int64_t>(v[9][k]);
    l.max_ulp = v[10][k];
    l.sum_ulp = v[11][k];
    merge(out, l);
  }
}

// The vector loop: SSE2 (the x86-64 baseline), two doubles per register, one register per accumulator.
// (Written with intrinsics: GCC's vector extensions gave scalar mask code and, with two sets of
// accumulators, spills; an AVX2 build measured no faster end to end, the loop not being the only thing
// waiting on memory.)
struct VecLane {
  __m128d sum_abs = _mm_setzero_pd(), sum_abs_ref = _mm_setzero_pd(), sum_sq = _mm_setzero_pd(),
          sum_sq_ref = _mm_setzero_pd(), dot = _mm_setzero_pd(), sum_sq_dev = _mm_setzero_pd();
  __m128d max_abs = _mm_setzero_pd(), max_rel = _mm_setzero_pd(), diff3 = _mm_setzero_pd();
  __m128d max_ulp = _mm_setzero_pd(), sum_ulp = _mm_setzero_pd();
  __m128d mismatches = _mm_setzero_pd();  // counts in doubles: exact up to 2^53

  // Adds the pairs (device x, reference y) of two lanes; false (and nothing added) when one of the four
  // values is not finite.
  [[gnu::always_inline]] bool add(__m128d x, __m128d y, Tolerance tol, double th, UlpScale u) {
    const __m128d abs_mask = _mm_castsi128_pd(_mm_set1_epi64x(0x7fffffffffffffff));
    const __m128d inf = _mm_set1_pd(std::numeric_limits<double>::infinity());
    const __m128d ay = _mm_and_pd(y, abs_mask);
    const __m128d finite = _mm_and_pd(_mm_cmplt_pd(_mm_and_pd(x, abs_mask), inf), _mm_cmplt_pd(ay, inf));
    if (_mm_movemask_pd(finite) != 3) [[unlikely]]  // a NaN compares false too
      return false;
    const __m128d d = _mm_and_pd(_mm_sub_pd(x, y), abs_mask);
    // The spacing of the dtype at |y|, 2^(max(e, emin) - p) for e the binary exponent of |y|, and its
    // inverse, built as float64 bits. The inverse's biased exponent is 1023 - (max(E - 1023, emin) - p), that
    // is min(2046 + p - E, 1023 + p - emin) for E the biased exponent of |y| (0 for 0 and float64's
    // subnormals), at most 2046; the spacing's is 2046 minus it. They fit a 16-bit lane, so SSE2's 16-bit
    // minimum serves (the other lanes of each 64-bit one are 0).
    const __m128i biased = _mm_srli_epi64(_mm_castpd_si128(ay), 52);
    const __m128i inv_exp = _mm_min_epi16(_mm_sub_epi64(_mm_set1_epi64x(2046 + u.p), biased),
                                          _mm_set1_epi64x(std::min(1023 + u.p - u.emin, 2046)));
    const __m128d inv_ulp = _mm_castsi128_pd(_mm_slli_epi64(inv_exp, 52));
    const __m128d ulp = _mm_castsi128_pd(_mm_slli_epi64(_mm_sub_epi64(_mm_set1_epi64x(2046), inv_exp), 52));
    // Not close: all finite here, so > is the negation of <=.
    const __m128d bound = _mm_add_pd(_mm_add_pd(_mm_set1_pd(tol.atol), _mm_mul_pd(_mm_set1_pd(tol.rtol), ay)),
                                     _mm_mul_pd(_mm_set1_pd(tol.ulps), ulp));
    mismatches = _mm_add_pd(mismatches, _mm_and_pd(_mm_cmpgt_pd(d, bound), _mm_set1_pd(1.0)));
    sum_abs = _mm_add_pd(sum_abs, d);
    sum_abs_ref = _mm_add_pd(sum_abs_ref, ay);
    sum_sq = _mm_add_pd(sum_sq, _mm_mul_pd(d, d));
    sum_sq_ref = _mm_add_pd(sum_sq_ref, _mm_mul_pd(y, y));
    sum_sq_dev = _mm_add_pd(sum_sq_dev, _mm_mul_pd(x, x));
    dot = _mm_add_pd(dot, _mm_mul_pd(x, y));
    max_abs = _mm_max_pd(max_abs, d);
    // max_rel: d / |y| where y != 0; diff3: d where |y| <= th, d / |y| above. One division per two pairs
    // costs less here than screening it with multiplications (the divider works beside the other units).
    const __m128d q = _mm_div_pd(d, ay);  // inf or NaN where |y| = 0: masked off
    max_rel = _mm_max_pd(max_rel, _mm_and_pd(_mm_cmpgt_pd(ay, _mm_setzero_pd()), q));
    const __m128d small = _mm_cmple_pd(ay, _mm_set1_pd(th));
    diff3 = _mm_max_pd(diff3, _mm_or_pd(_mm_and_pd(small, d), _mm_andnot_pd(small, q)));
    const __m128d ulps = _mm_mul_pd(d, inv_ulp);
    max_ulp = _mm_max_pd(max_ulp, ulps);
    sum_ulp = _mm_add_pd(sum_ulp, ulps);
    return true;
  }

  // Adds both lanes into a scalar lane.
  [[gnu::always_inline]] void mergeInto(Lane& out) const {
    alignas(16) double v[12][2];
    const __m128d all[12] = {sum_abs, sum_abs_ref, sum_sq, sum_sq_ref, dot,     sum_sq_dev,
                             max_abs, max_rel,     diff3,  mismatches, max_ulp, sum_ulp};
    for (int j = 0; j < 12; ++j) _mm_store_pd(v[j], all[j]);
    mergeStored(v, out);
  }
};

#if defined(__x86_64__)
// The same loop four pairs at a time, for float32 (the common dtype) where the CPU has AVX2: the same
// operations on 256-bit registers (no FMA: the bound and the sums round as in the SSE2 loop), so its
// figures differ from that loop's only by the order of the sums' additions.
struct VecLane4 {
  __m256d sum_abs, sum_abs_ref, sum_sq, sum_sq_ref, dot, sum_sq_dev;
  __m256d max_abs, max_rel, diff3, max_ulp, sum_ulp, mismatches;

  [[gnu::always_inline, gnu::target("avx2")]] void zero() {
    sum_abs = sum_abs_ref = sum_sq = sum_sq_ref = dot = sum_sq_dev = _mm256_setzero_pd();
    max_abs = max_rel = diff3 = max_ulp = sum_ulp = mismatches = _mm256_setzero_pd();
  }

  // As VecLane::add, for four pairs.
  [[gnu::always_inline, gnu::target("avx2")]] bool add(__m256d x, __m256d y, Tolerance tol, double th,
                                                       UlpScale u) {
    const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffff));
    const __m256d inf = _mm256_set1_pd(std::numeric_limits<double>::infinity());
    const __m256d ay = _mm256_and_pd(y, abs_mask);
    const __m256d finite = _mm256_and_pd(_mm256_cmp_pd(_mm256_and_pd(x, abs_mask), inf, _CMP_LT_OQ),
                                         _mm256_cmp_pd(ay, inf, _CMP_LT_OQ));
    if (_mm256_movemask_pd(finite) != 15) [[unlikely]]
      return false;
    const __m256d d = _mm256_and_pd(_mm256_sub_pd(x, y), abs_mask);
    const __m256i biased = _mm256_srli_epi64(_mm256_castpd_si256(ay), 52);
    const __m256i inv_exp = _mm256_min_epi16(_mm256_sub_epi64(_mm256_set1_epi64x(2046 + u.p), biased),
                                             _mm256_set1_epi64x(std::min(1023 + u.p - u.emin, 2046)));
    const __m256d inv_ulp = _mm256_castsi256_pd(_mm256_slli_epi64(inv_exp, 52));
    const __m256d ulp =
        _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_sub_epi64(_mm256_set1_epi64x(2046), inv_exp), 52));
    const __m256d bound =
        _mm256_add_pd(_mm256_add_pd(_mm256_set1_pd(tol.atol), _mm256_mul_pd(_mm256_set1_pd(tol.rtol), ay)),
                      _mm256_mul_pd(_mm256_set1_pd(tol.ulps), ulp));
    mismatches =
        _mm256_add_pd(mismatches, _mm256_and_pd(_mm256_cmp_pd(d, bound, _CMP_GT_OQ), _mm256_set1_pd(1.0)));
    sum_abs = _mm256_add_pd(sum_abs, d);
    sum_abs_ref = _mm256_add_pd(sum_abs_ref, ay);
    sum_sq = _mm256_add_pd(sum_sq, _mm256_mul_pd(d, d));
    sum_sq_ref = _mm256_add_pd(sum_sq_ref, _mm256_mul_pd(y, y));
    sum_sq_dev = _mm256_add_pd(sum_sq_dev, _mm256_mul_pd(x, x));
    dot = _mm256_add_pd(dot, _mm256_mul_pd(x, y));
    max_abs = _mm256_max_pd(max_abs, d);
    const __m256d q = _mm256_div_pd(d, ay);  // inf or NaN where |y| = 0: masked off
    max_rel = _mm256_max_pd(max_rel, _mm256_and_pd(_mm256_cmp_pd(ay, _mm256_setzero_pd(), _CMP_GT_OQ), q));
    const __m256d small = _mm256_cmp_pd(ay, _mm256_set1_pd(th), _CMP_LE_OQ);
    diff3 = _mm256_max_pd(diff3, _mm256_or_pd(_mm256_and_pd(small, d), _mm256_andnot_pd(small, q)));
    const __m256d ulps = _mm256_mul_pd(d, inv_ulp);
    max_ulp = _mm256_max_pd(max_ulp, ulps);
    sum_ulp = _mm256_add_pd(sum_ulp, ulps);
    return true;
  }

  [[gnu::target("avx2")]] void mergeInto(Lane& out) const {
    alignas(32) double v[12][4];
    const __m256d all[12] = {sum_abs, sum_abs_ref, sum_sq, sum_sq_ref, dot,     sum_sq_dev,
                             max_abs, max_rel,     diff3,  mismatches, max_ulp, sum_ulp};
    for (int j = 0; j < 12; ++j) _mm256_store_pd(v[j], all[j]);
    mergeStored(v, out);
  }
};
#endif

// The sums of elements [begin, end), two at a time in a VecLane. A pair holding a NaN or an infinity, the
// rare case, goes through the scalar accumulate() instead, as does the tail.
struct Partial {
  Lane lane;
  NonFinite nf;
};
#if defined(__x86_64__)
// float32 elements [begin, end), four at a time in a VecLane4 (AVX2).
[[gnu::target("avx2")]] Partial accumulateFloatAvx2(const std::byte* e, const std::byte* b,
                                                    std::int64_t begin, std::int64_t end, Tolerance tol,
                                                    double th, UlpScale u) {
  Lane scalar;
  NonFinite nf;
  VecLane4 v;
  v.zero();

  std::int64_t i = begin;
  for (; i + 4 <= end; i += 4) {
    const __m256d x = _mm256_cvtps_pd(_mm_loadu_ps(reinterpret_cast<const float*>(e + i * 4)));
    const __m256d y = _mm256_cvtps_pd(_mm_loadu_ps(reinterpret_cast<const float*>(b + i * 4)));
    if (!v.add(x, y, tol, th, u)) [[unlikely]] {
      for (std::int64_t k = i; k < i + 4; ++k)
        accumulate(scalar, nf, elementAt<float>(e, k), elementAt<float>(b, k), tol, th, u);
    }
  }
  for (; i < end; ++i) accumulate(scalar, nf, elementAt<float>(e, i), elementAt<float>(b, i), tol, th, u);
  v.mergeInto(scalar);
  return {scalar, nf};
}
#endif

template <typename S>
Partial accumulateRange(const std::byte* e, const std::byte* b, std::int64_t begin, std::int64_t end,
                        Tolerance tol, double th, UlpScale u) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<S, float>) {
    static const bool avx2 = __builtin_cpu_supports("avx2");
    if (avx2) return accumulateFloatAvx2(e, b, begin, end, tol, th, u);
  }
#endif
  Lane scalar;
  NonFinite nf;
  VecLane v;
  auto pair = [](const std::byte* p, std::int64_t i) {
    if constexpr (std::is_same_v<S, float>) {  // one load and one cvtps2pd
      return _mm_cvtps_pd(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(p + i * 4))));
    } else {
      return _mm_set_pd(elementAt<S>(p, i + 1), elementAt<S>(p, i));
    }
  };
  std::int64_t i = begin;
  for (; i + 2 <= end; i += 2) {
    if (!v.add(pair(e, i), pair(b, i), tol, th, u)) [[unlikely]] {
      for (std::int64_t k = i; k < i + 2; ++k)
        accumulate(scalar, nf, elementAt<S>(e, k), elementAt<S>(b, k), tol, th, u);
    }
  }
  for (; i < end; ++i) accumulate(scalar, nf, elementAt<S>(e, i), elementAt<S>(b, i), tol, th, u);
  v.mergeInto(scalar);
  return {scalar, nf};
}

// Tensors from this many elements on are compared in two
// halves on two threads (the device is idle while auto-compare runs, so the second core is free); the halves
// are merged in order, so the result does not depend on which finishes first.
constexpr std::int64_t kSplitAbove = std::int64_t{1} << 20;

// The metrics loop for one storage type: the dtype is dispatched once per tensor, not once per element.
template <typename S>
Metrics compareTyped(const std::byte* e, const std::byte* b, std::int64_t count, Tolerance tol, double th,
                     UlpScale u) {
  Partial p;
  if (count >= kSplitAbove) {
    const std::int64_t half = count / 2 / 4 * 4;
    std::future<Partial> second =
        std::async(std::launch::async, [=] { return accumulateRange<S>(e, b, half, count, tol, th, u); });
    p = accumulateRange<S>(e, b, 0, half, tol, th, u);
    const Partial q = second.get();
    merge(p.lane, q.lane);
    p.nf.pairs += q.nf.pairs;
    p.nf.dev_nan += q.nf.dev_nan;
    p.nf.ref_nan += q.nf.ref_nan;
    p.nf.dev_inf += q.nf.dev_inf;
    p.nf.ref_inf += q.nf.ref_inf;
  } else {
    p = accumulateRange<S>(e, b, 0, count, tol, th, u);
  }
  const Lane& l0 = p.lane;
  const NonFinite& nf = p.nf;

  Metrics m;
  m.count = count;
  m.tolerance = tol;
  const double sum_abs = l0.sum_abs, sum_abs_ref = l0.sum_abs_ref, sum_sq = l0.sum_sq,
               sum_sq_ref = l0.sum_sq_ref, dot = l0.dot, sum_sq_dev = l0.sum_sq_dev;
  const std::int64_t mismatches = l0.mismatches;
  m.max_abs_diff = l0.max_abs;
  m.max_rel_diff = l0.max_rel;
  m.diff3 = l0.diff3;
  const std::int64_t finite = count - nf.pairs;
  m.dev_nan = nf.dev_nan;
  m.ref_nan = nf.ref_nan;
  m.dev_inf = nf.dev_inf;
  m.ref_inf = nf.ref_inf;
  m.allclose = mismatches == 0;
  m.mismatch_ratio = count > 0 ? static_cast<double>(mismatches) / static_cast<double>(count) : 0;
  m.mae = finite > 0 ? sum_abs / static_cast<double>(finite) : 0;
  if constexpr (!std::is_integral_v<S>) {
    m.max_ulp = l0.max_ulp;
    m.mean_ulp = finite > 0 ? l0.sum_ulp / static_cast<double>(finite) : 0;
  }
  m.diff1 = sum_abs / (sum_abs_ref + 1e-9);
  m.diff2 = std::sqrt(sum_sq / (sum_sq_ref + 1e-9));
  // Two all-zero tensors are identical: cosine 1.
  const double norms = std::sqrt(sum_sq_dev) * std::sqrt(sum_sq_ref);
  m.cosine = norms > 0 ? dot / norms : (sum_sq_dev == 0 && sum_sq_ref == 0 ? 1.0 : 0.0);
  return m;
}

// Integer and bool elements compared in their own type (exact, int64 beyond 2^53 too): the elements that
// differ and the largest difference (as float64), on top of the float64 metrics.
template <typename S>
void countExactMismatches(const std::byte* e, const std::byte* b, std::int64_t count, Metrics& m) {
  std::int64_t mismatched = 0;
  double max_abs = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    S x, y;
    std::memcpy(&x, e + static_cast<std::size_t>(i) * sizeof(S), sizeof(S));
    std::memcpy(&y, b + static_cast<std::size_t>(i) * sizeof(S), sizeof(S));
    if (x == y) continue;
    ++mismatched;
    // |x - y| exactly in the wider unsigned type, then as float64
    const auto wide = [](S v) { return static_cast<long double>(v); };
    max_abs = std::max(max_abs, static_cast<double>(x > y ? wide(x) - wide(y) : wide(y) - wide(x)));
  }
  m.exact = true;
  m.mismatched = mismatched;
  m.allclose = mismatched == 0;
  m.mismatch_ratio = count > 0 ? static_cast<double>(mismatched) / static_cast<double>(count) : 0;
  m.max_abs_diff = max_abs;
}

}  // namespace

Metrics compareTensors(mluopDataType_t dtype, const void* e, const void* b, std::int64_t count,
                       Tolerance tol) {
  const double th = mlu::isHalfType(dtype) ? 1e-4 : 1e-6;
  const auto* ep = static_cast<const std::byte*>(e);
  const auto* bp = static_cast<const std::byte*>(b);
  if (tol.rms > 0) {  // a pass over the reference first: its RMS over the finite elements, into atol
    double sum_sq = 0;
    std::int64_t finite = 0;
    dispatch(dtype, [&]<typename S>() {
      for (std::int64_t i = 0; i < count; ++i) {
        const double v = elementAt<S>(bp, i);
        if (!std::isfinite(v)) continue;
        sum_sq += v * v;
        ++finite;
      }
    });
    tol.atol += finite > 0 ? tol.rms * std::sqrt(sum_sq / static_cast<double>(finite)) : 0;
  }
  Metrics m;
  m.count = count;
  m.tolerance = tol;
  dispatch(dtype, [&]<typename S>() {
    m = compareTyped<S>(ep, bp, count, tol, th, ulpScale(dtype));
    if constexpr (std::is_integral_v<S>) countExactMismatches<S>(ep, bp, count, m);
  });
  return m;
}

namespace {

// The NaNs and infinities among the `count` floats at p, stored as U with the given exponent and mantissa
// masks. A first pass only counts elements with an all-ones exponent, with a counter of U's width in
// blocks it cannot overflow (so that the compiler vectorizes it); the rare tensor that has some is counted
// again, NaNs apart from infinities.
template <typename U>
void countNonFinite(const std::byte* p, std::int64_t count, U exp_mask, U mant_mask, std::int64_t& nan,
                    std::int64_t& inf) {
  constexpr std::int64_t kBlock = std::int64_t{1} << (8 * sizeof(U) - 1);
  std::int64_t special = 0;
  for (std::int64_t begin = 0; begin < count; begin += kBlock) {
    const std::int64_t end = std::min(count, begin + kBlock);
    U n = 0;
    for (std::int64_t i = begin; i < end; ++i) {
      U bits;
      std::memcpy(&bits, p + static_cast<std::size_t>(i) * sizeof(U), sizeof(U));
      n = static_cast<U>(n + ((bits & exp_mask) == exp_mask ? 1 : 0));
    }
    special += n;
  }
  nan = inf = 0;
  if (special == 0) return;
  for (std::int64_t i = 0; i < count; ++i) {
    U bits;
    std::memcpy(&bits, p + static_cast<std::size_t>(i) * sizeof(U), sizeof(U));
    if ((bits & exp_mask) != exp_mask) continue;
    ++((bits & mant_mask) != 0 ? nan : inf);
  }
}

// Whether other holds the same bits as data (memcmp); if so, m gets the metrics of data compared with
// itself.
bool identicalPass(mluopDataType_t dtype, const void* data, const void* other, std::int64_t count,
                   Metrics& m) {
  const auto* p = static_cast<const std::byte*>(data);
  if (count > 0 && std::memcmp(p, other, static_cast<std::size_t>(count) * mlu::dtypeSize(dtype)) != 0)
    return false;
  std::int64_t nan = 0, inf = 0;
  switch (dtype) {
    case MLUOP_DTYPE_FLOAT:
      countNonFinite<std::uint32_t>(p, count, 0x7f800000u, 0x007fffffu, nan, inf);
      break;
    case MLUOP_DTYPE_DOUBLE:
      countNonFinite<std::uint64_t>(p, count, 0x7ff0000000000000ull, 0x000fffffffffffffull, nan, inf);
      break;
    case MLUOP_DTYPE_HALF:
      countNonFinite<std::uint16_t>(p, count, 0x7c00u, 0x03ffu, nan, inf);
      break;
    case MLUOP_DTYPE_BFLOAT16:
      countNonFinite<std::uint16_t>(p, count, 0x7f80u, 0x007fu, nan, inf);
      break;
    default:  // integers and bool: neither NaN nor infinity
      break;
  }
  m.count = count;
  m.allclose = true;
  m.exact = !mlu::isFloating(dtype);  // integers and bool: exact, 0 mismatched
  m.dev_nan = m.ref_nan = nan;
  m.dev_inf = m.ref_inf = inf;
  return true;
}

}  // namespace

std::optional<Metrics> identicalTensors(mluopDataType_t dtype, const void* a, const void* b,
                                        std::int64_t count, Tolerance tol) {
  Metrics m;
  m.tolerance = tol;
  if (!identicalPass(dtype, a, b, count, m)) return std::nullopt;
  return m;
}

double ulpOf(mluopDataType_t dtype, double v) { return ulpAt(std::fabs(v), ulpScale(dtype)); }

std::string formatMetrics(const Metrics& m) {
  if (m.exact) {
    return fmt::format("exact: {} mismatched: {}/{} max_abs_diff: {:g} mismatch_ratio: {:.3e}",
                       m.allclose ? "True" : "False", m.mismatched, m.count, m.max_abs_diff,
                       m.mismatch_ratio);
  }
  return fmt::format(
             "allclose: {} max_abs_diff: {:.3e} max_rel_diff: {:.3e} mae: {:.3e} cosine: {:.6f} "
             "mismatch_ratio: {:.3e} diff1: {:.3e} diff2: {:.3e} diff3: {:.3e} max_ulp: {:.4g} "
             "mean_ulp: {:.3g} nan: {}/{} inf: {}/{} atol: {:g} rtol: {:g}",
             m.allclose ? "True" : "False", m.max_abs_diff, m.max_rel_diff, m.mae, m.cosine, m.mismatch_ratio,
             m.diff1, m.diff2, m.diff3, m.max_ulp, m.mean_ulp, m.dev_nan, m.ref_nan, m.dev_inf, m.ref_inf,
             m.tolerance.atol, m.tolerance.rtol) +
         (m.tolerance.ulps > 0 ? fmt::format(" ulps: {:g}", m.tolerance.ulps) : std::string()) +
         (m.tolerance.rms > 0 ? fmt::format(" (atol: {:g} x the reference's RMS)", m.tolerance.rms)
                              : std::string());
}

}  // namespace opscope::compare
