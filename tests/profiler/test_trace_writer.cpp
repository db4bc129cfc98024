// The trace writer alone, in-process, fed events as the profiler records them, in the orders the writer
// thread can receive them; the trace it writes is read back as JSON (doubles, as every reader parses it) and
// loaded in the Chrome DevTools trace engine.
#include "../support/made_up_call.h"
#include "../support/test_data.h"
#include "../support/trace_consumers.h"

#include <events.h>
#include <signatures.h>
#include <trace_writer.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <vector>

namespace {

using opscope::profiler::Chunk;
using opscope::profiler::Event;
using opscope::profiler::EventKind;
using opscope::profiler::kDevicePidBase;

constexpr std::uint32_t kTid = 7;
constexpr std::uint64_t kQueue = 3;

Event opSpan(std::uint64_t seq, std::int64_t start_ns, std::int64_t end_ns, std::uint64_t enqueued) {
  Event e;
  e.kind = EventKind::kOp;
  e.tid = kTid;
  e.thread = 1;
  e.correlation = seq;
  e.start_ns = start_ns;
  e.end_ns = end_ns;
  e.queue = kQueue;
  e.enqueued = enqueued;
  return e;
}

// opscope's own work around op seq (capture's).
Event toolsSpan(std::uint64_t seq, std::int64_t start_ns, std::int64_t end_ns) {
  Event e = opSpan(seq, start_ns, end_ns, 0);
  e.kind = EventKind::kTools;
  e.sub = opscope::profiler::kToolCapture;
  e.queue = 0;
  return e;
}

// The first device task of op seq: the end of the op's flow.
Event kernel(std::uint64_t seq, std::int64_t start_ns, std::int64_t end_ns) {
  Event e;
  e.kind = EventKind::kDevice;
  e.correlation = seq;
  e.start_ns = start_ns;
  e.end_ns = end_ns;
  e.queue = kQueue;
  e.flow_end = 1;
  return e;
}

std::unique_ptr<Chunk> chunkOf(const std::vector<Event>& events) {
  auto chunk = std::make_unique<Chunk>();
  for (std::size_t i = 0; i < events.size(); ++i) chunk->events[i] = events[i];
  chunk->count.store(events.size());
  return chunk;
}

// Writes the chunks, in the order given, as trace.json in dir; returns its events.
nlohmann::json writeTrace(const std::filesystem::path& dir, const std::vector<std::vector<Event>>& chunks,
                          std::uint64_t* written = nullptr) {
  const opscope::profiler::Signatures signatures;
  opscope::profiler::TraceWriter::Options options;
  options.run = opscope_test::madeUpRun(dir.string());
  opscope::profiler::TraceWriter writer(options, signatures);
  writer.open((dir / "trace.json").string());
  for (const auto& events : chunks) writer.consume(*chunkOf(events));
  writer.close();
  if (written != nullptr) *written = writer.eventsWritten();
  std::ifstream in(dir / "trace.json");
  return nlohmann::json::parse(in)["traceEvents"];
}

// OP_TRACE_MAX_MB counts the closing too: with a command line of 20,000 characters (written, escaped, in
// the closing's otherData) the file still ends within the cap, and parses.
TEST(TraceWriter, TheSizeCapLeavesRoomForTheClosing) {
  const auto dir = opscope_test::tempDir("trace_writer_cap");
  const opscope::profiler::Signatures signatures;
  opscope::profiler::TraceWriter::Options options;
  options.run = opscope_test::madeUpRun(dir.string());
  options.run.command_line = std::string(20'000, '"');  // escaped: twice as long
  options.max_bytes = 256 << 10;
  opscope::profiler::TraceWriter writer(options, signatures);
  const std::string path = (dir / "trace.json").string();
  writer.open(path);
  std::uint64_t seq = 0;
  for (int c = 0; c < 40; ++c) {
    std::vector<Event> events;
    for (int i = 0; i < 100; ++i, ++seq) {
      const auto start = static_cast<std::int64_t>(seq) * 1'000;
      events.push_back(opSpan(seq + 1, start, start + 500, 0));
    }
    writer.consume(*chunkOf(events));
  }
  writer.close();
  EXPECT_LE(std::filesystem::file_size(path), options.max_bytes);
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  EXPECT_GT(trace["otherData"]["events_dropped"].get<long>(), 0);
  EXPECT_GT(trace["traceEvents"].size(), 100u);
  std::filesystem::remove_all(dir);
}

// Chunks of different threads reach the writer in any order: the device queue's chunk, holding the end of
// an op's flow, may come before the host thread's chunk holding the op and the flow's start. Each flow's end
// is written after its start, and DevTools (which drops a flow whose end comes first in the file) joins it.
TEST(TraceWriter, EachFlowEndIsWrittenAfterItsStartWhicheverChunkComesFirst) {
  const auto dir = opscope_test::tempDir("trace_writer_flows");
  std::uint64_t written = 0;
  const nlohmann::json events =
      writeTrace(dir,
                 {{kernel(1, 1'500, 2'500), kernel(2, 3'500, 4'500)},  // the device's chunk first
                  {opSpan(1, 1'000, 2'000, 1), opSpan(2, 3'000, 4'000, 1), opSpan(3, 5'000, 6'000, 0)}},
                 &written);
  std::vector<std::pair<std::string, std::uint64_t>> flows;  // (ph, id) in file order
  for (const auto& e : events) {
    const std::string ph = e.value("ph", "");
    if (ph == "s" || ph == "f") flows.emplace_back(ph, e["id"].get<std::uint64_t>());
  }
  EXPECT_THAT(flows, ::testing::ElementsAre(std::pair<std::string, std::uint64_t>{"s", 1},
                                            std::pair<std::string, std::uint64_t>{"f", 1},
                                            std::pair<std::string, std::uint64_t>{"s", 2},
                                            std::pair<std::string, std::uint64_t>{"f", 2}));
  // Every event counted once: the host's name, 2 kernels, their 2 ends, 3 ops, 2 starts, and the metadata
  // of close() (the device's and the host thread's names and sort indexes).
  std::uint64_t in_file = 0;
  for (const auto& e : events) in_file += e.is_object() ? 1 : 0;
  EXPECT_EQ(written, in_file);
  const auto dt = opscope_test::runDevtools((dir / "trace.json").string());
  EXPECT_EQ(dt["flows"].size(), 2u) << dt.dump();
  std::filesystem::remove_all(dir);
}

// A flow whose start never comes (its op was not recorded) leaves no lone end in the file.
TEST(TraceWriter, AFlowEndWithoutItsStartIsLeftOut) {
  const auto dir = opscope_test::tempDir("trace_writer_lone_end");
  const nlohmann::json events = writeTrace(dir, {{kernel(9, 1'500, 2'500)}, {opSpan(1, 1'000, 2'000, 0)}});
  for (const auto& e : events) EXPECT_NE(e.value("ph", ""), "f") << e.dump();
  std::filesystem::remove_all(dir);
}

// opscope's own work starts at the very nanosecond the op ends. Written as microseconds with three decimals
// and added back in doubles, 228516.008 + 8.996 is past 228525.004: a partial overlap, and DevTools left
// the second span out of its tree. dur is shortened so that ts + dur, in doubles, never passes the next
// span's ts; every span is in the tree.
TEST(TraceWriter, SpansThatTouchDoNotOverlapOnceParsedAsDoubles) {
  const auto dir = opscope_test::tempDir("trace_writer_touch");
  const nlohmann::json events =
      writeTrace(dir, {{opSpan(1, 228'516'008, 228'525'004, 0), toolsSpan(1, 228'525'004, 228'530'000),
                        opSpan(2, 228'530'000, 228'541'337, 0), toolsSpan(2, 228'541'337, 228'550'001)}});
  std::vector<std::pair<double, double>> spans;  // (ts, dur) of the host thread's spans, in file order
  for (const auto& e : events) {
    if (e.value("ph", "") == "X") spans.emplace_back(e["ts"].get<double>(), e["dur"].get<double>());
  }
  ASSERT_EQ(spans.size(), 4u);
  for (std::size_t i = 0; i + 1 < spans.size(); ++i) {
    EXPECT_LE(spans[i].first + spans[i].second, spans[i + 1].first) << i;
    EXPECT_NEAR(spans[i].first + spans[i].second, spans[i + 1].first, 0.0015) << "shortened by 1 ns at most";
  }
  EXPECT_DOUBLE_EQ(spans[0].first, 228516.008);
  const auto dt = opscope_test::runDevtools((dir / "trace.json").string());
  std::size_t nodes = 0;
  for (const auto& thread : dt["threads"]) {
    if (thread["pid"].get<long>() < kDevicePidBase) nodes += thread["tree_nodes"].get<std::size_t>();
  }
  EXPECT_EQ(nodes, 4u) << dt.dump();
  std::filesystem::remove_all(dir);
}

// opscope's own device work of one tool on two queues at once (memcheck paints on the program's queue and on
// its own): the overlapping task goes on a second track of the tool's, so that no two spans of a track
// overlap (the importer's rule; DevTools would leave one out of its tree), and a later task that fits goes
// back on the first.
TEST(TraceWriter, AToolsOverlappingDeviceTasksGoOnTracksOfTheirOwn) {
  const auto dir = opscope_test::tempDir("trace_writer_own_lanes");
  auto own = [](std::int64_t start_ns, std::int64_t end_ns, std::uint64_t queue) {
    Event e = kernel(0, start_ns, end_ns);
    e.correlation = opscope::kToolCorrelationBit | static_cast<std::uint64_t>(opscope::ToolId::kMemcheck);
    e.flow_end = 0;
    e.queue = queue;
    return e;
  };
  const nlohmann::json events =
      writeTrace(dir, {{own(1'000, 9'000, 1), own(2'000, 5'000, 9), own(9'500, 12'000, 9)}});
  std::vector<std::pair<long, double>> spans;  // (tid, ts) of opscope's device spans
  std::set<long> named;
  for (const auto& e : events) {
    if (e.value("ph", "") == "X" && e.value("cat", "") == "opscope")
      spans.emplace_back(e["tid"].get<long>(), e["ts"].get<double>());
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name" &&
        e["tid"].get<long>() >= 0xFFFF0000L) {
      EXPECT_EQ(e["args"]["name"], "opscope memcheck");
      named.insert(e["tid"].get<long>());
    }
  }
  const long first = 0xFFFF0000L + static_cast<long>(opscope::ToolId::kMemcheck);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].first, first);
  EXPECT_EQ(spans[1].first, first + 256) << "overlaps the first: a second track";
  EXPECT_EQ(spans[2].first, first) << "after the first ended: back on it";
  EXPECT_EQ(named, (std::set<long>{first, first + 256}));
  EXPECT_TRUE(opscope_test::validTrace((dir / "trace.json").string()));
  std::filesystem::remove_all(dir);
}

}  // namespace

// Names go into the trace as JSON strings: every character that must be escaped is, wherever it stands
// (the plain runs between them are copied whole), and the text parses back to the name.
TEST(TraceWriter, NamesAreEscapedAsJsonStrings) {
  const std::vector<std::string> names = {"",     "aten::mul_",      "\"quoted\"",       "back\\slash",
                                          "\x01", "tab\there\nline", "end with quote\"", "caf\xc3\xa9"};
  for (const std::string& name : names) {
    std::string out = "x";
    opscope::profiler::appendJsonString(out, name);
    ASSERT_EQ(out.substr(0, 2), "x\"") << name;
    EXPECT_EQ(nlohmann::json::parse(out.substr(1)).get<std::string>(), name);
  }
  std::string out;
  opscope::profiler::appendJsonString(out, "a\"b\x1f");
  EXPECT_EQ(out, "\"a\\\"b\\u001f\"");
}
