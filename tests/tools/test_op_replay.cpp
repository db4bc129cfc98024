// op-replay and the opscope launcher run as programs: bad input gives one clear line and the documented exit
// status; --export-npy writes files NumPy loads; `opscope run` captures a real program and forwards its
// exit status.
#include "../support/subprocess.h"
#include "../support/test_data.h"

#include <opscope/rundb/writer.h>

#include <mlu/dtype.h>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include "test_paths.h"

namespace fs = std::filesystem;
using namespace opscope::rundb;
using opscope_test::bytesOf;
using opscope_test::linesStartingWith;
using opscope_test::run;
using opscope_test::tempDir;
using ::testing::HasSubstr;

namespace {

// A copy op (y = x) of one dtype and shape: replaying it reproduces y bit for bit.
CapturedOp copyOp(std::uint64_t seq, mluopDataType_t dtype, std::vector<std::int64_t> shape,
                  std::vector<std::byte> data) {
  CapturedOp op;
  op.seq = seq;
  op.op = mlu::OpId::copy;
  op.name = "copy";
  op.symbol = "mluopCopy";
  for (const char* role : {"input", "output"}) {
    TensorRecord t;
    t.role = role;
    t.arg_index = role[0] == 'i' ? 0 : 1;
    t.arg_name = role[0] == 'i' ? "x" : "y";
    t.dtype = dtype;
    t.shape = shape;
    t.strides.assign(shape.size(), 1);
    for (std::size_t i = shape.size() - 1; i-- > 0;) t.strides[i] = t.strides[i + 1] * shape[i + 1];
    t.data.assign(data.begin(), data.end());
    op.tensors.push_back(std::move(t));
  }
  return op;
}

// A small capture with four dtypes.
std::string makeCapture(const fs::path& dir) {
  const std::string path = (dir / "capture.db").string();
  auto writer = CaptureWriter::open(path, RunRecord{}, std::uint64_t{1} << 30);
  std::vector<std::uint16_t> bf16, f16;
  for (float v : {1.5f, -2.0f, 0.25f, 3.0f, -0.5f, 8.0f}) {
    bf16.push_back(mlu::floatToBfloat16(v));
    f16.push_back(mlu::floatToHalf(v));
  }
  writer->submit(copyOp(1, MLUOP_DTYPE_BFLOAT16, {2, 3}, bytesOf(bf16)));
  writer->submit(copyOp(2, MLUOP_DTYPE_HALF, {6}, bytesOf(f16)));
  writer->submit(copyOp(3, MLUOP_DTYPE_INT64, {3}, bytesOf(std::vector<std::int64_t>{-7, 0, 1LL << 40})));
  writer->submit(copyOp(4, MLUOP_DTYPE_BOOL, {2, 2}, bytesOf(std::vector<std::uint8_t>{1, 0, 0, 1})));
  writer->close();
  return path;
}

}  // namespace

TEST(OpReplay, ReplaysListsAndChecksASmallCapture) {
  const fs::path dir = tempDir("replay");
  const std::string db = makeCapture(dir);
  const auto list = run({OP_REPLAY_PATH, db, "--list"});
  EXPECT_EQ(list.exit_code, 0) << list.all();
  EXPECT_THAT(list.out, HasSubstr("copy                         x bfloat16[2,3]"));
  EXPECT_THAT(list.out, HasSubstr("4 ops in"));
  const auto r = run({OP_REPLAY_PATH, db, "--acc-check", "--run_times", "2", "--sync-time-measure"});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_EQ(linesStartingWith(r.out, "SyncExecuteTimer: copy elapsed ").size(), 8u);
  EXPECT_THAT(r.out, HasSubstr("op-replay: copy #1 output y bfloat16[2,3]: bit-identical to the capture"));
  // integer and bool outputs: exact match counts (the CPU reference against the device)
  EXPECT_THAT(r.out, HasSubstr("op-replay: copy #3 output y  exact: True mismatched: 0/3 max_abs_diff: 0"));
  EXPECT_THAT(r.out, HasSubstr("op-replay: copy #4 output y  exact: True mismatched: 0/4"));
  EXPECT_THAT(r.out, HasSubstr("op-replay: copy #1 output y  allclose: True"));
  EXPECT_THAT(r.out,
              HasSubstr("replayed 4 ops: 4 of 4 outputs bit-identical to the capture, 0 failed checks"));
  const auto one = run({OP_REPLAY_PATH, db, "--op_id=2", "--device", "cpu"});
  EXPECT_EQ(one.exit_code, 0) << one.all();
  EXPECT_THAT(one.out, HasSubstr("replayed 1 ops"));
  const auto named = run({OP_REPLAY_PATH, dir.string(), "--name", "co.y"});
  EXPECT_THAT(named.out, HasSubstr("replayed 4 ops"));
  fs::remove_all(dir);
}

