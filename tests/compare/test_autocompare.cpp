// Auto-compare and the overflow check, run for real: libopscope.so preloaded into mnist_train, llama_train,
// a 4-thread 2-device program and the hook probe, with and without faults planted in the simulated
// library (MLU_SIM_FAULT).
#include "../support/demo_runs.h"
#include "../support/subprocess.h"
#include "../support/test_data.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include "test_paths.h"

namespace fs = std::filesystem;
using namespace opscope_test;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

struct Demo {
  std::string name;  // "mnist float32"
  std::vector<std::string> command;
};

std::string sqlite(const fs::path& db, const std::string& query) {
  const auto r = run({"/usr/bin/sqlite3", db.string(), query});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  return r.out;
}

// ---------------------------------------------------------------------------------------------------------
// No false alarms: the demos compare clean with the default tolerances, and compute exactly what they
// compute without the hook.

class NoFalseAlarms : public ::testing::TestWithParam<Demo> {};

TEST_P(NoFalseAlarms, ZeroFailingOpsAndBitIdenticalLosses) {
  const Demo& demo = GetParam();
  const auto plain = run(demo.command);
  ASSERT_EQ(plain.exit_code, 0) << plain.all();
  const auto expected = losses(plain.out);
  ASSERT_EQ(expected.size(), 20u) << plain.out;

  const fs::path root = tempDir("nofalse");
  const auto r = run(demo.command, preload({{"OP_AUTOCOMPARE", "1"}, {"OPSCOPE_RESULT_DIR", root.string()}}));
  ASSERT_EQ(r.exit_code, 0) << r.all();
  EXPECT_EQ(losses(r.out), expected);
  EXPECT_THAT(r.err, HasSubstr(" passed, 0 failed;")) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("OpAutoCompare:")));
  const fs::path dir = onlyResultDir(root);
  ASSERT_FALSE(dir.empty());
  const auto rows = readAutocompareCsv(dir / "autocompare.csv");
  EXPECT_GT(rows.size(), 500u);  // 20 steps of a few dozen ops, each with one or more tensors
  std::set<std::string> ops;
  for (const auto& row : rows) {
    EXPECT_EQ(row.verdict, "pass") << row.op << " #" << row.seq << " " << row.tensor;
    ops.insert(row.op);
  }
  EXPECT_GE(ops.size(), 12u);  // the whole op mix of the network, forward, backward and optimizer
  // Every compared op has its results in capture.db, and no tensors are stored when nothing failed.
  EXPECT_EQ(sqlite(dir / "capture.db", "SELECT count(*) FROM compare_results"),
            fmt::format("{}\n", rows.size()));
  EXPECT_EQ(sqlite(dir / "capture.db", "SELECT count(*) FROM tensor_refs"), "0\n");
  fs::remove_all(root);
}

