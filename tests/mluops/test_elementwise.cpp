// Tests of the elementwise op family: fill, copy/cast, permute, broadcasting binary ops (pow too), scalar
// and unary ops with their backward (gelu, silu, sin, cos, pow_scalar too), the Philox random ops (dropout,
// uniform, normal) and sgd_step. For every op: the device against the CPU reference for
// float32/float16/bfloat16 over shapes with size 0, odd sizes, broadcasting and non-contiguous views; the
// reference against hand-worked values; backward ops against central finite differences of their forward in
// float64; each BAD_PARAM path with its message; and float64 refused by the device.
#include "elementwise_util.h"
#include "op_harness.h"

#include "../../runtime/ops/philox.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <ostream>
#include <string>
#include <vector>

namespace {

using namespace optest;
using mlu::TensorView;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

const std::vector<mluopDataType_t> kFloatTypes = {MLUOP_DTYPE_FLOAT, MLUOP_DTYPE_HALF, MLUOP_DTYPE_BFLOAT16};
// Every dtype the device takes.
const std::vector<mluopDataType_t> kDeviceTypes = {MLUOP_DTYPE_FLOAT, MLUOP_DTYPE_HALF,  MLUOP_DTYPE_BFLOAT16,
                                                   MLUOP_DTYPE_INT8,  MLUOP_DTYPE_INT16, MLUOP_DTYPE_INT32,
                                                   MLUOP_DTYPE_INT64, MLUOP_DTYPE_UINT8, MLUOP_DTYPE_BOOL};

std::string name(mluopDataType_t dtype) { return mluopGetNameOfDataType(dtype); }
std::string lastError() { return mluopGetLastErrorMessage(); }

// ---------------------------------------------------------------------------------------------------------
// Philox
// ---------------------------------------------------------------------------------------------------------

TEST(Philox, KnownAnswerVectors) {
  // Random123's kat_vectors for philox4x32 with 10 rounds: counter, key -> output.
  EXPECT_EQ(mlu::philox::philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (mlu::philox::Counter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(
      mlu::philox::philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
      (mlu::philox::Counter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(
      mlu::philox::philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
      (mlu::philox::Counter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, SeedAndOffsetMapping) {
  // key = (seed low, seed high), counter = (block low, block high, 0, 0).
  EXPECT_EQ(mlu::philox::block(0x1122334455667788ull, 0xaabbccdd00000001ull),
            mlu::philox::philox4x32_10({0x00000001, 0xaabbccdd, 0, 0}, {0x55667788, 0x11223344}));
  EXPECT_EQ(mlu::philox::uniformOf(0xffffffffu), 1.0 - 0x1p-24);
  EXPECT_EQ(mlu::philox::uniformOf(0x000000ffu), 0.0);
  EXPECT_EQ(mlu::philox::boxMullerU1(0xffffffffu), 1.0);
  EXPECT_EQ(mlu::philox::boxMullerU1(0u), 0x1p-24);
}

// ---------------------------------------------------------------------------------------------------------
// Unary ops (and the scalar forms), parameterized over the op
// ---------------------------------------------------------------------------------------------------------

using UnaryFn = std::function<mluopStatus_t(mluopHandle_t, mluopTensorDescriptor_t, const void*,
                                            mluopTensorDescriptor_t, void*)>;
using UnaryRef = std::function<mlu::Status(const TensorView&, const TensorView&)>;

template <typename Args>
mlu::Status referenceUnary(const TensorView& x, const TensorView& y) {
  Args args;
  args.x = x;
  args.y = y;
  return mlu::reference::run(args);
}

UnaryRef referenceGelu(bool approximate_tanh) {
  return [approximate_tanh](const TensorView& x, const TensorView& y) {
    mlu::gelu_args args;
    args.approximate_tanh = approximate_tanh;
    args.x = x;
    args.y = y;
    return mlu::reference::run(args);
  };
}

UnaryFn powScalar(double exponent) {
  return [exponent](mluopHandle_t h, mluopTensorDescriptor_t xd, const void* x, mluopTensorDescriptor_t yd,
                    void* y) { return mluopPowScalar(h, xd, x, exponent, yd, y); };
}

UnaryRef referencePowScalar(double exponent) {
  return [exponent](const TensorView& x, const TensorView& y) {
    mlu::pow_scalar_args args;
    args.x = x;
    args.exponent = exponent;
    args.y = y;
    return mlu::reference::run(args);
  };
}

// The ops of this file that take integer tensors too (tested on them in test_math.cpp).
bool takesIntegers(const std::string& op) {
  for (const char* name :
       {"neg", "abs", "add_scalar", "mul_scalar", "add", "sub", "mul", "div", "maximum", "minimum"}) {
    if (op == name) return true;
  }
  return false;
}

struct UnaryCase {
  std::string name;
  UnaryFn device;
  UnaryRef reference;
  double lo, hi;                       // range of the random inputs
  std::vector<double> hand_x, hand_y;  // hand-worked values
  std::string op = {};                 // the op's name in messages, when it is not the case's name

  const std::string& opName() const { return op.empty() ? name : op; }
};
void PrintTo(const UnaryCase& c, std::ostream* os) { *os << c.name; }

std::vector<UnaryCase> unaryCases() {
  const double e = std::numbers::e;
  return {
      {"neg", mluopNeg, referenceUnary<mlu::neg_args>, -3, 3, {1.5, -2, 0}, {-1.5, 2, 0}},
      {"abs", mluopAbs, referenceUnary<mlu::abs_args>, -3, 3, {-1.5, 2, -0.25}, {1.5, 2, 0.25}},
      {"exp",
       mluopExp,
       referenceUnary<mlu::exp_args>,
       -3,
       3,
       {0, 1, -1, 2},
       {1, 2.718281828459045, 0.36787944117144233, 7.38905609893065}},
      {"log",
       mluopLog,
       referenceUnary<mlu::log_args>,
       0.05,
       5,
       {1, e, 0.5, 10},
       {0, 1, -0.6931471805599453, 2.302585092994046}},
      {"sqrt",
       mluopSqrt,
       referenceUnary<mlu::sqrt_args>,
       0.05,
       5,
       {4, 2, 0.25, 0},
       {2, 1.4142135623730951, 0.5, 0}},
      {"rsqrt",
       mluopRsqrt,
       referenceUnary<mlu::rsqrt_args>,
       0.05,
       5,
       {4, 0.25, 2},
       {0.5, 2, 0.7071067811865475}},
      {"tanh",
       mluopTanh,
       referenceUnary<mlu::tanh_args>,
       -3,
       3,
       {0, 1, -0.5, 3},
       {0, 0.7615941559557649, -0.46211715726000974, 0.9950547536867305}},
      {"sigmoid",
       mluopSigmoid,
       referenceUnary<mlu::sigmoid_args>,
       -6,
       6,
       {0, 2, -1},
       {0.5, 0.8807970779778823, 0.2689414213699951}},
      {"relu", mluopRelu, referenceUnary<mlu::relu_args>, -3, 3, {-1, 0, 2.5, kNaN}, {0, 0, 2.5, kNaN}},
      {"add_scalar",
       [](mluopHandle_t h, mluopTensorDescriptor_t xd, const void* x, mluopTensorDescriptor_t yd, void* y) {
         return mluopAddScalar(h, xd, x, 2.5, yd, y);
       },
       [](const TensorView& x, const TensorView& y) {
         mlu::add_scalar_args args;
         args.x = x;
         args.value = 2.5;
         args.y = y;
         return mlu::reference::run(args);
       },
       -3,
       3,
       {1, -3},
       {3.5, -0.5}},
      {"mul_scalar",
       [](mluopHandle_t h, mluopTensorDescriptor_t xd, const void* x, mluopTensorDescriptor_t yd, void* y) {
         return mluopMulScalar(h, xd, x, -2.0, yd, y);
       },
       [](const TensorView& x, const TensorView& y) {
         mlu::mul_scalar_args args;
         args.x = x;
         args.value = -2.0;
         args.y = y;
         return mlu::reference::run(args);
       },
       -3,
       3,
       {1.5, -3},
       {-3, 6}},
      {"gelu",
       [](mluopHandle_t h, mluopTensorDescriptor_t xd, const void* x, mluopTensorDescriptor_t yd, void* y) {
         return mluopGelu(h, false, xd, x, yd, y);
       },
       referenceGelu(false),
       -4,
       4,
       {0, 1, -1, 2.5},
       {0, 0.8413447460685429, -0.15865525393145707, 2.4844758366855597}},
      {"gelu_tanh",
       [](mluopHandle_t h, mluopTensorDescriptor_t xd, const void* x, mluopTensorDescriptor_t yd, void* y) {
         return mluopGelu(h, true, xd, x, yd, y);
       },
       referenceGelu(true),
       -4,
       4,
       {0, 1, -1, 2.5},
       {0, 0.8411919906082768, -0.15880800939172324, 2.484915733910001},
       "gelu"},
      {"silu",
       mluopSilu,
       referenceUnary<mlu::silu_args>,
       -6,
       6,
       {0, 1, -1, 2.5},
       {0, 0.7310585786300049, -0.2689414213699951, 2.3103545499468914}},
      // MobileNetV3's: clamp(x + 3, 0, 6) / 6 and x times it.
      {"hardsigmoid",
       mluopHardsigmoid,
       referenceUnary<mlu::hardsigmoid_args>,
       -5,
       5,
       {0, 1, -4, 3.5, -1.5},
       {0.5, 0.6666666666666666, 0, 1, 0.25}},
      {"hardswish",
       mluopHardswish,
       referenceUnary<mlu::hardswish_args>,
       -5,
       5,
       {0, 1, -4, 3.5, -1.5},
       {0, 0.6666666666666666, 0, 3.5, -0.375}},
      {"sin",
       mluopSin,
       referenceUnary<mlu::sin_args>,
       -10,
       10,
       {0, 1, -1, 2.5, std::numbers::pi / 6},
       {0, 0.8414709848078965, -0.8414709848078965, 0.5984721441039565, 0.5}},
      {"cos",
       mluopCos,
       referenceUnary<mlu::cos_args>,
       -10,
       10,
       {0, 1, -1, 2.5, std::numbers::pi / 3},
       {1, 0.5403023058681398, 0.5403023058681398, -0.8011436155469337, 0.5}},
      // pow_scalar: the squaring path, a negative base with an integer exponent, and a fractional one
      // (NaN for a negative base, 0 ** 0.5 = 0).
      {"pow_scalar_square",
       powScalar(2.0),
       referencePowScalar(2.0),
       -3,
       3,
       {3, -1.5, 0},
       {9, 2.25, 0},
       "pow_scalar"},
      {"pow_scalar_cube",
       powScalar(3.0),
       referencePowScalar(3.0),
       -3,
       3,
       {2, -1.5, 0},
       {8, -3.375, 0},
       "pow_scalar"},
      {"pow_scalar_sqrt",
       powScalar(0.5),
       referencePowScalar(0.5),
       0.05,
       5,
       {4, 0.25, 0, -1},
       {2, 0.5, 0, kNaN},
       "pow_scalar"},
      {"pow_scalar_negative",
       powScalar(-1.5),
       referencePowScalar(-1.5),
       0.1,
       5,
       {4, 0.25, 0, -4},
       {0.125, 8, kInf, kNaN},
       "pow_scalar"},
      {"pow_scalar_zero",
       powScalar(0.0),
       referencePowScalar(0.0),
       -3,
       3,
       {2, 0, -5, kNaN},
       {1, 1, 1, 1},
       "pow_scalar"},
  };
}

class UnaryOpTest : public ::testing::TestWithParam<UnaryCase> {};

TEST_P(UnaryOpTest, DeviceMatchesReference) {
  const UnaryCase& op = GetParam();
  Handle handle;
  for (mluopDataType_t dtype : kFloatTypes) {
    for (const Layout& layout : unaryLayouts()) {
      // The output contiguous, and for 2-d inputs also transposed.
      std::vector<Layout> outputs = {{layout.dims, {}}};
      if (layout.dims.size() == 2 && !isLarge(layout))
        outputs.push_back(transposed(layout.dims[0], layout.dims[1]));
      for (const Layout& out : outputs) {
        const std::string what =
            op.name + " " + name(dtype) + " x " + describe(layout) + " y " + describe(out);
        const auto values = randomValues(numel(layout.dims), 7, op.lo, op.hi);
        Tensor x = deviceTensor(dtype, layout, values), y = deviceTensor(dtype, out);
        ASSERT_EQ(op.device(handle, x.desc(), x.data(), y.desc(), y.data()), MLUOP_STATUS_SUCCESS)
            << what << ": " << lastError();
        handle.sync();
        Tensor hx = hostTensor(dtype, layout, values), hy = hostTensor(dtype, out);
        const mlu::Status s = op.reference(hx.view(), hy.view());
        ASSERT_TRUE(s.ok()) << what << ": " << s.message;
        expectNear(y.values(), hy.values(), toleranceFor(dtype), what);
      }
    }
  }
}

TEST_P(UnaryOpTest, InPlace) {
  const UnaryCase& op = GetParam();
  Handle handle;
  const auto values = randomValues(91, 3, op.lo, op.hi);
  Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {7, 13}, values);
  ASSERT_EQ(op.device(handle, x.desc(), x.data(), x.desc(), x.data()), MLUOP_STATUS_SUCCESS) << lastError();
  handle.sync();
  Tensor hx = Tensor::host(MLUOP_DTYPE_FLOAT, {7, 13}, values), hy = hostLike(hx);
  ASSERT_TRUE(op.reference(hx.view(), hy.view()).ok());
  expectNear(x.values(), hy.values(), toleranceFor(MLUOP_DTYPE_FLOAT), op.name);
}

TEST_P(UnaryOpTest, ReferenceMatchesHandWorkedValues) {
  const UnaryCase& op = GetParam();
  const Dims dims = {static_cast<std::int64_t>(op.hand_x.size())};
  Tensor x = Tensor::host(MLUOP_DTYPE_DOUBLE, dims, op.hand_x), y = Tensor::host(MLUOP_DTYPE_DOUBLE, dims);
  ASSERT_TRUE(op.reference(x.view(), y.view()).ok());
  expectNear(y.values(), op.hand_y, {1e-15, 1e-15}, op.name);
  // float32 on the device agrees with the same values.
  Handle handle;
  Tensor dx = Tensor::device(MLUOP_DTYPE_FLOAT, dims, op.hand_x),
         dy = Tensor::device(MLUOP_DTYPE_FLOAT, dims);
  ASSERT_EQ(op.device(handle, dx.desc(), dx.data(), dy.desc(), dy.data()), MLUOP_STATUS_SUCCESS)
      << lastError();
  handle.sync();
  expectNear(dy.values(), op.hand_y, toleranceFor(MLUOP_DTYPE_FLOAT), op.name + " device");
}

TEST_P(UnaryOpTest, BadParams) {
  const UnaryCase& op = GetParam();
  Handle handle;
  const std::string prefix = op.opName() + ": ";
  {
    Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3}), y = Tensor::device(MLUOP_DTYPE_HALF, {2, 3});
    expectBadParam(op.device(handle, x.desc(), x.data(), y.desc(), y.data()),
                   "y is float16 but x is float32; they must have the same dtype", op.name);
    EXPECT_THAT(lastError(), StartsWith(prefix));
    Tensor hx = Tensor::host(MLUOP_DTYPE_FLOAT, {2, 3}), hy = Tensor::host(MLUOP_DTYPE_HALF, {2, 3});
    expectBadParam(op.reference(hx.view(), hy.view()), "y is float16 but x is float32", op.name);
  }
  {
    Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3}), y = Tensor::device(MLUOP_DTYPE_FLOAT, {3, 2});
    expectBadParam(op.device(handle, x.desc(), x.data(), y.desc(), y.data()),
                   "y has shape [3, 2] but x has shape [2, 3]; they must be equal", op.name);
  }
  {
    Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3}),
           y = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3}, {}, {0, 1});
    expectBadParam(op.device(handle, x.desc(), x.data(), y.desc(), y.data()),
                   "y (shape [2, 3], strides [0, 1]) overlaps itself", op.name);
  }
  if (!takesIntegers(op.opName())) {  // the others' integer paths: test_math.cpp
    Tensor x = Tensor::device(MLUOP_DTYPE_INT32, {2, 3}), y = Tensor::device(MLUOP_DTYPE_INT32, {2, 3});
    expectError(op.device(handle, x.desc(), x.data(), y.desc(), y.data()), MLUOP_STATUS_NOT_SUPPORTED,
                "x is int32, which is not supported; use float32, float16 or bfloat16", op.name);
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, UnaryOpTest, ::testing::ValuesIn(unaryCases()),
                         [](const ::testing::TestParamInfo<UnaryCase>& info) { return info.param.name; });

