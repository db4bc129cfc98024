// metrics.h — how close a device result is to its reference: the accuracy metrics of DESIGN.md (allclose,
// max absolute and relative difference, MAE, cosine similarity, mismatch ratio, mlu-ops' diff1/diff2/diff3,
// the difference in ULPs of the dtype, NaN/Inf counts), computed in float64 over packed tensors of any dtype.
#pragma once

#include <mlu/mluops.h>
#include <opscope/tolerance.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace opscope::compare {

using opscope::defaultTolerance;  // core/include/opscope/tolerance.h
using opscope::Tolerance;

struct Metrics {
  std::int64_t count = 0;
  bool allclose = true;
  double max_abs_diff = 0;
  double max_rel_diff = 0;
  double mae = 0;
  double cosine = 1;
  double mismatch_ratio = 0;
  double diff1 = 0;
  double diff2 = 0;
  double diff3 = 0;
  std::int64_t dev_nan = 0, ref_nan = 0, dev_inf = 0, ref_inf = 0;
  // The differences in units in the last place of the dtype, at the reference's value: |device - reference|
  // over the spacing of the dtype's values around the reference (its subnormal spacing below the smallest
  // normal; float64's below 2^-1022 is taken as 2^-1023). The largest and the mean over the elements where
  // both are finite; 0 for integer and bool tensors.
  double max_ulp = 0;
  double mean_ulp = 0;
  Tolerance tolerance;
  // Integer and bool tensors are compared exactly (the tolerance does not apply): `exact` is set and
  // `mismatched` counts the elements that differ (allclose: none; mismatch_ratio: mismatched / count).
  bool exact = false;
  std::int64_t mismatched = 0;
};

// e: device result, b: reference; both `count` elements of dtype, packed. NaN equals NaN and an infinity
// equals the same infinity for allclose; differences are taken over the elements where both are finite.
Metrics compareTensors(mluopDataType_t dtype, const void* e, const void* b, std::int64_t count,
                       Tolerance tol);

// When a and b (count packed elements of dtype) are equal bit for bit (NaN payloads and -0 too), what
// compareTensors(dtype, a, a, count, tol) gives, at the cost of counting NaNs and infinities (all
// differences 0, cosine 1); otherwise nothing. memcmp, then one pass over a (an input the op must not
// change).
std::optional<Metrics> identicalTensors(mluopDataType_t dtype, const void* a, const void* b,
                                        std::int64_t count, Tolerance tol);

// The spacing of dtype's values at |v| (a float dtype; v finite): what max_ulp and mean_ulp count in.
double ulpOf(mluopDataType_t dtype, double v);

// "allclose: True max_abs_diff: 1.2e-06 max_rel_diff: ... mae: ... cosine: ... mismatch_ratio: ... diff1: ...
// diff2: ... diff3: ... max_ulp: 3 mean_ulp: 0.01 nan: 0/0 inf: 0/0 atol: 1e-05 rtol: 1e-05" (and "ulps: 64"
// when the tolerance allows ULPs, and "(atol: 0.0001 x the reference's RMS)" when atol holds rms·RMS of the
// reference); for integer and
// bool tensors "exact: True mismatched: 0/12 max_abs_diff: 0 mismatch_ratio: 0.000e+00"
std::string formatMetrics(const Metrics& m);

}  // namespace opscope::compare