INSTANTIATE_TEST_SUITE_P(
    Demos, NoFalseAlarms,
    ::testing::Values(
        Demo{"mnist_float32", mnistCommand(MNIST_TRAIN_PATH, 20, 4)},
        Demo{"mnist_bfloat16", mnistCommand(MNIST_TRAIN_PATH, 20, 4, "bfloat16")},
        // a class-weighted loss: nll_loss with its weight tensor, forward and backward
        Demo{"mnist_class_weights_float32",
             withArgs(mnistCommand(MNIST_TRAIN_PATH, 20, 4), {"--class-weights", "1,2,1,1,0.5,1,1,3,1,1"})},
        Demo{"llama_float32", llamaCommand(LLAMA_TRAIN_PATH, 20)},
        Demo{"llama_bfloat16", llamaCommand(LLAMA_TRAIN_PATH, 20, "bfloat16")},
        // grouped-query attention: 4 query heads on 2 key/value heads
        Demo{"llama_gqa_float32", withArgs(llamaCommand(LLAMA_TRAIN_PATH, 20), {"--kv-heads", "2"})}),
    [](const auto& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------------------
// Every planted fault is found and named: the first failing op is the faulty one. Ops after it may fail
// only because their inputs are corrupt — with values faults (scale, offset, noncontig) none does, since
// the reference runs on the very inputs the device had; with NaN, an op fed NaN may propagate it
// differently from the reference, so it may fail only with NaN in its own device output.

struct Plant {
  std::string program;  // "mnist" or "llama"
  std::string op;
};

struct Finding {
  bool found = false;  // the planted op failed and was the first failing op
  std::string first;
  std::set<std::string> others;  // other failing ops
  bool others_explained = true;  // (nan) every other failing tensor holds NaN on the device
};

Finding plantAndCompare(const std::string& kind, const Plant& plant) {
  const fs::path root = tempDir("fault");
  const auto command =
      plant.program == "mnist" ? mnistCommand(MNIST_TRAIN_PATH, 2, 4) : llamaCommand(LLAMA_TRAIN_PATH, 2);
  const auto r = run(command, preload({{"OP_AUTOCOMPARE", "1"},
                                       {"OPSCOPE_RESULT_DIR", root.string()},
                                       {"MLU_SIM_FAULT", plant.op + ":" + kind}}));
  Finding f;
  EXPECT_EQ(r.exit_code, 0) << r.all();
  const auto first = linesStartingWith(r.err, "opscope: autocompare: first failing op: ");
  if (!first.empty())
    f.first = first[0].substr(std::string("opscope: autocompare: first failing op: ").size());
  const fs::path dir = onlyResultDir(root);
  if (dir.empty()) return f;
  long long first_seq = -1;
  std::string first_op;
  for (const auto& row : readAutocompareCsv(dir / "autocompare.csv")) {
    if (row.verdict != "fail") continue;
    if (first_seq < 0 || row.seq < first_seq) {
      first_seq = row.seq;
      first_op = row.op;
    }
    if (row.op != plant.op) {
      f.others.insert(row.op);
      if (row.dev_nan == 0) f.others_explained = false;
    }
  }
  f.found = first_op == plant.op && f.first.rfind(plant.op + " #" + std::to_string(first_seq), 0) == 0;
  fs::remove_all(root);
  return f;
}

void checkMatrix(const std::string& kind, const std::vector<Plant>& plants, bool nan_spreads) {
  for (const auto& plant : plants) {
    const Finding f = plantAndCompare(kind, plant);
    // One row of the fault matrix per case (the test log keeps it).
    std::printf("fault matrix: %-6s %-9s %-40s first failing: %-48s other failing: %s\n",
                plant.program.c_str(), kind.c_str(), plant.op.c_str(), f.first.c_str(),
                fmt::format("{}", fmt::join(f.others, " ")).c_str());
    EXPECT_TRUE(f.found) << kind << " in " << plant.op << ": first failing op '" << f.first << "'";
    if (nan_spreads) {
      EXPECT_TRUE(f.others_explained) << kind << " in " << plant.op;
    } else {
      EXPECT_TRUE(f.others.empty()) << kind << " in " << plant.op << ": "
                                    << fmt::format("{}", fmt::join(f.others, " "));
    }
  }
}

const std::vector<Plant> kValueFaultOps = {
    {"mnist", "conv2d_forward"},
    {"mnist", "relu"},
    {"mnist", "max_pool2d_forward"},
    {"mnist", "linear"},
    {"mnist", "log_softmax_forward"},
    {"mnist", "conv2d_backward_filter"},
    {"mnist", "sgd_step"},
    {"llama", "rms_norm_forward"},
    {"llama", "matmul"},
    {"llama", "silu"},
    {"llama", "scaled_dot_product_attention_forward"},
    {"llama", "rope_forward"},
    {"llama", "embedding_forward"},
    {"llama", "adamw_step"},
    {"llama", "cross_entropy_backward"},
};

TEST(PlantedFaults, NanIsFoundInEveryOp) { checkMatrix("nan", kValueFaultOps, true); }
TEST(PlantedFaults, ScaleIsFoundInEveryOp) { checkMatrix("scale=1.01", kValueFaultOps, false); }
TEST(PlantedFaults, OffsetIsFoundInEveryOp) { checkMatrix("offset=1e-3", kValueFaultOps, false); }
// The ops of the demos that receive non-contiguous inputs: attention and RoPE read q, k, v as strided views
// of the fused qkv buffer; silu, mul and silu_backward read gate and up as views of the gate_up buffer.
TEST(PlantedFaults, NonContiguousInputMishandlingIsFoundInEveryOpThatHasSuch) {
  checkMatrix("noncontig",
              {{"llama", "scaled_dot_product_attention_forward"},
               {"llama", "scaled_dot_product_attention_backward"},
               {"llama", "rope_forward"},
               {"llama", "rope_backward"},
               {"llama", "silu"},
               {"llama", "mul"},
               {"llama", "silu_backward"}},
              false);
}

// ---------------------------------------------------------------------------------------------------------

TEST(AutoCompare, AFailingOpIsStoredAndOpReplayReproducesIt) {
  const fs::path root = tempDir("stored");
  const Env fault = {{"MLU_SIM_FAULT", "relu:scale=1.01"}};
  Env env = fault;
  env.emplace_back("OP_AUTOCOMPARE", "1");
  env.emplace_back("OPSCOPE_RESULT_DIR", root.string());
  const auto r = run(mnistCommand(MNIST_TRAIN_PATH, 2, 4), preload(env));
  ASSERT_EQ(r.exit_code, 0) << r.all();
  // relu runs three times a step (two convs and the hidden linear layer): six failures, printed as they
  // happen with their metrics, and summed up at exit.
  const auto lines = linesStartingWith(r.err, "OpAutoCompare: relu #");
  ASSERT_EQ(lines.size(), 6u) << r.err;
  EXPECT_THAT(lines[0], HasSubstr("output y float32  allclose: False max_abs_diff: "));
  EXPECT_THAT(lines[0], HasSubstr("max_rel_diff: 1.000e-02"));
  EXPECT_THAT(r.err, HasSubstr(" failed; details in "));
  EXPECT_THAT(r.err, HasSubstr("opscope: autocompare: first failing op: relu #"));
  const fs::path dir = onlyResultDir(root);
  ASSERT_FALSE(dir.empty());
  const fs::path db = dir / "capture.db";
  EXPECT_EQ(sqlite(db, "SELECT count(*) FROM ops WHERE captured"), "6\n");
  EXPECT_EQ(sqlite(db, "SELECT DISTINCT name FROM ops WHERE captured"), "relu\n");
  EXPECT_EQ(sqlite(db, "SELECT role, count(*) FROM tensor_refs GROUP BY role ORDER BY role"),
            "cpu_output|6\ninput|6\noutput|6\n");
  EXPECT_EQ(sqlite(db, "SELECT count(*) FROM compare_results WHERE verdict = 'fail'"), "6\n");
  EXPECT_EQ(
      sqlite(db,
             "SELECT DISTINCT arg_name, printf('%.3g', rtol) FROM compare_results WHERE verdict = 'fail'"),
      "y|0\n");  // relu is of the exact class: judged at (0, 0)
  // The captured device output is the CPU output scaled by 1.01 (NumPy-free: the largest ratio via SQL is
  // not possible on blobs, so check a size and let op-replay judge the values).
  EXPECT_EQ(
      sqlite(db,
             "SELECT count(*) FROM tensors t JOIN tensors c ON c.op_id = t.op_id AND c.role = 'cpu_output' "
             "WHERE t.role = 'output' AND t.nbytes = c.nbytes AND t.data != c.data"),
      "6\n");

  // op-replay lists only the stored ops and, on the same faulty library, its accuracy check fails.
  const auto list = run({OP_REPLAY_PATH, dir.string(), "--list"});
  ASSERT_EQ(list.exit_code, 0) << list.all();
  EXPECT_THAT(list.out, HasSubstr("relu"));
  EXPECT_THAT(list.out, Not(HasSubstr("conv2d")));
  const auto replay = run({OP_REPLAY_PATH, dir.string(), "--acc_check"}, fault);
  EXPECT_EQ(replay.exit_code, 1) << replay.all();
  EXPECT_THAT(replay.all(), HasSubstr("op-replay: relu #"));
  EXPECT_THAT(replay.all(), HasSubstr("allclose: False"));
  fs::remove_all(root);
}

// An in-place op: the stored input is the value before the op ran, not the one the op (or the reference)
// wrote over it.
TEST(AutoCompare, AFailingInPlaceOpKeepsItsInputAsItWas) {
  const fs::path root = tempDir("inplace");
  const auto r =
      run(mnistCommand(MNIST_TRAIN_PATH, 1, 4), preload({{"OP_AUTOCOMPARE", "1"},
                                                         {"OPSCOPE_RESULT_DIR", root.string()},
                                                         {"MLU_SIM_FAULT", "sgd_step:offset=1e-3"}}));
  ASSERT_EQ(r.exit_code, 0) << r.all();
  const fs::path db = onlyResultDir(root) / "capture.db";
  // 8 parameters: each failing sgd_step has param as input (before), output (device) and cpu_output, all
  // three different (lr * grad moved it; the fault moved the device's further).
  EXPECT_EQ(sqlite(db, "SELECT count(*) FROM ops WHERE captured AND name = 'sgd_step'"), "8\n");
  EXPECT_EQ(sqlite(db,
                   "SELECT count(*) FROM tensors i "
                   "JOIN tensors o ON o.op_id = i.op_id AND o.arg_name = 'param' AND o.role = 'output' "
                   "JOIN tensors c ON c.op_id = i.op_id AND c.arg_name = 'param' AND c.role = 'cpu_output' "
                   "WHERE i.role = 'input' AND i.arg_name = 'param' "
                   "AND i.data != c.data AND i.data != o.data AND o.data != c.data"),
            "8\n");
  fs::remove_all(root);
}

TEST(AutoCompare, WithCaptureOnTheResultsJoinTheCapturedRow) {
  const fs::path root = tempDir("both");
  const auto r = run(mnistCommand(MNIST_TRAIN_PATH, 1, 4), preload({{"OP_AUTOCOMPARE", "1"},
                                                                    {"OP_CAPTURE", "1"},
                                                                    {"OP_CAPTURE_LIST", "relu"},
                                                                    {"OPSCOPE_RESULT_DIR", root.string()},
                                                                    {"MLU_SIM_FAULT", "relu:offset=1e-3"}}));
  ASSERT_EQ(r.exit_code, 0) << r.all();
  const fs::path db = onlyResultDir(root) / "capture.db";
  // Each op has one row; the three captured relu calls carry their compare results and CPU outputs too.
  EXPECT_EQ(sqlite(db, "SELECT count(*) - count(DISTINCT seq) FROM ops"), "0\n");
  EXPECT_EQ(sqlite(db, "SELECT count(*) FROM ops WHERE captured"), "3\n");
  EXPECT_EQ(sqlite(db, "SELECT role, count(*) FROM tensor_refs GROUP BY role ORDER BY role"),
            "cpu_output|3\ninput|3\noutput|3\n");
  EXPECT_EQ(sqlite(db,
                   "SELECT count(*) FROM compare_results c JOIN ops o USING(op_id) WHERE o.name = 'relu' "
                   "AND c.verdict = 'fail'"),
            "3\n");
  fs::remove_all(root);
}

// In-place ops on two devices' queues at once: 4 threads each run fill, fill, add, mul_scalar (in place).
TEST(AutoCompare, InPlaceOpsOnSeveralQueues) {
  const fs::path root = tempDir("queues");
  const auto clean = run({MULTI_QUEUE_PROGRAM_PATH, "4", "10", "4096"},
                         preload({{"OP_AUTOCOMPARE", "1"}, {"OPSCOPE_RESULT_DIR", root.string()}}));
  ASSERT_EQ(clean.exit_code, 0) << clean.all();
  EXPECT_THAT(clean.err,
              HasSubstr("opscope: autocompare: 160 ops compared (240 tensors), 160 passed, 0 failed"));
  fs::remove_all(root);
  fs::create_directories(root);
  const auto faulty =
      run({MULTI_QUEUE_PROGRAM_PATH, "4", "10", "4096"}, preload({{"OP_AUTOCOMPARE", "1"},
                                                                  {"OPSCOPE_RESULT_DIR", root.string()},
                                                                  {"MLU_SIM_FAULT", "mul_scalar:offset=1"}}));
  EXPECT_EQ(faulty.exit_code, 1);  // the program's own result check sees the fault
  const auto rows = readAutocompareCsv(onlyResultDir(root) / "autocompare.csv");
  std::map<std::string, std::pair<int, int>> verdicts;  // op -> (passed, failed)
  for (const auto& row : rows) (row.verdict == "pass" ? verdicts[row.op].first : verdicts[row.op].second)++;
  // Every compared mul_scalar fails: 4 threads x 10 rounds.
  EXPECT_EQ(verdicts["mul_scalar"].first, 0);
  EXPECT_EQ(verdicts["mul_scalar"].second, 40);
  EXPECT_EQ(verdicts["add"].second, 0);
  EXPECT_EQ(verdicts["fill"].second, 0);
  fs::remove_all(root);
}

// A non-contiguous view: the probe's add reads every other element of a 2x8 buffer. Its inputs are checked
// to be unchanged too.
TEST(AutoCompare, NonContiguousInputs) {
  const fs::path root = tempDir("strided");
  const auto clean =
      run({HOOK_PROBE_PATH, "ops"},
          preload({{"OP_AUTOCOMPARE", "1"}, {"OP_DUMP_ARGS", "1"}, {"OPSCOPE_RESULT_DIR", root.string()}}));
  ASSERT_EQ(clean.exit_code, 0) << clean.all();
  EXPECT_THAT(clean.err, HasSubstr("OpAutoCompare: add #2 output c float32  allclose: True"));
  EXPECT_THAT(clean.err, HasSubstr("OpAutoCompare: add #2 input a float32  allclose: True"));
  EXPECT_THAT(clean.err, HasSubstr("OpAutoCompare: add #2 input b float32  allclose: True"));
  fs::remove_all(root);
  fs::create_directories(root);
  const auto faulty = run({HOOK_PROBE_PATH, "ops"}, preload({{"OP_AUTOCOMPARE", "1"},
                                                             {"OPSCOPE_RESULT_DIR", root.string()},
                                                             {"MLU_SIM_FAULT", "add:noncontig"}}));
  ASSERT_EQ(faulty.exit_code, 0) << faulty.all();
  EXPECT_THAT(faulty.err, HasSubstr("OpAutoCompare: add #2 output c float32  allclose: False"));
  EXPECT_THAT(faulty.err, HasSubstr("opscope: autocompare: first failing op: add #2 (output c)"));
  fs::remove_all(root);
}

TEST(OverflowCheck, NamesTheOpWhereAPlantedNanFirstAppears) {
  const fs::path root = tempDir("overflow");
  const auto clean = run(mnistCommand(MNIST_TRAIN_PATH, 2, 4), preload({{"OP_OVERFLOW_CHECK", "1"}}));
  ASSERT_EQ(clean.exit_code, 0) << clean.all();
  EXPECT_THAT(clean.err, HasSubstr("opscope: overflow: no op produced NaN or Inf from finite inputs"));
  for (const std::string op : {"relu", "linear"}) {
    const auto r = run(mnistCommand(MNIST_TRAIN_PATH, 2, 4),
                       preload({{"OP_OVERFLOW_CHECK", "1"}, {"MLU_SIM_FAULT", op + ":nan@0.01"}}));
    ASSERT_EQ(r.exit_code, 0) << r.all();
    const auto first =
        linesStartingWith(r.err, "opscope: overflow: NaN/Inf first appears in the outputs of ");
    ASSERT_EQ(first.size(), 1u) << r.err;
    EXPECT_THAT(first[0], HasSubstr("outputs of " + op + " #"));
    EXPECT_THAT(r.err, HasSubstr("the first: " + op + " #"));
    // With the op's arguments and what its outputs held.
    EXPECT_THAT(r.err, HasSubstr("opscope:   output y: "));
    EXPECT_THAT(r.err, HasSubstr("opscope:   in        x: float32["));
  }
  fs::remove_all(root);
}

// A causal mask as GPT-style attention makes it (hook_probe mask: a fill with -inf, then an add reading it)
// is asked for its infinities: neither the overflow check nor the statistics capture names it. The real
// overflow after it (3e38 + 2 x 3e38 in float32, op #5) is what both name, and its call is kept whole.
TEST(OverflowCheck, AFillWithInfinityIsAskedForAndNotAnOverflow) {
  const fs::path root = tempDir("overflow_mask");
  const auto r = run({HOOK_PROBE_PATH, "mask"}, preload({{"OP_OVERFLOW_CHECK", "1"},
                                                         {"OP_CAPTURE", "1"},
                                                         {"OP_CAPTURE_MODE", "stats"},
                                                         {"OPSCOPE_RESULT_DIR", root.string()}}));
  ASSERT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.err,
              HasSubstr("opscope: overflow: NaN/Inf first appears in the outputs of add #5 (mluopAdd"));
  EXPECT_THAT(r.err, HasSubstr("opscope: overflow: 1 op call wrote the NaN/Inf a scalar argument asked for"));
  EXPECT_THAT(
      r.err,
      HasSubstr("opscope: overflow: 1 op call produced NaN/Inf from finite inputs; the first: add #5"));
  EXPECT_THAT(r.err, HasSubstr("whole tensors of 1 ops kept around 1 trigger"));
  const opscope_test::Run summary = run({OPSCOPE_PATH, "summary", onlyResultDir(root).string()});
  EXPECT_THAT(summary.out, HasSubstr("first NaN/Inf in the outputs of add #5")) << summary.out;
  EXPECT_THAT(summary.out, HasSubstr("--seq 5 --acc_check")) << summary.out;
  fs::remove_all(root);
}

TEST(AutoCompareConfig, MalformedTolerancesStopTheProgramBeforeMain) {
  const std::vector<std::pair<Env, std::string>> cases = {
      {{{"AUTOCOMPARE_ERROR_TOLERANCE", "1e-5"}}, "AUTOCOMPARE_ERROR_TOLERANCE"},
      {{{"AUTOCOMPARE_ERROR_TOLERANCE_FLOAT32", "1e-5,x"}}, "AUTOCOMPARE_ERROR_TOLERANCE_FLOAT32"},
      {{{"AUTOCOMPARE_ERROR_TOLERANCE_FLOAT8", "1e-5,1e-5"}}, "unknown dtype 'FLOAT8'"},
      {{{"CONV2D_FORWARD_AUTOCOMPARE_ERROR_TOLERANCE_COMPLEX64", "1,1"}},
       "CONV2D_FORWARD_AUTOCOMPARE_ERROR_TOLERANCE_COMPLEX64"},
      {{{"OP_AUTOCOMPARE_VERDICT", "ratio"}},
       "OP_AUTOCOMPARE_VERDICT: 'ratio' is not a verdict (use class or tolerance)"},
      {{{"OP_DTYPE_CAST", "fp32:fp16"}}, "OP_DTYPE_CAST: 'fp32:fp16' does not cast fp16 or bf16"},
      {{{"OP_DTYPE_CAST", "bf16:fp16"}}, "OP_DTYPE_CAST: 'bf16:fp16' does not cast to fp32"},
      {{{"OP_DTYPE_CAST", " , "}}, "OP_DTYPE_CAST: no cast given"},
  };
  for (auto [env, message] : cases) {
    env.emplace_back("OP_AUTOCOMPARE", "1");
    const auto r = run({HOOK_PROBE_PATH}, preload(env));
    EXPECT_EQ(r.exit_code, 2) << message << "\n" << r.all();
    EXPECT_THAT(r.err, HasSubstr(message));
    EXPECT_THAT(r.out, Not(HasSubstr("main ran")));
  }
}

TEST(AutoCompareConfig, AToleranceVariableDecidesTheVerdict) {
  // offset=1e-3 on relu fails at float32's default (1e-5, 1e-5), also when that is set explicitly for the
  // dtype, and passes once relu's own float32 tolerance allows it: op+dtype wins over dtype.
  for (const bool own : {false, true}) {
    const fs::path root = tempDir("tol");
    Env env = {{"OP_AUTOCOMPARE", "1"},
               {"OPSCOPE_RESULT_DIR", root.string()},
               {"MLU_SIM_FAULT", "relu:offset=1e-3"},
               {"AUTOCOMPARE_ERROR_TOLERANCE_FLOAT32", "1e-5,1e-5"}};
    if (own) env.emplace_back("RELU_AUTOCOMPARE_ERROR_TOLERANCE_FLOAT32", "2e-3,0");
    const auto r = run(mnistCommand(MNIST_TRAIN_PATH, 1, 4), preload(env));
    ASSERT_EQ(r.exit_code, 0) << r.all();
    if (own) {
      EXPECT_THAT(r.err, HasSubstr(" passed, 0 failed;")) << r.err;
    } else {
      EXPECT_EQ(linesStartingWith(r.err, "OpAutoCompare: relu #").size(), 3u) << r.err;
    }
    fs::remove_all(root);
  }
}

// A fault of one part in a million on 1% of relu's outputs: within float32's tolerance (1e-5), so only the
// exact class's verdict (the default) sees it, and op-replay --acc_check, in the same environment, judges
// the stored call the same way. OP_AUTOCOMPARE_VERDICT=tolerance judges as before the classes.
TEST(AutoCompareVerdict, AnExactOpMustMatchTheReferenceExactly) {
  const Env fault = {{"MLU_SIM_FAULT", "relu:scale=1.000001@0.01"}};
  for (const bool tolerance_only : {false, true}) {
    const fs::path root = tempDir("verdict");
    Env env = fault;
    env.emplace_back("OP_AUTOCOMPARE", "1");
    env.emplace_back("OPSCOPE_RESULT_DIR", root.string());
    if (tolerance_only) env.emplace_back("OP_AUTOCOMPARE_VERDICT", "tolerance");
    const auto r = run(mnistCommand(MNIST_TRAIN_PATH, 2, 16), preload(env));
    ASSERT_EQ(r.exit_code, 0) << r.all();
    const fs::path dir = onlyResultDir(root);
    ASSERT_FALSE(dir.empty());
    std::set<std::string> failing;
    double relu_max_ulp = 0;
    for (const auto& row : readAutocompareCsv(dir / "autocompare.csv")) {
      if (row.op == "relu" && row.tensor == "output y") {
        EXPECT_EQ(row.op_class, "exact");
        relu_max_ulp = std::max(relu_max_ulp, row.max_ulp);
      }
      if (row.verdict == "fail") failing.insert(row.op);
    }
    // 1e-6 relative is 8 to 17 float32 ULPs, whatever the verdict.
    EXPECT_GE(relu_max_ulp, 8);
    EXPECT_LE(relu_max_ulp, 17);
    if (tolerance_only) {
      EXPECT_THAT(r.err, HasSubstr(" passed, 0 failed;")) << r.err;
    } else {
      EXPECT_EQ(failing, std::set<std::string>{"relu"});
      EXPECT_THAT(r.err, HasSubstr("opscope: autocompare: first failing op: relu #")) << r.err;
      Env replay_env = fault;
      const auto replay = run({OP_REPLAY_PATH, dir.string(), "--acc_check"}, replay_env);
      EXPECT_EQ(replay.exit_code, 1) << replay.all();
      EXPECT_THAT(replay.all(), HasSubstr("allclose: False"));
      replay_env.emplace_back("OP_AUTOCOMPARE_VERDICT", "tolerance");
      const auto lenient = run({OP_REPLAY_PATH, dir.string(), "--acc_check"}, replay_env);
      EXPECT_EQ(lenient.exit_code, 0) << lenient.all();
      replay_env.back().second = "strict";
      const auto bad = run({OP_REPLAY_PATH, dir.string(), "--acc_check"}, replay_env);
      EXPECT_NE(bad.exit_code, 0);
      EXPECT_THAT(bad.err, HasSubstr("OP_AUTOCOMPARE_VERDICT: 'strict' is not a verdict"));
    }
    fs::remove_all(root);
  }
}

// Faults a dtype's tolerance let through, each now the first failing op and the only one: about 800 float32
// ULPs on 5% of a weight gradient (its values are small, so float32's atol 1e-5 hid 1e-4 of them), and 1% on
// 5% of a bfloat16 linear's outputs (bfloat16's rtol is 1e-2). A reduction is judged by ULPs of its dtype
// plus a share of its output's RMS (compare/src/tolerance.cpp).
TEST(AutoCompareVerdict, ReductionsAreJudgedInUlpsAndTheirOutputsRms) {
  struct Case {
    std::vector<std::string> command;
    std::string fault, op;
  };
  const std::vector<Case> cases = {
      {mnistCommand(MNIST_TRAIN_PATH, 2, 32), "conv2d_backward_filter:scale=1.0001@0.05",
       "conv2d_backward_filter"},
      {llamaCommand(LLAMA_TRAIN_PATH, 2, "bfloat16"), "linear:scale=1.01@0.05", "linear"},
  };
  for (const Case& c : cases) {
    for (const bool tolerance_only : {false, true}) {
      const fs::path root = tempDir("reduction");
      Env env = {{"OP_AUTOCOMPARE", "1"}, {"OPSCOPE_RESULT_DIR", root.string()}, {"MLU_SIM_FAULT", c.fault}};
      if (tolerance_only) env.emplace_back("OP_AUTOCOMPARE_VERDICT", "tolerance");
      const auto r = run(c.command, preload(env));
      ASSERT_EQ(r.exit_code, 0) << r.all();
      std::set<std::string> failing;
      for (const auto& row : readAutocompareCsv(onlyResultDir(root) / "autocompare.csv")) {
        if (row.op == c.op) {
          EXPECT_EQ(row.op_class, "reduction");
        }
        if (row.verdict == "fail") failing.insert(row.op);
      }
      if (tolerance_only) {
        EXPECT_TRUE(failing.empty()) << c.fault << ": " << fmt::format("{}", fmt::join(failing, " "));
      } else {
        EXPECT_EQ(failing, std::set<std::string>{c.op}) << c.fault;
        EXPECT_THAT(r.err, HasSubstr("opscope: autocompare: first failing op: " + c.op + " #")) << r.err;
        EXPECT_THAT(r.err, HasSubstr(" ulps: ")) << r.err;  // the bound said on the failure lines
      }
      fs::remove_all(root);
    }
  }
}

// OP_DTYPE_CAST heals a fault planted in bfloat16 calls of linear alone (MLU_SIM_FAULT's /bfloat16): run in
// float32 on the device, linear never meets it, and auto-compare, judging the cast-back outputs in
// bfloat16, passes every op; run.json and the end-of-run lines say which ops ran cast, how often.
TEST(DtypeCast, ItHealsAFaultPlantedInTheDtypeItCastsAndSaysWhichOpsRanCast) {
  const Env fault = {{"OP_AUTOCOMPARE", "1"}, {"MLU_SIM_FAULT", "linear/bfloat16:scale=1.01@0.05"}};
  struct Case {
    std::string dtype;
    Env extra;
    bool fails;
  };
  const std::vector<Case> cases = {
      {"bfloat16", {}, true},
      {"bfloat16", {{"OP_DTYPE_CAST", "bf16:fp32"}, {"OP_DTYPE_CAST_LIST", "linear"}}, false},
      // The fault is a bfloat16 one: a float32 run never meets it.
      {"float32", {}, false},
  };
  for (const Case& c : cases) {
    const fs::path root = tempDir("cast");
    Env env = fault;
    env.emplace_back("OPSCOPE_RESULT_DIR", root.string());
    env.insert(env.end(), c.extra.begin(), c.extra.end());
    const auto r = run(llamaCommand(LLAMA_TRAIN_PATH, 2, c.dtype), preload(env));
    ASSERT_EQ(r.exit_code, 0) << r.all();
    const fs::path dir = onlyResultDir(root);
    ASSERT_FALSE(dir.empty());
    std::set<std::string> failing;
    for (const auto& row : readAutocompareCsv(dir / "autocompare.csv"))
      if (row.verdict == "fail") failing.insert(row.op);
    EXPECT_EQ(failing, c.fails ? std::set<std::string>{"linear"} : std::set<std::string>{}) << c.dtype << "\n"
                                                                                            << r.err;
    std::ifstream in(dir / "run.json");
    const nlohmann::json run_json = nlohmann::json::parse(in, nullptr, false);
    ASSERT_TRUE(run_json.is_object());
    if (c.extra.empty()) {
      EXPECT_FALSE(run_json["findings"].contains("dtype cast"));
    } else {
      // 2 steps of the demo: 66 linear calls (3 per attention block, forward and backward, and the head).
      EXPECT_THAT(r.err, HasSubstr("opscope: dtype cast: 1 op ran in a wider dtype on the device"));
      EXPECT_THAT(r.err,
                  ::testing::ContainsRegex("opscope:   linear +[0-9]+ calls in float32 instead of bfloat16"));
      const nlohmann::json& ops = run_json["findings"]["dtype cast"]["ops"];
      ASSERT_EQ(ops.size(), 1u) << run_json.dump();
      EXPECT_EQ(ops[0]["op"], "linear");
      EXPECT_EQ(ops[0]["from"], "bfloat16");
      EXPECT_EQ(ops[0]["to"], "float32");
      EXPECT_GT(ops[0]["calls"].get<int>(), 10);
      const auto summary = run({OPSCOPE_PATH, "summary", dir.string()});
      EXPECT_EQ(summary.exit_code, 0) << summary.all();
      EXPECT_THAT(summary.out,
                  HasSubstr("Dtype cast (OP_DTYPE_CAST): 1 op ran on the device in a wider dtype"));
      EXPECT_THAT(summary.out, HasSubstr("(linear ran in float32 by OP_DTYPE_CAST"));
    }
    fs::remove_all(root);
  }
  // The launcher's flags set the same variables.
  const fs::path root = tempDir("cast_flags");
  const auto r = run(withArgs({OPSCOPE_PATH, "run", "--out", root.string(), "--dtype-cast=bf16:fp32",
                               "--dtype-cast-list=linear", "--perturb=linear", "--"},
                              llamaCommand(LLAMA_TRAIN_PATH, 1, "bfloat16")));
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.err, HasSubstr("opscope: option OP_DTYPE_CAST=bf16:fp32"));
  EXPECT_THAT(r.err, HasSubstr("opscope: option OP_PERTURB=1"));
  EXPECT_THAT(r.err,
              ::testing::ContainsRegex("opscope:   linear +[0-9]+ calls in float32 instead of bfloat16"));
  EXPECT_THAT(r.err, HasSubstr(" 0 flagged;"));
  fs::remove_all(root);
}

