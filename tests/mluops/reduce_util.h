// reduce_util.h — helpers for the reduction-family tests (test_reduce.cpp): paired device/host tensors
// holding the same values, non-contiguous stride patterns, tolerances scaled for reductions, and central
// finite differences for checking backward ops against their forward in float64.
#pragma once

#include "op_harness.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

namespace reducetest {

using optest::Dims;
using optest::Tensor;

// The dtypes the device computes in.
inline const std::vector<mluopDataType_t> kDeviceDtypes = {MLUOP_DTYPE_FLOAT, MLUOP_DTYPE_HALF,
                                                           MLUOP_DTYPE_BFLOAT16};

inline std::string dtypeLabel(mluopDataType_t dtype) { return mluopGetNameOfDataType(dtype); }

// A device tensor (for the op) and a host tensor (for the reference) with the same values and strides.
struct Pair {
  Tensor dev;
  Tensor host;
};
inline Pair makePair(mluopDataType_t dtype, const Dims& dims, const std::vector<double>& values = {},
                     const Dims& strides = {}) {
  return Pair{Tensor::device(dtype, dims, values, strides), Tensor::host(dtype, dims, values, strides)};
}

// Strides of a view whose storage is laid out with the dims in `order` (outermost first): e.g. order
// {1, 0} on dims [7, 13] gives the transposed view strides {1, 7}.
inline Dims permutedStrides(const Dims& dims, const std::vector<int>& order) {
  Dims strides(dims.size());
  std::int64_t s = 1;
  for (std::size_t i = order.size(); i-- > 0;) {
    const auto d = static_cast<std::size_t>(order[i]);
    strides[d] = s;
    s *= std::max<std::int64_t>(dims[d], 1);
  }
  return strides;
}

// Values rounded to `step` (e.g. 0.25), giving many ties.
inline std::vector<double> tiedValues(std::int64_t n, std::uint32_t seed, double step) {
  std::vector<double> v = optest::randomValues(n, seed, -2.0, 2.0);
  for (double& x : v) x = std::round(x / step) * step;
  return v;
}

// The per-dtype tolerance, with atol grown by sqrt(k) for results accumulated over k elements (rounding
// errors of a k-term float32 sum grow about like sqrt(k) times those of one term).
inline optest::Tolerance reductionTolerance(mluopDataType_t dtype, std::int64_t k) {
  optest::Tolerance t = optest::toleranceFor(dtype);
  t.atol *= std::sqrt(static_cast<double>(std::max<std::int64_t>(k, 1)));
  return t;
}

inline std::string lastError() { return mluopGetLastErrorMessage(); }

using optest::dot;

// Central finite differences of loss at x: (loss(x + h e_i) - loss(x - h e_i)) / 2h for each i.
inline std::vector<double> numericalGradient(const std::vector<double>& x,
                                             const std::function<double(const std::vector<double>&)>& loss,
                                             double h = 1e-6) {
  return optest::numericalGradient(loss, x, h);
}

// Tolerance for a float64 analytic gradient against central differences with h = 1e-6.
inline optest::Tolerance finiteDifferenceTolerance() { return {1e-6, 1e-5}; }

}  // namespace reducetest
