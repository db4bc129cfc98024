// The capture tool alone, in-process (no LD_PRELOAD): a made-up relu call on real device memory goes
// through before()/after() as the hook would run it, the database tool closes capture.db, and the run
// database's reader finds the op with its input as it was before the call and its output as after.
#include "../support/made_up_call.h"
#include "../support/test_data.h"

#include <opscope/capture/capture_tool.h>
#include <opscope/rundb/reader.h>
#include <opscope/rundb/writer.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

TEST(CaptureTool, CapturesTheInputBeforeAndTheOutputAfterAMadeUpCall) {
  const std::filesystem::path dir = opscope_test::tempDir("capture_tool");
  opscope::Config config;
  config.capture = true;
  const opscope::RunInfo run = opscope_test::madeUpRun(dir.string());
  const auto database = opscope::rundb::openRunDatabase(config, run);
  const auto capture = opscope::capture::makeCaptureTool(config, database);
  const auto closer = opscope::capture::makeDatabaseTool(config, database);

  opscope_test::MadeUpRelu op({1, -2, 3, -4}, 7);
  ASSERT_TRUE(capture->wants(op.call()));
  capture->before(op.call());
  op.setOutput({1, 0, 3, 0});  // what the device computed
  op.call().status = MLUOP_STATUS_SUCCESS;
  capture->after(op.call());
  ::testing::internal::CaptureStderr();
  capture->flush();
  closer->flush();
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              ::testing::HasSubstr("opscope: captured 1 ops, 2 tensors"));

  const auto reader = opscope::rundb::CaptureReader::open((dir / "capture.db").string());
  ASSERT_EQ(reader->ids().size(), 1u);
  const opscope::rundb::CapturedOp got = reader->load(reader->ids()[0]);
  EXPECT_EQ(got.seq, 7u);
  EXPECT_EQ(got.name, "relu");
  EXPECT_EQ(reader->run().pid, 42);
  const auto* x = got.find("input", 0);
  const auto* y = got.find("output", 1);
  ASSERT_NE(x, nullptr);
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(x->arg_name, "x");
  EXPECT_EQ(opscope_test::valuesOf<float>(x->data), (std::vector<float>{1, -2, 3, -4}));
  EXPECT_EQ(opscope_test::valuesOf<float>(y->data), (std::vector<float>{1, 0, 3, 0}));
  std::filesystem::remove_all(dir);
}