// OP_AUTOCOMPARE_SAMPLE=first:2 compares the first 2 calls of each op signature: a fault planted in every
// linear call is still found, and stderr, run.json and the summary say what was compared and skipped.
// OP_CAPTURE_SAMPLE=steps:1-1 captures step 1's calls and no other: one unbroken run of call numbers, a
// fraction of the unsampled capture's calls.
TEST(Sampling, ASampledRunStillFindsAPlantedFaultAndSaysWhatItSkipped) {
  {
    const fs::path root = tempDir("sample_compare");
    const auto r = run(llamaCommand(LLAMA_TRAIN_PATH, 4), preload({{"OP_AUTOCOMPARE", "1"},
                                                                   {"OP_AUTOCOMPARE_SAMPLE", "first:2"},
                                                                   {"MLU_SIM_FAULT", "linear:scale=1.01"},
                                                                   {"OPSCOPE_RESULT_DIR", root.string()}}));
    ASSERT_EQ(r.exit_code, 0) << r.all();
    const fs::path dir = onlyResultDir(root);
    ASSERT_FALSE(dir.empty());
    std::set<std::string> failing;
    std::set<long long> seqs;
    for (const auto& row : readAutocompareCsv(dir / "autocompare.csv")) {
      seqs.insert(row.seq);
      if (row.verdict == "fail") failing.insert(row.op);
    }
    EXPECT_EQ(failing, std::set<std::string>{"linear"}) << r.err;
    std::ifstream in(dir / "run.json");
    const nlohmann::json run_json = nlohmann::json::parse(in, nullptr, false);
    ASSERT_TRUE(run_json.is_object());
    const nlohmann::json& sampled = run_json["findings"]["autocompare"]["sampled"];
    ASSERT_TRUE(sampled.is_object()) << run_json.dump();
    EXPECT_EQ(sampled["sample"], "first:2");
    EXPECT_EQ(sampled["taken"].get<std::size_t>(), seqs.size());
    EXPECT_GT(sampled["skipped"].get<std::size_t>(), 2 * seqs.size());  // 4 steps: most calls repeat
    EXPECT_EQ(sampled["steps"], 4);
    // Each signature's first 2 calls: at most twice as many calls as signatures.
    EXPECT_LE(sampled["taken"].get<std::size_t>(), 2 * sampled["signatures"].get<std::size_t>());
    EXPECT_THAT(r.err,
                ::testing::ContainsRegex("opscope: autocompare: OP_AUTOCOMPARE_SAMPLE=first:2 \\(the "
                                         "first 2 calls of each op signature\\): [0-9]+ calls compared, "
                                         "[0-9]+ not \\([0-9]+ op signatures, 4 steps\\)"));
    const auto summary = run({OPSCOPE_PATH, "summary", dir.string()});
    EXPECT_EQ(summary.exit_code, 0) << summary.all();
    EXPECT_THAT(summary.out,
                HasSubstr("  sampled (OP_AUTOCOMPARE_SAMPLE=first:2): the first 2 calls of each op "
                          "signature; "));
    EXPECT_THAT(summary.out, Not(HasSubstr("\"sampled\"")));  // not also as another tool's findings
    fs::remove_all(root);
  }
  std::map<std::string, std::vector<long long>> captured;  // sample -> the captured calls' numbers
  std::map<std::string, nlohmann::json> findings;
  for (const std::string sample : {"", "steps:1-1"}) {
    const fs::path root = tempDir("sample_capture");
    Env env = {{"OP_CAPTURE", "1"}, {"OPSCOPE_RESULT_DIR", root.string()}};
    if (!sample.empty()) env.emplace_back("OP_CAPTURE_SAMPLE", sample);
    const auto r = run(llamaCommand(LLAMA_TRAIN_PATH, 3), preload(env));
    ASSERT_EQ(r.exit_code, 0) << r.all();
    const fs::path dir = onlyResultDir(root);
    std::istringstream seqs(sqlite(dir / "capture.db", "SELECT seq FROM ops ORDER BY seq"));
    for (long long seq = 0; seqs >> seq;) captured[sample].push_back(seq);
    std::ifstream in(dir / "run.json");
    findings[sample] = nlohmann::json::parse(in, nullptr, false)["findings"];
    fs::remove_all(root);
  }
  const auto& all = captured[""];
  const auto& step1 = captured["steps:1-1"];
  ASSERT_FALSE(step1.empty());
  EXPECT_LT(3 * step1.size(), all.size() + all.size() / 4) << "about a third of 3 steps' calls";
  EXPECT_EQ(step1.back() - step1.front() + 1, static_cast<long long>(step1.size())) << "one unbroken step";
  EXPECT_FALSE(findings[""].contains("capture"));
  const nlohmann::json& sampled = findings["steps:1-1"]["capture"]["sampled"];
  EXPECT_EQ(sampled["taken"].get<std::size_t>(), step1.size());
  EXPECT_EQ(sampled["taken"].get<std::size_t>() + sampled["skipped"].get<std::size_t>(), all.size());
  EXPECT_EQ(sampled["what"], "step 1");
}

