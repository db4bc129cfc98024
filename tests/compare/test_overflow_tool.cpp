// The overflow check as a tool alone, in-process (no LD_PRELOAD): before()/after() on made-up relu calls on
// real device memory, then its findings — the first op whose outputs hold NaN/Inf while its inputs held
// none, counted once per such op.
#include "../support/made_up_call.h"

#include <opscope/compare/compare_tool.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

using opscope_test::runThrough;

}  // namespace

TEST(OverflowTool, NamesTheFirstOpThatTurnsFiniteInputsIntoNaNOrInf) {
  opscope::Config config;
  config.overflow_check = true;
  const auto tool = opscope::compare::makeOverflowTool(config);
  EXPECT_EQ(tool->name(), "overflow check");
  EXPECT_TRUE(tool->findings()["ops"] == 0);

  opscope_test::MadeUpRelu clean({1, -2, 3, -4}, 1);
  runThrough(*tool, clean, {1, 0, 3, 0});
  opscope_test::MadeUpRelu nan_in({kNaN, 1, 2, 3}, 2);  // NaN in: not this op's doing
  runThrough(*tool, nan_in, {kNaN, 1, 2, 3});
  opscope_test::MadeUpRelu first({1, 2, 3, 4}, 3);  // finite in, NaN and Inf out: the first
  ::testing::internal::CaptureStderr();
  runThrough(*tool, first, {kNaN, 2, kInf, 4});
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(said,
              ::testing::HasSubstr("opscope: overflow: NaN/Inf first appears in the outputs of relu #3"));
  EXPECT_THAT(said, ::testing::HasSubstr("output y: 1 NaN, 1 Inf of 4 elements"));
  opscope_test::MadeUpRelu later({1, 2, 3, 4}, 4);  // another, later: counted, not the first
  runThrough(*tool, later, {kInf, 2, 3, 4});
  opscope_test::MadeUpRelu refused({1, 2, 3, 4}, 5);  // a call that failed is not looked at
  tool->before(refused.call());
  refused.setOutput({kNaN, kNaN, kNaN, kNaN});
  refused.call().status = MLUOP_STATUS_BAD_PARAM;
  tool->after(refused.call());

  const nlohmann::json found = tool->findings();
  EXPECT_EQ(found["ops"], 2) << found.dump();
  EXPECT_EQ(found["first"]["op"], "relu");
  EXPECT_EQ(found["first"]["seq"], 3);
  EXPECT_THAT(found["first"]["detail"].get<std::string>(), ::testing::HasSubstr("relu #3 (mluopRelu"));
}