TEST(OpReplay, ExportedNpyFilesLoadInNumPy) {
  const fs::path dir = tempDir("npy");
  const std::string db = makeCapture(dir);
  const auto r = run({OP_REPLAY_PATH, db, "--export-npy", (dir / "npy").string()});
  ASSERT_EQ(r.exit_code, 0) << r.all();
  const std::string script = R"PY(
import sys, numpy as np
d = sys.argv[1]
a = np.load(d + "/1_copy_input_x_bf16_as_f32.npy"); assert a.dtype == np.float32 and a.shape == (2, 3), (a.dtype, a.shape)
assert a.tolist() == [[1.5, -2.0, 0.25], [3.0, -0.5, 8.0]], a
h = np.load(d + "/2_copy_output_y.npy"); assert h.dtype == np.float16 and h.shape == (6,)
assert h.tolist() == [1.5, -2.0, 0.25, 3.0, -0.5, 8.0]
i = np.load(d + "/3_copy_input_x.npy"); assert i.dtype == np.int64 and i.tolist() == [-7, 0, 1 << 40]
b = np.load(d + "/4_copy_output_y.npy"); assert b.dtype == np.bool_ and b.tolist() == [[True, False], [False, True]]
print("npy ok")
)PY";
  std::ofstream(dir / "check.py") << script;
  const auto check = run({"/usr/bin/python3", (dir / "check.py").string(), (dir / "npy").string()});
  EXPECT_EQ(check.exit_code, 0) << check.all();
  EXPECT_THAT(check.out, HasSubstr("npy ok"));
  fs::remove_all(dir);
}

