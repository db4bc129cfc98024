// The cross-rank check of captured collective transfers (analysis/src/collective_check.cpp) on capture.dbs
// written by the real writer, with hand-worked values: what each rank received against the reduction or the
// copy of what the ranks sent, in whole tensors and in statistics only; calls that disagree, a missing rank,
// and hostile rows.
#include <opscope/analysis/collective_check.h>

#include <opscope/rundb/writer.h>

#include <mlu/dtype.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using opscope::Bytes;
using opscope::analysis::checkCollectives;
using opscope::analysis::RankCapture;
using opscope::rundb::CapturedOp;
using opscope::rundb::CaptureWriter;
using opscope::rundb::RunRecord;
using opscope::rundb::TensorRecord;
using ::testing::HasSubstr;

template <typename T>
Bytes bytesOf(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

struct Transfer {
  std::string name;
  std::uint64_t seq = 0;
  int rank = 0;
  int world = 2;
  std::uint64_t count = 0;
  mluopDataType_t dtype = MLUOP_DTYPE_FLOAT;
  int op = -1;
  int peer = -1;
  Bytes send, recv;  // empty: none
};

CapturedOp record(const Transfer& t, bool stats) {
  CapturedOp op;
  op.name = t.name;
  op.symbol = "mlucl_test";
  op.stats = stats;
  auto& c = op.collective.emplace();
  c.comm = 7;
  c.seq = t.seq;
  c.rank = t.rank;
  c.world_size = t.world;
  c.count = t.count;
  c.dtype = t.dtype;
  c.op = t.op;
  c.peer = t.peer;
  const std::size_t elem = mlu::dtypeSize(t.dtype);
  int index = 0;
  for (const auto* role : {"send", "recv"}) {
    const Bytes& data = std::string(role) == "send" ? t.send : t.recv;
    if (data.empty()) {
      ++index;
      continue;
    }
    TensorRecord r;
    r.role = role;
    r.arg_index = index++;
    r.arg_name = role;
    r.dtype = t.dtype;
    r.shape = {static_cast<std::int64_t>(data.size() / elem)};
    r.strides = {1};
    r.data = data;
    op.tensors.push_back(std::move(r));
  }
  return op;
}

class CollectiveCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("opscope-collective-check-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes each rank's capture.db of the given transfers (rank r's are those with .rank == r).
  std::vector<RankCapture> write(const std::vector<Transfer>& transfers, int world, bool stats = false) {
    std::vector<RankCapture> out;
    for (int rank = 0; rank < world; ++rank) {
      const fs::path db = dir_ / ("rank" + std::to_string(rank) + ".db");
      RunRecord run;
      run.rank = rank;
      run.world_size = world;
      auto writer = CaptureWriter::open(db.string(), run, std::uint64_t{1} << 30);
      for (const Transfer& t : transfers) {
        if (t.rank != rank) continue;
        EXPECT_TRUE(writer->submit(record(t, stats)));
      }
      const auto summary = writer->close();
      EXPECT_TRUE(summary.error.empty()) << summary.error;
      out.push_back({rank, db});
    }
    return out;
  }

  // A good two-rank run: an all-reduce (sum) of [1, 2, 3] and [10, 20, 30], a broadcast from rank 1, an
  // all-gather, a reduce-scatter (avg), an int8 sum that wraps (100 + 100 = -56) and a send 0 -> 1.
  static std::vector<Transfer> goodRun() {
    std::vector<Transfer> t;
    for (int r = 0; r < 2; ++r) {
      const float k = r == 0 ? 1.0f : 10.0f;
      t.push_back({"allreduce", 1, r, 2, 3, MLUOP_DTYPE_FLOAT, 0, -1,
                   bytesOf(std::vector<float>{k, 2 * k, 3 * k}), bytesOf(std::vector<float>{11, 22, 33})});
      t.push_back({"broadcast", 2, r, 2, 2, MLUOP_DTYPE_FLOAT, -1, 1,
                   r == 1 ? bytesOf(std::vector<float>{5, 6}) : Bytes(), bytesOf(std::vector<float>{5, 6})});
      t.push_back({"allgather", 3, r, 2, 1, MLUOP_DTYPE_FLOAT, -1, -1, bytesOf(std::vector<float>{k}),
                   bytesOf(std::vector<float>{1, 10})});
      // reduce_scatter avg: rank 0 gets mean of elements 0..1, rank 1 of 2..3.
      t.push_back({"reduce_scatter", 4, r, 2, 2, MLUOP_DTYPE_FLOAT, 4, -1,
                   bytesOf(std::vector<float>{k, 2 * k, 3 * k, 4 * k}),
                   r == 0 ? bytesOf(std::vector<float>{5.5f, 11}) : bytesOf(std::vector<float>{16.5f, 22})});
      t.push_back({"allreduce", 5, r, 2, 2, MLUOP_DTYPE_INT8, 0, -1,
                   bytesOf(std::vector<std::int8_t>{100, 1}), bytesOf(std::vector<std::int8_t>{-56, 2})});
      t.push_back({"barrier", 6, r, 2, 0, MLUOP_DTYPE_FLOAT, -1, -1, Bytes(), Bytes()});
    }
    t.push_back(
        {"send", 1, 0, 2, 2, MLUOP_DTYPE_INT32, -1, 1, bytesOf(std::vector<std::int32_t>{7, 8}), Bytes()});
    t.push_back(
        {"recv", 1, 1, 2, 2, MLUOP_DTYPE_INT32, -1, 0, Bytes(), bytesOf(std::vector<std::int32_t>{7, 8})});
    return t;
  }

  fs::path dir_;
};

TEST_F(CollectiveCheck, AGoodRunPassesByContents) {
  const json m = checkCollectives(write(goodRun(), 2));
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["ranks_with_collectives"], json::array({0, 1}));
  EXPECT_EQ(m["transfers"], 7);
  EXPECT_EQ(m["by_contents"], 6) << m.dump();
  EXPECT_EQ(m["by_statistics"], 0);
  EXPECT_EQ(m["mismatching"], 0) << m.dump();
  EXPECT_EQ(m["not_checked"]["barriers (no data)"], 1);
  EXPECT_TRUE(m["errors"].empty());
}

