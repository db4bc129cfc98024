// Fallback as a tool alone, in-process (no LD_PRELOAD): a made-up relu call that the list forces to the
// CPU is marked, then run by the CPU reference in place of the device (its output written into the device
// buffer); one the device refused (NOT_SUPPORTED) is run the same way; an op not listed is left alone.
#include "../support/made_up_call.h"

#include <opscope/fallback/fallback.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

TEST(FallbackTool, AForcedAndARefusedCallRunOnTheCpuReference) {
  opscope::Config config;
  config.fallback = true;
  config.fallback_ops = opscope::OpFilter::parse("OP_FALLBACK_LIST", "relu", "OP_FALLBACK_DISABLE_LIST", {});
  const auto tool = opscope::fallback::makeFallbackTool(config);

  // Forced: marked before the others look, then run in place of the device.
  opscope_test::MadeUpRelu forced({1, -2, 3, -4}, 1);
  ASSERT_TRUE(tool->wants(forced.call()));
  tool->mark(forced.call());
  EXPECT_EQ(forced.call().fallback, opscope::OpCall::Fallback::kForced);
  ASSERT_TRUE(tool->replaceOp(forced.call()));
  EXPECT_EQ(forced.call().status, MLUOP_STATUS_SUCCESS);
  EXPECT_EQ(forced.output(), (std::vector<float>{1, 0, 3, 0}));

  // Not listed: left to the device. Refused by the device: run on the CPU (automatic).
  opscope::Config none;
  none.fallback_ops = opscope::OpFilter::parse("OP_FALLBACK_LIST", "add", "OP_FALLBACK_DISABLE_LIST", {});
  none.fallback = true;
  const auto only_add = opscope::fallback::makeFallbackTool(none);
  opscope_test::MadeUpRelu refused({-1, 5}, 2);
  only_add->mark(refused.call());
  EXPECT_EQ(refused.call().fallback, opscope::OpCall::Fallback::kNone);
  EXPECT_FALSE(only_add->replaceOp(refused.call()));
  refused.call().status = MLUOP_STATUS_NOT_SUPPORTED;
  ASSERT_TRUE(only_add->replaceRefusedOp(refused.call()));
  EXPECT_EQ(refused.call().status, MLUOP_STATUS_SUCCESS);
  EXPECT_EQ(refused.call().fallback, opscope::OpCall::Fallback::kAutomatic);
  EXPECT_EQ(refused.output(), (std::vector<float>{0, 5}));

  ::testing::internal::CaptureStderr();
  tool->flush();
  only_add->flush();
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(said, ::testing::HasSubstr("relu"));
  EXPECT_EQ(tool->findings(), nlohmann::json::parse(R"({"ops":[{"op":"relu","forced":1,"automatic":0}]})"));
  EXPECT_EQ(only_add->findings(),
            nlohmann::json::parse(R"({"ops":[{"op":"relu","forced":0,"automatic":1}]})"));
}

// An integer op forced to the CPU: sum of int8 into int64, whose result the reference computes exactly.
TEST(FallbackTool, AnIntegerOpRunsOnTheCpuReferenceExactly) {
  opscope::Config config;
  config.fallback = true;
  config.fallback_ops = opscope::OpFilter::parse("OP_FALLBACK_LIST", "sum", "OP_FALLBACK_DISABLE_LIST", {});
  const auto tool = opscope::fallback::makeFallbackTool(config);
  const std::vector<std::int8_t> x = {100, 100, 100, -128, 7};
  mlurtQueue_t queue = nullptr;
  void* xd = nullptr;
  void* yd = nullptr;
  ASSERT_EQ(mlurtQueueCreate(&queue), MLURT_SUCCESS);
  ASSERT_EQ(mlurtMalloc(&xd, x.size()), MLURT_SUCCESS);
  ASSERT_EQ(mlurtMalloc(&yd, sizeof(std::int64_t)), MLURT_SUCCESS);
  ASSERT_EQ(mlurtMemcpy(xd, x.data(), x.size(), MLURT_MEMCPY_HOST_TO_DEVICE), MLURT_SUCCESS);
  mlu::sum_args args;
  args.x.dtype = MLUOP_DTYPE_INT8;
  args.x.ndim = 1;
  args.x.dims[0] = static_cast<std::int64_t>(x.size());
  args.x.strides[0] = 1;
  args.x.data = xd;
  args.x.present = true;
  args.y.dtype = MLUOP_DTYPE_INT64;
  args.y.data = yd;
  args.y.present = true;  // 0-d: the sum of every element
  opscope::OpCall call;
  call.op = mlu::OpId::sum;
  call.name = "sum";
  call.symbol = "mluopReduceSum";
  call.seq = 1;
  call.queue = queue;
  call.args = &args;
  call.args_ok = true;
  ASSERT_TRUE(tool->wants(call));
  tool->mark(call);
  ASSERT_TRUE(tool->replaceOp(call));
  EXPECT_EQ(call.status, MLUOP_STATUS_SUCCESS);
  std::int64_t y = 0;
  ASSERT_EQ(mlurtQueueSync(queue), MLURT_SUCCESS);
  ASSERT_EQ(mlurtMemcpy(&y, yd, sizeof y, MLURT_MEMCPY_DEVICE_TO_HOST), MLURT_SUCCESS);
  EXPECT_EQ(y, 179);  // 300 - 128 + 7, no int8 wrap: the sum of integers is int64
  mlurtFree(xd);
  mlurtFree(yd);
  mlurtQueueDestroy(queue);
}
