// Tests of the reduction family: sum, mean, norm, var, max, min, argmax, softmax/log_softmax (+ backward),
// nll_loss and cross_entropy (+ backward), max_pool2d, avg_pool2d and adaptive_avg_pool2d (+ backward). For
// every op: the device against the CPU reference for float32/float16/bfloat16 over shapes including size 0,
// odd sizes and non-contiguous (transposed, padded, 0-stride broadcast) inputs; the reference against
// hand-worked values; backward ops against central finite differences of their forward in float64; every
// BAD_PARAM path with its message; and float64 refused by the device.
#include "reduce_util.h"

#include <gmock/gmock.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace {

using optest::Dims;
using optest::expectClose;
using optest::Handle;
using optest::randomValues;
using optest::Tensor;
using optest::toleranceFor;
using reducetest::dot;
using reducetest::dtypeLabel;
using reducetest::kDeviceDtypes;
using reducetest::lastError;
using reducetest::makePair;
using reducetest::numericalGradient;
using reducetest::Pair;
using reducetest::permutedStrides;
using testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr mluopDataType_t kF32 = MLUOP_DTYPE_FLOAT;
constexpr mluopDataType_t kF64 = MLUOP_DTYPE_DOUBLE;
constexpr mluopDataType_t kI64 = MLUOP_DTYPE_INT64;

void expectBadParam(mluopStatus_t status, const std::string& message) {
  EXPECT_EQ(status, MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr(message));
}

