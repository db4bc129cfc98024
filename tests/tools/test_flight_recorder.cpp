// The collective flight recorder (recorder/) in real MPI jobs under `opscope run`, and `opscope analyze` of
// their dumps: each planted collective fault of MLU_SIM_FAULT named with its rank and sequence number (a
// rank that never reaches a collective, one that skips one, a count or dtype off on one rank, a slow rank);
// a hung job ends within the timeout + 30 s with every rank's dump; a dump deleted is named missing and the
// rest still analysed; hostile dumps give warnings, not crashes.
#include "mpi_run.h"
#include "program_run.h"
#include "test_paths.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using examples_test::ProgramRun;
using nlohmann::json;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

std::string readAll(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Job {
  ProgramRun run;
  fs::path folder;  // the run folder
  double seconds = 0;
};

// `opscope run -- mpirun -np N mlucl_probe --calls 3` with a planted fault, in a fresh root.
Job probeJob(const std::string& name, const std::string& fault, int np, const std::string& env = "",
             const std::string& args = "--calls 3",
             const std::string& program = opscope_test::paths::kMluclProbe) {
  const fs::path root =
      fs::temp_directory_path() / ("opscope-recorder-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(root);
  const auto start = std::chrono::steady_clock::now();
  Job job;
  job.run = examples_test::run("timeout --kill-after=10 120 env " + opscope_test::mpiSanitizerOptions() +
                                   " MLU_SIM_FAULT='" + fault + "' " + env + " " + std::string(OPSCOPE_PATH) +
                                   " run --out " + root.string() + " -- " + opscope_test::mpirunCommand(np) +
                                   " " + program,
                               args);
  job.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) job.folder = e.path();
  return job;
}

ProgramRun analyze(const fs::path& folder) {
  return examples_test::run(std::string(OPSCOPE_PATH) + " analyze", folder.string());
}

// Each rank directory's dump, parsed.
std::vector<json> dumps(const fs::path& folder) {
  std::vector<json> out;
  for (const auto& e : fs::directory_iterator(folder)) {
    const fs::path f = e.path() / "flight_recorder.json";
    if (e.is_directory() && fs::exists(f)) out.push_back(json::parse(readAll(f)));
  }
  return out;
}

TEST(FlightRecorder, ACleanJobDumpsEveryRankAtExitAndAnalysesClean) {
  const Job job = probeJob("clean", "", 2);
  ASSERT_EQ(job.run.exit_code, 0) << job.run.output;
  const auto d = dumps(job.folder);
  ASSERT_EQ(d.size(), 2u) << job.run.output;
  for (const json& r : d) {
    EXPECT_EQ(r["reasons"], json::array({"communicators destroyed"}));  // nothing new by the exit
    EXPECT_EQ(r["world_size"], 2);
    ASSERT_EQ(r["comms"].size(), 1u);
    const json& c = r["comms"][0];
    EXPECT_EQ(c["last_enqueued"], 3);
    EXPECT_EQ(c["last_completed"], 3);
    ASSERT_EQ(c["entries"].size(), 3u);
    for (const json& e : c["entries"]) {
      EXPECT_EQ(e["state"], "completed");
      EXPECT_EQ(e["collective"], "allreduce");
      EXPECT_EQ(e["count"], 1024);
      EXPECT_LE(e["calling_ns"].get<std::int64_t>(), e["completed_ns"].get<std::int64_t>());
    }
    // The backtrace of a transfer: at the exit of a run where nothing went wrong, module and offset (not
    // looked up: dladdr only).
    const std::string stack = r["backtraces"].dump();
    EXPECT_THAT(stack, HasSubstr("(mlucl_probe+0x")) << stack;
    EXPECT_THAT(stack, Not(HasSubstr("mlucl_probe.cpp:"))) << stack;
  }
  const ProgramRun a = analyze(job.folder);
  EXPECT_EQ(a.exit_code, 0) << a.output;
  EXPECT_THAT(a.output, HasSubstr("verdict: no hang, failure or mismatch in the dumps"));
}

TEST(FlightRecorder, ARankThatNeverReachesACollectiveIsNamedAndEveryRankDumps) {
  // Rank 2's second all-reduce never returns: after OP_COLLECTIVE_TIMEOUT_S=2 the ranks dump, ask the
  // others to (the run folder), and abort.
  // Profiled too: every rank's results are finished before the abort (below).
  const Job job =
      probeJob("hang", "allreduce:hang@rank=2@call=2", 3, "OP_COLLECTIVE_TIMEOUT_S=2 OP_TIME_MEASURE=1");
  EXPECT_NE(job.run.exit_code, 0) << job.run.output;
  EXPECT_NE(job.run.exit_code, 124) << "cut by timeout: the recorder did not end the job\n" << job.run.output;
  EXPECT_LT(job.seconds, 2 + 30) << job.run.output;
  EXPECT_THAT(job.run.output, HasSubstr("was called and has not returned"));
  EXPECT_TRUE(fs::exists(job.folder / "flight_recorder.request"));
  const auto d = dumps(job.folder);
  ASSERT_EQ(d.size(), 3u) << "every rank's dump\n" << job.run.output;
  // Every rank's results are finished before the abort (the ranks that timed out, and rank 2 on their
  // request), not left to the abort's signal: before, a rank Open MPI killed while it flushed kept
  // "ended": null (seen under ThreadSanitizer).
  int ended = 0;
  for (const auto& e : fs::directory_iterator(job.folder)) {
    if (!e.is_directory()) continue;
    EXPECT_TRUE(fs::exists(e.path() / "trace.json")) << e.path();
    EXPECT_TRUE(fs::exists(e.path() / "time_measure.csv")) << e.path();
    EXPECT_FALSE(fs::exists(e.path() / "trace.json.tmp")) << e.path();
    const json run = json::parse(readAll(e.path() / "run.json"));
    ASSERT_TRUE(run["ended"].is_string()) << e.path() << "\n" << job.run.output;
    EXPECT_THAT(run["ended"].get<std::string>(),
                ::testing::MatchesRegex("the flight recorder's abort \\(rank [0-2] timed out\\)"));
    ++ended;
  }
  EXPECT_EQ(ended, 3);
  const ProgramRun a = analyze(job.folder);
  EXPECT_EQ(a.exit_code, 1) << a.output;
  EXPECT_THAT(a.output,
              HasSubstr("first collective not completed by every rank: allreduce #2 (1024 x float32, sum)"));
  EXPECT_THAT(a.output,
              HasSubstr("communicator 1: allreduce #2 was never enqueued by rank(s) 2 (the host call "
                        "never returned); rank(s) 0,1 wait in it"));
  // Where rank 2 is stuck: in the probe's main.
  EXPECT_THAT(a.output,
              HasSubstr("rank 2: never enqueued it: its host call never returned, in:\n        #0 "));
  EXPECT_THAT(a.output, HasSubstr(" in main ")) << a.output;

  // One rank's dump deleted: named missing, the rest still analysed.
  for (const auto& e : fs::directory_iterator(job.folder)) {
    if (e.path().filename().string().find("-rank0-") != std::string::npos)
      fs::remove(e.path() / "flight_recorder.json");
  }
  const ProgramRun b = analyze(job.folder);
  EXPECT_EQ(b.exit_code, 1) << b.output;
  EXPECT_THAT(b.output, HasSubstr("missing: [0]"));
  EXPECT_THAT(b.output, HasSubstr("no dump from rank(s) 0 (of 3)"));
  EXPECT_THAT(b.output, HasSubstr("allreduce #2 was never enqueued by rank(s) 2"));
  fs::remove_all(job.folder.parent_path());
}

// A rank stuck in its own code (a data loader, a Python loop), not in a collective: the others time out,
// and it finishes its results on their request (RunInfo::end_now) before their abort ends the job, which
// Open MPI's kill would not leave it the time to.
TEST(FlightRecorder, ARankStuckOutsideACollectiveFinishesItsResultsOnTheOthersRequest) {
  const Job job =
      probeJob("stall", "", 2, "OP_COLLECTIVE_TIMEOUT_S=2 OP_TIME_MEASURE=1", "--calls 3 --stall-rank 1");
  EXPECT_NE(job.run.exit_code, 0) << job.run.output;
  EXPECT_LT(job.seconds, 2 + 30) << job.run.output;
  EXPECT_THAT(job.run.output,
              HasSubstr("rank 1: finishing this rank's results now (rank 0 timed out: allreduce #2"));
  fs::path stalled;
  for (const auto& e : fs::directory_iterator(job.folder)) {
    if (e.path().filename().string().find("-rank1-") != std::string::npos) stalled = e.path();
  }
  ASSERT_FALSE(stalled.empty()) << job.run.output;
  const json run = json::parse(readAll(stalled / "run.json"));
  EXPECT_EQ(run["ended"], "the flight recorder's abort (rank 0 timed out)") << job.run.output;
  EXPECT_TRUE(fs::exists(stalled / "trace.json"));
  EXPECT_TRUE(fs::exists(stalled / "time_measure.csv"));
  EXPECT_FALSE(fs::exists(stalled / "trace.json.tmp"));
  const json dump = json::parse(readAll(stalled / "flight_recorder.json"));
  EXPECT_THAT(dump["reasons"].dump(), HasSubstr("requested: rank 0 timed out: allreduce #2"));
  // Its one completed all-reduce is in its trace, written before the kill.
  EXPECT_THAT(readAll(stalled / "trace.json"), HasSubstr("allreduce"));
  fs::remove_all(job.folder.parent_path());
}

// Sends and receives (mlucl_probe --p2p: ranks 0-1 and 2-3 exchange a buffer each call): a count that
// libmlucl's check of the pair refuses is named with both ranks and the pair's number; a send to the wrong
// peer hangs, and analyze names it and the recv left without a send.
TEST(FlightRecorder, PointToPointMismatchesAndWrongPeersAreNamed) {
  struct Case {
    const char* name;
    const char* fault;
    const char* env;
    const char* args;
    std::vector<std::string> said;
  };
  const std::vector<Case> cases = {
      {"p2p-count",
       "send:count=-1@rank=1@call=2",
       "",
       "--p2p --calls 3",
       {"rank 0 posted recv #2 from rank 1 float32 x 1024 where rank 1 posted send #2 to rank 0 float32 x "
        "1023 "
        "(libmlucl's check)"}},
      {"p2p-peer",
       "",
       "OP_COLLECTIVE_TIMEOUT_S=3",
       "--p2p --calls 3 --wrong-peer 1",
       {"rank 1's send #1 to rank 2 (1024 x float32) has no matching recv on rank 2 (it posted no recv from "
        "rank 1)",
        "rank 0's recv #1 from rank 1 (1024 x float32) has no matching send on rank 1"}},
  };
  for (const Case& c : cases) {
    const Job job = probeJob(c.name, c.fault, 4, c.env, c.args);
    EXPECT_NE(job.run.exit_code, 0) << job.run.output;
    EXPECT_LT(job.seconds, 3 + 30) << job.run.output;
    EXPECT_EQ(dumps(job.folder).size(), 4u) << job.run.output;
    const ProgramRun a = analyze(job.folder);
    EXPECT_EQ(a.exit_code, 1) << a.output;
    for (const auto& s : c.said) EXPECT_THAT(a.output, HasSubstr(s)) << c.name << "\n" << a.output;
    fs::remove_all(job.folder.parent_path());
  }
}

TEST(FlightRecorder, CountDtypeAndSkipFaultsAreNamedWithTheirRankAndSequenceNumber) {
  struct Case {
    const char* fault;
    std::vector<std::string> said;
  };
  const std::vector<Case> cases = {
      {"allreduce:count=-1@rank=1@call=2",
       {"allreduce #2 failed on rank(s) 0,1,2",
        "rank(s) 1 posted allreduce #2 sum float32 x 1023 where rank(s) 0,2 posted allreduce #2 sum float32 "
        "x 1024"}},
      {"allreduce:dtype=int32@rank=2@call=3",
       {"rank(s) 2 posted allreduce #3 sum int32 x 1024 where rank(s) 0,1 posted allreduce #3 sum float32 x "
        "1024"}},
      {"allreduce:skip@rank=1@call=2",
       {"allreduce #2 failed on rank(s) 0,2; only rank(s) 1 completed it (the odd one(s) out)",
        "rank(s) 1 posted allreduce #3 sum float32 x 1024 where rank(s) 0,2 posted allreduce #2"}},
  };
  int n = 0;
  for (const Case& c : cases) {
    const Job job = probeJob("fault" + std::to_string(n++), c.fault, 3);
    EXPECT_NE(job.run.exit_code, 0) << c.fault << job.run.output;
    EXPECT_EQ(dumps(job.folder).size(), 3u) << c.fault << job.run.output;
    const ProgramRun a = analyze(job.folder);
    EXPECT_EQ(a.exit_code, 1) << a.output;
    for (const auto& s : c.said) EXPECT_THAT(a.output, HasSubstr(s)) << c.fault << "\n" << a.output;
    fs::remove_all(job.folder.parent_path());
  }
}

// Two jobs, one after the other, in one run folder (OPSCOPE_RUN_FOLDER given twice, as torchrun's default
// rendezvous id "none" does): the first fails on a count fault, the second is clean. analyze and the ranks
// view read the second job alone (each rank's run.json names its job), and say the folder holds two; before,
// analyze took each rank's oldest dump, and the first job's failure became the second's verdict.
TEST(FlightRecorder, TwoJobsInOneRunFolderAreKeptApart) {
  const fs::path root = fs::temp_directory_path() / ("opscope-recorder-two-jobs-" + std::to_string(getpid()));
  fs::remove_all(root);
  for (const std::string fault : {"allreduce:count=-1@rank=1@call=2", ""}) {
    const ProgramRun r =
        examples_test::run("timeout --kill-after=10 120 env " + opscope_test::mpiSanitizerOptions() +
                               " OPSCOPE_RUN_FOLDER=shared" + " MLU_SIM_FAULT='" + fault + "' " +
                               std::string(OPSCOPE_PATH) + " run --out " + root.string() + " -- " +
                               opscope_test::mpirunCommand(3) + " " + opscope_test::paths::kMluclProbe,
                           "--calls 3");
    EXPECT_EQ(r.exit_code == 0, fault.empty()) << r.output;
  }
  const fs::path folder = root / "shared";
  int dirs = 0;
  for (const auto& e : fs::directory_iterator(folder)) dirs += e.is_directory() ? 1 : 0;
  EXPECT_EQ(dirs, 6);
  const ProgramRun a = analyze(folder);
  EXPECT_EQ(a.exit_code, 0) << a.output;
  EXPECT_THAT(a.output, HasSubstr("verdict: no hang, failure or mismatch in the dumps")) << a.output;
  EXPECT_THAT(a.output, HasSubstr("the folder holds the ranks of 2 jobs")) << a.output;
  EXPECT_THAT(a.output, Not(HasSubstr("more than one dump"))) << a.output;
  const ProgramRun v = examples_test::run(std::string(OPSCOPE_PATH) + " report", folder.string());
  EXPECT_EQ(v.exit_code, 0) << v.output;
  EXPECT_THAT(v.output, HasSubstr("the folder holds the ranks of 2 jobs")) << v.output;
  EXPECT_THAT(v.output, Not(HasSubstr("more than one directory"))) << v.output;
  fs::remove_all(root);
}

TEST(FlightRecorder, ASlowRankIsNamed) {
  const Job job = probeJob("slow", "allreduce:delay=700@rank=1@call=2", 2);
  ASSERT_EQ(job.run.exit_code, 0) << job.run.output;
  const ProgramRun a = analyze(job.folder);
  EXPECT_EQ(a.exit_code, 1) << a.output;
  EXPECT_THAT(a.output, HasSubstr("communicator 1: rank 1 posted allreduce #2 0.")) << a.output;
  EXPECT_THAT(a.output, Not(HasSubstr("allreduce #1 ")));
  fs::remove_all(job.folder.parent_path());
}

// (Not under ThreadSanitizer, unlike the suite above: a whole training.)
TEST(FlightRecorderSignals, SigusrOneDumpsARunningRankWithoutStoppingIt) {
  // A data-parallel run of 40 steps; SIGUSR1 to its ranks only (their command lines begin with the
  // program: not mpirun's nor the launcher's) once rank 0 has logged step 3, so the signal comes mid-run
  // however slow the build (under AddressSanitizer a step takes ~10x as long) or the machine is.
  const fs::path root = fs::temp_directory_path() / ("opscope-recorder-usr1-" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string log = (root / "output.txt").string();
  const std::string marker = std::to_string(4000 + getpid() % 1000);
  const std::string llama =
      std::string(LLAMA_TRAIN_PATH) + " --ddp --steps 40 --log-interval 1 --eval-batches 0 --seed " + marker;
  const std::string ranks = "-f \"^" + llama + "\"";
  const std::string signal = "sh -c 'for i in $(seq 900); do grep -qE \"^step +3 \" " + log +
                             " 2>/dev/null && break; sleep 0.2; done; pkill -USR1 " + ranks + "' & ";
  const ProgramRun r =
      examples_test::run(signal + "timeout --kill-after=10 180 env " + opscope_test::mpiSanitizerOptions() +
                             " " + std::string(OPSCOPE_PATH) + " run --out " + (root / "run").string() +
                             " -- " + opscope_test::mpirunCommand(2),
                         llama + " >" + log + " 2>&1; s=$?; cat " + log + "; (exit $s)");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  fs::path folder;
  for (const auto& e : fs::directory_iterator(root / "run"))
    if (e.is_directory()) folder = e.path();
  const auto d = dumps(folder);
  ASSERT_EQ(d.size(), 2u) << r.output;
  for (const json& x : d) {
    EXPECT_EQ(x["reasons"], json::array({"SIGUSR1", "communicators destroyed", "exit"}))
        << x["reasons"].dump();
    // Asked for, so symbolized: function, file and line (the file as the compiler names it: relative to the
    // build folder when ccache's base_dir rewrote it, else absolute; clang joins it to the build folder).
    EXPECT_THAT(x["backtraces"].dump(),
                ContainsRegex(" in main [^ \"]*/examples/llama_train/llama_train\\.cpp:[0-9]+"));
  }
  fs::remove_all(root);
}

// A 4-rank data-parallel llama_train (3 steps, a small model) under `opscope run FLAGS` with the variables
// ENV, MLU_SIM_FAULT=fault given to rank `rank` alone (mpirun's app contexts; no fault: none). Returns the
// run folder (under a fresh root), or an empty path (a failure added) when the job failed. `before`, when
// given, is called with the fresh root before the job starts.
fs::path oneRankFaultJob(const std::string& name, const std::string& env, const std::string& flags,
                         const std::string& fault, int rank,
                         const std::function<void(const fs::path&)>& before = {}) {
  const fs::path root =
      fs::temp_directory_path() / ("opscope-recorder-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(root);
  if (before) before(root);
  const std::string llama =
      std::string(LLAMA_TRAIN_PATH) +
      " --ddp --steps 3 --batch-size 8 --seq-len 16 --dim 32 --heads 2 --layers 1 --eval-batches 0";
  std::string contexts;
  const auto context = [&](int n, const std::string& extra) {
    if (n <= 0) return;
    contexts += (contexts.empty() ? "" : " : ") + ("-np " + std::to_string(n) + " " + extra + llama);
  };
  if (fault.empty()) {
    context(4, "");
  } else {
    context(rank, "");
    context(1, "-x MLU_SIM_FAULT=" + fault + " ");
    context(3 - rank, "");
  }
  const ProgramRun r = examples_test::run(
      "timeout --kill-after=10 300 env " + opscope_test::mpiSanitizerOptions() + " " + env + " " +
          std::string(OPSCOPE_PATH) + " run " + flags + " --out " + root.string() + " --",
      "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " + opscope_test::mpiSanitizerOptions() +
          " " + opscope_test::paths::kMpirun + " --oversubscribe " + contexts);
  if (r.exit_code != 0) {
    ADD_FAILURE() << r.output;
    return {};
  }
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) return e.path();
  ADD_FAILURE() << "no run folder in " << root;
  return {};
}

// OP_RANK_CONSISTENCY: rank 2 of 4 has an adamw_step that scales its parameters. The replicas differ from
// the first optimizer step, and analyze names rank 2 and that op; a clean job has no difference. The clean
// job runs without the flight recorder, whose marks around each collective otherwise carry the hashes: a
// hash taken out of its place on the queue (a gradient before its all-reduce) would differ across ranks.
//
// The clean job runs in a run folder an earlier job of 4 ranks left (OPSCOPE_RUN_FOLDER used again): the
// live check compares only this job's ranks, and analyze reads only the newest job, and says so.
TEST(FlightRecorderConsistency, AParameterFaultOnOneRankIsNamedAtTheFirstStep) {
  // The earlier job: every rank's records of three steps, ranks 1 and 3 unlike 0 and 2 everywhere.
  const auto earlierJob = [](const fs::path& root) {
    for (int r = 0; r < 4; ++r) {
      const fs::path dir = root / "reused" / fmt::format("20000101-000000-rank{}-{}-abcdef", r, 100 + r);
      fs::create_directories(dir);
      std::ofstream(dir / "run.json") << fmt::format(
          R"({{"tool":"opscope","rank":{},"world_size":4,"job":"earlier","start_time":"2000-01-01T00:00:00Z"}})",
          r);
      std::ofstream lines(dir / "consistency.jsonl");
      for (int step = 0; step < 3; ++step) {
        for (int i = 0; i < 400; ++i)
          lines << fmt::format(
              R"({{"step":{},"index":{},"kind":"grad","op":"allreduce","seq":{},"bytes":4,"hash":"{:016x}"}})"
              "\n",
              step, i, i + 1, r % 2);
        lines << fmt::format(R"({{"step":{},"records":400}})"
                             "\n",
                             step);
      }
    }
    fs::permissions(root / "reused", fs::perms::owner_all);  // a run folder is closed to others
  };
  for (const bool planted : {false, true}) {
    const fs::path folder =
        oneRankFaultJob("consistency-" + std::to_string(planted),
                        planted ? "OP_RANK_CONSISTENCY=1"
                                : "OP_RANK_CONSISTENCY=1 OP_FLIGHT_RECORDER=0 OPSCOPE_RUN_FOLDER=reused",
                        "", planted ? "adamw_step:scale=1.001" : "", 2,
                        planted ? std::function<void(const fs::path&)>() : earlierJob);
    ASSERT_FALSE(folder.empty());
    const ProgramRun a = analyze(folder);
    if (!planted) {
      EXPECT_THAT(a.output, HasSubstr("the folder holds the ranks of 2 jobs (a run folder used again"))
          << a.output;
      EXPECT_THAT(a.output, ContainsRegex("only the newest, job opscope-run-[0-9-]+ \\(started 20"))
          << a.output;
    }
    // 3 steps: per step the gradients' all-reduces and the parameters after each adamw_step.
    EXPECT_THAT(a.output, HasSubstr("consistency (OP_RANK_CONSISTENCY) of ranks [0,1,2,3]: ")) << a.output;
    if (!planted) {
      EXPECT_EQ(a.exit_code, 0) << a.output;
      EXPECT_THAT(a.output,
                  ContainsRegex("of ranks \\[0,1,2,3\\]: [1-9][0-9]+ record\\(s\\) compared, 0 differ\n"))
          << a.output;
    } else {
      EXPECT_EQ(a.exit_code, 1) << a.output;
      EXPECT_THAT(a.output,
                  HasSubstr("replicas differ first at step 0: the parameters written by adamw_step #"))
          << a.output;
      EXPECT_THAT(a.output, HasSubstr("on rank(s) 2, unlike rank(s) 0,1,3")) << a.output;
      EXPECT_THAT(a.output, HasSubstr("; the call is kept for op-replay")) << a.output;
    }
    // Found during the run too: each rank compared the others' hashes as they came and, when they differed,
    // kept its own call of the first differing op for op-replay.
    std::map<int, fs::path> kept;
    for (const auto& dir : fs::directory_iterator(folder)) {
      const json run = json::parse(readAll(dir.path() / "run.json"));
      if (run.value("job", "") == "earlier") continue;
      const int rank = run.value("rank", -1);
      const json& f = run["findings"];
      const bool has = f.contains("flight recorder") && f["flight recorder"].contains("consistency");
      EXPECT_EQ(has, planted) << dir.path();
      if (!has) continue;
      const json& c = f["flight recorder"]["consistency"];
      EXPECT_EQ(c["first"]["step"], 0) << c;
      EXPECT_EQ(c["first"]["ranks"], json::array({2})) << c;
      EXPECT_EQ(c["kept"], "consistency_capture.db") << c;
      kept[rank] = dir.path() / "consistency_capture.db";
      EXPECT_EQ(fs::status(kept[rank]).permissions() & fs::perms::all,
                fs::perms::owner_read | fs::perms::owner_write);
    }
    if (planted) {
      ASSERT_EQ(kept.size(), 4u);
      // Rank 0's call, replayed, gives what rank 0 got; rank 2's does not give what rank 2 got: its
      // adamw_step was the planted one (the replay runs without MLU_SIM_FAULT).
      const ProgramRun good = examples_test::run(std::string(OP_REPLAY_PATH) + " " + kept[0].string(), "");
      EXPECT_EQ(good.exit_code, 0) << good.output;
      EXPECT_THAT(good.output, HasSubstr("adamw_step")) << good.output;
      const ProgramRun bad = examples_test::run(std::string(OP_REPLAY_PATH) + " " + kept[2].string(), "");
      EXPECT_EQ(bad.exit_code, 1) << bad.output;
      EXPECT_THAT(bad.output, HasSubstr("output param differs from the capture")) << bad.output;
    }
    fs::remove_all(folder.parent_path());
  }
}

// A NaN born on rank 1 (silu_backward planted to make one there only) reaches every rank through the
// gradients' all-reduce: OP_OVERFLOW_CHECK finds an op that made it from finite inputs on rank 1 alone, and
// analyze names that rank, op and the collective that carried it on.
// Every tool sees every runtime call before it is made (Tool::beforeRuntimeCall), also one another tool
// makes itself: here the flight recorder's consistency check, and a free that memcheck makes (its
// quarantine off, so the block goes back to the runtime at once). Each rank's parameter is hashed after
// its SGD step; the program then frees it and fills a new block of the same size, on another queue, with
// its rank's number. The hash must be queued before the free (which waits for the queues), else it reads
// the new block and the ranks differ (as they did while memcheck's free hid the call from the recorder).
TEST(FlightRecorderConsistency, TheParametersAreHashedBeforeAFreeThatMemcheckMakes) {
  const Job job = probeJob("reuse", "", 2, "OP_RANK_CONSISTENCY=1 MEM_CHECK=1 MEM_CHECK_QUARANTINE_MB=0", "",
                           opscope_test::paths::kReuseProbe);
  ASSERT_EQ(job.run.exit_code, 0) << job.run.output;
  // (Else the test shows nothing: the freed block must be the one filled.)
  EXPECT_THAT(job.run.output, HasSubstr("rank 0 reuse: same address yes")) << job.run.output;
  EXPECT_THAT(job.run.output, HasSubstr("rank 1 reuse: same address yes")) << job.run.output;
  const ProgramRun a = analyze(job.folder);
  EXPECT_EQ(a.exit_code, 0) << a.output;
  EXPECT_THAT(a.output, ContainsRegex("of ranks \\[0,1\\]: [1-9][0-9]* record\\(s\\) compared, 0 differ\n"))
      << a.output;
}

TEST(FlightRecorderNan, TheRankWhereANanIsBornIsNamed) {
  const fs::path folder = oneRankFaultJob("nan", "", "--overflow-check", "silu_backward:nan", 1);
  ASSERT_FALSE(folder.empty());
  const ProgramRun a = analyze(folder);
  EXPECT_EQ(a.exit_code, 1) << a.output;
  EXPECT_THAT(a.output, HasSubstr("NaN/Inf first made on rank 1 by silu_backward #")) << a.output;
  EXPECT_THAT(a.output, HasSubstr("on communicator 1, carried it to the other ranks)")) << a.output;
  EXPECT_THAT(a.output, Not(HasSubstr("\n  rank 0: silu_backward"))) << a.output;
  // The other ranks see it first in that all-reduce's result: listed after rank 1, which made it.
  EXPECT_THAT(a.output, HasSubstr("\n  rank 0: in the result of allreduce #")) << a.output;
  fs::remove_all(folder.parent_path());
}

// A NaN planted by libmlucl into rank 1's part of its second all-reduce (MLU_SIM_FAULT allreduce:nan: written
// into what the rank sends once the transfer has started, after the check of what it sends): no rank's op
// made it. OP_OVERFLOW_CHECK has the hook run the in-place all-reduce out of place, reads what each rank sent
// again after the transfer, and so finds rank 1's part changed; analyze names rank 1 and the all-reduce by
// its sequence number. Without that (a rank whose part nobody could read again), the all-reduce alone.
TEST(FlightRecorderNan, ANanWrittenIntoOneRanksPartOfACollectiveNamesTheRankAndTheCollective) {
  const fs::path folder =
      oneRankFaultJob("nan-collective", "", "--overflow-check", "allreduce:nan@call=2", 1);
  ASSERT_FALSE(folder.empty());
  // The planted call: rank 1's second all-reduce, as its dump numbers it.
  std::int64_t planted = 0;
  for (const json& d : dumps(folder)) {
    if (d["rank"] != 1) continue;
    int allreduces = 0;
    for (const json& e : d["comms"][0]["entries"])
      if (e["collective"] == "allreduce" && ++allreduces == 2) planted = e["seq"].get<std::int64_t>();
  }
  ASSERT_GT(planted, 0);
  const std::string seq = std::to_string(planted);
  ProgramRun a = analyze(folder);
  EXPECT_EQ(a.exit_code, 1) << a.output;
  EXPECT_THAT(a.output,
              HasSubstr("NaN/Inf first appeared in allreduce #" + seq +
                        " on communicator 1, in the part of rank(s) 1: what it sent was finite when "
                        "the collective was posted and held NaN/Inf once it had run"))
      << a.output;
  EXPECT_THAT(a.output, HasSubstr("the result carried it to rank(s) 0,1,2,3")) << a.output;
  EXPECT_THAT(a.output,
              HasSubstr("\n  rank 1: in the result of allreduce #" + seq +
                        " (its own part: what it sent went NaN/Inf during the transfer)\n  rank 0: "))
      << a.output;
  // The program's result is what an in-place all-reduce gives (copied back): the NaN reached every rank's
  // gradients, and each rank's finding names the same all-reduce.
  int changed = 0, findings = 0;
  for (const auto& dir : fs::directory_iterator(folder)) {
    const json run = json::parse(readAll(dir.path() / "run.json"));
    const json& c = run["findings"]["overflow check"]["first"]["collective"];
    ASSERT_TRUE(c.is_object()) << run.dump();
    EXPECT_EQ(c["seq"], planted);
    ++findings;
    if (c["sent_changed"] == true) {
      ++changed;
      EXPECT_EQ(run["rank"], 1);
    }
  }
  EXPECT_EQ(findings, 4);
  EXPECT_EQ(changed, 1);
  // Rank 1's part not read again (as from a tool that could not): the all-reduce is still named, by every
  // rank, as where NaN/Inf first appeared.
  for (const auto& dir : fs::directory_iterator(folder)) {
    json run = json::parse(readAll(dir.path() / "run.json"));
    run["findings"]["overflow check"]["first"]["collective"]["sent_changed"] = false;
    std::ofstream(dir.path() / "run.json", std::ios::trunc) << run.dump();
  }
  a = analyze(folder);
  EXPECT_THAT(a.output, HasSubstr("NaN/Inf first appeared in the result of allreduce #" + seq +
                                  " on communicator 1 on rank(s) 0,1,2,3, from what they sent finite: no "
                                  "rank's op made it before"))
      << a.output;
  fs::remove_all(folder.parent_path());
}

TEST(FlightRecorder, HostileDumpsGiveWarningsNotCrashes) {
  const fs::path folder =
      fs::temp_directory_path() / ("opscope-recorder-hostile-" + std::to_string(getpid()));
  fs::remove_all(folder);
  const std::vector<std::string> bodies = {
      "not json", R"({"format":"opscope-flight-recorder","rank":"zero"})",
      R"({"format":"opscope-flight-recorder","rank":1,"world_size":99999999999,"comms":[{"comm":"1","size":-5,
          "last_completed":18446744073709551615,"entries":[{"seq":-1},{"seq":3,"collective":"allreduce",
          "calling_ns":"x","stack":99}, 7]}, "x"],"backtraces":{"99":[1,2,"#0 ok"]}})",
      std::string(200, '['),
      // A newer opscope's dump: refused with the reason, not misread.
      R"({"format":"opscope-flight-recorder","format_version":9,"rank":4,"world_size":5,"comms":[]})"};
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    const fs::path dir = folder / ("20261127-000000-rank" + std::to_string(i) + "-1-abcdef");
    fs::create_directories(dir);
    std::ofstream(dir / "run.json") << R"({"rank":)" << i << R"(,"world_size":4})";
    std::ofstream(dir / "flight_recorder.json") << bodies[i];
  }
  const ProgramRun a = analyze(folder);
  EXPECT_EQ(a.exit_code, 1) << a.output;
  EXPECT_THAT(a.output, HasSubstr("not valid JSON"));
  EXPECT_THAT(a.output, HasSubstr("flight_recorder.json: no rank"));
  EXPECT_THAT(a.output, HasSubstr("nested deeper than"));
  EXPECT_THAT(a.output,
              HasSubstr("flight_recorder.json is in format version 9, newer than this opscope reads (1)"));
  EXPECT_THAT(a.output, HasSubstr("no dump from rank(s) 0,2,3,4"));
  const ProgramRun none = analyze(folder / "absent");
  EXPECT_EQ(none.exit_code, 3) << none.output;
  fs::remove_all(folder);
}

