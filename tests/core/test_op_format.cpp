// The one formatter of op arguments (op_format.h), against hand-written strings: a tensor, with its strides
// only when they are not its shape's row-major ones; int lists; convolution parameters as JSON; the
// one-line form of a call's tensors; shapes from an untrusted capture.db that would overflow.
#include <opscope/op_format.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

namespace {

mlu::TensorView view(mluopDataType_t dtype, std::vector<std::int64_t> dims,
                     std::vector<std::int64_t> strides) {
  mlu::TensorView v;
  v.dtype = dtype;
  v.ndim = static_cast<int>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    v.dims[i] = dims[i];
    v.strides[i] = strides[i];
  }
  v.present = true;
  return v;
}

}  // namespace

TEST(OpFormat, ATensorShowsItsStridesOnlyWhenTheyAreNotItsShapes) {
  using opscope::tensorText;
  EXPECT_EQ(tensorText(view(MLUOP_DTYPE_FLOAT, {4, 1, 28, 28}, {784, 784, 28, 1})), "float32[4,1,28,28]");
  // A dim of 1 may have any stride and still be contiguous.
  EXPECT_EQ(tensorText(view(MLUOP_DTYPE_HALF, {4, 1, 3}, {3, 99, 1})), "float16[4,1,3]");
  EXPECT_EQ(tensorText(view(MLUOP_DTYPE_BFLOAT16, {2, 3}, {1, 2})), "bfloat16[2,3] strides [1,2]");
  EXPECT_EQ(tensorText(view(MLUOP_DTYPE_FLOAT, {2, 3}, {3, 1}), opscope::StridesShown::kAlways),
            "float32[2,3] strides [3,1]");
  EXPECT_EQ(tensorText(view(MLUOP_DTYPE_INT64, {}, {})), "int64[]");
  // The span form decides the same; strides shorter than the dims are not contiguous.
  const std::vector<std::int64_t> dims = {2, 3}, row_major = {3, 1}, short_strides = {1};
  EXPECT_EQ(tensorText("float32", dims, row_major), "float32[2,3]");
  EXPECT_EQ(tensorText("float32", dims, short_strides), "float32[2,3] strides [1]");
  EXPECT_EQ(opscope::packedTensorText("bool", dims), "bool[2,3]");
}

TEST(OpFormat, ShapesFromAnUntrustedFileDoNotOverflow) {
  // 2^62 * 4 wraps an int64: unsigned arithmetic, no undefined behaviour (UBSan checks it in the ASan stage).
  const std::vector<std::int64_t> dims = {std::int64_t{1} << 62, 4, 4}, strides = {16, 4, 1};
  EXPECT_EQ(opscope::tensorText("int8", dims, strides), "int8[4611686018427387904,4,4]");
  const std::vector<std::int64_t> negative = {-1, std::numeric_limits<std::int64_t>::min()};
  EXPECT_EQ(opscope::tensorText("int8", negative, negative),
            "int8[-1,-9223372036854775808] strides [-1,-9223372036854775808]");
}

TEST(OpFormat, IntListsAndConvolutionParameters) {
  EXPECT_EQ(opscope::intsText(std::vector<int>{1, -2, 3}, 3), "[1,-2,3]");
  EXPECT_EQ(opscope::intsText(std::vector<int>{}, 0), "[]");
  mlu::ConvParams p;
  p.padding = {1, 2};
  p.stride = {2, 2};
  p.groups = 4;
  EXPECT_EQ(opscope::convText(p), R"({"padding":[1,2],"stride":[2,2],"dilation":[1,1],"groups":4})");
}

TEST(OpFormat, TheOneLineFormOfACallsTensors) {
  mlu::add_args args;
  args.alpha = 2;
  args.a = view(MLUOP_DTYPE_FLOAT, {2, 4}, {8, 2});
  args.b = view(MLUOP_DTYPE_FLOAT, {4}, {1});
  args.c = view(MLUOP_DTYPE_FLOAT, {2, 4}, {4, 1});
  opscope::OpCall call;
  call.op = mlu::OpId::add;
  call.name = "add";
  call.args = &args;
  call.args_ok = true;
  EXPECT_EQ(opscope::tensorsLine(call), "a float32[2,4] strides [8,2]; b float32[4]; c float32[2,4]");
  args.b.present = false;  // an absent (optional) tensor is left out
  EXPECT_EQ(opscope::tensorsLine(call), "a float32[2,4] strides [8,2]; c float32[2,4]");
  call.args_ok = false;
  EXPECT_EQ(opscope::tensorsLine(call), "");
}
