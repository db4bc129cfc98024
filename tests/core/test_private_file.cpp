// Result files are private and symlink-safe: the private_file helpers on real files (modes under umask 000,
// planted symlinks, unpredictable directories), then a real run of mnist_train under every tool and
// `opscope report` under umask 000, whose every file must be 0600 in a 0700 directory.
#include "../support/subprocess.h"
#include "../support/test_data.h"

#include <opscope/private_file.h>
#include <opscope/run_info.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>
#include "test_paths.h"

namespace fs = std::filesystem;
using opscope_test::run;
using opscope_test::tempDir;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

namespace {

unsigned modeOf(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

std::string contents(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Sets the process's umask for the scope.
class Umask {
 public:
  explicit Umask(mode_t m) : old_(::umask(m)) {}
  ~Umask() { ::umask(old_); }

 private:
  mode_t old_;
};

}  // namespace

TEST(PrivateFile, FilesAre0600AndDirectories0700WhateverTheUmask) {
  const fs::path dir = tempDir("private_modes");
  const Umask open_umask(0);
  const fs::path file = dir / "a.txt";
  EXPECT_EQ(opscope::writePrivateFile(file.string(), "hello\n"), "");
  EXPECT_EQ(modeOf(file), 0600u);
  EXPECT_EQ(contents(file), "hello\n");
  EXPECT_FALSE(fs::exists(dir / "a.txt.tmp"));
  const std::string made = opscope::createPrivateDir((dir / "new" / "root").string(), "run");
  EXPECT_EQ(modeOf(made), 0700u);
  EXPECT_EQ(fs::path(made).parent_path(), dir / "new" / "root");
  fs::remove_all(dir);
}

TEST(PrivateFile, APlantedSymlinkIsReplacedNeverFollowed) {
  const fs::path dir = tempDir("private_links");
  const fs::path victim = dir / "victim";
  std::ofstream(victim) << "victim";
  // At the file's name, and at its temporary name.
  fs::create_symlink(victim, dir / "run.json");
  fs::create_symlink(victim, dir / "run.json.tmp");
  EXPECT_EQ(opscope::writePrivateFile((dir / "run.json").string(), "{}\n"), "");
  EXPECT_EQ(contents(victim), "victim");
  EXPECT_FALSE(fs::is_symlink(dir / "run.json"));
  EXPECT_EQ(contents(dir / "run.json"), "{}\n");
  // createPrivateFile removes the link and makes a file of its own.
  fs::create_symlink(victim, dir / "trace.json.tmp");
  {
    opscope::UniqueFile f = opscope::createPrivateFile((dir / "trace.json.tmp").string());
    ASSERT_TRUE(f);
    std::fputs("[", f.get());
    EXPECT_EQ(opscope::closeChecked(std::move(f), "trace.json.tmp"), "");
  }
  EXPECT_EQ(contents(victim), "victim");
  EXPECT_EQ(contents(dir / "trace.json.tmp"), "[");
  fs::remove_all(dir);
}

// A FIFO, a directory or a device at the name is not a file to replace: refused with the reason, left as it
// was (`opscope report DIR --out FIFO` too); a regular file or a link is replaced as before.
TEST(PrivateFile, WhatIsNotARegularFileIsNeverReplaced) {
  const fs::path dir = tempDir("private_special");
  const fs::path fifo = dir / "page.html";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(opscope::writePrivateFile(fifo.string(), "<p>"),
            "cannot write " + fifo.string() + ": it is a FIFO, not replaced");
  EXPECT_TRUE(fs::is_fifo(fifo));
  fs::create_directory(dir / "folder");
  EXPECT_THAT(opscope::writePrivateFile((dir / "folder").string(), "x"), HasSubstr("it is a directory"));
  EXPECT_TRUE(fs::is_directory(dir / "folder"));
  EXPECT_FALSE(fs::exists(dir / "folder.tmp"));
  // A device node: one that exists on every Linux (it is only looked at, never written).
  EXPECT_THAT(opscope::writePrivateFile("/dev/null", "x"), HasSubstr("it is a device, not replaced"));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  const auto made = run({OPSCOPE_PATH, "run", "--capture", "--out", (dir / "runs").string(), "--",
                         MULTI_QUEUE_PROGRAM_PATH, "1", "2", "16"});
  ASSERT_EQ(made.exit_code, 0) << made.all();
  const fs::path result = fs::directory_iterator(dir / "runs")->path();
  const auto report = run({OPSCOPE_PATH, "report", result.string(), "--out", fifo.string()});
  EXPECT_NE(report.exit_code, 0) << report.all();
  EXPECT_THAT(report.err, HasSubstr("it is a FIFO, not replaced")) << report.all();
  EXPECT_TRUE(fs::is_fifo(fifo));
  std::ofstream(dir / "plain") << "old";
  EXPECT_EQ(opscope::writePrivateFile((dir / "plain").string(), "new"), "");
  EXPECT_EQ(contents(dir / "plain"), "new");
  fs::remove_all(dir);
}

TEST(PrivateFile, DirectoriesCannotBePredictedAndFailuresAreNamed) {
  const fs::path dir = tempDir("private_names");
  std::set<std::string> names;
  for (int i = 0; i < 20; ++i)
    names.insert(fs::path(opscope::createPrivateDir(dir.string(), "20261126-101010-42")).filename());
  EXPECT_EQ(names.size(), 20u);
  for (const auto& n : names) EXPECT_THAT(n, MatchesRegex("20261126-101010-42-[A-Za-z0-9]{6}"));
  // A parent that is a file: the reason, naming it.
  std::ofstream(dir / "file") << "x";
  try {
    opscope::createPrivateDir((dir / "file").string(), "run");
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr((dir / "file").string()));
  }
  EXPECT_THAT(opscope::writePrivateFile((dir / "missing" / "x").string(), "x"), HasSubstr("cannot write"));
  fs::remove_all(dir);
}

TEST(PrivateFile, TheRanksSharedRunFolderIsTakenOnlyWhenItIsPrivateAndOurs) {
  const fs::path dir = tempDir("shared_folder");
  const fs::path folder = dir / "deeper" / "mpi-job42";
  opscope::ensureSharedPrivateDir(folder.string());  // made (parents too), 0700
  opscope::ensureSharedPrivateDir(folder.string());  // another rank: taken as it is
  struct stat st {};
  ASSERT_EQ(::lstat(folder.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const auto refused = [&](const fs::path& p, const std::string& why) {
    try {
      opscope::ensureSharedPrivateDir(p.string());
      ADD_FAILURE() << p << ": no error";
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(), HasSubstr(why)) << p;
    }
  };
  fs::create_directory_symlink(folder, dir / "planted");
  refused(dir / "planted", "symbolic link: not followed");
  fs::create_directory(dir / "open");
  fs::permissions(dir / "open", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  refused(dir / "open", "open to other users (mode 750)");
  std::ofstream(dir / "file") << "x";
  refused(dir / "file", "is not a directory");
  fs::remove_all(dir);
}

TEST(RunInfo, RunFolderNamesComeFromTheJobAndAreSafe) {
  EXPECT_EQ(opscope::runFolderName("20261127-101010-77-ranks", "123", nullptr, nullptr, 5),
            "20261127-101010-77-ranks");
  EXPECT_EQ(opscope::runFolderName(nullptr, "1361969153", "99", nullptr, 5), "mpi-job1361969153");
  EXPECT_EQ(opscope::runFolderName("", "", "99", nullptr, 5), "mpi-job99");
  EXPECT_EQ(opscope::runFolderName(nullptr, nullptr, nullptr, "abc", 5), "torchrun-abc");
  EXPECT_EQ(opscope::runFolderName(nullptr, nullptr, nullptr, nullptr, 4242), "ranks-ppid4242");
  // A name from the environment never leaves the root: separators and dot-names are replaced.
  EXPECT_EQ(opscope::runFolderName("../../etc", nullptr, nullptr, nullptr, 1), ".._.._etc");
  EXPECT_EQ(opscope::runFolderName("..", nullptr, nullptr, nullptr, 1), "_..");
  EXPECT_EQ(opscope::runFolderName(nullptr, "a/b c", nullptr, nullptr, 1), "mpi-joba_b_c");
}

TEST(PrivateFile, OverwriteInPlaceKeepsTheLengthAndRefusesWhatItCannotDo) {
  const fs::path dir = tempDir("private_in_place");
  const fs::path file = dir / "run.json";
  std::ofstream(file) << "0123456789\n";
  EXPECT_EQ(opscope::overwriteInPlace(file.string(), "ab\n"), "");
  EXPECT_EQ(contents(file), "ab\n       \n");
  EXPECT_THAT(opscope::overwriteInPlace(file.string(), std::string(20, 'x')),
              HasSubstr("holds 11 bytes, 20"));
  EXPECT_EQ(contents(file), "ab\n       \n");  // untouched
  fs::create_symlink(file, dir / "link");
  EXPECT_THAT(opscope::overwriteInPlace((dir / "link").string(), "x"), HasSubstr("cannot open"));
  EXPECT_THAT(opscope::overwriteInPlace((dir / "missing").string(), "x"), HasSubstr("cannot open"));
  EXPECT_THAT(opscope::overwriteInPlace(dir.string(), "x"), HasSubstr("cannot open"));  // a directory: EISDIR
  EXPECT_EQ(contents(file), "ab\n       \n");
  fs::remove_all(dir);
}

// A real run under every tool and its report, with umask 000: nothing readable or writable by others.
TEST(PrivateFile, ARunUnderEveryToolWritesOnlyPrivateFiles) {
  const fs::path root = tempDir("private_run");
  const std::string command = fmt::format(
      "umask 000; {} run --capture --compare --profile --memcheck --out {} -- {} --steps 1 --batch-size 2 "
      "--no-eval && umask 000 && {} report {}/*",
      OPSCOPE_PATH, root.string(), MNIST_TRAIN_PATH, OPSCOPE_PATH, root.string());
  const auto r = run({"/bin/sh", "-c", command});
  ASSERT_EQ(r.exit_code, 0) << r.all();
  int dirs = 0, files = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    ++dirs;
    EXPECT_THAT(entry.path().filename().string(), MatchesRegex("[0-9]{8}-[0-9]{6}-[0-9]+-[A-Za-z0-9]{6}"));
    EXPECT_EQ(modeOf(entry.path()), 0700u) << entry.path();
    std::set<std::string> seen;
    for (const auto& file : fs::directory_iterator(entry.path())) {
      ++files;
      seen.insert(file.path().filename().string());
      EXPECT_EQ(modeOf(file.path()), 0600u) << file.path();
    }
    for (const char* name : {"run.json", "capture.db", "autocompare.csv", "trace.json", "summary.txt",
                             "time_measure.csv", "memcheck.json", "report.html"})
      EXPECT_TRUE(seen.count(name)) << name << " missing in " << entry.path();
  }
  EXPECT_EQ(dirs, 1);
  EXPECT_GE(files, 8);
  fs::remove_all(root);
}

// A symbolic link above the result directory (the result root is a link to a real folder, or lies under one)
// is followed: capture and auto-compare run and write there; a link inside the result directory is never
// followed (APlantedSymlinkIsReplacedNeverFollowed, and the capture database opened NOFOLLOW).
TEST(PrivateFile, ASymlinkAboveTheResultDirectoryIsFollowed) {
  const fs::path root = tempDir("linked_root");
  fs::create_directories(root / "real");
  fs::create_directory_symlink(root / "real", root / "link");
  const auto r = run({OPSCOPE_PATH, "run", "--compare", "--capture", "--out",
                      (root / "link" / "runs").string(), "--", MULTI_QUEUE_PROGRAM_PATH, "1", "2", "16"});
  ASSERT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.err, Not(HasSubstr("is off for this run"))) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("are off for this run"))) << r.err;
  int dirs = 0;
  for (const auto& entry : fs::directory_iterator(root / "real" / "runs")) {
    ++dirs;
    EXPECT_TRUE(fs::is_regular_file(entry.path() / "capture.db")) << entry.path();
    EXPECT_TRUE(fs::is_regular_file(entry.path() / "autocompare.csv")) << entry.path();
    const auto summary =
        run({OPSCOPE_PATH, "summary", (root / "link" / "runs" / entry.path().filename()).string()});
    EXPECT_THAT(summary.out, HasSubstr("tools: capture, compare, oom_snapshot (off:")) << summary.out;
  }
  EXPECT_EQ(dirs, 1);
  fs::remove_all(root);
}

