// The accuracy metrics against hand-worked values.
#include <opscope/compare/metrics.h>

#include <mlu/dtype.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using opscope::compare::compareTensors;
using opscope::compare::defaultTolerance;
using opscope::compare::formatMetrics;
using ::testing::HasSubstr;

TEST(Metrics, HandWorkedFloat32WithANaNOnBothSides) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> e = {1, 2, 3, nan};
  const std::vector<float> b = {1, 2.5f, 3, nan};
  const auto m = compareTensors(MLUOP_DTYPE_FLOAT, e.data(), b.data(), 4, {0.1, 0});
  EXPECT_FALSE(m.allclose);  // |2 - 2.5| = 0.5 > 0.1
  EXPECT_DOUBLE_EQ(m.max_abs_diff, 0.5);
  EXPECT_DOUBLE_EQ(m.max_rel_diff, 0.2);
  EXPECT_DOUBLE_EQ(m.mae, 0.5 / 3);  // over the finite pairs
  EXPECT_DOUBLE_EQ(m.mismatch_ratio, 0.25);
  EXPECT_NEAR(m.diff1, 0.5 / (6.5 + 1e-9), 1e-12);  // mlu-ops adds 1e-9 to the denominators
  EXPECT_NEAR(m.diff2, std::sqrt(0.25 / (16.25 + 1e-9)), 1e-12);
  EXPECT_NEAR(m.diff3, 0.2, 1e-12);
  EXPECT_NEAR(m.cosine, 15.0 / (std::sqrt(14.0) * std::sqrt(16.25)), 1e-12);
  EXPECT_EQ(m.dev_nan, 1);
  EXPECT_EQ(m.ref_nan, 1);
  // With a looser tolerance everything is close (NaN equals NaN).
  EXPECT_TRUE(compareTensors(MLUOP_DTYPE_FLOAT, e.data(), b.data(), 4, {0.5, 0}).allclose);
  EXPECT_TRUE(
      compareTensors(MLUOP_DTYPE_FLOAT, e.data(), b.data(), 4, {0, 0.2}).allclose);  // 0.5 <= 0.2 * 2.5
}

TEST(Metrics, InfinitiesAndNaNOnOneSide) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> e = {inf, -inf, nan, 1};
  const std::vector<float> b = {inf, inf, 1, 1};
  const auto m = compareTensors(MLUOP_DTYPE_FLOAT, e.data(), b.data(), 4, {1, 1});
  EXPECT_FALSE(m.allclose);
  EXPECT_DOUBLE_EQ(m.mismatch_ratio, 0.5);  // -inf vs inf, NaN vs 1
  EXPECT_EQ(m.dev_inf, 2);
  EXPECT_EQ(m.ref_inf, 2);
  EXPECT_EQ(m.dev_nan, 1);
  EXPECT_EQ(m.ref_nan, 0);
  EXPECT_DOUBLE_EQ(m.max_abs_diff, 0);  // the only finite pair is equal
}

TEST(Metrics, HalfTypesUseTheirThresholdForDiff3) {
  // b = 5e-5 is below the half-type threshold 1e-4: diff3 takes the absolute difference there.
  const std::vector<std::uint16_t> e = {mlu::floatToBfloat16(1.0f), mlu::floatToBfloat16(2.5e-4f)};
  const std::vector<std::uint16_t> b = {mlu::floatToBfloat16(1.0f), mlu::floatToBfloat16(5e-5f)};
  const double e1 = mlu::bfloat16ToFloat(e[1]), b1 = mlu::bfloat16ToFloat(b[1]);
  const auto m =
      compareTensors(MLUOP_DTYPE_BFLOAT16, e.data(), b.data(), 2, defaultTolerance(MLUOP_DTYPE_BFLOAT16));
  EXPECT_NEAR(m.diff3, e1 - b1, 1e-15);
  EXPECT_TRUE(m.allclose);  // 2e-4 <= 1e-2 + 1e-2 * 5e-5
  // In float32 the same values are relative: threshold 1e-6.
  const std::vector<float> ef = {1.0f, 2.5e-4f}, bf = {1.0f, 5e-5f};
  const auto f =
      compareTensors(MLUOP_DTYPE_FLOAT, ef.data(), bf.data(), 2, defaultTolerance(MLUOP_DTYPE_FLOAT));
  EXPECT_NEAR(f.diff3, (2.5e-4 - 5e-5) / 5e-5, 1e-3);
  EXPECT_FALSE(f.allclose);
}