// gelu's exact form and its gradient run 16 lanes at a time on contiguous float32 rows (AVX-512, where the
// CPU has it), then 8 (AVX2), and one element at a time elsewhere: all give the same bits (the same float32
// operations in the same order), here over a contiguous tensor of 91 values (16-, 8- and 1-lane parts)
// against a transposed view of the same values, special values included.
TEST(GeluLanes, ContiguousAndStridedGiveTheSameBits) {
  Handle handle;
  std::vector<double> values = randomValues(7 * 13, 5, -12, 12);
  const std::vector<double> special = {0, -0.0, 1e-30, 3, -3, 13.5, -13.5, 30, -30, kInf, -kInf, kNaN};
  std::copy(special.begin(), special.end(), values.begin());
  const Layout dense{{7, 13}, {}};
  const Layout strided = transposed(7, 13);
  constexpr mluopDataType_t kF32 = MLUOP_DTYPE_FLOAT;
  const std::vector<double> grads = randomValues(7 * 13, 6);
  // The same logical values (row-major) in both layouts.
  Tensor x = deviceTensor(kF32, dense, values), xs = deviceTensor(kF32, strided, values);
  Tensor g = deviceTensor(kF32, dense, grads), gs = deviceTensor(kF32, strided, grads);
  Tensor y = deviceTensor(kF32, dense), ys = deviceTensor(kF32, dense), gi = deviceTensor(kF32, dense),
         gis = deviceTensor(kF32, dense);
  ASSERT_EQ(mluopGelu(handle, false, x.desc(), x.data(), y.desc(), y.data()), MLUOP_STATUS_SUCCESS);
  ASSERT_EQ(mluopGelu(handle, false, xs.desc(), xs.data(), ys.desc(), ys.data()), MLUOP_STATUS_SUCCESS);
  ASSERT_EQ(mluopGeluBackward(handle, false, g.desc(), g.data(), x.desc(), x.data(), gi.desc(), gi.data()),
            MLUOP_STATUS_SUCCESS);
  ASSERT_EQ(
      mluopGeluBackward(handle, false, gs.desc(), gs.data(), xs.desc(), xs.data(), gis.desc(), gis.data()),
      MLUOP_STATUS_SUCCESS);
  handle.sync();
  expectSame(ys.values(), y.values(), "gelu");
  expectSame(gis.values(), gi.values(), "gelu_backward");
}

// Special values: infinities, NaN, zeros, overflow/underflow and subnormal ranges of the fast math.
TEST(UnarySpecialValues, DeviceMatchesReference) {
  const float tiny = std::numeric_limits<float>::denorm_min();
  const double fmax = std::numeric_limits<float>::max(), fmin = std::numeric_limits<float>::min();
  struct Case {
    UnaryCase op;
    std::vector<double> x;
  };
  std::vector<Case> cases;
  for (const UnaryCase& op : unaryCases()) {
    if (op.name == "exp")
      cases.push_back({op, {0, -0.0, 1e-30, 88, -88, -100, 88.8, -104, -200, 200, kInf, -kInf, kNaN}});
    if (op.name == "log") cases.push_back({op, {1, 1e-40, tiny, fmin, fmax, 0, -0.0, -1, kInf, -kInf, kNaN}});
    if (op.name == "tanh")
      cases.push_back({op, {0, -0.0, 1e-30, 0.6249, 0.625, -0.625, 9, 20, -20, 100, kInf, -kInf, kNaN}});
    if (op.name == "sigmoid") cases.push_back({op, {0, 20, -20, 90, -90, 104, -104, kInf, -kInf, kNaN}});
    if (op.name == "sqrt" || op.name == "rsqrt") cases.push_back({op, {0, -0.0, -1, 4, 1e-40, kInf, kNaN}});
    if (op.name == "relu" || op.name == "abs" || op.name == "neg")
      cases.push_back({op, {-0.0, kInf, -kInf, kNaN}});
    // gelu's far negative tail (erfc, no cancellation); gelu(-inf) and silu(-inf) are -inf * 0 = NaN, as
    // PyTorch's formulas give.
    if (op.name == "gelu" || op.name == "silu")
      cases.push_back({op, {0, -0.0, 1e-30, 10, -10, -30, 100, -100, 1e30, -1e30, kInf, -kInf, kNaN}});
    if (op.name == "gelu_tanh")
      cases.push_back({op, {0, -0.0, 1e-30, 10, -10, -30, 1e30, -1e30, kInf, -kInf, kNaN}});
    if (op.name == "sin" || op.name == "cos")
      cases.push_back({op, {0, -0.0, 1e-30, 100, -100, 1e6, -1e6, kInf, -kInf, kNaN}});
    if (op.name.starts_with("pow_scalar"))
      cases.push_back({op, {0, -0.0, 1, -1, 1e20, -1e20, 1e-20, kInf, -kInf, kNaN}});
  }
  Handle handle;
  for (const Case& c : cases) {
    const Dims dims = {static_cast<std::int64_t>(c.x.size())};
    Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, dims, c.x), y = Tensor::device(MLUOP_DTYPE_FLOAT, dims);
    ASSERT_EQ(c.op.device(handle, x.desc(), x.data(), y.desc(), y.data()), MLUOP_STATUS_SUCCESS)
        << lastError();
    handle.sync();
    Tensor hx = Tensor::host(MLUOP_DTYPE_FLOAT, dims, c.x), hy = Tensor::host(MLUOP_DTYPE_FLOAT, dims);
    ASSERT_TRUE(c.op.reference(hx.view(), hy.view()).ok());
    // Absolute tolerance down to float32's subnormals: results there are not relatively accurate.
    expectNear(y.values(), hy.values(), {1e-37, 1e-5}, c.op.name);
  }
}

// The device's exp/log/tanh/sigmoid are fast approximations: close to, but not bit-identical with, the
// correctly rounded float32 of the float64 reference.
TEST(FastMath, DeviceIsApproximateButWithinAFewUlps) {
  struct Case {
    std::string name;
    double lo, hi;
  };
  const std::vector<Case> cases = {
      {"exp", -10, 10}, {"log", 1e-3, 100}, {"tanh", -5, 5}, {"sigmoid", -10, 10}};
  Handle handle;
  for (const Case& c : cases) {
    const UnaryCase* op = nullptr;
    static const std::vector<UnaryCase> all = unaryCases();
    for (const UnaryCase& u : all) {
      if (u.name == c.name) op = &u;
    }
    ASSERT_NE(op, nullptr);
    const std::int64_t n = 4096;
    const auto values = randomValues(n, 11, c.lo, c.hi);
    Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {n}, values), y = Tensor::device(MLUOP_DTYPE_FLOAT, {n});
    ASSERT_EQ(op->device(handle, x.desc(), x.data(), y.desc(), y.data()), MLUOP_STATUS_SUCCESS)
        << lastError();
    handle.sync();
    Tensor hx = Tensor::host(MLUOP_DTYPE_FLOAT, {n}, values), hy = Tensor::host(MLUOP_DTYPE_FLOAT, {n});
    ASSERT_TRUE(op->reference(hx.view(), hy.view()).ok());
    const auto device = y.values(), reference = hy.values();
    expectNear(device, reference, toleranceFor(MLUOP_DTYPE_FLOAT), c.name);
    int differing = 0;
    std::int64_t worst = 0;
    for (std::size_t i = 0; i < device.size(); ++i) {
      if (device[i] != reference[i]) ++differing;
      worst = std::max(worst, ulpDistance(static_cast<float>(device[i]), static_cast<float>(reference[i])));
    }
    EXPECT_GT(differing, 0) << c.name << ": the device result is bit-identical to the reference";
    EXPECT_LE(worst, 4) << c.name << ": worst error in float32 ulps";
    RecordProperty(c.name + "_differing", differing);
    RecordProperty(c.name + "_worst_ulps", static_cast<int>(worst));
  }
}

// ---------------------------------------------------------------------------------------------------------
// Binary broadcasting ops, parameterized over the op
// ---------------------------------------------------------------------------------------------------------

using BinaryFn =
    std::function<mluopStatus_t(mluopHandle_t, mluopTensorDescriptor_t, const void*, mluopTensorDescriptor_t,
                                const void*, mluopTensorDescriptor_t, void*)>;
using BinaryRef = std::function<mlu::Status(const TensorView&, const TensorView&, const TensorView&)>;

template <typename Args>
mlu::Status referenceBinary(const TensorView& a, const TensorView& b, const TensorView& c) {
  Args args;
  args.a = a;
  args.b = b;
  args.c = c;
  return mlu::reference::run(args);
}

struct HandCase {
  Dims a_dims, b_dims, c_dims;
  std::vector<double> a, b, c;
};

struct BinaryCase {
  std::string name;
  BinaryFn device;
  BinaryRef reference;
  double b_lo, b_hi;  // range of the random b values
  std::vector<HandCase> hand;
  double a_lo = -1, a_hi = 1;  // range of the random a values
};
void PrintTo(const BinaryCase& c, std::ostream* os) { *os << c.name; }

std::vector<BinaryCase> binaryCases() {
  return {
      {"add",
       [](mluopHandle_t h, mluopTensorDescriptor_t ad, const void* a, mluopTensorDescriptor_t bd,
          const void* b, mluopTensorDescriptor_t cd,
          void* c) { return mluopAdd(h, 2.0f, ad, a, bd, b, cd, c); },
       [](const TensorView& a, const TensorView& b, const TensorView& c) {
         mlu::add_args args;
         args.alpha = 2.0f;
         args.a = a;
         args.b = b;
         args.c = c;
         return mlu::reference::run(args);
       },
       -1,
       1,
       {{{3}, {3}, {3}, {1, 2, 3}, {10, 20, 30}, {21, 42, 63}},
        {{2, 1}, {3}, {2, 3}, {1, 2}, {10, 20, 30}, {21, 41, 61, 22, 42, 62}}}},
      {"sub",
       mluopSub,
       referenceBinary<mlu::sub_args>,
       -1,
       1,
       {{{3}, {3}, {3}, {5, -1, 2.5}, {3, 4, 0.5}, {2, -5, 2}},
        {{}, {2, 2}, {2, 2}, {10}, {1, 2, 3, 4}, {9, 8, 7, 6}}}},
      {"mul",
       mluopMul,
       referenceBinary<mlu::mul_args>,
       -1,
       1,
       {{{3}, {3}, {3}, {2, -3, 0.5}, {4, 5, -8}, {8, -15, -4}},
        {{2, 1, 2},
         {3, 1},
         {2, 3, 2},
         {1, 2, 3, 4},
         {1, 10, 100},
         {1, 2, 10, 20, 100, 200, 3, 4, 30, 40, 300, 400}}}},
      {"div",
       mluopDiv,
       referenceBinary<mlu::div_args>,
       0.5,
       2,
       {{{5}, {5}, {5}, {1, -6, 7, 1, 0}, {4, 3, -2, 0, 0}, {0.25, -2, -3.5, kInf, kNaN}}}},
      {"maximum",
       mluopMaximum,
       referenceBinary<mlu::maximum_args>,
       -1,
       1,
       {{{4}, {4}, {4}, {1, 5, kNaN, -2}, {3, 2, 1, kNaN}, {3, 5, kNaN, kNaN}}}},
      {"minimum",
       mluopMinimum,
       referenceBinary<mlu::minimum_args>,
       -1,
       1,
       {{{4}, {4}, {4}, {1, 5, kNaN, -2}, {3, 2, 1, kNaN}, {1, 2, kNaN, kNaN}}}},
      // pow: PyTorch's (C's) edge cases: 0 ** 0 = 1, a negative base with a non-integer exponent is NaN,
      // 0 ** -1 = inf, 1 ** NaN = 1, NaN ** 0 = 1.
      {"pow",
       mluopPow,
       referenceBinary<mlu::pow_args>,
       -2,
       3,
       {{{11},
         {11},
         {11},
         {2, -2, -2, 0, 4, 0, 1, kNaN, -8, -2, kNaN},
         {3, 3, 0.5, 0, 0.5, -1, kNaN, 0, 1.0 / 3, -2, 2},
         {8, -8, kNaN, 1, 2, kInf, 1, 1, kNaN, 0.25, kNaN}},
        {{2, 1}, {3}, {2, 3}, {2, -3}, {0, 1, 2}, {1, 2, 4, 1, -3, 9}}},
       0.05,
       2},
  };
}