// A full disk (a file-size limit of 100 KiB: writes past it fail with EFBIG) under capture, the profiler and
// memcheck: each file that could not be written is said on stderr, listed in run.json's "write_errors" and
// in `opscope summary`; no count is printed for a file that was not written; a tool that could not start
// (capture.db) is off, leaves no empty file and run.json says it did not run; the others' files are whole.
TEST(PrivateFile, AFullDiskIsSaidOnStderrInRunJsonAndInTheSummary) {
  const fs::path root = tempDir("full_disk");
  // The shell only sets the limit (SIGXFSZ ignored, so a write fails instead of killing), then becomes
  // mnist_train with the hook preloaded.
  const std::string command = fmt::format(
      "trap '' XFSZ; ulimit -f 100; exec env LD_PRELOAD={} OP_CAPTURE=1 OP_TIME_MEASURE=1 MEM_CHECK=1 "
      "OPSCOPE_RESULT_DIR={} {} --steps 3 --batch-size 8 --no-eval",
      LIBOPSCOPE_PATH, root.string(), MNIST_TRAIN_PATH);
  const auto r = run({"/bin/bash", "-c", command});
  ASSERT_EQ(r.exit_code, 0) << r.all();
  fs::path dir;
  for (const auto& entry : fs::directory_iterator(root)) dir = entry.path();
  ASSERT_FALSE(dir.empty());
  const std::string trace_error = "cannot write " + (dir / "trace.json.tmp").string() + ": File too large";
  EXPECT_THAT(r.err, HasSubstr("opscope: profiler: not written: " + trace_error));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("events in trace.json")));
  EXPECT_THAT(r.err, HasSubstr("table in summary.txt, calls in time_measure.csv"));
  EXPECT_THAT(r.err, HasSubstr("capture is off for this run"));
  EXPECT_FALSE(fs::exists(dir / "trace.json"));
  EXPECT_FALSE(fs::exists(dir / "capture.db"));
  for (const char* whole : {"summary.txt", "time_measure.csv", "memcheck.json", "run.json"})
    EXPECT_TRUE(fs::exists(dir / whole)) << whole;

  const auto info = nlohmann::json::parse(contents(dir / "run.json"), nullptr, false);
  ASSERT_TRUE(info.is_object()) << contents(dir / "run.json");
  EXPECT_EQ(info["ended"], "exit");
  EXPECT_EQ(info["tools"]["capture"], false);
  EXPECT_EQ(info["tools"]["profile"], true);
  ASSERT_TRUE(info["write_errors"].is_array());
  std::vector<std::string> errors = info["write_errors"];
  ASSERT_EQ(errors.size(), 2u) << info.dump();
  EXPECT_THAT(errors[0], HasSubstr("cannot create the capture database '" + (dir / "capture.db").string()));
  EXPECT_EQ(errors[1], trace_error);

  const auto summary = run({OPSCOPE_PATH, "summary", dir.string()});
  EXPECT_EQ(summary.exit_code, 0) << summary.all();
  EXPECT_THAT(summary.out, HasSubstr("warning: the run could not write all its results: " + trace_error));
  fs::remove_all(root);
}