TEST(Metrics, IdenticalIntegerAndZeroTensors) {
  const std::vector<std::int64_t> x = {-3, 0, 1LL << 40};
  const auto m =
      compareTensors(MLUOP_DTYPE_INT64, x.data(), x.data(), 3, defaultTolerance(MLUOP_DTYPE_INT64));
  EXPECT_TRUE(m.allclose);
  EXPECT_DOUBLE_EQ(m.cosine, 1);
  EXPECT_DOUBLE_EQ(m.diff1, 0);
  const std::vector<float> zeros(5, 0.0f);
  const auto z = compareTensors(MLUOP_DTYPE_FLOAT, zeros.data(), zeros.data(), 5, {0, 0});
  EXPECT_TRUE(z.allclose);
  EXPECT_DOUBLE_EQ(z.cosine, 1);
  EXPECT_THAT(formatMetrics(z), HasSubstr("allclose: True max_abs_diff: 0.000e+00"));
  EXPECT_THAT(formatMetrics(z), HasSubstr("atol: 0 rtol: 0"));
}

// Integer and bool tensors compare exactly whatever the tolerance: int64 values 2^53 and 2^53 + 1 are one
// float64 but differ; the text says how many elements differ.
TEST(Metrics, IntegersCompareExactly) {
  const std::int64_t big = std::int64_t{1} << 53;
  const std::vector<std::int64_t> e = {big + 1, 5, -7, 0}, b = {big, 5, -9, 0};
  const auto m = compareTensors(MLUOP_DTYPE_INT64, e.data(), b.data(), 4, {10, 10});
  EXPECT_TRUE(m.exact);
  EXPECT_FALSE(m.allclose);  // a tolerance of 10 does not apply to integers
  EXPECT_EQ(m.mismatched, 2);
  EXPECT_DOUBLE_EQ(m.mismatch_ratio, 0.5);
  EXPECT_DOUBLE_EQ(m.max_abs_diff, 2);
  EXPECT_EQ(formatMetrics(m), "exact: False mismatched: 2/4 max_abs_diff: 2 mismatch_ratio: 5.000e-01");
  const std::vector<std::uint8_t> u = {0, 255, 7}, v = {0, 255, 7};
  const auto same = compareTensors(MLUOP_DTYPE_UINT8, u.data(), v.data(), 3, {0, 0});
  EXPECT_TRUE(same.allclose);
  EXPECT_EQ(same.mismatched, 0);
  EXPECT_EQ(formatMetrics(same), "exact: True mismatched: 0/3 max_abs_diff: 0 mismatch_ratio: 0.000e+00");
  const std::vector<std::uint8_t> flags = {1, 0, 1}, other = {1, 1, 1};
  const auto bools = compareTensors(MLUOP_DTYPE_BOOL, flags.data(), other.data(), 3, {1, 1});
  EXPECT_EQ(bools.mismatched, 1);
  const auto identical = opscope::compare::identicalTensors(MLUOP_DTYPE_INT32, u.data(), u.data(), 0, {0, 0});
  ASSERT_TRUE(identical.has_value());
  EXPECT_TRUE(identical->exact);
  // floating tensors keep the tolerance-based metrics
  const std::vector<float> f = {1.0f}, g = {1.5f};
  const auto fm = compareTensors(MLUOP_DTYPE_FLOAT, f.data(), g.data(), 1, {1, 0});
  EXPECT_FALSE(fm.exact);
  EXPECT_TRUE(fm.allclose);
}

TEST(Metrics, DefaultTolerances) {
  EXPECT_DOUBLE_EQ(defaultTolerance(MLUOP_DTYPE_FLOAT).atol, 1e-5);
  EXPECT_DOUBLE_EQ(defaultTolerance(MLUOP_DTYPE_HALF).rtol, 1e-3);
  EXPECT_DOUBLE_EQ(defaultTolerance(MLUOP_DTYPE_BFLOAT16).atol, 1e-2);
  EXPECT_DOUBLE_EQ(defaultTolerance(MLUOP_DTYPE_INT32).atol, 0);
}

