// Tests of the matrix-product and convolution ops (matmul, linear, conv2d forward / backward data /
// backward filter / backward bias):
//  - the device against the CPU reference for float32, float16 and bfloat16 over shape sets with size-0,
//    odd sizes, blocking edges, batch broadcasting and non-contiguous views;
//  - the reference against hand-worked values;
//  - every backward op against central finite differences of the forward, in float64 with the reference;
//  - each BAD_PARAM path (status and message), NOT_SUPPORTED for float64, the workspace contract;
//  - the GEMM engine's two micro-kernels (AVX2+FMA and portable) directly.
// Sums of K products are compared with an absolute tolerance scaled by sqrt(K) (gemm_util.h).
#include "../../runtime/mluops/gemm_kernel.h"
#include "gemm_util.h"
#include "op_harness.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace optest;
using ::testing::HasSubstr;

std::string lastError() { return mluopGetLastErrorMessage(); }

// ======================================= matmul =======================================

struct MatmulCase {
  std::string name;
  Dims a, b;
  bool trans_a = false, trans_b = false;
  Dims a_strides = {}, b_strides = {}, c_strides = {};
};

// The shape of matmul's output, computed independently of the library: broadcast batch, then [M, N].
Dims matmulOutDims(const MatmulCase& c) {
  const std::size_t na = c.a.size() - 2, nb = c.b.size() - 2, nd = std::max(na, nb);
  Dims out(nd);
  for (std::size_t d = 0; d < nd; ++d) {
    const std::int64_t sa = d + na >= nd ? c.a[d + na - nd] : 1;
    const std::int64_t sb = d + nb >= nd ? c.b[d + nb - nd] : 1;
    out[d] = sa == 1 ? sb : sa;
  }
  out.push_back(c.trans_a ? c.a.back() : c.a[c.a.size() - 2]);
  out.push_back(c.trans_b ? c.b[c.b.size() - 2] : c.b.back());
  return out;
}

std::int64_t matmulK(const MatmulCase& c) { return c.trans_a ? c.a[c.a.size() - 2] : c.a.back(); }

// Runs one case on the device and in the reference and compares.
void checkMatmul(mluopDataType_t dtype, const MatmulCase& c, std::uint32_t seed = 1) {
  SCOPED_TRACE(c.name + " " + dtypeLabel(dtype));
  Handle handle;
  TensorPair a = makePair(dtype, c.a, randomValues(numel(c.a), seed), c.a_strides);
  TensorPair b = makePair(dtype, c.b, randomValues(numel(c.b), seed + 1), c.b_strides);
  const Dims out_dims = matmulOutDims(c);
  TensorPair out = makeOutput(dtype, out_dims, c.c_strides);
  ASSERT_EQ(mluopMatmul(handle, c.trans_a, c.trans_b, a.dev.desc(), a.dev.data(), b.dev.desc(), b.dev.data(),
                        out.dev.desc(), out.dev.data()),
            MLUOP_STATUS_SUCCESS)
      << lastError();
  handle.sync();
  mlu::matmul_args args;
  args.trans_a = c.trans_a;
  args.trans_b = c.trans_b;
  args.a = a.host.view();
  args.b = b.host.view();
  args.c = out.host.view();
  const mlu::Status s = mlu::reference::run(args);
  ASSERT_TRUE(s.ok()) << s.message;
  expectClose(out.dev.values(), out.host.values(), sumTolerance(dtype, matmulK(c)), c.name);
}

TEST(MatmulReference, HandWorked) {
  for (mluopDataType_t dtype : {MLUOP_DTYPE_DOUBLE, MLUOP_DTYPE_FLOAT}) {
    SCOPED_TRACE(dtypeLabel(dtype));
    // [[1, 2, 3], [4, 5, 6]] x [[7, 8], [9, 10], [11, 12]] = [[58, 64], [139, 154]]
    const std::vector<double> expected = {58, 64, 139, 154};
    struct Form {
      bool ta, tb;
      Dims a_dims, b_dims;
      std::vector<double> a, b;
    };
    const std::vector<Form> forms = {
        {false, false, {2, 3}, {3, 2}, {1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}},
        {true, false, {3, 2}, {3, 2}, {1, 4, 2, 5, 3, 6}, {7, 8, 9, 10, 11, 12}},  // a stored transposed
        {false, true, {2, 3}, {2, 3}, {1, 2, 3, 4, 5, 6}, {7, 9, 11, 8, 10, 12}},  // b stored transposed
        {true, true, {3, 2}, {2, 3}, {1, 4, 2, 5, 3, 6}, {7, 9, 11, 8, 10, 12}},
    };
    for (const Form& f : forms) {
      Tensor a = Tensor::host(dtype, f.a_dims, f.a), b = Tensor::host(dtype, f.b_dims, f.b);
      Tensor c = Tensor::host(dtype, {2, 2});
      mlu::matmul_args args;
      args.trans_a = f.ta;
      args.trans_b = f.tb;
      args.a = a.view();
      args.b = b.view();
      args.c = c.view();
      ASSERT_TRUE(mlu::reference::run(args).ok());
      EXPECT_EQ(c.values(), expected) << "trans_a " << f.ta << " trans_b " << f.tb;
    }
    // Batch broadcast: a [2, 1, 2] = {[1, 2]}, {[3, 4]}; b [2, 1] = [5, 6]^T -> c [2, 1, 1] = {17}, {39}.
    Tensor a = Tensor::host(dtype, {2, 1, 2}, {1, 2, 3, 4}), b = Tensor::host(dtype, {2, 1}, {5, 6});
    Tensor c = Tensor::host(dtype, {2, 1, 1});
    mlu::matmul_args args;
    args.a = a.view();
    args.b = b.view();
    args.c = c.view();
    ASSERT_TRUE(mlu::reference::run(args).ok());
    EXPECT_EQ(c.values(), (std::vector<double>{17, 39}));
  }
}

TEST(MatmulDevice, HandWorked) {
  Handle handle;
  Tensor a = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = Tensor::device(MLUOP_DTYPE_FLOAT, {3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor c = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 2});
  ASSERT_EQ(mluopMatmul(handle, false, false, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data()),
            MLUOP_STATUS_SUCCESS)
      << lastError();
  handle.sync();
  EXPECT_EQ(c.values(), (std::vector<double>{58, 64, 139, 154}));
}

TEST(MatmulDevice, MatchesReferenceAcrossShapes) {
  const std::vector<MatmulCase> cases = {
      {"empty_m", {0, 3}, {3, 4}},
      {"empty_n", {3, 4}, {4, 0}},
      {"empty_k_gives_zeros", {3, 0}, {0, 4}},
      {"1x1x1", {1, 1}, {1, 1}},
      {"7x13x5", {7, 13}, {13, 5}},
      {"16x16x16", {16, 16}, {16, 16}},
      {"33x70x19", {33, 70}, {70, 19}},
      {"150x300x40_blocks_and_split", {150, 300}, {300, 40}},  // > kMc rows, > kKc depth, split on cores
      {"3x5x2100_wide", {3, 5}, {5, 2100}},                    // > kNc columns
      {"8x300x200_split_columns", {8, 300}, {300, 200}},
  };
  for (mluopDataType_t dtype : deviceDtypes()) {
    for (const MatmulCase& c : cases) checkMatmul(dtype, c);
  }
}

TEST(MatmulDevice, TransposeFlags) {
  for (mluopDataType_t dtype : deviceDtypes()) {
    checkMatmul(dtype, {"nn", {7, 13}, {13, 5}, false, false});
    checkMatmul(dtype, {"tn", {13, 7}, {13, 5}, true, false});
    checkMatmul(dtype, {"nt", {7, 13}, {5, 13}, false, true});
    checkMatmul(dtype, {"tt", {13, 7}, {5, 13}, true, true});
    checkMatmul(dtype, {"tt_batched", {3, 13, 7}, {3, 5, 13}, true, true});
  }
}

TEST(MatmulDevice, BatchBroadcasting) {
  for (mluopDataType_t dtype : deviceDtypes()) {
    checkMatmul(dtype, {"both_broadcast", {2, 1, 7, 13}, {3, 13, 5}});
    checkMatmul(dtype, {"a_2d_b_batched", {7, 13}, {4, 13, 5}});
    checkMatmul(dtype, {"b_2d_folded", {4, 7, 13}, {13, 5}});
    checkMatmul(dtype, {"b_batch_of_1_folded", {2, 3, 7, 13}, {1, 13, 5}});
    checkMatmul(dtype, {"odd_batch_split", {3, 64, 64}, {3, 64, 64}});
    checkMatmul(dtype, {"empty_batch", {0, 7, 13}, {13, 5}});
  }
}

TEST(MatmulDevice, NonContiguousInputs) {
  for (mluopDataType_t dtype : deviceDtypes()) {
    // a [7, 13] read from a [13, 7] buffer (a transposed view), b [13, 5] with padded rows and a gap
    // between columns, c written into a transposed buffer.
    checkMatmul(dtype, {"transposed_view", {7, 13}, {13, 5}, false, false, {1, 7}, {12, 2}, {1, 7}});
    // A 0-stride broadcast view over the batch of a, and a transposed b with trans_b.
    checkMatmul(dtype, {"zero_stride_batch", {3, 7, 13}, {13, 5}, false, false, {0, 13, 1}});
    checkMatmul(dtype, {"strided_batch", {2, 7, 13}, {2, 5, 13}, false, true, {200, 13, 1}, {1, 2, 10}});
    checkMatmul(dtype, {"big_transposed_view", {150, 70}, {70, 40}, false, false, {1, 150}});
  }
}

TEST(MatmulDevice, DeterministicAcrossRuns) {
  Handle handle;
  const Dims a_dims = {200, 300}, b_dims = {300, 150};
  Tensor a = Tensor::device(MLUOP_DTYPE_FLOAT, a_dims, randomValues(numel(a_dims), 5));
  Tensor b = Tensor::device(MLUOP_DTYPE_FLOAT, b_dims, randomValues(numel(b_dims), 6));
  std::vector<std::vector<double>> results;
  for (int run = 0; run < 2; ++run) {
    Tensor c = Tensor::device(MLUOP_DTYPE_FLOAT, {200, 150});
    ASSERT_EQ(mluopMatmul(handle, false, false, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data()),
              MLUOP_STATUS_SUCCESS);
    handle.sync();
    results.push_back(c.values());
  }
  EXPECT_EQ(results[0], results[1]);
}

