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
  ASSERT_TRUE(o.capture.has_value());
  EXPECT_EQ(*o.capture, "conv2d.*,linear");
  EXPECT_EQ(o.dump_args, 2);
  EXPECT_EQ(o.out, "/tmp/r");
  EXPECT_TRUE(o.sync_exec);
  EXPECT_FALSE(o.compare.has_value());
  EXPECT_EQ(o.program, (std::vector<std::string>{"prog", "--steps", "3"}));
}

TEST(OpscopeCli, ProgramWithoutDoubleDashAndBareCapture) {
  const auto o = parseRun({"--capture", "--out=d", "prog", "-x"});
  ASSERT_TRUE(o.capture.has_value());
  EXPECT_EQ(*o.capture, "");
  EXPECT_EQ(o.out, "d");
  EXPECT_EQ(o.program, (std::vector<std::string>{"prog", "-x"}));
}

TEST(OpscopeCli, BadArgumentsAreUsageErrors) {
  EXPECT_THROW(parseRun({}), UsageError);
  EXPECT_THROW(parseRun({"--capture"}), UsageError);                 // no program
  EXPECT_THROW(parseRun({"--bogus", "--", "p"}), UsageError);        // unknown option
  EXPECT_THROW(parseRun({"--dump-args=4", "--", "p"}), UsageError);  // level out of range
  EXPECT_THROW(parseRun({"--dump-args=x", "--", "p"}), UsageError);
  EXPECT_THROW(parseRun({"--fallback="}), UsageError);             // empty value
  EXPECT_THROW(parseRun({"--out"}), UsageError);                   // missing value
  EXPECT_THROW(parseRun({"--profile=1", "--", "p"}), UsageError);  // takes no value
  try {
    parseRun({"--dump-args=7", "--", "p"});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'7'"));
  }
}

TEST(OpscopeCli, EveryRunFlagOfTheOptionTableSetsItsVariable) {
  int flags = 0;
  for (const opscope::Option& row : opscope::kOptions) {
    if (row.run_flag.empty()) continue;
    ++flags;
    const std::string flag(row.run_flag);
    const bool is_flag = row.kind == opscope::OptionKind::kFlag;
    const auto o = is_flag ? parseRun({flag, "--", "p"}) : parseRun({flag + "=7", "--", "p"});
    const Env expected = {{std::string(row.name), is_flag ? "1" : "7"}};
    EXPECT_EQ(environmentFor(o, nullptr), expected) << flag;
    if (is_flag) {
      EXPECT_THROW(parseRun({flag + "=1", "--", "p"}), UsageError) << flag;
    } else {
      EXPECT_EQ(environmentFor(parseRun({flag, "9", "p"}), nullptr), (Env{{std::string(row.name), "9"}}));
      EXPECT_THROW(parseRun({flag}), UsageError) << flag << " needs a value";
    }
  }
  EXPECT_GE(flags, 4);
}

TEST(OpscopeCli, EnvironmentForCapture) {
  std::vector<std::string> notes;
  const auto env = environmentFor(parseRun({"--capture=conv2d.*", "--dump-args=1", "--", "p"}), &notes);
  EXPECT_EQ(env, (Env{{"OP_CAPTURE", "1"}, {"OP_CAPTURE_LIST", "conv2d.*"}, {"OP_DUMP_ARGS", "1"}}));
  EXPECT_TRUE(notes.empty());
  // A bare --capture keeps the default list (OP_CAPTURE_LIST unset).
  EXPECT_EQ(environmentFor(parseRun({"--capture", "p"}), nullptr), (Env{{"OP_CAPTURE", "1"}}));
}

TEST(OpscopeCli, EnvironmentForCompareAndFallback) {
  std::vector<std::string> notes;
  EXPECT_EQ(environmentFor(parseRun({"--compare", "--fallback=conv2d.*,relu", "--", "p"}), &notes),
            (Env{{"OP_AUTOCOMPARE", "1"}, {"OP_FALLBACK_LIST", "conv2d.*,relu"}}));
  EXPECT_TRUE(notes.empty());
  EXPECT_EQ(environmentFor(parseRun({"--compare=matmul", "p"}), nullptr),
            (Env{{"OP_AUTOCOMPARE", "1"}, {"OP_AUTOCOMPARE_LIST", "matmul"}}));
}

TEST(OpscopeCli, ToolsNotBuiltYetAreNotedNotSet) {
  std::vector<std::string> notes;
  Env expected;
  for (const auto& tool : opscope::launcher::tools()) {
    if (tool.built) continue;
    std::vector<std::string> args = {
        std::string(tool.option) + (std::string(tool.option) == "--fallback" ? "=x" : ""), "p"};
    notes.clear();
    EXPECT_EQ(environmentFor(parseRun(args), &notes), expected) << tool.option;
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_THAT(notes[0], HasSubstr(tool.option));
  }
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