// A tensor above the two-thread split (2^20 elements): the counts and maxima land wherever they are, and
// the sums match float64 values worked out independently here.
TEST(Metrics, ALargeTensorComparedInTwoHalvesCountsEveryElement) {
  const std::int64_t n = (std::int64_t{1} << 21) + 3;  // odd: the last elements fall outside the 4-lanes
  std::vector<float> e(static_cast<std::size_t>(n), 1.0f), b(static_cast<std::size_t>(n), 1.0f);
  e[10] = 1.5f;                               // first half: |d| 0.5
  e[static_cast<std::size_t>(n - 1)] = 3.0f;  // last element (tail): |d| 2
  e[static_cast<std::size_t>(n / 2 + 7)] = std::numeric_limits<float>::quiet_NaN();  // second half
  b[static_cast<std::size_t>(n - 2)] = std::numeric_limits<float>::infinity();
  e[static_cast<std::size_t>(n - 2)] = std::numeric_limits<float>::infinity();
  const auto m =
      compareTensors(MLUOP_DTYPE_FLOAT, e.data(), b.data(), n, defaultTolerance(MLUOP_DTYPE_FLOAT));
  EXPECT_FALSE(m.allclose);
  EXPECT_EQ(m.dev_nan, 1);
  EXPECT_EQ(m.ref_nan, 0);
  EXPECT_EQ(m.dev_inf, 1);
  EXPECT_EQ(m.ref_inf, 1);
  EXPECT_DOUBLE_EQ(m.max_abs_diff, 2.0);
  EXPECT_DOUBLE_EQ(m.max_rel_diff, 2.0);
  EXPECT_DOUBLE_EQ(m.mismatch_ratio, 3.0 / static_cast<double>(n));  // 1.5, 3 and the lone NaN
  const double finite = static_cast<double>(n - 2);                  // the NaN and the inf pair excluded
  EXPECT_DOUBLE_EQ(m.mae, 2.5 / finite);
  EXPECT_DOUBLE_EQ(m.diff1, 2.5 / (finite + 1e-9));
}

TEST(Metrics, IdenticalTensorsAreAPerfectMatchThatStillCountsNanAndInf) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {1, nan, -inf, 0, nan}, copy = x;
  const auto same = opscope::compare::identicalTensors(MLUOP_DTYPE_FLOAT, x.data(), copy.data(), 5, {0, 0});
  ASSERT_TRUE(same.has_value());
  const auto& m = *same;
  const auto full = compareTensors(MLUOP_DTYPE_FLOAT, x.data(), x.data(), 5, {0, 0});
  EXPECT_TRUE(m.allclose);
  EXPECT_EQ(m.dev_nan, 2);
  EXPECT_EQ(m.ref_inf, 1);
  EXPECT_EQ(m.dev_nan, full.dev_nan);
  EXPECT_EQ(m.dev_inf, full.dev_inf);
  EXPECT_EQ(m.allclose, full.allclose);
  EXPECT_DOUBLE_EQ(m.max_abs_diff, full.max_abs_diff);
  EXPECT_DOUBLE_EQ(m.cosine, full.cosine);
  std::vector<float> changed = x;
  changed[3] = -0.0f;  // a sign bit is a change
  EXPECT_FALSE(opscope::compare::identicalTensors(MLUOP_DTYPE_FLOAT, x.data(), changed.data(), 5, {0, 0}));
}