// Every send of a job to the wrong peer is one finding with a bounded list: the first 100 disagreements of
// the communicator, then how many more (the matching looks each peer's last call up: linear, not a scan per
// call). The dumps are read by the reader whose nesting bound is checked in a first pass.
TEST(FlightRecorder, ManyUnmatchedSendsAreListedUpToABound) {
  const fs::path folder = fs::temp_directory_path() / ("opscope-recorder-p2p-" + std::to_string(getpid()));
  fs::remove_all(folder);
  for (int rank = 0; rank < 2; ++rank) {
    const fs::path dir = folder / ("20261127-000000-rank" + std::to_string(rank) + "-1-abcdef");
    fs::create_directories(dir);
    std::ofstream(dir / "run.json") << R"({"rank":)" << rank << R"(,"world_size":2})";
    std::ofstream dump(dir / "flight_recorder.json");
    dump << R"({"format":"opscope-flight-recorder","rank":)" << rank
         << R"(,"world_size":2,"comms":[{"comm":"1","size":2,"ring":300,"recorded":150,"entries":[)";
    for (int i = 1; i <= 150; ++i) {
      dump << (i > 1 ? "," : "") << R"({"seq":)" << i << R"(,"collective":"send","peer":)" << 1 - rank
           << R"(,"state":"completed","count":4,"dtype":"float32"})";
    }
    dump << "]}]}";
  }
  const ProgramRun a = analyze(folder);
  EXPECT_EQ(a.exit_code, 1) << a.output;
  std::size_t listed = 0;
  for (std::size_t at = a.output.find("has no matching recv"); at != std::string::npos;
       at = a.output.find("has no matching recv", at + 1))
    ++listed;
  EXPECT_EQ(listed, 2u * 100u) << a.output;  // each in the communicator's section and in the verdict
  EXPECT_THAT(a.output, HasSubstr("rank 0's send #1 to rank 1 (4 x float32) has no matching recv on rank 1 "
                                  "(it posted no recv from rank 0)"));
  EXPECT_THAT(a.output,
              HasSubstr("and 200 more sends and receives that do not match (the first 100 are listed)"));
  fs::remove_all(folder);
}

