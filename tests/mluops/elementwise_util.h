// elementwise_util.h — helpers for the elementwise op tests: tensor layouts (shape + optional strides),
// exact and tolerant comparisons that also accept matching infinities, BAD_PARAM assertions, and central
// finite differences for the backward-op checks.
#pragma once

#include "op_harness.h"

#include <gmock/gmock.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace optest {

// A tensor's shape and strides (empty strides: contiguous).
struct Layout {
  Dims dims;
  Dims strides;
};

// "[7, 13] strides [1, 7]"
inline std::string describe(const Layout& l) {
  auto list = [](const Dims& d) {
    std::string s = "[";
    for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + "]";
  };
  return list(l.dims) + (l.strides.empty() ? "" : " strides " + list(l.strides));
}

// The transposed view of a contiguous [cols, rows] buffer seen as [rows, cols].
inline Layout transposed(std::int64_t rows, std::int64_t cols) { return {{rows, cols}, {1, rows}}; }

inline Tensor deviceTensor(mluopDataType_t dtype, const Layout& l, const std::vector<double>& values = {}) {
  return Tensor::device(dtype, l.dims, values, l.strides);
}
inline Tensor hostTensor(mluopDataType_t dtype, const Layout& l, const std::vector<double>& values = {}) {
  return Tensor::host(dtype, l.dims, values, l.strides);
}

// Values rounded to dtype, as a tensor of that dtype holds them (so expected values can be computed from
// what the op really reads).
inline std::vector<double> roundedTo(mluopDataType_t dtype, std::vector<double> values) {
  for (double& v : values) {
    unsigned char buf[8];
    encode(dtype, v, buf);
    v = decode(dtype, buf);
  }
  return values;
}

// Bit-exact equality (NaN equals NaN).
inline void expectSame(const std::vector<double>& actual, const std::vector<double>& expected,
                       const std::string& what = "") {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(actual[i]) && std::isnan(expected[i])) continue;
    if (actual[i] != expected[i]) {
      ADD_FAILURE() << what << " element " << i << ": got " << actual[i] << ", expected " << expected[i];
      if (++reported >= 5) return;
    }
  }
}

// |actual - expected| <= atol + rtol |expected|, where equal values (also infinities) and two NaNs match.
inline void expectNear(const std::vector<double>& actual, const std::vector<double>& expected, Tolerance tol,
                       const std::string& what = "") {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    if (a == e || (std::isnan(a) && std::isnan(e))) continue;
    if (!(std::fabs(a - e) <= tol.atol + tol.rtol * std::fabs(e))) {
      ADD_FAILURE() << what << " element " << i << ": got " << a << ", expected " << e;
      if (++reported >= 5) return;
    }
  }
}

// Asserts a call failed with `code` and a last-error message containing `text`.
inline void expectError(mluopStatus_t status, mluopStatus_t code, const std::string& text,
                        const std::string& what = "") {
  EXPECT_EQ(status, code) << what << ": " << mluopGetLastErrorMessage();
  EXPECT_THAT(std::string(mluopGetLastErrorMessage()), ::testing::HasSubstr(text)) << what;
}
inline void expectBadParam(mluopStatus_t status, const std::string& text, const std::string& what = "") {
  expectError(status, MLUOP_STATUS_BAD_PARAM, text, what);
}
// The same for a reference run's Status.
inline void expectBadParam(const mlu::Status& status, const std::string& text, const std::string& what = "") {
  EXPECT_EQ(status.code, MLUOP_STATUS_BAD_PARAM) << what << ": " << status.message;
  EXPECT_THAT(status.message, ::testing::HasSubstr(text)) << what;
}

// Distance in float32 ulps between two float32 values (same sign assumed; for the fast-math checks).
inline std::int64_t ulpDistance(float a, float b) {
  const auto ia = static_cast<std::int64_t>(std::bit_cast<std::int32_t>(a));
  const auto ib = static_cast<std::int64_t>(std::bit_cast<std::int32_t>(b));
  return ia > ib ? ia - ib : ib - ia;
}

}  // namespace optest