TEST_F(CollectiveCheck, AWrongElementIsNamedWithItsRankAndTransfer) {
  auto t = goodRun();
  t[6].recv = bytesOf(std::vector<float>{11, 22.5f, 33});  // rank 1's all-reduce: 22 + 0.5
  t[8].recv = bytesOf(std::vector<float>{1, 11});          // rank 1's all-gather
  t[10].recv = bytesOf(std::vector<std::int8_t>{-56, 3});  // rank 1's int8 sum: 1 + 1 is not 3
  const json m = checkCollectives(write(t, 2));
  EXPECT_EQ(m["mismatching"], 3) << m.dump();
  ASSERT_EQ(m["mismatches"].size(), 3u) << m.dump();
  EXPECT_EQ(m["mismatches"][0]["collective"], "allreduce");
  EXPECT_EQ(m["mismatches"][0]["seq"], 1);
  EXPECT_EQ(m["mismatches"][0]["rank"], 1);
  EXPECT_EQ(m["mismatches"][0]["comm"], "7");
  EXPECT_THAT(
      m["mismatches"][0]["what"].get<std::string>(),
      HasSubstr("1 of 3 elements differ from the sum of the ranks' inputs (computed in float64); first "
                "at element 1: received 22.5, expected 22"));
  EXPECT_EQ(m["mismatches"][1]["collective"], "allgather");
  EXPECT_THAT(m["mismatches"][1]["what"].get<std::string>(),
              HasSubstr("first at element 1: rank 1's element 0"));
  EXPECT_EQ(m["mismatches"][2]["seq"], 5);
  EXPECT_THAT(m["mismatches"][2]["what"].get<std::string>(), HasSubstr("received 3, expected 2"));
}

TEST_F(CollectiveCheck, Float32RoundingIsNotAMismatchButOneUlpTooManyOnALargeValueIs) {
  // 1e8 + 1 + (-1e8) in float32 on some order gives 0 or 1: both are within a sum's rounding.
  std::vector<Transfer> t;
  for (int r = 0; r < 3; ++r) {
    const float x = r == 0 ? 1e8f : r == 1 ? 1.0f : -1e8f;
    t.push_back({"allreduce", 1, r, 3, 1, MLUOP_DTYPE_FLOAT, 0, -1, bytesOf(std::vector<float>{x}),
                 bytesOf(std::vector<float>{0.0f})});
  }
  EXPECT_EQ(checkCollectives(write(t, 3))["mismatching"], 0);
  for (auto& x : t) x.recv = bytesOf(std::vector<float>{64.0f});  // far beyond 3 roundings of 1e8
  const json m = checkCollectives(write(t, 3));
  EXPECT_EQ(m["mismatching"], 1) << m.dump();
  EXPECT_EQ(m["mismatches"].size(), 3u);
}

