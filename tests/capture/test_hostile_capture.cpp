// capture.db is untrusted input: a real capture (mnist_train, one step) damaged in many ways with the sqlite3
// CLI, as a hostile sender would — shapes, strides, dtypes, blobs, schema, views, huge values — then read by
// every op-replay mode, `opscope summary` and `opscope report`. Each must end within 10 s (run under
// timeout), without a signal or a sanitizer report, with exit status 0, 1 or 3, and op-replay must name
// what is wrong. Variants that damage one op leave the others replayable.
#include "../support/subprocess.h"
#include "../support/test_data.h"

#include <opscope/rundb/reader.h>

#include "../../core/src/rundb/tensor_row.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include "test_paths.h"

namespace fs = std::filesystem;
using opscope_test::run;
using opscope_test::tempDir;
using ::testing::HasSubstr;

namespace {

struct Variant {
  const char* name;
  std::string sql;       // run on a copy of the good capture.db
  std::string expected;  // in op-replay's output for a plain replay of every op ("" = anything clear)
};

// The first captured op, whose rows most variants damage.
const std::string kFirst = "(SELECT min(op_id) FROM ops WHERE captured)";

// "[1,1,...,1]" of n ones.
std::string ones(int n) {
  std::string s = "[1";
  for (int i = 1; i < n; ++i) s += ",1";
  return s + "]";
}

std::vector<Variant> variants() {
  const std::string deep(100000, '[');
  const std::string first_refs = "UPDATE tensor_refs SET ";
  const std::string where = " WHERE op_id = " + kFirst;
  return {
      {"shape_shorter_than_blob", first_refs + "shape = '[1]', strides = '[1]'" + where, "needs 4 bytes"},
      {"dtype_int8", first_refs + "dtype = 'int8'" + where, "damaged"},
      {"dtype_unknown", first_refs + "dtype = 'float128'" + where, "dtype 'float128' is unknown"},
      {"dim_2_62", first_refs + "shape = '[4611686018427387904]', strides = '[1]'" + where, "too many"},
      {"dims_64", first_refs + "shape = '" + ones(64) + "', strides = '" + ones(64) + "'" + where, "64 dims"},
      {"dims_65", first_refs + "shape = '" + ones(65) + "'" + where, "not an array of integers"},
      {"dims_9", first_refs + "shape = '[1,1,1,1,1,1,1,1,1]', strides = '[1,1,1,1,1,1,1,1,1]'" + where,
       "9 dims"},
      {"strides_shorter", first_refs + "strides = '[]'" + where, "strides for"},
      {"strides_longer", first_refs + "strides = '[1,1,1,1,1,1,1]'" + where, "strides for"},
      {"dim_negative", first_refs + "shape = '[-1]', strides = '[1]'" + where, "is -1"},
      {"stride_negative", first_refs + "strides = '[-1' || substr(strides, 3)" + where, "damaged"},
      {"stride_2_40",
       first_refs + "strides = '[1099511627776' || substr(strides, instr(strides, ','))" + where, "damaged"},
      {"stride_int64_max",
       first_refs + "strides = '[9223372036854775807' || substr(strides, instr(strides, ','))" + where,
       "damaged"},
      {"shape_not_json", first_refs + "shape = 'abc'" + where, "not an array of integers"},
      {"shape_nested", first_refs + "shape = '[[1]]'" + where, "not an array of integers"},
      {"shape_deep", first_refs + "shape = '" + deep + "'" + where, "not an array of integers"},
      {"shape_float", first_refs + "shape = '[1.5]'" + where, "not an array of integers"},
      {"shape_overflow", first_refs + "shape = '[99999999999999999999]'" + where, "not an array of integers"},
      {"shape_null", first_refs + "shape = NULL" + where, "not an array of integers"},
      {"shape_product_overflow",
       first_refs + "shape = '[4294967296, 4294967296]', strides = '[1, 1]'" + where, "too many"},
      {"nbytes_wrong", first_refs + "nbytes = 1" + where, "nbytes says 1"},
      {"blob_cut",
       "UPDATE blobs SET data = substr(data, 1, 10) WHERE blob_id IN (SELECT blob_id FROM "
       "tensor_refs WHERE op_id = " +
           kFirst + ")",
       "damaged"},
      {"blob_null",
       "UPDATE blobs SET data = NULL WHERE blob_id IN (SELECT blob_id FROM tensor_refs WHERE "
       "op_id = " +
           kFirst + ")",
       "damaged"},
      {"blob_missing", first_refs + "blob_id = 999999" + where, ""},
      {"role_unknown", first_refs + "role = 'bogus'" + where, "role 'bogus'"},
      {"arg_index_huge", first_refs + "arg_index = 99999" + where, ""},
      {"arg_index_negative", first_refs + "arg_index = -1" + where, ""},
      {"output_dtype_differs",
       "UPDATE tensor_refs SET dtype = 'float16', shape = '[' || (nbytes / 2) || ']', strides = '[1]' WHERE "
       "role = 'output' AND op_id = " +
           kFirst,
       ""},
      {"op_unknown", "UPDATE ops SET name = 'nosuchop' WHERE op_id = " + kFirst, "does not know"},
      {"op_name_null", "UPDATE ops SET name = NULL WHERE op_id = " + kFirst, "does not know"},
      {"scalar_malformed", "UPDATE scalars SET value = 'abc{[' WHERE op_id = " + kFirst, ""},
      {"scalar_missing", "DELETE FROM scalars WHERE op_id = " + kFirst, ""},
      {"scalar_huge", "UPDATE scalars SET value = printf('%.*c', 100000, '[') WHERE op_id = " + kFirst, ""},
      {"status_text", "UPDATE ops SET status = 'x', device = 1000000 WHERE op_id = " + kFirst, ""},
      {"no_tensors", "DELETE FROM tensor_refs WHERE op_id = " + kFirst, ""},
      {"ops_recursive_view",
       "DROP TABLE ops; CREATE VIEW ops AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
       "SELECT x AS op_id, x AS seq, 'add' AS name, '' AS symbol, 0 AS thread, 0 AS queue, 0 AS device, 0 AS "
       "host_start_ns, 0 AS host_dur_ns, 0 AS device_dur_ns, 0 AS status, 0 AS fallback, 1 AS captured FROM "
       "c",
       "is a view, not a table"},
      {"tensor_refs_view",
       "ALTER TABLE tensor_refs RENAME TO t2; CREATE VIEW tensor_refs AS SELECT a.* FROM t2 a, t2 b, t2 c, "
       "t2 d",
       "is a view, not a table"},
      {"tensors_view_recursive",
       "DROP VIEW tensors; CREATE VIEW tensors AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
       "FROM c) SELECT x AS op_id, 0 AS nbytes FROM c",
       ""},
      {"compare_results_view",
       "DROP TABLE compare_results; CREATE VIEW compare_results AS WITH RECURSIVE c(x) AS (SELECT 1 UNION "
       "ALL "
       "SELECT x + 1 FROM c) SELECT x AS op_id, 'fail' AS verdict FROM c",
       ""},
      {"schema_version_999", "UPDATE meta SET value = '999' WHERE key = 'schema_version'",
       "schema version 999"},
      {"meta_missing", "DROP TABLE meta", "schema version"},
      {"blobs_missing", "DROP TABLE blobs", "not an opscope capture"},
  };
}

class HostileCapture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = tempDir("hostile");
    const auto r = run({MNIST_TRAIN_PATH, "--steps", "1", "--batch-size", "2", "--no-eval"},
                       {{"LD_PRELOAD", LIBOPSCOPE_PATH},
                        {"OP_CAPTURE", "1"},
                        {"OP_CAPTURE_LIST", "conv2d_forward|add|relu|linear"},
                        {"OPSCOPE_RESULT_DIR", (root_ / "runs").string()}});
    ASSERT_EQ(r.exit_code, 0) << r.all();
    for (const auto& entry : fs::directory_iterator(root_ / "runs")) good_ = entry.path();
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  static inline fs::path root_, good_;  // the test's folder; the undamaged result directory in it
};

