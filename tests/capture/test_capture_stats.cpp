// OP_CAPTURE_MODE=stats: the statistics of a tensor against hand-worked values (and the checksum against
// libxxhash called here), the writer's ring of whole tensors kept around the first NaN/Inf and each
// auto-compare failure (read back with SQLite), and mnist_train with a NaN planted in relu under the real
// hook: the first NaN-producing call is the overflow check's, it is kept whole, and op-replay reproduces it.
#include "../support/demo_runs.h"
#include "../support/subprocess.h"
#include "../support/test_data.h"

#include <opscope/rundb/reader.h>
#include <opscope/rundb/stats.h>
#include <opscope/rundb/writer.h>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <xxhash.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include "test_paths.h"

namespace fs = std::filesystem;
using namespace opscope::rundb;
using opscope::Bytes;
using opscope_test::tempDir;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

template <typename T>
Bytes bytesOf(const std::vector<T>& values) {
  return opscope_test::bytesOf<Bytes>(values);
}

TensorRecord tensor(std::string role, int index, std::string name, mluopDataType_t dtype, Bytes data,
                    std::int64_t n) {
  TensorRecord t;
  t.role = std::move(role);
  t.arg_index = index;
  t.arg_name = std::move(name);
  t.dtype = dtype;
  t.shape = {n};
  t.strides = {1};
  t.data = std::move(data);
  return t;
}

// A relu call y = relu(x) over four floats, with `y_first` as y's first element (a NaN to plant one).
CapturedOp reluCall(std::uint64_t seq, float y_first) {
  CapturedOp op;
  op.seq = seq;
  op.op = mlu::OpId::relu;
  op.name = "relu";
  op.symbol = "mluopRelu";
  op.stats = true;
  const std::vector<float> x = {static_cast<float>(seq), -1, 2, -3};
  const std::vector<float> y = {y_first, 0, 2, 0};
  op.tensors.push_back(tensor("input", 0, "x", MLUOP_DTYPE_FLOAT, bytesOf(x), 4));
  op.tensors.push_back(tensor("output", 1, "y", MLUOP_DTYPE_FLOAT, bytesOf(y), 4));
  return op;
}

// Auto-compare's record of relu call `seq` failing (attached to the call's row): a trigger.
CapturedOp failedCompare(std::uint64_t seq) {
  CapturedOp failure;
  failure.seq = seq;
  failure.op = mlu::OpId::relu;
  failure.name = "relu";
  failure.attach = true;
  CompareRecord c;
  c.arg_name = "y";
  c.allclose = false;
  c.verdict = "fail";
  failure.compare.push_back(c);
  return failure;
}

RunRecord runRecord() {
  RunRecord r;
  r.pid = 7;
  r.command_line = "prog";
  r.opscope_version = "test";
  r.options_json = "{}";
  return r;
}

// Rows of a query, each as its columns' text ("" for NULL).
std::vector<std::vector<std::string>> query(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::vector<std::vector<std::string>> rows;
  EXPECT_EQ(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  while (s != nullptr && sqlite3_step(s) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int i = 0; i < sqlite3_column_count(s); ++i) {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
      row.emplace_back(text != nullptr ? text : "");
    }
    rows.push_back(std::move(row));
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return rows;
}

}  // namespace