// Calls mluopMatmul with freshly made tensors; returns the status.
mluopStatus_t callMatmul(bool ta, bool tb, const Dims& a_dims, const Dims& b_dims, const Dims& c_dims,
                         mluopDataType_t a_type = MLUOP_DTYPE_FLOAT,
                         mluopDataType_t b_type = MLUOP_DTYPE_FLOAT,
                         mluopDataType_t c_type = MLUOP_DTYPE_FLOAT, const Dims& c_strides = {}) {
  Handle handle;
  Tensor a = Tensor::device(a_type, a_dims), b = Tensor::device(b_type, b_dims);
  Tensor c = Tensor::device(c_type, c_dims, {}, c_strides);
  return mluopMatmul(handle, ta, tb, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data());
}

TEST(MatmulErrors, BadParams) {
  EXPECT_EQ(callMatmul(false, false, {2, 5}, {6, 3}, {2, 3}), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("matmul: a has K = 5 columns but b has 6 rows"));
  EXPECT_EQ(callMatmul(true, true, {5, 2}, {3, 6}, {2, 3}), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("a has K = 5 rows (trans_a) but b has 6 columns (trans_b)"));
  EXPECT_EQ(callMatmul(false, false, {5}, {5, 3}, {3}), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("a has shape [5] but needs at least 2 dims"));
  EXPECT_EQ(callMatmul(false, false, {2, 5}, {5}, {2}), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("b has shape [5] but needs at least 2 dims"));
  EXPECT_EQ(callMatmul(false, false, {2, 3, 4}, {3, 4, 5}, {3, 3, 5}), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("the batch dims of a and b, [2] and [3], do not broadcast"));
  EXPECT_EQ(callMatmul(false, false, {2, 3}, {3, 4}, {2, 5}), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("c has shape [2, 5] but a x b gives [2, 4]"));
  EXPECT_EQ(callMatmul(false, false, {2, 3}, {4, 3, 4}, {2, 4}), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("c has shape [2, 4] but a x b gives [4, 2, 4]"));
  EXPECT_EQ(callMatmul(false, false, {2, 3}, {3, 4}, {2, 4}, MLUOP_DTYPE_FLOAT, MLUOP_DTYPE_HALF),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("b is float16 but a is float32"));
  EXPECT_EQ(callMatmul(false, false, {2, 3}, {3, 4}, {2, 4}, MLUOP_DTYPE_FLOAT, MLUOP_DTYPE_FLOAT,
                       MLUOP_DTYPE_FLOAT, {0, 1}),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("c (shape [2, 4], strides [0, 1]) overlaps itself"));
}

TEST(MatmulErrors, UnsupportedDtypes) {
  EXPECT_EQ(callMatmul(false, false, {2, 3}, {3, 4}, {2, 4}, MLUOP_DTYPE_INT32, MLUOP_DTYPE_INT32,
                       MLUOP_DTYPE_INT32),
            MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("a is int32, which is not supported"));
  EXPECT_EQ(callMatmul(false, false, {2, 3}, {3, 4}, {2, 4}, MLUOP_DTYPE_DOUBLE, MLUOP_DTYPE_DOUBLE,
                       MLUOP_DTYPE_DOUBLE),
            MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("float64"));
}

// ======================================= linear =======================================

struct LinearCase {
  std::string name;
  Dims x;
  std::int64_t out;
  bool bias = true;
  Dims x_strides = {}, w_strides = {};
};

void checkLinear(mluopDataType_t dtype, const LinearCase& c) {
  SCOPED_TRACE(c.name + " " + dtypeLabel(dtype));
  Handle handle;
  const std::int64_t in = c.x.back();
  const Dims w_dims = {c.out, in};
  Dims y_dims = c.x;
  y_dims.back() = c.out;
  TensorPair x = makePair(dtype, c.x, randomValues(numel(c.x), 11), c.x_strides);
  TensorPair w = makePair(dtype, w_dims, randomValues(numel(w_dims), 12), c.w_strides);
  std::optional<TensorPair> bias;
  if (c.bias) bias = makePair(dtype, {c.out}, randomValues(c.out, 13));
  TensorPair y = makeOutput(dtype, y_dims);
  ASSERT_EQ(mluopLinear(handle, x.dev.desc(), x.dev.data(), w.dev.desc(), w.dev.data(),
                        bias ? bias->dev.desc() : nullptr, bias ? bias->dev.data() : nullptr, y.dev.desc(),
                        y.dev.data()),
            MLUOP_STATUS_SUCCESS)
      << lastError();
  handle.sync();
  mlu::linear_args args;
  args.x = x.host.view();
  args.weight = w.host.view();
  if (bias) args.bias = bias->host.view();
  args.y = y.host.view();
  const mlu::Status s = mlu::reference::run(args);
  ASSERT_TRUE(s.ok()) << s.message;
  expectClose(y.dev.values(), y.host.values(), sumTolerance(dtype, in + 1), c.name);
}

TEST(LinearReference, HandWorked) {
  // x [1, 2] = [1, 2]; weight [[1, 0], [0, 1], [1, 1]]; bias [0.5, -1, 2] -> y = [1.5, 1, 5]
  Tensor x = Tensor::host(MLUOP_DTYPE_DOUBLE, {1, 2}, {1, 2});
  Tensor w = Tensor::host(MLUOP_DTYPE_DOUBLE, {3, 2}, {1, 0, 0, 1, 1, 1});
  Tensor b = Tensor::host(MLUOP_DTYPE_DOUBLE, {3}, {0.5, -1, 2});
  Tensor y = Tensor::host(MLUOP_DTYPE_DOUBLE, {1, 3});
  mlu::linear_args args;
  args.x = x.view();
  args.weight = w.view();
  args.bias = b.view();
  args.y = y.view();
  ASSERT_TRUE(mlu::reference::run(args).ok());
  EXPECT_EQ(y.values(), (std::vector<double>{1.5, 1, 5}));
  // Without bias, on a 1-d x: [1, 2, 2]
  Tensor x1 = Tensor::host(MLUOP_DTYPE_DOUBLE, {2}, {1, 2});
  Tensor y1 = Tensor::host(MLUOP_DTYPE_DOUBLE, {3});
  args.x = x1.view();
  args.bias = mlu::TensorView{};
  args.y = y1.view();
  ASSERT_TRUE(mlu::reference::run(args).ok());
  EXPECT_EQ(y1.values(), (std::vector<double>{1, 2, 3}));
}

TEST(LinearDevice, MatchesReference) {
  const std::vector<LinearCase> cases = {
      {"5x13_to_7", {5, 13}, 7},
      {"no_bias", {5, 13}, 7, false},
      {"3d_input", {2, 3, 13}, 7},
      {"1d_input", {13}, 7},
      {"empty_rows", {0, 13}, 7},
      {"empty_in_gives_bias", {4, 0}, 3},
      {"mnist_fc2_64x128_to_10", {64, 128}, 10},
      {"split_columns_8x300_to_200", {8, 300}, 200},
      {"split_rows_150x70_to_30", {150, 70}, 30},
      {"transposed_x", {6, 13}, 5, true, {1, 6}},
      {"strided_x_3d_and_w", {2, 3, 13}, 7, true, {100, 20, 1}, {1, 7}},
  };
  for (mluopDataType_t dtype : deviceDtypes()) {
    for (const LinearCase& c : cases) checkLinear(dtype, c);
  }
}

mluopStatus_t callLinear(const Dims& x_dims, const Dims& w_dims, const std::optional<Dims>& b_dims,
                         const Dims& y_dims, mluopDataType_t w_type = MLUOP_DTYPE_FLOAT);

// A bias that broadcasts to y as PyTorch's addmm adds it: [1, out] gives what [out] gives, a
// size-1 or 0-d bias is added to every element; any bias broadcasting to an empty y is taken (DIOPI's case:
// x [16, 8], weight [0, 8], bias [16, 0] -> y [16, 0]).
TEST(LinearDevice, BiasBroadcastsAsInPyTorch) {
  Handle handle;
  const Dims x_dims{5, 13}, w_dims{7, 13};
  const auto xv = randomValues(numel(x_dims), 21), wv = randomValues(numel(w_dims), 22),
             bv = randomValues(7, 23);
  const auto run = [&](const Dims& b_dims, const std::vector<double>& b_values) {
    Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, x_dims, xv),
           w = Tensor::device(MLUOP_DTYPE_FLOAT, w_dims, wv);
    Tensor b = Tensor::device(MLUOP_DTYPE_FLOAT, b_dims, b_values),
           y = Tensor::device(MLUOP_DTYPE_FLOAT, {5, 7});
    EXPECT_EQ(
        mluopLinear(handle, x.desc(), x.data(), w.desc(), w.data(), b.desc(), b.data(), y.desc(), y.data()),
        MLUOP_STATUS_SUCCESS)
        << lastError();
    handle.sync();
    Tensor hx = Tensor::host(MLUOP_DTYPE_FLOAT, x_dims, xv), hw = Tensor::host(MLUOP_DTYPE_FLOAT, w_dims, wv);
    Tensor hb = Tensor::host(MLUOP_DTYPE_FLOAT, b_dims, b_values),
           hy = Tensor::host(MLUOP_DTYPE_FLOAT, {5, 7});
    mlu::linear_args args;
    args.x = hx.view();
    args.weight = hw.view();
    args.bias = hb.view();
    args.y = hy.view();
    EXPECT_TRUE(mlu::reference::run(args).ok());
    expectClose(y.values(), hy.values(), sumTolerance(MLUOP_DTYPE_FLOAT, 14),
                "bias " + testing::PrintToString(b_dims));
    return y.values();
  };
  const std::vector<double> vector_bias = run({7}, bv);
  EXPECT_EQ(run({1, 7}, bv), vector_bias);
  // A size-1 bias is the same number added everywhere: y with bias [1] = 0.25 is y without it + 0.25.
  const std::vector<double> one = run({1}, {0.25}), scalar = run({}, {0.25});
  EXPECT_EQ(one, scalar);
  EXPECT_EQ(callLinear({16, 8}, {0, 8}, Dims{16, 0}, {16, 0}), MLUOP_STATUS_SUCCESS) << lastError();
}

