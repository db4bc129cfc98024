// Tests of the comparison, logical, bitwise and integer-capable ops (ne, le, ge, logical_and/or/xor/not,
// bitwise_and/or/xor/not, remainder, floor_divide, clamp, floor, ceil, round, trunc, sign, reciprocal,
// erf, and the arithmetic ops on integers and bool: add, sub, mul, div, maximum, minimum, neg, abs, the
// scalar forms): the device against the CPU reference for every dtype each op takes, over broadcasting,
// strided, 0-d and empty layouts of the elementwise tests (bit-exact where the arithmetic is exact);
// hand-worked values of PyTorch's semantics on both (Python's modulo and floor division with their signs,
// zero divisors and INT_MIN / -1, clamp with min > max and NaN bounds, sign of NaN, round half to even, NaN
// as true); every BAD_PARAM path with its message.
#include "elementwise_util.h"

#include <gmock/gmock.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace optest;
using mlu::TensorView;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

constexpr mluopDataType_t kF32 = MLUOP_DTYPE_FLOAT, kF16 = MLUOP_DTYPE_HALF, kBF16 = MLUOP_DTYPE_BFLOAT16,
                          kI8 = MLUOP_DTYPE_INT8, kI16 = MLUOP_DTYPE_INT16, kI32 = MLUOP_DTYPE_INT32,
                          kI64 = MLUOP_DTYPE_INT64, kU8 = MLUOP_DTYPE_UINT8, kBool = MLUOP_DTYPE_BOOL;
const std::vector<mluopDataType_t> kFloating = {kF32, kF16, kBF16};
const std::vector<mluopDataType_t> kIntegers = {kI8, kI16, kI32, kI64, kU8};
const std::vector<mluopDataType_t> kIntegersAndBool = {kI8, kI16, kI32, kI64, kU8, kBool};

std::string name(mluopDataType_t dtype) { return mluopGetNameOfDataType(dtype); }
std::string lastError() { return mluopGetLastErrorMessage(); }
bool isFloat(mluopDataType_t t) { return t == kF32 || t == kF16 || t == kBF16 || t == MLUOP_DTYPE_DOUBLE; }