TEST(OpReplay, BadInputGivesOneClearLineAndTheDocumentedStatus) {
  const fs::path dir = tempDir("bad");
  const std::string db = makeCapture(dir);
  std::ofstream(dir / "notes.txt") << std::string(200, 'x');
  fs::copy_file(db, dir / "half.db");
  fs::resize_file(dir / "half.db", fs::file_size(db) / 2);
  struct Case {
    std::vector<std::string> args;
    int status;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{(dir / "missing.db").string()}, 3, "missing.db': no such file"},
      {{(dir / "notes.txt").string()}, 3, "is not an SQLite database"},
      {{(dir / "half.db").string()}, 3, "is truncated"},
      {{db, "--op-id", "99"}, 3, "has no op with id 99"},
      {{db, "--bogus"}, 2, "unknown option '--bogus'"},
      {{db, "--run_times", "0"}, 2, "--run_times: '0' is not a whole number >= 1"},
      {{db, "--run_times"}, 2, "--run-times needs a value"},
      {{db, "--device", "gpu"}, 2, "--device: 'gpu' is not mlu or cpu"},
      {{db, "--name", "copy("}, 2, "--name: invalid regular expression"},
      {{}, 2, "no database given"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {OP_REPLAY_PATH};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const auto r = run(argv);
    EXPECT_EQ(r.exit_code, c.status) << c.message << "\n" << r.all();
    const auto lines = linesStartingWith(r.err, "op-replay: ");
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_THAT(lines[0], HasSubstr(c.message));
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  fs::remove_all(dir);
}

TEST(OpReplay, AccuracyCheckFindsAPlantedFault) {
  // The program's adds are captured from a device with a planted systematic error (every output x 1.01).
  const fs::path dir = tempDir("fault");
  const auto r = run({HOOK_PROBE_PATH, "ops"}, {{"LD_PRELOAD", LIBOPSCOPE_PATH},
                                                {"OP_CAPTURE", "1"},
                                                {"OP_CAPTURE_LIST", "add"},
                                                {"OPSCOPE_RESULT_DIR", dir.string()},
                                                {"MLU_SIM_FAULT", "add:scale=1.01"}});
  ASSERT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.out, HasSubstr("result 4.545 4.545"));
  std::string db;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.path().filename() == "capture.db") db = entry.path().string();
  }
  ASSERT_FALSE(db.empty());
  // Replayed on the same faulty device: the capture is reproduced, and the CPU reference disagrees.
  const auto faulty = run({OP_REPLAY_PATH, db, "--acc_check"}, {{"MLU_SIM_FAULT", "add:scale=1.01"}});
  EXPECT_EQ(faulty.exit_code, 1) << faulty.all();
  EXPECT_THAT(faulty.out, HasSubstr("op-replay: add #1 output c float32[2,4]: bit-identical to the capture"));
  EXPECT_THAT(faulty.out, HasSubstr("op-replay: add #1 output c  allclose: False max_abs_diff: 4.500e-02"));
  EXPECT_THAT(faulty.out, HasSubstr("1 failed checks"));
  // Replayed on a healthy device: the captured output is not reproduced.
  const auto healthy = run({OP_REPLAY_PATH, db});
  EXPECT_EQ(healthy.exit_code, 1) << healthy.all();
  EXPECT_THAT(healthy.out, HasSubstr("op-replay: add #1 output c differs from the capture: allclose: False"));
  fs::remove_all(dir);
}

TEST(OpscopeRun, CapturesAProgramAndForwardsItsExitStatus) {
  const fs::path dir = tempDir("run");
  const auto r =
      run({OPSCOPE_PATH, "run", "--capture=add", "--out", dir.string(), "--", HOOK_PROBE_PATH, "ops"});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.out, HasSubstr("result 4.5 4.5"));
  EXPECT_THAT(r.err, HasSubstr("opscope: option OP_CAPTURE_LIST=add"));
  // Both adds; the one the library refused is kept with its inputs and status, without outputs.
  EXPECT_THAT(r.err, HasSubstr("opscope: captured 2 ops, 5 tensors"));
  const auto results = linesStartingWith(r.err, "opscope: results in ");
  ASSERT_EQ(results.size(), 1u) << r.err;
  const std::string result_dir = results[0].substr(std::strlen("opscope: results in "));
  EXPECT_TRUE(fs::exists(fs::path(result_dir) / "capture.db")) << result_dir;
  EXPECT_EQ(fs::path(result_dir).parent_path(), dir);
  EXPECT_THAT(r.err, HasSubstr("capture.db"));
  const auto replay = run({OP_REPLAY_PATH, result_dir});
  EXPECT_EQ(replay.exit_code, 0) << replay.all();
  EXPECT_THAT(replay.out, HasSubstr("op-replay: add #2: skipped: the program's call returned status 3"));
  EXPECT_THAT(replay.out,
              HasSubstr("replayed 1 ops: 1 of 1 outputs bit-identical to the capture, 0 failed checks (1 "
                        "failed calls skipped)"));

  // The program's exit status, its death by a signal, and a program that does not exist.
  const auto crash = run({OPSCOPE_PATH, "run", "--out", dir.string(), "--", HOOK_PROBE_PATH, "crash"},
                         {opscope_test::kSanitizerCrashOptions});
  EXPECT_EQ(crash.exit_code, 128 + SIGSEGV) << crash.all();
  EXPECT_THAT(crash.err, HasSubstr("was killed by SIGSEGV"));
  const auto missing = run({OPSCOPE_PATH, "run", "--", (dir / "no_such_program").string()});
  EXPECT_EQ(missing.exit_code, 127) << missing.all();
  EXPECT_THAT(missing.err, HasSubstr("cannot run"));
  const auto bad = run({OPSCOPE_PATH, "run", "--dump-args=9", "--", HOOK_PROBE_PATH});
  EXPECT_EQ(bad.exit_code, 2);
  const auto ops = run({OPSCOPE_PATH, "ops"});
  EXPECT_EQ(ops.exit_code, 0);
  EXPECT_THAT(ops.out, HasSubstr("mluopConvolutionForward"));
  fs::remove_all(dir);
}