// OP_PERTURB=1: every op of a clean program passes each perturbation (noise, bitflip, upcast for the half
// dtypes, swap for add and maximum), and a softmax planted to sum in its storage dtype without the
// max-subtraction (MLU_SIM_FAULT=softmax_forward:unstable) is flagged in float16 and bfloat16 by the
// upcast, with no reference at all; the disable list leaves it unchecked.
TEST(Perturb, ItFlagsAnUnstableSoftmaxAndNothingInACleanProgram) {
  struct Case {
    Env env;
    std::set<std::string> flagged;  // "op dtype perturbation"
  };
  const std::vector<Case> cases = {
      {{}, {}},
      {{{"MLU_SIM_FAULT", "softmax_forward:unstable"}},
       {"softmax_forward float16 upcast", "softmax_forward bfloat16 upcast"}},
      {{{"MLU_SIM_FAULT", "softmax_forward:unstable"}, {"OP_PERTURB_DISABLE_LIST", "softmax_forward"}}, {}},
  };
  for (const Case& c : cases) {
    const fs::path root = tempDir("perturb");
    Env env = c.env;
    env.emplace_back("OP_PERTURB", "1");
    env.emplace_back("OPSCOPE_RESULT_DIR", root.string());
    const auto r = run({SOFTMAX_ROWS_PATH}, preload(env));
    ASSERT_EQ(r.exit_code, 0) << r.all();
    const fs::path dir = onlyResultDir(root);
    ASSERT_FALSE(dir.empty());
    std::ifstream csv(dir / "perturb.csv");
    std::string line;
    std::getline(csv, line);
    EXPECT_THAT(line, ::testing::StartsWith("seq,op,perturbation,tensor,dtype,shape,input_change,"));
    std::set<std::string> flagged, kinds;
    while (std::getline(csv, line)) {
      std::vector<std::string> f(1);  // the fields; a quoted one ("[64, 1024]") holds commas
      bool quoted = false;
      for (const char ch : line) {
        if (ch == '"') {
          quoted = !quoted;
        } else if (ch == ',' && !quoted) {
          f.emplace_back();
        } else {
          f.back() += ch;
        }
      }
      ASSERT_GE(f.size(), 15u) << line;
      kinds.insert(f[2]);
      if (f[12] == "flagged") flagged.insert(f[1] + " " + f[4] + " " + f[2]);
    }
    EXPECT_EQ(flagged, c.flagged) << r.err;
    EXPECT_EQ(kinds, (std::set<std::string>{"noise", "bitflip", "upcast", "swap"}));
    // 4 ops in each of 3 dtypes, less the disabled softmax_forward.
    const int checked = c.env.size() > 1 ? 9 : 12;
    EXPECT_THAT(r.err, HasSubstr(fmt::format("opscope: perturb: {} ops checked", checked))) << r.err;
    if (!c.flagged.empty()) {
      EXPECT_THAT(r.err, HasSubstr("OpPerturb: softmax_forward #"));
      EXPECT_THAT(r.err, HasSubstr("it computes with less precision than its dtype allows"));
      EXPECT_THAT(r.err,
                  HasSubstr("opscope: perturb: first flagged op: softmax_forward #4 (upcast, output y)"));
      std::ifstream in(dir / "run.json");
      const nlohmann::json run_json = nlohmann::json::parse(in, nullptr, false);
      ASSERT_TRUE(run_json.is_object());
      EXPECT_EQ(run_json["findings"]["perturbation check"]["flagged"], 2);
      const auto summary = run({OPSCOPE_PATH, "summary", dir.string()});
      EXPECT_EQ(summary.exit_code, 0) << summary.all();
      EXPECT_THAT(summary.out, HasSubstr("Perturbation check (OP_PERTURB): 12 ops checked"));
      EXPECT_THAT(summary.out,
                  HasSubstr("UNSTABLE OPS: 2 op checks flagged by the perturbation check; first: "
                            "softmax_forward #4 (upcast, output y)"));
    } else {
      EXPECT_THAT(r.err, HasSubstr(" 0 flagged;"));
      const auto summary = run({OPSCOPE_PATH, "summary", dir.string()});
      EXPECT_THAT(summary.out, HasSubstr("  stability: the "));
    }
    fs::remove_all(root);
  }
}

}  // namespace