// Runs a reader under a 10 s timeout; a finished, clear run or a test failure naming the variant and mode.
opscope_test::Run bounded(const std::string& variant, const std::vector<std::string>& argv) {
  std::vector<std::string> full = {"/usr/bin/timeout", "-s", "KILL", "10"};
  full.insert(full.end(), argv.begin(), argv.end());
  const auto r = run(full);
  const std::string what = fmt::format("{}: {}", variant, fmt::join(argv, " "));
  EXPECT_EQ(r.signal, 0) << what << "\n" << r.all();
  EXPECT_NE(r.exit_code, 137) << what << " did not finish within 10 s";
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 3)
      << what << " exit " << r.exit_code << "\n"
      << r.all();
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("Sanitizer"))) << what;
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("runtime error:"))) << what;
  return r;
}

}  // namespace

TEST_F(HostileCapture, EveryVariantGivesAClearErrorOrAPartialResultInEveryMode) {
  const std::vector<Variant> all = variants();
  ASSERT_GE(all.size(), 30u);
  for (const Variant& v : all) {
    SCOPED_TRACE(v.name);
    const fs::path dir = root_ / v.name;
    fs::copy(good_, dir);
    const auto sql = run({"/usr/bin/sqlite3", (dir / "capture.db").string(), v.sql});
    ASSERT_EQ(sql.exit_code, 0) << v.name << ": " << sql.err;
    const std::string d = dir.string();
    const auto replay = bounded(v.name, {OP_REPLAY_PATH, d});
    if (!v.expected.empty()) {
      EXPECT_THAT(replay.all(), HasSubstr(v.expected)) << v.name;
    }
    bounded(v.name, {OP_REPLAY_PATH, d, "--list"});
    bounded(v.name, {OP_REPLAY_PATH, d, "--acc_check"});
    bounded(v.name, {OP_REPLAY_PATH, d, "--device", "cpu"});
    bounded(v.name, {OP_REPLAY_PATH, d, "--run_times", "2", "--sync_time_measure"});
    bounded(v.name, {OP_REPLAY_PATH, d, "--export-npy", (dir / "npy").string()});
    bounded(v.name, {OPSCOPE_PATH, "summary", d});
    bounded(v.name, {OPSCOPE_PATH, "report", d});
  }
}

