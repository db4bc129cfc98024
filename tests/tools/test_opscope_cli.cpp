// The `opscope` launcher: argument parsing, the environment a run gets, LD_PRELOAD handling, finding the
// result directories, and the op listing.
#include "launcher.h"

#include <mlu/op_args.h>
#include <opscope/options.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace fs = std::filesystem;
using opscope::launcher::environmentFor;
using opscope::launcher::parseRun;
using opscope::launcher::UsageError;
using ::testing::HasSubstr;
using Env = std::vector<std::pair<std::string, std::string>>;

TEST(OpscopeCli, ParsesToolsAndProgram) {
  const auto o = parseRun({"--capture=conv2d.*,linear", "--dump-args=2", "--out", "/tmp/r", "--sync-exec",
                           "--", "prog", "--steps", "3"});
  EXPECT_EQ(environmentFor(o), (Env{{"OP_CAPTURE", "1"},
                                    {"OP_CAPTURE_LIST", "conv2d.*,linear"},
                                    {"OP_DUMP_ARGS", "2"},
                                    {"OPSCOPE_RESULT_DIR", "/tmp/r"},
                                    {"OP_SYNC_EXEC", "1"}}));
  EXPECT_EQ(o.program, (std::vector<std::string>{"prog", "--steps", "3"}));
}

TEST(OpscopeCli, ProgramWithoutDoubleDashAndBareCapture) {
  const auto o = parseRun({"--capture", "--out=d", "prog", "-x"});
  // A bare --capture keeps the default list (OP_CAPTURE_LIST unset).
  EXPECT_EQ(environmentFor(o), (Env{{"OP_CAPTURE", "1"}, {"OPSCOPE_RESULT_DIR", "d"}}));
  EXPECT_EQ(o.program, (std::vector<std::string>{"prog", "-x"}));
}

