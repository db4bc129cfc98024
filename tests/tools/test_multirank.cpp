// A multi-rank program under every tool: `opscope run ... -- mpirun -np 4 llama_train --ddp` gives one run
// folder with a directory per rank (rank and world size in run.json and the trace), and `opscope report
// FOLDER` one page of all ranks and a merged trace that the Chrome DevTools trace engine loads with a
// process per rank's host and device and every collective joined across the ranks by flows. A hand-made
// folder: missing and duplicate ranks are said, hostile names escaped.
#include <opscope/report/ranks.h>

#include "mpi_run.h"
#include "program_run.h"
#include "test_paths.h"
#include "trace_consumers.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <array>
#include <cmath>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using examples_test::ProgramRun;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

fs::path freshRoot(const std::string& name) {
  const fs::path root =
      fs::temp_directory_path() / ("opscope-multirank-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(root);
  return root;
}

std::string readAll(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A capture.db opened read-only for the test's own queries.
class Db {
 public:
  explicit Db(const fs::path& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
      ADD_FAILURE() << "cannot open " << path;
  }
  ~Db() { sqlite3_close(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  std::int64_t integer(const std::string& sql) {
    std::int64_t v = -1;
    query(sql, [&](sqlite3_stmt* s) { v = sqlite3_column_int64(s, 0); });
    return v;
  }
  std::vector<float> floats(const std::string& sql) {
    std::vector<float> v;
    query(sql, [&](sqlite3_stmt* s) {
      v.resize(static_cast<std::size_t>(sqlite3_column_bytes(s, 0)) / sizeof(float));
      if (!v.empty()) std::memcpy(v.data(), sqlite3_column_blob(s, 0), v.size() * sizeof(float));
    });
    return v;
  }

 private:
  template <typename F>
  void query(const std::string& sql, F&& row) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << sqlite3_errmsg(db_) << ": " << sql;
      return;
    }
    while (sqlite3_step(s) == SQLITE_ROW) row(s);
    sqlite3_finalize(s);
  }
  sqlite3* db_ = nullptr;
};

unsigned modeOf(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? st.st_mode & 0777 : 0;
}

TEST(MultiRank, EveryToolPerRankThenOneViewOfAllRanks) {
  const fs::path root = freshRoot("run");
  const std::string llama =
      std::string(LLAMA_TRAIN_PATH) +
      " --ddp --steps 3 --batch-size 8 --seq-len 16 --dim 32 --heads 2 --layers 1 --eval-batches 1";
  const ProgramRun r =
      examples_test::run("env " + opscope_test::mpiSanitizerOptions() + " " + std::string(OPSCOPE_PATH) +
                             " run --capture --compare --profile --memcheck --out " + root.string() + " -- " +
                             opscope_test::mpirunCommand(4),
                         llama);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("opscope: results of 4 ranks in "));

  // One entry in the root: the run folder (mpirun and the launcher leave nothing of their own).
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(root)) entries.push_back(e.path());
  ASSERT_EQ(entries.size(), 1u) << r.output;
  const fs::path folder = entries[0];
  EXPECT_TRUE(folder.filename().string().ends_with("-ranks")) << folder;
  EXPECT_EQ(modeOf(folder), 0700u);
  std::map<int, fs::path> ranks;
  for (const auto& e : fs::directory_iterator(folder)) {
    const json run = json::parse(readAll(e.path() / "run.json"));
    const int rank = run.at("rank").get<int>();
    EXPECT_EQ(run.at("world_size"), 4) << e.path();
    EXPECT_THAT(e.path().filename().string(), HasSubstr("-rank" + std::to_string(rank) + "-"));
    EXPECT_EQ(modeOf(e.path()), 0700u);
    for (const char* file : {"capture.db", "trace.json", "memcheck.json", "summary.txt", "autocompare.csv"})
      EXPECT_TRUE(fs::exists(e.path() / file)) << e.path() / file;
    EXPECT_THAT(readAll(e.path() / "trace.json"),
                HasSubstr("\"name\":\"rank " + std::to_string(rank) + " host (pid "));
    ranks[rank] = e.path();
  }
  ASSERT_EQ(ranks.size(), 4u);
  EXPECT_EQ(ranks.begin()->first, 0);
  EXPECT_EQ(ranks.rbegin()->first, 3);

  const ProgramRun report = examples_test::run(std::string(OPSCOPE_PATH) + " report", folder.string());
  ASSERT_EQ(report.exit_code, 0) << report.output;
  EXPECT_THAT(report.output, HasSubstr("(4 of 4 rank(s))"));
  EXPECT_THAT(report.output, HasSubstr("steps: 3; the slowest rank of each step"));
  // Where each rank's device time went, and the rank the others waited for in collectives.
  EXPECT_THAT(report.output, HasSubstr("busy ms    idle ms  host-bound"));
  EXPECT_THAT(report.output,
              ::testing::ContainsRegex("straggler: rank [0-3]: the last to arrive at [0-9]+ of 41 "
                                       "collectives"));
  EXPECT_TRUE(fs::exists(folder / "report.html"));
  for (const auto& [rank, dir] : ranks) EXPECT_TRUE(fs::exists(dir / "report.html")) << "rank " << rank;
  EXPECT_THAT(readAll(folder / "report.html"), HasSubstr("One view of 4 rank(s)"));

  // Every rank captured its 41 transfers (10 broadcasts, 31 all-reduces), what it sent and received; the
  // report checked them across the ranks. One all-reduce recomputed here from the four captures: the last
  // one, the step losses averaged.
  std::vector<std::vector<float>> sent, received;
  for (const auto& [rank, dir] : ranks) {
    Db db(dir / "capture.db");
    EXPECT_EQ(db.integer("SELECT count(*) FROM collectives WHERE status = 0"), 41) << "rank " << rank;
    EXPECT_EQ(db.integer("SELECT count(*) FROM collectives WHERE name = 'broadcast' AND peer = 0"), 10);
    EXPECT_EQ(db.integer("SELECT count(DISTINCT seq) FROM collectives"), 41);
    EXPECT_EQ(db.integer("SELECT world_size FROM runs"), 4);
    EXPECT_EQ(db.integer("SELECT rank FROM runs"), rank);
    const std::string last = "(SELECT collective_id FROM collectives WHERE seq = 41 AND name = 'allreduce')";
    sent.push_back(
        db.floats("SELECT b.data FROM collective_buffers c JOIN blobs b ON b.blob_id = c.blob_id "
                  "WHERE c.role = 'send' AND c.collective_id = " +
                  last));
    received.push_back(
        db.floats("SELECT b.data FROM collective_buffers c JOIN blobs b ON b.blob_id = "
                  "c.blob_id WHERE c.role = 'recv' AND c.collective_id = " +
                  last));
  }
  ASSERT_EQ(sent[0].size(), 3u);  // one loss per step
  for (std::size_t i = 0; i < 3; ++i) {
    double mean = 0;
    for (const auto& s : sent) mean += s.at(i) / 4.0;
    for (const auto& r : received) EXPECT_NEAR(r.at(i), mean, 1e-6 * std::fabs(mean)) << i;
    EXPECT_GT(std::fabs(sent[0][i] - sent[1][i]), 1e-4) << "the ranks' shards give different losses";
  }
  EXPECT_THAT(report.output,
              HasSubstr("collectives checked across ranks (capture.db of ranks [0,1,2,3]): 41 transfers, 41 "
                        "checked (41 by contents, 0 by statistics), 0 mismatching"));
  EXPECT_THAT(readAll(folder / "report.html"), HasSubstr("41 of 41 transfer(s) checked, 0 mismatching"));

  // The merged trace, as the Perfetto importer's rules and the DevTools trace engine read it.
  const fs::path trace = folder / "trace.json";
  EXPECT_TRUE(opscope_test::validTrace(trace.string()));
  const json dt = opscope_test::runDevtools(trace.string());
  std::set<std::string> processes;
  for (const json& t : dt.at("threads")) processes.insert(t.value("process_name", ""));
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(processes.contains("rank " + std::to_string(rank) + " MLU 0")) << dt.at("threads").dump();
    bool host = false;
    for (const auto& p : processes) host |= p.starts_with("rank " + std::to_string(rank) + " host (pid ");
    EXPECT_TRUE(host) << rank;
  }
  // Flows from one rank's device to another's, each between two spans of the same collective.
  constexpr long kDevicePidBase = 4194304;
  std::map<std::string, int> joined;  // device task name -> flows across ranks
  for (const json& flow : dt.at("flows")) {
    std::set<long> pids;
    std::set<std::string> names;
    for (const json& e : flow) {
      pids.insert(e.at(0).get<long>());
      names.insert(e.at(3).get<std::string>());
    }
    if (pids.size() == 2 && *pids.begin() >= kDevicePidBase) {
      EXPECT_EQ(names.size(), 1u) << flow.dump();
      ++joined[*names.begin()];
    }
  }
  // Each rank broadcast every parameter (master copies: 10 for this model), all-reduced every gradient per
  // step (3 steps) and the step losses once at the end: each transfer joined rank 0-1, 1-2, 2-3.
  EXPECT_EQ(joined["mlucl_broadcast"], 10 * 3) << dt.at("flows").size();
  EXPECT_EQ(joined["mlucl_allreduce"], (10 * 3 + 1) * 3);
  fs::remove_all(root);
}

