// The profiler as a tool alone, in-process (no LD_PRELOAD): a made-up relu call with its host times set as
// the hook sets them, marked as taken by capture and auto-compare (OpCall::tools), goes through
// before()/after(); flushed, trace.json holds its span with its arguments in op_format.h's form and the span
// of opscope's own work before it, labelled from the marks; time_measure.csv its row.
#include "../support/made_up_call.h"
#include "../support/test_data.h"

#include <opscope/profiler/profiler_tool.h>
#include <opscope/runtime_access.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

TEST(ProfilerTool, AMadeUpCallBecomesASpanWithItsArgumentsAndOpscopesOwnWork) {
  const std::filesystem::path dir = opscope_test::tempDir("profiler_tool");
  opscope::Config config;
  config.time_measure = true;
  const opscope::RunInfo run = opscope_test::madeUpRun(dir.string());
  {
    const auto profiler = opscope::profiler::makeProfilerTool(config, run);
    EXPECT_EQ(profiler->name(), "profiler");
    opscope_test::MadeUpRelu op({1, -2, 3, -4}, 5);
    opscope::OpCall& call = op.call();
    call.tools = opscope::toolBit(opscope::ToolId::kCapture) | opscope::toolBit(opscope::ToolId::kCompare) |
                 opscope::toolBit(opscope::ToolId::kProfiler);
    ASSERT_TRUE(profiler->wants(call));
    call.hook_start_ns = opscope::monotonicNs();
    profiler->before(call);
    EXPECT_EQ(call.correlation, 5u) << "the op's device work is tagged with its number";
    call.host_start_ns = call.hook_start_ns + 2'000'000;  // 2 ms of capture and compare before the call
    call.host_end_ns = call.host_start_ns + 1'000'000;
    call.status = MLUOP_STATUS_SUCCESS;
    profiler->after(call);
    profiler->flush();
  }
  std::ifstream in(dir / "trace.json");
  const nlohmann::json trace = nlohmann::json::parse(in);
  const nlohmann::json* span = nullptr;
  const nlohmann::json* own = nullptr;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    if (e.value("name", "") == "relu" && e.value("cat", "") == "mlu_op") span = &e;
    if (e.value("cat", "") == "opscope" && own == nullptr) own = &e;  // the work before the call
  }
  ASSERT_NE(span, nullptr) << trace.dump(1);
  EXPECT_EQ((*span)["args"]["seq"], 5);
  EXPECT_EQ((*span)["args"]["x"], "float32[4]");
  EXPECT_EQ((*span)["args"]["y"], "float32[4]");
  // µs; a nanosecond short when ts + dur would round past the end as doubles (trace_writer.cpp)
  EXPECT_NEAR((*span)["dur"].get<double>(), 1000.0, 0.001);
  ASSERT_NE(own, nullptr) << trace.dump(1);
  EXPECT_EQ((*own)["name"], "opscope: capture + autocompare");
  EXPECT_NEAR((*own)["dur"].get<double>(), 2000.0, 0.001);
  EXPECT_NEAR((*own)["ts"].get<double>() + 2000.0, (*span)["ts"].get<double>(), 1e-6);
  EXPECT_LE((*own)["ts"].get<double>() + (*own)["dur"].get<double>(), (*span)["ts"].get<double>());
  EXPECT_EQ((*own)["args"]["op"], "relu");

  std::ifstream csv(dir / "time_measure.csv");
  std::stringstream rows;
  rows << csv.rdbuf();
  EXPECT_THAT(rows.str(), ::testing::ContainsRegex(
                              "\nrelu,5,[^\n]*,\"?x float32\\[4\\]; y float32\\[4\\]\"?,\"\",\"\"\n"));
  std::filesystem::remove_all(dir);
}
