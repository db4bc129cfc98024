#include <opscope/compare/metrics.h>

#include <opscope/tensor_snapshot.h>

#include <mlu/dtype.h>

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <future>
#include <limits>
#include <type_traits>

namespace opscope::compare {
namespace {

// Below 1 by far more than rounding: d >= kScreen * best * ay whenever d / ay >= best.
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

// One accumulator of the metrics loop.
struct Lane {
  double sum_abs = 0, sum_abs_ref = 0, sum_sq = 0, sum_sq_ref = 0, dot = 0, sum_sq_dev = 0;
  double max_abs = 0, max_rel = 0, diff3 = 0;
  std::int64_t mismatches = 0;
};

// What the lanes share: the counts of the (rare) pairs with a NaN or an infinity.
struct NonFinite {
  std::int64_t pairs = 0, dev_nan = 0, ref_nan = 0, dev_inf = 0, ref_inf = 0;
};

// Adds the pair (device x, reference y) to a lane.
[[gnu::always_inline]] inline void accumulate(Lane& l, NonFinite& nf, double x, double y, Tolerance tol,
                                              double th) {
  bool close;
  if (std::isfinite(x) && std::isfinite(y)) [[likely]] {
    const double d = std::fabs(x - y);
    const double ay = std::fabs(y);
    close = d <= tol.atol + tol.rtol * ay;
    l.max_abs = std::max(l.max_abs, d);
    // d / ay only where it may raise a maximum (a multiplication screens it first): the maxima rarely
    // move, and a division per element would cost more than the rest of the loop.
    if (y != 0 && d >= kScreen * l.max_rel * ay) [[unlikely]]
      l.max_rel = std::max(l.max_rel, d / ay);
    if (ay > th) {
      if (d >= kScreen * l.diff3 * ay) [[unlikely]]
        l.diff3 = std::max(l.diff3, d / ay);
    } else {
      l.diff3 = std::max(l.diff3, d);
    }
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
  a.mismatches += b.mismatches;
}

// W doubles (GCC vector extension: W = 2 is one SSE2 register, the x86-64 baseline) and the matching
// comparison mask (all ones where true). (An AVX2 build of the loop, W = 4 picked at run time, measured no
// faster end to end on llama_train: the loop is not the only thing waiting on memory.)
// (Spelled out per width: GCC drops a vector_size attribute from an alias template.)
template <int W>
struct VecTypes;
template <>
struct VecTypes<2> {
  using Vec = double __attribute__((vector_size(16)));
  using Mask = std::int64_t __attribute__((vector_size(16)));
};
template <int W>
using Vec = typename VecTypes<W>::Vec;
template <int W>
using Mask = typename VecTypes<W>::Mask;

template <int W>
[[gnu::always_inline]] inline bool anySet(Mask<W> m) {
  std::int64_t any = 0;
  for (int k = 0; k < W; ++k) any |= m[k];
  return any != 0;
}
template <int W>
[[gnu::always_inline]] inline bool allSet(Mask<W> m) {
  std::int64_t all = -1;
  for (int k = 0; k < W; ++k) all &= m[k];
  return all != 0;
}
// -0 stays -0: it only feeds |d| and |y| sums and maxima.
template <int W>
[[gnu::always_inline]] inline Vec<W> absOf(Vec<W> v) {
  return v < 0 ? -v : v;
}

// W vector lanes of accumulators: the sums and maxima of the finite pairs it was given.
template <int W>
struct VecLane {
  Vec<W> sum_abs{}, sum_abs_ref{}, sum_sq{}, sum_sq_ref{}, dot{}, sum_sq_dev{};
  Vec<W> max_abs{}, max_rel{}, diff3{};
  Mask<W> mismatches{};

  // Adds W pairs (device x, reference y); false (and nothing added) when one of them is not finite.
  [[gnu::always_inline]] bool add(Vec<W> x, Vec<W> y, Tolerance tol, double th) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    const Vec<W> ay = absOf<W>(y);
    const Mask<W> finite = (absOf<W>(x) < kInf) & (ay < kInf);  // false for NaN too
    if (!allSet<W>(finite)) [[unlikely]]
      return false;
    const Vec<W> d = absOf<W>(x - y);
    // Masks come from double comparisons only: an int64 comparison (pcmpeqq) is not in SSE2, and GCC would
    // do it an element at a time. A true comparison is -1, so subtracting it counts one.
    mismatches -= d > tol.atol + tol.rtol * ay;  // not close (all finite here, so > is the negation of <=)
    sum_abs += d;
    sum_abs_ref += ay;
    sum_sq += d * d;
    sum_sq_ref += y * y;
    sum_sq_dev += x * x;
    dot += x * y;
    max_abs = d > max_abs ? d : max_abs;
    const Mask<W> big = ay > th;
    diff3 = ((ay <= th) & (d > diff3)) ? d : diff3;
    // d / |y| only where a multiplication says a maximum may move.
    const Mask<W> rel_may_move = (y != 0) & (d >= kScreen * max_rel * ay);
    const Mask<W> d3_may_move = big & (d >= kScreen * diff3 * ay);
    if (anySet<W>(rel_may_move | d3_may_move)) [[unlikely]] {
      for (int k = 0; k < W; ++k) {
        if (rel_may_move[k] != 0) max_rel[k] = std::max(max_rel[k], d[k] / ay[k]);
        if (d3_may_move[k] != 0) diff3[k] = std::max(diff3[k], d[k] / ay[k]);
      }
    }
    return true;
  }

  // Adds every lane into a scalar lane.
  [[gnu::always_inline]] void mergeInto(Lane& out) const {
    for (int k = 0; k < W; ++k) {
      Lane l;
      l.sum_abs = sum_abs[k];
      l.sum_abs_ref = sum_abs_ref[k];
      l.sum_sq = sum_sq[k];
      l.sum_sq_ref = sum_sq_ref[k];
      l.dot = dot[k];
      l.sum_sq_dev = sum_sq_dev[k];
      l.max_abs = max_abs[k];
      l.max_rel = max_rel[k];
      l.diff3 = diff3[k];
      l.mismatches = mismatches[k];
      merge(out, l);
    }
  }
};

// The sums of elements [begin, end), 2W at a time in two VecLanes (2W independent chains of additions,
// done W by W by vector instructions). A group holding a NaN or an infinity, the rare case, goes through
// the scalar accumulate() instead, as does the tail.
struct Partial {
  Lane lane;
  NonFinite nf;
};
template <typename S, int W>
[[gnu::always_inline]] inline Partial accumulateRangeOf(const std::byte* e, const std::byte* b,
                                                        std::int64_t begin, std::int64_t end, Tolerance tol,
                                                        double th) {
  Lane scalar;
  NonFinite nf;
  VecLane<W> va, vb;
  auto group = [&](const std::byte* p, std::int64_t i) {
    if constexpr (std::is_same_v<S, float> && W == 2) {  // one load and one cvtps2pd
      using Floats = float __attribute__((vector_size(8)));
      Floats f;
      std::memcpy(&f, p + static_cast<std::size_t>(i) * sizeof(float), sizeof f);
      return __builtin_convertvector(f, Vec<2>);
    } else {
      Vec<W> v;
      for (int k = 0; k < W; ++k) v[k] = elementAt<S>(p, i + k);
      return v;
    }
  };
  auto slow = [&](std::int64_t i) {
    for (std::int64_t k = i; k < i + W; ++k)
      accumulate(scalar, nf, elementAt<S>(e, k), elementAt<S>(b, k), tol, th);
  };
  std::int64_t i = begin;
  for (; i + 2 * W <= end; i += 2 * W) {
    if (!va.add(group(e, i), group(b, i), tol, th)) slow(i);
    if (!vb.add(group(e, i + W), group(b, i + W), tol, th)) slow(i + W);
  }
  for (; i < end; ++i) accumulate(scalar, nf, elementAt<S>(e, i), elementAt<S>(b, i), tol, th);
  va.mergeInto(scalar);
  vb.mergeInto(scalar);
  return {scalar, nf};
}

template <typename S>
Partial accumulateRange(const std::byte* e, const std::byte* b, std::int64_t begin, std::int64_t end,
                        Tolerance tol, double th) {
  return accumulateRangeOf<S, 2>(e, b, begin, end, tol, th);
}

// Tensors from this many elements on are compared in two
// halves on two threads (the device is idle while auto-compare runs, so the second core is free); the halves
// are merged in order, so the result does not depend on which finishes first.
constexpr std::int64_t kSplitAbove = std::int64_t{1} << 20;

// The metrics loop for one storage type: the dtype is dispatched once per tensor, not once per element.
template <typename S>
Metrics compareTyped(const std::byte* e, const std::byte* b, std::int64_t count, Tolerance tol, double th) {
  Partial p;
  if (count >= kSplitAbove) {
    const std::int64_t half = count / 2 / 4 * 4;
    std::future<Partial> second =
        std::async(std::launch::async, [=] { return accumulateRange<S>(e, b, half, count, tol, th); });
    p = accumulateRange<S>(e, b, 0, half, tol, th);
    const Partial q = second.get();
    merge(p.lane, q.lane);
    p.nf.pairs += q.nf.pairs;
    p.nf.dev_nan += q.nf.dev_nan;
    p.nf.ref_nan += q.nf.ref_nan;
    p.nf.dev_inf += q.nf.dev_inf;
    p.nf.ref_inf += q.nf.ref_inf;
  } else {
    p = accumulateRange<S>(e, b, 0, count, tol, th);
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
  m.diff1 = sum_abs / (sum_abs_ref + 1e-9);
  m.diff2 = std::sqrt(sum_sq / (sum_sq_ref + 1e-9));
  // Two all-zero tensors are identical: cosine 1.
  const double norms = std::sqrt(sum_sq_dev) * std::sqrt(sum_sq_ref);
  m.cosine = norms > 0 ? dot / norms : (sum_sq_dev == 0 && sum_sq_ref == 0 ? 1.0 : 0.0);
  return m;
}

}  // namespace

Tolerance defaultTolerance(mluopDataType_t dtype) {
  switch (dtype) {
    case MLUOP_DTYPE_FLOAT:
      return {1e-5, 1e-5};
    case MLUOP_DTYPE_HALF:
      return {1e-3, 1e-3};
    case MLUOP_DTYPE_BFLOAT16:
      return {1e-2, 1e-2};
    case MLUOP_DTYPE_DOUBLE:
      return {1e-8, 1e-8};
    default:
      return {0, 0};
  }
}

Metrics compareTensors(mluopDataType_t dtype, const void* e, const void* b, std::int64_t count,
                       Tolerance tol) {
  const double th = mlu::isHalfType(dtype) ? 1e-4 : 1e-6;
  const auto* ep = static_cast<const std::byte*>(e);
  const auto* bp = static_cast<const std::byte*>(b);
  Metrics m;
  m.count = count;
  m.tolerance = tol;
  dispatch(dtype, [&]<typename S>() { m = compareTyped<S>(ep, bp, count, tol, th); });
  return m;
}

namespace {

// Whether other holds the same bits as p (or-ing the xor of every pair), and the NaNs and infinities among
// the `count` floats of p, stored as U with the given exponent and mantissa masks: one pass, integer
// operations only.
template <typename U>
bool countNonFinite(const std::byte* p, const std::byte* other, std::int64_t count, U exp_mask, U mant_mask,
                    std::int64_t& nan, std::int64_t& inf) {
  std::int64_t n = 0, i_ = 0;
  U differ = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    U bits, theirs;
    std::memcpy(&bits, p + static_cast<std::size_t>(i) * sizeof(U), sizeof(U));
    std::memcpy(&theirs, other + static_cast<std::size_t>(i) * sizeof(U), sizeof(U));
    differ |= bits ^ theirs;
    const bool special = (bits & exp_mask) == exp_mask;
    n += special && (bits & mant_mask) != 0 ? 1 : 0;
    i_ += special && (bits & mant_mask) == 0 ? 1 : 0;
  }
  nan = n;
  inf = i_;
  return differ == 0;
}

// Whether other holds the same bits as data; m gets the metrics of data compared with itself.
bool identicalPass(mluopDataType_t dtype, const void* data, const void* other, std::int64_t count,
                   Metrics& m) {
  const auto* p = static_cast<const std::byte*>(data);
  const auto* o = static_cast<const std::byte*>(other);
  std::int64_t nan = 0, inf = 0;
  bool same = true;
  switch (dtype) {
    case MLUOP_DTYPE_FLOAT:
      same = countNonFinite<std::uint32_t>(p, o, count, 0x7f800000u, 0x007fffffu, nan, inf);
      break;
    case MLUOP_DTYPE_DOUBLE:
      same =
          countNonFinite<std::uint64_t>(p, o, count, 0x7ff0000000000000ull, 0x000fffffffffffffull, nan, inf);
      break;
    case MLUOP_DTYPE_HALF:
      same = countNonFinite<std::uint16_t>(p, o, count, 0x7c00u, 0x03ffu, nan, inf);
      break;
    case MLUOP_DTYPE_BFLOAT16:
      same = countNonFinite<std::uint16_t>(p, o, count, 0x7f80u, 0x007fu, nan, inf);
      break;
    default:  // integers and bool: neither NaN nor infinity
      same = count == 0 || std::memcmp(p, o, static_cast<std::size_t>(count) * mlu::dtypeSize(dtype)) == 0;
      break;
  }
  m.count = count;
  m.allclose = true;
  m.dev_nan = m.ref_nan = nan;
  m.dev_inf = m.ref_inf = inf;
  return same;
}

}  // namespace

std::optional<Metrics> identicalTensors(mluopDataType_t dtype, const void* a, const void* b,
                                        std::int64_t count, Tolerance tol) {
  Metrics m;
  m.tolerance = tol;
  if (!identicalPass(dtype, a, b, count, m)) return std::nullopt;
  return m;
}

std::string formatMetrics(const Metrics& m) {
  return fmt::format(
      "allclose: {} max_abs_diff: {:.3e} max_rel_diff: {:.3e} mae: {:.3e} cosine: {:.6f} mismatch_ratio: "
      "{:.3e} "
      "diff1: {:.3e} diff2: {:.3e} diff3: {:.3e} nan: {}/{} inf: {}/{} atol: {:g} rtol: {:g}",
      m.allclose ? "True" : "False", m.max_abs_diff, m.max_rel_diff, m.mae, m.cosine, m.mismatch_ratio,
      m.diff1, m.diff2, m.diff3, m.dev_nan, m.ref_nan, m.dev_inf, m.ref_inf, m.tolerance.atol,
      m.tolerance.rtol);
}

}  // namespace opscope::compare