mluopStatus_t callLinear(const Dims& x_dims, const Dims& w_dims, const std::optional<Dims>& b_dims,
                         const Dims& y_dims, mluopDataType_t w_type) {
  Handle handle;
  Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, x_dims), w = Tensor::device(w_type, w_dims);
  Tensor y = Tensor::device(MLUOP_DTYPE_FLOAT, y_dims);
  std::optional<Tensor> b;
  if (b_dims) b = Tensor::device(MLUOP_DTYPE_FLOAT, *b_dims);
  return mluopLinear(handle, x.desc(), x.data(), w.desc(), w.data(), b ? b->desc() : nullptr,
                     b ? b->data() : nullptr, y.desc(), y.data());
}

TEST(LinearErrors, BadParams) {
  EXPECT_EQ(callLinear({2, 5}, {3, 6}, std::nullopt, {2, 3}), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(),
              HasSubstr("linear: x has 5 input features (its last dim) but weight [3, 6] expects 6"));
  EXPECT_EQ(callLinear({2, 6}, {6}, std::nullopt, {2, 3}), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("weight has shape [6] but must be 2-d [out_features, in_features]"));
  EXPECT_EQ(callLinear({2, 6}, {3, 6}, Dims{4}, {2, 3}), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("bias has shape [4] but weight has 3 output features"));
  EXPECT_EQ(callLinear({2, 6}, {3, 6}, Dims{1, 1, 3}, {2, 3}), MLUOP_STATUS_BAD_PARAM);  // more dims than y
  EXPECT_THAT(lastError(), HasSubstr("bias has shape [1, 1, 3] but weight has 3 output features"));
  EXPECT_EQ(callLinear({2, 6}, {3, 6}, Dims{2, 3}, {2, 3}), MLUOP_STATUS_BAD_PARAM);  // varies along rows
  EXPECT_THAT(lastError(),
              HasSubstr("bias has shape [2, 3] but weight has 3 output features; it must be [3] (or "
                        "broadcast to y [2, 3] with every dim but the last of size 1)"));
  EXPECT_EQ(callLinear({2, 6}, {3, 6}, Dims{3}, {2, 4}), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("y has shape [2, 4] but x x weight^T gives [2, 3]"));
  EXPECT_EQ(callLinear({}, {3, 6}, std::nullopt, {3}), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("x is 0-d but needs at least 1 dim"));
  EXPECT_EQ(callLinear({2, 6}, {3, 6}, std::nullopt, {2, 3}, MLUOP_DTYPE_BFLOAT16), MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("weight is bfloat16 but x is float32"));
}

TEST(LinearErrors, Float64NotSupportedOnDevice) {
  Handle handle;
  Tensor x = Tensor::device(MLUOP_DTYPE_DOUBLE, {2, 3}), w = Tensor::device(MLUOP_DTYPE_DOUBLE, {4, 3});
  Tensor y = Tensor::device(MLUOP_DTYPE_DOUBLE, {2, 4});
  EXPECT_EQ(mluopLinear(handle, x.desc(), x.data(), w.desc(), w.data(), nullptr, nullptr, y.desc(), y.data()),
            MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("float64"));
}

TEST(LinearErrors, OverlappingOutput) {
  Handle handle;
  Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 6}), w = Tensor::device(MLUOP_DTYPE_FLOAT, {3, 6});
  Tensor y = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3}, {}, {0, 1});
  EXPECT_EQ(mluopLinear(handle, x.desc(), x.data(), w.desc(), w.data(), nullptr, nullptr, y.desc(), y.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("linear: y (shape [2, 3], strides [0, 1]) overlaps itself"));
}

// ==================================== convolution ====================================

struct ConvCase {
  std::string name;
  Dims x, w;
  std::array<int, 2> pad{0, 0}, stride{1, 1}, dil{1, 1};
  int groups = 1;
  bool bias = true;
  Dims x_strides = {}, w_strides = {}, y_strides = {};
};

// [N, Cout, Ho, Wo], computed independently of the library.
Dims convOutDims(const ConvCase& c) {
  auto out = [](std::int64_t in, int pad, int dil, std::int64_t k, int stride) {
    return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
  };
  return {c.x[0], c.w[0], out(c.x[2], c.pad[0], c.dil[0], c.w[2], c.stride[0]),
          out(c.x[3], c.pad[1], c.dil[1], c.w[3], c.stride[1])};
}

// Strides of a [N, C, H, W] view over an NHWC buffer.
Dims nhwcStrides(const Dims& nchw) {
  return permutedView({nchw[0], nchw[2], nchw[3], nchw[1]}, {0, 3, 1, 2}).second;
}

const std::vector<ConvCase>& convCases() {
  static const std::vector<ConvCase> kCases = {
      {"3x3_pad1", {2, 3, 7, 6}, {4, 3, 3, 3}, {1, 1}},
      {"stride2_pad1_dil2_groups2", {2, 4, 9, 8}, {6, 2, 3, 2}, {1, 1}, {2, 2}, {2, 2}, 2},
      {"asymmetric_params", {1, 2, 8, 7}, {3, 2, 2, 3}, {0, 2}, {3, 1}, {1, 2}, 1, false},
      {"odd_cout_stride2", {2, 3, 5, 5}, {7, 3, 3, 3}, {0, 0}, {2, 2}},
      {"depthwise", {1, 4, 6, 6}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 4},
      {"deep_k_288", {1, 32, 6, 6}, {8, 32, 3, 3}},  // C/g*kh*kw > kKc
      {"mnist_like", {2, 8, 12, 12}, {16, 8, 3, 3}},
      {"batch5_more_images_than_cores", {5, 2, 6, 6}, {3, 2, 3, 3}, {1, 1}},
      {"pointwise", {2, 5, 4, 3}, {3, 5, 1, 1}},
      {"pointwise_groups", {2, 6, 3, 3}, {4, 3, 1, 1}, {0, 0}, {1, 1}, {1, 1}, 2},
      {"pointwise_stride2", {1, 3, 5, 5}, {2, 3, 1, 1}, {0, 0}, {2, 2}},
      // Backward filter over the whole batch at once (Cout * cores > N * Ho * Wo), im2col and pointwise.
      {"late_stage_whole_batch", {4, 16, 4, 4}, {40, 16, 3, 3}, {1, 1}, {2, 2}},
      {"late_stage_pointwise", {3, 24, 2, 2}, {40, 24, 1, 1}},
      {"batch0", {0, 3, 5, 5}, {4, 3, 3, 3}},
      {"cout0", {1, 3, 4, 4}, {0, 3, 3, 3}},
      {"nhwc_storage_x_y_permuted_w",
       {2, 3, 5, 6},
       {4, 3, 3, 3},
       {1, 1},
       {1, 1},
       {1, 1},
       1,
       true,
       nhwcStrides({2, 3, 5, 6}),
       permutedView({3, 3, 3, 4}, {3, 2, 0, 1})
           .second,  // w [Cout, C, kh, kw] over a [kh, kw, C, Cout] buffer
       nhwcStrides({2, 4, 5, 6})},
      {"padded_rows_pointwise",
       {1, 2, 5, 5},
       {3, 2, 1, 1},
       {0, 0},
       {1, 1},
       {1, 1},
       1,
       true,
       {100, 50, 8, 1},
       {},
       {200, 50, 7, 1}},
  };
  return kCases;
}

std::int64_t product(const Dims& d, std::size_t from) {
  std::int64_t p = 1;
  for (std::size_t i = from; i < d.size(); ++i) p *= d[i];
  return p;
}

void checkConvForward(mluopDataType_t dtype, const ConvCase& c) {
  SCOPED_TRACE(c.name + " " + dtypeLabel(dtype));
  Handle handle;
  ConvDesc conv(c.pad, c.stride, c.dil, c.groups);
  const Dims y_dims = convOutDims(c);
  TensorPair x = makePair(dtype, c.x, randomValues(numel(c.x), 21), c.x_strides);
  TensorPair w = makePair(dtype, c.w, randomValues(numel(c.w), 22), c.w_strides);
  std::optional<TensorPair> bias;
  if (c.bias) bias = makePair(dtype, {c.w[0]}, randomValues(c.w[0], 23));
  TensorPair y = makeOutput(dtype, y_dims, c.y_strides);
  size_t bytes = 0;
  ASSERT_EQ(
      mluopGetConvolutionForwardWorkspaceSize(handle, conv, x.dev.desc(), w.dev.desc(), y.dev.desc(), &bytes),
      MLUOP_STATUS_SUCCESS)
      << lastError();
  DeviceBuffer workspace(bytes);
  ASSERT_EQ(mluopConvolutionForward(handle, conv, x.dev.desc(), x.dev.data(), w.dev.desc(), w.dev.data(),
                                    bias ? bias->dev.desc() : nullptr, bias ? bias->dev.data() : nullptr,
                                    workspace.data(), workspace.size(), y.dev.desc(), y.dev.data()),
            MLUOP_STATUS_SUCCESS)
      << lastError();
  handle.sync();
  mlu::conv2d_forward_args args;
  args.conv_desc = conv.params();
  args.x = x.host.view();
  args.w = w.host.view();
  if (bias) args.bias = bias->host.view();
  args.y = y.host.view();
  const mlu::Status s = mlu::reference::run(args);
  ASSERT_TRUE(s.ok()) << s.message;
  expectClose(y.dev.values(), y.host.values(), sumTolerance(dtype, product(c.w, 1) + 1), c.name);
}

