// Auto-compare as a tool alone, in-process (no LD_PRELOAD): made-up relu calls on real device memory go
// through before()/after() as the hook runs them; the CPU reference of relu decides which output is right.
// Read back: the failure line on stderr, autocompare.csv's verdicts, and capture.db's compare results.
#include "../support/made_up_call.h"
#include "../support/test_data.h"

#include <opscope/capture/capture_tool.h>
#include <opscope/compare/compare_tool.h>
#include <opscope/compare/op_class.h>
#include <opscope/rundb/writer.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

using ::testing::HasSubstr;

namespace {

using opscope_test::runThrough;

std::string query(const std::string& db, const char* sql) {
  sqlite3* handle = nullptr;
  std::string out;
  if (sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_exec(
        handle, sql,
        [](void* text, int n, char** values, char**) {
          auto& s = *static_cast<std::string*>(text);
          for (int i = 0; i < n; ++i) s += std::string(i ? "|" : "") + (values[i] ? values[i] : "NULL");
          s += '\n';
          return 0;
        },
        &out, nullptr);
  }
  sqlite3_close(handle);
  return out;
}

}  // namespace

TEST(CompareTool, TheReferenceTellsARightOutputFromAWrongOne) {
  const std::filesystem::path dir = opscope_test::tempDir("compare_tool");
  opscope::Config config;
  config.autocompare = true;
  const opscope::RunInfo run = opscope_test::madeUpRun(dir.string());
  const auto database = opscope::rundb::openRunDatabase(config, run);
  const auto compare = opscope::compare::makeCompareTool(config, run, database);
  const auto closer = opscope::capture::makeDatabaseTool(config, database);
  EXPECT_EQ(compare->name(), "autocompare");

  ::testing::internal::CaptureStderr();
  opscope_test::MadeUpRelu right({1, -2, 3, -4}, 1);
  runThrough(*compare, right, {1, 0, 3, 0});
  opscope_test::MadeUpRelu wrong({1, -2, 3, -4}, 2);
  runThrough(*compare, wrong, {1, 0, 3.5f, 0});  // relu(3) is 3
  compare->flush();
  closer->flush();
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(said, HasSubstr("OpAutoCompare: relu #2 output y float32  allclose: False max_abs_diff: 5"));
  EXPECT_THAT(said, ::testing::Not(HasSubstr("relu #1 output y float32  allclose: False")));

  // relu is of the exact class; 3.5 against 3 is 0.5 / 2^-22 = 2^21 ULPs (float32's spacing in [2, 4)), a
  // mean of 2^21 / 4 over the output's four elements.
  std::ifstream csv(dir / "autocompare.csv");
  std::stringstream rows;
  rows << csv.rdbuf();
  EXPECT_THAT(
      rows.str(),
      ::testing::ContainsRegex(
          "\n1,relu,[^\n]*output y,float32,\"\\[4\\]\",True,[^\n]*,pass,\"\",\"\",\"\",\"\",exact,0,0\n"));
  EXPECT_THAT(rows.str(),
              ::testing::ContainsRegex(
                  "\n2,relu,[^\n]*output y,float32,\"\\[4\\]\",False,0.5,[^\n]*,fail,\"\",\"\",\"\",\"\","
                  "exact,2.09715e\\+06,524288\n"));
  // Each op's output, and its input checked unchanged; the failing op is kept in the run database with its
  // inputs, its output and the reference's.
  const std::string db = (dir / "capture.db").string();
  EXPECT_EQ(query(db,
                  "SELECT o.seq, c.arg_name, c.verdict FROM compare_results c JOIN ops o USING (op_id) "
                  "ORDER BY o.seq"),
            "1|input x|pass\n1|y|pass\n2|input x|pass\n2|y|fail\n");
  EXPECT_EQ(query(db, "SELECT role FROM tensors t JOIN ops o USING (op_id) WHERE o.seq = 2 ORDER BY role"),
            "cpu_output\ninput\noutput\n");
  std::filesystem::remove_all(dir);
}

// The op classes (compare/op_class.h): what must be exact, what sums, what is random; every op has one.
TEST(OpClass, EachOpHasTheClassOfTheWorkItDoes) {
  using opscope::compare::OpClass;
  using opscope::compare::opClass;
  for (const auto op :
       {mlu::OpId::copy, mlu::OpId::relu, mlu::OpId::max_pool2d_forward, mlu::OpId::index_select,
        mlu::OpId::concat, mlu::OpId::eq, mlu::OpId::where, mlu::OpId::topk})
    EXPECT_EQ(opClass(op), OpClass::kExact) << mlu::opName(op);
  for (const auto op : {mlu::OpId::matmul, mlu::OpId::conv2d_backward_filter, mlu::OpId::softmax_forward,
                        mlu::OpId::max_pool2d_backward, mlu::OpId::layer_norm_forward})
    EXPECT_EQ(opClass(op), OpClass::kReduction) << mlu::opName(op);
  for (const auto op : {mlu::OpId::add, mlu::OpId::exp, mlu::OpId::gelu, mlu::OpId::adamw_step})
    EXPECT_EQ(opClass(op), OpClass::kElementwise) << mlu::opName(op);
  for (const auto op : {mlu::OpId::uniform, mlu::OpId::dropout_forward})
    EXPECT_EQ(opClass(op), OpClass::kRandom) << mlu::opName(op);
  std::size_t exact = 0;
  for (std::size_t i = 0; i < mlu::kOpCount; ++i) {
    const OpClass c = opClass(static_cast<mlu::OpId>(i));
    EXPECT_FALSE(opscope::compare::opClassName(c).empty());
    exact += c == OpClass::kExact;
  }
  EXPECT_EQ(exact, 41u);  // the table of docs/compare.md
}