std::vector<mluopDataType_t> join(std::vector<mluopDataType_t> a, const std::vector<mluopDataType_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// An op through the C API and through the reference, on (x, y) or (a, b, c).
struct UnaryOp {
  std::string name;
  std::vector<mluopDataType_t> dtypes;
  bool bool_output = false;  // y is bool whatever x is (logical_not)
  std::function<mluopStatus_t(mluopHandle_t, const Tensor&, const Tensor&)> device;
  std::function<mlu::Status(const TensorView&, const TensorView&)> reference;
};
struct BinaryOp {
  std::string name;
  std::vector<mluopDataType_t> dtypes;
  bool bool_output = false;  // c is bool (comparison and logical ops)
  std::function<mluopStatus_t(mluopHandle_t, const Tensor&, const Tensor&, const Tensor&)> device;
  std::function<mlu::Status(const TensorView&, const TensorView&, const TensorView&)> reference;
};

#define MATH_UNARY(op, Symbol, dtypes, bool_output)                                                        \
  UnaryOp {                                                                                                \
#op, dtypes, bool_output,                                                                                \
        [](mluopHandle_t h, const Tensor& x, const Tensor& y) { return Symbol(h, x.desc(), x.data(), y.desc(), y.data()); }, \
        [](const TensorView& x, const TensorView& y) {                                                       \
          mlu::op##_args a;                                                                                  \
          a.x = x;                                                                                           \
          a.y = y;                                                                                           \
          return mlu::reference::run(a);                                                                     \
        } \
  }
#define MATH_BINARY(op, Symbol, dtypes, bool_output)                                                       \
  BinaryOp {                                                                                               \
#op, dtypes, bool_output,                                                                                \
        [](mluopHandle_t h, const Tensor& a, const Tensor& b, const Tensor& c) {                            \
          return Symbol(h, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data());                      \
        },                                                                                                   \
        [](const TensorView& a, const TensorView& b, const TensorView& c) {                                  \
          mlu::op##_args args;                                                                               \
          args.a = a;                                                                                        \
          args.b = b;                                                                                        \
          args.c = c;                                                                                        \
          return mlu::reference::run(args);                                                                  \
        } \
  }

const std::vector<UnaryOp>& unaryOps() {
  static const std::vector<UnaryOp> ops = {
      MATH_UNARY(logical_not, mluopLogicalNot, join(kFloating, kIntegersAndBool), true),
      MATH_UNARY(bitwise_not, mluopBitwiseNot, kIntegersAndBool, false),
      MATH_UNARY(floor, mluopFloor, join(kFloating, kIntegers), false),
      MATH_UNARY(ceil, mluopCeil, join(kFloating, kIntegers), false),
      MATH_UNARY(round, mluopRound, join(kFloating, kIntegers), false),
      MATH_UNARY(trunc, mluopTrunc, join(kFloating, kIntegers), false),
      MATH_UNARY(sign, mluopSign, join(kFloating, kIntegersAndBool), false),
      MATH_UNARY(reciprocal, mluopReciprocal, kFloating, false),
      MATH_UNARY(erf, mluopErf, kFloating, false),
      // the arithmetic on integers and bool (floating dtypes: test_elementwise.cpp)
      MATH_UNARY(neg, mluopNeg, kIntegers, false),
      MATH_UNARY(abs, mluopAbs, kIntegersAndBool, false),
  };
  return ops;
}

const std::vector<BinaryOp>& binaryOps() {
  static const std::vector<BinaryOp> ops = {
      MATH_BINARY(ne, mluopNe, join(kFloating, kIntegersAndBool), true),
      MATH_BINARY(le, mluopLe, join(kFloating, kIntegersAndBool), true),
      MATH_BINARY(ge, mluopGe, join(kFloating, kIntegersAndBool), true),
      MATH_BINARY(logical_and, mluopLogicalAnd, join(kFloating, kIntegersAndBool), true),
      MATH_BINARY(logical_or, mluopLogicalOr, join(kFloating, kIntegersAndBool), true),
      MATH_BINARY(logical_xor, mluopLogicalXor, join(kFloating, kIntegersAndBool), true),
      MATH_BINARY(bitwise_and, mluopBitwiseAnd, kIntegersAndBool, false),
      MATH_BINARY(bitwise_or, mluopBitwiseOr, kIntegersAndBool, false),
      MATH_BINARY(bitwise_xor, mluopBitwiseXor, kIntegersAndBool, false),
      MATH_BINARY(remainder, mluopRemainder, join(kFloating, kIntegers), false),
      MATH_BINARY(floor_divide, mluopFloorDivide, join(kFloating, kIntegers), false),
      MATH_BINARY(sub, mluopSub, kIntegers, false),
      MATH_BINARY(mul, mluopMul, kIntegersAndBool, false),
      MATH_BINARY(maximum, mluopMaximum, kIntegersAndBool, false),
      MATH_BINARY(minimum, mluopMinimum, kIntegersAndBool, false),
  };
  return ops;
}

// Values of a dtype for the random comparisons: small integers (signed ones both signs, a few zeros and
// equal pairs, which the comparison and logical ops need), 0/1 for bool, floats in [-8, 8) with some
// halves (round's ties), zeros and integral values.
std::vector<double> valuesFor(mluopDataType_t dtype, std::int64_t n, std::uint32_t seed) {
  std::vector<double> v = randomValues(n, seed, -8.0, 8.0);
  for (std::size_t i = 0; i < v.size(); ++i) {
    double& x = v[i];
    if (dtype == kBool) {
      x = x > 0 ? 1 : 0;
    } else if (!isFloat(dtype)) {
      x = std::floor(x);
      if (dtype == kU8) x = std::fabs(x) * 7;
    } else if (i % 5 == 1) {
      x = std::floor(x) + 0.5;
    } else if (i % 7 == 3) {
      x = std::floor(x);
    }
    if (i % 11 == 4) x = 0;
  }
  return v;
}

// Whether the op's arithmetic is exact for this dtype (then device and reference must agree bit for bit).
bool exact(const std::string& op, mluopDataType_t dtype) {
  return !isFloat(dtype) || (op != "erf" && op != "floor_divide" && op != "remainder");
}

void compare(const std::string& op, mluopDataType_t dtype, const std::vector<double>& device,
             const std::vector<double>& reference, const std::string& what) {
  if (exact(op, dtype)) {
    expectSame(device, reference, what);
  } else {
    expectNear(device, reference, toleranceFor(dtype), what);
  }
}

TEST(MathOps, UnaryDeviceMatchesReference) {
  Handle handle;
  std::uint32_t seed = 10;
  for (const UnaryOp& op : unaryOps()) {
    for (const mluopDataType_t dtype : op.dtypes) {
      for (const Layout& l : unaryLayouts()) {
        const std::string what = op.name + " " + name(dtype) + " " + describe(l);
        const auto values = valuesFor(dtype, numel(l.dims), seed++);
        const mluopDataType_t out = op.bool_output ? kBool : dtype;
        Tensor x = deviceTensor(dtype, l, values), y = deviceTensor(out, l);
        ASSERT_EQ(op.device(handle, x, y), MLUOP_STATUS_SUCCESS) << what << ": " << lastError();
        handle.sync();
        Tensor hx = hostTensor(dtype, l, values), hy = hostTensor(out, l);
        const mlu::Status s = op.reference(hx.view(), hy.view());
        ASSERT_TRUE(s.ok()) << what << ": " << s.message;
        compare(op.name, dtype, y.values(), hy.values(), what);
      }
    }
  }
}

TEST(MathOps, BinaryDeviceMatchesReference) {
  Handle handle;
  std::uint32_t seed = 1000;
  for (const BinaryOp& op : binaryOps()) {
    for (const mluopDataType_t dtype : op.dtypes) {
      for (const BinaryLayouts& l : binaryLayouts()) {
        const std::string what = op.name + " " + name(dtype) + " a " + describe(l.a) + " b " + describe(l.b) +
                                 " c " + describe(l.c);
        const auto a_values = valuesFor(dtype, numel(l.a.dims), seed++);
        const auto b_values = valuesFor(dtype, numel(l.b.dims), seed++);
        const mluopDataType_t out = op.bool_output ? kBool : dtype;
        Tensor a = deviceTensor(dtype, l.a, a_values), b = deviceTensor(dtype, l.b, b_values);
        Tensor c = deviceTensor(out, l.c);
        ASSERT_EQ(op.device(handle, a, b, c), MLUOP_STATUS_SUCCESS) << what << ": " << lastError();
        handle.sync();
        Tensor ha = hostTensor(dtype, l.a, a_values), hb = hostTensor(dtype, l.b, b_values);
        Tensor hc = hostTensor(out, l.c);
        const mlu::Status s = op.reference(ha.view(), hb.view(), hc.view());
        ASSERT_TRUE(s.ok()) << what << ": " << s.message;
        compare(op.name, dtype, c.values(), hc.values(), what);
      }
    }
  }
}

// An op on hand-picked values, on the device and in the reference, against the expected values.
void expectUnary(const std::string& op_name, mluopDataType_t dtype, const std::vector<double>& x,
                 const std::vector<double>& expected) {
  const UnaryOp* op = nullptr;
  for (const UnaryOp& o : unaryOps())
    if (o.name == op_name) op = &o;
  ASSERT_NE(op, nullptr) << op_name;
  const std::string what = op_name + " " + name(dtype);
  const Dims dims{static_cast<std::int64_t>(x.size())};
  const mluopDataType_t out = op->bool_output ? kBool : dtype;
  Handle handle;
  Tensor dx = Tensor::device(dtype, dims, x), dy = Tensor::device(out, dims);
  ASSERT_EQ(op->device(handle, dx, dy), MLUOP_STATUS_SUCCESS) << what << ": " << lastError();
  handle.sync();
  Tensor hx = Tensor::host(dtype, dims, x), hy = Tensor::host(out, dims);
  ASSERT_TRUE(op->reference(hx.view(), hy.view()).ok()) << what;
  if (op_name == "erf") {
    expectNear(dy.values(), expected, {1e-6, 1e-6}, what + " device");
    expectSame(hy.values(), roundedTo(dtype, expected), what + " reference");  // float64 erf, rounded once
    return;
  }
  expectSame(dy.values(), expected, what + " device");
  expectSame(hy.values(), expected, what + " reference");
}

void expectBinary(const std::string& op_name, mluopDataType_t dtype, const std::vector<double>& a,
                  const std::vector<double>& b, const std::vector<double>& expected) {
  const BinaryOp* op = nullptr;
  for (const BinaryOp& o : binaryOps())
    if (o.name == op_name) op = &o;
  ASSERT_NE(op, nullptr) << op_name;
  const std::string what = op_name + " " + name(dtype);
  const Dims dims{static_cast<std::int64_t>(a.size())};
  const mluopDataType_t out = op->bool_output ? kBool : dtype;
  Handle handle;
  Tensor da = Tensor::device(dtype, dims, a), db = Tensor::device(dtype, dims, b),
         dc = Tensor::device(out, dims);
  ASSERT_EQ(op->device(handle, da, db, dc), MLUOP_STATUS_SUCCESS) << what << ": " << lastError();
  handle.sync();
  Tensor ha = Tensor::host(dtype, dims, a), hb = Tensor::host(dtype, dims, b), hc = Tensor::host(out, dims);
  ASSERT_TRUE(op->reference(ha.view(), hb.view(), hc.view()).ok()) << what;
  expectSame(dc.values(), expected, what + " device");
  expectSame(hc.values(), expected, what + " reference");
}

// Python's modulo and floor division: the remainder takes the divisor's sign, the quotient rounds toward
// -inf; a float divisor of 0 gives NaN / ±inf, an integer one 0 (PyTorch raises); INT_MIN / -1 wraps.
TEST(MathOps, RemainderAndFloorDivideAreFloorBased) {
  const std::vector<double> a = {5, -5, 5, -5, 7.5, -7.5, 0, 3};
  const std::vector<double> b = {3, 3, -3, -3, 2, 2, 2, 0};
  for (const mluopDataType_t dtype : kFloating) {
    expectBinary("remainder", dtype, a, b, {2, 1, -1, -2, 1.5, 0.5, 0, kNaN});
    expectBinary("floor_divide", dtype, a, b, {1, -2, -2, 1, 3, -4, 0, kInf});
  }
  // a zero quotient keeps the sign of a / b; 0 / 0 is NaN
  expectBinary("floor_divide", kF32, {0, 0, 1, -1, 0}, {-3, 3, -5, -5, 0}, {-0.0, 0, -1, 0, kNaN});
  for (const mluopDataType_t dtype : {kI8, kI16, kI32, kI64}) {
    expectBinary("remainder", dtype, {5, -5, 5, -5, 7, 9}, {3, 3, -3, -3, 0, -1}, {2, 1, -1, -2, 0, 0});
    expectBinary("floor_divide", dtype, {5, -5, 5, -5, 7, -7}, {3, 3, -3, -3, 0, 2}, {1, -2, -2, 1, 0, -4});
  }
  expectBinary("floor_divide", kI8, {-128, 127}, {-1, -1}, {-128, -127});  // INT_MIN / -1 wraps
  expectBinary("remainder", kI8, {-128}, {-1}, {0});
  expectBinary("remainder", kU8, {200, 7, 9}, {7, 0, 3}, {4, 0, 0});
  expectBinary("floor_divide", kU8, {200, 7}, {7, 0}, {28, 0});
}

TEST(MathOps, ComparisonsAndLogicalOpsTreatNanAsPyTorchDoes) {
  const std::vector<double> a = {1, kNaN, kNaN, kInf, -0.0, 2};
  const std::vector<double> b = {1, kNaN, 1, kInf, 0, 3};
  expectBinary("ne", kF32, a, b, {0, 1, 1, 0, 0, 1});
  expectBinary("le", kF32, a, b, {1, 0, 0, 1, 1, 1});
  expectBinary("ge", kF32, a, b, {1, 0, 0, 1, 1, 0});
  // NaN is true (nonzero)
  expectBinary("logical_and", kF32, {kNaN, 0, 2, 0}, {1, 1, -0.0, 0}, {1, 0, 0, 0});
  expectBinary("logical_or", kBF16, {kNaN, 0, 0, 0}, {0, 1, -0.0, 0}, {1, 1, 0, 0});
  expectBinary("logical_xor", kI32, {3, 0, -1, 0}, {0, 5, -1, 0}, {1, 1, 0, 0});
  expectUnary("logical_not", kF16, {0, -0.0, kNaN, 0.5}, {1, 1, 0, 0});
  expectUnary("logical_not", kU8, {0, 255}, {1, 0});
  expectBinary("ge", kI64, {-5, 5, 4}, {-4, 5, -4}, {0, 1, 1});
}

TEST(MathOps, BitwiseOpsOnIntegersAndBool) {
  expectBinary("bitwise_and", kI8, {0x0F, -1, -128}, {0x3C, 0x55, 127}, {0x0C, 0x55, 0});
  expectBinary("bitwise_or", kI16, {0x0F, -32768}, {0x3C, 1}, {0x3F, -32767});
  expectBinary("bitwise_xor", kU8, {0x0F, 255}, {0x3C, 1}, {0x33, 254});
  expectBinary("bitwise_and", kBool, {1, 1, 0}, {1, 0, 0}, {1, 0, 0});
  expectBinary("bitwise_xor", kBool, {1, 1, 0}, {1, 0, 0}, {0, 1, 0});
  expectUnary("bitwise_not", kI32, {0, -1, 5}, {-1, 0, -6});
  expectUnary("bitwise_not", kU8, {0, 255, 5}, {255, 0, 250});
  expectUnary("bitwise_not", kBool, {1, 0}, {0, 1});
  expectUnary("bitwise_not", kI64, {1234567}, {-1234568});
}

TEST(MathOps, RoundingSignReciprocalAndErf) {
  const std::vector<double> x = {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4, -0.0, kInf, kNaN};
  expectUnary("round", kF32, x, {-2, -2, -0.0, 0, 2, 2, 2, -0.0, kInf, kNaN});  // half to even
  expectUnary("floor", kF32, x, {-3, -2, -1, 0, 1, 2, 2, -0.0, kInf, kNaN});
  expectUnary("ceil", kF32, x, {-2, -1, -0.0, 1, 2, 3, 3, -0.0, kInf, kNaN});
  expectUnary("trunc", kBF16, x, {-2, -1, -0.0, 0, 1, 2, 2, -0.0, kInf, kNaN});
  expectUnary("sign", kF32, {-2.5, -0.0, 0, 3, kInf, -kInf, kNaN}, {-1, 0, 0, 1, 1, -1, 0});  // NaN -> 0
  expectUnary("sign", kI8, {-128, 0, 127}, {-1, 0, 1});
  expectUnary("sign", kU8, {0, 200}, {0, 1});
  expectUnary("sign", kBool, {0, 1}, {0, 1});
  for (const mluopDataType_t dtype : kIntegers) expectUnary("round", dtype, {0, 3, 100}, {0, 3, 100});
  expectUnary("reciprocal", kF32, {0, -0.0, 2, -4, kInf}, {kInf, -kInf, 0.5, -0.25, 0});
  expectUnary("erf", kF32, {0, 1, -0.5, kInf, -kInf}, {0, std::erf(1.0), std::erf(-0.5), 1, -1});
}

// clamp(x, min, max) = min(max(x, min), max): with min > max every value is max; a NaN x stays NaN, a NaN
// bound makes every value NaN; either bound may be left out; integer tensors take whole-number bounds.
TEST(MathOps, ClampFollowsPyTorch) {
  Handle handle;
  const auto run = [&](mluopDataType_t dtype, const std::vector<double>& x, bool has_min, double min,
                       bool has_max, double max, const std::vector<double>& expected) {
    const std::string what =
        "clamp " + name(dtype) + " min " + std::to_string(min) + " max " + std::to_string(max);
    const Dims dims{static_cast<std::int64_t>(x.size())};
    Tensor dx = Tensor::device(dtype, dims, x), dy = Tensor::device(dtype, dims);
    ASSERT_EQ(mluopClamp(handle, has_min, min, has_max, max, dx.desc(), dx.data(), dy.desc(), dy.data()),
              MLUOP_STATUS_SUCCESS)
        << what << ": " << lastError();
    handle.sync();
    Tensor hx = Tensor::host(dtype, dims, x), hy = Tensor::host(dtype, dims);
    mlu::clamp_args a;
    a.has_min = has_min;
    a.min = min;
    a.has_max = has_max;
    a.max = max;
    a.x = hx.view();
    a.y = hy.view();
    ASSERT_TRUE(mlu::reference::run(a).ok()) << what;
    expectSame(dy.values(), expected, what + " device");
    expectSame(hy.values(), expected, what + " reference");
  };
  const std::vector<double> x = {-3, 0.5, 2, 7, kNaN};
  run(kF32, x, true, 0, true, 5, {0, 0.5, 2, 5, kNaN});
  run(kF32, x, true, 4, true, 2, {2, 2, 2, 2, kNaN});  // min > max: max
  run(kF16, x, true, 1, false, 0, {1, 1, 2, 7, kNaN});
  run(kBF16, x, false, 0, true, -1, {-3, -1, -1, -1, kNaN});
  run(kF32, x, true, kNaN, true, 5, {kNaN, kNaN, kNaN, kNaN, kNaN});
  run(kI32, {-3, 0, 2, 7}, true, 0, true, 5, {0, 0, 2, 5});
  run(kU8, {0, 100, 255}, true, 10, true, 200, {10, 100, 200});
  run(kI8, {-128, 127}, true, -128, true, 127, {-128, 127});
}

// Integer arithmetic wraps modulo 2^bits (two's complement), as PyTorch's kernels; on bool add is or, mul
// and maximum are and/or; comparisons of integers are exact (no float32 rounding: 2^24 + 1 > 2^24).
TEST(MathOps, IntegerArithmeticWrapsAsPyTorch) {
  expectBinary("sub", kI8, {-128, 127, 5}, {1, -1, 7}, {127, -128, -2});
  expectBinary("sub", kU8, {0, 5}, {1, 7}, {255, 254});
  expectBinary("mul", kI8, {64, -128, 16, -3}, {2, -1, 16, 5}, {-128, -128, 0, -15});
  expectBinary("mul", kU8, {200, 16}, {2, 16}, {144, 0});
  expectBinary("mul", kI32, {65536, -7}, {65536, 3}, {0, -21});
  expectBinary("mul", kBool, {1, 1, 0}, {1, 0, 0}, {1, 0, 0});
  expectBinary("maximum", kI32, {16777217, -5}, {16777216, -4}, {16777217, -4});
  expectBinary("minimum", kI64, {-9007199254740992.0, 3}, {5, 3}, {-9007199254740992.0, 3});
  expectBinary("maximum", kBool, {1, 1, 0}, {1, 0, 0}, {1, 1, 0});
  expectBinary("minimum", kBool, {1, 1, 0}, {1, 0, 0}, {1, 0, 0});
  expectUnary("neg", kI8, {-128, 5, 0}, {-128, -5, 0});
  expectUnary("neg", kU8, {1, 0, 255}, {255, 0, 1});
  expectUnary("abs", kI16, {-32768, -3, 4}, {-32768, 3, 4});
  expectUnary("abs", kI64, {-9223372036854775808.0, -1}, {-9223372036854775808.0, 1});
  expectUnary("abs", kU8, {200, 0}, {200, 0});
  expectUnary("abs", kBool, {1, 0}, {1, 0});
}

// add's alpha and the scalar forms on integer and bool tensors (whole numbers, converted to the dtype),
// and true division of integers into a floating result.
TEST(MathOps, IntegerAddScalarFormsAndTrueDivision) {
  Handle handle;
  const auto add = [&](mluopDataType_t dtype, float alpha, const std::vector<double>& a,
                       const std::vector<double>& b, const std::vector<double>& expected) {
    const std::string what = "add " + name(dtype) + " alpha " + std::to_string(alpha);
    const Dims dims{static_cast<std::int64_t>(a.size())};
    Tensor da = Tensor::device(dtype, dims, a), db = Tensor::device(dtype, dims, b),
           dc = Tensor::device(dtype, dims);
    ASSERT_EQ(mluopAdd(handle, alpha, da.desc(), da.data(), db.desc(), db.data(), dc.desc(), dc.data()),
              MLUOP_STATUS_SUCCESS)
        << what << ": " << lastError();
    handle.sync();
    Tensor ha = Tensor::host(dtype, dims, a), hb = Tensor::host(dtype, dims, b),
           hc = Tensor::host(dtype, dims);
    mlu::add_args args;
    args.alpha = alpha;
    args.a = ha.view();
    args.b = hb.view();
    args.c = hc.view();
    ASSERT_TRUE(mlu::reference::run(args).ok()) << what;
    expectSame(dc.values(), expected, what + " device");
    expectSame(hc.values(), expected, what + " reference");
  };
  add(kI8, 1, {100, -100}, {100, -100}, {-56, 56});
  add(kI32, 2, {1, -2147483647}, {3, -1}, {7, 2147483647});
  add(kU8, 3, {5, 200}, {100, 20}, {49, 4});  // 305 and 260 wrap
  add(kBool, 1, {1, 0, 0}, {0, 1, 0}, {1, 1, 0});
  add(kBool, 0, {1, 0}, {1, 1}, {1, 0});

  const auto scalar = [&](bool mul, mluopDataType_t dtype, double value, const std::vector<double>& x,
                          const std::vector<double>& expected) {
    const std::string what = std::string(mul ? "mul_scalar " : "add_scalar ") + name(dtype);
    const Dims dims{static_cast<std::int64_t>(x.size())};
    Tensor dx = Tensor::device(dtype, dims, x), dy = Tensor::device(dtype, dims);
    const auto fn = mul ? mluopMulScalar : mluopAddScalar;
    ASSERT_EQ(fn(handle, dx.desc(), dx.data(), value, dy.desc(), dy.data()), MLUOP_STATUS_SUCCESS)
        << what << ": " << lastError();
    handle.sync();
    Tensor hx = Tensor::host(dtype, dims, x), hy = Tensor::host(dtype, dims);
    mlu::Status status;
    if (mul) {
      mlu::mul_scalar_args a;
      a.value = value;
      a.x = hx.view();
      a.y = hy.view();
      status = mlu::reference::run(a);
    } else {
      mlu::add_scalar_args a;
      a.value = value;
      a.x = hx.view();
      a.y = hy.view();
      status = mlu::reference::run(a);
    }
    ASSERT_TRUE(status.ok()) << what << ": " << status.message;
    expectSame(dy.values(), expected, what + " device");
    expectSame(hy.values(), expected, what + " reference");
  };
  scalar(false, kI16, 1, {32767, -1}, {-32768, 0});
  scalar(false, kU8, 255, {1, 0}, {0, 255});
  scalar(true, kI32, -3, {5, -715827883}, {-15, -2147483647});
  scalar(true, kI64, 4294967296.0, {4294967296.0, -3}, {0, -12884901888.0});  // 2^64 wraps to 0

  // int / int is true division into a floating c (x / 0 = ±inf, 0 / 0 = NaN)
  for (const auto& [in, out] : std::vector<std::pair<mluopDataType_t, mluopDataType_t>>{
           {kI32, kF32}, {kI64, kF32}, {kU8, kF16}, {kBool, kF32}, {kI8, kBF16}}) {
    const std::string what = "div " + name(in) + " -> " + name(out);
    const bool unsigned_in = in == kU8 || in == kBool;
    const std::vector<double> a =
        unsigned_in ? std::vector<double>{1, 0, 1, 1} : std::vector<double>{7, 0, -7, 1};
    const std::vector<double> b =
        unsigned_in ? std::vector<double>{1, 0, 0, 1} : std::vector<double>{2, 0, 0, -4};
    const std::vector<double> expected =
        unsigned_in ? std::vector<double>{1, kNaN, kInf, 1} : std::vector<double>{3.5, kNaN, -kInf, -0.25};
    Tensor da = Tensor::device(in, {4}, a), db = Tensor::device(in, {4}, b), dc = Tensor::device(out, {4});
    ASSERT_EQ(mluopDiv(handle, da.desc(), da.data(), db.desc(), db.data(), dc.desc(), dc.data()),
              MLUOP_STATUS_SUCCESS)
        << what << ": " << lastError();
    handle.sync();
    Tensor ha = Tensor::host(in, {4}, a), hb = Tensor::host(in, {4}, b), hc = Tensor::host(out, {4});
    mlu::div_args args;
    args.a = ha.view();
    args.b = hb.view();
    args.c = hc.view();
    ASSERT_TRUE(mlu::reference::run(args).ok()) << what;
    expectSame(dc.values(), expected, what + " device");
    expectSame(hc.values(), expected, what + " reference");
  }
}

TEST(MathOps, BadParams) {
  Handle handle;
  Tensor f = Tensor::device(kF32, {3}), f2 = Tensor::device(kF32, {3}), i = Tensor::device(kI32, {3}),
         b = Tensor::device(kBool, {3}), b2 = Tensor::device(kBool, {3}), wrong = Tensor::device(kF32, {4});
  expectBadParam(mluopBitwiseAnd(handle, f.desc(), f.data(), f.desc(), f.data(), f2.desc(), f2.data()),
                 "bitwise_and: a is float32; bitwise ops take integer or bool tensors");
  expectBadParam(mluopBitwiseNot(handle, f.desc(), f.data(), f2.desc(), f2.data()),
                 "bitwise_not: x is float32; bitwise ops take integer or bool tensors");
  expectBadParam(mluopRemainder(handle, b.desc(), b.data(), b.desc(), b.data(), b2.desc(), b2.data()),
                 "remainder: a is bool; the op takes floating and integer tensors, not bool");
  expectBadParam(mluopFloorDivide(handle, f.desc(), f.data(), i.desc(), i.data(), f2.desc(), f2.data()),
                 "floor_divide: b is int32 but a is float32; they must have the same dtype");
  expectBadParam(mluopFloor(handle, f.desc(), f.data(), wrong.desc(), wrong.data()),
                 "floor: y has shape [4] but x has shape [3]; they must be equal");
  expectBadParam(mluopClamp(handle, false, 0, false, 0, f.desc(), f.data(), f2.desc(), f2.data()),
                 "clamp: neither min nor max is given; clamp needs at least one");
  Tensor i2 = Tensor::device(kI32, {3}), u = Tensor::device(kU8, {3}), u2 = Tensor::device(kU8, {3});
  expectBadParam(mluopClamp(handle, true, 0.5, false, 0, i.desc(), i.data(), i2.desc(), i2.data()),
                 "clamp: min = 0.5 is not a whole number in int32's range");
  expectBadParam(mluopClamp(handle, false, 0, true, 300, u.desc(), u.data(), u2.desc(), u2.data()),
                 "clamp: max = 300 is not a whole number in uint8's range [0, 255]");
  expectBadParam(mluopLogicalNot(handle, f.desc(), f.data(), f2.desc(), f2.data()),
                 "logical_not: y is float32; expected bool");
  expectBadParam(mluopNe(handle, f.desc(), f.data(), f2.desc(), f2.data(), f2.desc(), f2.data()),
                 "ne: c is float32; expected bool");
  expectError(mluopErf(handle, i.desc(), i.data(), i2.desc(), i2.data()), MLUOP_STATUS_NOT_SUPPORTED,
              "erf: x is int32, which is not supported");
  expectError(mluopReciprocal(handle, i.desc(), i.data(), i2.desc(), i2.data()), MLUOP_STATUS_NOT_SUPPORTED,
              "reciprocal: x is int32, which is not supported");
  // the arithmetic on integers and bool: what PyTorch refuses, or would promote to a floating result
  expectBadParam(mluopSub(handle, b.desc(), b.data(), b.desc(), b.data(), b2.desc(), b2.data()),
                 "sub: a is bool; the op takes floating and integer tensors, not bool");
  expectBadParam(mluopNeg(handle, b.desc(), b.data(), b2.desc(), b2.data()),
                 "neg: x is bool; the op takes floating and integer tensors, not bool");
  expectBadParam(mluopAdd(handle, 0.5f, i.desc(), i.data(), i.desc(), i.data(), i2.desc(), i2.data()),
                 "add: alpha = 0.5 is not a whole number in int32's range");
  expectBadParam(mluopAdd(handle, 0.5f, b.desc(), b.data(), b.desc(), b.data(), b2.desc(), b2.data()),
                 "add: alpha = 0.5 is not a whole number (a bool tensor takes whole-number scalars)");
  // PyTorch converts alpha to the dtype with an overflow check: -1 is refused for uint8
  expectBadParam(mluopAdd(handle, -1.0f, u.desc(), u.data(), u.desc(), u.data(), u2.desc(), u2.data()),
                 "add: alpha = -1 is not a whole number in uint8's range [0, 255]");
  expectBadParam(mluopAddScalar(handle, u.desc(), u.data(), 256, u2.desc(), u2.data()),
                 "add_scalar: value = 256 is not a whole number in uint8's range [0, 255]");
  expectBadParam(mluopMulScalar(handle, i.desc(), i.data(), 1.5, i2.desc(), i2.data()),
                 "mul_scalar: value = 1.5 is not a whole number in int32's range");
  expectBadParam(mluopMulScalar(handle, b.desc(), b.data(), 2, b2.desc(), b2.data()),
                 "mul_scalar: x is bool; the op takes floating and integer tensors, not bool");
  expectBadParam(mluopDiv(handle, i.desc(), i.data(), i.desc(), i.data(), i2.desc(), i2.data()),
                 "div: c is int32; dividing int32 tensors gives a floating result (true division)");
  expectBadParam(mluopDiv(handle, f.desc(), f.data(), f.desc(), f.data(), i2.desc(), i2.data()),
                 "div: c is int32 but a is float32; they must have the same dtype");
  expectBadParam(mluopMaximum(handle, i.desc(), i.data(), u.desc(), u.data(), i2.desc(), i2.data()),
                 "maximum: b is uint8 but a is int32; they must have the same dtype");
  // float64 is the reference's only
  Tensor d = Tensor::device(MLUOP_DTYPE_DOUBLE, {3}), d2 = Tensor::device(MLUOP_DTYPE_DOUBLE, {3});
  EXPECT_EQ(mluopRemainder(handle, d.desc(), d.data(), d.desc(), d.data(), d2.desc(), d2.data()),
            MLUOP_STATUS_NOT_SUPPORTED);
}

// In place: c = a op b written over a (one buffer), for the integer and the floating paths.
TEST(MathOps, InPlaceOutputIsTheFirstInput) {
  Handle handle;
  Tensor a = Tensor::device(kI32, {4}, {7, -7, 8, -9}), b = Tensor::device(kI32, {4}, {2, 2, -3, 4});
  ASSERT_EQ(mluopFloorDivide(handle, a.desc(), a.data(), b.desc(), b.data(), a.desc(), a.data()),
            MLUOP_STATUS_SUCCESS)
      << lastError();
  Tensor x = Tensor::device(kF16, {3}, {-1.5, 0.5, 2.5});
  ASSERT_EQ(mluopRound(handle, x.desc(), x.data(), x.desc(), x.data()), MLUOP_STATUS_SUCCESS) << lastError();
  handle.sync();
  expectSame(a.values(), {3, -4, -3, -3});
  expectSame(x.values(), {-2, 0, 2});
}

}  // namespace
