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

// Layouts of single-tensor ops (the output usually gets the same dims, contiguous or not).
inline const std::vector<Layout>& unaryLayouts() {
  static const std::vector<Layout> layouts = {
      {{}, {}},                  // 0-d
      {{0}, {}},                 // size 0
      {{4, 0, 3}, {}},           // size 0 among other dims
      {{7, 13}, {}},             // odd sizes
      transposed(7, 13),         // non-contiguous
      {{3, 1, 5}, {5, 100, 1}},  // a size-1 dim with an unrelated stride
      {{2, 3, 4}, {24, 8, 2}},   // every other element
      {{131, 509}, {}},          // several chunks across cores
  };
  return layouts;
}

// The large layout (split across cores) is exercised once per op and dtype, not for every variant, to keep
// the sanitizer runs short.
inline bool isLarge(const Layout& l) { return numel(l.dims) > 10000; }

// The operands' layouts of a broadcasting binary op: a, b and the output c.
struct BinaryLayouts {
  Layout a, b, c;
};
inline const std::vector<BinaryLayouts>& binaryLayouts() {
  static const std::vector<BinaryLayouts> layouts = {
      {{{}, {}}, {{}, {}}, {{}, {}}},                          // 0-d
      {{{}, {}}, {{5}, {}}, {{5}, {}}},                        // 0-d broadcast
      {{{0}, {}}, {{0}, {}}, {{0}, {}}},                       // size 0
      {{{0, 3}, {}}, {{3}, {}}, {{0, 3}, {}}},                 // size 0, broadcast
      {{{7, 13}, {}}, {{7, 13}, {}}, {{7, 13}, {}}},           // odd sizes
      {{{7, 13}, {}}, {{13}, {}}, {{7, 13}, {}}},              // row broadcast
      {{{7, 1}, {}}, {{1, 13}, {}}, {{7, 13}, {}}},            // both broadcast
      {{{2, 1, 5}, {}}, {{3, 1}, {}}, {{2, 3, 5}, {}}},        // 3-d against 2-d
      {transposed(7, 13), {{7, 13}, {0, 1}}, {{7, 13}, {}}},   // transposed a, explicit stride-0 b
      {{{7, 13}, {}}, {{7, 1}, {}}, transposed(7, 13)},        // transposed output
      {{{2, 3, 4}, {24, 8, 2}}, {{4}, {3}}, {{2, 3, 4}, {}}},  // strided slices
      {{{131, 509}, {}}, {{509}, {}}, {{131, 509}, {}}},       // several chunks, row broadcast
      {{{131, 509}, {}}, {{131, 1}, {}}, {{131, 509}, {}}},    // several chunks, column broadcast
  };
  return layouts;
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