// Exact agreement everywhere but three elements: the maxima come only from those (the vector loop divides
// per pair; an element with y = 0 counts for diff3 as |d| and not for max_rel).
TEST(Metrics, MaximaOfMostlyExactTensorsAreHandWorked) {
  const std::int64_t n = 1001;  // odd: one element in the scalar tail
  std::vector<double> b(static_cast<std::size_t>(n)), e;
  for (std::int64_t i = 0; i < n; ++i) b[static_cast<std::size_t>(i)] = 0.5 + static_cast<double>(i % 7);
  b[400] = 0.0;
  e = b;
  e[17] = b[17] + 0.25;   // b[17] = 3.5: rel 0.25 / 3.5
  e[400] = 1e-3;          // y = 0: |d| 1e-3 for diff3, nothing for max_rel
  e[1000] = b[1000] * 2;  // the tail, b[1000] = 0.5 + 6 = 6.5: rel 1
  const auto m = compareTensors(MLUOP_DTYPE_DOUBLE, e.data(), b.data(), n, {0, 0});
  EXPECT_FALSE(m.allclose);
  EXPECT_DOUBLE_EQ(m.max_abs_diff, 6.5);
  EXPECT_DOUBLE_EQ(m.max_rel_diff, 1.0);
  EXPECT_DOUBLE_EQ(m.diff3, 1.0);
  EXPECT_DOUBLE_EQ(m.mismatch_ratio, 3.0 / static_cast<double>(n));
  EXPECT_DOUBLE_EQ(m.mae, (0.25 + 1e-3 + 6.5) / static_cast<double>(n));

  e[1000] = b[1000];  // now the largest relative difference is element 17's, from the vector loop
  const auto m2 = compareTensors(MLUOP_DTYPE_DOUBLE, e.data(), b.data(), n, {0, 0});
  EXPECT_DOUBLE_EQ(m2.max_rel_diff, 0.25 / 3.5);
  EXPECT_DOUBLE_EQ(m2.diff3, 0.25 / 3.5);
  EXPECT_DOUBLE_EQ(m2.max_abs_diff, 0.25);

  const auto exact = compareTensors(MLUOP_DTYPE_DOUBLE, b.data(), b.data(), n, {0, 0});
  EXPECT_TRUE(exact.allclose);
  EXPECT_EQ(exact.max_rel_diff, 0.0);
  EXPECT_EQ(exact.diff3, 0.0);
  EXPECT_DOUBLE_EQ(exact.cosine, 1.0);
}

// The NaN/infinity count of identicalTensors over more 16-bit elements than its per-block counter holds.
TEST(Metrics, IdenticalHalfTensorsCountNanAndInfPastOneBlock) {
  const std::int64_t n = 100000;
  std::vector<std::uint16_t> x(static_cast<std::size_t>(n), 0x3c00);                     // 1.0
  x[5] = 0x7c00;                                                                         // +inf
  x[40000] = 0xfc00;                                                                     // -inf
  x[99999] = 0x7e00;                                                                     // NaN
  for (std::int64_t i = 50000; i < 90000; ++i) x[static_cast<std::size_t>(i)] = 0x7c01;  // NaNs
  const std::vector<std::uint16_t> copy = x;
  const auto m = opscope::compare::identicalTensors(MLUOP_DTYPE_HALF, x.data(), copy.data(), n, {0, 0});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->count, n);
  EXPECT_EQ(m->dev_inf, 2);
  EXPECT_EQ(m->dev_nan, 40001);
  EXPECT_EQ(m->ref_nan, 40001);
}

