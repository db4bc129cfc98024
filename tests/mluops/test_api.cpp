// Tests of the kernel library's API apart from the ops' numerics: errors, dtypes and the float16/bfloat16
// conversions, handles, tensor and convolution descriptors, the schema's exported symbols, the checks every
// op entry point makes, and the MLU_SIM_FAULT fault injection (through a child process).
#include "op_harness.h"

#include <mlu/dtype.h>
#include <mlu/op_args.h>

#include <gmock/gmock.h>

#include <dlfcn.h>
#include <sys/wait.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include "test_paths.h"

namespace {

using optest::Dims;
using ::testing::HasSubstr;

std::string lastMessage() { return mluopGetLastErrorMessage(); }

// ---- errors and dtypes ----

TEST(MluopErrors, EveryStatusHasItsName) {
  EXPECT_STREQ(mluopGetErrorString(MLUOP_STATUS_SUCCESS), "MLUOP_STATUS_SUCCESS");
  EXPECT_STREQ(mluopGetErrorString(MLUOP_STATUS_BAD_PARAM), "MLUOP_STATUS_BAD_PARAM");
  EXPECT_STREQ(mluopGetErrorString(MLUOP_STATUS_NOT_SUPPORTED), "MLUOP_STATUS_NOT_SUPPORTED");
  EXPECT_STREQ(mluopGetErrorString(MLUOP_STATUS_EXECUTION_FAILED), "MLUOP_STATUS_EXECUTION_FAILED");
  EXPECT_STREQ(mluopGetErrorString(static_cast<mluopStatus_t>(77)), "MLUOP_STATUS_UNKNOWN");
}

TEST(MluopDtypes, SizesAndNames) {
  const std::array<std::pair<mluopDataType_t, size_t>, 10> sizes{{{MLUOP_DTYPE_FLOAT, 4},
                                                                  {MLUOP_DTYPE_HALF, 2},
                                                                  {MLUOP_DTYPE_BFLOAT16, 2},
                                                                  {MLUOP_DTYPE_DOUBLE, 8},
                                                                  {MLUOP_DTYPE_INT8, 1},
                                                                  {MLUOP_DTYPE_INT16, 2},
                                                                  {MLUOP_DTYPE_INT32, 4},
                                                                  {MLUOP_DTYPE_INT64, 8},
                                                                  {MLUOP_DTYPE_UINT8, 1},
                                                                  {MLUOP_DTYPE_BOOL, 1}}};
  for (auto [dtype, size] : sizes) EXPECT_EQ(mluopGetSizeOfDataType(dtype), size) << dtype;
  EXPECT_EQ(mluopGetSizeOfDataType(MLUOP_DTYPE_INVALID), 0u);
  EXPECT_STREQ(mluopGetNameOfDataType(MLUOP_DTYPE_BFLOAT16), "bfloat16");
  EXPECT_STREQ(mluopGetNameOfDataType(MLUOP_DTYPE_HALF), "float16");
  EXPECT_STREQ(mluopGetNameOfDataType(static_cast<mluopDataType_t>(99)), "invalid");
}

// Rounds a float to the nearest value of a format with `mantissa` bits and minimum normal exponent `emin`,
// ties to even, computed independently in float64 (exact for these formats).
double roundToFormat(double x, int mantissa, int emin, double max_finite) {
  if (std::isnan(x) || x == 0) return x;
  const double ax = std::fabs(x);
  const int e = std::max(std::ilogb(ax), emin);
  const double quantum = std::ldexp(1.0, e - mantissa);
  double r = std::nearbyint(ax / quantum) * quantum;  // default rounding mode: ties to even
  if (r > max_finite) {
    // Past the largest finite value: inf when x is at least halfway to the next power of two's step.
    const double halfway = max_finite + quantum / 2;
    r = ax >= halfway ? INFINITY : max_finite;
  }
  return std::copysign(r, x);
}

TEST(MluopDtypes, HalfConversionRoundTripsEveryValueAndRoundsToNearestEven) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float f = mluopHalfToFloat(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(mluopHalfToFloat(mluopFloatToHalf(f)))) << bits;
      continue;
    }
    ASSERT_EQ(mluopFloatToHalf(f), h) << "bits " << bits;
  }
  // Values between representable halves, against an independent float64 rounding.
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> exponent(-26, 17);
  for (int i = 0; i < 200000; ++i) {
    const float x = static_cast<float>(std::exp2(exponent(gen)) * (gen() % 2 ? 1 : -1));
    const double expected = roundToFormat(x, 10, -14, 65504.0);
    ASSERT_EQ(static_cast<double>(mluopHalfToFloat(mluopFloatToHalf(x))), expected) << "x = " << x;
  }
  EXPECT_EQ(mluopFloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(mluopFloatToHalf(65520.0f), 0x7c00);  // halfway to the next step: rounds to even, i.e. inf
  EXPECT_EQ(mluopFloatToHalf(-INFINITY), 0xfc00);
  EXPECT_EQ(mluopFloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie with 0: even
  EXPECT_EQ(mluopFloatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)),
            0x0001);                                                      // just above: smallest subnormal
  EXPECT_EQ(mluopFloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie: even (1.0)
  EXPECT_EQ(mluopFloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie: even (upwards)
}

TEST(MluopDtypes, Bfloat16ConversionRoundTripsAndRoundsToNearestEven) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const auto b = static_cast<std::uint16_t>(bits);
    const float f = mluopBfloat16ToFloat(b);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(mluopBfloat16ToFloat(mluopFloatToBfloat16(f))));
      continue;
    }
    ASSERT_EQ(mluopFloatToBfloat16(f), b) << "bits " << bits;
  }
  std::mt19937 gen(11);
  std::uniform_real_distribution<double> exponent(-120, 120);
  const double max_bf16 = static_cast<double>(std::bit_cast<float>(0x7f7f0000u));
  for (int i = 0; i < 200000; ++i) {
    const float x = static_cast<float>(std::exp2(exponent(gen)) * (1 + (gen() % 1000) / 997.0));
    ASSERT_EQ(static_cast<double>(mluopBfloat16ToFloat(mluopFloatToBfloat16(x))),
              roundToFormat(x, 7, -126, max_bf16))
        << "x = " << x;
  }
  EXPECT_EQ(mluopFloatToBfloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie: even
  EXPECT_EQ(mluopFloatToBfloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie: even
}

// ---- handles ----

TEST(MluopHandle, BindsToTheCurrentDeviceAndChecksItsQueue) {
  EXPECT_EQ(mluopCreate(nullptr), MLUOP_STATUS_BAD_PARAM);
  ASSERT_EQ(mlurtSetDevice(1), MLURT_SUCCESS);
  mluopHandle_t h = nullptr;
  ASSERT_EQ(mluopCreate(&h), MLUOP_STATUS_SUCCESS);
  ASSERT_EQ(mlurtSetDevice(0), MLURT_SUCCESS);

  mlurtQueue_t q = nullptr;
  ASSERT_EQ(mluopGetQueue(h, &q), MLUOP_STATUS_SUCCESS);
  int device = -1;
  ASSERT_EQ(mlurtQueueGetDevice(q, &device), MLURT_SUCCESS);
  EXPECT_EQ(device, 1);  // the default queue of device 1

  mlurtQueue_t on_device0 = nullptr;
  ASSERT_EQ(mlurtQueueCreate(&on_device0), MLURT_SUCCESS);
  EXPECT_EQ(mluopSetQueue(h, on_device0), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("device 0 but the handle on device 1"));
  EXPECT_EQ(mluopSetQueue(h, reinterpret_cast<mlurtQueue_t>(std::uintptr_t{0xdead0})),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("not a live queue"));
  EXPECT_EQ(mluopSetQueue(nullptr, nullptr), MLUOP_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(mluopGetQueue(h, nullptr), MLUOP_STATUS_BAD_PARAM);
  EXPECT_EQ(mluopDestroy(h), MLUOP_STATUS_SUCCESS);
  EXPECT_EQ(mluopDestroy(nullptr), MLUOP_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(mlurtQueueDestroy(on_device0), MLURT_SUCCESS);
}

// ---- descriptors ----

TEST(MluopTensorDescriptor, SetAndGetRoundTrip) {
  mluopTensorDescriptor_t d = nullptr;
  ASSERT_EQ(mluopCreateTensorDescriptor(&d), MLUOP_STATUS_SUCCESS);
  const int64_t dims[4] = {2, 3, 4, 5};
  ASSERT_EQ(mluopSetTensorDescriptor(d, MLUOP_LAYOUT_NCHW, MLUOP_DTYPE_HALF, 4, dims), MLUOP_STATUS_SUCCESS);
  mluopTensorLayout_t layout;
  mluopDataType_t dtype;
  int nd = 0;
  int64_t got_dims[8], strides[8];
  ASSERT_EQ(mluopGetTensorDescriptor(d, &layout, &dtype, &nd, got_dims, strides), MLUOP_STATUS_SUCCESS);
  EXPECT_EQ(layout, MLUOP_LAYOUT_NCHW);
  EXPECT_EQ(dtype, MLUOP_DTYPE_HALF);
  ASSERT_EQ(nd, 4);
  EXPECT_THAT(std::vector<int64_t>(got_dims, got_dims + 4), ::testing::ElementsAre(2, 3, 4, 5));
  EXPECT_THAT(std::vector<int64_t>(strides, strides + 4), ::testing::ElementsAre(60, 20, 5, 1));
  int64_t count = 0;
  ASSERT_EQ(mluopGetTensorElementCount(d, &count), MLUOP_STATUS_SUCCESS);
  EXPECT_EQ(count, 120);

  const int64_t dims2[2] = {3, 4};
  const int64_t st2[2] = {1, 3};  // a transposed view
  ASSERT_EQ(mluopSetTensorDescriptorEx(d, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 2, dims2, st2),
            MLUOP_STATUS_SUCCESS);
  ASSERT_EQ(mluopGetTensorDescriptor(d, nullptr, nullptr, &nd, got_dims, strides), MLUOP_STATUS_SUCCESS);
  EXPECT_EQ(nd, 2);
  EXPECT_EQ(strides[0], 1);
  EXPECT_EQ(strides[1], 3);

  ASSERT_EQ(mluopSetTensorDescriptor(d, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 0, nullptr),
            MLUOP_STATUS_SUCCESS);
  ASSERT_EQ(mluopGetTensorElementCount(d, &count), MLUOP_STATUS_SUCCESS);
  EXPECT_EQ(count, 1);  // a 0-d tensor is a scalar
  EXPECT_EQ(mluopDestroyTensorDescriptor(d), MLUOP_STATUS_SUCCESS);
}

TEST(MluopTensorDescriptor, RejectsBadValuesWithAMessage) {
  mluopTensorDescriptor_t d = nullptr;
  ASSERT_EQ(mluopCreateTensorDescriptor(&d), MLUOP_STATUS_SUCCESS);
  const int64_t dims[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(mluopSetTensorDescriptor(d, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 9, dims),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("9 dims; a tensor has 0 to 8"));
  EXPECT_EQ(mluopSetTensorDescriptor(d, MLUOP_LAYOUT_ARRAY, static_cast<mluopDataType_t>(42), 1, dims),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("unknown dtype 42"));
  EXPECT_EQ(mluopSetTensorDescriptor(d, static_cast<mluopTensorLayout_t>(5), MLUOP_DTYPE_FLOAT, 1, dims),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("unknown layout 5"));
  EXPECT_EQ(mluopSetTensorDescriptor(d, MLUOP_LAYOUT_NHWC, MLUOP_DTYPE_FLOAT, 3, dims),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("layout NHWC needs 4 dims, got 3"));
  const int64_t negative[2] = {2, -1};
  EXPECT_EQ(mluopSetTensorDescriptor(d, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 2, negative),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("dims[1] = -1 is negative"));
  const int64_t bad_strides[2] = {1, -3};
  EXPECT_EQ(mluopSetTensorDescriptorEx(d, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 2, dims, bad_strides),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("strides[1] = -3 is negative"));
  EXPECT_EQ(mluopSetTensorDescriptorEx(d, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 2, dims, nullptr),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("strides is NULL"));
  EXPECT_EQ(mluopSetTensorDescriptor(d, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 2, nullptr),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("dims is NULL"));
  EXPECT_EQ(mluopSetTensorDescriptor(nullptr, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 1, dims),
            MLUOP_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(mluopCreateTensorDescriptor(nullptr), MLUOP_STATUS_BAD_PARAM);
  EXPECT_EQ(mluopDestroyTensorDescriptor(d), MLUOP_STATUS_SUCCESS);
}

TEST(MluopConvolutionDescriptor, DefaultsSetGetAndBadValues) {
  mluopConvolutionDescriptor_t c = nullptr;
  ASSERT_EQ(mluopCreateConvolutionDescriptor(&c), MLUOP_STATUS_SUCCESS);
  int pad[2], stride[2], dil[2], groups = 0;
  ASSERT_EQ(mluopGetConvolutionDescriptor(c, pad, stride, dil, &groups), MLUOP_STATUS_SUCCESS);
  EXPECT_EQ(pad[0], 0);
  EXPECT_EQ(stride[1], 1);
  EXPECT_EQ(dil[0], 1);
  EXPECT_EQ(groups, 1);
  const int p[2] = {1, 2}, s[2] = {2, 3}, d[2] = {1, 2};
  ASSERT_EQ(mluopSetConvolutionDescriptor(c, p, s, d, 4), MLUOP_STATUS_SUCCESS);
  ASSERT_EQ(mluopGetConvolutionDescriptor(c, pad, stride, dil, &groups), MLUOP_STATUS_SUCCESS);
  EXPECT_EQ(pad[1], 2);
  EXPECT_EQ(stride[1], 3);
  EXPECT_EQ(dil[1], 2);
  EXPECT_EQ(groups, 4);
  const int zero[2] = {0, 0}, neg[2] = {-1, 0};
  EXPECT_EQ(mluopSetConvolutionDescriptor(c, p, zero, d, 1), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("stride[0] = 0 must be >= 1"));
  EXPECT_EQ(mluopSetConvolutionDescriptor(c, neg, s, d, 1), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("padding[0] = -1 is negative"));
  EXPECT_EQ(mluopSetConvolutionDescriptor(c, p, s, zero, 1), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("dilation[0] = 0 must be >= 1"));
  EXPECT_EQ(mluopSetConvolutionDescriptor(c, p, s, d, 0), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("groups = 0 must be >= 1"));
  EXPECT_EQ(mluopSetConvolutionDescriptor(c, nullptr, s, d, 1), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("padding is NULL"));
  EXPECT_EQ(mluopDestroyConvolutionDescriptor(c), MLUOP_STATUS_SUCCESS);
}

// ---- the schema ----

TEST(MluopSchema, EveryOpIsExportedUnderItsSymbolAndNamesAreUnique) {
  void* lib = dlopen(LIBMLUOPS_PATH, RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) lib = dlopen(LIBMLUOPS_PATH, RTLD_NOW);
  ASSERT_NE(lib, nullptr) << dlerror();
  std::set<std::string_view> names, symbols;
  int ops = 0;
  mlu::forEachOp([&]<typename Args>() {
    ++ops;
    EXPECT_TRUE(names.insert(Args::kName).second) << Args::kName;
    EXPECT_TRUE(symbols.insert(Args::kSymbol).second) << Args::kSymbol;
    EXPECT_NE(dlsym(lib, std::string(Args::kSymbol).c_str()), nullptr) << Args::kSymbol << " is not exported";
    // Names are snake_case.
    for (char ch : Args::kName) EXPECT_TRUE(std::islower(ch) || std::isdigit(ch) || ch == '_') << Args::kName;
  });
  EXPECT_GE(ops, 50);
  dlclose(lib);
}

TEST(MluopSchema, ArgumentStructsVisitArgumentsInSchemaOrderWithRoles) {
  mlu::conv2d_forward_args args;
  std::vector<std::string> seen;
  args.visit([&](const mlu::ArgMeta& m, auto&) {
    seen.push_back(std::string(m.name) + ":" + std::to_string(static_cast<int>(m.role)) +
                   (m.optional ? "?" : ""));
  });
  using R = mlu::Role;
  auto tag = [](const char* n, R r, bool opt = false) {
    return std::string(n) + ":" + std::to_string(static_cast<int>(r)) + (opt ? "?" : "");
  };
  EXPECT_THAT(seen, ::testing::ElementsAre(tag("conv_desc", R::kConv), tag("x", R::kInput),
                                           tag("w", R::kInput), tag("bias", R::kInput, true),
                                           tag("workspace", R::kWorkspace), tag("y", R::kOutput)));
  EXPECT_EQ(mlu::conv2d_forward_args::kSymbol, "mluopConvolutionForward");
}

// ---- the checks of every entry point ----

TEST(MluopEntry, NullHandleDescriptorsAndPointersAreReported) {
  optest::Tensor a = optest::Tensor::device(MLUOP_DTYPE_FLOAT, {4}, {1, 2, 3, 4});
  optest::Tensor c = optest::Tensor::device(MLUOP_DTYPE_FLOAT, {4});
  EXPECT_EQ(mluopAdd(nullptr, 1.0f, a.desc(), a.data(), a.desc(), a.data(), c.desc(), c.data()),
            MLUOP_STATUS_NOT_INITIALIZED);
  EXPECT_THAT(lastMessage(), HasSubstr("add: handle is NULL"));
  optest::Handle h;
  EXPECT_EQ(mluopAdd(h, 1.0f, nullptr, a.data(), a.desc(), a.data(), c.desc(), c.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("add: a_desc is NULL"));
  EXPECT_EQ(mluopAdd(h, 1.0f, a.desc(), a.data(), a.desc(), nullptr, c.desc(), c.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("add: b is NULL but b_desc has 4 elements"));
  mluopTensorDescriptor_t unset = nullptr;
  ASSERT_EQ(mluopCreateTensorDescriptor(&unset), MLUOP_STATUS_SUCCESS);
  EXPECT_EQ(mluopAdd(h, 1.0f, a.desc(), a.data(), a.desc(), a.data(), unset, c.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("add: c_desc was never set"));
  mluopDestroyTensorDescriptor(unset);
  const int too_many[9] = {};
  optest::Tensor y = optest::Tensor::device(MLUOP_DTYPE_FLOAT, {});
  EXPECT_EQ(mluopReduceSum(h, too_many, 9, false, a.desc(), a.data(), y.desc(), y.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("sum: dims_count = 9; expected 0 to 8"));
  EXPECT_EQ(mluopReduceSum(h, nullptr, 2, false, a.desc(), a.data(), y.desc(), y.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("sum: dims is NULL but dims_count is 2"));
}

TEST(MluopEntry, DevicePointersMustBeDeviceMemoryOfTheHandlesDeviceWithRoom) {
  optest::Handle h;
  optest::Tensor a = optest::Tensor::device(MLUOP_DTYPE_FLOAT, {4}, {1, 2, 3, 4});
  optest::Tensor c = optest::Tensor::device(MLUOP_DTYPE_FLOAT, {4});
  std::vector<float> host(4, 1.0f);
  EXPECT_EQ(mluopAdd(h, 1.0f, a.desc(), a.data(), a.desc(), host.data(), c.desc(), c.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("is host memory, not device memory"));

  ASSERT_EQ(mlurtSetDevice(1), MLURT_SUCCESS);
  optest::Tensor on1 = optest::Tensor::device(MLUOP_DTYPE_FLOAT, {4}, {1, 1, 1, 1});
  ASSERT_EQ(mlurtSetDevice(0), MLURT_SUCCESS);
  EXPECT_EQ(mluopAdd(h, 1.0f, a.desc(), a.data(), on1.desc(), on1.data(), c.desc(), c.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("is on device 1 but the handle is on device 0"));

  // A descriptor bigger than the memory behind the pointer.
  optest::Tensor big = optest::Tensor::device(MLUOP_DTYPE_FLOAT, {1000});
  EXPECT_EQ(mluopAdd(h, 1.0f, big.desc(), a.data(), big.desc(), big.data(), big.desc(), big.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastMessage(), HasSubstr("a needs 4000 bytes from offset 0 of its"));

  optest::Tensor d64 = optest::Tensor::device(MLUOP_DTYPE_DOUBLE, {4}, {1, 2, 3, 4});
  EXPECT_EQ(mluopAdd(h, 1.0f, d64.desc(), d64.data(), d64.desc(), d64.data(), d64.desc(), d64.data()),
            MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastMessage(), HasSubstr("float64"));
}

// ---- fault injection (MLU_SIM_FAULT), through the probe program ----

struct ProbeResult {
  int exit_code = -1;
  std::string output;
  std::vector<double> values;
  int slack_changed = -1;
  double ms = -1;
};

ProbeResult probe(const std::string& fault, const std::string& op, int n) {
  const std::string cmd =
      "MLU_SIM_FAULT='" + fault + "' " + FAULT_PROBE_PATH + " " + op + " " + std::to_string(n) + " 2>&1";
  ProbeResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) r.output += buf.data();
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::istringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string key;
    words >> key;
    if (key == "values") {
      std::string word;  // strtod, unlike operator>>, reads "nan"
      while (words >> word) r.values.push_back(std::strtod(word.c_str(), nullptr));
    } else if (key == "slack_changed") {
      words >> r.slack_changed;
    } else if (key == "ms") {
      words >> r.ms;
    }
  }
  return r;
}

TEST(MluopFault, WithoutFaultsTheProbeComputesExactly) {
  const ProbeResult r = probe("", "add", 8);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.values, ::testing::ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
  EXPECT_EQ(r.slack_changed, 0);
}

TEST(MluopFault, NanPutsNanIntoTheGivenFraction) {
  const ProbeResult all = probe("add:nan@1", "add", 8);
  ASSERT_EQ(all.exit_code, 0) << all.output;
  ASSERT_EQ(all.values.size(), 8u);
  for (double v : all.values) EXPECT_TRUE(std::isnan(v));
  // The default fraction, 1e-3, still plants at least one NaN, deterministically.
  const ProbeResult some = probe("add:nan", "add", 4000);
  const ProbeResult again = probe("add:nan", "add", 4000);
  ASSERT_EQ(some.values.size(), 4000u) << some.output;
  int nans = 0;
  for (std::size_t i = 0; i < some.values.size(); ++i) {
    if (std::isnan(some.values[i])) {
      ++nans;
      EXPECT_TRUE(std::isnan(again.values[i]));
    } else {
      EXPECT_EQ(some.values[i], static_cast<double>(i + 1));
    }
  }
  EXPECT_GE(nans, 1);
  EXPECT_LE(nans, 20);  // about 4 expected
  EXPECT_THAT(some.output, HasSubstr("MLU_SIM_FAULT planted 1 fault(s) in add"));
}

TEST(MluopFault, ScaleAndOffsetChangeTheOutput) {
  const ProbeResult scaled = probe("add:scale=2", "add", 4);
  EXPECT_THAT(scaled.values, ::testing::ElementsAre(2, 4, 6, 8)) << scaled.output;
  const ProbeResult shifted = probe("add:offset=-0.5", "add", 4);
  EXPECT_THAT(shifted.values, ::testing::ElementsAre(0.5, 1.5, 2.5, 3.5)) << shifted.output;
  const ProbeResult half = probe("add:scale=10@0.5", "add", 1000);
  ASSERT_EQ(half.values.size(), 1000u) << half.output;
  int changed = 0;
  for (std::size_t i = 0; i < half.values.size(); ++i)
    changed += half.values[i] != static_cast<double>(i + 1);
  EXPECT_GT(changed, 400);
  EXPECT_LT(changed, 600);
  // Faults in another op leave this one alone.
  const ProbeResult other = probe("mul:scale=2", "add", 4);
  EXPECT_THAT(other.values, ::testing::ElementsAre(1, 2, 3, 4));
  // A fault for a dtype applies to the calls whose output is of it alone (the probe's add is float32).
  const ProbeResult float32 = probe("add/float32:scale=2", "add", 4);
  EXPECT_THAT(float32.values, ::testing::ElementsAre(2, 4, 6, 8)) << float32.output;
  const ProbeResult bfloat16 = probe("add/bfloat16:scale=2", "add", 4);
  EXPECT_THAT(bfloat16.values, ::testing::ElementsAre(1, 2, 3, 4)) << bfloat16.output;
}

TEST(MluopFault, NonContigReadsStridedInputsAsContiguous) {
  const ProbeResult right = probe("", "copy_strided", 4);
  EXPECT_THAT(right.values, ::testing::ElementsAre(0, 2, 4, 6)) << right.output;
  const ProbeResult wrong = probe("copy:noncontig", "copy_strided", 4);
  EXPECT_THAT(wrong.values, ::testing::ElementsAre(0, 1, 2, 3)) << wrong.output;
}

TEST(MluopFault, OobWritesExactlyNBytesPastTheEnd) {
  for (int bytes : {1, 3, 16}) {
    const ProbeResult r = probe("add:oob=" + std::to_string(bytes), "add", 8);
    EXPECT_THAT(r.values, ::testing::ElementsAre(1, 2, 3, 4, 5, 6, 7, 8)) << r.output;
    EXPECT_EQ(r.slack_changed, bytes) << r.output;
  }
}

TEST(MluopFault, NotSupportedAndDelay) {
  const ProbeResult refused = probe("add:notsupported", "add", 4);
  EXPECT_THAT(refused.output, HasSubstr("status MLUOP_STATUS_NOT_SUPPORTED"));
  EXPECT_THAT(refused.output, HasSubstr("add: refused by MLU_SIM_FAULT (notsupported)"));
  const ProbeResult slow = probe("add:delay=300", "add", 4);
  EXPECT_THAT(slow.values, ::testing::ElementsAre(1, 2, 3, 4)) << slow.output;
  EXPECT_GE(slow.ms, 300.0);  // the kernel slept 300 ms before it ran
}

TEST(MluopFault, ACollectivesItemIsLeftToTheCollectiveLibrary) {
  const ProbeResult r = probe("allreduce:hang@rank=1@call=2", "add", 4);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("planted")));
}

TEST(MluopFault, MalformedSpecificationsStopTheProgramNamingTheItem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"add", "expected op[/dtype]:kind[=value][@fraction]"},
      {"add/float8:nan", "unknown dtype 'float8' after '/'"},
      {"add:unstable", "'unstable' applies to softmax_forward and log_softmax_forward"},
      {"softmax_forward:unstable=2", "'unstable' takes no value or fraction"},
      {"frobnicate:nan", "unknown op 'frobnicate'"},
      {"add:explode", "unknown kind 'explode'"},
      {"add:scale", "'scale' needs =FACTOR"},
      {"add:scale=abc", "'scale' needs =FACTOR"},
      {"add:nan@2", "fraction after '@' must be a number in (0, 1]"},
      {"add:oob=0", "'oob' needs =BYTES"},
      {"add:oob=1.5", "whole number of bytes"},
      {"add:delay=-1", "'delay' needs =MILLISECONDS"},
      // Out of range: oob=1e11 wrote outside the simulated device's memory and crashed the host process,
      // delay=1e300 overflowed the sleep and did nothing.
      {"add:oob=1e11", "'oob' needs =BYTES (a whole number from 1 to 1048576)"},
      {"add:oob=1048577", "'oob' needs =BYTES"},
      {"add:delay=1e300", "'delay' needs =MILLISECONDS (from 0 to 3600000)"},
      {"add:noncontig=1", "'noncontig' takes no value"},
      {"add:nan,mul:bogus", "MLU_SIM_FAULT item 'mul:bogus'"},
      // A collective's item (libmlucl's) is checked here too, so a typo never passes silently.
      {"allreduce:count=0", "'count' needs =DELTA"},
      {"allreduce:hang@rank=-1", "'@rank=' needs a rank number"},
  };
  for (const auto& [spec, expected] : cases) {
    const ProbeResult r = probe(spec, "add", 4);
    EXPECT_EQ(r.exit_code, 2) << spec << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(expected)) << spec;
    EXPECT_THAT(r.output, ::testing::Not(HasSubstr("values"))) << spec;  // stopped before main
  }
}

}  // namespace