// A capture.db-journal beside the file is what a killed capture leaves, and the readers roll it back
// (recoverInterruptedWrite): one that is not a journal (garbage, planted) changes nothing and the file
// reads as before; one that is not a regular file (a symlink, a directory) is refused with one line.
TEST_F(HostileCapture, AJournalBesideTheCaptureIsPlayedBackOnlyWhenItIsOne) {
  const auto listed = run({OP_REPLAY_PATH, good_.string(), "--list"});
  ASSERT_EQ(listed.exit_code, 0) << listed.all();
  struct Case {
    const char* name;
    std::string planted;  // "garbage", "symlink" or "directory"
  };
  for (const Case& c : {Case{"journal_garbage", "garbage"}, Case{"journal_symlink", "symlink"},
                        Case{"journal_directory", "directory"}}) {
    SCOPED_TRACE(c.name);
    const fs::path dir = root_ / c.name;
    fs::copy(good_, dir);
    const fs::path journal = dir / "capture.db-journal";
    if (c.planted == "garbage") {
      std::ofstream(journal) << std::string(4096, 'x');
    } else if (c.planted == "symlink") {
      fs::create_symlink("/etc/hostname", journal);
    } else {
      fs::create_directory(journal);
    }
    const auto list = bounded(c.name, {OP_REPLAY_PATH, dir.string(), "--list"});
    const auto summary = bounded(c.name, {OPSCOPE_PATH, "summary", dir.string()});
    if (c.planted == "garbage") {
      EXPECT_EQ(list.exit_code, 0) << list.all();
      EXPECT_EQ(list.out.substr(0, list.out.rfind(" ops in ")),
                listed.out.substr(0, listed.out.rfind(" ops in ")));
      EXPECT_EQ(summary.exit_code, 0) << summary.all();
    } else {
      EXPECT_EQ(list.exit_code, 3) << list.all();
      EXPECT_THAT(list.err, HasSubstr("that is not a regular file"));
      EXPECT_THAT(summary.all(), HasSubstr("that is not a regular file"));
      EXPECT_TRUE(fs::exists(fs::symlink_status(journal))) << "left as it was";
    }
  }
}