// ULPs of the output dtype, hand-worked: the difference over the spacing of the dtype's values at the
// reference (2^-23 at 1 in float32, 2^-22 at 2; 2^-10 at 1 in float16, 2^-7 in bfloat16; the subnormal
// spacing 2^-149 at 0 in float32). Three elements: a vector pair, then the scalar tail.
TEST(Metrics, UlpsAreCountedAtTheReferencesSpacingInTheOutputDtype) {
  using opscope::compare::ulpOf;
  const float u = std::ldexp(1.0f, -23);
  const std::vector<float> dev = {1 + 3 * u, 2 + 2 * u, 0.5f};
  const std::vector<float> ref = {1, 2, 0.5f};
  const auto m = compareTensors(MLUOP_DTYPE_FLOAT, dev.data(), ref.data(), 3, {1, 1});
  EXPECT_DOUBLE_EQ(m.max_ulp, 3);                 // 3 · 2^-23 over 2^-23
  EXPECT_DOUBLE_EQ(m.mean_ulp, (3.0 + 1.0) / 3);  // 2 · 2^-23 is one ULP at 2

  // The scalar tail (the third element, after a pair) counts its ULPs the same way.
  const std::vector<float> dev_tail = {1, 2, 1 + 3 * u};
  const std::vector<float> ref_tail = {1, 2, 1};
  const auto tail = compareTensors(MLUOP_DTYPE_FLOAT, dev_tail.data(), ref_tail.data(), 3, {1, 1});
  EXPECT_DOUBLE_EQ(tail.max_ulp, 3);
  EXPECT_DOUBLE_EQ(tail.mean_ulp, 1);

  // Below the smallest normal: the subnormal spacing (two of it, and one).
  const std::vector<float> tiny_dev = {std::ldexp(1.0f, -148),
                                       std::ldexp(1.0f, -130) + std::ldexp(1.0f, -149)};
  const std::vector<float> tiny_ref = {0, std::ldexp(1.0f, -130)};
  const auto tiny = compareTensors(MLUOP_DTYPE_FLOAT, tiny_dev.data(), tiny_ref.data(), 2, {1, 1});
  EXPECT_DOUBLE_EQ(tiny.max_ulp, 2);
  EXPECT_DOUBLE_EQ(tiny.mean_ulp, 1.5);

  // float16 and bfloat16: one ULP at 1 each, none at 3.
  const std::vector<std::uint16_t> h_dev = {mlu::floatToHalf(1 + std::ldexp(1.0f, -10)), mlu::floatToHalf(3)};
  const std::vector<std::uint16_t> h_ref = {mlu::floatToHalf(1), mlu::floatToHalf(3)};
  const auto h = compareTensors(MLUOP_DTYPE_HALF, h_dev.data(), h_ref.data(), 2, {1, 1});
  EXPECT_DOUBLE_EQ(h.max_ulp, 1);
  EXPECT_DOUBLE_EQ(h.mean_ulp, 0.5);
  const std::vector<std::uint16_t> bf_dev = {mlu::floatToBfloat16(1 + std::ldexp(1.0f, -7)),
                                             mlu::floatToBfloat16(3)};
  const std::vector<std::uint16_t> bf_ref = {mlu::floatToBfloat16(1), mlu::floatToBfloat16(3)};
  const auto bf = compareTensors(MLUOP_DTYPE_BFLOAT16, bf_dev.data(), bf_ref.data(), 2, {1, 1});
  EXPECT_DOUBLE_EQ(bf.max_ulp, 1);
  EXPECT_DOUBLE_EQ(bf.mean_ulp, 0.5);

  // float64: one ULP at 1; a NaN pair is left out of the mean.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> d_dev = {1 + std::ldexp(1.0, -52), nan, 4};
  const std::vector<double> d_ref = {1, nan, 4};
  const auto d = compareTensors(MLUOP_DTYPE_DOUBLE, d_dev.data(), d_ref.data(), 3, {1, 1});
  EXPECT_DOUBLE_EQ(d.max_ulp, 1);
  EXPECT_DOUBLE_EQ(d.mean_ulp, 0.5);

  // Integers have no ULPs; the spacings themselves.
  const std::vector<std::int32_t> i_dev = {1, 5}, i_ref = {1, 2};
  EXPECT_EQ(compareTensors(MLUOP_DTYPE_INT32, i_dev.data(), i_ref.data(), 2, {0, 0}).max_ulp, 0);
  EXPECT_DOUBLE_EQ(ulpOf(MLUOP_DTYPE_FLOAT, -1.0), std::ldexp(1.0, -23));
  EXPECT_DOUBLE_EQ(ulpOf(MLUOP_DTYPE_HALF, 1000), 0.5);  // [512, 1024): 2^9 · 2^-10
  EXPECT_DOUBLE_EQ(ulpOf(MLUOP_DTYPE_BFLOAT16, 0), std::ldexp(1.0, -133));
  EXPECT_THAT(formatMetrics(m), HasSubstr("max_ulp: 3 mean_ulp: 1.33"));
}