class BinaryOpTest : public ::testing::TestWithParam<BinaryCase> {};

TEST_P(BinaryOpTest, DeviceMatchesReference) {
  const BinaryCase& op = GetParam();
  Handle handle;
  for (mluopDataType_t dtype : kFloatTypes) {
    for (const BinaryLayouts& l : binaryLayouts()) {
      const std::string what =
          op.name + " " + name(dtype) + " a " + describe(l.a) + " b " + describe(l.b) + " c " + describe(l.c);
      const auto a_values = randomValues(numel(l.a.dims), 1, op.a_lo, op.a_hi);
      auto b_values = randomValues(numel(l.b.dims), 2, op.b_lo, op.b_hi);
      Tensor a = deviceTensor(dtype, l.a, a_values), b = deviceTensor(dtype, l.b, b_values);
      Tensor c = deviceTensor(dtype, l.c);
      ASSERT_EQ(op.device(handle, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data()),
                MLUOP_STATUS_SUCCESS)
          << what << ": " << lastError();
      handle.sync();
      Tensor ha = hostTensor(dtype, l.a, a_values), hb = hostTensor(dtype, l.b, b_values);
      Tensor hc = hostTensor(dtype, l.c);
      const mlu::Status s = op.reference(ha.view(), hb.view(), hc.view());
      ASSERT_TRUE(s.ok()) << what << ": " << s.message;
      expectNear(c.values(), hc.values(), toleranceFor(dtype), what);
    }
  }
}

TEST_P(BinaryOpTest, InPlaceOutputAliasesFirstInput) {
  const BinaryCase& op = GetParam();
  Handle handle;
  const auto a_values = randomValues(91, 4, op.a_lo, op.a_hi),
             b_values = randomValues(13, 5, op.b_lo, op.b_hi);
  Tensor a = Tensor::device(MLUOP_DTYPE_FLOAT, {7, 13}, a_values);
  Tensor b = Tensor::device(MLUOP_DTYPE_FLOAT, {13}, b_values);
  ASSERT_EQ(op.device(handle, a.desc(), a.data(), b.desc(), b.data(), a.desc(), a.data()),
            MLUOP_STATUS_SUCCESS)
      << lastError();
  handle.sync();
  Tensor ha = Tensor::host(MLUOP_DTYPE_FLOAT, {7, 13}, a_values),
         hb = Tensor::host(MLUOP_DTYPE_FLOAT, {13}, b_values);
  Tensor hc = hostLike(ha);
  ASSERT_TRUE(op.reference(ha.view(), hb.view(), hc.view()).ok());
  expectNear(a.values(), hc.values(), toleranceFor(MLUOP_DTYPE_FLOAT), op.name);
}

TEST_P(BinaryOpTest, ReferenceMatchesHandWorkedValues) {
  const BinaryCase& op = GetParam();
  Handle handle;
  for (const HandCase& h : op.hand) {
    Tensor a = Tensor::host(MLUOP_DTYPE_DOUBLE, h.a_dims, h.a),
           b = Tensor::host(MLUOP_DTYPE_DOUBLE, h.b_dims, h.b);
    Tensor c = Tensor::host(MLUOP_DTYPE_DOUBLE, h.c_dims);
    ASSERT_TRUE(op.reference(a.view(), b.view(), c.view()).ok());
    expectNear(c.values(), h.c, {1e-15, 1e-15}, op.name);
    // The device computes the same (exact in float32), NaN and infinities included.
    Tensor da = Tensor::device(MLUOP_DTYPE_FLOAT, h.a_dims, h.a),
           db = Tensor::device(MLUOP_DTYPE_FLOAT, h.b_dims, h.b);
    Tensor dc = Tensor::device(MLUOP_DTYPE_FLOAT, h.c_dims);
    ASSERT_EQ(op.device(handle, da.desc(), da.data(), db.desc(), db.data(), dc.desc(), dc.data()),
              MLUOP_STATUS_SUCCESS)
        << lastError();
    handle.sync();
    expectSame(dc.values(), h.c, op.name + " device");
  }
}

TEST_P(BinaryOpTest, BadParams) {
  const BinaryCase& op = GetParam();
  Handle handle;
  auto call = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
    return op.device(handle, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data());
  };
  {
    Tensor a = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3}), b = Tensor::device(MLUOP_DTYPE_FLOAT, {4, 3});
    Tensor c = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3});
    expectBadParam(call(a, b, c), "a has shape [2, 3] and b [4, 3], which do not broadcast", op.name);
    EXPECT_THAT(lastError(), StartsWith(op.name + ": "));
    Tensor ha = Tensor::host(MLUOP_DTYPE_FLOAT, {2, 3}), hb = Tensor::host(MLUOP_DTYPE_FLOAT, {4, 3});
    Tensor hc = Tensor::host(MLUOP_DTYPE_FLOAT, {2, 3});
    expectBadParam(op.reference(ha.view(), hb.view(), hc.view()), "which do not broadcast", op.name);
  }
  {
    Tensor a = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3}), b = Tensor::device(MLUOP_DTYPE_FLOAT, {1, 3});
    Tensor c = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 2});
    expectBadParam(call(a, b, c), "c has shape [2, 2] but a [2, 3] and b [1, 3] broadcast to [2, 3]",
                   op.name);
  }
  {
    Tensor a = Tensor::device(MLUOP_DTYPE_FLOAT, {3}), b = Tensor::device(MLUOP_DTYPE_FLOAT, {3});
    Tensor c = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3});  // c bigger than the broadcast shape
    expectBadParam(call(a, b, c), "c has shape [2, 3] but a [3] and b [3] broadcast to [3]", op.name);
  }
  {
    Tensor a = Tensor::device(MLUOP_DTYPE_FLOAT, {3}), b = Tensor::device(MLUOP_DTYPE_HALF, {3});
    Tensor c = Tensor::device(MLUOP_DTYPE_FLOAT, {3});
    expectBadParam(call(a, b, c), "b is float16 but a is float32; they must have the same dtype", op.name);
  }
  {
    Tensor a = Tensor::device(MLUOP_DTYPE_FLOAT, {3}), b = Tensor::device(MLUOP_DTYPE_FLOAT, {3});
    Tensor c = Tensor::device(MLUOP_DTYPE_BFLOAT16, {3});
    expectBadParam(call(a, b, c), "c is bfloat16 but a is float32; they must have the same dtype", op.name);
  }
  {
    Tensor a = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3}), b = Tensor::device(MLUOP_DTYPE_FLOAT, {3});
    Tensor c = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3}, {}, {0, 1});
    expectBadParam(call(a, b, c), "c (shape [2, 3], strides [0, 1]) overlaps itself", op.name);
  }
  if (!takesIntegers(op.name)) {  // the others' integer paths: test_math.cpp
    Tensor a = Tensor::device(MLUOP_DTYPE_INT8, {3}), b = Tensor::device(MLUOP_DTYPE_INT8, {3});
    Tensor c = Tensor::device(MLUOP_DTYPE_INT8, {3});
    expectError(call(a, b, c), MLUOP_STATUS_NOT_SUPPORTED, "a is int8, which is not supported", op.name);
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, BinaryOpTest, ::testing::ValuesIn(binaryCases()),
                         [](const ::testing::TestParamInfo<BinaryCase>& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------------------
// fill
// ---------------------------------------------------------------------------------------------------------

TEST(Fill, DeviceMatchesReference) {
  Handle handle;
  for (mluopDataType_t dtype : kDeviceTypes) {
    for (const Layout& layout : unaryLayouts()) {
      for (double value : {3.7, -2.5, 0.0, -3.0}) {
        if (isLarge(layout) && value != 3.7) continue;
        if (dtype == MLUOP_DTYPE_UINT8 && value < 0 && value != std::trunc(value)) continue;
        const std::string what = name(dtype) + " " + describe(layout) + " value " + std::to_string(value);
        Tensor y =
            deviceTensor(dtype, layout, std::vector<double>(static_cast<std::size_t>(numel(layout.dims)), 1));
        ASSERT_EQ(mluopFill(handle, value, y.desc(), y.data()), MLUOP_STATUS_SUCCESS)
            << what << ": " << lastError();
        handle.sync();
        Tensor hy = hostTensor(dtype, layout);
        mlu::fill_args args;
        args.value = value;
        args.y = hy.view();
        ASSERT_TRUE(mlu::reference::run(args).ok()) << what;
        expectSame(y.values(), hy.values(), what);
      }
    }
  }
}

TEST(Fill, ReferenceMatchesHandWorkedValues) {
  struct Case {
    mluopDataType_t dtype;
    double value, expected;
  };
  const std::vector<Case> cases = {
      {MLUOP_DTYPE_INT32, -2.7, -2},
      {MLUOP_DTYPE_UINT8, 255.9, 255},
      {MLUOP_DTYPE_UINT8, -1, 255},  // a negative whole number wraps, as PyTorch's integer fill value
      {MLUOP_DTYPE_UINT8, -255, 1},
      {MLUOP_DTYPE_INT8, -128, -128},
      {MLUOP_DTYPE_BOOL, 0.25, 1},
      {MLUOP_DTYPE_BOOL, 0, 0},
      {MLUOP_DTYPE_HALF, 0.1, 0.0999755859375},
      {MLUOP_DTYPE_BFLOAT16, 0.1, 0.10009765625},
      {MLUOP_DTYPE_FLOAT, 0.1, 0.100000001490116119384765625},
      {MLUOP_DTYPE_DOUBLE, 0.1, 0.1},
      {MLUOP_DTYPE_FLOAT, -kInf, -kInf},
      {MLUOP_DTYPE_INT64, -9007199254740993.0, -9007199254740992.0},
  };
  Handle handle;
  for (const Case& c : cases) {
    const std::string what = name(c.dtype) + " value " + std::to_string(c.value);
    Tensor y = Tensor::host(c.dtype, {3});
    mlu::fill_args args;
    args.value = c.value;
    args.y = y.view();
    ASSERT_TRUE(mlu::reference::run(args).ok()) << what;
    expectSame(y.values(), {c.expected, c.expected, c.expected}, what);
    if (c.dtype == MLUOP_DTYPE_DOUBLE) continue;
    Tensor d = Tensor::device(c.dtype, {3});
    ASSERT_EQ(mluopFill(handle, c.value, d.desc(), d.data()), MLUOP_STATUS_SUCCESS) << lastError();
    handle.sync();
    expectSame(d.values(), {c.expected, c.expected, c.expected}, what + " device");
  }
}

TEST(Fill, BadParams) {
  Handle handle;
  {
    Tensor y = Tensor::device(MLUOP_DTYPE_UINT8, {3});
    expectBadParam(
        mluopFill(handle, 300, y.desc(), y.data()),
        "fill: value 300 cannot be stored in uint8 (range [0, 255], or a whole number from -255 to -1, "
        "which wraps)");
    expectBadParam(mluopFill(handle, -256, y.desc(), y.data()),
                   "value -256 cannot be stored in uint8 (range [0, 255], or a whole number from -255 to -1, "
                   "which wraps)");
    expectBadParam(mluopFill(handle, -1.5, y.desc(), y.data()), "value -1.5 cannot be stored in uint8");
  }
  {
    Tensor y = Tensor::device(MLUOP_DTYPE_INT32, {3});
    expectBadParam(mluopFill(handle, kNaN, y.desc(), y.data()), "value nan cannot be stored in int32");
    expectBadParam(mluopFill(handle, 3e9, y.desc(), y.data()), "value 3000000000 cannot be stored in int32");
  }
  {
    Tensor y = Tensor::device(MLUOP_DTYPE_HALF, {3});
    expectBadParam(mluopFill(handle, 70000, y.desc(), y.data()),
                   "value 70000 overflows float16 (largest finite value 65504)");
  }
  {
    Tensor y = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3}, {}, {1, 0});
    expectBadParam(mluopFill(handle, 1, y.desc(), y.data()),
                   "y (shape [2, 3], strides [1, 0]) overlaps itself");
  }
  {
    Tensor y = Tensor::host(MLUOP_DTYPE_INT8, {3});
    mlu::fill_args args;
    args.value = 128;
    args.y = y.view();
    expectBadParam(mlu::reference::run(args), "value 128 cannot be stored in int8 (range [-128, 127])");
  }
}

// ---------------------------------------------------------------------------------------------------------
// copy (with casts)
// ---------------------------------------------------------------------------------------------------------