// A planted fault (MLU_SIM_FAULT: NaN into rank 1's part of the second all-reduce) that every rank receives:
// no single rank's auto-compare can see it, the cross-rank check of the captures names the transfer, in
// whole tensors and in statistics only.
TEST(MultiRank, APlantedNanInOneRanksPartIsNamedByTheCrossRankCheck) {
  for (const std::string mode : {"tensors", "stats"}) {
    const fs::path root = freshRoot("nan-" + mode);
    const std::string llama = "env MLU_SIM_FAULT=allreduce:nan@rank=1@call=2 " +
                              std::string(LLAMA_TRAIN_PATH) +
                              " --ddp --steps 2 --batch-size 4 --seq-len 8 --dim 32 --heads 2 --layers 1 "
                              "--eval-batches 1";
    const ProgramRun r =
        examples_test::run("env " + opscope_test::mpiSanitizerOptions() + " " + std::string(OPSCOPE_PATH) +
                               " run --capture --capture-mode=" + mode + " --compare --out " + root.string() +
                               " -- " + opscope_test::mpirunCommand(2),
                           llama);
    EXPECT_THAT(r.output, HasSubstr("collective transfers not compared here")) << mode;
    std::vector<fs::path> entries;
    for (const auto& e : fs::directory_iterator(root)) entries.push_back(e.path());
    ASSERT_EQ(entries.size(), 1u) << r.output;
    const ProgramRun summary =
        examples_test::run(std::string(OPSCOPE_PATH) + " summary", entries[0].string());
    // 10 broadcasts, then the all-reduces: the second is transfer #12. Both ranks received the NaN.
    EXPECT_THAT(summary.output, HasSubstr("1 mismatching")) << mode << summary.output;
    const std::string what = mode == "tensors" ? "elements differ from the avg of the ranks' inputs"
                                               : "NaN though no rank's input held one";
    for (int rank : {0, 1}) {
      EXPECT_THAT(summary.output,
                  HasSubstr("MISMATCH comm 1 allreduce #12 rank " + std::to_string(rank) + ": "))
          << mode << summary.output;
    }
    EXPECT_THAT(summary.output, HasSubstr(what)) << mode << summary.output;
    // The flight recorder saw no hang or failure (the NaN moved like any number).
    EXPECT_THAT(summary.output, HasSubstr("flight recorder: dumps of ranks [0,1]")) << summary.output;
    EXPECT_THAT(summary.output, Not(HasSubstr("never enqueued"))) << summary.output;
    EXPECT_THAT(summary.output, Not(HasSubstr("failed on rank"))) << summary.output;
    // And each rank's row says so.
    EXPECT_THAT(summary.output, HasSubstr("  1 collective transfer(s) mismatching across ranks\n    1 "))
        << mode << summary.output;
    fs::remove_all(root);
  }
}