// A flag that comes from the option table (options.h's run flag), not from the launcher's code: the overflow
// check runs, run.json says so; a value out of the row's range is refused before the program starts, naming
// the flag, the range and the variable.
TEST(OpscopeRun, FlagsOfTheOptionTableSetTheirVariables) {
  const fs::path dir = tempDir("run_flags");
  const auto r = run({OPSCOPE_PATH, "run", "--overflow-check", "--trace-max-mb=8", "--out", dir.string(),
                      "--", HOOK_PROBE_PATH, "ops"});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.err, HasSubstr("opscope: option OP_OVERFLOW_CHECK=1"));
  EXPECT_THAT(r.err, HasSubstr("opscope: option OP_TRACE_MAX_MB=8"));
  const auto results = linesStartingWith(r.err, "opscope: results in ");
  ASSERT_EQ(results.size(), 1u) << r.err;
  std::ifstream in(fs::path(results[0].substr(std::strlen("opscope: results in "))) / "run.json");
  const auto run_json = nlohmann::json::parse(in);
  EXPECT_EQ(run_json["tools"]["overflow"], true) << run_json.dump();
  const auto bad =
      run({OPSCOPE_PATH, "run", "--trace-max-mb=0", "--out", dir.string(), "--", HOOK_PROBE_PATH});
  EXPECT_EQ(bad.exit_code, 2) << bad.all();
  EXPECT_THAT(bad.err,
              HasSubstr("--trace-max-mb: '0' is not a whole number in [1, 1073741824] (OP_TRACE_MAX_MB: "));
  const auto help = run({OPSCOPE_PATH, "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out,
              ::testing::ContainsRegex("\n  --overflow-check +OP_OVERFLOW_CHECK: name the first op"));
  EXPECT_THAT(help.out, ::testing::ContainsRegex("\n  --trace-max-mb=N +OP_TRACE_MAX_MB: "));
  const auto valued = run({OPSCOPE_PATH, "run", "--overflow-check=1", "--", HOOK_PROBE_PATH});
  EXPECT_EQ(valued.exit_code, 2) << valued.all();
  EXPECT_THAT(valued.err, HasSubstr("--overflow-check takes no value"));
  fs::remove_all(dir);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// (A sanitizer build of the hook cannot be preloaded into the shell, which is built without it.)
// A program started through a script: the shell never uses the MLU and leaves nothing; the launcher
// finds the result directories of the two programs the script ran, under their own pids.
TEST(OpscopeRun, FindsTheResultsOfProgramsAScriptStarts) {
  const fs::path dir = tempDir("run_script");
  const auto r = run({OPSCOPE_PATH, "run", "--capture", "--out", dir.string(), "--", "/bin/sh", "-c",
                      fmt::format("{0} ops && {0} ops", HOOK_PROBE_PATH)});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  const auto results = linesStartingWith(r.err, "opscope: results in ");
  ASSERT_EQ(results.size(), 2u) << r.err;
  for (const auto& line : results) {
    const fs::path result_dir = line.substr(std::strlen("opscope: results in "));
    EXPECT_TRUE(fs::exists(result_dir / "capture.db")) << result_dir;
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);
  // A program that never uses the MLU: nothing, and the launcher says why there may be nothing.
  const auto idle =
      run({OPSCOPE_PATH, "run", "--capture", "--out", (dir / "idle").string(), "--", "/bin/true"});
  EXPECT_EQ(idle.exit_code, 0) << idle.all();
  EXPECT_THAT(idle.err, HasSubstr("the program never used the MLU"));
  EXPECT_FALSE(fs::exists(dir / "idle"));
  fs::remove_all(dir);
}
#endif