TEST(Copy, DeviceMatchesReferenceForEveryDtypePair) {
  Handle handle;
  const std::vector<std::pair<Layout, Layout>> layouts = {
      {{{}, {}}, {{}, {}}},
      {{{0}, {}}, {{0}, {}}},
      {transposed(7, 13), {{7, 13}, {}}},
      {{{7, 13}, {}}, transposed(7, 13)},
      {{{2, 3, 4}, {24, 8, 2}}, {{2, 3, 4}, {1, 2, 6}}},
  };
  for (mluopDataType_t from : kDeviceTypes) {
    for (mluopDataType_t to : kDeviceTypes) {
      for (const auto& [lx, ly] : layouts) {
        const std::string what = name(from) + " -> " + name(to) + " x " + describe(lx) + " y " + describe(ly);
        const auto values = randomValues(numel(lx.dims), 9, -100, 100);
        Tensor x = deviceTensor(from, lx, values), y = deviceTensor(to, ly);
        ASSERT_EQ(mluopCopy(handle, x.desc(), x.data(), y.desc(), y.data()), MLUOP_STATUS_SUCCESS)
            << what << ": " << lastError();
        handle.sync();
        Tensor hx = hostTensor(from, lx, values), hy = hostTensor(to, ly);
        mlu::copy_args args;
        args.x = hx.view();
        args.y = hy.view();
        ASSERT_TRUE(mlu::reference::run(args).ok()) << what;
        // Casts are exact functions of the input: the device and the reference agree bit for bit.
        expectSame(y.values(), hy.values(), what);
      }
    }
  }
  // A large same-dtype copy (the memmove path) and a large transposing one.
  for (const auto& [lx, ly] : std::vector<std::pair<Layout, Layout>>{
           {{{131, 509}, {}}, {{131, 509}, {}}}, {transposed(131, 509), {{131, 509}, {}}}}) {
    const auto values = randomValues(numel(lx.dims), 10);
    Tensor x = deviceTensor(MLUOP_DTYPE_FLOAT, lx, values), y = deviceTensor(MLUOP_DTYPE_FLOAT, ly);
    ASSERT_EQ(mluopCopy(handle, x.desc(), x.data(), y.desc(), y.data()), MLUOP_STATUS_SUCCESS) << lastError();
    handle.sync();
    expectSame(y.values(), roundedTo(MLUOP_DTYPE_FLOAT, values), describe(lx));
  }
}

TEST(Copy, CastsMatchHandWorkedValues) {
  struct Case {
    mluopDataType_t from, to;
    std::vector<double> x, y;
  };
  const std::vector<Case> cases = {
      // float -> int truncates toward zero; out of range saturates, NaN gives 0 (our definition).
      {MLUOP_DTYPE_FLOAT,
       MLUOP_DTYPE_INT32,
       {-2.7, 2.7, 0.5, -0.5, 1e10, -1e10, kNaN},
       {-2, 2, 0, 0, 2147483647, -2147483648.0, 0}},
      // -> uint8 as PyTorch: truncated into int64, then modulo 256 (c10 casts through int64, so negative
      // values wrap: -1.5 -> -1 -> 255, 300.7 -> 300 -> 44); NaN and beyond int64 give 0.
      {MLUOP_DTYPE_FLOAT,
       MLUOP_DTYPE_UINT8,
       {-1.5, 300.7, 254.9, -3.7, -256, 0x1p20 + 7, kNaN, 1e30},
       {255, 44, 254, 253, 0, 7, 0, 0}},
      {MLUOP_DTYPE_BFLOAT16, MLUOP_DTYPE_UINT8, {-1, -128}, {255, 128}},
      // -> bool is != 0 (NaN is true).
      {MLUOP_DTYPE_FLOAT, MLUOP_DTYPE_BOOL, {0, -0.0, 0.1, kNaN, -3}, {0, 0, 1, 1, 1}},
      {MLUOP_DTYPE_BOOL, MLUOP_DTYPE_FLOAT, {1, 0}, {1, 0}},
      // float -> float16: round to nearest, ties to even; 65520 rounds up past the largest finite half.
      {MLUOP_DTYPE_FLOAT,
       MLUOP_DTYPE_HALF,
       {1 + 0x1p-11, 1 + 3 * 0x1p-11, 65519, 65520, -1e-8},
       {1, 1 + 0x1p-9, 65504, kInf, -0.0}},
      {MLUOP_DTYPE_FLOAT,
       MLUOP_DTYPE_BFLOAT16,
       {1 + 0x1p-8, 1 + 3 * 0x1p-8, 0.1},
       {1, 1 + 0x1p-6, 0.10009765625}},
      {MLUOP_DTYPE_HALF, MLUOP_DTYPE_BFLOAT16, {1 + 0x1p-10}, {1}},
      // integers wrap when narrowed.
      {MLUOP_DTYPE_INT64, MLUOP_DTYPE_INT8, {300, -129, 127}, {44, 127, 127}},
      {MLUOP_DTYPE_UINT8, MLUOP_DTYPE_INT8, {255, 0, 128}, {-1, 0, -128}},
      {MLUOP_DTYPE_INT32, MLUOP_DTYPE_FLOAT, {16777217, -16777219}, {16777216, -16777220}},
      {MLUOP_DTYPE_INT32, MLUOP_DTYPE_HALF, {2049, 70000}, {2048, kInf}},
      {MLUOP_DTYPE_INT16, MLUOP_DTYPE_BOOL, {0, 256, -1}, {0, 1, 1}},
  };
  Handle handle;
  for (const Case& c : cases) {
    const std::string what = name(c.from) + " -> " + name(c.to);
    const Dims dims = {static_cast<std::int64_t>(c.x.size())};
    Tensor hx = Tensor::host(c.from, dims, c.x), hy = Tensor::host(c.to, dims);
    mlu::copy_args args;
    args.x = hx.view();
    args.y = hy.view();
    ASSERT_TRUE(mlu::reference::run(args).ok()) << what;
    expectSame(hy.values(), c.y, what);
    Tensor x = Tensor::device(c.from, dims, c.x), y = Tensor::device(c.to, dims);
    ASSERT_EQ(mluopCopy(handle, x.desc(), x.data(), y.desc(), y.data()), MLUOP_STATUS_SUCCESS) << lastError();
    handle.sync();
    expectSame(y.values(), c.y, what + " device");
  }
  // float64 in the reference: to float32 rounds to nearest.
  Tensor hx = Tensor::host(MLUOP_DTYPE_DOUBLE, {2}, {0.1, 1 + 0x1p-24}),
         hy = Tensor::host(MLUOP_DTYPE_FLOAT, {2});
  mlu::copy_args args;
  args.x = hx.view();
  args.y = hy.view();
  ASSERT_TRUE(mlu::reference::run(args).ok());
  expectSame(hy.values(), {0.100000001490116119384765625, 1});
}

TEST(Copy, BadParams) {
  Handle handle;
  {
    Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3}), y = Tensor::device(MLUOP_DTYPE_FLOAT, {3, 2});
    expectBadParam(mluopCopy(handle, x.desc(), x.data(), y.desc(), y.data()),
                   "copy: y has shape [3, 2] but x has shape [2, 3]; they must be equal");
  }
  {
    Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {4}), y = Tensor::device(MLUOP_DTYPE_FLOAT, {4}, {}, {0});
    expectBadParam(mluopCopy(handle, x.desc(), x.data(), y.desc(), y.data()),
                   "y (shape [4], strides [0]) overlaps itself");
  }
  {
    // Strides too small for the dim below: [2, 3] with strides [2, 1] makes rows overlap.
    Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3}),
           y = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3}, {}, {2, 1});
    expectBadParam(mluopCopy(handle, x.desc(), x.data(), y.desc(), y.data()),
                   "y (shape [2, 3], strides [2, 1]) overlaps itself");
  }
}

// ---------------------------------------------------------------------------------------------------------
// permute
// ---------------------------------------------------------------------------------------------------------

TEST(Permute, DeviceMatchesReference) {
  struct Case {
    Layout x;
    std::vector<int> dims;
  };
  const std::vector<Case> cases = {
      {{{}, {}}, {}},
      {{{0, 3}, {}}, {1, 0}},
      {{{7, 13}, {}}, {1, 0}},
      {transposed(7, 13), {1, 0}},
      {{{2, 3, 4}, {}}, {2, 0, 1}},
      {{{2, 3, 4}, {}}, {-1, 0, -2}},
      {{{2, 3, 4}, {24, 8, 2}}, {1, 2, 0}},
      {{{2, 3, 4, 5}, {}}, {3, 1, 0, 2}},
      {{{509, 131}, {}}, {1, 0}},
  };
  const std::vector<mluopDataType_t> dtypes = {MLUOP_DTYPE_FLOAT, MLUOP_DTYPE_HALF,  MLUOP_DTYPE_BFLOAT16,
                                               MLUOP_DTYPE_INT32, MLUOP_DTYPE_INT64, MLUOP_DTYPE_UINT8,
                                               MLUOP_DTYPE_BOOL};
  Handle handle;
  for (mluopDataType_t dtype : dtypes) {
    for (const Case& c : cases) {
      Dims y_dims;
      for (int d : c.dims)
        y_dims.push_back(
            c.x.dims[static_cast<std::size_t>(d < 0 ? d + static_cast<int>(c.x.dims.size()) : d)]);
      const std::string what = name(dtype) + " x " + describe(c.x);
      const auto values = randomValues(numel(c.x.dims), 12, -100, 100);
      Tensor x = deviceTensor(dtype, c.x, values), y = Tensor::device(dtype, y_dims);
      ASSERT_EQ(mluopPermute(handle, c.dims.data(), static_cast<int>(c.dims.size()), x.desc(), x.data(),
                             y.desc(), y.data()),
                MLUOP_STATUS_SUCCESS)
          << what << ": " << lastError();
      handle.sync();
      Tensor hx = hostTensor(dtype, c.x, values), hy = Tensor::host(dtype, y_dims);
      mlu::permute_args args;
      args.dims = c.dims;
      args.x = hx.view();
      args.y = hy.view();
      ASSERT_TRUE(mlu::reference::run(args).ok()) << what;
      expectSame(y.values(), hy.values(), what);
    }
  }
}

TEST(Permute, ReferenceMatchesHandWorkedValues) {
  {
    Tensor x = Tensor::host(MLUOP_DTYPE_DOUBLE, {2, 3}, {0, 1, 2, 3, 4, 5}),
           y = Tensor::host(MLUOP_DTYPE_DOUBLE, {3, 2});
    mlu::permute_args args;
    args.dims = {1, 0};
    args.x = x.view();
    args.y = y.view();
    ASSERT_TRUE(mlu::reference::run(args).ok());
    expectSame(y.values(), {0, 3, 1, 4, 2, 5});
  }
  {
    // y[i][j][k] = x[j][k][i] for dims (2, 0, 1).
    Tensor x = Tensor::host(MLUOP_DTYPE_INT32, {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
    Tensor y = Tensor::host(MLUOP_DTYPE_INT32, {2, 2, 2});
    mlu::permute_args args;
    args.dims = {2, 0, 1};
    args.x = x.view();
    args.y = y.view();
    ASSERT_TRUE(mlu::reference::run(args).ok());
    expectSame(y.values(), {0, 2, 4, 6, 1, 3, 5, 7});
  }
}

TEST(Permute, BadParams) {
  Handle handle;
  Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3}), y = Tensor::device(MLUOP_DTYPE_FLOAT, {3, 2});
  auto call = [&](std::vector<int> dims, const Tensor& out) {
    return mluopPermute(handle, dims.data(), static_cast<int>(dims.size()), x.desc(), x.data(), out.desc(),
                        out.data());
  };
  expectBadParam(call({0}, y), "permute: dims [0] has 1 entries but x has 2 dims");
  expectBadParam(call({0, 2}, y), "dims[1] = 2 is out of range for a 2-d tensor (expected -2 to 1)");
  expectBadParam(call({-3, 0}, y), "dims[0] = -3 is out of range for a 2-d tensor (expected -2 to 1)");
  expectBadParam(call({0, 0}, y), "dims [0, 0] repeat dim 0; it must be a permutation of 0..1");
  expectBadParam(call({1, -1}, y), "dims [1, -1] repeat dim 1");
  Tensor same = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3});
  expectBadParam(call({1, 0}, same), "y has shape [2, 3] but x [2, 3] permuted by [1, 0] has shape [3, 2]");
  Tensor half = Tensor::device(MLUOP_DTYPE_HALF, {3, 2});
  expectBadParam(call({1, 0}, half), "y is float16 but x is float32; they must have the same dtype");
  Tensor overlapping = Tensor::device(MLUOP_DTYPE_FLOAT, {3, 2}, {}, {1, 1});
  expectBadParam(call({1, 0}, overlapping), "y (shape [3, 2], strides [1, 1]) overlaps itself");
}

// ---------------------------------------------------------------------------------------------------------
// relu / sigmoid / tanh backward
// ---------------------------------------------------------------------------------------------------------

using BackwardFn = BinaryFn;  // (grad_output, saved, grad_input)
using BackwardRef = BinaryRef;

template <typename Args>
mlu::Status referenceBackward(const TensorView& grad_output, const TensorView& saved,
                              const TensorView& grad_input) {
  Args args;
  args.grad_output = grad_output;
  if constexpr (requires { args.x; }) {
    args.x = saved;
  } else {
    args.y = saved;
  }
  args.grad_input = grad_input;
  return mlu::reference::run(args);
}

struct BackwardCase {
  std::string name;
  std::string saved_name;  // "x" or "y"
  BackwardFn device;
  BackwardRef reference;
  UnaryRef forward;                   // the forward op (its output is `saved` when saved_name is "y")
  double saved_lo, saved_hi;          // range of the random saved tensor
  std::vector<double> go, saved, gi;  // hand-worked
  std::string op = {};                // the op's name in messages, when it is not the case's name

  const std::string& opName() const { return op.empty() ? name : op; }
};

BackwardFn geluBackward(bool approximate_tanh) {
  return
      [approximate_tanh](mluopHandle_t h, mluopTensorDescriptor_t god, const void* go,
                         mluopTensorDescriptor_t xd, const void* x, mluopTensorDescriptor_t gid, void* gi) {
        return mluopGeluBackward(h, approximate_tanh, god, go, xd, x, gid, gi);
      };
}