// A damaged op is named with its field, and the other ops of the file are still replayed.
TEST_F(HostileCapture, ADamagedOpLeavesTheOthersReplayable) {
  const fs::path dir = root_ / "one_damaged";
  fs::copy(good_, dir);
  ASSERT_EQ(run({"/usr/bin/sqlite3", (dir / "capture.db").string(),
                 "UPDATE tensor_refs SET strides = '[]' WHERE op_id = " + kFirst})
                .exit_code,
            0);
  const auto r = bounded("one_damaged", {OP_REPLAY_PATH, dir.string()});
  EXPECT_EQ(r.exit_code, 3) << r.all();
  EXPECT_THAT(r.err, HasSubstr("is damaged: 0 strides for"));
  EXPECT_THAT(r.out, HasSubstr("(1 damaged ops could not be read)"));
  EXPECT_THAT(r.out, HasSubstr("bit-identical to the capture"));
  const auto good = bounded("good", {OP_REPLAY_PATH, good_.string()});
  EXPECT_EQ(good.exit_code, 0) << good.all();
}

// Names in the file become export file names: a '/' or '..' in them never leads out of the export folder.
TEST_F(HostileCapture, ExportNamesFromTheFileStayInTheExportFolder) {
  const fs::path dir = root_ / "escape";
  fs::copy(good_, dir);
  ASSERT_EQ(run({"/usr/bin/sqlite3", (dir / "capture.db").string(),
                 "UPDATE tensor_refs SET arg_name = '/../../escaped'"})
                .exit_code,
            0);
  const fs::path out = root_ / "exports" / "npy";
  const auto r = bounded("escape", {OP_REPLAY_PATH, dir.string(), "--export-npy", out.string()});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  int exported = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root_ / "exports")) {
    if (entry.path() == out) continue;  // the folder itself
    EXPECT_EQ(entry.path().parent_path(), out) << entry.path();
    EXPECT_THAT(entry.path().filename().string(), HasSubstr("_.._.._escaped"));
    ++exported;
  }
  EXPECT_GT(exported, 0);
  EXPECT_FALSE(fs::exists(root_ / "escaped"));
  EXPECT_FALSE(fs::exists(dir.parent_path() / "escaped"));
}

// What the fuzzer found (tests/fuzz/fuzz_tensor_row.cpp; its input is kept in the seed corpus): a dtype value
// outside the enum has no size and divided by zero. It is an unknown dtype.
TEST(TensorRow, ADtypeOutsideTheEnumIsUnknown) {
  opscope::rundb::TensorRecord r;
  r.role = "input";
  r.dtype = static_cast<mluopDataType_t>(11);
  r.shape = {2};
  r.strides = {1};
  EXPECT_EQ(opscope::rundb::tensorRowProblem(r, 0), "its dtype is unknown");
  r.dtype = MLUOP_DTYPE_FLOAT;
  r.data.resize(8);
  EXPECT_EQ(opscope::rundb::tensorRowProblem(r, 8), "");
  r.strides = {-1};
  EXPECT_EQ(opscope::rundb::tensorRowProblem(r, 8), "stride 0 is -1");
  EXPECT_EQ(opscope::rundb::parseIntArray(" [ 1 ,-2, 3 ] "), (std::vector<std::int64_t>{1, -2, 3}));
  EXPECT_EQ(opscope::rundb::parseIntArray("[-9223372036854775808]"), (std::vector<std::int64_t>{INT64_MIN}));
  EXPECT_FALSE(opscope::rundb::parseIntArray("[9223372036854775808]"));
  EXPECT_FALSE(opscope::rundb::parseIntArray("[1,]"));
  EXPECT_FALSE(opscope::rundb::parseIntArray("[1] x"));
}
