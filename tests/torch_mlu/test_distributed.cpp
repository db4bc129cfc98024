// PyTorch data parallelism on the MLU as its users run it: /usr/bin/python3 programs started by Open MPI's
// mpirun, on torch_mlu's torch.distributed backend "mlucl" (torch_mlu/src/process_group.h), alone and under
// `opscope run`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "demo_runs.h"
#include "result_files.h"
#include "subprocess.h"
#include "test_paths.h"
#include "torch_paths.h"

namespace {

using opscope_test::Env;
using ::testing::HasSubstr;

namespace fs = std::filesystem;

const std::string kSource = opscope_test::paths::kSourceDir;
const std::string kMnist = kSource + "/examples/torch_mnist/main.py";

Env jobEnv(Env extra = {}) {
  extra.insert(extra.end(), {{"PYTHONPATH", std::string(torch_test::kPythonPath)},
                             {"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                             {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}});
  return extra;
}

// mpirun -np N /usr/bin/python3 ARGS..., preceded by `prefix` (e.g. `opscope run ... --`).
opscope_test::Run mpiPython(int np, const std::vector<std::string>& args, const Env& env = {},
                            std::vector<std::string> prefix = {}) {
  std::vector<std::string> argv = std::move(prefix);
  argv.insert(argv.end(), {opscope_test::paths::kMpirun, "-np", std::to_string(np), "--oversubscribe",
                           torch_test::kPython});
  argv.insert(argv.end(), args.begin(), args.end());
  return opscope_test::run(argv, jobEnv(env));
}

using opscope_test::losses;  // "step N loss X" (--print-losses)

// Every collective of the backend against hand-worked values, Work.wait() from another stream, DDP of a
// small model against the same model trained on the CPU with the global batch, and the errors a user meets
// (distributed_check.py), on 2 ranks.
TEST(TorchMluDistributed, CollectivesAndDdpOfTwoRanksGiveTheHandWorkedValues) {
  const opscope_test::Run r = mpiPython(2, {kSource + "/tests/torch_mlu/distributed_check.py"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("distributed_check: 2 ranks, 47 checks passed (17 of DDP)")) << r.out << r.err;

  // Two ranks outside an Open MPI job (the transfers need one): a clear error, not a hang.
  const opscope_test::Run alone =
      opscope_test::run({torch_test::kPython, "-c",
                         "import torch.distributed as d, torch_mlu\n"
                         "try:\n d.init_process_group('mlucl', store=d.HashStore(), rank=0, world_size=2)\n"
                         "except RuntimeError as e:\n print('error:', e)\n"},
                        {{"PYTHONPATH", std::string(torch_test::kPythonPath)}});
  EXPECT_THAT(alone.out,
              HasSubstr("error: torch_mlu: the mlucl backend moves data over Open MPI: start the 2 ranks "
                        "with `mpirun -np 2 ...` (this process is not part of an Open MPI job)"))
      << alone.out << alone.err;
}

std::vector<std::string> mnistDdpArgs(int steps) {
  return {kMnist,
          "--ddp",
          "--max-steps",
          std::to_string(steps),
          "--print-losses",
          "--no-eval",
          "--no-dropout",
          "--lr",
          "0.1",
          "--batch-size",
          "64",
          "--train-size",
          "2000"};
}

// The MNIST example's DDP on 2 ranks learns as 1 rank does with the same global batch: the same losses to
// float32 rounding (the gradients are summed in another order) over 20 steps. At the example's default
// lr 1.0, Adadelta amplifies that rounding to 1% by step 20 (docs/torch_mlu.md): the test takes lr 0.1.
TEST(TorchMluDistributed, MnistDdpOnTwoRanksLearnsLikeOneRankWithTheSameGlobalBatch) {
  constexpr int kSteps = 20;
  const opscope_test::Run one = mpiPython(1, mnistDdpArgs(kSteps));
  const opscope_test::Run two = mpiPython(2, mnistDdpArgs(kSteps));
  ASSERT_EQ(one.exit_code, 0) << one.out << one.err;
  ASSERT_EQ(two.exit_code, 0) << two.out << two.err;
  EXPECT_THAT(two.out,
              HasSubstr("data parallel: 2 ranks (backend mlucl), 32 samples of each global batch of 64"));
  const std::vector<double> a = losses(one.out), b = losses(two.out);
  ASSERT_EQ(a.size(), static_cast<std::size_t>(kSteps)) << one.out;
  ASSERT_EQ(b.size(), a.size()) << two.out;  // rank 0 alone prints
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-5 * a[i]) << "step " << i + 1;
  EXPECT_LT(b.back(), b.front() - 0.3) << "it learns: " << two.out;
  EXPECT_THAT(two.err, HasSubstr("torch_mlu: no op fell back to the CPU")) << two.err;
}

// The Llama-style example's DDP (every rank draws the global batch and takes its share of the sequences;
// AdamW, grouped-query attention): 2 ranks give 1 rank's losses to float32 rounding.
TEST(TorchMluDistributed, LlamaDdpOnTwoRanksGivesTheLossesOfOneRank) {
  const std::vector<std::string> args = {kSource + "/examples/torch_llama/main.py",
                                         "--ddp",
                                         "--steps",
                                         "10",
                                         "--kv-heads",
                                         "2",
                                         "--print-losses"};
  const opscope_test::Run one = mpiPython(1, args);
  const opscope_test::Run two = mpiPython(2, args);
  ASSERT_EQ(one.exit_code, 0) << one.out << one.err;
  ASSERT_EQ(two.exit_code, 0) << two.out << two.err;
  const std::vector<double> a = losses(one.out), b = losses(two.out);
  ASSERT_EQ(a.size(), 10u) << one.out;
  ASSERT_EQ(b.size(), a.size()) << two.out;
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-5 * a[i]) << "step " << i + 1;
  EXPECT_LT(b.back(), b.front() - 0.5) << two.out;
}

fs::path freshDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("opscope-ddp-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  return dir;
}

// The one entry of dir: the run folder of the job.
fs::path onlyEntry(const fs::path& dir) {
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(dir)) entries.push_back(e.path());
  return entries.size() == 1 ? entries[0] : fs::path();
}

// `opscope analyze|report|summary FOLDER`.
opscope_test::Run opscopeOn(const char* command, const fs::path& folder) {
  return opscope_test::run({opscope_test::paths::kOpscope, command, folder.string()});
}

std::vector<std::string> opscopeRun(const fs::path& dir, std::vector<std::string> tools = {}) {
  std::vector<std::string> argv = {opscope_test::paths::kOpscope, "run"};
  argv.insert(argv.end(), tools.begin(), tools.end());
  argv.insert(argv.end(), {"--out", dir.string(), "--"});
  return argv;
}

std::vector<std::string> mnistToolArgs(int steps) {
  return {kMnist, "--ddp",        "--max-steps", std::to_string(steps), "--no-eval", "--train-size",
          "1000", "--batch-size", "32"};
}

// Every multi-rank tool on PyTorch DDP: `opscope run --profile --memcheck` with OP_RANK_CONSISTENCY over
// mpirun -np 2 leaves one run folder of both ranks; its report merges the traces with each of DDP's
// collectives (the parameters' broadcast, the buckets' all-reduces) joined across the ranks, the flight
// recorder names the PyTorch op of each, the replicas' parameters are bit-identical after every step, and
// `opscope analyze` finds nothing wrong.
TEST(TorchMluDistributed, EveryMultiRankToolSeesDdpAndFindsItClean) {
  const fs::path dir = freshDir("tools");
  const opscope_test::Run r = mpiPython(2, mnistToolArgs(6), {{"OP_RANK_CONSISTENCY", "1"}},
                                        opscopeRun(dir, {"--profile", "--memcheck"}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.all(), HasSubstr("opscope: results of 2 ranks in "));
  const fs::path folder = onlyEntry(dir);
  ASSERT_FALSE(folder.empty()) << r.all();
  int ranks = 0;
  for (const auto& e : fs::directory_iterator(folder)) {
    ++ranks;
    for (const char* file : {"trace.json", "memcheck.json", "flight_recorder.json", "consistency.jsonl"})
      EXPECT_TRUE(fs::exists(e.path() / file)) << e.path() / file;
    // Each collective's entry names the PyTorch op that issued it.
    const std::string dump = opscope_test::readFile(e.path() / "flight_recorder.json");
    EXPECT_THAT(dump, testing::ContainsRegex(R"("framework_op": ?"c10d::allreduce_")")) << e.path();
    EXPECT_THAT(dump, testing::ContainsRegex(R"("in_backward": ?true)")) << e.path();
    EXPECT_THAT(dump, testing::ContainsRegex(R"("framework_op": ?"c10d::broadcast_")")) << e.path();
  }
  EXPECT_EQ(ranks, 2);
  EXPECT_THAT(r.all(),
              HasSubstr("opscope memcheck: 0 bytes leaked in 0 allocations from 0 sites; 0 memory errors"));

  const opscope_test::Run report = opscopeOn("report", folder);
  ASSERT_EQ(report.exit_code, 0) << report.all();
  // 6 steps of 2 buckets' all-reduces, DDP's broadcast of the parameters and its check of their shapes:
  // every one joined from rank 0 to rank 1.
  std::smatch m;
  const std::string out = report.out;
  ASSERT_TRUE(std::regex_search(
      out, m, std::regex(R"(merged trace: \S+ \((\d+) events, (\d+) collective flows across ranks)")))
      << out;
  EXPECT_GE(std::stoi(m[2]), 12 + 2) << out;
  EXPECT_THAT(out, HasSubstr("flight recorder: dumps of ranks [0,1]: no hang, failure or mismatch"));

  const opscope_test::Run analyze = opscopeOn("analyze", folder);
  EXPECT_EQ(analyze.exit_code, 0) << analyze.all();
  EXPECT_THAT(analyze.out, HasSubstr("every rank completed every collective it recorded"));
  EXPECT_THAT(
      analyze.out,
      testing::ContainsRegex(
          R"(consistency \(OP_RANK_CONSISTENCY\) of ranks \[0,1\]: [1-9][0-9]* record\(s\) compared, 0 differ)"));
  EXPECT_THAT(analyze.out, HasSubstr("verdict: no hang, failure or mismatch in the dumps"));
  fs::remove_all(dir);
}

// A hang planted in rank 1's third all-reduce (DDP's gradient bucket) ends the job by the collective
// timeout; every rank dumped, and analyze names rank 1 and the PyTorch op (in backward: DDP's bucket).
TEST(TorchMluDistributed, AHangInOneRanksBucketAllReduceIsNamedWithItsRankAndPyTorchOp) {
  const fs::path dir = freshDir("hang");
  const opscope_test::Run r = mpiPython(
      2, mnistToolArgs(10),
      {{"MLU_SIM_FAULT", "allreduce:hang@rank=1@call=3"}, {"OP_COLLECTIVE_TIMEOUT_S", "3"}}, opscopeRun(dir));
  EXPECT_NE(r.exit_code, 0) << r.all();
  EXPECT_THAT(
      r.all(),
      testing::ContainsRegex(
          R"(flight recorder: rank 1: allreduce #[0-9]+ on communicator 1 \(rank 1 of 2; [0-9]+ x float32; issued by c10d::allreduce_ during backward\) was called and has not returned)"));
  const fs::path folder = onlyEntry(dir);
  ASSERT_FALSE(folder.empty()) << r.all();
  const opscope_test::Run analyze = opscopeOn("analyze", folder);
  EXPECT_THAT(analyze.out, HasSubstr("dumps: rank(s) [0,1] of 2; missing: none")) << analyze.out;
  EXPECT_THAT(analyze.out, HasSubstr("    issued by the program's c10d::allreduce_ during backward\n"))
      << analyze.out;
  EXPECT_THAT(analyze.out, HasSubstr("    rank 1: never enqueued it: its host call never returned, in:"))
      << analyze.out;
  EXPECT_THAT(
      analyze.out,
      testing::ContainsRegex(
          R"(  communicator 1: allreduce #[0-9]+ \(issued by c10d::allreduce_ during backward\) was never enqueued by rank\(s\) 1 \(the host call never returned\); rank\(s\) 0 wait in it)"))
      << analyze.out;
  fs::remove_all(dir);
}

// A fault in one rank's optimizer (its sqrt kernels, only Adadelta's step uses them: Open MPI's app
// contexts give rank 1 alone MLU_SIM_FAULT) leaves the replicas' parameters apart; OP_RANK_CONSISTENCY
// finds it at the first step, in the optimizer's sqrt (named with its PyTorch op, the optimizer and the
// line), and keeps the call for op-replay.
TEST(TorchMluDistributed, AnOptimizerFaultOnOneRankIsFoundByTheConsistencyCheckAtItsStep) {
  const fs::path dir = freshDir("consistency");
  std::vector<std::string> args = mnistToolArgs(3);
  std::vector<std::string> second = {
      ":", "-np", "1", "-x", "MLU_SIM_FAULT=sqrt:scale=1.001", torch_test::kPython};
  second.insert(second.end(), args.begin(), args.end());
  args.insert(args.end(), second.begin(), second.end());
  const opscope_test::Run r = mpiPython(1, args, {{"OP_RANK_CONSISTENCY", "1"}}, opscopeRun(dir));
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(
      r.all(),
      testing::ContainsRegex(
          R"(rank 1: replicas differ first at step 0: the parameters written by sqrt #[0-9]+ \(record [0-9]+ of the step; in the program: aten::sqrt_ in Optimizer.step#Adadelta.step at [^ ]*examples/torch_mnist/main.py:[0-9]+ in train\))"));
  const fs::path folder = onlyEntry(dir);
  ASSERT_FALSE(folder.empty()) << r.all();
  const opscope_test::Run analyze = opscopeOn("analyze", folder);
  EXPECT_THAT(
      analyze.out,
      testing::ContainsRegex(
          R"(  replicas differ first at step 0: the parameters written by sqrt #[0-9]+ \(record [0-9]+ of the step; in the program: aten::sqrt_ in Optimizer.step#Adadelta.step)"))
      << analyze.out;
  fs::remove_all(dir);
}

// A NaN planted into rank 1's part of a DDP bucket's all-reduce (its third all-reduce: the first step's one
// bucket, the example's loss average, then step 2's first bucket) reaches both ranks' gradients alike, so no
// rank's own check can tell; the capture's check across the ranks names the transfer on each.
TEST(TorchMluDistributed, ANanPlantedInOneRanksBucketIsNamedByTheCheckAcrossRanks) {
  const fs::path dir = freshDir("nan");
  const opscope_test::Run r =
      mpiPython(2, mnistToolArgs(2), {{"MLU_SIM_FAULT", "allreduce:nan@rank=1@call=3"}},
                opscopeRun(dir, {"--capture"}));
  EXPECT_EQ(r.exit_code, 0) << r.all();
  const fs::path folder = onlyEntry(dir);
  ASSERT_FALSE(folder.empty()) << r.all();
  const opscope_test::Run summary = opscopeOn("summary", folder);
  EXPECT_THAT(summary.out, HasSubstr("1 mismatching")) << summary.out;
  for (const char* rank : {"0", "1"}) {
    EXPECT_THAT(summary.out,
                testing::ContainsRegex(std::string("MISMATCH comm 1 allreduce #[0-9]+ rank ") + rank +
                                       ": [0-9]+ of [0-9]+ elements differ from the sum of the "
                                       "ranks' inputs \\(computed in float64\\); first at element "
                                       "[0-9]+: received nan"))
        << summary.out;
  }
  fs::remove_all(dir);
}

}  // namespace