BackwardRef referenceGeluBackward(bool approximate_tanh) {
  return [approximate_tanh](const TensorView& go, const TensorView& x, const TensorView& gi) {
    mlu::gelu_backward_args args;
    args.approximate_tanh = approximate_tanh;
    args.grad_output = go;
    args.x = x;
    args.grad_input = gi;
    return mlu::reference::run(args);
  };
}
void PrintTo(const BackwardCase& c, std::ostream* os) { *os << c.name; }

std::vector<BackwardCase> backwardCases() {
  return {
      {"relu_backward",
       "x",
       mluopReluBackward,
       referenceBackward<mlu::relu_backward_args>,
       referenceUnary<mlu::relu_args>,
       -1,
       1,
       {1, 2, 3, 4},
       {-1, 0, 0.5, 2},
       {0, 0, 3, 4}},
      {"sigmoid_backward",
       "y",
       mluopSigmoidBackward,
       referenceBackward<mlu::sigmoid_backward_args>,
       referenceUnary<mlu::sigmoid_args>,
       0.01,
       0.99,
       {1, 2, -4},
       {0.5, 0.25, 0.9},
       {0.25, 0.375, -0.36}},
      {"tanh_backward",
       "y",
       mluopTanhBackward,
       referenceBackward<mlu::tanh_backward_args>,
       referenceUnary<mlu::tanh_args>,
       -0.99,
       0.99,
       {1, 3, 2},
       {0.5, -0.5, 0},
       {0.75, 2.25, 2}},
      // gelu': Phi(x) + x phi(x), or the derivative of the tanh form; silu': s (1 + x (1 - s)).
      {"gelu_backward",
       "x",
       geluBackward(false),
       referenceGeluBackward(false),
       referenceGelu(false),
       -4,
       4,
       {1, 2, -1},
       {0, 1, -2},
       {0.5, 2.166630941175373, 0.08523180107819692}},
      {"gelu_backward_tanh",
       "x",
       geluBackward(true),
       referenceGeluBackward(true),
       referenceGelu(true),
       -4,
       4,
       {1, 2, -1},
       {0, 1, -2},
       {0.5, 2.165928167691565, 0.08609925662361825},
       "gelu_backward"},
      // hardsigmoid': 1/6 on (-3, 3), else 0; hardswish': x/3 + 1/2 on [-3, 3], 0 below, 1 above. The random
      // inputs stay off the kinks at +-3, where a finite difference is not the derivative.
      {"hardsigmoid_backward",
       "x",
       mluopHardsigmoidBackward,
       referenceBackward<mlu::hardsigmoid_backward_args>,
       referenceUnary<mlu::hardsigmoid_args>,
       -2.9,
       2.9,
       {1, 2, 3},
       {0, 2.5, -3.5},
       {0.16666666666666666, 0.3333333333333333, 0}},
      {"hardswish_backward",
       "x",
       mluopHardswishBackward,
       referenceBackward<mlu::hardswish_backward_args>,
       referenceUnary<mlu::hardswish_args>,
       -2.9,
       2.9,
       {1, 2, 3, 4},
       {0, 2, -3.5, 3.5},
       {0.5, 2.3333333333333335, 0, 4}},
      {"silu_backward",
       "x",
       mluopSiluBackward,
       referenceBackward<mlu::silu_backward_args>,
       referenceUnary<mlu::silu_args>,
       -6,
       6,
       {1, 2, -1},
       {0, 1, -2},
       {0.5, 1.8553410237429737, 0.09078424878489547}},
  };
}

class BackwardOpTest : public ::testing::TestWithParam<BackwardCase> {};

TEST_P(BackwardOpTest, DeviceMatchesReference) {
  const BackwardCase& op = GetParam();
  Handle handle;
  for (mluopDataType_t dtype : kFloatTypes) {
    for (const Layout& layout : unaryLayouts()) {
      // grad_output contiguous or as the layout, saved as the layout, grad_input contiguous or transposed.
      std::vector<Layout> outs = {{layout.dims, {}}};
      if (layout.dims.size() == 2 && !isLarge(layout))
        outs.push_back(transposed(layout.dims[0], layout.dims[1]));
      for (const Layout& out : outs) {
        const std::string what =
            op.name + " " + name(dtype) + " " + describe(layout) + " -> " + describe(out);
        const auto go_values = randomValues(numel(layout.dims), 21);
        const auto saved_values = randomValues(numel(layout.dims), 22, op.saved_lo, op.saved_hi);
        Tensor go = deviceTensor(dtype, out, go_values), saved = deviceTensor(dtype, layout, saved_values);
        Tensor gi = deviceTensor(dtype, out);
        ASSERT_EQ(op.device(handle, go.desc(), go.data(), saved.desc(), saved.data(), gi.desc(), gi.data()),
                  MLUOP_STATUS_SUCCESS)
            << what << ": " << lastError();
        handle.sync();
        Tensor hgo = hostTensor(dtype, out, go_values), hsaved = hostTensor(dtype, layout, saved_values);
        Tensor hgi = hostTensor(dtype, out);
        const mlu::Status s = op.reference(hgo.view(), hsaved.view(), hgi.view());
        ASSERT_TRUE(s.ok()) << what << ": " << s.message;
        expectNear(gi.values(), hgi.values(), toleranceFor(dtype), what);
      }
    }
  }
}

TEST_P(BackwardOpTest, ReferenceMatchesHandWorkedValues) {
  const BackwardCase& op = GetParam();
  const Dims dims = {static_cast<std::int64_t>(op.go.size())};
  Tensor go = Tensor::host(MLUOP_DTYPE_DOUBLE, dims, op.go),
         saved = Tensor::host(MLUOP_DTYPE_DOUBLE, dims, op.saved);
  Tensor gi = Tensor::host(MLUOP_DTYPE_DOUBLE, dims);
  ASSERT_TRUE(op.reference(go.view(), saved.view(), gi.view()).ok());
  expectNear(gi.values(), op.gi, {1e-15, 1e-15}, op.name);
}

// The backward op (given grad_output = w) against central differences of sum(forward(x) * w), in float64.
TEST_P(BackwardOpTest, MatchesFiniteDifferencesOfForward) {
  const BackwardCase& op = GetParam();
  const std::int64_t n = 24;
  auto x = randomValues(n, 31, -2, 2);
  for (double& v : x) {
    if (std::fabs(v) < 0.05) v += 0.1;  // keep relu's kink away from the perturbation
  }
  const auto w = randomValues(n, 32);
  auto forward = [&](const std::vector<double>& in) {
    Tensor tx = Tensor::host(MLUOP_DTYPE_DOUBLE, {n}, in), ty = Tensor::host(MLUOP_DTYPE_DOUBLE, {n});
    EXPECT_TRUE(op.forward(tx.view(), ty.view()).ok());
    return ty.values();
  };
  const auto numerical =
      numericalGradient([&](const std::vector<double>& in) { return dot(forward(in), w); }, x);
  // relu_backward takes the forward's input, the others its output.
  const auto saved = op.saved_name == "x" ? x : forward(x);
  Tensor go = Tensor::host(MLUOP_DTYPE_DOUBLE, {n}, w), ts = Tensor::host(MLUOP_DTYPE_DOUBLE, {n}, saved);
  Tensor gi = Tensor::host(MLUOP_DTYPE_DOUBLE, {n});
  ASSERT_TRUE(op.reference(go.view(), ts.view(), gi.view()).ok());
  expectNear(gi.values(), numerical, {1e-7, 1e-7}, op.name);
}