TEST(TensorStats, HandWorkedFigures) {
  // float32 {1, -2, NaN, +Inf, 3}: the finite ones are 1, -2, 3: min -2, max 3, mean 2/3, L2 sqrt(14).
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const Bytes floats = bytesOf(std::vector<float>{1, -2, nan, inf, 3});
  TensorStats s = tensorStats(tensor("output", 0, "y", MLUOP_DTYPE_FLOAT, floats, 5));
  EXPECT_EQ(s.numel, 5);
  EXPECT_EQ(s.nan, 1);
  EXPECT_EQ(s.inf, 1);
  EXPECT_EQ(s.min, -2.0);
  EXPECT_EQ(s.max, 3.0);
  EXPECT_DOUBLE_EQ(s.mean, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.l2, std::sqrt(14.0));
  EXPECT_EQ(s.checksum, XXH3_64bits(floats.data(), floats.size()));
  // int32 {-3, 5}: mean 1, L2 sqrt(34); bool {1, 0, 1}: mean 2/3.
  s = tensorStats(tensor("input", 0, "i", MLUOP_DTYPE_INT32, bytesOf(std::vector<std::int32_t>{-3, 5}), 2));
  EXPECT_EQ(s.min, -3.0);
  EXPECT_EQ(s.max, 5.0);
  EXPECT_DOUBLE_EQ(s.mean, 1.0);
  EXPECT_DOUBLE_EQ(s.l2, std::sqrt(34.0));
  s = tensorStats(tensor("input", 0, "b", MLUOP_DTYPE_BOOL, bytesOf(std::vector<std::uint8_t>{1, 0, 1}), 3));
  EXPECT_DOUBLE_EQ(s.mean, 2.0 / 3.0);
  // bfloat16 {1.5, -0.25} (0x3FC0, 0xBE80): min -0.25, max 1.5.
  s = tensorStats(
      tensor("input", 0, "h", MLUOP_DTYPE_BFLOAT16, bytesOf(std::vector<std::uint16_t>{0x3FC0, 0xBE80}), 2));
  EXPECT_EQ(s.min, -0.25);
  EXPECT_EQ(s.max, 1.5);
  // Nothing finite: the figures stay 0, the counts say why.
  s = tensorStats(tensor("output", 0, "y", MLUOP_DTYPE_FLOAT, bytesOf(std::vector<float>{nan, nan}), 2));
  EXPECT_EQ(s.nan, 2);
  EXPECT_EQ(s.min, 0.0);
  EXPECT_EQ(s.l2, 0.0);
  // 10,000 floats (the vector lanes, the block edges at 4096 and a tail), three NaNs and two Infs among
  // them, against a plain float64 loop here.
  // The same with the non-finite values only in the first and last of three blocks, the extremes in the
  // all-finite middle one (the short loop of a finite block, then the exact one).
  const auto againstFloat64 = [&](const std::vector<float>& many, std::int64_t nans, std::int64_t infs) {
    double lo = 1e300, hi = -1e300, sum = 0, squares = 0;
    std::int64_t finite = 0;
    for (float v : many) {
      if (!std::isfinite(v)) continue;
      lo = std::min(lo, static_cast<double>(v));
      hi = std::max(hi, static_cast<double>(v));
      sum += v;
      squares += static_cast<double>(v) * v;
      ++finite;
    }
    const auto n = static_cast<std::int64_t>(many.size());
    const TensorStats t = tensorStats(tensor("output", 0, "y", MLUOP_DTYPE_FLOAT, bytesOf(many), n));
    EXPECT_EQ(t.nan, nans);
    EXPECT_EQ(t.inf, infs);
    EXPECT_EQ(t.min, lo);
    EXPECT_EQ(t.max, hi);
    EXPECT_NEAR(t.mean, sum / static_cast<double>(finite),
                1e-6 * std::abs(sum / static_cast<double>(finite)));
    EXPECT_NEAR(t.l2, std::sqrt(squares), 1e-6 * std::sqrt(squares));
  };
  std::vector<float> many(10'000);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = static_cast<float>(i % 97) * 0.25f - 7.0f;
  many[5] = many[4100] = many[9999] = nan;
  many[17] = inf;
  many[8000] = -inf;
  againstFloat64(many, 3, 2);
  std::vector<float> middle(12'288);
  for (std::size_t i = 0; i < middle.size(); ++i) middle[i] = static_cast<float>(i % 89) * 0.5f - 20.0f;
  middle[6000] = -123.5f;
  middle[7000] = 456.25f;
  middle[3] = nan;
  middle[9000] = inf;
  middle[12'287] = -inf;
  againstFloat64(middle, 1, 2);
  // All finite: every block by the short loop.
  middle[3] = middle[9000] = middle[12'287] = 1.0f;
  againstFloat64(middle, 0, 0);
  // One bit apart, another checksum.
  Bytes other = floats;
  other[0] ^= std::byte{1};
  EXPECT_NE(tensorStats(tensor("output", 0, "y", MLUOP_DTYPE_FLOAT, other, 5)).checksum,
            tensorStats(tensor("output", 0, "y", MLUOP_DTYPE_FLOAT, floats, 5)).checksum);
}

// copyWithStats gives tensorStats' figures and a copy of the bytes, for the float path (block edges, tail)
// and the element-by-element one.
TEST(TensorStats, CopyWithStatsCopiesAndGivesTheSameFigures) {
  std::vector<float> many(10'000);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = static_cast<float>(i % 89) * 0.5f - 11.0f;
  many[4096] = std::numeric_limits<float>::quiet_NaN();
  const Bytes floats = bytesOf(many);
  const Bytes ints = bytesOf(std::vector<std::int32_t>{-3, 5, 7});
  for (const auto& [dtype, bytes] :
       {std::pair{MLUOP_DTYPE_FLOAT, &floats}, std::pair{MLUOP_DTYPE_INT32, &ints}}) {
    const TensorStats whole = tensorStats(dtype, bytes->data(), bytes->size());
    Bytes copy(bytes->size());
    const TensorStats copied = copyWithStats(dtype, bytes->data(), copy.data(), bytes->size(),
                                             tensorChecksum(bytes->data(), bytes->size()));
    EXPECT_EQ(copy, *bytes);
    EXPECT_EQ(copied.checksum, whole.checksum);
    EXPECT_EQ(copied.numel, whole.numel);
    EXPECT_EQ(copied.nan, whole.nan);
    EXPECT_EQ(copied.min, whole.min);
    EXPECT_EQ(copied.max, whole.max);
    EXPECT_EQ(copied.mean, whole.mean);  // the same sums in the same order: equal, not close
    EXPECT_EQ(copied.l2, whole.l2);
  }
}

// A call whose tensor has the bytes of one in an earlier call arrives without them (same_as_earlier, its
// statistics set): the ring keeps them for it. Ring of 2: call 2 reads call 1's output (shared), call 3 reads
// call 2's output (shared), call 4's output holds a NaN: calls 2, 3, 4 are kept whole, call 2's input taken
// from call 1's output although call 1 has left the ring. Call 5 reads call 4's output (stored at that
// trigger, still in the ring); call 6 shares bytes the ring never held: at the next trigger (call 7's failed
// auto-compare) calls 5 and 7 are kept whole, call 6 stays a statistics row.
TEST(CaptureStats, TensorsSharedWithEarlierCallsAreKeptFromThem) {
  const fs::path dir = tempDir("capture_stats_shared");
  const std::string path = (dir / "capture.db").string();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto shared = [](CapturedOp op, const CapturedOp& earlier) {
    TensorRecord& x = op.tensors[0];
    x.data = earlier.tensors[1].data;
    x.stats = tensorStats(x);
    x.data = Bytes();
    x.same_as_earlier = true;
    return op;
  };
  const CapturedOp one = reluCall(1, 4.0f), two = shared(reluCall(2, 6.0f), one),
                   three = shared(reluCall(3, 8.0f), two), four = shared(reluCall(4, nan), three);
  const CapturedOp five = shared(reluCall(5, 1.0f), four), six = shared(reluCall(6, 1.0f), reluCall(4, 9.0f)),
                   seven = reluCall(7, 1.0f);
  {
    auto writer = CaptureWriter::open(path, runRecord(), std::uint64_t{1} << 30, 2);
    for (const CapturedOp* op : {&one, &two, &three, &four, &five, &six, &seven}) {
      ASSERT_TRUE(writer->submit(CapturedOp(*op)));
    }
    ASSERT_TRUE(writer->submit(failedCompare(7)));
    const Summary s = writer->close();
    EXPECT_EQ(s.stats_tensors, 14u);
    EXPECT_EQ(s.triggers, 2u);
    EXPECT_EQ(s.kept_ops, 5u);
  }
  EXPECT_EQ(query(path, "SELECT seq, captured FROM ops ORDER BY seq"),
            (std::vector<std::vector<std::string>>{
                {"1", "0"}, {"2", "1"}, {"3", "1"}, {"4", "1"}, {"5", "1"}, {"6", "0"}, {"7", "1"}}));
  // Every tensor has its statistics row, the shared ones too: call 2's input is call 1's output {4, 0, 2, 0}.
  EXPECT_EQ(query(path,
                  "SELECT s.min, s.max FROM tensor_stats s JOIN ops o USING(op_id) WHERE o.seq = 2 AND "
                  "s.role = 'input'"),
            (std::vector<std::vector<std::string>>{{"0.0", "4.0"}}));
  auto reader = CaptureReader::open(path);
  const auto listed = reader->list();
  ASSERT_EQ(listed.size(), 5u);
  for (const auto& [index, earlier] :
       {std::pair{0, &one}, std::pair{1, &two}, std::pair{2, &three}, std::pair{3, &four}}) {
    const CapturedOp kept = reader->load(listed[static_cast<std::size_t>(index)].op_id);
    ASSERT_EQ(kept.tensors.size(), 2u);
    EXPECT_EQ(kept.tensors[0].data, earlier->tensors[1].data) << "call " << kept.seq;
  }
  fs::remove_all(dir);
}

// Ring of 2: calls 1..7; call 5's output holds the run's first NaN (a trigger: calls 3, 4, 5 kept whole),
// call 6 another NaN (not a trigger: only the first is), call 7 fails its auto-compare (a trigger: 6 and 7,
// the calls since the last trigger, kept whole).
TEST(CaptureStats, TheCallsAroundEachTriggerKeepTheirTensors) {
  const fs::path dir = tempDir("capture_stats_ring");
  const std::string path = (dir / "capture.db").string();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  {
    auto writer = CaptureWriter::open(path, runRecord(), std::uint64_t{1} << 30, 2);
    for (std::uint64_t seq = 1; seq <= 7; ++seq) {
      ASSERT_TRUE(writer->submit(reluCall(seq, seq == 5 || seq == 6 ? nan : 1.0f)));
    }
    ASSERT_TRUE(writer->submit(failedCompare(7)));
    const Summary s = writer->close();
    EXPECT_EQ(s.stats_ops, 7u);
    EXPECT_EQ(s.stats_tensors, 14u);
    EXPECT_EQ(s.triggers, 2u);
    EXPECT_EQ(s.kept_ops, 5u);
    EXPECT_THAT(summaryLine(s), HasSubstr("statistics of 7 ops (14 tensors); whole tensors of 5 ops kept "
                                          "around 2 triggers"));
  }
  std::vector<std::vector<std::string>> expected;
  for (int seq = 1; seq <= 7; ++seq) {
    expected.push_back({std::to_string(seq), seq >= 3 ? "1" : "0"});
  }
  EXPECT_EQ(query(path, "SELECT seq, captured FROM ops ORDER BY seq"), expected);
  EXPECT_EQ(query(path, "SELECT count(*) FROM tensor_stats")[0][0], "14");
  // Call 5's statistics: y = {NaN, 0, 2, 0}; x = {5, -1, 2, -3}: mean 3/4, L2 sqrt(39).
  EXPECT_EQ(
      query(path,
            "SELECT s.role, s.nan, s.min, s.max, s.numel, s.dtype, s.shape FROM tensor_stats s JOIN ops o "
            "USING(op_id) WHERE o.seq = 5 ORDER BY s.arg_index"),
      (std::vector<std::vector<std::string>>{{"input", "0", "-3.0", "5.0", "4", "float32", "[4]"},
                                             {"output", "1", "0.0", "2.0", "4", "float32", "[4]"}}));
  const auto x5 = query(path,
                        "SELECT s.mean, s.l2 FROM tensor_stats s JOIN ops o USING(op_id) WHERE o.seq = 5 AND "
                        "s.role = 'input'");
  EXPECT_DOUBLE_EQ(std::stod(x5[0][0]), 0.75);
  EXPECT_DOUBLE_EQ(std::stod(x5[0][1]), std::sqrt(39.0));
  // The kept calls are whole again: the reader gives back call 5's tensors, bytes as submitted.
  auto reader = CaptureReader::open(path);
  const auto listed = reader->list();
  ASSERT_EQ(listed.size(), 5u);
  const CapturedOp five = reader->load(listed[2].op_id);
  EXPECT_EQ(five.seq, 5u);
  ASSERT_EQ(five.tensors.size(), 2u);
  EXPECT_EQ(five.tensors[0].data, reluCall(5, nan).tensors[0].data);
  fs::remove_all(dir);
}

// mnist_train with a NaN planted in `op`: the first call whose outputs hold a NaN in tensor_stats is the one
// the overflow check names (an independent finder of the same thing), it is kept whole with the `ring` calls
// before it, and op-replay re-runs it, bit for bit, to the same NaN.
void expectThePlantedNanKeptAndReplayed(const std::string& op, const std::string& ring) {
  SCOPED_TRACE(op + " with OP_CAPTURE_RING=" + ring);
  const fs::path root = tempDir("capture_stats_nan");
  const opscope_test::Env fault = {{"MLU_SIM_FAULT", op + ":nan@0.001"}};
  opscope_test::Env env = fault;
  env.emplace_back("OP_CAPTURE_RING", ring);
  const opscope_test::Run r = opscope_test::run(
      {OPSCOPE_PATH, "run", "--capture", "--capture-mode=stats", "--overflow-check", "--out", root.string(),
       "--", MNIST_TRAIN_PATH, "--steps", "3", "--batch-size", "8", "--no-eval"},
      env);
  ASSERT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.err, HasSubstr("whole tensors of"));
  const fs::path dir = opscope_test::onlyResultDir(root);
  const std::string db = (dir / "capture.db").string();
  const auto first =
      query(db,
            "SELECT o.op_id, o.seq, o.name, o.captured FROM tensor_stats s JOIN ops o USING(op_id) "
            "WHERE s.role = 'output' AND (s.nan > 0 OR s.inf > 0) ORDER BY o.seq LIMIT 1");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0][2], op);
  EXPECT_EQ(first[0][3], "1") << "the first NaN-producing call is kept whole";
  // "opscope: overflow: N op calls produced NaN/Inf from finite inputs; the first: relu #10 (mluopRelu, ..."
  const std::string marker = "the first: " + op + " #";
  const auto at = r.err.find(marker);
  ASSERT_NE(at, std::string::npos) << r.err;
  const std::size_t digits = at + marker.size();
  EXPECT_EQ(first[0][1], r.err.substr(digits, r.err.find_first_not_of("0123456789", digits) - digits));
  // Every call has statistics; the NaN call and the ring before it (or as many calls as ran) are whole.
  const auto counts =
      query(db,
            "SELECT count(*), sum(captured), (SELECT count(DISTINCT op_id) FROM tensor_stats) "
            "FROM ops");
  EXPECT_EQ(counts[0][0], counts[0][2]);
  const long seq = std::stol(first[0][1]);
  EXPECT_EQ(std::stol(counts[0][1]), std::min<long>(seq, std::stol(ring) + 1));
  const opscope_test::Run replay =
      opscope_test::run({OP_REPLAY_PATH, dir.string(), "--op-id", first[0][0], "--acc_check"}, fault);
  // Every output as captured, bit for bit ("replayed 1 ops: 2 of 2 outputs bit-identical to the capture";
  // the failed check is the NaN against the CPU reference).
  EXPECT_THAT(replay.all(), HasSubstr("bit-identical to the capture"));
  EXPECT_THAT(replay.all(), Not(HasSubstr("differs from the capture")));
  EXPECT_THAT(replay.all(), ::testing::ContainsRegex("nan: [1-9][0-9]*/0"));
  fs::remove_all(root);
}

// relu alone with the default OP_CAPTURE_RING=0 (its inputs copied after it ran: the lazy mode) and with the
// 16 calls before it (every call copied: the eager mode); sgd_step, whose parameters and momentum it
// updates in place, in the lazy mode: those were copied before it ran, or its replay would start from the
// updated values and not be bit-identical.
TEST(CaptureStats, APlantedNanIsFoundKeptWholeAndReplayed) {
  expectThePlantedNanKeptAndReplayed("relu", "0");
  expectThePlantedNanKeptAndReplayed("relu", "16");
  expectThePlantedNanKeptAndReplayed("sgd_step", "0");
}

// An op's input is most often the output of an op just before it, unchanged: the stats mode takes its
// statistics (checksum too) from that output instead of reading the bytes again — but not after a write no op
// made (an asynchronous copy from the host into the tensor), nor when a call the capture did not take came
// between (OP_CAPTURE_LIST=add: the fills are not taken). multi_queue_program on one thread, 3 rounds: a is
// filled with k (or then overwritten with 7 + k by the copy), b with 0.5; add reads both.
TEST(CaptureStats, AnInputTakesTheStatisticsOfTheOutputThatWroteItUnlessSomethingElseWroteSince) {
  for (const bool copy : {false, true}) {
    for (const std::string list : {"", "add"}) {
      SCOPED_TRACE(std::string(copy ? "copy" : "no copy") + ", OP_CAPTURE_LIST=" + list);
      const fs::path root = tempDir("capture_stats_known");
      std::vector<std::string> argv = {OPSCOPE_PATH, "run",         "--capture", "--capture-mode=stats",
                                       "--out",      root.string(), "--",        MULTI_QUEUE_PROGRAM_PATH,
                                       "1",          "3",           "4096"};
      if (copy) argv.emplace_back("copy");
      opscope_test::Env env;
      if (!list.empty()) env.emplace_back("OP_CAPTURE_LIST", list);
      const opscope_test::Run r = opscope_test::run(argv, env);
      ASSERT_EQ(r.exit_code, 0) << r.all();
      const std::string db = (opscope_test::onlyResultDir(root) / "capture.db").string();
      std::vector<std::vector<std::string>> expected;
      for (int k = 0; k < 3; ++k) {
        const float a = copy ? 7.0f + static_cast<float>(k) : static_cast<float>(k);
        std::vector<float> bytes(4096, a);
        const auto checksum = XXH3_64bits(bytes.data(), bytes.size() * sizeof(float));
        expected.push_back(
            {fmt::format("{:.1f}", a), fmt::format("{:.1f}", a), fmt::format("{:016x}", checksum), "0.5"});
      }
      const auto rows =
          query(db,
                "SELECT a.min, a.max, a.checksum, b.mean FROM ops o "
                "JOIN tensor_stats a ON a.op_id = o.op_id AND a.role = 'input' AND a.arg_name = 'a' "
                "JOIN tensor_stats b ON b.op_id = o.op_id AND b.role = 'input' AND b.arg_name = 'b' "
                "WHERE o.name = 'add' ORDER BY o.seq");
      EXPECT_EQ(rows, expected);
      fs::remove_all(root);
    }
  }
}