void checkConvBackwardData(mluopDataType_t dtype, const ConvCase& c) {
  SCOPED_TRACE(c.name + " " + dtypeLabel(dtype));
  Handle handle;
  ConvDesc conv(c.pad, c.stride, c.dil, c.groups);
  const Dims y_dims = convOutDims(c);
  TensorPair gy = makePair(dtype, y_dims, randomValues(numel(y_dims), 31), c.y_strides);
  TensorPair w = makePair(dtype, c.w, randomValues(numel(c.w), 32), c.w_strides);
  TensorPair gx = makeOutput(dtype, c.x, c.x_strides);
  size_t bytes = 0;
  ASSERT_EQ(mluopGetConvolutionBackwardDataWorkspaceSize(handle, conv, gy.dev.desc(), w.dev.desc(),
                                                         gx.dev.desc(), &bytes),
            MLUOP_STATUS_SUCCESS)
      << lastError();
  DeviceBuffer workspace(bytes);
  ASSERT_EQ(
      mluopConvolutionBackwardData(handle, conv, gy.dev.desc(), gy.dev.data(), w.dev.desc(), w.dev.data(),
                                   workspace.data(), workspace.size(), gx.dev.desc(), gx.dev.data()),
      MLUOP_STATUS_SUCCESS)
      << lastError();
  handle.sync();
  mlu::conv2d_backward_data_args args;
  args.conv_desc = conv.params();
  args.grad_output = gy.host.view();
  args.w = w.host.view();
  args.grad_input = gx.host.view();
  const mlu::Status s = mlu::reference::run(args);
  ASSERT_TRUE(s.ok()) << s.message;
  // Each input pixel sums at most Cout/g * kh * kw products.
  expectClose(gx.dev.values(), gx.host.values(), sumTolerance(dtype, c.w[0] / c.groups * c.w[2] * c.w[3]),
              c.name);
}

void checkConvBackwardFilter(mluopDataType_t dtype, const ConvCase& c) {
  SCOPED_TRACE(c.name + " " + dtypeLabel(dtype));
  Handle handle;
  ConvDesc conv(c.pad, c.stride, c.dil, c.groups);
  const Dims y_dims = convOutDims(c);
  TensorPair x = makePair(dtype, c.x, randomValues(numel(c.x), 41), c.x_strides);
  TensorPair gy = makePair(dtype, y_dims, randomValues(numel(y_dims), 42), c.y_strides);
  TensorPair gw = makeOutput(dtype, c.w, c.w_strides);
  size_t bytes = 0;
  ASSERT_EQ(mluopGetConvolutionBackwardFilterWorkspaceSize(handle, conv, x.dev.desc(), gy.dev.desc(),
                                                           gw.dev.desc(), &bytes),
            MLUOP_STATUS_SUCCESS)
      << lastError();
  DeviceBuffer workspace(bytes);
  ASSERT_EQ(
      mluopConvolutionBackwardFilter(handle, conv, x.dev.desc(), x.dev.data(), gy.dev.desc(), gy.dev.data(),
                                     workspace.data(), workspace.size(), gw.dev.desc(), gw.dev.data()),
      MLUOP_STATUS_SUCCESS)
      << lastError();
  handle.sync();
  mlu::conv2d_backward_filter_args args;
  args.conv_desc = conv.params();
  args.x = x.host.view();
  args.grad_output = gy.host.view();
  args.grad_w = gw.host.view();
  const mlu::Status s = mlu::reference::run(args);
  ASSERT_TRUE(s.ok()) << s.message;
  // Each filter tap sums N * Ho * Wo products.
  expectClose(gw.dev.values(), gw.host.values(), sumTolerance(dtype, y_dims[0] * y_dims[2] * y_dims[3]),
              c.name);
}

void checkConvBackwardBias(mluopDataType_t dtype, const Dims& gy_dims, const Dims& gy_strides = {}) {
  SCOPED_TRACE(dtypeLabel(dtype));
  Handle handle;
  TensorPair gy = makePair(dtype, gy_dims, randomValues(numel(gy_dims), 51), gy_strides);
  TensorPair gb = makeOutput(dtype, {gy_dims[1]});
  ASSERT_EQ(mluopConvolutionBackwardBias(handle, gy.dev.desc(), gy.dev.data(), gb.dev.desc(), gb.dev.data()),
            MLUOP_STATUS_SUCCESS)
      << lastError();
  handle.sync();
  mlu::conv2d_backward_bias_args args;
  args.grad_output = gy.host.view();
  args.grad_bias = gb.host.view();
  const mlu::Status s = mlu::reference::run(args);
  ASSERT_TRUE(s.ok()) << s.message;
  expectClose(gb.dev.values(), gb.host.values(), sumTolerance(dtype, gy_dims[0] * gy_dims[2] * gy_dims[3]));
}

TEST(Conv2dForwardDevice, MatchesReference) {
  for (mluopDataType_t dtype : deviceDtypes()) {
    for (const ConvCase& c : convCases()) checkConvForward(dtype, c);
  }
}

TEST(Conv2dBackwardDataDevice, MatchesReference) {
  for (mluopDataType_t dtype : deviceDtypes()) {
    for (const ConvCase& c : convCases()) checkConvBackwardData(dtype, c);
  }
}

TEST(Conv2dBackwardFilterDevice, MatchesReference) {
  for (mluopDataType_t dtype : deviceDtypes()) {
    for (const ConvCase& c : convCases()) checkConvBackwardFilter(dtype, c);
  }
}

TEST(Conv2dBackwardBiasDevice, MatchesReference) {
  for (mluopDataType_t dtype : deviceDtypes()) {
    checkConvBackwardBias(dtype, {2, 5, 3, 4});
    checkConvBackwardBias(dtype, {1, 1, 1, 1});
    checkConvBackwardBias(dtype, {0, 5, 3, 4});  // no images: zeros
    checkConvBackwardBias(dtype, {2, 3, 0, 4});
    checkConvBackwardBias(dtype, {4, 7, 17, 19});  // more than one 256-pixel block
    checkConvBackwardBias(dtype, {2, 3, 4, 5}, nhwcStrides({2, 3, 4, 5}));
    checkConvBackwardBias(dtype, {2, 3, 4, 5}, {100, 30, 7, 1});
    checkConvBackwardBias(dtype, {8, 64, 24, 24});  // enough to split across cores
  }
}

// ---- hand-worked convolutions ----

// x [4, 4] = 1..16 and a 3x3 kernel with two taps, w[0][1] = 1 and w[1][2] = 2, so that a flipped kernel
// (true convolution instead of PyTorch's cross-correlation) would give different numbers:
// y(a, b) = x(a, b + 1) + 2 x(a + 1, b + 2) for the window at (a, b) (zero outside x).
const std::vector<double> kImage = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
const std::vector<double> kTaps = {0, 1, 0, 0, 0, 2, 0, 0, 0};

// Runs conv2d_forward in the reference and, for float32, on the device; returns both outputs.
std::pair<std::vector<double>, std::vector<double>> forwardBoth(
    mluopDataType_t dtype, const ConvDesc& conv, const Dims& x_dims, const std::vector<double>& xv,
    const Dims& w_dims, const std::vector<double>& wv, const std::vector<double>& bv, const Dims& y_dims) {
  Handle handle;
  TensorPair x = makePair(dtype, x_dims, xv), w = makePair(dtype, w_dims, wv);
  std::optional<TensorPair> b;
  if (!bv.empty()) b = makePair(dtype, {w_dims[0]}, bv);
  TensorPair y = makeOutput(dtype, y_dims);
  mlu::conv2d_forward_args args;
  args.conv_desc = conv.params();
  args.x = x.host.view();
  args.w = w.host.view();
  if (b) args.bias = b->host.view();
  args.y = y.host.view();
  const mlu::Status s = mlu::reference::run(args);
  EXPECT_TRUE(s.ok()) << s.message;
  std::vector<double> device;
  if (dtype != MLUOP_DTYPE_DOUBLE) {
    size_t bytes = 0;
    EXPECT_EQ(mluopGetConvolutionForwardWorkspaceSize(handle, conv, x.dev.desc(), w.dev.desc(), y.dev.desc(),
                                                      &bytes),
              MLUOP_STATUS_SUCCESS);
    DeviceBuffer ws(bytes);
    EXPECT_EQ(mluopConvolutionForward(handle, conv, x.dev.desc(), x.dev.data(), w.dev.desc(), w.dev.data(),
                                      b ? b->dev.desc() : nullptr, b ? b->dev.data() : nullptr, ws.data(),
                                      ws.size(), y.dev.desc(), y.dev.data()),
              MLUOP_STATUS_SUCCESS)
        << lastError();
    handle.sync();
    device = y.dev.values();
  }
  return {y.host.values(), device};
}

TEST(Conv2dReference, HandWorkedOneChannel3x3) {
  struct Case {
    const char* name;
    std::array<int, 2> pad, stride, dil;
    std::vector<double> expected;  // [2, 2]
  };
  const std::vector<Case> cases = {
      // windows at (0,0) (0,1) (1,0) (1,1): 2 + 2*7, 3 + 2*8, 6 + 2*11, 7 + 2*12
      {"plain", {0, 0}, {1, 1}, {1, 1}, {16, 19, 28, 31}},
      // padded 6x6, windows at (-1,-1) (-1,1) (1,-1) (1,1): 0 + 2*2, 0 + 2*4, 5 + 2*10, 7 + 2*12
      {"pad1_stride2", {1, 1}, {2, 2}, {1, 1}, {4, 8, 25, 31}},
      // taps at (0,2) and (2,4) from windows at (-1,-1) (-1,0) (0,-1) (0,0): 0 + 2*8, 0 + 0, 2 + 2*12, 3 + 0
      {"pad1_dilation2", {1, 1}, {1, 1}, {2, 2}, {16, 0, 26, 3}},
  };
  for (mluopDataType_t dtype : {MLUOP_DTYPE_DOUBLE, MLUOP_DTYPE_FLOAT}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(c.name) + " " + dtypeLabel(dtype));
      ConvDesc conv(c.pad, c.stride, c.dil);
      auto [reference, device] =
          forwardBoth(dtype, conv, {1, 1, 4, 4}, kImage, {1, 1, 3, 3}, kTaps, {}, {1, 1, 2, 2});
      EXPECT_EQ(reference, c.expected);
      if (dtype == MLUOP_DTYPE_FLOAT) {
        EXPECT_EQ(device, c.expected);
      }
    }
  }
}