TEST_P(BackwardOpTest, BadParams) {
  const BackwardCase& op = GetParam();
  Handle handle;
  auto call = [&](const Tensor& go, const Tensor& saved, const Tensor& gi) {
    return op.device(handle, go.desc(), go.data(), saved.desc(), saved.data(), gi.desc(), gi.data());
  };
  Tensor go = Tensor::device(MLUOP_DTYPE_FLOAT, {2}), gi = Tensor::device(MLUOP_DTYPE_FLOAT, {2});
  {
    Tensor saved = Tensor::device(MLUOP_DTYPE_FLOAT, {3});
    expectBadParam(call(go, saved, gi),
                   op.opName() + ": " + op.saved_name + " has shape [3] but grad_output has shape [2]");
  }
  {
    Tensor saved = Tensor::device(MLUOP_DTYPE_HALF, {2});
    expectBadParam(call(go, saved, gi), op.saved_name + " is float16 but grad_output is float32");
  }
  {
    Tensor saved = Tensor::device(MLUOP_DTYPE_FLOAT, {2}), bad = Tensor::device(MLUOP_DTYPE_FLOAT, {1, 2});
    expectBadParam(call(go, saved, bad),
                   "grad_input has shape [1, 2] but grad_output has shape [2]; they must be equal");
    Tensor overlapping = Tensor::device(MLUOP_DTYPE_FLOAT, {2}, {}, {0});
    expectBadParam(call(go, saved, overlapping), "grad_input (shape [2], strides [0]) overlaps itself");
  }
  {
    Tensor igo = Tensor::device(MLUOP_DTYPE_INT32, {2}), isaved = Tensor::device(MLUOP_DTYPE_INT32, {2});
    Tensor igi = Tensor::device(MLUOP_DTYPE_INT32, {2});
    expectError(call(igo, isaved, igi), MLUOP_STATUS_NOT_SUPPORTED,
                "grad_output is int32, which is not supported");
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, BackwardOpTest, ::testing::ValuesIn(backwardCases()),
                         [](const ::testing::TestParamInfo<BackwardCase>& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------------------
// dropout
// ---------------------------------------------------------------------------------------------------------

struct DropoutResult {
  std::vector<double> y, mask;
};

DropoutResult referenceDropout(mluopDataType_t dtype, const Layout& layout,
                               const std::vector<double>& x_values, float p, std::uint64_t seed,
                               std::uint64_t offset, const Layout& out = {}) {
  const Layout& ol = out.dims.empty() && !layout.dims.empty() ? Layout{layout.dims, {}} : out;
  Tensor x = hostTensor(dtype, layout, x_values), y = hostTensor(dtype, ol),
         mask = hostTensor(MLUOP_DTYPE_UINT8, ol);
  mlu::dropout_forward_args args;
  args.p = p;
  args.seed = seed;
  args.offset = offset;
  args.x = x.view();
  args.y = y.view();
  args.mask = mask.view();
  const mlu::Status s = mlu::reference::run(args);
  EXPECT_TRUE(s.ok()) << s.message;
  return {y.values(), mask.values()};
}

TEST(DropoutForward, DeviceMatchesReference) {
  Handle handle;
  for (mluopDataType_t dtype : kFloatTypes) {
    for (const Layout& layout : unaryLayouts()) {
      for (float p : {0.0f, 0.3f, 1.0f}) {
        if (isLarge(layout) && p != 0.3f) continue;
        std::vector<Layout> outs = {{layout.dims, {}}};
        if (layout.dims.size() == 2 && !isLarge(layout))
          outs.push_back(transposed(layout.dims[0], layout.dims[1]));
        for (const Layout& out : outs) {
          const std::string what =
              name(dtype) + " " + describe(layout) + " -> " + describe(out) + " p " + std::to_string(p);
          const auto values = randomValues(numel(layout.dims), 41);
          const std::uint64_t seed = 0x5eed0000000000ffull, offset = 12345;
          Tensor x = deviceTensor(dtype, layout, values), y = deviceTensor(dtype, out);
          Tensor mask = deviceTensor(MLUOP_DTYPE_UINT8, out);
          ASSERT_EQ(mluopDropoutForward(handle, p, seed, offset, x.desc(), x.data(), y.desc(), y.data(),
                                        mask.desc(), mask.data()),
                    MLUOP_STATUS_SUCCESS)
              << what << ": " << lastError();
          handle.sync();
          const DropoutResult ref = referenceDropout(dtype, layout, values, p, seed, offset, out);
          expectSame(mask.values(), ref.mask, what + " mask");  // the same random numbers: identical masks
          expectNear(y.values(), ref.y, toleranceFor(dtype), what);
        }
      }
    }
  }
}

TEST(DropoutForward, ReferenceMatchesHandWorkedValues) {
  // seed 0, offset 0: block 0 is Philox(counter 0, key 0) = 6627e8d5 e169c58d bc57ac4c 9b00dbd8, whose
  // uniforms are 0x6627e8/2^24 = 0.399, 0.881, 0.736, 0.605: with p = 0.5 the first element is dropped.
  const DropoutResult r = referenceDropout(MLUOP_DTYPE_DOUBLE, {{4}, {}}, {1, 2, 3, 4}, 0.5f, 0, 0);
  expectSame(r.mask, {0, 1, 1, 1});
  expectSame(r.y, {0, 4, 6, 8});
  // p = 0.75 keeps only u >= 0.75: the second element.
  const DropoutResult q = referenceDropout(MLUOP_DTYPE_DOUBLE, {{4}, {}}, {1, 2, 3, 4}, 0.75f, 0, 0);
  expectSame(q.mask, {0, 1, 0, 0});
  expectSame(q.y, {0, 8, 0, 0});
  // p = 0 keeps everything unscaled; p = 1 drops everything.
  expectSame(referenceDropout(MLUOP_DTYPE_DOUBLE, {{4}, {}}, {1, 2, 3, 4}, 0.0f, 0, 0).y, {1, 2, 3, 4});
  const DropoutResult all = referenceDropout(MLUOP_DTYPE_DOUBLE, {{4}, {}}, {1, 2, 3, 4}, 1.0f, 0, 0);
  expectSame(all.y, {0, 0, 0, 0});
  expectSame(all.mask, {0, 0, 0, 0});
}

TEST(DropoutForward, OffsetSelectsLaterBlocks) {
  // Elements 4..11 at offset 0 are elements 0..7 at offset 1 (4 elements per Philox block).
  const auto x = randomValues(12, 42);
  const DropoutResult whole = referenceDropout(MLUOP_DTYPE_FLOAT, {{12}, {}}, x, 0.5f, 77, 0);
  const DropoutResult tail = referenceDropout(MLUOP_DTYPE_FLOAT, {{8}, {}},
                                              std::vector<double>(x.begin() + 4, x.end()), 0.5f, 77, 1);
  expectSame(std::vector<double>(whole.mask.begin() + 4, whole.mask.end()), tail.mask);
  // A different seed gives a different mask.
  const DropoutResult other = referenceDropout(MLUOP_DTYPE_FLOAT, {{12}, {}}, x, 0.5f, 78, 0);
  EXPECT_NE(whole.mask, other.mask);
}

TEST(DropoutForward, DropsAboutPOfTheElements) {
  Handle handle;
  const std::int64_t n = 20000;
  Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {n}, std::vector<double>(n, 1.0)),
         y = Tensor::device(MLUOP_DTYPE_FLOAT, {n});
  Tensor mask = Tensor::device(MLUOP_DTYPE_UINT8, {n});
  ASSERT_EQ(mluopDropoutForward(handle, 0.3f, 1, 0, x.desc(), x.data(), y.desc(), y.data(), mask.desc(),
                                mask.data()),
            MLUOP_STATUS_SUCCESS);
  handle.sync();
  const auto m = mask.values(), yv = y.values();
  double kept = 0, sum = 0;
  for (std::size_t i = 0; i < m.size(); ++i) {
    kept += m[i];
    sum += yv[i];
  }
  EXPECT_NEAR(kept / n, 0.7, 0.015);
  EXPECT_NEAR(sum / n, 1.0, 0.03);  // the 1 / (1 - p) scale keeps the expectation
}

TEST(DropoutBackward, DeviceMatchesReference) {
  Handle handle;
  for (mluopDataType_t dtype : kFloatTypes) {
    for (const Layout& layout : unaryLayouts()) {
      for (float p : {0.0f, 0.4f, 1.0f}) {
        if (isLarge(layout) && p != 0.4f) continue;
        const std::string what = name(dtype) + " " + describe(layout) + " p " + std::to_string(p);
        const auto go_values = randomValues(numel(layout.dims), 43);
        auto mask_values = randomValues(numel(layout.dims), 44, 0, 2);
        for (double& m : mask_values) m = std::floor(m);
        Tensor go = deviceTensor(dtype, layout, go_values),
               mask = deviceTensor(MLUOP_DTYPE_UINT8, layout, mask_values);
        Tensor gi = deviceTensor(dtype, {layout.dims, {}});
        ASSERT_EQ(mluopDropoutBackward(handle, p, go.desc(), go.data(), mask.desc(), mask.data(), gi.desc(),
                                       gi.data()),
                  MLUOP_STATUS_SUCCESS)
            << what << ": " << lastError();
        handle.sync();
        Tensor hgo = hostTensor(dtype, layout, go_values),
               hmask = hostTensor(MLUOP_DTYPE_UINT8, layout, mask_values);
        Tensor hgi = hostTensor(dtype, {layout.dims, {}});
        mlu::dropout_backward_args args;
        args.p = p;
        args.grad_output = hgo.view();
        args.mask = hmask.view();
        args.grad_input = hgi.view();
        ASSERT_TRUE(mlu::reference::run(args).ok()) << what;
        expectNear(gi.values(), hgi.values(), toleranceFor(dtype), what);
      }
    }
  }
}

mlu::Status referenceDropoutBackward(float p, const Tensor& go, const Tensor& mask, const Tensor& gi) {
  mlu::dropout_backward_args args;
  args.p = p;
  args.grad_output = go.view();
  args.mask = mask.view();
  args.grad_input = gi.view();
  return mlu::reference::run(args);
}

TEST(DropoutBackward, ReferenceMatchesHandWorkedValues) {
  Tensor go = Tensor::host(MLUOP_DTYPE_DOUBLE, {4}, {1, 2, 3, 4}),
         mask = Tensor::host(MLUOP_DTYPE_UINT8, {4}, {0, 1, 1, 0});
  Tensor gi = Tensor::host(MLUOP_DTYPE_DOUBLE, {4});
  ASSERT_TRUE(referenceDropoutBackward(0.5f, go, mask, gi).ok());
  expectSame(gi.values(), {0, 4, 6, 0});
  ASSERT_TRUE(referenceDropoutBackward(0.75f, go, mask, gi).ok());
  expectSame(gi.values(), {0, 8, 12, 0});
  ASSERT_TRUE(referenceDropoutBackward(1.0f, go, mask, gi).ok());
  expectSame(gi.values(), {0, 0, 0, 0});
}

TEST(DropoutBackward, MatchesFiniteDifferencesOfForward) {
  const std::int64_t n = 32;
  const float p = 0.4f;
  const auto x = randomValues(n, 45), w = randomValues(n, 46);
  auto loss = [&](const std::vector<double>& in) {
    return dot(referenceDropout(MLUOP_DTYPE_DOUBLE, {{n}, {}}, in, p, 9, 3).y, w);
  };
  const auto numerical = numericalGradient(loss, x);
  const DropoutResult forward = referenceDropout(MLUOP_DTYPE_DOUBLE, {{n}, {}}, x, p, 9, 3);
  Tensor go = Tensor::host(MLUOP_DTYPE_DOUBLE, {n}, w),
         mask = Tensor::host(MLUOP_DTYPE_UINT8, {n}, forward.mask);
  Tensor gi = Tensor::host(MLUOP_DTYPE_DOUBLE, {n});
  ASSERT_TRUE(referenceDropoutBackward(p, go, mask, gi).ok());
  expectNear(gi.values(), numerical, {1e-7, 1e-7});
}

TEST(Dropout, BadParams) {
  Handle handle;
  Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {4}), y = Tensor::device(MLUOP_DTYPE_FLOAT, {4});
  Tensor mask = Tensor::device(MLUOP_DTYPE_UINT8, {4});
  auto forward = [&](float p, const Tensor& out, const Tensor& m) {
    return mluopDropoutForward(handle, p, 0, 0, x.desc(), x.data(), out.desc(), out.data(), m.desc(),
                               m.data());
  };
  expectBadParam(forward(1.5f, y, mask), "dropout_forward: p = 1.5 is outside [0, 1]");
  expectBadParam(forward(-0.1f, y, mask), "p = -0.1 is outside [0, 1]");
  expectBadParam(forward(std::numeric_limits<float>::quiet_NaN(), y, mask), "p = nan is outside [0, 1]");
  Tensor float_mask = Tensor::device(MLUOP_DTYPE_FLOAT, {4});
  expectBadParam(forward(0.5f, y, float_mask), "mask is float32; it must be uint8");
  Tensor short_mask = Tensor::device(MLUOP_DTYPE_UINT8, {3});
  expectBadParam(forward(0.5f, y, short_mask), "mask has shape [3] but x has shape [4]; they must be equal");
  Tensor short_y = Tensor::device(MLUOP_DTYPE_FLOAT, {3});
  expectBadParam(forward(0.5f, short_y, mask), "y has shape [3] but x has shape [4]; they must be equal");
  Tensor overlapping_mask = Tensor::device(MLUOP_DTYPE_UINT8, {4}, {}, {0});
  expectBadParam(forward(0.5f, y, overlapping_mask), "mask (shape [4], strides [0]) overlaps itself");

  auto backward = [&](float p, const Tensor& m, const Tensor& gi) {
    return mluopDropoutBackward(handle, p, x.desc(), x.data(), m.desc(), m.data(), gi.desc(), gi.data());
  };
  expectBadParam(backward(2.0f, mask, y), "dropout_backward: p = 2 is outside [0, 1]");
  expectBadParam(backward(0.5f, float_mask, y), "mask is float32; it must be uint8");
  expectBadParam(backward(0.5f, short_mask, y), "mask has shape [3] but grad_output has shape [4]");
  expectBadParam(backward(0.5f, mask, short_y), "grad_input has shape [3] but grad_output has shape [4]");
  Tensor half = Tensor::device(MLUOP_DTYPE_HALF, {4});
  expectBadParam(backward(0.5f, mask, half), "grad_input is float16 but grad_output is float32");
}

// ---------------------------------------------------------------------------------------------------------
// uniform, normal
// ---------------------------------------------------------------------------------------------------------

std::vector<double> referenceUniform(mluopDataType_t dtype, const Layout& layout, std::uint64_t seed,
                                     std::uint64_t offset, double low, double high) {
  Tensor y = hostTensor(dtype, layout);
  mlu::uniform_args args;
  args.seed = seed;
  args.offset = offset;
  args.low = low;
  args.high = high;
  args.y = y.view();
  const mlu::Status s = mlu::reference::run(args);
  EXPECT_TRUE(s.ok()) << s.message;
  return y.values();
}

std::vector<double> referenceNormal(mluopDataType_t dtype, const Layout& layout, std::uint64_t seed,
                                    std::uint64_t offset, double mean, double std) {
  Tensor y = hostTensor(dtype, layout);
  mlu::normal_args args;
  args.seed = seed;
  args.offset = offset;
  args.mean = mean;
  args.std = std;
  args.y = y.view();
  const mlu::Status s = mlu::reference::run(args);
  EXPECT_TRUE(s.ok()) << s.message;
  return y.values();
}

TEST(Uniform, DeviceMatchesReference) {
  Handle handle;
  for (mluopDataType_t dtype : kFloatTypes) {
    for (const Layout& layout : unaryLayouts()) {
      const std::string what = name(dtype) + " " + describe(layout);
      Tensor y = deviceTensor(dtype, layout);
      ASSERT_EQ(mluopRandUniform(handle, 123, 7, -2.0, 3.0, y.desc(), y.data()), MLUOP_STATUS_SUCCESS)
          << what << ": " << lastError();
      handle.sync();
      expectNear(y.values(), referenceUniform(dtype, layout, 123, 7, -2.0, 3.0), toleranceFor(dtype), what);
    }
  }
  // [0, 1) in float32: both sides produce exactly the 24-bit uniforms.
  Tensor y = Tensor::device(MLUOP_DTYPE_FLOAT, {1001});
  ASSERT_EQ(mluopRandUniform(handle, 5, 0, 0.0, 1.0, y.desc(), y.data()), MLUOP_STATUS_SUCCESS);
  handle.sync();
  expectSame(y.values(), referenceUniform(MLUOP_DTYPE_FLOAT, {{1001}, {}}, 5, 0, 0.0, 1.0));
}

TEST(Uniform, ReferenceMatchesHandWorkedValues) {
  // seed 0, offset 0: the words of Philox(counter 0, key 0), top 24 bits / 2^24.
  const std::vector<double> u = {0x6627e8 / 16777216.0, 0xe169c5 / 16777216.0, 0xbc57ac / 16777216.0,
                                 0x9b00db / 16777216.0};
  expectSame(referenceUniform(MLUOP_DTYPE_DOUBLE, {{4}, {}}, 0, 0, 0.0, 1.0), u);
  std::vector<double> scaled;
  for (double v : u) scaled.push_back(-2 + 4 * v);
  expectNear(referenceUniform(MLUOP_DTYPE_DOUBLE, {{4}, {}}, 0, 0, -2.0, 2.0), scaled, {1e-15, 1e-15});
  // Offset 1 continues where 4 elements of offset 0 stop.
  const auto eight = referenceUniform(MLUOP_DTYPE_DOUBLE, {{8}, {}}, 99, 0, 0.0, 1.0);
  expectSame(referenceUniform(MLUOP_DTYPE_DOUBLE, {{4}, {}}, 99, 1, 0.0, 1.0),
             std::vector<double>(eight.begin() + 4, eight.end()));
}

TEST(Uniform, Statistics) {
  Handle handle;
  const std::int64_t n = 20000;
  Tensor y = Tensor::device(MLUOP_DTYPE_FLOAT, {n});
  ASSERT_EQ(mluopRandUniform(handle, 2024, 0, 1.0, 3.0, y.desc(), y.data()), MLUOP_STATUS_SUCCESS);
  handle.sync();
  double sum = 0, lo = kInf, hi = -kInf;
  for (double v : y.values()) {
    sum += v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_NEAR(sum / n, 2.0, 0.02);
  EXPECT_GE(lo, 1.0);
  EXPECT_LT(hi, 3.0);
}

TEST(Normal, DeviceMatchesReference) {
  Handle handle;
  for (mluopDataType_t dtype : kFloatTypes) {
    for (const Layout& layout : unaryLayouts()) {
      const std::string what = name(dtype) + " " + describe(layout);
      Tensor y = deviceTensor(dtype, layout);
      ASSERT_EQ(mluopRandNormal(handle, 321, 5, 0.5, 2.0, y.desc(), y.data()), MLUOP_STATUS_SUCCESS)
          << what << ": " << lastError();
      handle.sync();
      // Values reach ~ 0.5 + 2 * 5.6: absolute tolerance scaled by the std.
      const Tolerance tol = toleranceFor(dtype);
      expectNear(y.values(), referenceNormal(dtype, layout, 321, 5, 0.5, 2.0), {tol.atol * 2, tol.rtol},
                 what);
    }
  }
}

TEST(Normal, ReferenceMatchesHandWorkedValues) {
  // seed 0, offset 0: block 0 = 6627e8d5 e169c58d bc57ac4c 9b00dbd8. Element 0 uses words 0, 1:
  // u1 = (0x6627e8 + 1) / 2^24, u2 = 0xe169c5 / 2^24, z = sqrt(-2 ln u1) cos(2 pi u2) = 0.99113747...;
  // element 1 uses words 2, 3 -> -0.61760905....
  const std::vector<double> z = {0.9911374751458971, -0.6176090549848544};
  expectNear(referenceNormal(MLUOP_DTYPE_DOUBLE, {{2}, {}}, 0, 0, 0.0, 1.0), z, {1e-14, 1e-14});
  expectNear(referenceNormal(MLUOP_DTYPE_DOUBLE, {{2}, {}}, 0, 0, 1.0, 3.0), {1 + 3 * z[0], 1 + 3 * z[1]},
             {1e-14, 1e-14});
  // Two normals per block: offset 1 continues after 2 elements.
  const auto four = referenceNormal(MLUOP_DTYPE_DOUBLE, {{4}, {}}, 17, 0, 0.0, 1.0);
  expectSame(referenceNormal(MLUOP_DTYPE_DOUBLE, {{2}, {}}, 17, 1, 0.0, 1.0),
             std::vector<double>(four.begin() + 2, four.end()));
}

TEST(Normal, Statistics) {
  Handle handle;
  const std::int64_t n = 20000;
  Tensor y = Tensor::device(MLUOP_DTYPE_FLOAT, {n});
  ASSERT_EQ(mluopRandNormal(handle, 2024, 0, 0.0, 1.0, y.desc(), y.data()), MLUOP_STATUS_SUCCESS);
  handle.sync();
  double sum = 0, sum_sq = 0;
  for (double v : y.values()) {
    sum += v;
    sum_sq += v * v;
  }
  const double mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.03);
  EXPECT_NEAR(std::sqrt(sum_sq / n - mean * mean), 1.0, 0.03);
}

// The degenerate ranges PyTorch accepts: uniform_(a, a) and normal_(mean, 0) give a and mean everywhere,
// on the device and in the reference.
TEST(Random, DegenerateRangesGiveTheirOneValue) {
  Handle handle;
  for (const mluopDataType_t dtype : {MLUOP_DTYPE_FLOAT, MLUOP_DTYPE_HALF, MLUOP_DTYPE_BFLOAT16}) {
    Tensor y = Tensor::device(dtype, {37}), n = Tensor::device(dtype, {37});
    ASSERT_EQ(mluopRandUniform(handle, 9, 0, 1.5, 1.5, y.desc(), y.data()), MLUOP_STATUS_SUCCESS)
        << lastError();
    ASSERT_EQ(mluopRandNormal(handle, 9, 0, -2.25, 0.0, n.desc(), n.data()), MLUOP_STATUS_SUCCESS)
        << lastError();
    handle.sync();
    expectSame(y.values(), std::vector<double>(37, 1.5), name(dtype) + " uniform");
    expectSame(n.values(), std::vector<double>(37, -2.25), name(dtype) + " normal");
  }
  Tensor hy = Tensor::host(MLUOP_DTYPE_DOUBLE, {5}), hn = Tensor::host(MLUOP_DTYPE_DOUBLE, {5});
  mlu::uniform_args u;
  u.low = u.high = -0.75;
  u.y = hy.view();
  ASSERT_TRUE(mlu::reference::run(u).ok());
  expectSame(hy.values(), std::vector<double>(5, -0.75), "reference uniform");
  mlu::normal_args g;
  g.mean = 3;
  g.std = 0;
  g.y = hn.view();
  ASSERT_TRUE(mlu::reference::run(g).ok());
  expectSame(hn.values(), std::vector<double>(5, 3.0), "reference normal");
}

// normal with tensor mean and std (DIOPI's normal_mean_tensor / normal_std_tensor / normal_tensor): element
// i is mean[i] + std[i] z_i with z_i the standard normal `normal` draws for element i, so against
// normal(0, 1) of the same seed and offset the result is known exactly; mean and std broadcast.
mluopStatus_t deviceNormalTensor(mluopHandle_t h, std::uint64_t seed, std::uint64_t offset,
                                 const Tensor& mean, const Tensor& std, const Tensor& y) {
  return mluopRandNormalTensor(h, seed, offset, mean.desc(), mean.data(), std.desc(), std.data(), y.desc(),
                               y.data());
}

mlu::Status referenceNormalTensor(std::uint64_t seed, std::uint64_t offset, const Tensor& mean,
                                  const Tensor& std, const Tensor& y) {
  mlu::normal_tensor_args a;
  a.seed = seed;
  a.offset = offset;
  a.mean = mean.view();
  a.std = std.view();
  a.y = y.view();
  return mlu::reference::run(a);
}

TEST(NormalTensor, IsMeanPlusStdTimesTheStandardNormal) {
  Handle handle;
  struct Case {
    Dims mean, std, y;
  };
  const std::vector<Case> cases = {
      {{}, {5, 7}, {5, 7}},      // scalar mean, tensor std
      {{5, 7}, {}, {5, 7}},      // tensor mean, scalar std
      {{5, 1}, {1, 7}, {5, 7}},  // both, broadcast against each other
      {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
      {{0, 4}, {4}, {0, 4}},     // empty
      {{1000}, {1000}, {1000}},  // several rows of cores
  };
  std::uint32_t seed = 90;
  for (const mluopDataType_t dtype : kFloatTypes) {
    for (const Case& c : cases) {
      const std::string what =
          name(dtype) + " mean " + testing::PrintToString(c.mean) + " std " + testing::PrintToString(c.std);
      const std::vector<double> mv = randomValues(numel(c.mean), seed++, -3, 3);
      const std::vector<double> sv = randomValues(numel(c.std), seed++, 0, 2);
      Tensor mean = Tensor::device(dtype, c.mean, mv), sd = Tensor::device(dtype, c.std, sv);
      Tensor y = Tensor::device(dtype, c.y), z = Tensor::device(MLUOP_DTYPE_FLOAT, c.y);
      ASSERT_EQ(deviceNormalTensor(handle, 11, 6, mean, sd, y), MLUOP_STATUS_SUCCESS)
          << what << ": " << lastError();
      ASSERT_EQ(mluopRandNormal(handle, 11, 6, 0.0, 1.0, z.desc(), z.data()), MLUOP_STATUS_SUCCESS);
      Tensor hmean = Tensor::host(dtype, c.mean, mv), hsd = Tensor::host(dtype, c.std, sv),
             hy = Tensor::host(dtype, c.y);
      const mlu::Status status = referenceNormalTensor(11, 6, hmean, hsd, hy);
      ASSERT_TRUE(status.ok()) << what << ": " << status.message;
      const std::vector<double> hz = referenceNormal(MLUOP_DTYPE_DOUBLE, {c.y, {}}, 11, 6, 0.0, 1.0);
      handle.sync();
      // mean + std * z from the broadcast values, z the device's (or the reference's) standard normal
      const Tensor m_rounded = Tensor::host(dtype, c.mean, mv), s_rounded = Tensor::host(dtype, c.std, sv);
      const std::vector<double> m = m_rounded.values(), sdv = s_rounded.values(), zd = z.values();
      std::vector<double> expect_device(zd.size()), expect_reference(zd.size());
      const std::int64_t cols = c.y.empty() ? 1 : c.y.back();
      for (std::size_t i = 0; i < zd.size(); ++i) {
        const auto at = [&](const Dims& dims, const std::vector<double>& v) {
          if (dims.empty()) return v[0];
          if (dims == c.y) return v[i];
          // [5, 1] or [1, 7] against [5, 7]; [4] against [0, 4] never reached
          return dims[0] == 1 ? v[i % static_cast<std::size_t>(cols)] : v[i / static_cast<std::size_t>(cols)];
        };
        expect_device[i] = at(c.mean, m) + at(c.std, sdv) * zd[i];
        expect_reference[i] = at(c.mean, m) + at(c.std, sdv) * hz[i];
      }
      expectNear(y.values(), roundedTo(dtype, expect_device), toleranceFor(dtype), what + " device");
      expectNear(hy.values(), roundedTo(dtype, expect_reference), {1e-12, 1e-12}, what + " reference");
      expectNear(y.values(), hy.values(), toleranceFor(dtype), what + " device vs reference");
    }
  }
  // a negative std gives NaN (PyTorch raises; the kernel cannot); std 0 gives the mean
  Tensor mean = Tensor::device(MLUOP_DTYPE_FLOAT, {3}, {1, 2, 3}),
         sd = Tensor::device(MLUOP_DTYPE_FLOAT, {3}, {-1, 0, 0});
  Tensor y = Tensor::device(MLUOP_DTYPE_FLOAT, {3});
  ASSERT_EQ(deviceNormalTensor(handle, 1, 0, mean, sd, y), MLUOP_STATUS_SUCCESS);
  handle.sync();
  const std::vector<double> v = y.values();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], 2);
  EXPECT_EQ(v[2], 3);
  // what is refused
  Tensor y4 = Tensor::device(MLUOP_DTYPE_FLOAT, {4}), m5 = Tensor::device(MLUOP_DTYPE_FLOAT, {5});
  expectBadParam(deviceNormalTensor(handle, 0, 0, m5, sd, y4),
                 "normal_tensor: mean has shape [5], which does not broadcast to y's shape [4]");
  Tensor h3 = Tensor::device(MLUOP_DTYPE_HALF, {3});
  expectBadParam(deviceNormalTensor(handle, 0, 0, mean, h3, y), "std is float16 but y is float32");
  Tensor i3 = Tensor::device(MLUOP_DTYPE_INT32, {3});
  EXPECT_EQ(deviceNormalTensor(handle, 0, 0, i3, i3, i3), MLUOP_STATUS_NOT_SUPPORTED);
}