// A large tensor (two halves on two threads, the vector loop) counts the same ULPs as the hand-worked sum.
TEST(Metrics, UlpsOfALargeTensorMatchAPerElementSum) {
  const std::int64_t n = (std::int64_t{1} << 20) + 3;
  std::vector<float> dev(static_cast<std::size_t>(n)), ref(static_cast<std::size_t>(n));
  double sum = 0, max = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float r = std::ldexp(1.0f + static_cast<float>(i % 7) / 8, static_cast<int>(i % 41) - 20);
    const int k = static_cast<int>(i % 5);  // 0..4 ULPs off
    ref[static_cast<std::size_t>(i)] = r;
    dev[static_cast<std::size_t>(i)] = r + static_cast<float>(k) * std::ldexp(1.0f, std::ilogb(r) - 23);
    sum += k;
    max = std::max(max, static_cast<double>(k));
  }
  const auto m = compareTensors(MLUOP_DTYPE_FLOAT, dev.data(), ref.data(), n, {1, 1});
  EXPECT_DOUBLE_EQ(m.max_ulp, max);
  EXPECT_NEAR(m.mean_ulp, sum / static_cast<double>(n), 1e-12);
}

// A reduction's bound (Tolerance::ulps and ::rms): k ULPs of the dtype at the reference plus rms times the
// reference's RMS, hand-worked. 1 ULP at 1 in float32 is 2^-23.
TEST(Metrics, ReductionBoundsAreUlpsAtTheReferencePlusAShareOfItsRms) {
  using opscope::compare::Tolerance;
  const float u = std::ldexp(1.0f, -23);
  const std::vector<float> ref = {1, 1, 1};
  for (const int off : {1, 2}) {
    // The first element is a vector pair's, the third the scalar tail's: the same bound for both.
    const std::vector<float> pair = {1 + static_cast<float>(off) * u, 1, 1};
    const std::vector<float> tail = {1, 1, 1 + static_cast<float>(off) * u};
    for (const auto* dev : {&pair, &tail}) {
      const auto m = compareTensors(MLUOP_DTYPE_FLOAT, dev->data(), ref.data(), 3, Tolerance{0, 0, 1, 0});
      EXPECT_EQ(m.allclose, off == 1) << off;
      EXPECT_THAT(formatMetrics(m), HasSubstr("atol: 0 rtol: 0 ulps: 1"));
    }
  }
  // RMS of {3, 4} is sqrt(12.5) = 3.5355...; 1% of it is 0.035355: 0.035 passes, 0.036 does not.
  const std::vector<float> r2 = {3, 4};
  const std::vector<float> within = {3.035f, 4}, beyond = {3.036f, 4};
  const auto a = compareTensors(MLUOP_DTYPE_FLOAT, within.data(), r2.data(), 2, Tolerance{0, 0, 0, 0.01});
  EXPECT_TRUE(a.allclose);
  EXPECT_NEAR(a.tolerance.atol, 0.01 * std::sqrt(12.5), 1e-12);  // reported as the atol it became
  EXPECT_THAT(formatMetrics(a), HasSubstr("rtol: 0 (atol: 0.01 x the reference's RMS)"));
  EXPECT_FALSE(
      compareTensors(MLUOP_DTYPE_FLOAT, beyond.data(), r2.data(), 2, Tolerance{0, 0, 0, 0.01}).allclose);
  // The RMS is over the finite elements only; in bfloat16, 1 ULP at 3 is 2^-6.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::uint16_t> bref = {mlu::floatToBfloat16(3), mlu::floatToBfloat16(nan)};
  const std::vector<std::uint16_t> bdev = {mlu::floatToBfloat16(3 + std::ldexp(1.0f, -6)),
                                           mlu::floatToBfloat16(nan)};
  EXPECT_TRUE(
      compareTensors(MLUOP_DTYPE_BFLOAT16, bdev.data(), bref.data(), 2, Tolerance{0, 0, 1, 0}).allclose);
  EXPECT_FALSE(
      compareTensors(MLUOP_DTYPE_BFLOAT16, bdev.data(), bref.data(), 2, Tolerance{0, 0, 0.5, 0}).allclose);
  const auto b = compareTensors(MLUOP_DTYPE_BFLOAT16, bdev.data(), bref.data(), 2, Tolerance{0, 0, 0, 1});
  EXPECT_DOUBLE_EQ(b.tolerance.atol, 3);  // RMS of {3}
}