TEST_F(CollectiveCheck, StatisticsOnlyFindsANanNobodySentAndRanksThatReceivedOtherBytes) {
  auto t = goodRun();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  t[0].recv = bytesOf(std::vector<float>{11, nan, 33});  // both ranks' all-reduce received a NaN
  t[6].recv = bytesOf(std::vector<float>{11, nan, 33});
  t[7].recv = bytesOf(std::vector<float>{5, 7});  // rank 1's broadcast
  const json m = checkCollectives(write(t, 2, true));
  EXPECT_EQ(m["by_contents"], 0) << m.dump();
  EXPECT_EQ(m["by_statistics"], 6);
  EXPECT_EQ(m["mismatching"], 2) << m.dump();
  ASSERT_EQ(m["mismatches"].size(), 3u) << m.dump();
  EXPECT_EQ(m["mismatches"][0]["rank"], 0);
  EXPECT_THAT(m["mismatches"][0]["what"].get<std::string>(),
              HasSubstr("received 1 NaN though no rank's input held one"));
  EXPECT_EQ(m["mismatches"][2]["collective"], "broadcast");
  EXPECT_EQ(m["mismatches"][2]["rank"], 1);
  EXPECT_THAT(m["mismatches"][2]["what"].get<std::string>(),
              HasSubstr("received other bytes than root 1 sent"));
}

TEST_F(CollectiveCheck, CallsThatDisagreeAndAMissingRankAreSaid) {
  auto t = goodRun();
  t[6].count = 4;  // rank 1's all-reduce: another count
  std::vector<Transfer> three = goodRun();
  const json m = checkCollectives(write(t, 2));
  EXPECT_EQ(m["mismatching"], 1) << m.dump();
  EXPECT_THAT(m["mismatches"][0]["what"].get<std::string>(),
              HasSubstr("its call differs: count 4 where rank 0 has 3"));

  // World size 3, rank 2 never wrote a capture: only the send 0 -> 1 can be checked, and the reason is given.
  for (auto& x : three) x.world = 3;
  const json n = checkCollectives(write(three, 2));
  EXPECT_EQ(n["checked"], 1) << n.dump();
  EXPECT_EQ(n["mismatching"], 0) << n.dump();
  EXPECT_EQ(n["not_checked"].value(
                "not every rank's capture has it (a rank without capture.db, or capture stopped)", 0),
            5);
}

TEST_F(CollectiveCheck, HostileRowsAreSkippedAndAFileThatIsNotADatabaseIsAnError) {
  auto captures = write(goodRun(), 2);
  // Both ranks' rows lie alike: an enormous count, a world size out of range, a blob shorter than its row
  // says.
  for (const auto& c : captures) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(c.db.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "UPDATE collectives SET count = 1152921504606846976 WHERE seq = 1 AND name = "
                           "'allreduce'; UPDATE collectives SET world_size = 99999999 WHERE seq = 2; UPDATE "
                           "collective_buffers SET nbytes = 4000 WHERE collective_id = 3;",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  const json m = checkCollectives(captures);
  EXPECT_EQ(m["mismatching"], 0) << m.dump();
  EXPECT_GE(m["not_checked"].value("damaged rows (world size or count out of range)", 0), 1) << m.dump();
  EXPECT_GE(m["not_checked"].value("damaged rows (buffer sizes do not match the call)", 0), 1) << m.dump();

  std::FILE* f = std::fopen(captures[0].db.c_str(), "w");
  std::fputs("not a database", f);
  std::fclose(f);
  const json n = checkCollectives(captures);
  ASSERT_EQ(n["errors"].size(), 1u) << n.dump();
  EXPECT_THAT(n["errors"][0].get<std::string>(), HasSubstr("rank 0: capture.db"));
}

TEST_F(CollectiveCheck, CapturesWithoutCollectivesGiveNoModel) {
  EXPECT_TRUE(checkCollectives(write({}, 2)).is_null());
  EXPECT_TRUE(checkCollectives({{0, dir_ / "absent.db"}}).is_null());
}

}  // namespace