TEST(Random, BadParams) {
  Handle handle;
  Tensor y = Tensor::device(MLUOP_DTYPE_FLOAT, {4});
  expectBadParam(mluopRandUniform(handle, 0, 0, 2.0, 1.0, y.desc(), y.data()),
                 "uniform: low = 2 is above high = 1");
  expectBadParam(mluopRandUniform(handle, 0, 0, 0.0, kInf, y.desc(), y.data()),
                 "low = 0 and high = inf must be finite");
  expectBadParam(mluopRandNormal(handle, 0, 0, 0.0, -1.0, y.desc(), y.data()),
                 "normal: std = -1 must be finite and >= 0");
  expectBadParam(mluopRandNormal(handle, 0, 0, 0.0, kInf, y.desc(), y.data()), "std = inf must be finite");
  expectBadParam(mluopRandNormal(handle, 0, 0, kNaN, 1.0, y.desc(), y.data()), "mean = nan must be finite");
  Tensor overlapping = Tensor::device(MLUOP_DTYPE_FLOAT, {4}, {}, {0});
  expectBadParam(mluopRandUniform(handle, 0, 0, 0.0, 1.0, overlapping.desc(), overlapping.data()),
                 "y (shape [4], strides [0]) overlaps itself");
  Tensor half = Tensor::device(MLUOP_DTYPE_HALF, {4});
  expectBadParam(mluopRandUniform(handle, 0, 0, -1e5, 1e5, half.desc(), half.data()),
                 "[low, high) = [-100000, 100000) is wider than the largest float16 value 65504");
  Tensor ints = Tensor::device(MLUOP_DTYPE_INT32, {4});
  expectError(mluopRandNormal(handle, 0, 0, 0.0, 1.0, ints.desc(), ints.data()), MLUOP_STATUS_NOT_SUPPORTED,
              "y is int32, which is not supported");
}

// ---------------------------------------------------------------------------------------------------------
// sgd_step
// ---------------------------------------------------------------------------------------------------------

struct SgdResult {
  std::vector<double> param, buffer;
};

// torch.optim.SGD's hyper-parameters of one step.
struct Sgd {
  float lr = 0.1f, momentum = 0.0f, dampening = 0.0f, weight_decay = 0.0f;
  bool nesterov = false, init_buffer = false;
};

std::string describe(const Sgd& h) {
  return "lr " + std::to_string(h.lr) + " momentum " + std::to_string(h.momentum) + " dampening " +
         std::to_string(h.dampening) + " wd " + std::to_string(h.weight_decay) +
         (h.nesterov ? " nesterov" : "") + (h.init_buffer ? " init" : "");
}

mluopStatus_t deviceSgd(mluopHandle_t handle, const Sgd& h, const Tensor& p, const Tensor& g,
                        const Tensor* b) {
  return mluopSgdStep(handle, h.lr, h.momentum, h.dampening, h.weight_decay, h.nesterov, h.init_buffer,
                      p.desc(), p.data(), g.desc(), g.data(), b ? b->desc() : nullptr,
                      b ? b->data() : nullptr);
}

SgdResult referenceSgd(mluopDataType_t dtype, const Layout& layout, const std::vector<double>& param,
                       const std::vector<double>& grad, const std::vector<double>* buffer, const Sgd& h) {
  Tensor p = hostTensor(dtype, layout, param), g = hostTensor(dtype, {layout.dims, {}}, grad);
  Tensor b = hostTensor(dtype, {layout.dims, {}}, buffer ? *buffer : std::vector<double>{});
  mlu::sgd_step_args args;
  args.lr = h.lr;
  args.momentum = h.momentum;
  args.dampening = h.dampening;
  args.weight_decay = h.weight_decay;
  args.nesterov = h.nesterov;
  args.init_buffer = h.init_buffer;
  args.param = p.view();
  args.grad = g.view();
  if (buffer != nullptr) args.momentum_buffer = b.view();
  const mlu::Status s = mlu::reference::run(args);
  EXPECT_TRUE(s.ok()) << s.message;
  return {p.values(), buffer ? b.values() : std::vector<double>{}};
}

// The hyper-parameter grid of DIOPI's sgd cases: plain, momentum with and without dampening (also above
// 1 and negative), nesterov, the first step (init_buffer) and a step without a buffer to keep.
std::vector<std::pair<Sgd, bool>> sgdCases() {  // (hyper-parameters, whether a buffer is passed)
  std::vector<std::pair<Sgd, bool>> cases;
  cases.push_back({Sgd{0.1f, 0.0f, 0.0f, 0.01f, false, false}, false});
  cases.push_back({Sgd{0.1f, 0.9f, 0.0f, 0.01f, false, false}, true});
  cases.push_back({Sgd{0.05f, 0.5f, 0.0f, 0.0f, true, false}, true});
  cases.push_back({Sgd{0.1f, 0.01f, 0.1f, 0.1f, false, false}, true});
  cases.push_back({Sgd{0.07f, 1.2f, 6.5f, 5.0f, false, false}, true});
  cases.push_back({Sgd{0.001f, 0.3f, -0.5f, 0.5f, false, false}, true});
  cases.push_back({Sgd{0.1f, 0.9f, 0.3f, 0.0f, false, true}, true});
  cases.push_back({Sgd{0.1f, 0.01f, 0.1f, 0.0f, false, false}, false});  // DIOPI's sgd_without_buf
  cases.push_back({Sgd{0.1f, 0.01f, 0.0f, 0.1f, true, false}, false});
  return cases;
}