TEST(Conv2dReference, HandWorkedGroupsAndBias) {
  // Two groups of one channel: channel 0 = the image with the two-tap kernel, channel 1 = ones with a
  // kernel of ones (9 per window); bias [1, -1]. Groups must not mix channels.
  std::vector<double> x = kImage;
  x.insert(x.end(), 16, 1.0);
  std::vector<double> w = kTaps;
  w.insert(w.end(), 9, 1.0);
  ConvDesc conv({0, 0}, {1, 1}, {1, 1}, 2);
  for (mluopDataType_t dtype : {MLUOP_DTYPE_DOUBLE, MLUOP_DTYPE_FLOAT}) {
    SCOPED_TRACE(dtypeLabel(dtype));
    auto [reference, device] =
        forwardBoth(dtype, conv, {1, 2, 4, 4}, x, {2, 1, 3, 3}, w, {1, -1}, {1, 2, 2, 2});
    const std::vector<double> expected = {17, 20, 29, 32, 8, 8, 8, 8};
    EXPECT_EQ(reference, expected);
    if (dtype == MLUOP_DTYPE_FLOAT) {
      EXPECT_EQ(device, expected);
    }
  }
}

TEST(Conv2dReference, HandWorkedBackwardData) {
  // grad_output [[1, 2], [3, 4]], w [[1, 2], [3, 4]]: grad_input is the full correlation
  //   stride 1 -> 3x3 [[1, 4, 4], [6, 20, 16], [9, 24, 16]]
  //   stride 2 -> 4x4 non-overlapping tiles gy(a, b) * w
  struct Case {
    int stride;
    Dims x_dims;
    std::vector<double> expected;
  };
  const std::vector<Case> cases = {
      {1, {1, 1, 3, 3}, {1, 4, 4, 6, 20, 16, 9, 24, 16}},
      {2, {1, 1, 4, 4}, {1, 2, 2, 4, 3, 4, 6, 8, 3, 6, 4, 8, 9, 12, 12, 16}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.stride);
    ConvDesc conv({0, 0}, {c.stride, c.stride});
    Tensor gy = Tensor::host(MLUOP_DTYPE_DOUBLE, {1, 1, 2, 2}, {1, 2, 3, 4});
    Tensor w = Tensor::host(MLUOP_DTYPE_DOUBLE, {1, 1, 2, 2}, {1, 2, 3, 4});
    Tensor gx = Tensor::host(MLUOP_DTYPE_DOUBLE, c.x_dims);
    mlu::conv2d_backward_data_args args;
    args.conv_desc = conv.params();
    args.grad_output = gy.view();
    args.w = w.view();
    args.grad_input = gx.view();
    ASSERT_TRUE(mlu::reference::run(args).ok());
    EXPECT_EQ(gx.values(), c.expected);
  }
}

TEST(Conv2dReference, HandWorkedBackwardFilterAndBias) {
  // x [[1, 2, 3], [4, 5, 6], [7, 8, 9]], grad_output [[1, 0], [0, 1]] (2x2 kernel, stride 1):
  // grad_w(i, j) = x(i, j) + x(i + 1, j + 1) = [[6, 8], [12, 14]]; grad_bias = 1 + 0 + 0 + 1 = 2.
  ConvDesc conv;
  Tensor x = Tensor::host(MLUOP_DTYPE_DOUBLE, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor gy = Tensor::host(MLUOP_DTYPE_DOUBLE, {1, 1, 2, 2}, {1, 0, 0, 1});
  Tensor gw = Tensor::host(MLUOP_DTYPE_DOUBLE, {1, 1, 2, 2});
  mlu::conv2d_backward_filter_args args;
  args.conv_desc = conv.params();
  args.x = x.view();
  args.grad_output = gy.view();
  args.grad_w = gw.view();
  ASSERT_TRUE(mlu::reference::run(args).ok());
  EXPECT_EQ(gw.values(), (std::vector<double>{6, 8, 12, 14}));

  // grad_output [2, 2, 1, 2]: channel sums over images and pixels: (1 + 2 + 5 + 6), (3 + 4 + 7 + 8)
  Tensor gy2 = Tensor::host(MLUOP_DTYPE_DOUBLE, {2, 2, 1, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor gb = Tensor::host(MLUOP_DTYPE_DOUBLE, {2});
  mlu::conv2d_backward_bias_args bias_args;
  bias_args.grad_output = gy2.view();
  bias_args.grad_bias = gb.view();
  ASSERT_TRUE(mlu::reference::run(bias_args).ok());
  EXPECT_EQ(gb.values(), (std::vector<double>{14, 22}));
}

// ---- finite differences (float64, reference) ----

struct GradCase {
  std::string name;
  Dims x, w;
  std::array<int, 2> pad, stride, dil;
  int groups;
};

const std::vector<GradCase>& gradCases() {
  static const std::vector<GradCase> kCases = {
      {"stride2_pad1_dil2_groups2", {2, 4, 6, 5}, {4, 2, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 2},
      {"asymmetric", {1, 2, 5, 4}, {3, 2, 2, 3}, {0, 1}, {1, 2}, {1, 1}, 1},
  };
  return kCases;
}

// sum(conv2d_forward(x, w, b) * r) in float64 with the reference.
double convLoss(const GradCase& c, const ConvDesc& conv, const std::vector<double>& x,
                const std::vector<double>& w, const std::vector<double>& b, const std::vector<double>& r) {
  const Dims y_dims = convOutDims({c.name, c.x, c.w, c.pad, c.stride, c.dil, c.groups});
  Tensor xt = Tensor::host(MLUOP_DTYPE_DOUBLE, c.x, x), wt = Tensor::host(MLUOP_DTYPE_DOUBLE, c.w, w);
  Tensor bt = Tensor::host(MLUOP_DTYPE_DOUBLE, {c.w[0]}, b), yt = Tensor::host(MLUOP_DTYPE_DOUBLE, y_dims);
  mlu::conv2d_forward_args args;
  args.conv_desc = conv.params();
  args.x = xt.view();
  args.w = wt.view();
  args.bias = bt.view();
  args.y = yt.view();
  const mlu::Status s = mlu::reference::run(args);
  EXPECT_TRUE(s.ok()) << s.message;
  return dot(yt.values(), r);
}

TEST(Conv2dGradients, BackwardOpsMatchFiniteDifferences) {
  for (const GradCase& c : gradCases()) {
    SCOPED_TRACE(c.name);
    ConvDesc conv(c.pad, c.stride, c.dil, c.groups);
    const Dims y_dims = convOutDims({c.name, c.x, c.w, c.pad, c.stride, c.dil, c.groups});
    const std::vector<double> x = randomValues(numel(c.x), 61), w = randomValues(numel(c.w), 62);
    const std::vector<double> b = randomValues(c.w[0], 63), r = randomValues(numel(y_dims), 64);
    const Tolerance tol{1e-6, 1e-6};
    Tensor gy = Tensor::host(MLUOP_DTYPE_DOUBLE, y_dims, r);

    // d loss / d x
    Tensor wt = Tensor::host(MLUOP_DTYPE_DOUBLE, c.w, w), gx = Tensor::host(MLUOP_DTYPE_DOUBLE, c.x);
    mlu::conv2d_backward_data_args data_args;
    data_args.conv_desc = conv.params();
    data_args.grad_output = gy.view();
    data_args.w = wt.view();
    data_args.grad_input = gx.view();
    ASSERT_TRUE(mlu::reference::run(data_args).ok());
    expectClose(
        gx.values(),
        numericalGradient([&](const std::vector<double>& v) { return convLoss(c, conv, v, w, b, r); }, x),
        tol, "grad_input");

    // d loss / d w
    Tensor xt = Tensor::host(MLUOP_DTYPE_DOUBLE, c.x, x), gw = Tensor::host(MLUOP_DTYPE_DOUBLE, c.w);
    mlu::conv2d_backward_filter_args filter_args;
    filter_args.conv_desc = conv.params();
    filter_args.x = xt.view();
    filter_args.grad_output = gy.view();
    filter_args.grad_w = gw.view();
    ASSERT_TRUE(mlu::reference::run(filter_args).ok());
    expectClose(
        gw.values(),
        numericalGradient([&](const std::vector<double>& v) { return convLoss(c, conv, x, v, b, r); }, w),
        tol, "grad_w");

    // d loss / d bias
    Tensor gb = Tensor::host(MLUOP_DTYPE_DOUBLE, {c.w[0]});
    mlu::conv2d_backward_bias_args bias_args;
    bias_args.grad_output = gy.view();
    bias_args.grad_bias = gb.view();
    ASSERT_TRUE(mlu::reference::run(bias_args).ok());
    expectClose(
        gb.values(),
        numericalGradient([&](const std::vector<double>& v) { return convLoss(c, conv, x, w, v, r); }, b),
        tol, "grad_bias");
  }
}

// ---- workspace ----

TEST(Conv2dWorkspace, SizeCoversOneIm2colMatrixPerCore) {
  Handle handle;
  ConvDesc conv({1, 1});
  Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3, 7, 6}),
         w = Tensor::device(MLUOP_DTYPE_FLOAT, {4, 3, 3, 3});
  Tensor y = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 4, 7, 6});
  size_t bytes = 0;
  ASSERT_EQ(mluopGetConvolutionForwardWorkspaceSize(handle, conv, x.desc(), w.desc(), y.desc(), &bytes),
            MLUOP_STATUS_SUCCESS);
  const size_t per_core = 27 * 42 * sizeof(float);  // [C * kh * kw, Ho * Wo] floats
  EXPECT_EQ(bytes % per_core, 0u);
  EXPECT_GE(bytes, per_core);
  EXPECT_LE(bytes, 2 * per_core);  // at most one per image

  // Backward filter adds a float32 [Cout, C * kh * kw] partial sum per core; backward data a [C, H, W] image.
  ASSERT_EQ(
      mluopGetConvolutionBackwardFilterWorkspaceSize(handle, conv, x.desc(), y.desc(), w.desc(), &bytes),
      MLUOP_STATUS_SUCCESS);
  EXPECT_EQ(bytes % ((27 * 42 + 4 * 27) * sizeof(float)), 0u);
  ASSERT_EQ(mluopGetConvolutionBackwardDataWorkspaceSize(handle, conv, y.desc(), w.desc(), x.desc(), &bytes),
            MLUOP_STATUS_SUCCESS);
  EXPECT_EQ(bytes % ((27 * 42 + 3 * 7 * 6) * sizeof(float)), 0u);
}