TEST(OpscopeCli, BadArgumentsAreUsageErrors) {
  EXPECT_THROW(parseRun({}), UsageError);
  EXPECT_THROW(parseRun({"--capture"}), UsageError);                 // no program
  EXPECT_THROW(parseRun({"--bogus", "--", "p"}), UsageError);        // unknown option
  EXPECT_THROW(parseRun({"--dump-args=4", "--", "p"}), UsageError);  // level out of range
  EXPECT_THROW(parseRun({"--dump-args=x", "--", "p"}), UsageError);
  EXPECT_THROW(parseRun({"--dump-args=1x", "--", "p"}), UsageError);
  EXPECT_THROW(parseRun({"--trace-max-mb=0", "--", "p"}), UsageError);  // below the row's minimum
  EXPECT_THROW(parseRun({"--fallback="}), UsageError);                  // empty value
  EXPECT_THROW(parseRun({"--fallback", "--", "p"}), UsageError);        // a list without a switch needs one
  EXPECT_THROW(parseRun({"--out"}), UsageError);                        // missing value
  EXPECT_THROW(parseRun({"--profile=1", "--", "p"}), UsageError);       // takes no value
  try {
    parseRun({"--dump-args=7", "--", "p"});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--dump-args: '7' is not a whole number in [0, 3] (OP_DUMP_ARGS"));
  }
}

// Every row of the option table with a run flag is a flag of `opscope run` that sets its variable (and the
// one its row says it sets too), by the row's kind: no code of the launcher's names a flag.
TEST(OpscopeCli, EveryRunFlagOfTheOptionTableSetsItsVariable) {
  int flags = 0;
  for (const opscope::Option& row : opscope::kOptions) {
    if (row.run_flag.empty()) continue;
    ++flags;
    const std::string flag(row.run_flag), name(row.name);
    Env also;
    if (!row.run_also.empty()) {
      const std::string a(row.run_also);
      also.emplace_back(a.substr(0, a.find('=')), a.substr(a.find('=') + 1));
    }
    auto with = [&](Env tail) {
      Env e = also;
      e.insert(e.end(), tail.begin(), tail.end());
      return e;
    };
    // A value within a number row's range.
    const std::string value = row.kind == opscope::OptionKind::kNumber ? std::to_string(row.min + 1) : "7";
    if (row.kind == opscope::OptionKind::kFlag) {
      EXPECT_EQ(environmentFor(parseRun({flag, "--", "p"})), with({{name, "1"}})) << flag;
      EXPECT_THROW(parseRun({flag + "=1", "--", "p"}), UsageError) << flag;
    } else if (row.kind == opscope::OptionKind::kList && !row.run_also.empty()) {
      EXPECT_EQ(environmentFor(parseRun({flag, "p"})), with({})) << flag;
      EXPECT_EQ(environmentFor(parseRun({flag + "=relu", "p"})), with({{name, "relu"}})) << flag;
    } else {
      EXPECT_EQ(environmentFor(parseRun({flag + "=" + value, "--", "p"})), with({{name, value}})) << flag;
      EXPECT_EQ(environmentFor(parseRun({flag, value, "p"})), with({{name, value}})) << flag;
      EXPECT_THROW(parseRun({flag}), UsageError) << flag << " needs a value";
    }
  }
  EXPECT_GE(flags, 12);
}

TEST(OpscopeCli, EnvironmentForCapture) {
  const auto env = environmentFor(parseRun({"--capture=conv2d.*", "--dump-args=1", "--", "p"}));
  EXPECT_EQ(env, (Env{{"OP_CAPTURE", "1"}, {"OP_CAPTURE_LIST", "conv2d.*"}, {"OP_DUMP_ARGS", "1"}}));
  EXPECT_EQ(environmentFor(parseRun({"--capture", "p"})), (Env{{"OP_CAPTURE", "1"}}));
}

TEST(OpscopeCli, EnvironmentForCompareFallbackAndMemcheck) {
  EXPECT_EQ(environmentFor(parseRun({"--compare", "--fallback=conv2d.*,relu", "--", "p"})),
            (Env{{"OP_AUTOCOMPARE", "1"}, {"OP_FALLBACK_LIST", "conv2d.*,relu"}}));
  EXPECT_EQ(environmentFor(parseRun({"--compare=matmul", "p"})),
            (Env{{"OP_AUTOCOMPARE", "1"}, {"OP_AUTOCOMPARE_LIST", "matmul"}}));
  EXPECT_EQ(environmentFor(parseRun({"--memcheck", "--profile", "p"})),
            (Env{{"MEM_CHECK_ENABLE_BACKTRACE", "1"}, {"MEM_CHECK", "1"}, {"OP_TIME_MEASURE", "1"}}));
}

TEST(OpscopeCli, PreloadKeepsTheUsersLibrariesAfterTheHook) {
  using opscope::launcher::preloadValue;
  EXPECT_EQ(preloadValue("/h/libopscope.so", nullptr), "/h/libopscope.so");
  EXPECT_EQ(preloadValue("/h/libopscope.so", ""), "/h/libopscope.so");
  EXPECT_EQ(preloadValue("/h/libopscope.so", "/a.so:/b.so"), "/h/libopscope.so:/a.so:/b.so");
  EXPECT_EQ(preloadValue("/h/libopscope.so", "/a.so /h/libopscope.so"), "/h/libopscope.so:/a.so");
}

TEST(OpscopeCli, FindsTheResultDirectoriesOfAPid) {
  const fs::path root = fs::temp_directory_path() / ("opscope_cli_" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "20261125-101010-4242");
  fs::create_directories(root / "20261125-101010-4242-rank1");
  fs::create_directories(root / "20261125-101010-42421");  // another pid that starts with the same digits
  fs::create_directories(root / "20261125-101010-7");
  // With their random part, as this version makes them; and names that only look alike.
  fs::create_directories(root / "20261125-101011-4242-Ab12cd");
  fs::create_directories(root / "20261125-101011-4242-rank3-Zz99aa");
  fs::create_directories(root / "20261125-101011-4242-toolong7");
  fs::create_directories(root / "20261125-101011-4242-rank-Zz99aa");
  fs::create_directories(root / "x20261125-101011-4242");
  fs::create_symlink(root / "20261125-101011-4242-Ab12cd", root / "20261125-101012-4242-Link00");
  std::ofstream(root / "20261125-101010-4242.txt") << "a file, not a directory";
  const auto dirs = opscope::launcher::resultDirsOf(root.string(), 4242);
  ASSERT_EQ(dirs.size(), 4u);
  EXPECT_EQ(fs::path(dirs[0]).filename(), "20261125-101010-4242");
  EXPECT_EQ(fs::path(dirs[1]).filename(), "20261125-101010-4242-rank1");
  EXPECT_EQ(fs::path(dirs[2]).filename(), "20261125-101011-4242-Ab12cd");
  EXPECT_EQ(fs::path(dirs[3]).filename(), "20261125-101011-4242-rank3-Zz99aa");
  EXPECT_TRUE(opscope::launcher::resultDirsOf((root / "missing").string(), 4242).empty());
  // Every pid's: the four above, 42421's and 7's.
  const auto every = opscope::launcher::resultDirsOf(root.string(), -1);
  ASSERT_EQ(every.size(), 6u);
  EXPECT_EQ(fs::path(every[3]).filename(), "20261125-101010-7");
  fs::remove_all(root);
}

TEST(OpscopeCli, OpsListingHasEveryOpOfTheSchema) {
  const std::string listing = opscope::launcher::opsListing();
  std::size_t rows = 0;
  mlu::forEachOp([&]<typename Args>() {
    EXPECT_THAT(listing, HasSubstr(std::string(Args::kSymbol))) << Args::kName;
    ++rows;
  });
  EXPECT_EQ(rows, mlu::kOpCount);
  EXPECT_THAT(listing, HasSubstr("conv_desc:conv x:in w:in bias:in? workspace:workspace y:out"));
  EXPECT_THAT(listing, HasSubstr("alpha:float a:in b:in c:out"));
  std::istringstream lines(listing);
  std::string line;
  std::size_t count = 0;
  while (std::getline(lines, line)) ++count;
  EXPECT_EQ(count, mlu::kOpCount + 2);  // header, one line per op, footer
}

// `opscope env`: every row of the option table, with its default.
TEST(OpscopeCli, EnvListsEveryVariableWithItsDefault) {
  ::testing::internal::CaptureStdout();
  const int status = opscope::launcher::main({"env"});
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(status, 0);
  for (const auto& o : opscope::kOptions) {
    EXPECT_NE(out.find(std::string(o.name) + " "), std::string::npos) << o.name;
  }
  EXPECT_THAT(out, ::testing::HasSubstr("OP_CAPTURE_MAX_MB"));
  EXPECT_THAT(out, ::testing::ContainsRegex("MEM_CHECK_BACKTRACE_DEPTH +1-256 +32 "));
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(opscope::launcher::main({"env", "extra"}), 2);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), ::testing::HasSubstr("env takes no arguments"));
}
