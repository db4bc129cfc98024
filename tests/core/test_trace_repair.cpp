// repairTrace (trace_repair.h): a trace cut at every byte becomes a complete trace holding exactly the
// events written whole before the cut (less the flow starts whose ends were cut off), or a clear error.
#include <opscope/trace_repair.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace {

using nlohmann::json;

// A trace as the profiler writes it: the head, one event per line, each after ",\n", then the closing.
const std::vector<std::string> kEvents = {
    R"j({"ph":"M","name":"process_name","pid":7,"args":{"name":"host (pid 7)"}})j",
    R"j({"ph":"M","name":"thread_name","pid":7,"tid":7,"args":{"name":"thread 0 (main)"}})j",
    R"j({"ph":"X","cat":"mlu_op","name":"relu","pid":7,"tid":7,"ts":1.000,"dur":2.000,"args":{"seq":1,"x":"a \"q\" ]}"}})j",
    R"j({"ph":"s","cat":"mlu_op","name":"mlu_op","id":1,"pid":7,"tid":7,"ts":1.000})j",
    R"j({"ph":"X","cat":"mlu_op","name":"relu","pid":4194304,"tid":1,"ts":2.000,"dur":1.000,"args":{"seq":1}})j",
    R"j({"ph":"f","bp":"e","cat":"mlu_op","name":"mlu_op","id":1,"pid":4194304,"tid":1,"ts":2.000})j",
    R"j({"ph":"X","cat":"mlu_op","name":"add","pid":7,"tid":7,"ts":4.000,"dur":2.000,"args":{"seq":2}})j",
    R"j({"ph":"s","cat":"mlu_op","name":"mlu_op","id":2,"pid":7,"tid":7,"ts":4.000})j",
    R"j({"ph":"C","name":"device memory","pid":4194304,"ts":5.000,"args":{"bytes":256}})j",
};
const std::string kHead = "{\"traceEvents\":[\n";
const std::string kClosing = "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"tool\":\"opscope\"}}\n";

std::string body() {
  std::string text = kHead;
  for (std::size_t i = 0; i < kEvents.size(); ++i) text += (i > 0 ? ",\n" : "") + kEvents[i];
  return text;
}

TEST(TraceRepair, ATraceCutAtEveryByteKeepsExactlyItsWholeEvents) {
  const std::string text = body();
  std::size_t offset = kHead.size();
  std::vector<std::size_t> ends;  // where each event ends in text
  for (std::size_t i = 0; i < kEvents.size(); ++i) {
    offset += (i > 0 ? 2 : 0) + kEvents[i].size();
    ends.push_back(offset);
  }
  for (std::size_t cut = 0; cut <= text.size(); ++cut) {
    SCOPED_TRACE(cut);
    std::size_t whole = 0;
    while (whole < ends.size() && ends[whole] <= cut) ++whole;
    if (whole == 0) {
      EXPECT_THROW(opscope::repairTrace(text.substr(0, cut)), std::runtime_error);
      continue;
    }
    const opscope::RepairedTrace r = opscope::repairTrace(text.substr(0, cut));
    const json trace = json::parse(r.json);  // throws (fails) when not JSON
    EXPECT_EQ(trace["otherData"]["repaired"], true);
    EXPECT_EQ(r.lost_bytes, cut - ends[whole - 1]);
    // The whole events, less flow 2's start (its end is never in the text) and flow 1's until its end is.
    std::vector<json> expected;
    for (std::size_t i = 0; i < whole; ++i) {
      const json e = json::parse(kEvents[i]);
      const bool dangling = e["ph"] == "s" && (e["id"] == 2 || whole < 6);
      if (!dangling) expected.push_back(e);
    }
    EXPECT_EQ(trace["traceEvents"], json(expected));
    EXPECT_EQ(r.dangling_flows, whole >= 8 ? 1u : (whole >= 4 && whole < 6 ? 1u : 0u));
  }
}

TEST(TraceRepair, AWholeTraceIsLeftAsItIs) {
  const std::string text = body() + kClosing;
  const opscope::RepairedTrace r = opscope::repairTrace(text);
  EXPECT_TRUE(r.was_complete);
  EXPECT_EQ(r.json, text);
}

TEST(TraceRepair, WhatIsNotAnOpscopeTraceIsRefused) {
  for (const std::string text : {"", "{", "[{\"ph\":\"X\"}]", "{\"traceEvents\":[{\"ph\":\"X\"}]}",
                                 "\x7f"
                                 "ELF"}) {
    EXPECT_THROW(opscope::repairTrace(text), std::runtime_error) << text;
  }
}

}  // namespace