TEST(Conv2dWorkspace, PointwiseNeedsNoneAndAcceptsNull) {
  Handle handle;
  ConvDesc conv;
  Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 5, 4, 3}, randomValues(120, 71));
  Tensor w = Tensor::device(MLUOP_DTYPE_FLOAT, {3, 5, 1, 1}, randomValues(15, 72));
  Tensor y = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3, 4, 3});
  size_t bytes = 99;
  ASSERT_EQ(mluopGetConvolutionForwardWorkspaceSize(handle, conv, x.desc(), w.desc(), y.desc(), &bytes),
            MLUOP_STATUS_SUCCESS);
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(mluopConvolutionForward(handle, conv, x.desc(), x.data(), w.desc(), w.data(), nullptr, nullptr,
                                    nullptr, 0, y.desc(), y.data()),
            MLUOP_STATUS_SUCCESS)
      << lastError();
  handle.sync();
}

TEST(Conv2dWorkspace, TooSmallIsRejected) {
  Handle handle;
  ConvDesc conv({1, 1});
  Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3, 7, 6}),
         w = Tensor::device(MLUOP_DTYPE_FLOAT, {4, 3, 3, 3});
  Tensor y = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 4, 7, 6});
  DeviceBuffer small(16);
  size_t need = 0;

  ASSERT_EQ(mluopGetConvolutionForwardWorkspaceSize(handle, conv, x.desc(), w.desc(), y.desc(), &need),
            MLUOP_STATUS_SUCCESS);
  EXPECT_EQ(mluopConvolutionForward(handle, conv, x.desc(), x.data(), w.desc(), w.data(), nullptr, nullptr,
                                    small.data(), small.size(), y.desc(), y.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("conv2d_forward: workspace of 16 bytes is smaller than the " +
                                     std::to_string(need) + " bytes this convolution needs"));
  EXPECT_EQ(mluopConvolutionForward(handle, conv, x.desc(), x.data(), w.desc(), w.data(), nullptr, nullptr,
                                    nullptr, 0, y.desc(), y.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("workspace of 0 bytes is smaller than the"));

  ASSERT_EQ(mluopGetConvolutionBackwardDataWorkspaceSize(handle, conv, y.desc(), w.desc(), x.desc(), &need),
            MLUOP_STATUS_SUCCESS);
  EXPECT_EQ(mluopConvolutionBackwardData(handle, conv, y.desc(), y.data(), w.desc(), w.data(), small.data(),
                                         small.size(), x.desc(), x.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("conv2d_backward_data: workspace of 16 bytes is smaller than the " +
                                     std::to_string(need) + " bytes"));

  ASSERT_EQ(mluopGetConvolutionBackwardFilterWorkspaceSize(handle, conv, x.desc(), y.desc(), w.desc(), &need),
            MLUOP_STATUS_SUCCESS);
  EXPECT_EQ(mluopConvolutionBackwardFilter(handle, conv, x.desc(), x.data(), y.desc(), y.data(), small.data(),
                                           small.size(), w.desc(), w.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("conv2d_backward_filter: workspace of 16 bytes is smaller than the " +
                                     std::to_string(need) + " bytes"));
}

TEST(Conv2dWorkspace, QueryChecksItsArguments) {
  Handle handle;
  ConvDesc conv;
  Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {1, 3, 5, 5}),
         w = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 1, 3, 3});
  Tensor y = Tensor::device(MLUOP_DTYPE_FLOAT, {1, 2, 3, 3});
  size_t bytes = 0;
  EXPECT_EQ(mluopGetConvolutionForwardWorkspaceSize(handle, conv, x.desc(), w.desc(), y.desc(), &bytes),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("mluopGetConvolutionForwardWorkspaceSize: input channels 3 do not match "
                                     "filter channels 1 x groups 1"));
  EXPECT_EQ(mluopGetConvolutionForwardWorkspaceSize(handle, conv, x.desc(), w.desc(), y.desc(), nullptr),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("size is NULL"));
  EXPECT_EQ(
      mluopGetConvolutionBackwardDataWorkspaceSize(handle, nullptr, y.desc(), w.desc(), x.desc(), &bytes),
      MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("mluopGetConvolutionBackwardDataWorkspaceSize: conv_desc is NULL"));
  EXPECT_EQ(mluopGetConvolutionBackwardFilterWorkspaceSize(handle, conv, x.desc(), nullptr, w.desc(), &bytes),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("grad_output_desc is NULL"));
  EXPECT_EQ(mluopGetConvolutionForwardWorkspaceSize(nullptr, conv, x.desc(), w.desc(), y.desc(), &bytes),
            MLUOP_STATUS_NOT_INITIALIZED);
}

// ---- convolution errors ----

// The tensors of a convolution call, all float32 unless given.
struct ConvCall {
  Dims x, w, y;
  ConvDesc conv;
  std::optional<Dims> bias = std::nullopt;
  mluopDataType_t w_type = MLUOP_DTYPE_FLOAT;
  mluopTensorLayout_t x_layout = MLUOP_LAYOUT_ARRAY;
};

// A descriptor with a given layout (the harness's tensors are ARRAY).
struct LayoutDesc {
  mluopTensorDescriptor_t desc = nullptr;
  LayoutDesc(mluopTensorLayout_t layout, const Dims& dims) {
    EXPECT_EQ(mluopCreateTensorDescriptor(&desc), MLUOP_STATUS_SUCCESS);
    EXPECT_EQ(
        mluopSetTensorDescriptor(desc, layout, MLUOP_DTYPE_FLOAT, static_cast<int>(dims.size()), dims.data()),
        MLUOP_STATUS_SUCCESS);
  }
  ~LayoutDesc() { mluopDestroyTensorDescriptor(desc); }
  LayoutDesc(const LayoutDesc&) = delete;
  LayoutDesc& operator=(const LayoutDesc&) = delete;
};

// Each of the four convolution ops on the same shapes (x, w, y as forward sees them); returns their statuses
// and messages in the order forward, backward data, backward filter.
struct ConvStatuses {
  std::vector<mluopStatus_t> status;
  std::vector<std::string> message;
};
ConvStatuses callConvOps(const ConvCall& c) {
  Handle handle;
  Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, c.x), w = Tensor::device(c.w_type, c.w);
  Tensor y = Tensor::device(MLUOP_DTYPE_FLOAT, c.y);
  std::optional<Tensor> b;
  if (c.bias) b = Tensor::device(MLUOP_DTYPE_FLOAT, *c.bias);
  LayoutDesc x_layout(c.x_layout, c.x);
  const mluopTensorDescriptor_t x_desc = c.x_layout == MLUOP_LAYOUT_ARRAY ? x.desc() : x_layout.desc;
  DeviceBuffer ws(1 << 16);
  ConvStatuses out;
  auto record = [&](mluopStatus_t s) {
    out.status.push_back(s);
    out.message.push_back(lastError());
  };
  record(mluopConvolutionForward(handle, c.conv, x_desc, x.data(), w.desc(), w.data(),
                                 b ? b->desc() : nullptr, b ? b->data() : nullptr, ws.data(), ws.size(),
                                 y.desc(), y.data()));
  record(mluopConvolutionBackwardData(handle, c.conv, y.desc(), y.data(), w.desc(), w.data(), ws.data(),
                                      ws.size(), x_desc, x.data()));
  record(mluopConvolutionBackwardFilter(handle, c.conv, x_desc, x.data(), y.desc(), y.data(), ws.data(),
                                        ws.size(), w.desc(), w.data()));
  handle.sync();
  return out;
}

// Expects forward, backward data and backward filter to fail with `status` and the message texts[i] (after
// "<op>: "; each op names its own arguments).
void expectConvFailure(const ConvCall& c, mluopStatus_t status, const std::array<std::string, 3>& texts) {
  const ConvStatuses r = callConvOps(c);
  const char* ops[] = {"conv2d_forward: ", "conv2d_backward_data: ", "conv2d_backward_filter: "};
  for (std::size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(ops[i]);
    EXPECT_EQ(r.status[i], status);
    EXPECT_THAT(r.message[i], HasSubstr(std::string(ops[i]) + texts[i]));
  }
}
void expectConvFailure(const ConvCall& c, mluopStatus_t status, const std::string& text) {
  expectConvFailure(c, status, {text, text, text});
}