TEST(SgdStep, DeviceMatchesReference) {
  Handle handle;
  for (mluopDataType_t dtype : kFloatTypes) {
    for (const Layout& layout : unaryLayouts()) {
      for (const auto& [h, with_buffer] : sgdCases()) {
        if (isLarge(layout) && h.momentum != 0.9f) continue;
        const std::string what =
            name(dtype) + " " + describe(layout) + " " + describe(h) + (with_buffer ? "" : " no buffer");
        const auto pv = randomValues(numel(layout.dims), 51), gv = randomValues(numel(layout.dims), 52);
        const auto bv = randomValues(numel(layout.dims), 53);
        Tensor p = deviceTensor(dtype, layout, pv), g = deviceTensor(dtype, {layout.dims, {}}, gv);
        Tensor b = deviceTensor(dtype, {layout.dims, {}}, bv);
        ASSERT_EQ(deviceSgd(handle, h, p, g, with_buffer ? &b : nullptr), MLUOP_STATUS_SUCCESS)
            << what << ": " << lastError();
        handle.sync();
        const SgdResult ref = referenceSgd(dtype, layout, pv, gv, with_buffer ? &bv : nullptr, h);
        // lr * (d + m buf) with momentum and weight decay up to 6.5: scale the tolerance with them.
        Tolerance tol = toleranceFor(dtype);
        tol.atol *= 1.0 + h.momentum * (1.0 + std::fabs(h.dampening)) + h.weight_decay;
        expectNear(p.values(), ref.param, tol, what + " param");
        if (with_buffer) expectNear(b.values(), ref.buffer, tol, what + " buffer");
      }
    }
  }
}

TEST(SgdStep, ReferenceMatchesHandWorkedValues) {
  // d = grad + 0.01 param = [0.51, -0.98]; buffer = 0.9 [0.2, 0.3] + d = [0.69, -0.71];
  // param -= 0.1 buffer -> [0.931, 2.071].
  const std::vector<double> buffer = {0.2, 0.3};
  const Layout two{{2}, {}};
  const SgdResult r =
      referenceSgd(MLUOP_DTYPE_DOUBLE, two, {1, 2}, {0.5, -1}, &buffer, Sgd{0.1f, 0.9f, 0.0f, 0.01f});
  // lr, momentum and weight_decay are float32 scalars: compare at float32 precision.
  expectNear(r.buffer, {0.69, -0.71}, {1e-7, 1e-7});
  expectNear(r.param, {0.931, 2.071}, {1e-7, 1e-7});
  // dampening 0.5: buffer = 0.9 [0.2, 0.3] + 0.5 d = [0.435, -0.22]; param -= 0.1 buffer -> [0.9565, 2.022]
  const SgdResult damped =
      referenceSgd(MLUOP_DTYPE_DOUBLE, two, {1, 2}, {0.5, -1}, &buffer, Sgd{0.1f, 0.9f, 0.5f, 0.01f});
  expectNear(damped.buffer, {0.435, -0.22}, {1e-7, 1e-7});
  expectNear(damped.param, {0.9565, 2.022}, {1e-7, 1e-7});
  // nesterov: buffer as plain momentum [0.69, -0.71]; step along d + 0.9 buffer = [1.131, -1.619]
  // -> param [0.8869, 2.1619]
  const SgdResult nesterov =
      referenceSgd(MLUOP_DTYPE_DOUBLE, two, {1, 2}, {0.5, -1}, &buffer, Sgd{0.1f, 0.9f, 0.0f, 0.01f, true});
  expectNear(nesterov.buffer, {0.69, -0.71}, {1e-7, 1e-7});
  expectNear(nesterov.param, {0.8869, 2.1619}, {1e-7, 1e-7});
  // the first step (init_buffer): buffer = d whatever it held, dampening not applied -> param -= 0.1 d
  const SgdResult first = referenceSgd(MLUOP_DTYPE_DOUBLE, two, {1, 2}, {0.5, -1}, &buffer,
                                       Sgd{0.1f, 0.9f, 0.5f, 0.01f, false, true});
  expectNear(first.buffer, {0.51, -0.98}, {1e-7, 1e-7});
  expectNear(first.param, {0.949, 2.098}, {1e-7, 1e-7});
  // no buffer with momentum: the first step, the buffer not kept
  const SgdResult unkept =
      referenceSgd(MLUOP_DTYPE_DOUBLE, two, {1, 2}, {0.5, -1}, nullptr, Sgd{0.1f, 0.9f, 0.5f, 0.01f});
  expectNear(unkept.param, {0.949, 2.098}, {1e-7, 1e-7});
  // Plain SGD: param -= 0.5 grad.
  const SgdResult plain = referenceSgd(MLUOP_DTYPE_DOUBLE, {{3}, {}}, {1, 2, 3}, {0.5, -1, 0}, nullptr,
                                       Sgd{0.5f, 0.0f, 0.0f, 0.0f});
  expectSame(plain.param, {0.75, 2.5, 3});
}

TEST(SgdStep, BadParams) {
  Handle handle;
  Tensor p = Tensor::device(MLUOP_DTYPE_FLOAT, {3}), g = Tensor::device(MLUOP_DTYPE_FLOAT, {3});
  Tensor b = Tensor::device(MLUOP_DTYPE_FLOAT, {3});
  expectBadParam(deviceSgd(handle, Sgd{-0.1f}, p, g, nullptr), "lr = -0.1 must be non-negative");
  expectBadParam(deviceSgd(handle, Sgd{0.1f, -0.5f}, p, g, &b), "momentum = -0.5 must be non-negative");
  expectBadParam(deviceSgd(handle, Sgd{0.1f, 0.0f, 0.0f, -1.0f}, p, g, nullptr),
                 "weight_decay = -1 must be non-negative");
  expectBadParam(deviceSgd(handle, Sgd{0.1f, 0.9f, std::numeric_limits<float>::infinity()}, p, g, &b),
                 "dampening = inf must be finite");
  expectBadParam(
      deviceSgd(handle, Sgd{0.1f, 0.9f, 0.1f, 0.0f, true}, p, g, &b),
      "sgd_step: nesterov needs a positive momentum and zero dampening (momentum = 0.9, dampening = 0.1)");
  expectBadParam(deviceSgd(handle, Sgd{0.1f, 0.0f, 0.0f, 0.0f, true}, p, g, nullptr),
                 "nesterov needs a positive momentum and zero dampening (momentum = 0");
  Tensor g2 = Tensor::device(MLUOP_DTYPE_FLOAT, {2});
  expectBadParam(deviceSgd(handle, Sgd{}, p, g2, nullptr),
                 "grad has shape [2] but param has shape [3]; they must be equal");
  Tensor gh = Tensor::device(MLUOP_DTYPE_HALF, {3});
  expectBadParam(deviceSgd(handle, Sgd{}, p, gh, nullptr),
                 "grad is float16 but param is float32; they must have the same dtype");
  Tensor bh = Tensor::device(MLUOP_DTYPE_HALF, {3});
  expectBadParam(deviceSgd(handle, Sgd{0.1f, 0.9f}, p, g, &bh),
                 "momentum_buffer is float16 but param is float32");
  Tensor b4 = Tensor::device(MLUOP_DTYPE_FLOAT, {4});
  expectBadParam(deviceSgd(handle, Sgd{0.1f, 0.9f}, p, g, &b4),
                 "momentum_buffer has shape [4] but param has shape [3]");
  Tensor overlapping = Tensor::device(MLUOP_DTYPE_FLOAT, {3}, {}, {0});
  expectBadParam(deviceSgd(handle, Sgd{}, overlapping, g, nullptr),
                 "param (shape [3], strides [0]) overlaps itself");
}

// ---------------------------------------------------------------------------------------------------------
// float64: NOT_SUPPORTED on the device, for every op of the family
// ---------------------------------------------------------------------------------------------------------

TEST(Float64, DeviceRefusesEveryOp) {
  Handle handle;
  const mluopDataType_t f64 = MLUOP_DTYPE_DOUBLE;
  Tensor a = Tensor::device(f64, {2, 3}), b = Tensor::device(f64, {2, 3}), c = Tensor::device(f64, {2, 3});
  Tensor t = Tensor::device(f64, {3, 2}), f = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3});
  Tensor mask = Tensor::device(MLUOP_DTYPE_UINT8, {2, 3});
  const int dims[] = {1, 0};
  std::vector<std::pair<std::string, mluopStatus_t>> calls = {
      {"fill", mluopFill(handle, 1.0, c.desc(), c.data())},
      {"copy", mluopCopy(handle, f.desc(), f.data(), c.desc(), c.data())},
      {"permute", mluopPermute(handle, dims, 2, a.desc(), a.data(), t.desc(), t.data())},
      {"add", mluopAdd(handle, 1.0f, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data())},
      {"sub", mluopSub(handle, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data())},
      {"mul", mluopMul(handle, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data())},
      {"div", mluopDiv(handle, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data())},
      {"maximum", mluopMaximum(handle, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data())},
      {"minimum", mluopMinimum(handle, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data())},
      {"relu_backward",
       mluopReluBackward(handle, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data())},
      {"sigmoid_backward",
       mluopSigmoidBackward(handle, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data())},
      {"tanh_backward",
       mluopTanhBackward(handle, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data())},
      {"dropout_forward", mluopDropoutForward(handle, 0.5f, 0, 0, a.desc(), a.data(), c.desc(), c.data(),
                                              mask.desc(), mask.data())},
      {"dropout_backward",
       mluopDropoutBackward(handle, 0.5f, a.desc(), a.data(), mask.desc(), mask.data(), c.desc(), c.data())},
      {"uniform", mluopRandUniform(handle, 0, 0, 0.0, 1.0, c.desc(), c.data())},
      {"normal", mluopRandNormal(handle, 0, 0, 0.0, 1.0, c.desc(), c.data())},
      {"sgd_step", mluopSgdStep(handle, 0.1f, 0.9f, 0.0f, 0.0f, false, false, a.desc(), a.data(), b.desc(),
                                b.data(), c.desc(), c.data())},
  };
  for (const UnaryCase& op : unaryCases()) {
    calls.emplace_back(op.name, op.device(handle, a.desc(), a.data(), c.desc(), c.data()));
  }
  for (const BackwardCase& op : backwardCases()) {
    calls.emplace_back(op.name,
                       op.device(handle, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data()));
  }
  for (const BinaryCase& op : binaryCases()) {
    calls.emplace_back(op.name,
                       op.device(handle, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data()));
  }
  for (const auto& [op, status] : calls) EXPECT_EQ(status, MLUOP_STATUS_NOT_SUPPORTED) << op;
  // And the message says why.
  EXPECT_EQ(mluopExp(handle, a.desc(), a.data(), c.desc(), c.data()), MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("exp: x is float64, which the device does not support"));
}

// ---------------------------------------------------------------------------------------------------------
// Device behaviour: asynchronous, deterministic
// ---------------------------------------------------------------------------------------------------------

TEST(DeviceBehaviour, KernelsAreDeterministic) {
  Handle handle;
  const std::int64_t n = 100000;
  const auto values = randomValues(n, 61, -5, 5);
  Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {n}, values);
  Tensor y1 = Tensor::device(MLUOP_DTYPE_FLOAT, {n}), y2 = Tensor::device(MLUOP_DTYPE_FLOAT, {n});
  Tensor m1 = Tensor::device(MLUOP_DTYPE_UINT8, {n}), m2 = Tensor::device(MLUOP_DTYPE_UINT8, {n});
  ASSERT_EQ(mluopSigmoid(handle, x.desc(), x.data(), y1.desc(), y1.data()), MLUOP_STATUS_SUCCESS);
  ASSERT_EQ(mluopSigmoid(handle, x.desc(), x.data(), y2.desc(), y2.data()), MLUOP_STATUS_SUCCESS);
  handle.sync();
  expectSame(y1.values(), y2.values(), "sigmoid");
  ASSERT_EQ(
      mluopDropoutForward(handle, 0.5f, 3, 0, x.desc(), x.data(), y1.desc(), y1.data(), m1.desc(), m1.data()),
      MLUOP_STATUS_SUCCESS);
  ASSERT_EQ(
      mluopDropoutForward(handle, 0.5f, 3, 0, x.desc(), x.data(), y2.desc(), y2.data(), m2.desc(), m2.data()),
      MLUOP_STATUS_SUCCESS);
  handle.sync();
  expectSame(m1.values(), m2.values(), "dropout mask");
  expectSame(y1.values(), y2.values(), "dropout");
}

TEST(DeviceBehaviour, OpsChainOnTheQueue) {
  // Each op is enqueued without waiting; later ops see earlier results: y = relu(x * 2 - 1).
  Handle handle;
  const std::int64_t n = 5000;
  const auto values = randomValues(n, 62);
  Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {n}, values), y = Tensor::device(MLUOP_DTYPE_FLOAT, {n});
  ASSERT_EQ(mluopMulScalar(handle, x.desc(), x.data(), 2.0, y.desc(), y.data()), MLUOP_STATUS_SUCCESS);
  ASSERT_EQ(mluopAddScalar(handle, y.desc(), y.data(), -1.0, y.desc(), y.data()), MLUOP_STATUS_SUCCESS);
  ASSERT_EQ(mluopRelu(handle, y.desc(), y.data(), y.desc(), y.data()), MLUOP_STATUS_SUCCESS);
  handle.sync();
  std::vector<double> expected;
  for (double v : roundedTo(MLUOP_DTYPE_FLOAT, values))
    expected.push_back(std::max(0.0, static_cast<double>(static_cast<float>(v * 2) - 1.0f)));
  expectSame(y.values(), expected);
}

}  // namespace