void writeRun(const fs::path& dir, const std::string& run_json) {
  fs::create_directories(dir);
  std::ofstream(dir / "run.json") << run_json;
}

TEST(MultiRank, AFolderWithMissingAndDuplicateRanksIsStillReported) {
  const fs::path folder = freshRoot("handmade") / "job";
  writeRun(folder / "20261127-100000-rank0-11-aaaaaa",
           R"({"command":"p","pid":11,"rank":0,"world_size":3,"ended":"exit","tools":{}})");
  writeRun(folder / "20261127-100000-rank2-13-aaaaaa",
           R"({"command":"p","pid":13,"rank":2,"world_size":3,"ended":null,"tools":{}})");
  writeRun(folder / "20261127-100500-rank2-14-<script>",
           R"({"command":"p","pid":14,"rank":2,"world_size":3,"ended":"signal SIGKILL","tools":{}})");
  writeRun(folder / "not-a-rank", R"({"rank":"x"})");
  fs::create_directories(folder / "empty");
  const ProgramRun s = examples_test::run(std::string(OPSCOPE_PATH) + " summary", folder.string());
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_THAT(s.output, HasSubstr("(2 of 3 rank(s))"));
  EXPECT_THAT(s.output, HasSubstr("missing ranks: 1\n"));
  EXPECT_THAT(s.output, HasSubstr("rank 2 has more than one directory"));
  EXPECT_THAT(s.output, HasSubstr("ended by signal SIGKILL"));
  const ProgramRun r = examples_test::run(std::string(OPSCOPE_PATH) + " report", folder.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string page = readAll(folder / "report.html");
  EXPECT_THAT(page, HasSubstr("&lt;script&gt;"));
  EXPECT_THAT(page, ::testing::Not(HasSubstr("-<script>")));
  // A world size of 10^9 with two ranks reporting: the missing ranks as ranges, bounded (the world is taken
  // up to 2^20 ranks), not a million numbers.
  writeRun(folder / "20261127-100000-rank0-11-aaaaaa",
           R"({"command":"p","pid":11,"rank":0,"world_size":1000000000,"ended":"exit","tools":{}})");
  const ProgramRun huge = examples_test::run(std::string(OPSCOPE_PATH) + " summary", folder.string());
  ASSERT_EQ(huge.exit_code, 0) << huge.output;
  EXPECT_THAT(huge.output, HasSubstr("missing ranks: 1,3-1048575\n"));
  EXPECT_LT(huge.output.size(), 20000u);
  // A rank whose profiler and memcheck ran but left nothing that can be read: its op calls, device time and
  // memory peak are unknown (said why in the warnings), not 0 and 0 B.
  writeRun(folder / "20261127-100000-rank0-11-aaaaaa",
           R"({"command":"p","pid":11,"rank":0,"world_size":3,"ended":"exit","tools":{"profile":true,)"
           R"("memcheck":true}})");
  const ProgramRun unknown = examples_test::run(std::string(OPSCOPE_PATH) + " summary", folder.string());
  ASSERT_EQ(unknown.exit_code, 0) << unknown.output;
  EXPECT_THAT(unknown.output, ::testing::ContainsRegex("\n +0 +11 +unknown +unknown .* unknown  "))
      << unknown.output;
  EXPECT_THAT(unknown.output, HasSubstr("rank 0: memcheck.json: cannot open")) << unknown.output;
  EXPECT_THAT(unknown.output, ::testing::Not(HasSubstr(" 0 B "))) << unknown.output;
  fs::remove_all(folder.parent_path());
}

// The straggler, worked by hand. One host: rank 1's clock starts 500 µs after rank 0's. Two all-reduces
// (device spans, on the common clock): #1 rank 0 100..520, rank 1 500..520: rank 1 arrives last, rank 0
// waited 400 µs for it. #2 rank 0 1000..1030, rank 1 900..1030: rank 0 last, rank 1 waited 100 µs.
// Rank 1 is named: the last at 1 of 2, the others waited 0.4 ms for it.
TEST(MultiRank, TheStragglerIsTheRankTheOthersWaitedForLongest) {
  const fs::path folder = freshRoot("straggler") / "job";
  const std::array<std::string, 2> dirs = {"20261127-100000-rank0-11-aaaaaa",
                                           "20261127-100000-rank1-12-aaaaaa"};
  const std::array<std::array<double, 4>, 2> spans = {{{100, 420, 1000, 30}, {0, 20, 400, 130}}};
  for (int rank = 0; rank < 2; ++rank) {
    const int pid = 11 + rank;
    writeRun(folder / dirs[rank],
             fmt::format(R"({{"command":"p","pid":{},"rank":{},"world_size":2,"ended":"exit",)"
                         R"("tools":{{"profile":true}}}})",
                         pid, rank));
    std::string trace = "{\"traceEvents\":[\n";
    for (int k = 0; k < 2; ++k) {
      trace += fmt::format(
          R"({{"ph":"X","cat":"collective","name":"mluclAllReduce","pid":{},"tid":{},"ts":{},"dur":1,"args":{{"correlation":{},"comm":1,"seq":{},"collective":"allreduce","rank":{},"world":2}}}},)"
          "\n",
          pid, pid, spans[rank][2 * k] - 5, 7 + k, k + 1, rank);
      trace += fmt::format(
          R"({{"ph":"X","cat":"collective","name":"mlucl_allreduce","pid":4194304,"tid":1,"ts":{},"dur":{},"args":{{"correlation":{}}}}}{})"
          "\n",
          spans[rank][2 * k], spans[rank][2 * k + 1], 7 + k, k == 1 ? "" : ",");
    }
    trace += fmt::format(R"(],"displayTimeUnit":"ms","otherData":{{"origin_monotonic_ns":{},"host":"h"}}}})",
                         1'000'000 + rank * 500'000) +
             "\n";
    std::ofstream(folder / dirs[rank] / "trace.json") << trace;
  }
  const ProgramRun s = examples_test::run(std::string(OPSCOPE_PATH) + " summary", folder.string());
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_THAT(s.output,
              HasSubstr("straggler: rank 1: the last to arrive at 1 of 2 collectives; the other ranks "
                        "waited 0.4 ms for it in all"))
      << s.output;
  // Each rank's wait in its row (the "waiting" column): rank 0 0.4 ms, rank 1 0.1 ms.
  const json m = opscope::report::loadRanks(folder, false);
  ASSERT_TRUE(m["straggler"].is_object()) << m.dump();
  EXPECT_EQ(m["straggler"]["rank"], 1);
  EXPECT_DOUBLE_EQ(m["straggler"]["others_waited_ms"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(m["ranks"][0]["collective_wait_ms"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(m["ranks"][1]["collective_wait_ms"].get<double>(), 0.1);
  EXPECT_EQ(m["straggler"]["ranks"][0]["last"], 1);
  fs::remove_all(folder.parent_path());
}

TEST(MultiRank, HostileRankTracesGiveWarningsAndAValidMergedTrace) {
  // Two ranks whose traces someone else wrote: malformed and deeply nested lines, a device pid past the
  // ranks' range, ids and times of the wrong types, a trace not in the profiler's line format, a symlinked
  // trace segment. The view is made anyway, says what it skipped, and the merged trace is valid JSON.
  const fs::path folder = freshRoot("hostile") / "job";
  writeRun(folder / "20261127-100000-rank0-11-aaaaaa",
           R"({"command":"p","pid":11,"rank":0,"world_size":2,"ended":"exit","tools":{"profile":true}})");
  writeRun(folder / "20261127-100000-rank1-12-aaaaaa",
           R"({"command":"p","pid":12,"rank":1,"world_size":2,"ended":"exit","tools":{"profile":true}})");
  std::ofstream(folder / "20261127-100000-rank0-11-aaaaaa" / "trace.json")
      << "{\"traceEvents\":[\n"
      << R"({"ph":"M","name":"process_name","pid":11,"args":{"name":"<b>rank 0</b>"}},)"
      << "\n"
      << R"({"ph":"X","cat":"collective","name":"mluclAllReduce","pid":11,"tid":11,"ts":1,"dur":2,"args":{"correlation":7,"comm":1,"seq":1,"collective":"allreduce","rank":0,"world":2}},)"
      << "\n"
      << R"({"ph":"X","cat":"collective","name":"mlucl_allreduce","pid":4194304,"tid":1,"ts":5,"dur":3,"args":{"correlation":7}},)"
      << "\n"
      << R"({"ph":"X","cat":"collective","name":"x","pid":4194999,"tid":1,"ts":5,"dur":3,"args":{"correlation":8}},)"
      << "\n"
      << R"({"ph":"s","id":"not a number","pid":11,"tid":11,"ts":"soon"},)"
      << "\n"
      << std::string(100, '[') << "\n"
      << "{not json at all\n"
      << R"({"ph":"X","cat":"user_annotation","name":"ProfilerStep#0","pid":11,"tid":11,"ts":0,"dur":1e300,"args":{"step":0}},)"
      << "\n"
      << R"(],"displayTimeUnit":"ms","otherData":{"origin_monotonic_ns":"x","host":7}})"
      << "\n";
  std::ofstream(folder / "20261127-100000-rank1-12-aaaaaa" / "trace.json")
      << R"({"traceEvents":[{"ph":"X","cat":"collective","name":"mlucl_allreduce","pid":4194304,"tid":1,"ts":9,"dur":1,"args":{"correlation":3}}]})";
  fs::create_symlink("/etc/passwd", folder / "20261127-100000-rank1-12-aaaaaa" / "trace.1.json");
  const ProgramRun r = examples_test::run(std::string(OPSCOPE_PATH) + " report", folder.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("(2 of 2 rank(s))"));
  EXPECT_THAT(r.output, HasSubstr("malformed events skipped"));
  EXPECT_THAT(r.output, HasSubstr("rank 1: trace.1.json: not valid JSON")) << "read as untrusted, refused";
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("the slowest rank of each step")))
      << "a step of 1e300 us is no measurement";
  const json merged = json::parse(readAll(folder / "trace.json"));
  EXPECT_TRUE(merged.at("traceEvents").is_array());
  EXPECT_TRUE(opscope_test::validTrace((folder / "trace.json").string()));
  EXPECT_THAT(readAll(folder / "report.html"), ::testing::Not(HasSubstr("<b>rank 0</b>")));
  fs::remove_all(folder.parent_path());
}

}  // namespace