TEST(Conv2dErrors, ChannelsGroupsAndShapes) {
  expectConvFailure({{1, 3, 5, 5}, {2, 1, 3, 3}, {1, 2, 3, 3}, ConvDesc()}, MLUOP_STATUS_BAD_PARAM,
                    "input channels 3 do not match filter channels 1 x groups 1");
  expectConvFailure({{1, 8, 5, 5}, {10, 2, 3, 3}, {1, 10, 3, 3}, ConvDesc({0, 0}, {1, 1}, {1, 1}, 4)},
                    MLUOP_STATUS_BAD_PARAM, "output channels 10 are not divisible by groups 4");
  const std::string shape = " has shape [1, 2, 4, 4] but the convolution gives [1, 2, 3, 3]";
  expectConvFailure({{1, 2, 5, 5}, {2, 2, 3, 3}, {1, 2, 4, 4}, ConvDesc()}, MLUOP_STATUS_BAD_PARAM,
                    {"y" + shape, "grad_output" + shape, "grad_output" + shape});
  expectConvFailure({{1, 1, 2, 2}, {1, 1, 3, 3}, {1, 1, 1, 1}, ConvDesc()}, MLUOP_STATUS_BAD_PARAM,
                    "the padded input 2x2 is smaller than the dilated kernel 3x3");
  expectConvFailure({{1, 1, 3, 3}, {1, 1, 2, 2}, {1, 1, 1, 1}, ConvDesc({0, 0}, {1, 1}, {3, 3})},
                    MLUOP_STATUS_BAD_PARAM, "the padded input 3x3 is smaller than the dilated kernel 4x4");
  expectConvFailure({{1, 2, 5, 5}, {2, 2, 3, 3}, {1, 2, 3, 3}, ConvDesc(), std::nullopt, MLUOP_DTYPE_HALF},
                    MLUOP_STATUS_BAD_PARAM,
                    {"w is float16 but x is float32", "w is float16 but grad_output is float32",
                     "grad_w is float16 but x is float32"});
  expectConvFailure({{1, 2, 5, 5},
                     {2, 2, 3, 3},
                     {1, 2, 3, 3},
                     ConvDesc(),
                     std::nullopt,
                     MLUOP_DTYPE_FLOAT,
                     MLUOP_LAYOUT_NHWC},
                    MLUOP_STATUS_NOT_SUPPORTED,
                    {"x has layout NHWC; only NCHW", "grad_input has layout NHWC; only NCHW",
                     "x has layout NHWC; only NCHW"});
}

TEST(Conv2dErrors, NotFourDimensional) {
  Handle handle;
  ConvDesc conv;
  Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {3, 5, 5}),
         w = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3, 3, 3});
  Tensor y = Tensor::device(MLUOP_DTYPE_FLOAT, {1, 2, 3, 3});
  EXPECT_EQ(mluopConvolutionForward(handle, conv, x.desc(), x.data(), w.desc(), w.data(), nullptr, nullptr,
                                    nullptr, 0, y.desc(), y.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("conv2d_forward: x has shape [3, 5, 5] but must be 4-d [N, C, H, W]"));
  Tensor w3 = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 3, 3});
  Tensor x4 = Tensor::device(MLUOP_DTYPE_FLOAT, {1, 3, 5, 5});
  EXPECT_EQ(mluopConvolutionBackwardFilter(handle, conv, x4.desc(), x4.data(), y.desc(), y.data(), nullptr, 0,
                                           w3.desc(), w3.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(),
              HasSubstr("grad_w has shape [2, 3, 3] but must be 4-d [Cout, C / groups, kh, kw]"));
}

TEST(Conv2dErrors, BiasShape) {
  Handle handle;
  ConvDesc conv;
  Tensor x = Tensor::device(MLUOP_DTYPE_FLOAT, {1, 2, 5, 5}),
         w = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 2, 3, 3});
  Tensor y = Tensor::device(MLUOP_DTYPE_FLOAT, {1, 2, 3, 3}), b = Tensor::device(MLUOP_DTYPE_FLOAT, {3});
  DeviceBuffer ws(1 << 12);
  EXPECT_EQ(mluopConvolutionForward(handle, conv, x.desc(), x.data(), w.desc(), w.data(), b.desc(), b.data(),
                                    ws.data(), ws.size(), y.desc(), y.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(),
              HasSubstr("conv2d_forward: bias has shape [3] but the convolution has 2 channels"));
}