// A folder whose ranks left no readable dump (all killed, or every dump unreadable) is never called clean:
// the verdict says that nothing is known, and the exit status is a finding's.
TEST(FlightRecorder, NoReadableDumpIsNeverACleanVerdict) {
  const fs::path folder = fs::temp_directory_path() / ("opscope-recorder-nodump-" + std::to_string(getpid()));
  for (const std::vector<std::string>& bodies :
       {std::vector<std::string>{"", ""}, std::vector<std::string>{"not json", std::string(300, '[')}}) {
    fs::remove_all(folder);
    for (std::size_t i = 0; i < bodies.size(); ++i) {
      const fs::path dir = folder / ("20261127-000000-rank" + std::to_string(i) + "-1-abcdef");
      fs::create_directories(dir);
      std::ofstream(dir / "run.json") << R"({"rank":)" << i << R"(,"world_size":2})";
      if (!bodies[i].empty()) std::ofstream(dir / "flight_recorder.json") << bodies[i];
    }
    const ProgramRun a = analyze(folder);
    EXPECT_EQ(a.exit_code, 1) << a.output;
    EXPECT_THAT(a.output, Not(HasSubstr("verdict: no hang")));
    EXPECT_THAT(a.output, HasSubstr("no flight recorder dump could be read (2 rank directories"));
    EXPECT_THAT(a.output, HasSubstr(bodies[0].empty() ? "no rank wrote one" : "see the warnings"));
  }
  fs::remove_all(folder);
}

}  // namespace
