// The typed records of result files (core/include/opscope/results/): what the writer's toJson() makes, the
// readers' fromJson() reads back whole, and a damaged or hostile record reads as defaults, never throws.
#include <opscope/results/flight_recorder_file.h>

#include <gtest/gtest.h>

#include <limits>

namespace {

using nlohmann::json;
using opscope::results::FlightRecorderComm;
using opscope::results::FlightRecorderEntry;

FlightRecorderEntry broadcastEntry() {
  FlightRecorderEntry e;
  e.id = 7;
  e.seq = 3;
  e.collective = "broadcast";
  e.count = 1024;
  e.dtype = "float32";
  e.state = "started";
  e.status = 0;
  e.queue = 2;
  e.thread = 11;
  e.op_seq = 41;
  e.last_op = "linear_forward";
  e.calling_ns = 1'000;
  e.enqueued_ns = 1'500;
  e.started_ns = 2'000;
  e.root = 1;
  e.stack = 5;
  return e;
}

TEST(FlightRecorderRecords, AnEntryWrittenReadsBackAsItWas) {
  const FlightRecorderEntry e = broadcastEntry();
  const json j = toJson(e);
  // The members as the file has them: null for a time not reached, no member for what does not apply.
  EXPECT_EQ(j["collective"], "broadcast");
  EXPECT_EQ(j["root"], 1);
  EXPECT_TRUE(j["completed_ns"].is_null());
  EXPECT_FALSE(j.contains("peer"));
  EXPECT_FALSE(j.contains("op"));

  FlightRecorderEntry back;
  fromJson(json::parse(j.dump()), back);
  EXPECT_EQ(back.id, 7);
  EXPECT_EQ(back.seq, 3);
  EXPECT_EQ(back.collective, "broadcast");
  EXPECT_EQ(back.count, 1024);
  EXPECT_EQ(back.dtype, "float32");
  EXPECT_EQ(back.state, "started");
  EXPECT_EQ(back.queue, 2);
  EXPECT_EQ(back.thread, 11);
  EXPECT_EQ(back.op_seq, 41);
  EXPECT_EQ(back.last_op, "linear_forward");
  EXPECT_EQ(back.calling_ns, 1'000);
  EXPECT_EQ(back.enqueued_ns, 1'500);
  EXPECT_EQ(back.started_ns, 2'000);
  EXPECT_EQ(back.completed_ns, std::nullopt);
  EXPECT_EQ(back.root, 1);
  EXPECT_EQ(back.peer, std::nullopt);
  EXPECT_EQ(back.op, "");
  EXPECT_EQ(back.stack, 5);
}

TEST(FlightRecorderRecords, ACommWrittenReadsBackAsItWas) {
  FlightRecorderComm c;
  c.comm = "1";
  c.rank = 2;
  c.size = 4;
  c.recorded = 300;
  c.ring = 256;
  c.last_enqueued = 51;
  c.last_started = 47;
  c.last_completed = 46;
  c.error = "rank 3 left";
  const json j = toJson(c);
  EXPECT_EQ(j["destroyed"], false);
  FlightRecorderComm back;
  fromJson(json::parse(j.dump()), back);
  EXPECT_EQ(back.comm, "1");
  EXPECT_EQ(back.rank, 2);
  EXPECT_EQ(back.size, 4);
  EXPECT_FALSE(back.destroyed);
  EXPECT_EQ(back.recorded, 300);
  EXPECT_EQ(back.ring, 256);
  EXPECT_EQ(back.last_enqueued, 51);
  EXPECT_EQ(back.last_started, 47);
  EXPECT_EQ(back.last_completed, 46);
  EXPECT_EQ(back.error, "rank 3 left");

  c.error.clear();
  EXPECT_TRUE(toJson(c)["error"].is_null());
}

TEST(FlightRecorderRecords, AHostileRecordReadsAsDefaults) {
  // Members of the wrong type, a number past int64, not an object at all.
  const json entry = json::parse(R"({"seq":"3","collective":7,"count":18446744073709551615,"root":null,
                                     "peer":-2,"calling_ns":1.5,"state":["x"],"stack":{}})");
  FlightRecorderEntry e;
  fromJson(entry, e);
  EXPECT_EQ(e.seq, 0);
  EXPECT_EQ(e.collective, "");
  EXPECT_EQ(e.count, std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(e.root, std::nullopt);
  EXPECT_EQ(e.peer, -2);  // read as written: the reader judges it
  EXPECT_EQ(e.calling_ns, std::nullopt);
  EXPECT_EQ(e.state, "");
  EXPECT_EQ(e.stack, 0);

  FlightRecorderEntry from_array = broadcastEntry();
  fromJson(json::array({1, 2}), from_array);
  EXPECT_EQ(from_array.seq, 0);
  EXPECT_EQ(from_array.collective, "");
  EXPECT_EQ(from_array.started_ns, std::nullopt);

  FlightRecorderComm c;
  fromJson(json::parse(R"({"comm":1,"destroyed":"yes","ring":-1})"), c);
  EXPECT_EQ(c.comm, "");
  EXPECT_FALSE(c.destroyed);
  EXPECT_EQ(c.ring, -1);
}

}  // namespace