TEST(Conv2dErrors, BackwardBias) {
  Handle handle;
  Tensor gy = Tensor::device(MLUOP_DTYPE_FLOAT, {2, 4, 3, 3}), gb = Tensor::device(MLUOP_DTYPE_FLOAT, {3});
  EXPECT_EQ(mluopConvolutionBackwardBias(handle, gy.desc(), gy.data(), gb.desc(), gb.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(
      lastError(),
      HasSubstr("conv2d_backward_bias: grad_bias has shape [3] but grad_output [2, 4, 3, 3] has 4 channels"));
  Tensor gy3 = Tensor::device(MLUOP_DTYPE_FLOAT, {4, 3, 3}), gb4 = Tensor::device(MLUOP_DTYPE_FLOAT, {4});
  EXPECT_EQ(mluopConvolutionBackwardBias(handle, gy3.desc(), gy3.data(), gb4.desc(), gb4.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("grad_output has shape [4, 3, 3] but must be 4-d [N, Cout, Ho, Wo]"));
  Tensor gbh = Tensor::device(MLUOP_DTYPE_HALF, {4});
  EXPECT_EQ(mluopConvolutionBackwardBias(handle, gy.desc(), gy.data(), gbh.desc(), gbh.data()),
            MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr("grad_bias is float16 but grad_output is float32"));
}

TEST(Conv2dErrors, Float64NotSupportedOnDevice) {
  Handle handle;
  ConvDesc conv;
  const mluopDataType_t f64 = MLUOP_DTYPE_DOUBLE;
  Tensor x = Tensor::device(f64, {1, 2, 5, 5}), w = Tensor::device(f64, {2, 2, 3, 3});
  Tensor y = Tensor::device(f64, {1, 2, 3, 3}), b = Tensor::device(f64, {2});
  DeviceBuffer ws(1 << 14);
  EXPECT_EQ(mluopConvolutionForward(handle, conv, x.desc(), x.data(), w.desc(), w.data(), b.desc(), b.data(),
                                    ws.data(), ws.size(), y.desc(), y.data()),
            MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("float64"));
  EXPECT_EQ(mluopConvolutionBackwardData(handle, conv, y.desc(), y.data(), w.desc(), w.data(), ws.data(),
                                         ws.size(), x.desc(), x.data()),
            MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(mluopConvolutionBackwardFilter(handle, conv, x.desc(), x.data(), y.desc(), y.data(), ws.data(),
                                           ws.size(), w.desc(), w.data()),
            MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(mluopConvolutionBackwardBias(handle, y.desc(), y.data(), b.desc(), b.data()),
            MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("float64"));
}

// Paths the C API cannot reach (the descriptor setter already refuses bad parameters) but the reference's
// callers (compare, replay) can: checked through mlu::reference::run, which validates the same way.
TEST(Conv2dErrors, ReferenceChecksParametersAndTensors) {
  Tensor x = Tensor::host(MLUOP_DTYPE_FLOAT, {1, 2, 5, 5}), w = Tensor::host(MLUOP_DTYPE_FLOAT, {2, 2, 3, 3});
  Tensor y = Tensor::host(MLUOP_DTYPE_FLOAT, {1, 2, 3, 3});
  auto run = [&](const mlu::ConvParams& params) {
    mlu::conv2d_forward_args args;
    args.conv_desc = params;
    args.x = x.view();
    args.w = w.view();
    args.y = y.view();
    return mlu::reference::run(args);
  };
  struct Case {
    mlu::ConvParams params;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{{-1, 0}, {1, 1}, {1, 1}, 1}, "padding [-1, 0] must not be negative"},
      {{{0, 0}, {0, 1}, {1, 1}, 1}, "stride [0, 1] must be at least 1"},
      {{{0, 0}, {1, 1}, {1, 0}, 1}, "dilation [1, 0] must be at least 1"},
      {{{0, 0}, {1, 1}, {1, 1}, 0}, "groups = 0 must be at least 1"},
  };
  for (const Case& c : cases) {
    const mlu::Status s = run(c.params);
    EXPECT_EQ(s.code, MLUOP_STATUS_BAD_PARAM);
    EXPECT_THAT(s.message, HasSubstr(c.message));
  }
  EXPECT_TRUE(run(mlu::ConvParams{}).ok());

  Tensor empty_kernel = Tensor::host(MLUOP_DTYPE_FLOAT, {2, 2, 0, 3});
  mlu::conv2d_forward_args args;
  args.x = x.view();
  args.w = empty_kernel.view();
  args.y = y.view();
  mlu::Status s = mlu::reference::run(args);
  EXPECT_EQ(s.code, MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(s.message, HasSubstr("w has shape [2, 2, 0, 3]: its 0x3 kernel is empty"));

  args.w = mlu::TensorView{};  // absent required tensor
  s = mlu::reference::run(args);
  EXPECT_EQ(s.code, MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(s.message, HasSubstr("w is missing"));

  // An output that overlaps itself: y [1, 2, 3, 3] with a 0 stride.
  Tensor y_overlap = Tensor::host(MLUOP_DTYPE_FLOAT, {1, 2, 3, 3}, {}, {18, 0, 3, 1});
  args.w = w.view();
  args.y = y_overlap.view();
  s = mlu::reference::run(args);
  EXPECT_EQ(s.code, MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(s.message, HasSubstr("y (shape [1, 2, 3, 3], strides [18, 0, 3, 1]) overlaps itself"));
}

// ======================================= the GEMM engine =======================================

// Both micro-kernels (the AVX2+FMA one only where the CPU has it) against a plain double GEMM, through the
// engine's blocking with edge tiles, a strided destination and accumulation.
TEST(GemmEngine, MicroKernelsMatchNaiveProduct) {
  namespace gemm = mlu::gemm;
  const std::int64_t m = 37, n = 45, k = 300;
  std::vector<float> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
  const std::vector<double> av = randomValues(m * k, 81), bv = randomValues(k * n, 82);
  std::copy(av.begin(), av.end(), a.begin());
  std::copy(bv.begin(), bv.end(), b.begin());
  std::vector<double> expected(static_cast<std::size_t>(m * n), 0.0);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      for (std::int64_t p = 0; p < k; ++p) {
        expected[static_cast<std::size_t>(i * n + j)] +=
            static_cast<double>(a[static_cast<std::size_t>(i * k + p)]) *
            b[static_cast<std::size_t>(p * n + j)];
      }
    }
  }
  std::vector<std::pair<const char*, gemm::Kernels>> kernels = {{"portable", {&gemm::microKernelPortable}}};
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    kernels.emplace_back("avx2_fma", gemm::Kernels{&gemm::microKernelAvx2});
    if (__builtin_cpu_supports("avx512f")) {
      kernels.emplace_back("avx512", gemm::Kernels{&gemm::microKernelAvx2, &gemm::wideKernelAvx512});
    }
  }
  const gemm::Operand ao{a.data(), MLUOP_DTYPE_FLOAT, gemm::Axis::strided(k), gemm::Axis::strided(1)};
  const gemm::Operand bo{b.data(), MLUOP_DTYPE_FLOAT, gemm::Axis::strided(n), gemm::Axis::strided(1)};
  const Tolerance tol = sumTolerance(MLUOP_DTYPE_FLOAT, k);
  for (const auto& [name, kernel] : kernels) {
    SCOPED_TRACE(name);
    gemm::Scratch scratch;
    std::vector<float> c(static_cast<std::size_t>(m * n), -1.0f);
    gemm::gemmFloat(ao, bo, 0, m, 0, n, k, gemm::Dest{c.data(), n, 1}, false, scratch, kernel);
    expectClose(std::vector<double>(c.begin(), c.end()), expected, tol, "overwrite");
    gemm::gemmFloat(ao, bo, 0, m, 0, n, k, gemm::Dest{c.data(), n, 1}, true, scratch, kernel);
    std::vector<double> doubled(expected);
    for (double& v : doubled) v *= 2;
    expectClose(std::vector<double>(c.begin(), c.end()), doubled, tol, "accumulate");
    // Transposed destination (column stride m): every tile goes through the edge path.
    std::vector<float> ct(static_cast<std::size_t>(m * n));
    gemm::gemmFloat(ao, bo, 0, m, 0, n, k, gemm::Dest{ct.data(), 1, m}, false, scratch, kernel);
    std::vector<double> transposed(static_cast<std::size_t>(m * n));
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        transposed[static_cast<std::size_t>(i * n + j)] = ct[static_cast<std::size_t>(j * m + i)];
      }
    }
    expectClose(transposed, expected, tol, "strided destination");
  }
}

// The AVX-512 wide kernel computes each element with the same FMAs in the same order as the AVX2 kernel: the
// two give identical bits, on shapes that take every block kind (2 x 2, 2 x 1, 1 x 2, 1 x 1 micro-tiles,
// partial rows under two B panels, edge tiles), more than one depth block, and accumulation.
TEST(GemmEngine, Avx512WideKernelGivesTheAvx2KernelsBits) {
  namespace gemm = mlu::gemm;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ||
      !__builtin_cpu_supports("avx512f")) {
    GTEST_SKIP() << "this CPU has no AVX-512F";
  }
  const gemm::Kernels avx2{&gemm::microKernelAvx2};
  const gemm::Kernels avx512{&gemm::microKernelAvx2, &gemm::wideKernelAvx512};
  struct Shape {
    std::int64_t m, n, k;
  };
  for (const Shape& sh :
       {Shape{12, 32, 7}, Shape{64, 64, 32}, Shape{37, 45, 300}, Shape{150, 70, 513}, Shape{6, 16, 1},
        Shape{5, 33, 20}, Shape{18, 48, 64}, Shape{64, 17, 9}, Shape{11, 31, 40}}) {
    SCOPED_TRACE(testing::Message() << sh.m << "x" << sh.n << "x" << sh.k);
    const std::vector<double> av = randomValues(sh.m * sh.k, 71), bv = randomValues(sh.k * sh.n, 72);
    const std::vector<float> a(av.begin(), av.end()), b(bv.begin(), bv.end());
    const gemm::Operand ao{a.data(), MLUOP_DTYPE_FLOAT, gemm::Axis::strided(sh.k), gemm::Axis::strided(1)};
    const gemm::Operand bo{b.data(), MLUOP_DTYPE_FLOAT, gemm::Axis::strided(sh.n), gemm::Axis::strided(1)};
    for (const bool accumulate : {false, true}) {
      std::vector<float> c2(static_cast<std::size_t>(sh.m * sh.n), 0.5f), c5(c2);
      gemm::Scratch scratch;
      gemm::gemmFloat(ao, bo, 0, sh.m, 0, sh.n, sh.k, gemm::Dest{c2.data(), sh.n, 1}, accumulate, scratch,
                      avx2);
      gemm::gemmFloat(ao, bo, 0, sh.m, 0, sh.n, sh.k, gemm::Dest{c5.data(), sh.n, 1}, accumulate, scratch,
                      avx512);
      ASSERT_EQ(0, std::memcmp(c2.data(), c5.data(), c2.size() * sizeof(float)))
          << "accumulate " << accumulate;
      EXPECT_NE(c2[0], 0.5f);
    }
  }
}

// The micro-kernels are not instrumented in the sanitizer build (for speed); the ranges they touch are
// checked before each call instead. A destination one float short, an A panel one float short: each is an
// AddressSanitizer report naming the overflow, as an instrumented kernel would give.
TEST(GemmEngineDeathTest, UnderAddressSanitizerAMicroKernelOverflowIsReported) {
#if !defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "only the AddressSanitizer build checks the micro-kernel's ranges";
#else
  namespace gemm = mlu::gemm;
  const std::int64_t kc = 8;
  const std::vector<float> a(kc * gemm::kMr, 1.0f), b(kc * gemm::kNr, 1.0f);
  for (const gemm::MicroKernel kernel :
       {gemm::MicroKernel{&gemm::microKernelPortable}, gemm::bestMicroKernel()}) {
    std::vector<float> c(gemm::kMr * gemm::kNr, 0.0f);
    kernel(kc, a.data(), b.data(), c.data(), gemm::kNr, false);  // exactly in bounds: fine
    EXPECT_EQ(c.back(), static_cast<float>(kc));
    std::vector<float> short_c(gemm::kMr * gemm::kNr - 1);
    EXPECT_DEATH(kernel(kc, a.data(), b.data(), short_c.data(), gemm::kNr, false), "heap-buffer-overflow");
    const std::vector<float> short_a(kc * gemm::kMr - 1, 1.0f);
    EXPECT_DEATH(kernel(kc, short_a.data(), b.data(), c.data(), gemm::kNr, false), "heap-buffer-overflow");
  }
  if (const gemm::WideKernel wide = gemm::bestKernels().wide) {  // 2 x 2 tiles: 12 x 32
    const std::vector<float> a2(2 * kc * gemm::kMr, 1.0f), b2(2 * kc * gemm::kNr, 1.0f);
    std::vector<float> c2(4 * gemm::kMr * gemm::kNr, 0.0f);
    wide(2, 2, 2 * gemm::kMr, 2 * gemm::kNr, kc, a2.data(), b2.data(), c2.data(), 2 * gemm::kNr, false);
    EXPECT_EQ(c2.back(), static_cast<float>(kc));
    std::vector<float> short_c2(c2.size() - 1);
    EXPECT_DEATH(wide(2, 2, 2 * gemm::kMr, 2 * gemm::kNr, kc, a2.data(), b2.data(), short_c2.data(),
                      2 * gemm::kNr, false),
                 "heap-buffer-overflow");
    const std::vector<float> short_b2(b2.size() - 1, 1.0f);
    EXPECT_DEATH(wide(2, 2, 2 * gemm::kMr, 2 * gemm::kNr, kc, a2.data(), short_b2.data(), c2.data(),
                      2 * gemm::kNr, false),
                 "heap-buffer-overflow");
  }
#endif
}

TEST(GemmEngine, AxisMergesContiguousDims) {
  mlu::gemm::Axis axis;
  axis.append(3, 20);  // [3, 4, 5] contiguous: one level of stride 1
  axis.append(4, 5);
  axis.append(5, 1);
  EXPECT_TRUE(axis.simple());
  EXPECT_EQ(axis.stride(), 1);
  mlu::gemm::Axis padded;  // rows padded to 8: two levels
  padded.append(3, 8);
  padded.append(5, 1);
  EXPECT_FALSE(padded.simple());
  EXPECT_EQ(padded.offset(7), 8 + 2);
  EXPECT_EQ(padded.offset(14), 16 + 4);
}

// A non-float32 output goes through float32 staging blocks of about kStageFloats values: a bfloat16 output
// of 600 x 1800 (transposed in memory, with a per-column bias) takes two row chunks.
TEST(GemmEngine, StagedOutputInRowChunks) {
  namespace gemm = mlu::gemm;
  const std::int64_t m = 600, n = 1800, k = 3;
  ASSERT_GT(m * n, gemm::kStageFloats);
  const std::vector<double> av = randomValues(m * k, 91), bv = randomValues(k * n, 92),
                            biasv = randomValues(n, 93);
  std::vector<float> a(av.begin(), av.end()), b(bv.begin(), bv.end()), bias(biasv.begin(), biasv.end());
  std::vector<std::uint16_t> out(static_cast<std::size_t>(m * n));
  const gemm::Operand ao{a.data(), MLUOP_DTYPE_FLOAT, gemm::Axis::strided(k), gemm::Axis::strided(1)};
  const gemm::Operand bo{b.data(), MLUOP_DTYPE_FLOAT, gemm::Axis::strided(n), gemm::Axis::strided(1)};
  const gemm::Output oo{out.data(), MLUOP_DTYPE_BFLOAT16, gemm::Axis::strided(1), gemm::Axis::strided(m)};
  gemm::Scratch scratch;
  gemm::gemmOut(ao, bo, 0, m, 0, n, k, oo, gemm::Bias{bias.data(), MLUOP_DTYPE_FLOAT, 1, false}, scratch);
  std::vector<double> actual(out.size()), expected(out.size());
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = bias[static_cast<std::size_t>(j)];
      for (std::int64_t p = 0; p < k; ++p) {
        sum += static_cast<double>(a[static_cast<std::size_t>(i * k + p)]) *
               b[static_cast<std::size_t>(p * n + j)];
      }
      expected[static_cast<std::size_t>(i * n + j)] = sum;
      actual[static_cast<std::size_t>(i * n + j)] =
          mlu::bfloat16ToFloat(out[static_cast<std::size_t>(j * m + i)]);
    }
  }
  expectClose(actual, expected, toleranceFor(MLUOP_DTYPE_BFLOAT16));
}

}  // namespace