void expectBadParam(const mlu::Status& status, const std::string& message) {
  EXPECT_EQ(status.code, MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(status.message, HasSubstr(message));
}

void expectOk(const mlu::Status& status) { ASSERT_TRUE(status.ok()) << status.message; }

void expectExact(const std::vector<double>& actual, const std::vector<double>& expected,
                 const std::string& what) {
  expectClose(actual, expected, {0.0, 0.0}, what);
}

// ================================ sum / mean ================================

struct SumCase {
  Dims dims;
  Dims strides;  // empty: contiguous
  std::vector<int> reduce;
  bool keepdim;
  Dims out;  // the result's shape
};

const std::vector<SumCase>& sumCases() {
  static const std::vector<SumCase> cases = {
      {{7, 13}, {}, {1}, false, {7}},
      {{7, 13}, {}, {0}, true, {1, 13}},
      {{7, 13}, permutedStrides({7, 13}, {1, 0}), {-1}, false, {7}},  // transposed view
      {{7, 13}, {16, 1}, {}, false, {}},                              // padded rows; every dim
      {{7, 13}, {}, {}, true, {1, 1}},
      {{2, 3, 4, 5}, permutedStrides({2, 3, 4, 5}, {3, 1, 0, 2}), {0, 2}, true, {1, 3, 1, 5}},
      {{2, 3, 4, 5}, {}, {-1, 1}, false, {2, 4}},
      {{3, 0, 5}, {}, {1}, false, {3, 5}},  // reduces zero elements
      {{0, 4}, {}, {1}, false, {0}},        // no outputs
      {{}, {}, {}, false, {}},              // 0-d
      {{}, {}, {0}, true, {}},
      {{3, 1000}, {}, {1}, false, {3}},  // several accumulation blocks per output
      {{5000}, {}, {0}, false, {}},      // one output, blocks summed in parallel
      {{37, 300}, {}, {0}, false, {300}},
      {{5, 13}, {0, 1}, {0}, false, {13}},  // 0-stride broadcast input
  };
  return cases;
}

// sum, mean, norm and var share their arguments (var also takes `unbiased`).
template <typename Args>
mlu::Status referenceSumLike(const std::vector<int>& dims, bool keepdim, const Tensor& x, const Tensor& y,
                             bool unbiased = true, double p = 2.0) {
  Args a;
  a.dims = dims;
  a.keepdim = keepdim;
  if constexpr (std::is_same_v<Args, mlu::var_args>) a.unbiased = unbiased;
  if constexpr (std::is_same_v<Args, mlu::norm_args>) a.p = p;
  a.x = x.view();
  a.y = y.view();
  return mlu::reference::run(a);
}

template <typename Args>
mluopStatus_t deviceSumLike(const Handle& h, const std::vector<int>& dims, bool keepdim, const Tensor& x,
                            const Tensor& y, bool unbiased = true, double p = 2.0) {
  const int n = static_cast<int>(dims.size());
  if constexpr (std::is_same_v<Args, mlu::var_args>) {
    return mluopReduceVar(h, dims.data(), n, unbiased, keepdim, x.desc(), x.data(), y.desc(), y.data());
  } else if constexpr (std::is_same_v<Args, mlu::norm_args>) {
    return mluopReduceNorm(h, p, dims.data(), n, keepdim, x.desc(), x.data(), y.desc(), y.data());
  } else {
    const auto fn = std::is_same_v<Args, mlu::sum_args> ? mluopReduceSum : mluopReduceMean;
    return fn(h, dims.data(), n, keepdim, x.desc(), x.data(), y.desc(), y.data());
  }
}

template <typename Args>
void sumLikeDeviceMatchesReference(bool unbiased = true) {
  Handle h;
  std::uint32_t seed = 1;
  for (const mluopDataType_t dtype : kDeviceDtypes) {
    for (const SumCase& c : sumCases()) {
      const std::string what = dtypeLabel(dtype) + " " + testing::PrintToString(c.dims) + " dims " +
                               testing::PrintToString(c.reduce) + (unbiased ? "" : " biased");
      const Pair x = makePair(dtype, c.dims, randomValues(optest::numel(c.dims), seed++), c.strides);
      Tensor y = Tensor::device(dtype, c.out);
      Tensor y_ref = Tensor::host(dtype, c.out);
      ASSERT_EQ(deviceSumLike<Args>(h, c.reduce, c.keepdim, x.dev, y, unbiased), MLUOP_STATUS_SUCCESS)
          << lastError();
      expectOk(referenceSumLike<Args>(c.reduce, c.keepdim, x.host, y_ref, unbiased));
      h.sync();
      const std::int64_t k = optest::numel(c.dims) / std::max<std::int64_t>(optest::numel(c.out), 1);
      // Sums over k elements: atol scaled by sqrt(k) (see reductionTolerance).
      expectClose(y.values(), y_ref.values(), reducetest::reductionTolerance(dtype, k), what);
    }
  }
}

TEST(ReduceSum, DeviceMatchesReference) { sumLikeDeviceMatchesReference<mlu::sum_args>(); }

TEST(ReduceMean, DeviceMatchesReference) { sumLikeDeviceMatchesReference<mlu::mean_args>(); }

TEST(ReduceNorm, DeviceMatchesReference) { sumLikeDeviceMatchesReference<mlu::norm_args>(); }

// norm with p != 2 (DIOPI's: inf, -inf, 0, 1, 2.5, -2): the device against the reference over the sum
// cases (p = ±inf and p < 0 skip the empty reductions, which they refuse).
TEST(ReduceNorm, AnyPDeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 900;
  const double inf = std::numeric_limits<double>::infinity();
  for (const double p : {inf, -inf, 0.0, 1.0, 2.5, -2.0, 3.0}) {
    for (const mluopDataType_t dtype : kDeviceDtypes) {
      for (const SumCase& c : sumCases()) {
        const std::int64_t k = optest::numel(c.dims) / std::max<std::int64_t>(optest::numel(c.out), 1);
        if ((std::isinf(p) || p < 0) && k == 0 && optest::numel(c.out) > 0) continue;
        const std::string what = "p " + std::to_string(p) + " " + dtypeLabel(dtype) + " " +
                                 testing::PrintToString(c.dims) + " dims " + testing::PrintToString(c.reduce);
        std::vector<double> v = randomValues(optest::numel(c.dims), seed++);
        if (p == 0.0) {
          for (std::size_t i = 0; i < v.size(); i += 3) v[i] = 0;  // some zeros to count
        }
        const Pair x = makePair(dtype, c.dims, v, c.strides);
        Tensor y = Tensor::device(dtype, c.out);
        Tensor y_ref = Tensor::host(dtype, c.out);
        ASSERT_EQ(deviceSumLike<mlu::norm_args>(h, c.reduce, c.keepdim, x.dev, y, true, p),
                  MLUOP_STATUS_SUCCESS)
            << what << ": " << lastError();
        expectOk(referenceSumLike<mlu::norm_args>(c.reduce, c.keepdim, x.host, y_ref, true, p));
        h.sync();
        optest::Tolerance tol = reducetest::reductionTolerance(dtype, k);
        if (p == 0.0) tol = {0, 0};             // a count: exact
        if (p < 0 && p != -inf) tol.rtol *= 4;  // |x|^p of small |x| dominates
        expectClose(y.values(), y_ref.values(), tol, what);
      }
    }
  }
}

TEST(ReduceNorm, AnyPHandWorked) {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor x = Tensor::host(kF64, {4}, {3, -4, 0, 12});
  Tensor y = Tensor::host(kF64, {});
  const auto norm = [&](double p) {
    expectOk(referenceSumLike<mlu::norm_args>({}, false, x, y, true, p));
    return y.values()[0];
  };
  EXPECT_EQ(norm(2.0), 13);
  EXPECT_EQ(norm(1.0), 19);
  EXPECT_EQ(norm(0.0), 3);  // nonzero count
  EXPECT_EQ(norm(inf), 12);
  EXPECT_EQ(norm(-inf), 0);
  EXPECT_NEAR(norm(3.0), std::cbrt(27.0 + 64 + 1728), 1e-12);
  EXPECT_EQ(norm(-2.0), 0);  // a zero element: |0|^-2 = inf, inf^(-1/2) = 0
  Handle h;
  const Pair pair = makePair(kF32, {4}, {3, -4, 0, 12});
  Tensor yd = Tensor::device(kF32, {});
  for (const double p : {1.0, 0.0, inf, -inf, 3.0}) {
    ASSERT_EQ(deviceSumLike<mlu::norm_args>(h, {}, false, pair.dev, yd, true, p), MLUOP_STATUS_SUCCESS);
    h.sync();
    EXPECT_NEAR(yd.values()[0], norm(p), 1e-5 * norm(p)) << "p " << p;
  }
  // an empty reduction: 0 for p >= 0; p = ±inf and p < 0 refused (no identity); NaN p refused
  const Pair empty = makePair(kF32, {3, 0}, {});
  Tensor rows = Tensor::device(kF32, {3});
  ASSERT_EQ(deviceSumLike<mlu::norm_args>(h, {1}, false, empty.dev, rows, true, 1.0), MLUOP_STATUS_SUCCESS);
  h.sync();
  expectExact(rows.values(), {0, 0, 0}, "empty 1-norm");
  expectBadParam(deviceSumLike<mlu::norm_args>(h, {1}, false, empty.dev, rows, true, inf),
                 "norm: the reduction over an empty dim of x [3, 0] has no value for p = inf (no identity)");
  expectBadParam(deviceSumLike<mlu::norm_args>(h, {1}, false, empty.dev, rows, true, -1.0),
                 "p = -1 (no identity)");
  expectBadParam(deviceSumLike<mlu::norm_args>(h, {1}, false, empty.dev, rows, true,
                                               std::numeric_limits<double>::quiet_NaN()),
                 "norm: p is NaN");
}

TEST(ReduceVar, DeviceMatchesReference) {
  sumLikeDeviceMatchesReference<mlu::var_args>(true);
  sumLikeDeviceMatchesReference<mlu::var_args>(false);
}

TEST(ReduceSum, ReferenceHandWorked) {
  const Tensor x = Tensor::host(kF64, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor rows = Tensor::host(kF64, {2});
  expectOk(referenceSumLike<mlu::sum_args>({1}, false, x, rows));
  expectExact(rows.values(), {6, 15}, "sum dim 1");
  Tensor cols = Tensor::host(kF64, {1, 3});
  expectOk(referenceSumLike<mlu::sum_args>({-2}, true, x, cols));
  expectExact(cols.values(), {5, 7, 9}, "sum dim -2 keepdim");
  Tensor all = Tensor::host(kF64, {});
  expectOk(referenceSumLike<mlu::sum_args>({}, false, x, all));
  expectExact(all.values(), {21}, "sum of all");
  const Tensor transposed =
      Tensor::host(kF64, {3, 2}, {1, 4, 2, 5, 3, 6}, {1, 3});  // storage [[1,2,3],[4,5,6]]
  Tensor t_rows = Tensor::host(kF64, {3});
  expectOk(referenceSumLike<mlu::sum_args>({1}, false, transposed, t_rows));
  expectExact(t_rows.values(), {5, 7, 9}, "sum of a transposed view");
  const Tensor empty = Tensor::host(kF64, {2, 0});
  Tensor zeros = Tensor::host(kF64, {2});
  expectOk(referenceSumLike<mlu::sum_args>({1}, false, empty, zeros));
  expectExact(zeros.values(), {0, 0}, "sum of nothing");
}

TEST(ReduceMean, ReferenceHandWorked) {
  const Tensor x = Tensor::host(kF64, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor rows = Tensor::host(kF64, {2, 1});
  expectOk(referenceSumLike<mlu::mean_args>({1}, true, x, rows));
  expectExact(rows.values(), {2, 5}, "mean dim 1");
  Tensor all = Tensor::host(kF64, {});
  expectOk(referenceSumLike<mlu::mean_args>({0, 1}, false, x, all));
  expectExact(all.values(), {3.5}, "mean of all");
  const Tensor empty = Tensor::host(kF64, {2, 0});
  Tensor nan = Tensor::host(kF64, {2});
  expectOk(referenceSumLike<mlu::mean_args>({1}, false, empty, nan));
  EXPECT_TRUE(std::isnan(nan.values()[0]) && std::isnan(nan.values()[1])) << "mean of nothing is NaN";
}

TEST(ReduceNorm, ReferenceHandWorked) {
  const Tensor x = Tensor::host(kF64, {2, 2}, {3, 4, -2, 0});
  Tensor rows = Tensor::host(kF64, {2});
  expectOk(referenceSumLike<mlu::norm_args>({1}, false, x, rows));
  expectExact(rows.values(), {5, 2}, "norm dim 1");
  Tensor cols = Tensor::host(kF64, {1, 2});
  expectOk(referenceSumLike<mlu::norm_args>({0}, true, x, cols));
  expectClose(cols.values(), {std::sqrt(13.0), 4}, {0, 1e-15}, "norm dim 0 keepdim");
  Tensor all = Tensor::host(kF64, {});
  expectOk(referenceSumLike<mlu::norm_args>({}, false, x, all));
  expectClose(all.values(), {std::sqrt(29.0)}, {0, 1e-15}, "norm of all");
  const Tensor empty = Tensor::host(kF64, {2, 0});
  Tensor zeros = Tensor::host(kF64, {2});
  expectOk(referenceSumLike<mlu::norm_args>({1}, false, empty, zeros));
  expectExact(zeros.values(), {0, 0}, "norm of nothing");
}

TEST(ReduceVar, ReferenceHandWorked) {
  const Tensor x = Tensor::host(kF64, {2, 4}, {1, 2, 3, 4, 2, 2, 2, 10});
  Tensor rows = Tensor::host(kF64, {2});
  expectOk(referenceSumLike<mlu::var_args>({1}, false, x, rows, true));
  expectClose(rows.values(), {5.0 / 3, 16}, {0, 1e-15}, "unbiased var dim 1");
  expectOk(referenceSumLike<mlu::var_args>({-1}, false, x, rows, false));
  expectClose(rows.values(), {1.25, 12}, {0, 1e-15}, "biased var dim -1");
  Tensor cols = Tensor::host(kF64, {1, 4});
  expectOk(referenceSumLike<mlu::var_args>({0}, true, x, cols, true));
  expectClose(cols.values(), {0.5, 0, 0.5, 18}, {0, 1e-15}, "unbiased var dim 0 keepdim");
  Tensor all = Tensor::host(kF64, {});
  expectOk(referenceSumLike<mlu::var_args>({}, false, x, all, false));
  expectClose(all.values(), {7.1875}, {0, 1e-15}, "biased var of all");  // mean 3.25, M2 57.5
  // One element: N - 1 = 0 gives NaN unbiased, 0 biased; no elements: NaN either way.
  const Tensor one = Tensor::host(kF64, {2, 1}, {7, -3});
  expectOk(referenceSumLike<mlu::var_args>({1}, false, one, rows, true));
  EXPECT_TRUE(std::isnan(rows.values()[0]) && std::isnan(rows.values()[1])) << "unbiased var of one element";
  expectOk(referenceSumLike<mlu::var_args>({1}, false, one, rows, false));
  expectExact(rows.values(), {0, 0}, "biased var of one element");
  const Tensor empty = Tensor::host(kF64, {2, 0});
  expectOk(referenceSumLike<mlu::var_args>({1}, false, empty, rows, false));
  EXPECT_TRUE(std::isnan(rows.values()[0]) && std::isnan(rows.values()[1])) << "var of nothing";
  // And the device gives the same NaN / 0.
  Handle h;
  const Tensor one_dev = Tensor::device(kF32, {2, 1}, {7, -3});
  Tensor out = Tensor::device(kF32, {2});
  ASSERT_EQ(deviceSumLike<mlu::var_args>(h, {1}, false, one_dev, out, true), MLUOP_STATUS_SUCCESS);
  h.sync();
  EXPECT_TRUE(std::isnan(out.values()[0]) && std::isnan(out.values()[1])) << "device unbiased var of one";
  ASSERT_EQ(deviceSumLike<mlu::var_args>(h, {1}, false, one_dev, out, false), MLUOP_STATUS_SUCCESS);
  h.sync();
  expectExact(out.values(), {0, 0}, "device biased var of one element");
}

// The device scales before squaring: float32 values whose squares overflow or underflow still give the
// right norm; inf gives inf and NaN wins.
TEST(ReduceNorm, DeviceScalesLargeAndTinyValues) {
  const double tiny = std::numeric_limits<float>::denorm_min();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    std::vector<double> x;
    double expected;
  };
  const std::vector<Case> cases = {
      {{3e30, 4e30}, 5e30},     {{-3e37, 4e37, 0}, 5e37},
      {{3e-30, -4e-30}, 5e-30}, {{3 * tiny, 4 * tiny}, 5 * tiny},
      {{0, 0, -0.0}, 0},        {{1, -inf, 2}, inf},
      {{inf, kNaN, 1}, kNaN},   {{kNaN, inf}, kNaN},
  };
  Handle h;
  for (const Case& c : cases) {
    const auto n = static_cast<std::int64_t>(c.x.size());
    const std::string what = testing::PrintToString(c.x);
    const Pair x = makePair(kF32, {n}, c.x);
    Tensor y = Tensor::device(kF32, {});
    Tensor y_ref = Tensor::host(kF32, {});
    ASSERT_EQ(deviceSumLike<mlu::norm_args>(h, {}, false, x.dev, y), MLUOP_STATUS_SUCCESS) << lastError();
    expectOk(referenceSumLike<mlu::norm_args>({}, false, x.host, y_ref));
    h.sync();
    expectClose(y.values(), {static_cast<float>(c.expected)}, {0, 1e-6}, what + " device");
    expectClose(y_ref.values(), {static_cast<float>(c.expected)}, {0, 1e-6}, what + " reference");
  }
  // Many large values across several accumulation blocks and cores.
  const std::int64_t n = 20000;
  const Pair big = makePair(kF32, {n}, randomValues(n, 77, 1e36, 2e36));
  Tensor y = Tensor::device(kF32, {});
  Tensor y_ref = Tensor::host(kF32, {});
  ASSERT_EQ(deviceSumLike<mlu::norm_args>(h, {}, false, big.dev, y), MLUOP_STATUS_SUCCESS) << lastError();
  expectOk(referenceSumLike<mlu::norm_args>({}, false, big.host, y_ref));
  h.sync();
  EXPECT_TRUE(std::isfinite(y.values()[0])) << y.values()[0];
  expectClose(y.values(), y_ref.values(), {0, 1e-5}, "large values");
}

// Values with a large mean and a small spread: a one-pass E[x^2] - E[x]^2 in float32 loses everything
// (1e8 * 6e-8 ~ 6 against a variance of 1/3); the device's two passes do not.
TEST(ReduceVar, DeviceIsNumericallyStable) {
  Handle h;
  const std::int64_t n = 4000;
  std::vector<double> values = randomValues(n, 78);
  for (double& v : values) v += 1e4;
  const Pair x = makePair(kF32, {4, n / 4}, values);
  Tensor y = Tensor::device(kF32, {4});
  Tensor y_ref = Tensor::host(kF32, {4});
  ASSERT_EQ(deviceSumLike<mlu::var_args>(h, {1}, false, x.dev, y), MLUOP_STATUS_SUCCESS) << lastError();
  expectOk(referenceSumLike<mlu::var_args>({1}, false, x.host, y_ref));
  h.sync();
  expectClose(y.values(), y_ref.values(), {0, 1e-3}, "var around 1e4");
}

TEST(ReduceNormVar, BadParams) {
  Handle h;
  const Pair x = makePair(kF32, {7, 13}, randomValues(91, 3));
  Tensor y = Tensor::device(kF32, {7});
  Tensor y_host = Tensor::host(kF32, {7});
  expectBadParam(deviceSumLike<mlu::norm_args>(h, {1, -1}, false, x.dev, y),
                 "norm: dim 1 appears more than once in dims [1, -1]");
  expectBadParam(deviceSumLike<mlu::var_args>(h, {0, 0}, false, x.dev, y),
                 "var: dim 0 appears more than once in dims [0, 0]");
  expectBadParam(referenceSumLike<mlu::var_args>({1, 1}, false, x.host, y_host),
                 "dim 1 appears more than once");
  expectBadParam(deviceSumLike<mlu::norm_args>(h, {2}, false, x.dev, y),
                 "norm: dims[0] = 2 is out of range for x with 2 dims (expected -2 to 1)");
  expectBadParam(deviceSumLike<mlu::var_args>(h, {0, -3}, false, x.dev, y),
                 "var: dims[1] = -3 is out of range");
  expectBadParam(referenceSumLike<mlu::norm_args>({-3}, false, x.host, y_host),
                 "dims[0] = -3 is out of range");
  Tensor kept = Tensor::device(kF32, {7, 1});
  expectBadParam(deviceSumLike<mlu::norm_args>(h, {1}, false, x.dev, kept),
                 "norm: y has shape [7, 1] but the result has shape [7]");
  expectBadParam(deviceSumLike<mlu::var_args>(h, {1}, true, x.dev, y),
                 "var: y has shape [7] but the result has shape [7, 1]");
  Tensor half = Tensor::device(MLUOP_DTYPE_HALF, {7});
  expectBadParam(deviceSumLike<mlu::norm_args>(h, {1}, false, x.dev, half), "y is float16 but x is float32");
  expectBadParam(deviceSumLike<mlu::var_args>(h, {1}, false, x.dev, half), "y is float16 but x is float32");
  Tensor overlapping = Tensor::device(kF32, {7}, {}, {0});
  expectBadParam(deviceSumLike<mlu::norm_args>(h, {1}, false, x.dev, overlapping),
                 "norm: y (shape [7], strides [0]) overlaps itself");
  expectBadParam(deviceSumLike<mlu::var_args>(h, {1}, false, x.dev, overlapping),
                 "var: y (shape [7], strides [0]) overlaps itself");
  expectBadParam(referenceSumLike<mlu::var_args>({1}, false, x.host, Tensor::host(kF32, {7}, {}, {0})),
                 "y (shape [7], strides [0]) overlaps itself");
  mlu::norm_args missing;
  missing.x = x.host.view();
  expectBadParam(mlu::reference::run(missing), "y is missing");
  const Tensor ints = Tensor::device(MLUOP_DTYPE_INT32, {7, 13});
  Tensor y_int = Tensor::device(MLUOP_DTYPE_INT32, {7});
  EXPECT_EQ(deviceSumLike<mlu::norm_args>(h, {1}, false, ints, y_int), MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("norm: x is int32, which is not supported"));
  EXPECT_EQ(deviceSumLike<mlu::var_args>(h, {1}, false, ints, y_int), MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("var: x is int32, which is not supported"));
}

TEST(ReduceSumMean, BadParams) {
  Handle h;
  const Pair x = makePair(kF32, {7, 13}, randomValues(91, 3));
  Tensor y = Tensor::device(kF32, {7});
  Tensor y_host = Tensor::host(kF32, {7});
  expectBadParam(deviceSumLike<mlu::sum_args>(h, {1, -1}, false, x.dev, y),
                 "sum: dim 1 appears more than once in dims [1, -1]");
  expectBadParam(referenceSumLike<mlu::sum_args>({1, -1}, false, x.host, y_host),
                 "dim 1 appears more than once");
  expectBadParam(deviceSumLike<mlu::mean_args>(h, {2}, false, x.dev, y),
                 "mean: dims[0] = 2 is out of range for x with 2 dims (expected -2 to 1)");
  expectBadParam(deviceSumLike<mlu::sum_args>(h, {0, -3}, false, x.dev, y), "dims[1] = -3 is out of range");
  expectBadParam(referenceSumLike<mlu::mean_args>({-3}, false, x.host, y_host),
                 "dims[0] = -3 is out of range");
  Tensor kept = Tensor::device(kF32, {7, 1});
  expectBadParam(deviceSumLike<mlu::sum_args>(h, {1}, false, x.dev, kept),
                 "y has shape [7, 1] but the result has shape [7]");
  expectBadParam(deviceSumLike<mlu::mean_args>(h, {1}, true, x.dev, y),
                 "y has shape [7] but the result has shape [7, 1]");
  Tensor half = Tensor::device(MLUOP_DTYPE_HALF, {7});
  expectBadParam(deviceSumLike<mlu::sum_args>(h, {1}, false, x.dev, half), "y is float16 but x is float32");
  const Tensor ints = Tensor::device(MLUOP_DTYPE_INT32, {7, 13});
  Tensor y_int = Tensor::device(MLUOP_DTYPE_INT32, {7});
  EXPECT_EQ(deviceSumLike<mlu::mean_args>(h, {1}, false, ints, y_int), MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("x is int32, which is not supported; use float32, float16 or bfloat16"));
  expectBadParam(deviceSumLike<mlu::sum_args>(h, {1}, false, ints, y),
                 "sum: y is float32; the sum of a int32 tensor is int64 (or int32)");
}

// ================================ integer and bool sum ================================

const std::vector<mluopDataType_t> kIntegerDtypes = {MLUOP_DTYPE_INT8,  MLUOP_DTYPE_INT16, MLUOP_DTYPE_INT32,
                                                     MLUOP_DTYPE_INT64, MLUOP_DTYPE_UINT8, MLUOP_DTYPE_BOOL};

// Whole values for an integer dtype: [-100, 100) (uint8 [0, 200), bool 0/1), so sums overflow int8 and
// uint8 when kept in their own type.
std::vector<double> integerValues(mluopDataType_t dtype, std::int64_t n, std::uint32_t seed) {
  std::vector<double> v = randomValues(n, seed, -100.0, 100.0);
  for (double& x : v) {
    x = std::floor(x);
    if (dtype == MLUOP_DTYPE_UINT8) x = x + 100;
    if (dtype == MLUOP_DTYPE_BOOL) x = x > 0 ? 1 : 0;
  }
  return v;
}

// The sum of integers is exact (any order): device and reference agree bit for bit, into int64 (PyTorch's
// default) and into x's own dtype (wrapping; bool: any nonzero).
TEST(ReduceSum, IntegersAndBoolAreExact) {
  Handle h;
  std::uint32_t seed = 500;
  for (const mluopDataType_t dtype : kIntegerDtypes) {
    for (const mluopDataType_t out : {kI64, dtype}) {
      for (const SumCase& c : sumCases()) {
        const std::string what = dtypeLabel(dtype) + " -> " + dtypeLabel(out) + " " +
                                 testing::PrintToString(c.dims) + " dims " + testing::PrintToString(c.reduce);
        const Pair x =
            makePair(dtype, c.dims, integerValues(dtype, optest::numel(c.dims), seed++), c.strides);
        Tensor y = Tensor::device(out, c.out);
        Tensor y_ref = Tensor::host(out, c.out);
        ASSERT_EQ(deviceSumLike<mlu::sum_args>(h, c.reduce, c.keepdim, x.dev, y), MLUOP_STATUS_SUCCESS)
            << what << ": " << lastError();
        expectOk(referenceSumLike<mlu::sum_args>(c.reduce, c.keepdim, x.host, y_ref));
        h.sync();
        expectExact(y.values(), y_ref.values(), what);
      }
    }
  }
}

TEST(ReduceSum, IntegerHandWorked) {
  Handle h;
  const auto sum = [&](mluopDataType_t dtype, mluopDataType_t out, const std::vector<double>& x) {
    const Pair p = makePair(dtype, {static_cast<std::int64_t>(x.size())}, x);
    Tensor y = Tensor::device(out, {});
    Tensor y_ref = Tensor::host(out, {});
    EXPECT_EQ(deviceSumLike<mlu::sum_args>(h, {}, false, p.dev, y), MLUOP_STATUS_SUCCESS) << lastError();
    expectOk(referenceSumLike<mlu::sum_args>({}, false, p.host, y_ref));
    h.sync();
    EXPECT_EQ(y.values(), y_ref.values()) << dtypeLabel(dtype) << " -> " << dtypeLabel(out);
    return y.values()[0];
  };
  EXPECT_EQ(sum(MLUOP_DTYPE_INT8, kI64, {100, 100, 100, -128}), 172);
  EXPECT_EQ(sum(MLUOP_DTYPE_INT8, MLUOP_DTYPE_INT8, {100, 100, 100}), 44);  // 300 wraps
  EXPECT_EQ(sum(MLUOP_DTYPE_UINT8, kI64, {255, 255, 3}), 513);
  EXPECT_EQ(sum(MLUOP_DTYPE_BOOL, kI64, {1, 0, 1, 1}), 3);  // counts the true values
  EXPECT_EQ(sum(MLUOP_DTYPE_BOOL, MLUOP_DTYPE_BOOL, {0, 0, 1}), 1);
  EXPECT_EQ(sum(MLUOP_DTYPE_INT32, kI64, {2147483647, 2147483647, 2}), 4294967296.0);  // no int32 overflow
  EXPECT_EQ(sum(MLUOP_DTYPE_INT32, kI64, {16777217, 1}), 16777218);                    // not through float32
  EXPECT_EQ(sum(MLUOP_DTYPE_INT16, kI64, {}), 0);                                      // the sum of nothing
}

// ================================ max / min / argmax ================================

struct DimCase {
  Dims dims;
  Dims strides;
  int dim;
  bool keepdim;
  Dims out;
};

const std::vector<DimCase>& maxCases() {
  static const std::vector<DimCase> cases = {
      {{7, 13}, {}, 1, false, {7}},
      {{7, 13}, {}, 0, true, {1, 13}},
      {{7, 13}, permutedStrides({7, 13}, {1, 0}), -1, false, {7}},
      {{2, 3, 4}, permutedStrides({2, 3, 4}, {2, 0, 1}), 1, true, {2, 1, 4}},
      {{0, 5}, {}, 1, false, {0}},  // no outputs
      {{}, {}, 0, false, {}},       // 0-d
      {{}, {}, -1, true, {}},
      {{1000}, {}, 0, false, {}},
      {{5, 13}, {0, 1}, 0, false, {13}},  // 0-stride broadcast
  };
  return cases;
}

enum class Extremum { kMax, kMin, kArgmax };

mluopStatus_t deviceExtremum(const Handle& h, Extremum op, int dim, bool keepdim, const Tensor& x,
                             const Tensor& values, const Tensor& indices) {
  switch (op) {
    case Extremum::kMax:
      return mluopReduceMax(h, dim, keepdim, x.desc(), x.data(), values.desc(), values.data(), indices.desc(),
                            indices.data());
    case Extremum::kMin:
      return mluopReduceMin(h, dim, keepdim, x.desc(), x.data(), values.desc(), values.data(), indices.desc(),
                            indices.data());
    case Extremum::kArgmax:
      break;
  }
  return mluopArgmax(h, dim, keepdim, x.desc(), x.data(), indices.desc(), indices.data());
}

mlu::Status referenceExtremum(Extremum op, int dim, bool keepdim, const Tensor& x, const Tensor& values,
                              const Tensor& indices) {
  const auto fill = [&](auto& a) {
    a.dim = dim;
    a.keepdim = keepdim;
    a.x = x.view();
    if constexpr (!std::is_same_v<std::decay_t<decltype(a)>, mlu::argmax_args>) a.values = values.view();
    a.indices = indices.view();
    return mlu::reference::run(a);
  };
  if (op == Extremum::kMax) {
    mlu::max_args a;
    return fill(a);
  }
  if (op == Extremum::kMin) {
    mlu::min_args a;
    return fill(a);
  }
  mlu::argmax_args a;
  return fill(a);
}

TEST(ReduceMaxMinArgmax, DeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 10;
  for (const Extremum op : {Extremum::kMax, Extremum::kMin, Extremum::kArgmax}) {
    for (const mluopDataType_t dtype : kDeviceDtypes) {
      for (const DimCase& c : maxCases()) {
        const std::string what = dtypeLabel(dtype) + " op " + std::to_string(static_cast<int>(op)) + " " +
                                 testing::PrintToString(c.dims) + " dim " + std::to_string(c.dim);
        // Values on a 0.25 grid: many ties, which must resolve to the first occurrence on both sides.
        const Pair x =
            makePair(dtype, c.dims, reducetest::tiedValues(optest::numel(c.dims), seed++, 0.25), c.strides);
        Tensor values = Tensor::device(dtype, c.out);
        Tensor indices = Tensor::device(kI64, c.out);
        Tensor values_ref = Tensor::host(dtype, c.out);
        Tensor indices_ref = Tensor::host(kI64, c.out);
        ASSERT_EQ(deviceExtremum(h, op, c.dim, c.keepdim, x.dev, values, indices), MLUOP_STATUS_SUCCESS)
            << lastError();
        expectOk(referenceExtremum(op, c.dim, c.keepdim, x.host, values_ref, indices_ref));
        h.sync();
        if (op != Extremum::kArgmax) expectExact(values.values(), values_ref.values(), what + " values");
        expectExact(indices.values(), indices_ref.values(), what + " indices");
      }
    }
  }
}

TEST(ReduceMaxMinArgmax, ReferenceHandWorked) {
  const Tensor x = Tensor::host(kF64, {2, 3}, {1, 5, 5, 7, -2, 7});
  Tensor values = Tensor::host(kF64, {2});
  Tensor indices = Tensor::host(kI64, {2});
  expectOk(referenceExtremum(Extremum::kMax, 1, false, x, values, indices));
  expectExact(values.values(), {5, 7}, "max");
  expectExact(indices.values(), {1, 0}, "max indices (first of ties)");
  expectOk(referenceExtremum(Extremum::kMin, -1, false, x, values, indices));
  expectExact(values.values(), {1, -2}, "min");
  expectExact(indices.values(), {0, 1}, "min indices");
  Tensor col_indices = Tensor::host(kI64, {1, 3});
  expectOk(referenceExtremum(Extremum::kArgmax, 0, true, x, Tensor::host(kF64, {}), col_indices));
  expectExact(col_indices.values(), {1, 0, 1}, "argmax dim 0");
  const Tensor scalar = Tensor::host(kF64, {}, {4.5});
  Tensor v0 = Tensor::host(kF64, {});
  Tensor i0 = Tensor::host(kI64, {});
  expectOk(referenceExtremum(Extremum::kMax, 0, true, scalar, v0, i0));
  expectExact(v0.values(), {4.5}, "max of a 0-d tensor");
  expectExact(i0.values(), {0}, "index into a 0-d tensor");
}

TEST(ReduceMaxMinArgmax, NaNPropagatesWithItsIndex) {
  Handle h;
  for (const mluopDataType_t dtype : kDeviceDtypes) {
    const std::vector<double> v = {1, kNaN, 3, kNaN, -7};
    const Pair x = makePair(dtype, {5}, v);
    for (const Extremum op : {Extremum::kMax, Extremum::kMin, Extremum::kArgmax}) {
      Tensor values = Tensor::device(dtype, {});
      Tensor indices = Tensor::device(kI64, {});
      Tensor values_ref = Tensor::host(dtype, {});
      Tensor indices_ref = Tensor::host(kI64, {});
      ASSERT_EQ(deviceExtremum(h, op, 0, false, x.dev, values, indices), MLUOP_STATUS_SUCCESS) << lastError();
      expectOk(referenceExtremum(op, 0, false, x.host, values_ref, indices_ref));
      h.sync();
      EXPECT_EQ(indices.values()[0], 1) << dtypeLabel(dtype);
      EXPECT_EQ(indices_ref.values()[0], 1) << dtypeLabel(dtype);
      if (op != Extremum::kArgmax) {
        EXPECT_TRUE(std::isnan(values.values()[0]));
        EXPECT_TRUE(std::isnan(values_ref.values()[0]));
      }
    }
  }
}

TEST(ReduceMaxMinArgmax, BadParams) {
  Handle h;
  const Tensor x = Tensor::device(kF32, {4, 6}, randomValues(24, 4));
  Tensor values = Tensor::device(kF32, {4});
  Tensor indices = Tensor::device(kI64, {4});
  expectBadParam(deviceExtremum(h, Extremum::kMax, 2, false, x, values, indices),
                 "max: dim = 2 is out of range for x with 2 dims (expected -2 to 1)");
  expectBadParam(deviceExtremum(h, Extremum::kArgmax, -3, false, x, values, indices),
                 "argmax: dim = -3 is out of range");
  expectBadParam(referenceExtremum(Extremum::kMin, 5, false, Tensor::host(kF32, {4, 6}),
                                   Tensor::host(kF32, {4}), Tensor::host(kI64, {4})),
                 "dim = 5 is out of range");
  const Tensor empty = Tensor::device(kF32, {0, 3});
  Tensor v3 = Tensor::device(kF32, {3});
  Tensor i3 = Tensor::device(kI64, {3});
  expectBadParam(deviceExtremum(h, Extremum::kMin, 0, false, empty, v3, i3),
                 "min: reduction dim 0 of x with shape [0, 3] has size 0");
  expectBadParam(deviceExtremum(h, Extremum::kArgmax, 0, false, empty, v3, i3),
                 "reduction dim 0 of x with shape [0, 3] has size 0");
  Tensor wrong = Tensor::device(kF32, {6});
  expectBadParam(deviceExtremum(h, Extremum::kMax, 1, false, x, wrong, indices),
                 "values has shape [6] but the result has shape [4]");
  Tensor wrong_indices = Tensor::device(kI64, {4, 1});
  expectBadParam(deviceExtremum(h, Extremum::kMax, 1, false, x, values, wrong_indices),
                 "indices has shape [4, 1] but the result has shape [4]");
  Tensor int32_indices = Tensor::device(MLUOP_DTYPE_INT32, {4});
  expectBadParam(deviceExtremum(h, Extremum::kArgmax, 1, false, x, values, int32_indices),
                 "indices is int32; expected int64");
  Tensor half_values = Tensor::device(MLUOP_DTYPE_HALF, {4});
  expectBadParam(deviceExtremum(h, Extremum::kMin, 1, false, x, half_values, indices),
                 "values is float16 but x is float32");
}

// max/min/argmax of integers compare exactly in their own type (2^24 + 1 > 2^24, which float32 cannot
// tell apart); bool for max/min (PyTorch's argmax refuses bool); ties resolve to the first index.
TEST(ReduceMaxMinArgmax, IntegersAndBool) {
  Handle h;
  std::uint32_t seed = 700;
  for (const Extremum op : {Extremum::kMax, Extremum::kMin, Extremum::kArgmax}) {
    for (const mluopDataType_t dtype : kIntegerDtypes) {
      if (op == Extremum::kArgmax && dtype == MLUOP_DTYPE_BOOL) continue;
      for (const DimCase& c : maxCases()) {
        const std::string what = dtypeLabel(dtype) + " op " + std::to_string(static_cast<int>(op)) + " " +
                                 testing::PrintToString(c.dims) + " dim " + std::to_string(c.dim);
        std::vector<double> v = integerValues(dtype, optest::numel(c.dims), seed++);
        for (double& x : v) x = dtype == MLUOP_DTYPE_BOOL ? x : std::round(x / 10);  // many ties
        const Pair x = makePair(dtype, c.dims, v, c.strides);
        Tensor values = Tensor::device(dtype, c.out);
        Tensor indices = Tensor::device(kI64, c.out);
        Tensor values_ref = Tensor::host(dtype, c.out);
        Tensor indices_ref = Tensor::host(kI64, c.out);
        ASSERT_EQ(deviceExtremum(h, op, c.dim, c.keepdim, x.dev, values, indices), MLUOP_STATUS_SUCCESS)
            << what << ": " << lastError();
        expectOk(referenceExtremum(op, c.dim, c.keepdim, x.host, values_ref, indices_ref));
        h.sync();
        if (op != Extremum::kArgmax) expectExact(values.values(), values_ref.values(), what + " values");
        expectExact(indices.values(), indices_ref.values(), what + " indices");
      }
    }
  }
  // exactness and the first of ties, hand-worked
  const Pair big = makePair(MLUOP_DTYPE_INT32, {4}, {16777216, 16777217, 16777217, -3});
  Tensor values = Tensor::device(MLUOP_DTYPE_INT32, {});
  Tensor indices = Tensor::device(kI64, {});
  Tensor values_ref = Tensor::host(MLUOP_DTYPE_INT32, {});
  Tensor indices_ref = Tensor::host(kI64, {});
  ASSERT_EQ(deviceExtremum(h, Extremum::kMax, 0, false, big.dev, values, indices), MLUOP_STATUS_SUCCESS);
  expectOk(referenceExtremum(Extremum::kMax, 0, false, big.host, values_ref, indices_ref));
  h.sync();
  for (const Tensor* t : {&values, &values_ref}) expectExact(t->values(), {16777217}, "int32 max");
  for (const Tensor* t : {&indices, &indices_ref}) expectExact(t->values(), {1}, "int32 max index");
  const Pair flags = makePair(MLUOP_DTYPE_BOOL, {5}, {0, 0, 1, 0, 1});
  Tensor bool_values = Tensor::device(MLUOP_DTYPE_BOOL, {});
  ASSERT_EQ(deviceExtremum(h, Extremum::kMin, 0, false, flags.dev, bool_values, indices),
            MLUOP_STATUS_SUCCESS);
  h.sync();
  expectExact(bool_values.values(), {0}, "bool min");
  expectExact(indices.values(), {0}, "bool min index");
  Tensor argmax_indices = Tensor::device(kI64, {});
  expectBadParam(deviceExtremum(h, Extremum::kArgmax, 0, false, flags.dev, bool_values, argmax_indices),
                 "argmax: x is bool; argmax takes numeric tensors");
}

// ================================ softmax / log_softmax ================================

const std::vector<DimCase>& softmaxCases() {
  static const std::vector<DimCase> cases = {
      {{7, 13}, {}, 1, false, {}},
      {{7, 13}, {}, 0, false, {}},
      {{7, 13}, permutedStrides({7, 13}, {1, 0}), -1, false, {}},
      {{2, 3, 4, 5}, permutedStrides({2, 3, 4, 5}, {0, 2, 3, 1}), 1, false, {}},  // channels-last view
      {{0, 5}, {}, 1, false, {}},
      {{5, 0}, {}, 1, false, {}},
      {{}, {}, 0, false, {}},
      {{3, 1000}, {}, 1, false, {}},
      {{5, 13}, {0, 1}, 1, false, {}},
  };
  return cases;
}

// The size of dims along a Python-style dim (1 for a 0-d shape).
std::int64_t sizeAlong(const Dims& dims, int dim) {
  if (dims.empty()) return 1;
  const int n = static_cast<int>(dims.size());
  return dims[static_cast<std::size_t>((dim + n) % n)];
}

mluopStatus_t deviceSoftmax(const Handle& h, bool log, int dim, const Tensor& x, const Tensor& y) {
  return (log ? mluopLogSoftmaxForward : mluopSoftmaxForward)(h, dim, x.desc(), x.data(), y.desc(), y.data());
}

mlu::Status referenceSoftmax(bool log, int dim, const Tensor& x, const Tensor& y) {
  if (log) {
    mlu::log_softmax_forward_args a;
    a.dim = dim;
    a.x = x.view();
    a.y = y.view();
    return mlu::reference::run(a);
  }
  mlu::softmax_forward_args a;
  a.dim = dim;
  a.x = x.view();
  a.y = y.view();
  return mlu::reference::run(a);
}

mluopStatus_t deviceSoftmaxBackward(const Handle& h, bool log, int dim, const Tensor& y, const Tensor& g,
                                    const Tensor& gi) {
  return (log ? mluopLogSoftmaxBackward : mluopSoftmaxBackward)(h, dim, y.desc(), y.data(), g.desc(),
                                                                g.data(), gi.desc(), gi.data());
}

mlu::Status referenceSoftmaxBackward(bool log, int dim, const Tensor& y, const Tensor& g, const Tensor& gi) {
  if (log) {
    mlu::log_softmax_backward_args a;
    a.dim = dim;
    a.y = y.view();
    a.grad_output = g.view();
    a.grad_input = gi.view();
    return mlu::reference::run(a);
  }
  mlu::softmax_backward_args a;
  a.dim = dim;
  a.y = y.view();
  a.grad_output = g.view();
  a.grad_input = gi.view();
  return mlu::reference::run(a);
}

TEST(Softmax, ForwardDeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 20;
  for (const bool log : {false, true}) {
    for (const mluopDataType_t dtype : kDeviceDtypes) {
      for (const DimCase& c : softmaxCases()) {
        const std::string what = std::string(log ? "log_softmax " : "softmax ") + dtypeLabel(dtype) + " " +
                                 testing::PrintToString(c.dims) + " dim " + std::to_string(c.dim);
        const Pair x = makePair(dtype, c.dims, randomValues(optest::numel(c.dims), seed++, -4, 4), c.strides);
        Tensor y = Tensor::device(dtype, c.dims);
        Tensor y_ref = Tensor::host(dtype, c.dims);
        ASSERT_EQ(deviceSoftmax(h, log, c.dim, x.dev, y), MLUOP_STATUS_SUCCESS) << lastError();
        expectOk(referenceSoftmax(log, c.dim, x.host, y_ref));
        h.sync();
        expectClose(y.values(), y_ref.values(), toleranceFor(dtype), what);
      }
    }
  }
}

TEST(Softmax, BackwardDeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 40;
  for (const bool log : {false, true}) {
    for (const mluopDataType_t dtype : kDeviceDtypes) {
      for (const DimCase& c : softmaxCases()) {
        const std::string what = std::string(log ? "log_softmax_backward " : "softmax_backward ") +
                                 dtypeLabel(dtype) + " " + testing::PrintToString(c.dims) + " dim " +
                                 std::to_string(c.dim);
        const std::int64_t n = optest::numel(c.dims);
        // y as a forward would give it: probabilities, or log-probabilities.
        const Pair y = makePair(
            dtype, c.dims, log ? randomValues(n, seed++, -5, 0) : randomValues(n, seed++, 0, 1), c.strides);
        const Pair g = makePair(dtype, c.dims, randomValues(n, seed++), {});
        Tensor gi = Tensor::device(dtype, c.dims);
        Tensor gi_ref = Tensor::host(dtype, c.dims);
        ASSERT_EQ(deviceSoftmaxBackward(h, log, c.dim, y.dev, g.dev, gi), MLUOP_STATUS_SUCCESS)
            << lastError();
        expectOk(referenceSoftmaxBackward(log, c.dim, y.host, g.host, gi_ref));
        h.sync();
        // Each gradient element sums k products along dim.
        const std::int64_t k = sizeAlong(c.dims, c.dim);
        expectClose(gi.values(), gi_ref.values(), reducetest::reductionTolerance(dtype, k), what);
      }
    }
  }
}

TEST(Softmax, ReferenceHandWorked) {
  // exp(0), exp(ln 2), exp(ln 3) = 1, 2, 3: softmax [1/6, 1/3, 1/2]; rows of large equal values are 1/2.
  const Tensor x = Tensor::host(kF64, {2, 3}, {0, std::log(2.0), std::log(3.0), 1000, 1000, -1e300});
  Tensor y = Tensor::host(kF64, {2, 3});
  expectOk(referenceSoftmax(false, 1, x, y));
  expectClose(y.values(), {1.0 / 6, 1.0 / 3, 0.5, 0.5, 0.5, 0}, {1e-15, 1e-14}, "softmax");
  expectOk(referenceSoftmax(true, -1, x, y));
  expectClose(y.values(),
              {-std::log(6.0), -std::log(3.0), -std::log(2.0), -std::log(2.0), -std::log(2.0), -1e300},
              {1e-15, 1e-14}, "log_softmax");
  // Along dim 0 of [[0, 0], [ln 3, 0]]: columns [1/4, 3/4] and [1/2, 1/2].
  const Tensor cols = Tensor::host(kF64, {2, 2}, {0, 0, std::log(3.0), 0});
  Tensor yc = Tensor::host(kF64, {2, 2});
  expectOk(referenceSoftmax(false, 0, cols, yc));
  expectClose(yc.values(), {0.25, 0.5, 0.75, 0.5}, {1e-15, 1e-14}, "softmax dim 0");
  // A NaN spreads through its row; a row of -inf is 0/0.
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor bad = Tensor::host(kF64, {2, 2}, {kNaN, 1, -inf, -inf});
  Tensor yb = Tensor::host(kF64, {2, 2});
  expectOk(referenceSoftmax(false, 1, bad, yb));
  for (const double v : yb.values()) EXPECT_TRUE(std::isnan(v));
  // Backward: y = [0.25, 0.75], g = [1, 3]: sum(g y) = 2.5, grad = y (g - 2.5) = [-0.375, 0.375].
  const Tensor y2 = Tensor::host(kF64, {2}, {0.25, 0.75});
  const Tensor g2 = Tensor::host(kF64, {2}, {1, 3});
  Tensor gi = Tensor::host(kF64, {2});
  expectOk(referenceSoftmaxBackward(false, 0, y2, g2, gi));
  expectClose(gi.values(), {-0.375, 0.375}, {1e-15, 1e-14}, "softmax_backward");
  // log_softmax backward with y = log([0.25, 0.75]): grad = g - exp(y) sum(g) = [1 - 1, 3 - 3] = [0, 0].
  const Tensor ly = Tensor::host(kF64, {2}, {std::log(0.25), std::log(0.75)});
  expectOk(referenceSoftmaxBackward(true, 0, ly, g2, gi));
  expectClose(gi.values(), {0, 0}, {1e-15, 1e-14}, "log_softmax_backward");
  const Tensor g3 = Tensor::host(kF64, {2}, {2, -1});  // sum 1: grad = [2 - 0.25, -1 - 0.75]
  expectOk(referenceSoftmaxBackward(true, 0, ly, g3, gi));
  expectClose(gi.values(), {1.75, -1.75}, {1e-15, 1e-14}, "log_softmax_backward");
}

TEST(Softmax, BackwardMatchesFiniteDifferences) {
  struct Case {
    Dims dims;
    int dim;
  };
  std::uint32_t seed = 60;
  for (const bool log : {false, true}) {
    for (const Case& c : {Case{{3, 5}, 1}, Case{{4, 2, 3}, 0}, Case{{2, 3, 4}, -2}}) {
      const std::int64_t n = optest::numel(c.dims);
      const std::vector<double> x = randomValues(n, seed++, -2, 2);
      const std::vector<double> w = randomValues(n, seed++);
      // loss(x) = sum(forward(x) * w), its gradient = backward(y = forward(x), grad_output = w).
      const auto loss = [&](const std::vector<double>& xv) {
        const Tensor xt = Tensor::host(kF64, c.dims, xv);
        Tensor yt = Tensor::host(kF64, c.dims);
        EXPECT_TRUE(referenceSoftmax(log, c.dim, xt, yt).ok());
        return dot(yt.values(), w);
      };
      const Tensor xt = Tensor::host(kF64, c.dims, x);
      Tensor y = Tensor::host(kF64, c.dims);
      expectOk(referenceSoftmax(log, c.dim, xt, y));
      const Tensor g = Tensor::host(kF64, c.dims, w);
      Tensor gi = Tensor::host(kF64, c.dims);
      expectOk(referenceSoftmaxBackward(log, c.dim, y, g, gi));
      expectClose(gi.values(), numericalGradient(x, loss), reducetest::finiteDifferenceTolerance(),
                  std::string(log ? "log_softmax" : "softmax") + " " + testing::PrintToString(c.dims));
    }
  }
}

TEST(Softmax, BadParams) {
  Handle h;
  const Tensor x = Tensor::device(kF32, {4, 6}, randomValues(24, 5));
  Tensor y = Tensor::device(kF32, {4, 6});
  expectBadParam(deviceSoftmax(h, false, 2, x, y),
                 "softmax_forward: dim = 2 is out of range for x with 2 dims");
  expectBadParam(deviceSoftmax(h, true, -3, x, y), "log_softmax_forward: dim = -3 is out of range");
  Tensor wrong = Tensor::device(kF32, {6, 4});
  expectBadParam(deviceSoftmax(h, false, 1, x, wrong), "y has shape [6, 4] but x has shape [4, 6]");
  Tensor half = Tensor::device(MLUOP_DTYPE_HALF, {4, 6});
  expectBadParam(deviceSoftmax(h, true, 1, x, half), "y is float16 but x is float32");
  expectBadParam(referenceSoftmax(false, 1, Tensor::host(kF32, {4, 6}), Tensor::host(kF32, {4, 5})),
                 "y has shape [4, 5] but x has shape [4, 6]");
  const Tensor g = Tensor::device(kF32, {4, 6});
  expectBadParam(deviceSoftmaxBackward(h, false, 1, x, wrong, y),
                 "grad_output has shape [6, 4] but y has shape [4, 6]");
  expectBadParam(deviceSoftmaxBackward(h, true, 1, x, g, wrong),
                 "grad_input has shape [6, 4] but y has shape [4, 6]");
  expectBadParam(deviceSoftmaxBackward(h, true, 1, x, half, y), "grad_output is float16 but y is float32");
  expectBadParam(deviceSoftmaxBackward(h, false, 1, x, g, half), "grad_input is float16 but y is float32");
  expectBadParam(deviceSoftmaxBackward(h, false, 7, x, g, y), "softmax_backward: dim = 7 is out of range");
}

// ================================ nll_loss / cross_entropy ================================

struct LossCase {
  std::int64_t n, c;
  std::int64_t ignore_index;
  bool transposed;  // scores as a transposed (column-major) view
};

const std::vector<LossCase>& lossCases() {
  static const std::vector<LossCase> cases = {
      {7, 13, -100, false}, {7, 13, 2, true},    {64, 10, -100, false},
      {0, 5, -100, false},  {1, 1, -100, false}, {300, 7, 3, false},
  };
  return cases;
}

// Targets in [0, c), some set to ignore_index (every fifth row), as float64 values for int64 tensors.
std::vector<double> lossTargets(std::int64_t n, std::int64_t c, std::int64_t ignore_index,
                                std::uint32_t seed) {
  std::vector<double> t = randomValues(n, seed, 0, static_cast<double>(c));
  for (std::size_t i = 0; i < t.size(); ++i) {
    t[i] = i % 5 == 3 ? static_cast<double>(ignore_index) : std::floor(t[i]);
  }
  return t;
}

Dims lossShape(int reduction, std::int64_t n) { return reduction == MLUOP_REDUCTION_NONE ? Dims{n} : Dims{}; }

enum class Loss { kNll, kCrossEntropy };

// The optional class weights and (cross_entropy) label smoothing of a loss call.
struct LossExtras {
  const Tensor* weight = nullptr;
  double smoothing = 0.0;
};

mluopStatus_t deviceLossForward(const Handle& h, Loss loss, int reduction, std::int64_t ignore_index,
                                const Tensor& scores, const Tensor& target, const Tensor& out,
                                const LossExtras& x = {}) {
  const mluopTensorDescriptor_t wd = x.weight ? x.weight->desc() : nullptr;
  const void* w = x.weight ? x.weight->data() : nullptr;
  if (loss == Loss::kNll) {
    return mluopNllLossForward(h, reduction, ignore_index, scores.desc(), scores.data(), target.desc(),
                               target.data(), wd, w, out.desc(), out.data());
  }
  return mluopCrossEntropyForward(h, reduction, ignore_index, x.smoothing, scores.desc(), scores.data(),
                                  target.desc(), target.data(), wd, w, out.desc(), out.data());
}

mlu::Status referenceLossForward(Loss loss, int reduction, std::int64_t ignore_index, const Tensor& scores,
                                 const Tensor& target, const Tensor& out, const LossExtras& x = {}) {
  if (loss == Loss::kNll) {
    mlu::nll_loss_forward_args a;
    a.reduction = reduction;
    a.ignore_index = ignore_index;
    a.input = scores.view();
    a.target = target.view();
    if (x.weight) a.weight = x.weight->view();
    a.output = out.view();
    return mlu::reference::run(a);
  }
  mlu::cross_entropy_forward_args a;
  a.reduction = reduction;
  a.ignore_index = ignore_index;
  a.label_smoothing = x.smoothing;
  a.logits = scores.view();
  a.target = target.view();
  if (x.weight) a.weight = x.weight->view();
  a.output = out.view();
  return mlu::reference::run(a);
}

// nll_loss_backward takes no scores (pass any tensor; it is ignored); cross_entropy_backward needs the
// logits.
mluopStatus_t deviceLossBackward(const Handle& h, Loss loss, int reduction, std::int64_t ignore_index,
                                 const Tensor& grad_output, const Tensor& logits, const Tensor& target,
                                 const Tensor& grad, const LossExtras& x = {}) {
  const mluopTensorDescriptor_t wd = x.weight ? x.weight->desc() : nullptr;
  const void* w = x.weight ? x.weight->data() : nullptr;
  if (loss == Loss::kNll) {
    return mluopNllLossBackward(h, reduction, ignore_index, grad_output.desc(), grad_output.data(),
                                target.desc(), target.data(), wd, w, grad.desc(), grad.data());
  }
  return mluopCrossEntropyBackward(h, reduction, ignore_index, x.smoothing, grad_output.desc(),
                                   grad_output.data(), logits.desc(), logits.data(), target.desc(),
                                   target.data(), wd, w, grad.desc(), grad.data());
}

mlu::Status referenceLossBackward(Loss loss, int reduction, std::int64_t ignore_index,
                                  const Tensor& grad_output, const Tensor& logits, const Tensor& target,
                                  const Tensor& grad, const LossExtras& x = {}) {
  if (loss == Loss::kNll) {
    mlu::nll_loss_backward_args a;
    a.reduction = reduction;
    a.ignore_index = ignore_index;
    a.grad_output = grad_output.view();
    a.target = target.view();
    if (x.weight) a.weight = x.weight->view();
    a.grad_input = grad.view();
    return mlu::reference::run(a);
  }
  mlu::cross_entropy_backward_args a;
  a.reduction = reduction;
  a.ignore_index = ignore_index;
  a.label_smoothing = x.smoothing;
  if (x.weight) a.weight = x.weight->view();
  a.grad_output = grad_output.view();
  a.logits = logits.view();
  a.target = target.view();
  a.grad_logits = grad.view();
  return mlu::reference::run(a);
}

const char* lossName(Loss loss) { return loss == Loss::kNll ? "nll_loss" : "cross_entropy"; }

TEST(Losses, ForwardDeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 80;
  for (const Loss loss : {Loss::kNll, Loss::kCrossEntropy}) {
    for (const mluopDataType_t dtype : kDeviceDtypes) {
      for (const LossCase& c : lossCases()) {
        for (const int reduction : {MLUOP_REDUCTION_NONE, MLUOP_REDUCTION_MEAN, MLUOP_REDUCTION_SUM}) {
          const std::string what = std::string(lossName(loss)) + " " + dtypeLabel(dtype) +
                                   " N=" + std::to_string(c.n) + " C=" + std::to_string(c.c) + " reduction " +
                                   std::to_string(reduction);
          const Dims dims{c.n, c.c};
          const Dims strides = c.transposed ? permutedStrides(dims, {1, 0}) : Dims{};
          // nll_loss takes log-probabilities (<= 0); cross_entropy any logits.
          const std::vector<double> values = loss == Loss::kNll ? randomValues(c.n * c.c, seed++, -3, 0)
                                                                : randomValues(c.n * c.c, seed++, -3, 3);
          const Pair scores = makePair(dtype, dims, values, strides);
          const Pair target = makePair(kI64, {c.n}, lossTargets(c.n, c.c, c.ignore_index, seed++));
          Tensor out = Tensor::device(dtype, lossShape(reduction, c.n));
          Tensor out_ref = Tensor::host(dtype, lossShape(reduction, c.n));
          ASSERT_EQ(deviceLossForward(h, loss, reduction, c.ignore_index, scores.dev, target.dev, out),
                    MLUOP_STATUS_SUCCESS)
              << lastError();
          expectOk(referenceLossForward(loss, reduction, c.ignore_index, scores.host, target.host, out_ref));
          h.sync();
          // Reduced losses sum N rows (and cross_entropy's each sum C exponentials).
          expectClose(out.values(), out_ref.values(), reducetest::reductionTolerance(dtype, c.n + c.c), what);
        }
      }
    }
  }
}

TEST(Losses, BackwardDeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 120;
  for (const Loss loss : {Loss::kNll, Loss::kCrossEntropy}) {
    for (const mluopDataType_t dtype : kDeviceDtypes) {
      for (const LossCase& c : lossCases()) {
        for (const int reduction : {MLUOP_REDUCTION_NONE, MLUOP_REDUCTION_MEAN, MLUOP_REDUCTION_SUM}) {
          const std::string what = std::string(lossName(loss)) + "_backward " + dtypeLabel(dtype) +
                                   " N=" + std::to_string(c.n) + " C=" + std::to_string(c.c) + " reduction " +
                                   std::to_string(reduction);
          const Dims dims{c.n, c.c};
          const Dims strides = c.transposed ? permutedStrides(dims, {1, 0}) : Dims{};
          const Dims g_dims = lossShape(reduction, c.n);
          const Pair logits = makePair(dtype, dims, randomValues(c.n * c.c, seed++, -3, 3), strides);
          const Pair target = makePair(kI64, {c.n}, lossTargets(c.n, c.c, c.ignore_index, seed++));
          const Pair g = makePair(dtype, g_dims, randomValues(optest::numel(g_dims), seed++, 0.5, 2));
          Tensor grad = Tensor::device(dtype, dims, {}, strides);  // a non-contiguous output too
          Tensor grad_ref = Tensor::host(dtype, dims);
          ASSERT_EQ(
              deviceLossBackward(h, loss, reduction, c.ignore_index, g.dev, logits.dev, target.dev, grad),
              MLUOP_STATUS_SUCCESS)
              << lastError();
          expectOk(referenceLossBackward(loss, reduction, c.ignore_index, g.host, logits.host, target.host,
                                         grad_ref));
          h.sync();
          expectClose(grad.values(), grad_ref.values(), reducetest::reductionTolerance(dtype, c.c), what);
        }
      }
    }
  }
}

TEST(Losses, ReferenceHandWorked) {
  const Tensor input = Tensor::host(kF64, {2, 3}, {-1, -2, -3, -4, -5, -6});
  const Tensor target = Tensor::host(kI64, {2}, {2, 0});
  Tensor none = Tensor::host(kF64, {2});
  Tensor scalar = Tensor::host(kF64, {});
  expectOk(referenceLossForward(Loss::kNll, MLUOP_REDUCTION_NONE, -100, input, target, none));
  expectExact(none.values(), {3, 4}, "nll none");
  expectOk(referenceLossForward(Loss::kNll, MLUOP_REDUCTION_SUM, -100, input, target, scalar));
  expectExact(scalar.values(), {7}, "nll sum");
  expectOk(referenceLossForward(Loss::kNll, MLUOP_REDUCTION_MEAN, -100, input, target, scalar));
  expectExact(scalar.values(), {3.5}, "nll mean");
  // ignore_index 0 drops row 1: none [3, 0], mean over the one counted row.
  expectOk(referenceLossForward(Loss::kNll, MLUOP_REDUCTION_NONE, 0, input, target, none));
  expectExact(none.values(), {3, 0}, "nll none, ignored row");
  expectOk(referenceLossForward(Loss::kNll, MLUOP_REDUCTION_MEAN, 0, input, target, scalar));
  expectExact(scalar.values(), {3}, "nll mean, ignored row");
  // Every row ignored: the mean is 0/0 (NaN, as PyTorch), the sum 0.
  const Tensor ignored = Tensor::host(kI64, {2}, {-100, -100});
  expectOk(referenceLossForward(Loss::kNll, MLUOP_REDUCTION_MEAN, -100, input, ignored, scalar));
  EXPECT_TRUE(std::isnan(scalar.values()[0]));
  expectOk(referenceLossForward(Loss::kNll, MLUOP_REDUCTION_SUM, -100, input, ignored, scalar));
  expectExact(scalar.values(), {0}, "nll sum, all ignored");
  // A target that is no class (and not ignore_index) makes its row's loss NaN.
  const Tensor bad = Tensor::host(kI64, {2}, {5, 0});
  expectOk(referenceLossForward(Loss::kNll, MLUOP_REDUCTION_NONE, -100, input, bad, none));
  EXPECT_TRUE(std::isnan(none.values()[0]));
  EXPECT_EQ(none.values()[1], 4);

  // nll backward: -grad_output at the target, 0 elsewhere; mean divides by the counted rows.
  Tensor grad = Tensor::host(kF64, {2, 3});
  expectOk(referenceLossBackward(Loss::kNll, MLUOP_REDUCTION_NONE, -100, Tensor::host(kF64, {2}, {2, 3}),
                                 input, target, grad));
  expectExact(grad.values(), {0, 0, -2, -3, 0, 0}, "nll_backward none");
  expectOk(referenceLossBackward(Loss::kNll, MLUOP_REDUCTION_MEAN, 0, Tensor::host(kF64, {}, {3}), input,
                                 target, grad));
  expectExact(grad.values(), {0, 0, -3, 0, 0, 0}, "nll_backward mean, ignored row");
  expectOk(referenceLossBackward(Loss::kNll, MLUOP_REDUCTION_MEAN, -100, Tensor::host(kF64, {}, {3}), input,
                                 target, grad));
  expectExact(grad.values(), {0, 0, -1.5, -1.5, 0, 0}, "nll_backward mean");

  // cross_entropy: row 0 has softmax [1/6, 1/3, 1/2] (target 2: loss ln 2), row 1 is uniform (loss ln 3).
  const Tensor logits = Tensor::host(kF64, {2, 3}, {0, std::log(2.0), std::log(3.0), 5, 5, 5});
  const Tensor ce_target = Tensor::host(kI64, {2}, {2, 1});
  expectOk(referenceLossForward(Loss::kCrossEntropy, MLUOP_REDUCTION_NONE, -100, logits, ce_target, none));
  expectClose(none.values(), {std::log(2.0), std::log(3.0)}, {1e-15, 1e-14}, "cross_entropy none");
  expectOk(referenceLossForward(Loss::kCrossEntropy, MLUOP_REDUCTION_MEAN, -100, logits, ce_target, scalar));
  expectClose(scalar.values(), {std::log(6.0) / 2}, {1e-15, 1e-14}, "cross_entropy mean");
  expectOk(referenceLossForward(Loss::kCrossEntropy, MLUOP_REDUCTION_SUM, -100, logits, ce_target, scalar));
  expectClose(scalar.values(), {std::log(6.0)}, {1e-15, 1e-14}, "cross_entropy sum");
  // cross_entropy backward (sum, grad_output 2): (softmax - onehot) * 2.
  expectOk(referenceLossBackward(Loss::kCrossEntropy, MLUOP_REDUCTION_SUM, -100, Tensor::host(kF64, {}, {2}),
                                 logits, ce_target, grad));
  expectClose(grad.values(), {1.0 / 3, 2.0 / 3, -1, 2.0 / 3, -4.0 / 3, 2.0 / 3}, {1e-15, 1e-14},
              "cross_entropy_backward sum");
  // ... with row 1 ignored and mean: row 0 over one counted row, row 1 zero.
  expectOk(referenceLossBackward(Loss::kCrossEntropy, MLUOP_REDUCTION_MEAN, 1, Tensor::host(kF64, {}, {1}),
                                 logits, ce_target, grad));
  expectClose(grad.values(), {1.0 / 6, 1.0 / 3, -0.5, 0, 0, 0}, {1e-15, 1e-14},
              "cross_entropy_backward mean");
}

// Class weights (both losses) and label smoothing (cross_entropy; DIOPI tests 0.3, 1 and -1.3 too): the
// device against the reference, forward and backward, over the loss cases and every reduction.
TEST(Losses, WeightsAndSmoothingDeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 300;
  for (const Loss loss : {Loss::kNll, Loss::kCrossEntropy}) {
    for (const mluopDataType_t dtype : kDeviceDtypes) {
      for (const LossCase& c : lossCases()) {
        for (const int variant : {0, 1, 2}) {  // weights; smoothing 0.3; weights and smoothing -1.3
          if (loss == Loss::kNll && variant > 0) continue;
          for (const int reduction : {MLUOP_REDUCTION_NONE, MLUOP_REDUCTION_MEAN, MLUOP_REDUCTION_SUM}) {
            const std::string what = std::string(lossName(loss)) + " " + dtypeLabel(dtype) +
                                     " N=" + std::to_string(c.n) + " C=" + std::to_string(c.c) + " variant " +
                                     std::to_string(variant) + " reduction " + std::to_string(reduction);
            const Dims dims{c.n, c.c};
            const Dims strides = c.transposed ? permutedStrides(dims, {1, 0}) : Dims{};
            const std::vector<double> values = loss == Loss::kNll ? randomValues(c.n * c.c, seed++, -3, 0)
                                                                  : randomValues(c.n * c.c, seed++, -3, 3);
            const Pair scores = makePair(dtype, dims, values, strides);
            const Pair target = makePair(kI64, {c.n}, lossTargets(c.n, c.c, c.ignore_index, seed++));
            const Pair weight = makePair(dtype, {c.c}, randomValues(c.c, seed++, 0.25, 2), {2});  // strided
            LossExtras dev_x, host_x;
            if (variant != 1) {
              dev_x.weight = &weight.dev;
              host_x.weight = &weight.host;
            }
            dev_x.smoothing = host_x.smoothing = variant == 1 ? 0.3 : variant == 2 ? -1.3 : 0.0;
            Tensor out = Tensor::device(dtype, lossShape(reduction, c.n));
            Tensor out_ref = Tensor::host(dtype, lossShape(reduction, c.n));
            ASSERT_EQ(
                deviceLossForward(h, loss, reduction, c.ignore_index, scores.dev, target.dev, out, dev_x),
                MLUOP_STATUS_SUCCESS)
                << what << ": " << lastError();
            expectOk(referenceLossForward(loss, reduction, c.ignore_index, scores.host, target.host, out_ref,
                                          host_x));
            const Dims g_dims = lossShape(reduction, c.n);
            const Pair g = makePair(dtype, g_dims, randomValues(optest::numel(g_dims), seed++, 0.5, 2));
            Tensor grad = Tensor::device(dtype, dims, {}, strides);
            Tensor grad_ref = Tensor::host(dtype, dims);
            ASSERT_EQ(deviceLossBackward(h, loss, reduction, c.ignore_index, g.dev, scores.dev, target.dev,
                                         grad, dev_x),
                      MLUOP_STATUS_SUCCESS)
                << what << ": " << lastError();
            expectOk(referenceLossBackward(loss, reduction, c.ignore_index, g.host, scores.host, target.host,
                                           grad_ref, host_x));
            h.sync();
            // weights up to 2 and smoothing sums over C classes: scale the tolerance by them
            optest::Tolerance forward_tol = reducetest::reductionTolerance(dtype, c.n + c.c);
            forward_tol.atol *= 4;
            optest::Tolerance backward_tol = reducetest::reductionTolerance(dtype, c.c);
            backward_tol.atol *= 4;
            expectClose(out.values(), out_ref.values(), forward_tol, what);
            expectClose(grad.values(), grad_ref.values(), backward_tol, what + " backward");
          }
        }
      }
    }
  }
}

// Hand-worked: weights w = [0.5, 1, 2] scale each row's loss by its target's weight and the mean divides
// by the rows' summed weights (PyTorch's total_weight); label smoothing e mixes in e/C of the loss
// against every class.
TEST(Losses, WeightsAndSmoothingHandWorked) {
  const Tensor input = Tensor::host(kF64, {2, 3}, {-1, -2, -3, -4, -5, -6});
  const Tensor target = Tensor::host(kI64, {2}, {2, 0});
  const Tensor weight = Tensor::host(kF64, {3}, {0.5, 1, 2});
  const LossExtras w{&weight, 0.0};
  Tensor none = Tensor::host(kF64, {2});
  Tensor scalar = Tensor::host(kF64, {});
  expectOk(referenceLossForward(Loss::kNll, MLUOP_REDUCTION_NONE, -100, input, target, none, w));
  expectExact(none.values(), {6, 2}, "weighted nll none: 2 * 3, 0.5 * 4");
  expectOk(referenceLossForward(Loss::kNll, MLUOP_REDUCTION_SUM, -100, input, target, scalar, w));
  expectExact(scalar.values(), {8}, "weighted nll sum");
  expectOk(referenceLossForward(Loss::kNll, MLUOP_REDUCTION_MEAN, -100, input, target, scalar, w));
  expectExact(scalar.values(), {3.2}, "weighted nll mean: 8 / (2 + 0.5)");
  Tensor grad = Tensor::host(kF64, {2, 3});
  expectOk(referenceLossBackward(Loss::kNll, MLUOP_REDUCTION_MEAN, -100, Tensor::host(kF64, {}, {1}), input,
                                 target, grad, w));
  expectClose(grad.values(), {0, 0, -0.8, -0.2, 0, 0}, {1e-15, 1e-15}, "weighted nll_backward mean");
  // every counted row weighs 0: the mean is 0 / 0 and the gradient NaN (PyTorch's g / total_weight)
  const Tensor zero_weight = Tensor::host(kF64, {3}, {0, 1, 0});
  expectOk(
      referenceLossForward(Loss::kNll, MLUOP_REDUCTION_MEAN, -100, input, target, scalar, {&zero_weight}));
  EXPECT_TRUE(std::isnan(scalar.values()[0]));
  expectOk(referenceLossBackward(Loss::kNll, MLUOP_REDUCTION_MEAN, -100, Tensor::host(kF64, {}, {1}), input,
                                 target, grad, {&zero_weight}));
  EXPECT_TRUE(std::isnan(grad.values()[2]));
  EXPECT_EQ(grad.values()[1], 0);

  // smoothing 0.3: row 0 (softmax [1/6, 1/3, 1/2], target 2) 0.7 ln 2 + 0.1 (ln 6 + ln 3 + ln 2); row 1
  // (uniform) ln 3 whatever e.
  const Tensor logits = Tensor::host(kF64, {2, 3}, {0, std::log(2.0), std::log(3.0), 5, 5, 5});
  const Tensor ce_target = Tensor::host(kI64, {2}, {2, 1});
  expectOk(referenceLossForward(Loss::kCrossEntropy, MLUOP_REDUCTION_NONE, -100, logits, ce_target, none,
                                {nullptr, 0.3}));
  expectClose(none.values(), {0.7 * std::log(2.0) + 0.1 * std::log(36.0), std::log(3.0)}, {1e-15, 1e-14},
              "cross_entropy smoothing 0.3");
  // and with the weights: row 0 0.7 * 2 ln 2 + 0.1 (0.5 ln 6 + ln 3 + 2 ln 2); row 1 (target 1, weight 1)
  // 0.7 ln 3 + 0.1 * 3.5 ln 3; mean divides by w[2] + w[1] = 3
  expectOk(referenceLossForward(Loss::kCrossEntropy, MLUOP_REDUCTION_MEAN, -100, logits, ce_target, scalar,
                                {&weight, 0.3}));
  const double row0 =
      0.7 * 2 * std::log(2.0) + 0.1 * (0.5 * std::log(6.0) + std::log(3.0) + 2 * std::log(2.0));
  const double row1 = 0.7 * std::log(3.0) + 0.1 * 3.5 * std::log(3.0);
  expectClose(scalar.values(), {(row0 + row1) / 3}, {1e-15, 1e-14}, "weighted smoothed cross_entropy mean");
}

// Scores of 1 or 3+ dims (PyTorch's unbatched [C] and spatial [N, C, d1, ...] forms, DIOPI's cases): the
// device against the reference with weights and smoothing; with N = 1 the spatial form is the 2-d form on
// the transposed values ([C, d] read as [d, C], stored in the same layout); [C] is the one-row [1, C].
TEST(Losses, UnbatchedAndSpatialScores) {
  Handle h;
  std::uint32_t seed = 400;
  struct Shape {
    Dims scores, target;
  };
  const std::vector<Shape> shapes = {
      {{9}, {}},           {{2, 7, 5}, {2, 5}}, {{3, 6, 4, 5}, {3, 4, 5}}, {{2, 5, 3, 2, 2}, {2, 3, 2, 2}},
      {{5, 4, 0}, {5, 0}}, {{0, 5, 6}, {0, 6}}};
  for (const Loss loss : {Loss::kNll, Loss::kCrossEntropy}) {
    for (const Shape& sh : shapes) {
      for (const int reduction : {MLUOP_REDUCTION_NONE, MLUOP_REDUCTION_MEAN, MLUOP_REDUCTION_SUM}) {
        const std::int64_t c = sh.scores.size() == 1 ? sh.scores[0] : sh.scores[1];
        const std::string what = std::string(lossName(loss)) + " " + testing::PrintToString(sh.scores) +
                                 " reduction " + std::to_string(reduction);
        const Pair scores = makePair(kF32, sh.scores, randomValues(optest::numel(sh.scores), seed++, -3, 0));
        std::vector<double> t = randomValues(optest::numel(sh.target), seed++, 0, static_cast<double>(c));
        for (std::size_t i = 0; i < t.size(); ++i)
          t[i] = i % 4 == 1 ? 1 : std::floor(t[i]);  // ignore_index 1
        const Pair target = makePair(kI64, sh.target, t);
        const Pair weight = makePair(kF32, {c}, randomValues(c, seed++, 0.5, 2));
        const LossExtras dx{&weight.dev, loss == Loss::kCrossEntropy ? 0.2 : 0.0};
        const LossExtras hx{&weight.host, dx.smoothing};
        const Dims out_dims = reduction == MLUOP_REDUCTION_NONE ? sh.target : Dims{};
        Tensor out = Tensor::device(kF32, out_dims), out_ref = Tensor::host(kF32, out_dims);
        ASSERT_EQ(deviceLossForward(h, loss, reduction, 1, scores.dev, target.dev, out, dx),
                  MLUOP_STATUS_SUCCESS)
            << what << ": " << lastError();
        expectOk(referenceLossForward(loss, reduction, 1, scores.host, target.host, out_ref, hx));
        const Pair g = makePair(kF32, out_dims, randomValues(optest::numel(out_dims), seed++, 0.5, 2));
        Tensor grad = Tensor::device(kF32, sh.scores), grad_ref = Tensor::host(kF32, sh.scores);
        ASSERT_EQ(deviceLossBackward(h, loss, reduction, 1, g.dev, scores.dev, target.dev, grad, dx),
                  MLUOP_STATUS_SUCCESS)
            << what << ": " << lastError();
        expectOk(referenceLossBackward(loss, reduction, 1, g.host, scores.host, target.host, grad_ref, hx));
        h.sync();
        expectClose(out.values(), out_ref.values(), reducetest::reductionTolerance(kF32, 64), what);
        expectClose(grad.values(), grad_ref.values(), reducetest::reductionTolerance(kF32, c),
                    what + " backward");
      }
    }
  }
  // N = 1: [1, C, d] is [d, C] on the transposed view; [C] is [1, C]
  const std::int64_t c = 6, d = 7;
  const std::vector<double> x = randomValues(c * d, 9, -3, 0);
  std::vector<double> tv = randomValues(d, 10, 0, static_cast<double>(c));
  for (double& v : tv) v = std::floor(v);
  for (const Loss loss : {Loss::kNll, Loss::kCrossEntropy}) {
    // flat(s, k) = spatial(0, k, s): the values transposed (stored with the spatial tensor's memory layout)
    std::vector<double> xt(x.size());
    for (std::int64_t k = 0; k < c; ++k)
      for (std::int64_t p = 0; p < d; ++p)
        xt[static_cast<std::size_t>(p * c + k)] = x[static_cast<std::size_t>(k * d + p)];
    const Tensor spatial = Tensor::host(kF64, {1, c, d}, x), flat = Tensor::host(kF64, {d, c}, xt, {1, d});
    Tensor a = Tensor::host(kF64, {1, d}), b = Tensor::host(kF64, {d});
    expectOk(
        referenceLossForward(loss, MLUOP_REDUCTION_NONE, -100, spatial, Tensor::host(kI64, {1, d}, tv), a));
    expectOk(referenceLossForward(loss, MLUOP_REDUCTION_NONE, -100, flat, Tensor::host(kI64, {d}, tv), b));
    expectClose(a.values(), b.values(), {0, 0}, std::string(lossName(loss)) + " [1, C, d] = [d, C]");
    const Tensor row = Tensor::host(kF64, {c}, std::vector<double>(x.begin(), x.begin() + c));
    const Tensor batch = Tensor::host(kF64, {1, c}, std::vector<double>(x.begin(), x.begin() + c));
    Tensor r0 = Tensor::host(kF64, {}), r1 = Tensor::host(kF64, {1});
    expectOk(referenceLossForward(loss, MLUOP_REDUCTION_NONE, -100, row, Tensor::host(kI64, {}, {2}), r0));
    expectOk(referenceLossForward(loss, MLUOP_REDUCTION_NONE, -100, batch, Tensor::host(kI64, {1}, {2}), r1));
    expectClose(r0.values(), r1.values(), {0, 0}, std::string(lossName(loss)) + " [C] = [1, C]");
  }
}

TEST(Losses, OutOfRangeTargetGivesNaNOnDeviceAndReference) {
  Handle h;
  for (const Loss loss : {Loss::kNll, Loss::kCrossEntropy}) {
    const Pair scores = makePair(kF32, {3, 4}, randomValues(12, 7, -2, 0));
    const Pair target = makePair(kI64, {3}, {1, 4, -1});  // 4 and -1 are no class; ignore_index is -100
    Tensor out = Tensor::device(kF32, {3});
    Tensor out_ref = Tensor::host(kF32, {3});
    ASSERT_EQ(deviceLossForward(h, loss, MLUOP_REDUCTION_NONE, -100, scores.dev, target.dev, out),
              MLUOP_STATUS_SUCCESS);
    expectOk(referenceLossForward(loss, MLUOP_REDUCTION_NONE, -100, scores.host, target.host, out_ref));
    Tensor grad = Tensor::device(kF32, {3, 4});
    Tensor grad_ref = Tensor::host(kF32, {3, 4});
    const Pair g = makePair(kF32, {3}, {1, 1, 1});
    ASSERT_EQ(deviceLossBackward(h, loss, MLUOP_REDUCTION_NONE, -100, g.dev, scores.dev, target.dev, grad),
              MLUOP_STATUS_SUCCESS);
    expectOk(
        referenceLossBackward(loss, MLUOP_REDUCTION_NONE, -100, g.host, scores.host, target.host, grad_ref));
    h.sync();
    for (const auto* t : {&out, &out_ref}) {
      const std::vector<double> v = t->values();
      EXPECT_FALSE(std::isnan(v[0])) << lossName(loss);
      EXPECT_TRUE(std::isnan(v[1]) && std::isnan(v[2])) << lossName(loss);
    }
    for (const auto* t : {&grad, &grad_ref}) {
      const std::vector<double> v = t->values();
      for (int j = 0; j < 4; ++j) EXPECT_FALSE(std::isnan(v[static_cast<std::size_t>(j)])) << lossName(loss);
      for (int j = 4; j < 12; ++j) EXPECT_TRUE(std::isnan(v[static_cast<std::size_t>(j)])) << lossName(loss);
    }
  }
}

TEST(Losses, BackwardMatchesFiniteDifferences) {
  const std::int64_t n = 5, c = 4;
  const Dims dims{n, c};
  const std::int64_t ignore_index = -100;
  const Tensor target = Tensor::host(kI64, {n}, {3, 0, -100, 1, 3});
  std::uint32_t seed = 200;
  const Tensor weight = Tensor::host(kF64, {c}, {0.5, 2, 1.25, 0.75});
  for (const Loss loss : {Loss::kNll, Loss::kCrossEntropy}) {
    for (const int reduction : {MLUOP_REDUCTION_NONE, MLUOP_REDUCTION_MEAN, MLUOP_REDUCTION_SUM}) {
      for (const LossExtras& extras : {LossExtras{}, LossExtras{&weight, 0.0}, LossExtras{&weight, 0.4}}) {
        if (loss == Loss::kNll && extras.smoothing != 0.0) continue;
        const std::vector<double> x = randomValues(n * c, seed++, -2, 2);
        const Dims g_dims = lossShape(reduction, n);
        const std::vector<double> w = randomValues(optest::numel(g_dims), seed++);
        const auto objective = [&](const std::vector<double>& xv) {
          const Tensor xt = Tensor::host(kF64, dims, xv);
          Tensor out = Tensor::host(kF64, g_dims);
          EXPECT_TRUE(referenceLossForward(loss, reduction, ignore_index, xt, target, out, extras).ok());
          return dot(out.values(), w);
        };
        const Tensor xt = Tensor::host(kF64, dims, x);
        const Tensor g = Tensor::host(kF64, g_dims, w);
        Tensor grad = Tensor::host(kF64, dims);
        expectOk(referenceLossBackward(loss, reduction, ignore_index, g, xt, target, grad, extras));
        expectClose(grad.values(), numericalGradient(x, objective), reducetest::finiteDifferenceTolerance(),
                    std::string(lossName(loss)) + " reduction " + std::to_string(reduction) +
                        (extras.weight ? " weighted" : "") + " smoothing " +
                        std::to_string(extras.smoothing));
      }
    }
  }
}

TEST(Losses, BadParams) {
  Handle h;
  const Tensor input = Tensor::device(kF32, {4, 5}, randomValues(20, 8, -2, 0));
  const Tensor target = Tensor::device(kI64, {4}, {0, 1, 2, 3});
  Tensor scalar = Tensor::device(kF32, {});
  Tensor rows = Tensor::device(kF32, {4});
  for (const Loss loss : {Loss::kNll, Loss::kCrossEntropy}) {
    const std::string name = lossName(loss);
    const std::string scores = loss == Loss::kNll ? "input" : "logits";
    expectBadParam(deviceLossForward(h, loss, 3, -100, input, target, scalar),
                   name + "_forward: reduction = 3; expected 0 (none), 1 (mean) or 2 (sum)");
    expectBadParam(deviceLossBackward(h, loss, -1, -100, scalar, input, target, Tensor::device(kF32, {4, 5})),
                   name + "_backward: reduction = -1; expected 0 (none), 1 (mean) or 2 (sum)");
    // [N, C, d...] scores take a target [N, d...]; 0-d scores are refused
    const Tensor three_d = Tensor::device(kF32, {2, 3, 4});
    expectBadParam(deviceLossForward(h, loss, MLUOP_REDUCTION_MEAN, -100, three_d, target, scalar),
                   "target has shape [4] but " + scores + " has shape [2, 3, 4]; expected target [2, 4]");
    expectBadParam(deviceLossForward(h, loss, MLUOP_REDUCTION_MEAN, -100, Tensor::device(kF32, {}),
                                     Tensor::device(kI64, {}), scalar),
                   scores + " has shape []; expected [C], [N, C] or [N, C, d1, ...]");
    const Tensor int32_target = Tensor::device(MLUOP_DTYPE_INT32, {4});
    expectBadParam(deviceLossForward(h, loss, MLUOP_REDUCTION_MEAN, -100, input, int32_target, scalar),
                   "target is int32; expected int64");
    const Tensor short_target = Tensor::device(kI64, {3});
    expectBadParam(deviceLossForward(h, loss, MLUOP_REDUCTION_MEAN, -100, input, short_target, scalar),
                   "target has shape [3] but " + scores + " has shape [4, 5]; expected target [4]");
    expectBadParam(deviceLossForward(h, loss, MLUOP_REDUCTION_MEAN, -100, input, target, rows),
                   "output has shape [4] but the result has shape []");
    expectBadParam(deviceLossForward(h, loss, MLUOP_REDUCTION_NONE, -100, input, target, scalar),
                   "output has shape [] but the result has shape [4]");
    Tensor half = Tensor::device(MLUOP_DTYPE_HALF, {});
    expectBadParam(deviceLossForward(h, loss, MLUOP_REDUCTION_SUM, -100, input, target, half),
                   "output is float16 but " + scores + " is float32");
    // Backward: grad_output's shape follows the reduction; the gradient is [N, C].
    Tensor grad = Tensor::device(kF32, {4, 5});
    expectBadParam(deviceLossBackward(h, loss, MLUOP_REDUCTION_SUM, -100, rows, input, target, grad),
                   "grad_output has shape [4] but the result has shape []");
    expectBadParam(deviceLossBackward(h, loss, MLUOP_REDUCTION_NONE, -100, scalar, input, target, grad),
                   "grad_output has shape [] but the result has shape [4]");
    expectBadParam(deviceLossBackward(h, loss, MLUOP_REDUCTION_SUM, -100, scalar, input, short_target, grad),
                   "target has shape [3] but");
    Tensor half_grad = Tensor::device(MLUOP_DTYPE_HALF, {4, 5});
    expectBadParam(deviceLossBackward(h, loss, MLUOP_REDUCTION_SUM, -100, scalar, input, target, half_grad),
                   loss == Loss::kNll ? "grad_input is float16 but grad_output is float32"
                                      : "grad_logits is float16 but logits is float32");
  }
  // class weights: [C] of the scores' dtype; label smoothing finite
  const Tensor short_weight = Tensor::device(kF32, {4}), half_weight = Tensor::device(MLUOP_DTYPE_HALF, {5});
  expectBadParam(
      deviceLossForward(h, Loss::kNll, MLUOP_REDUCTION_MEAN, -100, input, target, scalar, {&short_weight}),
      "nll_loss_forward: weight has shape [4] but input has 5 classes; expected weight [5]");
  expectBadParam(deviceLossForward(h, Loss::kCrossEntropy, MLUOP_REDUCTION_MEAN, -100, input, target, scalar,
                                   {&half_weight}),
                 "cross_entropy_forward: weight is float16 but logits is float32");
  expectBadParam(deviceLossBackward(h, Loss::kNll, MLUOP_REDUCTION_SUM, -100, scalar, input, target,
                                    Tensor::device(kF32, {4, 5}), {&short_weight}),
                 "nll_loss_backward: weight has shape [4] but grad_input has 5 classes");
  expectBadParam(deviceLossForward(h, Loss::kCrossEntropy, MLUOP_REDUCTION_MEAN, -100, input, target, scalar,
                                   {nullptr, std::numeric_limits<double>::quiet_NaN()}),
                 "cross_entropy_forward: label_smoothing = nan must be finite");
  Tensor wrong_grad = Tensor::device(kF32, {4, 6});
  Tensor grad_ok = Tensor::device(kF32, {4, 5});
  expectBadParam(deviceLossBackward(h, Loss::kCrossEntropy, MLUOP_REDUCTION_SUM, -100,
                                    Tensor::device(MLUOP_DTYPE_BFLOAT16, {}), input, target, grad_ok),
                 "cross_entropy_backward: grad_output is bfloat16 but logits is float32");
  expectBadParam(
      deviceLossBackward(h, Loss::kNll, MLUOP_REDUCTION_SUM, -100, scalar, input,
                         Tensor::device(kI64, {4, 1}), grad_ok),
      "nll_loss_backward: target has shape [4, 1] but grad_input has shape [4, 5]; expected target [4]");
  expectBadParam(deviceLossBackward(h, Loss::kCrossEntropy, MLUOP_REDUCTION_SUM, -100, scalar, input, target,
                                    wrong_grad),
                 "grad_logits has shape [4, 6] but logits has shape [4, 5]");
  expectBadParam(deviceLossBackward(h, Loss::kNll, MLUOP_REDUCTION_SUM, -100, scalar, input, target,
                                    Tensor::device(kF32, {4})),
                 "target has shape [4] but grad_input has shape [4]; expected target []");
  expectBadParam(referenceLossForward(Loss::kNll, 7, -100, Tensor::host(kF32, {4, 5}),
                                      Tensor::host(kI64, {4}), Tensor::host(kF32, {})),
                 "reduction = 7");
}

// ================================ max_pool2d / avg_pool2d ================================

struct PoolCase {
  Dims dims;  // x [N, C, H, W]
  std::vector<int> kernel, stride, padding;
  bool channels_last;  // x as an NHWC-strided view
};

const std::vector<PoolCase>& poolCases() {
  static const std::vector<PoolCase> cases = {
      {{2, 3, 7, 9}, {3, 3}, {2, 2}, {1, 1}, false},
      {{1, 2, 8, 8}, {2, 2}, {2, 2}, {0, 0}, false},
      {{2, 3, 7, 9}, {3, 2}, {1, 2}, {1, 0}, true},
      {{2, 2, 5, 6}, {3, 3}, {1, 1}, {0, 1}, false},  // overlapping windows
      {{0, 3, 6, 6}, {2, 2}, {2, 2}, {0, 0}, false},  // empty batch
      {{1, 1, 1, 1}, {1, 1}, {1, 1}, {0, 0}, false},
      {{8, 8, 24, 24}, {2, 2}, {2, 2}, {0, 0}, true},  // mnist-like, split across cores
  };
  return cases;
}

Dims poolOutput(const PoolCase& c) {
  const auto out = [](std::int64_t in, int k, int s, int p) { return (in + 2 * p - k) / s + 1; };
  return {c.dims[0], c.dims[1], out(c.dims[2], c.kernel[0], c.stride[0], c.padding[0]),
          out(c.dims[3], c.kernel[1], c.stride[1], c.padding[1])};
}

Dims poolStrides(const PoolCase& c) {
  return c.channels_last ? permutedStrides(c.dims, {0, 2, 3, 1}) : Dims{};
}

std::string poolLabel(const PoolCase& c) {
  return testing::PrintToString(c.dims) + " k" + testing::PrintToString(c.kernel) + " s" +
         testing::PrintToString(c.stride) + " p" + testing::PrintToString(c.padding);
}

// max_pool2d's dilation (empty: none given, i.e. 1) and ceil mode.
struct Dilation {
  std::vector<int> dilation;
  bool ceil_mode = false;
};

mluopStatus_t deviceMaxPool(const Handle& h, const PoolCase& c, const Tensor& x, const Tensor& y,
                            const Tensor& indices, const Dilation& d = {}) {
  return mluopMaxPool2dForward(
      h, c.kernel.data(), static_cast<int>(c.kernel.size()), c.stride.data(),
      static_cast<int>(c.stride.size()), c.padding.data(), static_cast<int>(c.padding.size()),
      d.dilation.empty() ? nullptr : d.dilation.data(), static_cast<int>(d.dilation.size()), d.ceil_mode,
      x.desc(), x.data(), y.desc(), y.data(), indices.desc(), indices.data());
}

mlu::Status referenceMaxPool(const PoolCase& c, const Tensor& x, const Tensor& y, const Tensor& indices,
                             const Dilation& d = {}) {
  mlu::max_pool2d_forward_args a;
  a.kernel = c.kernel;
  a.stride = c.stride;
  a.padding = c.padding;
  a.dilation = d.dilation;
  a.ceil_mode = d.ceil_mode;
  a.x = x.view();
  a.y = y.view();
  a.indices = indices.view();
  return mlu::reference::run(a);
}

mluopStatus_t deviceMaxPoolBackward(const Handle& h, const PoolCase& c, const Tensor& g,
                                    const Tensor& indices, const Tensor& gi, const Dilation& d = {}) {
  return mluopMaxPool2dBackward(
      h, c.kernel.data(), static_cast<int>(c.kernel.size()), c.stride.data(),
      static_cast<int>(c.stride.size()), c.padding.data(), static_cast<int>(c.padding.size()),
      d.dilation.empty() ? nullptr : d.dilation.data(), static_cast<int>(d.dilation.size()), d.ceil_mode,
      g.desc(), g.data(), indices.desc(), indices.data(), gi.desc(), gi.data());
}

mlu::Status referenceMaxPoolBackward(const PoolCase& c, const Tensor& g, const Tensor& indices,
                                     const Tensor& gi, const Dilation& d = {}) {
  mlu::max_pool2d_backward_args a;
  a.kernel = c.kernel;
  a.stride = c.stride;
  a.padding = c.padding;
  a.dilation = d.dilation;
  a.ceil_mode = d.ceil_mode;
  a.grad_output = g.view();
  a.indices = indices.view();
  a.grad_input = gi.view();
  return mlu::reference::run(a);
}

mluopStatus_t deviceAvgPool(const Handle& h, const PoolCase& c, bool cip, const Tensor& x, const Tensor& y) {
  return mluopAvgPool2dForward(h, c.kernel.data(), static_cast<int>(c.kernel.size()), c.stride.data(),
                               static_cast<int>(c.stride.size()), c.padding.data(),
                               static_cast<int>(c.padding.size()), cip, x.desc(), x.data(), y.desc(),
                               y.data());
}

mlu::Status referenceAvgPool(const PoolCase& c, bool cip, const Tensor& x, const Tensor& y) {
  mlu::avg_pool2d_forward_args a;
  a.kernel = c.kernel;
  a.stride = c.stride;
  a.padding = c.padding;
  a.count_include_pad = cip;
  a.x = x.view();
  a.y = y.view();
  return mlu::reference::run(a);
}

mluopStatus_t deviceAvgPoolBackward(const Handle& h, const PoolCase& c, bool cip, const Tensor& g,
                                    const Tensor& gi) {
  return mluopAvgPool2dBackward(h, c.kernel.data(), static_cast<int>(c.kernel.size()), c.stride.data(),
                                static_cast<int>(c.stride.size()), c.padding.data(),
                                static_cast<int>(c.padding.size()), cip, g.desc(), g.data(), gi.desc(),
                                gi.data());
}

mlu::Status referenceAvgPoolBackward(const PoolCase& c, bool cip, const Tensor& g, const Tensor& gi) {
  mlu::avg_pool2d_backward_args a;
  a.kernel = c.kernel;
  a.stride = c.stride;
  a.padding = c.padding;
  a.count_include_pad = cip;
  a.grad_output = g.view();
  a.grad_input = gi.view();
  return mlu::reference::run(a);
}

// max_pool2d of `values` on the device and on the reference: the same maxima and indices, exactly.
void expectMaxPoolMatches(const Handle& h, mluopDataType_t dtype, const PoolCase& c,
                          const std::vector<double>& values, const std::string& what) {
  const Pair x = makePair(dtype, c.dims, values, poolStrides(c));
  const Dims out = poolOutput(c);
  Tensor y = Tensor::device(dtype, out);
  Tensor indices = Tensor::device(kI64, out);
  Tensor y_ref = Tensor::host(dtype, out);
  Tensor indices_ref = Tensor::host(kI64, out);
  ASSERT_EQ(deviceMaxPool(h, c, x.dev, y, indices), MLUOP_STATUS_SUCCESS) << lastError();
  expectOk(referenceMaxPool(c, x.host, y_ref, indices_ref));
  h.sync();
  expectExact(y.values(), y_ref.values(), what + " y");
  expectExact(indices.values(), indices_ref.values(), what + " indices");
}

TEST(MaxPool2d, ForwardDeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 300;
  for (const mluopDataType_t dtype : kDeviceDtypes) {
    for (const PoolCase& c : poolCases()) {
      // Ties (a 0.25 grid) must pick the first maximum on both sides.
      expectMaxPoolMatches(h, dtype, c, reducetest::tiedValues(optest::numel(c.dims), seed++, 0.25),
                           dtypeLabel(dtype) + " " + poolLabel(c));
    }
  }
}

// NaNs and infinities: the first NaN of a window wins (its value and index, as PyTorch's), a window of -inf
// gives -inf at its first tap; the device (which compares without branches and looks again at a window
// with a NaN) agrees with the reference on every case. Hand-worked, flat indices in the 2 x 6 plane:
// windows [1, NaN; NaN, 3] -> NaN at 1, [-inf, -inf; -inf, -inf] -> -inf at 2, [2, 5; 5, -inf] -> 5 at 5.
TEST(MaxPool2d, NansAndInfinitiesDeviceMatchesReference) {
  Handle h;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const PoolCase hand{{1, 1, 2, 6}, {2, 2}, {2, 2}, {0, 0}, false};
  const Pair x = makePair(kF32, hand.dims, {1, kNaN, -kInf, -kInf, 2, 5, kNaN, 3, -kInf, -kInf, 5, -kInf});
  Tensor y = Tensor::device(kF32, poolOutput(hand));
  Tensor indices = Tensor::device(kI64, poolOutput(hand));
  ASSERT_EQ(deviceMaxPool(h, hand, x.dev, y, indices), MLUOP_STATUS_SUCCESS) << lastError();
  h.sync();
  expectExact(y.values(), {kNaN, -kInf, 5}, "hand-worked y");
  expectExact(indices.values(), {1, 2, 5}, "hand-worked indices");
  std::uint32_t seed = 360;
  for (const mluopDataType_t dtype : kDeviceDtypes) {
    for (const PoolCase& c : poolCases()) {
      std::vector<double> values = reducetest::tiedValues(optest::numel(c.dims), seed++, 0.25);
      for (std::size_t i = 0; i < values.size(); ++i) {
        if (i % 11 == 3) values[i] = kNaN;
        if (i % 7 == 2) values[i] = -kInf;
      }
      expectMaxPoolMatches(h, dtype, c, values, dtypeLabel(dtype) + " " + poolLabel(c) + " with NaNs");
    }
  }
}

TEST(MaxPool2d, BackwardDeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 330;
  for (const mluopDataType_t dtype : kDeviceDtypes) {
    for (const PoolCase& c : poolCases()) {
      const std::string what = dtypeLabel(dtype) + " " + poolLabel(c);
      const Dims out = poolOutput(c);
      // Indices from a forward pass (overlapping windows route several gradients to one input).
      const Tensor x = Tensor::host(dtype, c.dims, randomValues(optest::numel(c.dims), seed++));
      Tensor y = Tensor::host(dtype, out);
      Tensor indices_host = Tensor::host(kI64, out);
      expectOk(referenceMaxPool(c, x, y, indices_host));
      const Pair indices = makePair(kI64, out, indices_host.values());
      const Pair g = makePair(dtype, out, randomValues(optest::numel(out), seed++));
      Tensor gi = Tensor::device(dtype, c.dims, {}, poolStrides(c));
      Tensor gi_ref = Tensor::host(dtype, c.dims);
      ASSERT_EQ(deviceMaxPoolBackward(h, c, g.dev, indices.dev, gi), MLUOP_STATUS_SUCCESS) << lastError();
      expectOk(referenceMaxPoolBackward(c, g.host, indices.host, gi_ref));
      h.sync();
      expectClose(gi.values(), gi_ref.values(),
                  reducetest::reductionTolerance(dtype, c.kernel[0] * c.kernel[1]), what);
    }
  }
}

// DIOPI's max_pool2d cases with dilation and ceil mode (a 3-d [C, H, W] input among them; the widest
// one shrunk): the output size by PyTorch's formula, the device against the reference forward and backward.
struct DilatedPoolCase {
  PoolCase pool;
  Dilation d;
  Dims out;  // PyTorch's output shape, worked by hand
};

const std::vector<DilatedPoolCase>& dilatedPoolCases() {
  static const std::vector<DilatedPoolCase> cases = {
      {{{3, 12, 20}, {6, 6}, {6, 6}, {0, 0}, false}, {{1, 1}, false}, {3, 2, 3}},
      // (17 + 4 - 4 * 5 - 1 + 2) / 3 + 1 = 1 (ceil); (22 + 12 - 3 * 11 - 1 + 99) / 100 + 1 = 1
      {{{5, 4, 17, 22}, {6, 12}, {3, 100}, {2, 6}, false}, {{4, 3}, true}, {5, 4, 1, 1}},
      // (17 + 4 - 2 * 5 - 1) / 3 + 1 = 4; (23 + 6 - 3 * 7 - 1) / 2 + 1 = 4
      {{{6, 17, 23}, {6, 8}, {3, 2}, {2, 3}, false}, {{2, 3}, false}, {6, 4, 4}},
      {{{1, 4, 17, 23}, {6, 8}, {3, 2}, {2, 3}, true}, {{2, 3}, true}, {1, 4, 5, 5}},
      {{{2, 6, 12, 40}, {2, 1}, {2, 1}, {0, 0}, false}, {{1, 1}, true}, {2, 6, 6, 40}},
      {{{2, 5, 4, 26}, {2, 2}, {2, 1}, {0, 1}, false}, {{}, false}, {2, 5, 2, 27}},
      // (10 - 2 * 2 - 1 + 1) / 2 + 1 = 4 in ceil mode
      {{{3, 4, 10}, {3, 3}, {2, 2}, {0, 0}, false}, {{2, 2}, true}, {3, 1, 4}},
  };
  return cases;
}

TEST(MaxPool2d, DilationAndCeilModeDeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 360;
  for (const mluopDataType_t dtype : kDeviceDtypes) {
    for (const DilatedPoolCase& c : dilatedPoolCases()) {
      const std::string what = dtypeLabel(dtype) + " " + poolLabel(c.pool) + " d" +
                               testing::PrintToString(c.d.dilation) + (c.d.ceil_mode ? " ceil" : "");
      const Pair x =
          makePair(dtype, c.pool.dims, reducetest::tiedValues(optest::numel(c.pool.dims), seed++, 0.25));
      Tensor y = Tensor::device(dtype, c.out), indices = Tensor::device(kI64, c.out);
      Tensor y_ref = Tensor::host(dtype, c.out), indices_ref = Tensor::host(kI64, c.out);
      ASSERT_EQ(deviceMaxPool(h, c.pool, x.dev, y, indices, c.d), MLUOP_STATUS_SUCCESS)
          << what << ": " << lastError();
      expectOk(referenceMaxPool(c.pool, x.host, y_ref, indices_ref, c.d));
      const Pair g = makePair(dtype, c.out, randomValues(optest::numel(c.out), seed++));
      const Pair idx = makePair(kI64, c.out, indices_ref.values());
      Tensor gi = Tensor::device(dtype, c.pool.dims), gi_ref = Tensor::host(dtype, c.pool.dims);
      ASSERT_EQ(deviceMaxPoolBackward(h, c.pool, g.dev, idx.dev, gi, c.d), MLUOP_STATUS_SUCCESS) << what;
      expectOk(referenceMaxPoolBackward(c.pool, g.host, idx.host, gi_ref, c.d));
      h.sync();
      expectExact(y.values(), y_ref.values(), what + " y");
      expectExact(indices.values(), indices_ref.values(), what + " indices");
      expectClose(gi.values(), gi_ref.values(), reducetest::reductionTolerance(dtype, 4), what + " backward");
    }
  }
}

// Dilation 2 on a 1 x 5 row with kernel [1, 2], stride 1: windows {0, 2}, {1, 3}, {2, 4}; ceil mode keeps a
// last window that starts inside the input (and drops one that would start in the padding).
TEST(MaxPool2d, DilationHandWorked) {
  const PoolCase c{{1, 1, 1, 5}, {1, 2}, {1, 1}, {0, 0}, false};
  const Tensor x = Tensor::host(kF64, c.dims, {3, 9, 1, 7, 8});
  Tensor y = Tensor::host(kF64, {1, 1, 1, 3}), indices = Tensor::host(kI64, {1, 1, 1, 3});
  expectOk(referenceMaxPool(c, x, y, indices, {{1, 2}, false}));
  expectExact(y.values(), {3, 9, 8}, "dilated maxima");
  expectExact(indices.values(), {0, 1, 4}, "dilated indices");
  // stride 2, kernel 2: floor gives 2 windows of [0..3], ceil a third starting at 4 (one element)
  const PoolCase s2{{1, 1, 1, 5}, {1, 2}, {1, 2}, {0, 0}, false};
  Tensor y2 = Tensor::host(kF64, {1, 1, 1, 3}), i2 = Tensor::host(kI64, {1, 1, 1, 3});
  expectOk(referenceMaxPool(s2, x, y2, i2, {{}, true}));
  expectExact(y2.values(), {9, 7, 8}, "ceil mode");
  Tensor y_floor = Tensor::host(kF64, {1, 1, 1, 3}), i_floor = Tensor::host(kI64, {1, 1, 1, 3});
  expectBadParam(referenceMaxPool(s2, x, y_floor, i_floor, {{}, false}),
                 "y has shape [1, 1, 1, 3] but the result has shape [1, 1, 1, 2]");
  Handle h;
  const Pair xd = makePair(kF32, c.dims, {3, 9, 1, 7, 8});
  Tensor yd = Tensor::device(kF32, {1, 1, 1, 3}), id = Tensor::device(kI64, {1, 1, 1, 3});
  expectBadParam(deviceMaxPool(h, c, xd.dev, yd, id, {{1, 0}, false}),
                 "max_pool2d_forward: dilation [1, 0] must be positive");
  expectBadParam(deviceMaxPool(h, c, xd.dev, yd, id, {{2}, false}),
                 "dilation has 1 values [2]; expected 2 (H, W), or none for 1");
  const Tensor five_d = Tensor::device(kF32, {1, 1, 1, 1, 5});
  expectBadParam(deviceMaxPool(h, c, five_d, yd, id), "x has shape [1, 1, 1, 1, 5]; expected 3 or 4 dims");
}

TEST(MaxPool2d, ReferenceHandWorked) {
  // x = 0..15 in a 4x4 plane.
  std::vector<double> ramp(16);
  for (int i = 0; i < 16; ++i) ramp[static_cast<std::size_t>(i)] = i;
  const Tensor x = Tensor::host(kF64, {1, 1, 4, 4}, ramp);
  Tensor y = Tensor::host(kF64, {1, 1, 2, 2});
  Tensor indices = Tensor::host(kI64, {1, 1, 2, 2});
  expectOk(referenceMaxPool({{1, 1, 4, 4}, {2, 2}, {2, 2}, {0, 0}, false}, x, y, indices));
  expectExact(y.values(), {5, 7, 13, 15}, "2x2 stride 2");
  expectExact(indices.values(), {5, 7, 13, 15}, "2x2 stride 2 indices");
  // 3x3 windows, stride 2, padding 1: rows/cols {0,1} and {1,2,3}.
  expectOk(referenceMaxPool({{1, 1, 4, 4}, {3, 3}, {2, 2}, {1, 1}, false}, x, y, indices));
  expectExact(y.values(), {5, 7, 13, 15}, "3x3 padded");
  // A plane of negative values: padding (-inf) never wins. A plane of ties: the first of each window.
  std::vector<double> negative(16, -3.0);
  negative[10] = -1.0;
  const Tensor xn = Tensor::host(kF64, {1, 1, 4, 4}, negative);
  expectOk(referenceMaxPool({{1, 1, 4, 4}, {3, 3}, {2, 2}, {1, 1}, false}, xn, y, indices));
  expectExact(y.values(), {-3, -3, -3, -1}, "negative plane");
  expectExact(indices.values(), {0, 1, 4, 10}, "negative plane indices");
  const Tensor ties = Tensor::host(kF64, {1, 1, 4, 4}, std::vector<double>(16, 1.0));
  expectOk(referenceMaxPool({{1, 1, 4, 4}, {2, 2}, {2, 2}, {0, 0}, false}, ties, y, indices));
  expectExact(indices.values(), {0, 2, 8, 10}, "first of ties");
  // Backward with overlapping windows (3x3 stride 1 on 3x4: output 1x2), both maxima at index 6.
  const Tensor x2 = Tensor::host(kF64, {1, 1, 3, 4}, {0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0});
  Tensor y2 = Tensor::host(kF64, {1, 1, 1, 2});
  Tensor i2 = Tensor::host(kI64, {1, 1, 1, 2});
  const PoolCase overlap{{1, 1, 3, 4}, {3, 3}, {1, 1}, {0, 0}, false};
  expectOk(referenceMaxPool(overlap, x2, y2, i2));
  expectExact(i2.values(), {6, 6}, "overlap indices");
  Tensor gi = Tensor::host(kF64, {1, 1, 3, 4});
  expectOk(referenceMaxPoolBackward(overlap, Tensor::host(kF64, {1, 1, 1, 2}, {2, 5}), i2, gi));
  expectExact(gi.values(), {0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0}, "gradients accumulate");
}

TEST(MaxPool2d, BackwardMatchesFiniteDifferences) {
  std::uint32_t seed = 360;
  for (const PoolCase& c : {PoolCase{{2, 2, 5, 6}, {3, 3}, {2, 2}, {1, 1}, false},
                            PoolCase{{1, 2, 4, 5}, {2, 3}, {1, 1}, {1, 1}, false}}) {
    const std::int64_t n = optest::numel(c.dims);
    // Distinct values 0.01 apart (no ties, so the h = 1e-6 probes never change a window's argmax).
    std::vector<double> x(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = 0.01 * static_cast<double>(i);
    std::shuffle(x.begin(), x.end(), std::mt19937(seed++));
    const Dims out = poolOutput(c);
    const std::vector<double> w = randomValues(optest::numel(out), seed++);
    const auto objective = [&](const std::vector<double>& xv) {
      Tensor y = Tensor::host(kF64, out);
      Tensor indices = Tensor::host(kI64, out);
      EXPECT_TRUE(referenceMaxPool(c, Tensor::host(kF64, c.dims, xv), y, indices).ok());
      return dot(y.values(), w);
    };
    Tensor y = Tensor::host(kF64, out);
    Tensor indices = Tensor::host(kI64, out);
    expectOk(referenceMaxPool(c, Tensor::host(kF64, c.dims, x), y, indices));
    Tensor gi = Tensor::host(kF64, c.dims);
    expectOk(referenceMaxPoolBackward(c, Tensor::host(kF64, out, w), indices, gi));
    expectClose(gi.values(), numericalGradient(x, objective), reducetest::finiteDifferenceTolerance(),
                poolLabel(c));
  }
}

TEST(AvgPool2d, ForwardDeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 400;
  for (const bool cip : {true, false}) {
    for (const mluopDataType_t dtype : kDeviceDtypes) {
      for (const PoolCase& c : poolCases()) {
        const std::string what = dtypeLabel(dtype) + " " + poolLabel(c) + (cip ? " count_include_pad" : "");
        const Pair x = makePair(dtype, c.dims, randomValues(optest::numel(c.dims), seed++), poolStrides(c));
        const Dims out = poolOutput(c);
        Tensor y = Tensor::device(dtype, out);
        Tensor y_ref = Tensor::host(dtype, out);
        ASSERT_EQ(deviceAvgPool(h, c, cip, x.dev, y), MLUOP_STATUS_SUCCESS) << lastError();
        expectOk(referenceAvgPool(c, cip, x.host, y_ref));
        h.sync();
        expectClose(y.values(), y_ref.values(),
                    reducetest::reductionTolerance(dtype, c.kernel[0] * c.kernel[1]), what);
      }
    }
  }
}

TEST(AvgPool2d, BackwardDeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 430;
  for (const bool cip : {true, false}) {
    for (const mluopDataType_t dtype : kDeviceDtypes) {
      for (const PoolCase& c : poolCases()) {
        const std::string what = dtypeLabel(dtype) + " " + poolLabel(c) + (cip ? " count_include_pad" : "");
        const Dims out = poolOutput(c);
        const Pair g = makePair(dtype, out, randomValues(optest::numel(out), seed++),
                                c.channels_last ? permutedStrides(out, {0, 2, 3, 1}) : Dims{});
        Tensor gi = Tensor::device(dtype, c.dims);
        Tensor gi_ref = Tensor::host(dtype, c.dims);
        ASSERT_EQ(deviceAvgPoolBackward(h, c, cip, g.dev, gi), MLUOP_STATUS_SUCCESS) << lastError();
        expectOk(referenceAvgPoolBackward(c, cip, g.host, gi_ref));
        h.sync();
        expectClose(gi.values(), gi_ref.values(),
                    reducetest::reductionTolerance(dtype, c.kernel[0] * c.kernel[1]), what);
      }
    }
  }
}

TEST(AvgPool2d, ReferenceHandWorked) {
  const Tensor x = Tensor::host(kF64, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor y = Tensor::host(kF64, {1, 1, 2, 2});
  expectOk(referenceAvgPool({{1, 1, 3, 3}, {2, 2}, {1, 1}, {0, 0}, false}, true, x, y));
  expectExact(y.values(), {3, 4, 6, 7}, "2x2 stride 1");
  // 3x3 windows with padding 1: the corner window holds 1, 2, 4, 5 (and 5 padded zeros).
  const PoolCase padded{{1, 1, 3, 3}, {3, 3}, {1, 1}, {1, 1}, false};
  Tensor y3 = Tensor::host(kF64, {1, 1, 3, 3});
  expectOk(referenceAvgPool(padded, true, x, y3));
  expectClose(y3.values(),
              {12.0 / 9, 21.0 / 9, 16.0 / 9, 27.0 / 9, 5, 33.0 / 9, 24.0 / 9, 39.0 / 9, 28.0 / 9},
              {1e-15, 1e-14}, "count_include_pad");
  expectOk(referenceAvgPool(padded, false, x, y3));
  expectClose(y3.values(), {3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7}, {1e-15, 1e-14},
              "without padding in the count");
  // Backward of the 2x2 stride-1 pooling: each output spreads g/4 over its window.
  Tensor gi = Tensor::host(kF64, {1, 1, 3, 3});
  expectOk(referenceAvgPoolBackward({{1, 1, 3, 3}, {2, 2}, {1, 1}, {0, 0}, false}, true,
                                    Tensor::host(kF64, {1, 1, 2, 2}, {4, 8, 12, 16}), gi));
  expectExact(gi.values(), {1, 3, 2, 4, 10, 6, 3, 7, 4}, "backward");
  // Backward with padding, not counting it: the corner output (divisor 4) gives 1/4 to each of its 4 inputs.
  std::vector<double> corner(9, 0.0);
  corner[0] = 1.0;
  expectOk(referenceAvgPoolBackward(padded, false, Tensor::host(kF64, {1, 1, 3, 3}, corner), gi));
  expectExact(gi.values(), {0.25, 0.25, 0, 0.25, 0.25, 0, 0, 0, 0}, "padded backward");
}

TEST(AvgPool2d, BackwardMatchesFiniteDifferences) {
  std::uint32_t seed = 460;
  for (const bool cip : {true, false}) {
    for (const PoolCase& c : {PoolCase{{2, 2, 5, 6}, {3, 3}, {2, 2}, {1, 1}, false},
                              PoolCase{{1, 2, 4, 5}, {2, 3}, {1, 1}, {1, 1}, false}}) {
      const std::int64_t n = optest::numel(c.dims);
      const std::vector<double> x = randomValues(n, seed++);
      const Dims out = poolOutput(c);
      const std::vector<double> w = randomValues(optest::numel(out), seed++);
      const auto objective = [&](const std::vector<double>& xv) {
        Tensor y = Tensor::host(kF64, out);
        EXPECT_TRUE(referenceAvgPool(c, cip, Tensor::host(kF64, c.dims, xv), y).ok());
        return dot(y.values(), w);
      };
      Tensor gi = Tensor::host(kF64, c.dims);
      expectOk(referenceAvgPoolBackward(c, cip, Tensor::host(kF64, out, w), gi));
      expectClose(gi.values(), numericalGradient(x, objective), reducetest::finiteDifferenceTolerance(),
                  poolLabel(c) + (cip ? " count_include_pad" : ""));
    }
  }
}

TEST(Pool2d, BadParams) {
  Handle h;
  const Tensor x = Tensor::device(kF32, {1, 2, 8, 8}, randomValues(128, 9));
  Tensor y = Tensor::device(kF32, {1, 2, 4, 4});
  Tensor indices = Tensor::device(kI64, {1, 2, 4, 4});
  const auto maxpool = [&](const PoolCase& c, const Tensor& xt, const Tensor& yt, const Tensor& it) {
    return deviceMaxPool(h, c, xt, yt, it);
  };
  expectBadParam(maxpool({{}, {2}, {2, 2}, {0, 0}, false}, x, y, indices),
                 "max_pool2d_forward: kernel has 1 values [2]; expected 2 (H, W)");
  expectBadParam(maxpool({{}, {2, 2}, {2, 2, 2}, {0, 0}, false}, x, y, indices),
                 "stride has 3 values [2, 2, 2]");
  expectBadParam(maxpool({{}, {2, 2}, {2, 2}, {}, false}, x, y, indices), "padding has 0 values []");
  expectBadParam(maxpool({{}, {3, 3}, {2, 2}, {2, 1}, false}, x, y, indices),
                 "padding [2, 1] is more than half of kernel [3, 3]: pad should be at most half of effective "
                 "kernel size");
  expectBadParam(maxpool({{}, {0, 2}, {2, 2}, {0, 0}, false}, x, y, indices),
                 "kernel [0, 2] must be positive");
  expectBadParam(maxpool({{}, {2, 2}, {0, 1}, {0, 0}, false}, x, y, indices),
                 "stride [0, 1] must be positive");
  expectBadParam(maxpool({{}, {2, 2}, {2, 2}, {-1, 0}, false}, x, y, indices),
                 "padding [-1, 0] must not be negative");
  // max-pool takes an unbatched [C, H, W] x (its y is then [C, Ho, Wo]); avg-pool 4 dims only
  const Tensor three_d = Tensor::device(kF32, {2, 8, 8});
  expectBadParam(maxpool({{}, {2, 2}, {2, 2}, {0, 0}, false}, three_d, y, indices),
                 "y has shape [1, 2, 4, 4] but the result has shape [2, 4, 4]");
  expectBadParam(maxpool({{}, {2, 2}, {2, 2}, {0, 0}, false}, Tensor::device(kF32, {8, 8}), y, indices),
                 "x has shape [8, 8]; expected 3 or 4 dims ([C, H, W] or [N, C, H, W])");
  expectBadParam(deviceAvgPool(h, {{}, {2, 2}, {2, 2}, {0, 0}, false}, true, three_d, y),
                 "x has shape [2, 8, 8]; expected 4 dims [N, C, H, W]");
  const Tensor tiny = Tensor::device(kF32, {1, 1, 2, 2});
  expectBadParam(
      maxpool({{}, {3, 3}, {1, 1}, {0, 0}, false}, tiny, y, indices),
      "x of shape [1, 1, 2, 2] gives an output of size [0, 0] with kernel [3, 3], stride [1, 1], padding "
      "[0, 0], dilation [1, 1]: output size is too small");
  Tensor y_wrong = Tensor::device(kF32, {1, 2, 3, 3});
  expectBadParam(maxpool({{}, {2, 2}, {2, 2}, {0, 0}, false}, x, y_wrong, indices),
                 "y has shape [1, 2, 3, 3] but the result has shape [1, 2, 4, 4]");
  expectBadParam(maxpool({{}, {2, 2}, {2, 2}, {0, 0}, false}, x, y, y_wrong),
                 "indices is float32; expected int64");
  Tensor i_wrong = Tensor::device(kI64, {1, 2, 4, 5});
  expectBadParam(maxpool({{}, {2, 2}, {2, 2}, {0, 0}, false}, x, y, i_wrong),
                 "indices has shape [1, 2, 4, 5] but the result has shape [1, 2, 4, 4]");
  Tensor y_half = Tensor::device(MLUOP_DTYPE_HALF, {1, 2, 4, 4});
  expectBadParam(maxpool({{}, {2, 2}, {2, 2}, {0, 0}, false}, x, y_half, indices),
                 "y is float16 but x is float32");
  expectBadParam(referenceMaxPool({{}, {3, 3}, {2, 2}, {2, 2}, false}, Tensor::host(kF32, {1, 2, 8, 8}),
                                  Tensor::host(kF32, {1, 2, 4, 4}), Tensor::host(kI64, {1, 2, 4, 4})),
                 "pad should be at most half of effective kernel size");

  const PoolCase ok{{}, {2, 2}, {2, 2}, {0, 0}, false};
  Tensor gi = Tensor::device(kF32, {1, 2, 8, 8});
  expectBadParam(
      deviceMaxPoolBackward(h, ok, y_wrong, indices, gi),
      "max_pool2d_backward: grad_output has shape [1, 2, 3, 3] but the result has shape [1, 2, 4, 4]");
  expectBadParam(deviceMaxPoolBackward(h, ok, y, i_wrong, gi),
                 "indices has shape [1, 2, 4, 5] but the result");
  expectBadParam(deviceMaxPoolBackward(h, ok, y, y, gi), "indices is float32; expected int64");
  expectBadParam(deviceMaxPoolBackward(h, {{}, {2, 2}, {2, 2}, {2, 0}, false}, y, indices, gi),
                 "pad should be at most half of effective kernel size");
  expectBadParam(deviceMaxPoolBackward(h, ok, y, indices, Tensor::device(kF32, {2, 8})),
                 "grad_input has shape [2, 8]; expected 3 or 4 dims");
  expectBadParam(deviceMaxPoolBackward(h, ok, y, indices, Tensor::device(MLUOP_DTYPE_HALF, {1, 2, 8, 8})),
                 "grad_input is float16 but grad_output is float32");

  expectBadParam(deviceAvgPool(h, {{}, {3}, {2, 2}, {0, 0}, false}, true, x, y),
                 "avg_pool2d_forward: kernel has 1 values [3]; expected 2 (H, W)");
  expectBadParam(deviceAvgPool(h, {{}, {2, 2}, {2, 2}, {1, 2}, false}, false, x, y),
                 "padding [1, 2] is more than half of kernel [2, 2]");
  expectBadParam(deviceAvgPool(h, ok, true, x, y_wrong),
                 "y has shape [1, 2, 3, 3] but the result has shape [1, 2, 4, 4]");
  expectBadParam(deviceAvgPool(h, ok, true, x, y_half), "y is float16 but x is float32");
  expectBadParam(deviceAvgPool(h, {{}, {3, 3}, {1, 1}, {0, 0}, false}, true, tiny, y),
                 "output size is too small");
  expectBadParam(
      deviceAvgPoolBackward(h, ok, true, y_wrong, gi),
      "avg_pool2d_backward: grad_output has shape [1, 2, 3, 3] but the result has shape [1, 2, 4, 4]");
  expectBadParam(deviceAvgPoolBackward(h, {{}, {2, 2}, {0, 2}, {0, 0}, false}, true, y, gi),
                 "stride [0, 2] must be positive");
  expectBadParam(deviceAvgPoolBackward(h, ok, true, y, Tensor::device(MLUOP_DTYPE_BFLOAT16, {1, 2, 8, 8})),
                 "grad_input is bfloat16 but grad_output is float32");
  expectBadParam(
      referenceAvgPoolBackward(ok, true, Tensor::host(kF32, {1, 2, 4, 4}), Tensor::host(kF32, {1, 2, 10, 8})),
      "grad_output has shape [1, 2, 4, 4] but the result has shape [1, 2, 5, 4]");
}

// ================================ adaptive_avg_pool2d ================================

struct AdaptiveCase {
  Dims dims;  // x [N, C, H, W]
  std::int64_t ho, wo;
  bool channels_last;  // x (and grad_input) as NHWC-strided views
};

const std::vector<AdaptiveCase>& adaptiveCases() {
  static const std::vector<AdaptiveCase> cases = {
      {{2, 3, 7, 9}, 3, 4, false},   // H, W not multiples of the output: overlapping windows
      {{1, 2, 8, 8}, 4, 4, false},   // multiples: plain 2x2 average pooling
      {{2, 3, 7, 9}, 1, 1, true},    // global average pooling
      {{2, 2, 5, 6}, 5, 6, false},   // identity
      {{1, 1, 3, 4}, 5, 7, true},    // upsampling: windows of 1 or 2 elements, repeated
      {{0, 3, 6, 6}, 2, 2, false},   // empty batch
      {{2, 3, 6, 6}, 0, 3, false},   // empty output
      {{4, 8, 24, 24}, 7, 7, true},  // split across cores
  };
  return cases;
}

Dims adaptiveOutput(const AdaptiveCase& c) { return {c.dims[0], c.dims[1], c.ho, c.wo}; }

std::string adaptiveLabel(const AdaptiveCase& c) {
  return testing::PrintToString(c.dims) + " -> " + std::to_string(c.ho) + "x" + std::to_string(c.wo) +
         (c.channels_last ? " channels_last" : "");
}

// The number of inputs the largest window averages (for the tolerance).
std::int64_t adaptiveWindowSize(const AdaptiveCase& c) {
  const auto extent = [](std::int64_t in, std::int64_t out) {
    return out == 0 ? 0 : (in + out - 1) / out + 1;
  };
  return extent(c.dims[2], c.ho) * extent(c.dims[3], c.wo);
}

mluopStatus_t deviceAdaptivePool(const Handle& h, const Tensor& x, const Tensor& y) {
  return mluopAdaptiveAvgPool2dForward(h, x.desc(), x.data(), y.desc(), y.data());
}

mlu::Status referenceAdaptivePool(const Tensor& x, const Tensor& y) {
  mlu::adaptive_avg_pool2d_forward_args a;
  a.x = x.view();
  a.y = y.view();
  return mlu::reference::run(a);
}

mluopStatus_t deviceAdaptivePoolBackward(const Handle& h, const Tensor& g, const Tensor& gi) {
  return mluopAdaptiveAvgPool2dBackward(h, g.desc(), g.data(), gi.desc(), gi.data());
}

mlu::Status referenceAdaptivePoolBackward(const Tensor& g, const Tensor& gi) {
  mlu::adaptive_avg_pool2d_backward_args a;
  a.grad_output = g.view();
  a.grad_input = gi.view();
  return mlu::reference::run(a);
}

TEST(AdaptiveAvgPool2d, ForwardDeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 500;
  for (const mluopDataType_t dtype : kDeviceDtypes) {
    for (const AdaptiveCase& c : adaptiveCases()) {
      const std::string what = dtypeLabel(dtype) + " " + adaptiveLabel(c);
      const Dims strides = c.channels_last ? permutedStrides(c.dims, {0, 2, 3, 1}) : Dims{};
      const Pair x = makePair(dtype, c.dims, randomValues(optest::numel(c.dims), seed++), strides);
      const Dims out = adaptiveOutput(c);
      // y channels-last too where x is not, so both layouts meet non-contiguous outputs.
      const Dims y_strides = c.channels_last ? Dims{} : permutedStrides(out, {0, 2, 3, 1});
      Tensor y = Tensor::device(dtype, out, {}, y_strides);
      Tensor y_ref = Tensor::host(dtype, out);
      ASSERT_EQ(deviceAdaptivePool(h, x.dev, y), MLUOP_STATUS_SUCCESS) << what << ": " << lastError();
      expectOk(referenceAdaptivePool(x.host, y_ref));
      h.sync();
      expectClose(y.values(), y_ref.values(), reducetest::reductionTolerance(dtype, adaptiveWindowSize(c)),
                  what);
    }
  }
}

TEST(AdaptiveAvgPool2d, BackwardDeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 530;
  for (const mluopDataType_t dtype : kDeviceDtypes) {
    for (const AdaptiveCase& c : adaptiveCases()) {
      const std::string what = dtypeLabel(dtype) + " " + adaptiveLabel(c);
      const Dims out = adaptiveOutput(c);
      const Pair g = makePair(dtype, out, randomValues(optest::numel(out), seed++),
                              c.channels_last ? permutedStrides(out, {0, 2, 3, 1}) : Dims{});
      // grad_input is overwritten: start it from garbage.
      Tensor gi = Tensor::device(dtype, c.dims,
                                 std::vector<double>(static_cast<std::size_t>(optest::numel(c.dims)), 7.0),
                                 c.channels_last ? Dims{} : permutedStrides(c.dims, {0, 2, 3, 1}));
      Tensor gi_ref = Tensor::host(dtype, c.dims);
      ASSERT_EQ(deviceAdaptivePoolBackward(h, g.dev, gi), MLUOP_STATUS_SUCCESS)
          << what << ": " << lastError();
      expectOk(referenceAdaptivePoolBackward(g.host, gi_ref));
      h.sync();
      expectClose(gi.values(), gi_ref.values(), reducetest::reductionTolerance(dtype, 4), what);
    }
  }
}

TEST(AdaptiveAvgPool2d, ReferenceHandWorked) {
  // 3x3 -> 2x2: rows and cols [0, 2) and [1, 3).
  const Tensor x = Tensor::host(kF64, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor y = Tensor::host(kF64, {1, 1, 2, 2});
  expectOk(referenceAdaptivePool(x, y));
  expectExact(y.values(), {3, 4, 6, 7}, "3x3 -> 2x2");
  // 5 -> 3 along W: windows [0, 2), [1, 4), [3, 5).
  const Tensor row = Tensor::host(kF64, {1, 1, 1, 5}, {1, 2, 3, 4, 5});
  Tensor y3 = Tensor::host(kF64, {1, 1, 1, 3});
  expectOk(referenceAdaptivePool(row, y3));
  expectExact(y3.values(), {1.5, 3, 4.5}, "5 -> 3");
  // 2 -> 3 (upsampling): windows [0, 1), [0, 2), [1, 2).
  const Tensor two = Tensor::host(kF64, {1, 1, 1, 2}, {2, 6});
  expectOk(referenceAdaptivePool(two, y3));
  expectExact(y3.values(), {2, 4, 6}, "2 -> 3");
  // Global average over two planes.
  const Tensor planes = Tensor::host(kF64, {1, 2, 2, 2}, {1, 2, 3, 6, -1, -1, -1, -5});
  Tensor y1 = Tensor::host(kF64, {1, 2, 1, 1});
  expectOk(referenceAdaptivePool(planes, y1));
  expectExact(y1.values(), {3, -2}, "global");
  // Backward of 5 -> 3: each gradient split over its window, overlaps added.
  Tensor gi = Tensor::host(kF64, {1, 1, 1, 5});
  expectOk(referenceAdaptivePoolBackward(Tensor::host(kF64, {1, 1, 1, 3}, {3, 6, 9}), gi));
  expectExact(gi.values(), {1.5, 3.5, 2, 6.5, 4.5}, "backward 5 -> 3");
  // An empty output: the gradient is all zeros.
  Tensor gi0 = Tensor::host(kF64, {1, 1, 2, 2}, {1, 1, 1, 1});
  expectOk(referenceAdaptivePoolBackward(Tensor::host(kF64, {1, 1, 0, 2}), gi0));
  expectExact(gi0.values(), {0, 0, 0, 0}, "backward of an empty output");
}

TEST(AdaptiveAvgPool2d, BackwardMatchesFiniteDifferences) {
  std::uint32_t seed = 560;
  for (const AdaptiveCase& c :
       {AdaptiveCase{{2, 2, 7, 5}, 3, 2, false}, AdaptiveCase{{1, 2, 3, 4}, 4, 6, false}}) {
    const std::vector<double> x = randomValues(optest::numel(c.dims), seed++);
    const Dims out = adaptiveOutput(c);
    const std::vector<double> w = randomValues(optest::numel(out), seed++);
    const auto objective = [&](const std::vector<double>& xv) {
      Tensor y = Tensor::host(kF64, out);
      EXPECT_TRUE(referenceAdaptivePool(Tensor::host(kF64, c.dims, xv), y).ok());
      return dot(y.values(), w);
    };
    Tensor gi = Tensor::host(kF64, c.dims);
    expectOk(referenceAdaptivePoolBackward(Tensor::host(kF64, out, w), gi));
    expectClose(gi.values(), numericalGradient(x, objective), reducetest::finiteDifferenceTolerance(),
                adaptiveLabel(c));
  }
}

TEST(AdaptiveAvgPool2d, BadParams) {
  Handle h;
  const Tensor x = Tensor::device(kF32, {1, 2, 8, 8}, randomValues(128, 9));
  Tensor y = Tensor::device(kF32, {1, 2, 3, 3});
  expectBadParam(deviceAdaptivePool(h, Tensor::device(kF32, {2, 8, 8}), y),
                 "adaptive_avg_pool2d_forward: x has shape [2, 8, 8]; expected 4 dims [N, C, H, W]");
  expectBadParam(deviceAdaptivePool(h, x, Tensor::device(kF32, {2, 3, 3})),
                 "y has shape [2, 3, 3]; expected 4 dims [N, C, Ho, Wo]");
  expectBadParam(deviceAdaptivePool(h, x, Tensor::device(kF32, {1, 3, 3, 3})),
                 "y has shape [1, 3, 3, 3] but x has shape [1, 2, 8, 8]; N and C must match");
  expectBadParam(deviceAdaptivePool(h, x, Tensor::device(kF32, {2, 2, 3, 3})),
                 "y has shape [2, 2, 3, 3] but x has shape [1, 2, 8, 8]; N and C must match");
  expectBadParam(deviceAdaptivePool(h, Tensor::device(kF32, {1, 2, 0, 8}), y),
                 "x has shape [1, 2, 0, 8]: an output of size [3, 3] needs non-empty H and W");
  expectBadParam(deviceAdaptivePool(h, x, Tensor::device(MLUOP_DTYPE_HALF, {1, 2, 3, 3})),
                 "y is float16 but x is float32; they must have the same dtype");
  expectBadParam(deviceAdaptivePool(h, x, Tensor::device(kF32, {1, 2, 3, 3}, {}, {18, 0, 3, 1})),
                 "y (shape [1, 2, 3, 3], strides [18, 0, 3, 1]) overlaps itself");
  EXPECT_EQ(deviceAdaptivePool(h, Tensor::device(MLUOP_DTYPE_INT32, {1, 2, 8, 8}),
                               Tensor::device(MLUOP_DTYPE_INT32, {1, 2, 3, 3})),
            MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("adaptive_avg_pool2d_forward: x is int32, which is not supported"));
  expectBadParam(referenceAdaptivePool(Tensor::host(kF32, {1, 2, 8, 8}), Tensor::host(kF32, {1, 2, 3})),
                 "y has shape [1, 2, 3]; expected 4 dims [N, C, Ho, Wo]");

  Tensor gi = Tensor::device(kF32, {1, 2, 8, 8});
  expectBadParam(
      deviceAdaptivePoolBackward(h, y, Tensor::device(kF32, {2, 8, 8})),
      "adaptive_avg_pool2d_backward: grad_input has shape [2, 8, 8]; expected 4 dims [N, C, H, W]");
  expectBadParam(deviceAdaptivePoolBackward(h, Tensor::device(kF32, {3, 3}), gi),
                 "grad_output has shape [3, 3]; expected 4 dims [N, C, Ho, Wo]");
  expectBadParam(
      deviceAdaptivePoolBackward(h, Tensor::device(kF32, {1, 1, 3, 3}), gi),
      "grad_output has shape [1, 1, 3, 3] but grad_input has shape [1, 2, 8, 8]; N and C must match");
  expectBadParam(deviceAdaptivePoolBackward(h, y, Tensor::device(kF32, {1, 2, 8, 0})),
                 "grad_input has shape [1, 2, 8, 0]: an output of size [3, 3] needs non-empty H and W");
  expectBadParam(deviceAdaptivePoolBackward(h, y, Tensor::device(MLUOP_DTYPE_BFLOAT16, {1, 2, 8, 8})),
                 "grad_input is bfloat16 but grad_output is float32; they must have the same dtype");
  expectBadParam(deviceAdaptivePoolBackward(h, y, Tensor::device(kF32, {1, 2, 8, 8}, {}, {128, 0, 8, 1})),
                 "grad_input (shape [1, 2, 8, 8], strides [128, 0, 8, 1]) overlaps itself");
  EXPECT_EQ(deviceAdaptivePoolBackward(h, Tensor::device(MLUOP_DTYPE_INT32, {1, 2, 3, 3}),
                                       Tensor::device(MLUOP_DTYPE_INT32, {1, 2, 8, 8})),
            MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("grad_output is int32, which is not supported"));
  expectBadParam(
      referenceAdaptivePoolBackward(Tensor::host(kF32, {1, 2, 3, 3}), Tensor::host(kF32, {1, 3, 8, 8})),
      "N and C must match");
  mlu::adaptive_avg_pool2d_backward_args missing;
  missing.grad_output = Tensor::host(kF32, {1, 2, 3, 3}).view();
  expectBadParam(mlu::reference::run(missing), "grad_input is missing");
  // An empty output from an empty plane is fine (nothing to average).
  Tensor y_empty = Tensor::device(kF32, {1, 2, 0, 3});
  EXPECT_EQ(deviceAdaptivePool(h, Tensor::device(kF32, {1, 2, 0, 8}), y_empty), MLUOP_STATUS_SUCCESS)
      << lastError();
  h.sync();
}

// ================================ determinism ================================

// Work split across cores must not change the accumulation order: repeated runs are bit-identical.
TEST(ReduceFamily, DeviceIsDeterministic) {
  Handle h;
  const Tensor x = Tensor::device(kF32, {40, 3000}, randomValues(120000, 13, -4, 4));
  const Tensor target = Tensor::device(kI64, {40}, lossTargets(40, 3000, -100, 14));
  const std::vector<int> all = {};
  const std::vector<int> dim0 = {0};
  const auto run = [&] {
    std::vector<std::vector<double>> results;
    Tensor total = Tensor::device(kF32, {});
    Tensor cols = Tensor::device(kF32, {3000});
    Tensor soft = Tensor::device(kF32, {40, 3000});
    Tensor loss = Tensor::device(kF32, {});
    EXPECT_EQ(deviceSumLike<mlu::sum_args>(h, all, false, x, total), MLUOP_STATUS_SUCCESS);
    EXPECT_EQ(deviceSumLike<mlu::mean_args>(h, dim0, false, x, cols), MLUOP_STATUS_SUCCESS);
    EXPECT_EQ(deviceSoftmax(h, true, 1, x, soft), MLUOP_STATUS_SUCCESS);
    EXPECT_EQ(deviceLossForward(h, Loss::kCrossEntropy, MLUOP_REDUCTION_MEAN, -100, x, target, loss),
              MLUOP_STATUS_SUCCESS);
    Tensor norm = Tensor::device(kF32, {});
    Tensor var = Tensor::device(kF32, {3000});
    EXPECT_EQ(deviceSumLike<mlu::norm_args>(h, all, false, x, norm), MLUOP_STATUS_SUCCESS);
    EXPECT_EQ(deviceSumLike<mlu::var_args>(h, dim0, false, x, var), MLUOP_STATUS_SUCCESS);
    h.sync();
    for (const Tensor* t : {&total, &cols, &soft, &loss, &norm, &var}) results.push_back(t->values());
    return results;
  };
  const auto first = run();
  const auto second = run();
  for (std::size_t i = 0; i < first.size(); ++i)
    expectExact(second[i], first[i], "result " + std::to_string(i));
}

// The order of a sum depends only on the shapes, not on the layout: over the leading dim of a [300, 37]
// matrix (adjacent outputs read together), over the inner dim of its transpose (contiguous rows), over a
// transposed view, over a view of every other element (strided), and over two dims at once (a cursor),
// sum, mean, norm and var give the same bits.
TEST(ReduceFamily, EveryLayoutSumsInTheSameOrder) {
  Handle h;
  const std::int64_t rows = 300, cols = 37;
  const std::vector<double> v = randomValues(rows * cols, 17, -3, 3);
  std::vector<double> vt(v.size());  // v transposed: [cols, rows]
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c)
      vt[static_cast<std::size_t>(c * rows + r)] = v[static_cast<std::size_t>(r * cols + c)];
  }
  struct Layout {
    const char* name;
    Tensor x;
    std::vector<int> dims;
  };
  std::vector<Layout> layouts;
  layouts.push_back({"leading dim", Tensor::device(kF32, {rows, cols}, v), {0}});
  layouts.push_back({"inner dim of the transpose", Tensor::device(kF32, {cols, rows}, vt), {1}});
  layouts.push_back({"transposed view", Tensor::device(kF32, {rows, cols}, v, {1, rows}), {0}});
  layouts.push_back({"every other element", Tensor::device(kF32, {rows, cols}, v, {2 * cols, 2}), {0}});
  layouts.push_back({"two dims (padded)", Tensor::device(kF32, {3, 100, cols}, v, {3800, cols, 1}), {0, 1}});
  const auto run = [&](const Layout& l) {
    std::vector<std::vector<double>> out;
    Tensor sum = Tensor::device(kF32, {cols}), mean = Tensor::device(kF32, {cols});
    Tensor norm = Tensor::device(kF32, {cols}), var = Tensor::device(kF32, {cols});
    EXPECT_EQ(deviceSumLike<mlu::sum_args>(h, l.dims, false, l.x, sum), MLUOP_STATUS_SUCCESS) << lastError();
    EXPECT_EQ(deviceSumLike<mlu::mean_args>(h, l.dims, false, l.x, mean), MLUOP_STATUS_SUCCESS);
    EXPECT_EQ(deviceSumLike<mlu::norm_args>(h, l.dims, false, l.x, norm), MLUOP_STATUS_SUCCESS);
    EXPECT_EQ(deviceSumLike<mlu::var_args>(h, l.dims, false, l.x, var), MLUOP_STATUS_SUCCESS);
    h.sync();
    for (const Tensor* t : {&sum, &mean, &norm, &var}) out.push_back(t->values());
    return out;
  };
  const auto first = run(layouts[0]);
  std::vector<double> column0(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r)
    column0[static_cast<std::size_t>(r)] = v[static_cast<std::size_t>(r * cols)];
  double want = 0;
  for (const double x : column0) want += static_cast<float>(x);
  EXPECT_NEAR(first[0][0], want, 1e-4);  // and it is the sum
  for (std::size_t i = 1; i < layouts.size(); ++i) {
    const auto other = run(layouts[i]);
    for (std::size_t r = 0; r < first.size(); ++r)
      expectExact(other[r], first[r], std::string(layouts[i].name) + " result " + std::to_string(r));
  }
}

// ================================ float64 on the device ================================

TEST(ReduceFamily, Float64IsNotSupportedOnTheDevice) {
  Handle h;
  const Tensor x = Tensor::device(kF64, {2, 3}, randomValues(6, 11));
  Tensor y = Tensor::device(kF64, {2, 3});
  Tensor rows = Tensor::device(kF64, {2});
  Tensor idx = Tensor::device(kI64, {2});
  Tensor scalar = Tensor::device(kF64, {});
  const Tensor target = Tensor::device(kI64, {2}, {0, 1});
  const std::vector<int> dims = {1};
  const auto expectNotSupported = [](mluopStatus_t s, const char* op) {
    EXPECT_EQ(s, MLUOP_STATUS_NOT_SUPPORTED) << op;
    EXPECT_THAT(lastError(), HasSubstr("float64, which the device does not support")) << op;
  };
  expectNotSupported(mluopReduceSum(h, dims.data(), 1, false, x.desc(), x.data(), rows.desc(), rows.data()),
                     "sum");
  expectNotSupported(mluopReduceMean(h, dims.data(), 1, false, x.desc(), x.data(), rows.desc(), rows.data()),
                     "mean");
  expectNotSupported(deviceExtremum(h, Extremum::kMax, 1, false, x, rows, idx), "max");
  expectNotSupported(deviceExtremum(h, Extremum::kMin, 1, false, x, rows, idx), "min");
  expectNotSupported(deviceExtremum(h, Extremum::kArgmax, 1, false, x, rows, idx), "argmax");
  expectNotSupported(deviceSoftmax(h, false, 1, x, y), "softmax_forward");
  expectNotSupported(deviceSoftmax(h, true, 1, x, y), "log_softmax_forward");
  expectNotSupported(deviceSoftmaxBackward(h, false, 1, x, x, y), "softmax_backward");
  expectNotSupported(deviceSoftmaxBackward(h, true, 1, x, x, y), "log_softmax_backward");
  for (const Loss loss : {Loss::kNll, Loss::kCrossEntropy}) {
    expectNotSupported(deviceLossForward(h, loss, MLUOP_REDUCTION_MEAN, -100, x, target, scalar),
                       lossName(loss));
    expectNotSupported(deviceLossBackward(h, loss, MLUOP_REDUCTION_MEAN, -100, scalar, x, target, y),
                       lossName(loss));
  }
  const PoolCase c{{1, 1, 4, 4}, {2, 2}, {2, 2}, {0, 0}, false};
  const Tensor x4 = Tensor::device(kF64, {1, 1, 4, 4}, randomValues(16, 12));
  Tensor y4 = Tensor::device(kF64, {1, 1, 2, 2});
  Tensor i4 = Tensor::device(kI64, {1, 1, 2, 2});
  Tensor g4 = Tensor::device(kF64, {1, 1, 4, 4});
  expectNotSupported(deviceMaxPool(h, c, x4, y4, i4), "max_pool2d_forward");
  expectNotSupported(deviceMaxPoolBackward(h, c, y4, i4, g4), "max_pool2d_backward");
  expectNotSupported(deviceAvgPool(h, c, true, x4, y4), "avg_pool2d_forward");
  expectNotSupported(deviceAvgPoolBackward(h, c, true, y4, g4), "avg_pool2d_backward");
  expectNotSupported(
      mluopReduceNorm(h, 2.0, dims.data(), 1, false, x.desc(), x.data(), rows.desc(), rows.data()), "norm");
  expectNotSupported(
      mluopReduceVar(h, dims.data(), 1, true, false, x.desc(), x.data(), rows.desc(), rows.data()), "var");
  expectNotSupported(deviceAdaptivePool(h, x4, y4), "adaptive_avg_pool2d_forward");
  expectNotSupported(deviceAdaptivePoolBackward(h, y4, g4), "adaptive_avg_pool2d_backward");
}

}  // namespace