// A real full disk: a 512 KiB tmpfs (mounted in a mount namespace of the run's own) that the trace fills.
// Every file that could not be written is said and listed; run.json, made with room to spare at the start,
// still gets its final version (ended, the write errors) although nothing new can be written.
TEST(PrivateFile, AFullFilesystemStillGetsTheFinalRunJson) {
  if (run({"/usr/bin/unshare", "--mount", "/bin/true"}).exit_code != 0)
    GTEST_SKIP() << "this machine does not allow mount namespaces (unshare --mount)";
  const fs::path mount = tempDir("full_fs");
  const std::string script = fmt::format(
      "mount -t tmpfs -o size=512k,mode=0700 tmpfs {0} || exit 99; "
      "env LD_PRELOAD={1} OP_TIME_MEASURE=1 MEM_CHECK=1 OPSCOPE_RESULT_DIR={0}/r {2} --steps 20 --batch-size "
      "8 "
      "--no-eval >/dev/null || exit 98; "
      "echo '=== run.json'; cat {0}/r/*/run.json; echo '=== files'; ls {0}/r/*; "
      "echo '=== summary'; {3} summary {0}/r/*",
      mount.string(), LIBOPSCOPE_PATH, MNIST_TRAIN_PATH, OPSCOPE_PATH);
  const auto r = run({"/usr/bin/unshare", "--mount", "/bin/bash", "-c", script});
  ASSERT_EQ(r.exit_code, 0) << r.all();
  auto section = [&](const std::string& name) {
    const std::size_t from = r.out.find("=== " + name + "\n");
    if (from == std::string::npos) return std::string();
    const std::size_t begin = from + name.size() + 5;
    return r.out.substr(begin, r.out.find("\n=== ", begin) - begin);
  };
  EXPECT_THAT(r.err, HasSubstr("trace.json.tmp: No space left on device"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("events in trace.json")));
  EXPECT_THAT(r.err, HasSubstr("run.json was written over its first version instead"));
  const auto info = nlohmann::json::parse(section("run.json"), nullptr, false);
  ASSERT_TRUE(info.is_object()) << r.out;
  EXPECT_EQ(info["ended"], "exit");
  std::string errors;
  for (const auto& e : info["write_errors"]) errors += e.get<std::string>() + "\n";
  for (const char* file : {"trace.json.tmp", "summary.txt.tmp", "memcheck.json.tmp", "run.json.tmp"})
    EXPECT_THAT(errors, HasSubstr(std::string(file) + ": No space left on device")) << file;
  EXPECT_THAT(section("files"), ::testing::Not(HasSubstr("trace.json\n")));
  const std::string summary = section("summary");
  EXPECT_THAT(summary, HasSubstr("ended: exit"));
  EXPECT_THAT(summary, HasSubstr("warning: the run could not write all its results: cannot write "));
  EXPECT_THAT(summary, HasSubstr("memory: unknown"));
  fs::remove_all(mount);
}
