// memcheck on real programs: examples/leaky's leak report against hand-worked sites and against valgrind's
// report of the same program on the C heap (leaky_host), each memory-error kind from memcheck_probe, threads
// on two devices, exit() from a thread, and the demos (no leak, no error, results unchanged).
#include "../support/chromium_page.h"
#include "../support/demo_runs.h"
#include "../support/result_files.h"
#include "../support/test_data.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>
#include "test_paths.h"

namespace opscope_test {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

Env memcheck(const fs::path& root, Env extra = {}) {
  Env env = preload(
      {{"MEM_CHECK", "1"}, {"MEM_CHECK_ENABLE_BACKTRACE", "1"}, {"OPSCOPE_RESULT_DIR", root.string()}});
  for (auto& kv : extra) env.push_back(kv);
  return env;
}

json readJson(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

std::string baseName(const std::string& path) { return fs::path(path).filename().string(); }

// A leak site as both reports can say it: bytes, allocations, and the innermost frame of the program
// (function, file name, line).
using Site = std::tuple<std::uint64_t, std::uint64_t, std::string, std::string, int>;

std::set<Site> memcheckSites(const json& report) {
  std::set<Site> sites;
  for (const json& leak : report.at("leaks")) {
    const json& top = leak.at("stack").at(0);
    sites.emplace(leak.at("bytes"), leak.at("allocations"), top.at("function"),
                  baseName(top.value("file", "")), top.value("line", 0));
  }
  return sites;
}

// The text between <tag> and </tag> from pos on, or "" (pos moves past it).
std::string xmlField(const std::string& xml, const std::string& tag, std::size_t from, std::size_t to) {
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  const auto a = xml.find(open, from);
  if (a == std::string::npos || a >= to) return {};
  const auto b = xml.find(close, a);
  return xml.substr(a + open.size(), b - a - open.size());
}

// valgrind --xml=yes: each Leak_DefinitelyLost error's bytes, blocks and first frame outside valgrind's
// preloaded allocator (its file by base name, as memcheckSites takes it: valgrind splits the path the
// compiler wrote, relative with ccache's base_dir or absolute without, into a dir and a file of its own).
std::set<Site> valgrindSites(const std::string& xml) {
  // By site (function, file, line): bytes and blocks of every leak kind, and whether one was definitely
  // lost. A block of a definitely lost site that a stale copy of its pointer (in a register, on the stack)
  // still reaches is reported apart, as still reachable or possibly lost: it is added to its site (one of
  // leakInLoop's 100 blocks was, in one CI run).
  struct Tally {
    std::uint64_t bytes = 0, blocks = 0;
    bool definitely = false;
  };
  std::map<std::tuple<std::string, std::string, int>, Tally> by_site;
  for (auto at = xml.find("<error>"); at != std::string::npos; at = xml.find("<error>", at + 1)) {
    const auto end = xml.find("</error>", at);
    const std::string kind = xmlField(xml, "kind", at, end);
    if (kind.rfind("Leak_", 0) != 0) continue;
    const std::uint64_t bytes = std::stoull(xmlField(xml, "leakedbytes", at, end));
    const std::uint64_t blocks = std::stoull(xmlField(xml, "leakedblocks", at, end));
    for (auto f = xml.find("<frame>", at); f != std::string::npos && f < end;
         f = xml.find("<frame>", f + 1)) {
      const auto f_end = xml.find("</frame>", f);
      if (xmlField(xml, "obj", f, f_end).find("vgpreload") != std::string::npos) continue;
      const std::string line = xmlField(xml, "line", f, f_end);
      std::string fn = xmlField(xml, "fn", f, f_end);
      // XML escapes in names: (anonymous namespace) has none, but operator<... would.
      for (const auto& [from, to] :
           {std::pair<std::string, std::string>{"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}}) {
        for (auto p = fn.find(from); p != std::string::npos; p = fn.find(from, p))
          fn.replace(p, from.size(), to);
      }
      Tally& t = by_site[{fn, baseName(xmlField(xml, "file", f, f_end)), line.empty() ? 0 : std::stoi(line)}];
      t.bytes += bytes;
      t.blocks += blocks;
      t.definitely = t.definitely || kind == "Leak_DefinitelyLost";
      break;
    }
  }
  std::set<Site> sites;
  for (const auto& [site, t] : by_site) {
    if (t.definitely)
      sites.emplace(t.bytes, t.blocks, std::get<0>(site), std::get<1>(site), std::get<2>(site));
  }
  return sites;
}

// The line of the source file that holds marker.
int lineOf(const std::string& file, const std::string& marker) {
  std::ifstream in(file);
  std::string text;
  for (int n = 1; std::getline(in, text); ++n) {
    if (text.find(marker) != std::string::npos) return n;
  }
  return 0;
}

// leaky's three leak sites, worked out from its source: bytes, allocations, innermost function and line.
std::set<Site> leakySites() {
  const std::string dir = std::string(OPSCOPE_SOURCE_DIR) + "/examples/leaky/";
  return {
      {65536, 1, "leaky::libraryLeak(unsigned long)", "leaky_lib.cpp",
       lineOf(dir + "leaky_lib.cpp", "site 1")},
      {4096, 1, "inlinedHelper", "leaky.cpp", lineOf(dir + "leaky.cpp", "site 2")},
      {102400, 100, "(anonymous namespace)::leakInLoop(int)", "leaky.cpp",
       lineOf(dir + "leaky.cpp", "site 3")},
  };
}

TEST(MemcheckLeaky, ReportsExactlyItsThreeLeakSites) {
  const fs::path root = tempDir("memcheck_leaky");
  const opscope_test::Run r = run({LEAKY_PATH}, memcheck(root));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err,
              HasSubstr("opscope memcheck: 172032 bytes leaked in 102 allocations from 3 sites; 0 memory "
                        "errors\n"));
  const fs::path dir = onlyResultDir(root);
  const json report = readJson(dir / "memcheck.json");
  EXPECT_EQ(memcheckSites(report), leakySites());
  EXPECT_EQ(report.at("errors").size(), 0u);
  // Largest first; the inlined helper is a frame of its own, inside the function it was inlined into.
  ASSERT_EQ(report.at("leaks").size(), 3u);
  EXPECT_EQ(report.at("leaks")[0].at("bytes"), 102400);
  EXPECT_EQ(report.at("leaks")[2].at("bytes"), 4096);
  const json& inlined = report.at("leaks")[2].at("stack");
  EXPECT_EQ(inlined[0].value("inlined", false), true);
  EXPECT_EQ(inlined[1].at("function"), "(anonymous namespace)::leakThroughInlinedHelper()");
  EXPECT_EQ(inlined[0].at("address"), inlined[1].at("address"));
  // The library's site is in its module; no frame of opscope itself is left.
  EXPECT_THAT(report.at("leaks")[1].at("stack")[0].at("module").get<std::string>(),
              HasSubstr("libleaky_lib.so"));
  for (const json& leak : report.at("leaks")) {
    for (const json& frame : leak.at("stack"))
      EXPECT_THAT(frame.at("module").get<std::string>(), ::testing::Not(HasSubstr("libopscope"))) << frame;
  }
  // The text report, in LeakSanitizer's layout.
  std::ifstream txt(dir / "memcheck.txt");
  std::stringstream text;
  text << txt.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("Leak of 102400 bytes in 100 allocations on MLU 0 from:\n    #0 0x"));
  EXPECT_THAT(text.str(),
              ::testing::ContainsRegex(
                  "Leak of 65536 bytes in 1 allocation on MLU 0 from:\n    #0 0x[0-9a-f]+ in "
                  "leaky::libraryLeak\\(unsigned long\\) [^ ]*examples/leaky/leaky_lib.cpp:[0-9]+\n"));
  EXPECT_THAT(text.str(), HasSubstr("opscope memcheck: 172032 bytes leaked in 102 allocations from 3 sites"));
  fs::remove_all(root);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// The same program built by clang, which writes no .debug_aranges (the index libdwfl looks addresses up
// in): its sites still have their files and lines, found from the compile units' own ranges. (Before,
// every frame of such a program had a function and no line.) With -g1 (as the sanitizer stages build
// everything with clang, leaky included) the inlined helper is a frame of its own; with -g, elfutils 0.188
// finds no scope in clang's DWARF 5, so the helper's line is in the function it was inlined into.
TEST(MemcheckLeaky, AClangBuiltProgramIsSymbolizedToItsLines) {
  if (std::system("command -v clang++ >/dev/null 2>&1") != 0) GTEST_SKIP() << "clang++ is not installed";
  const fs::path root = tempDir("memcheck_clang");
  const fs::path lib = fs::path(LEAKY_PATH).parent_path().parent_path() / "lib";
  const std::string source = std::string(OPSCOPE_SOURCE_DIR);
  for (const std::string debug : {"-g1", "-g"}) {
    SCOPED_TRACE(debug);
    const fs::path program = root / ("leaky_clang" + debug);
    const std::string build = "clang++ -O1 " + debug + " -std=c++20 -I" + source + "/runtime/include -o " +
                              program.string() + " " + source + "/examples/leaky/leaky.cpp " +
                              (lib / "libleaky_lib.so").string() + " " + (lib / "libmlurt.so").string() +
                              " -Wl,-rpath," + lib.string();
    ASSERT_EQ(std::system(build.c_str()), 0) << build;
    ASSERT_NE(std::system(("readelf -S " + program.string() + " | grep -q debug_aranges").c_str()), 0)
        << "clang wrote .debug_aranges: this test no longer tests the fallback";
    const fs::path results = root / debug;
    const opscope_test::Run r = run({program.string()}, memcheck(results));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json report = readJson(onlyResultDir(results) / "memcheck.json");
    std::set<Site> expected = leakySites();
    if (debug == "-g") {
      auto helper = std::find_if(expected.begin(), expected.end(),
                                 [](const Site& s) { return std::get<2>(s) == "inlinedHelper"; });
      ASSERT_NE(helper, expected.end());
      Site outer = *helper;
      std::get<2>(outer) = "(anonymous namespace)::leakThroughInlinedHelper()";
      expected.erase(helper);
      expected.insert(outer);
    }
    EXPECT_EQ(memcheckSites(report), expected) << report.dump();
  }
  fs::remove_all(root);
}
#endif

TEST(MemcheckLeaky, AgreesWithValgrindOnTheSameProgramOnTheHeap) {
  if (std::string(VALGRIND_PATH).empty()) GTEST_SKIP() << "valgrind is not installed";
  const fs::path root = tempDir("memcheck_valgrind");
  const fs::path xml = root / "valgrind.xml";
  const opscope_test::Run vg = run({VALGRIND_PATH, "--leak-check=full", "--show-leak-kinds=all", "--xml=yes",
                                    "--xml-file=" + xml.string(), LEAKY_HOST_PATH},
                                   {{"LD_PRELOAD", ""}});
  ASSERT_EQ(vg.exit_code, 0) << vg.all();
  std::ifstream in(xml);
  std::stringstream text;
  text << in.rdbuf();
  const std::set<Site> oracle = valgrindSites(text.str());
  ASSERT_EQ(oracle.size(), 3u) << text.str();
  const opscope_test::Run r = run({LEAKY_PATH}, memcheck(root));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(memcheckSites(readJson(onlyResultDir(root) / "memcheck.json")), oracle);
  fs::remove_all(root);
}

TEST(MemcheckLeaky, WithoutBacktracesLeaksAreCountedPerDevice) {
  const fs::path root = tempDir("memcheck_nobt");
  const opscope_test::Run r =
      run({LEAKY_PATH}, preload({{"MEM_CHECK", "1"}, {"OPSCOPE_RESULT_DIR", root.string()}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("opscope memcheck: 172032 bytes leaked in 102 allocations from 1 sites"));
  const json report = readJson(onlyResultDir(root) / "memcheck.json");
  ASSERT_EQ(report.at("leaks").size(), 1u);
  EXPECT_TRUE(report.at("leaks")[0].at("stack").empty());
  // Peak: everything leaked plus the largest pair noLeak() holds at once (8192 + 300 bytes).
  ASSERT_FALSE(report.at("peaks").empty());
  bool device = false;
  for (const json& p : report.at("peaks")) {
    if (p.at("place") != "MLU 0") continue;
    device = true;
    EXPECT_EQ(p.at("bytes"), 172032 + 8192 + 300);
  }
  EXPECT_TRUE(device);
  // The timeline: a row per allocation and free. On MLU 0, noLeak() twice (two allocations and two frees
  // each) and the 102 leaked allocations; pinned memory: noLeak()'s allocation and free, twice.
  std::ifstream csv(onlyResultDir(root) / "memcheck_timeline.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "time_ms,op_seq,place,bytes");
  std::map<std::string, std::vector<std::uint64_t>> bytes;
  double previous_ms = 0;
  while (std::getline(csv, line)) {
    // Milliseconds since the tool started, in the order the calls were made (one thread).
    const double time_ms = std::stod(line.substr(0, line.find(',')));
    EXPECT_GE(time_ms, previous_ms) << line;
    previous_ms = time_ms;
    const auto last = line.rfind(',');
    const auto place = line.rfind(',', last - 1);
    bytes[line.substr(place + 1, last - place - 1)].push_back(std::stoull(line.substr(last + 1)));
  }
  EXPECT_EQ(bytes["MLU 0"].size(), 8u + 102u);
  EXPECT_EQ(bytes["MLU 0"].back(), 172032u);
  EXPECT_EQ(*std::max_element(bytes["MLU 0"].begin(), bytes["MLU 0"].end()), 172032u + 8192u + 300u);
  EXPECT_EQ(bytes["pinned host memory"], (std::vector<std::uint64_t>{4096, 0, 4096, 0}));
  fs::remove_all(root);
}

struct ErrorCase {
  std::string mode, kind, function, message;
  bool freed_before;  // the earlier free's backtrace is shown
  bool allocated;     // the allocation's backtrace is shown
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.mode; }

class MemcheckErrors : public ::testing::TestWithParam<ErrorCase> {};

void expectReportedOnce(const ErrorCase& c, const std::string& setting, const Env& extra,
                        bool device_frees_unwound = true) {
  const fs::path root = tempDir("memcheck_" + c.mode + setting);
  const opscope_test::Run r = run({MEMCHECK_PROBE_PATH, c.mode}, memcheck(root, extra));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("accepted"))) << "the runtime refuses the bad free too";
  const std::string header = "opscope memcheck: ERROR: " + c.kind + ": ";
  const auto at = r.err.find(header);
  ASSERT_NE(at, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(header, at + 1), std::string::npos) << "reported twice:\n" << r.err;
  EXPECT_THAT(r.err.substr(at), HasSubstr(c.message));
  EXPECT_THAT(r.err.substr(at), ::testing::ContainsRegex("\n    #0 0x[0-9a-f]+ in [^\n]*" + c.function));
  const bool freed_before = c.freed_before && (device_frees_unwound || c.mode == "host-double-free");
  EXPECT_EQ(r.err.find("freed before at:\n    #0") != std::string::npos, freed_before) << r.err;
  EXPECT_EQ(r.err.find("allocated at:\n    #0") != std::string::npos, c.allocated) << r.err;
  const json report = readJson(onlyResultDir(root) / "memcheck.json");
  ASSERT_EQ(report.at("errors").size(), 1u);
  EXPECT_EQ(report.at("errors")[0].at("kind"), c.kind);
  EXPECT_EQ(report.at("leaks").size(), 0u) << "every allocation was freed";
  EXPECT_THAT(r.err, HasSubstr("0 bytes leaked in 0 allocations from 0 sites; 1 memory error\n"));
  fs::remove_all(root);
}

TEST_P(MemcheckErrors, AreReportedOnceWithTheirBacktraces) { expectReportedOnce(GetParam(), "", {}); }

// With the table only (no red zones, no quarantine) memcheck lets the runtime make the frees: the same
// errors, found from the table, except that a good device free is not unwound (the cost heaptrack does not
// pay either), so a double free of device memory shows the allocation and the second free, not the first.
TEST_P(MemcheckErrors, AreReportedTheSameWithTheTableOnly) {
  expectReportedOnce(GetParam(), "_table", {{"MEM_CHECK_REDZONE", "0"}, {"MEM_CHECK_QUARANTINE_MB", "0"}},
                     false);
}

INSTANTIATE_TEST_SUITE_P(
    Memcheck, MemcheckErrors,
    ::testing::Values(
        ErrorCase{"double-free", "double-free", "freeTwice",
                  "a 4096-byte allocation on MLU 0 that was already freed", true, true},
        ErrorCase{"host-double-free", "double-free", "hostDoubleFree", "mlurtHostFree of 0x", true, true},
        ErrorCase{"invalid-free", "invalid-free", "invalidFree", "which was never allocated", false, false},
        ErrorCase{"interior-free", "interior-free", "interiorFree",
                  "256 bytes inside a 4096-byte allocation on MLU 0", false, true},
        ErrorCase{"mismatched-free", "alloc-dealloc-mismatch", "mismatchedFree",
                  "a 2048-byte allocation on pinned host memory made by mlurtHostMalloc (free it with "
                  "mlurtHostFree)",
                  false, true}),
    [](const auto& info) {
      std::string name = info.param.mode;
      std::erase(name, '-');
      return name;
    });

// MEM_CHECK_INIT=1: an op or a device-to-host copy that reads bytes nothing wrote since their allocation is
// an uninitialized read, named with the bytes and the allocation's backtrace; a fully written input is not,
// and without MEM_CHECK_INIT nothing is checked.
TEST(MemcheckErrors, UninitializedReadsAreReportedWithMemCheckInit) {
  struct Case {
    std::string mode, message;  // message: "" for none
  };
  const std::vector<Case> cases = {
      {"uninit-read",
       "relu #1 reads input x: bytes 0..4096 of a 4096-byte allocation on MLU 0 were never "
       "written since it was allocated"},
      {"partial-write",
       "relu #1 reads input x: bytes 2048..4096 of a 4096-byte allocation on MLU 0 were "
       "never written"},
      {"uninit-copy", "mlurtMemcpy reads 256 bytes from 0x"},
      {"all-written", ""},
  };
  for (const Case& c : cases) {
    for (const bool init : {true, false}) {
      const fs::path root = tempDir("memcheck_init_" + c.mode);
      const opscope_test::Run r =
          run({MEMCHECK_PROBE_PATH, c.mode}, memcheck(root, init ? Env{{"MEM_CHECK_INIT", "1"}} : Env{}));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const json report = readJson(onlyResultDir(root) / "memcheck.json");
      if (!init || c.message.empty()) {
        EXPECT_THAT(r.err, ::testing::Not(HasSubstr("uninitialized-read"))) << c.mode;
        EXPECT_EQ(report.at("errors").size(), 0u) << c.mode;
      } else {
        const auto at = r.err.find("opscope memcheck: ERROR: uninitialized-read: ");
        ASSERT_NE(at, std::string::npos) << r.err;
        EXPECT_THAT(r.err.substr(at), HasSubstr(c.message));
        EXPECT_THAT(r.err.substr(at), HasSubstr("allocated at:\n    #0"));
        EXPECT_THAT(r.err.substr(at), ::testing::ContainsRegex("\n    #[0-9] 0x[0-9a-f]+ in [^\n]*initCase"));
        ASSERT_EQ(report.at("errors").size(), 1u) << r.err;
        EXPECT_EQ(report.at("errors")[0].at("kind"), "uninitialized-read");
        const opscope_test::Run summary = run({OPSCOPE_PATH, "summary", onlyResultDir(root).string()});
        EXPECT_THAT(summary.out,
                    HasSubstr("  UNINITIALIZED READ: 1 site read device bytes nothing wrote; first: "));
      }
      fs::remove_all(root);
    }
  }
}

// MEM_CHECK_RACE=1: relu reading x on queue 2 while a copy into x waits on queue 1 behind a host function
// is a race (and computes garbage); with a notifier between them it is neither. Without the variable nothing
// is checked.
TEST(MemcheckErrors, RacesBetweenQueuesAreReportedWithMemCheckRace) {
  for (const std::string mode : {"race", "race-ordered"}) {
    for (const bool race : {true, false}) {
      const fs::path root = tempDir("memcheck_" + mode);
      const opscope_test::Run r =
          run({MEMCHECK_PROBE_PATH, mode}, memcheck(root, race ? Env{{"MEM_CHECK_RACE", "1"}} : Env{}));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const json report = readJson(onlyResultDir(root) / "memcheck.json");
      if (mode == "race" && race) {
        // (How many outputs the race spoils depends on the machine's load: the report does not.)
        EXPECT_THAT(r.out, HasSubstr(" of 4096 outputs wrong"));
        const auto at = r.err.find("opscope memcheck: ERROR: race: ");
        ASSERT_NE(at, std::string::npos) << r.err;
        EXPECT_THAT(
            r.err.substr(at),
            ::testing::ContainsRegex("race: relu #1 reads x on queue [0-9]+, and mlurtMemcpyAsync writes "
                                     "its destination on queue [0-9]+ \\(called before it\\): bytes "
                                     "0..16384 of a 16384-byte allocation on MLU 0; nothing orders"));
        // Printed when first found; memcheck.txt, at the end, counts the second relu's.
        EXPECT_THAT(readFile(onlyResultDir(root) / "memcheck.txt"),
                    ::testing::ContainsRegex("would\\) \\(2 times\\)\n"));
        EXPECT_THAT(r.err.substr(at), HasSubstr("allocated at:\n    #0"));
        ASSERT_EQ(report.at("errors").size(), 1u) << r.err;
        EXPECT_EQ(report.at("errors")[0].at("kind"), "race");
        EXPECT_EQ(report.at("errors")[0].at("count"), 2);
        const opscope_test::Run summary = run({OPSCOPE_PATH, "summary", onlyResultDir(root).string()});
        EXPECT_THAT(summary.out,
                    HasSubstr("  RACE: 1 pair of accesses on different queues that nothing orders"));
      } else {
        EXPECT_THAT(r.err, ::testing::Not(HasSubstr("ERROR: race"))) << mode;
        EXPECT_EQ(report.at("errors").size(), 0u) << mode;
      }
      if (mode == "race-ordered") {
        EXPECT_THAT(r.out, HasSubstr("memcheck_probe: 0 of 4096 outputs wrong"));
      }
      fs::remove_all(root);
    }
  }
}

// Two writers of one buffer on two queues, and a copy on the wrong stream of what an op writes: each a race
// naming both accesses.
TEST(MemcheckErrors, WritersOnTwoQueuesAndACopyOnTheWrongStreamAreRaces) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"race-two-writers",
       "race: fill #3 writes y on queue [0-9]+, and fill #2 writes y on queue [0-9]+ "
       "\\(called before it\\): bytes 0..4096 of a 4096-byte allocation"},
      {"race-copy-stream",
       "race: mlurtMemcpyAsync reads its source on queue [0-9]+, and relu #2 writes y on "
       "queue [0-9]+ \\(called before it\\): bytes 0..4096 of a 4096-byte allocation"},
  };
  for (const auto& [mode, expected] : cases) {
    const fs::path root = tempDir("memcheck_" + mode);
    const opscope_test::Run r = run({MEMCHECK_PROBE_PATH, mode}, memcheck(root, {{"MEM_CHECK_RACE", "1"}}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, ::testing::ContainsRegex(expected)) << r.err;
    EXPECT_EQ(readJson(onlyResultDir(root) / "memcheck.json").at("errors").size(), 1u) << r.err;
    fs::remove_all(root);
  }
}

// Host code reading pinned memory that an asynchronous copy on queue 1 writes, said by opscope_host_access:
// from a host function on queue 2, and from the host thread, each a race naming both accesses and what
// would order them; with a notifier (a queue sync) first, none, and the read sees the copy's bytes.
TEST(MemcheckErrors, HostCodeReadingWhatAQueueWritesIsARace) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"race-host-func",
       "race: a host function on queue [0-9]+ reads 4096 bytes \\(opscope_host_access\\), and "
       "mlurtMemcpyAsync writes its destination \\(pinned host memory\\) on queue [0-9]+ \\(called before "
       "it\\): bytes 0..4096 of a 4096-byte allocation on pinned host memory; nothing orders the two on the "
       "device \\(a notifier"},
      {"race-host-read",
       "race: host thread [0-9]+ reads 4096 bytes \\(opscope_host_access\\), and mlurtMemcpyAsync writes "
       "its destination \\(pinned host memory\\) on queue [0-9]+ \\(called before it\\): bytes 0..4096 "
       "of a 4096-byte allocation on pinned host memory; nothing orders the two \\(the thread waiting for "
       "the "
       "queue's work first would: mlurtQueueSync"},
  };
  for (const auto& [mode, expected] : cases) {
    for (const bool ordered : {false, true}) {
      const std::string m = mode + (ordered ? "-ordered" : "");
      const fs::path root = tempDir("memcheck_" + m);
      const opscope_test::Run r = run({MEMCHECK_PROBE_PATH, m}, memcheck(root, {{"MEM_CHECK_RACE", "1"}}));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const json errors = readJson(onlyResultDir(root) / "memcheck.json").at("errors");
      if (ordered) {
        EXPECT_EQ(errors.size(), 0u) << m << r.err;
        EXPECT_THAT(r.out, HasSubstr("the host read zeros (the copy's)")) << m;
      } else {
        EXPECT_THAT(r.err, ::testing::ContainsRegex(expected)) << r.err;
        ASSERT_EQ(errors.size(), 1u) << r.err;
        EXPECT_EQ(errors[0].at("kind"), "race");
      }
      fs::remove_all(root);
    }
  }
}

TEST(MemcheckErrors, AbortOnErrorStopsAtTheFirst) {
  const fs::path root = tempDir("memcheck_abort");
  const opscope_test::Run r =
      run({MEMCHECK_PROBE_PATH, "double-free"},
          memcheck(root, {{"MEM_CHECK_ABORT_ON_ERROR", "1"}, kSanitizerCrashOptions}));
  EXPECT_EQ(r.signal, SIGABRT) << r.err;
  EXPECT_THAT(r.err, HasSubstr("MEM_CHECK_ABORT_ON_ERROR=1: aborting"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("no leak report")))
      << "the report was written before the abort";
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("done")));
  EXPECT_EQ(readJson(onlyResultDir(root) / "memcheck.json").at("errors").size(), 1u);
  const opscope_test::Run bad =
      run({MEMCHECK_PROBE_PATH, "double-free"}, memcheck(root, {{"MEM_CHECK_ABORT_ON_ERROR", "yes please"}}));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("MEM_CHECK_ABORT_ON_ERROR"));
  fs::remove_all(root);
}

// Four threads on two devices: each thread's leaks are one site (its stack is the same function, the sizes
// tell the threads apart), on its own device.
TEST(MemcheckThreads, LeaksOfEachThreadAndDevice) {
  const fs::path root = tempDir("memcheck_threads");
  const opscope_test::Run r =
      run({MEMCHECK_PROBE_PATH, "threads"}, memcheck(root, {{"MLU_SIM_DEVICE_COUNT", "2"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = readJson(onlyResultDir(root) / "memcheck.json");
  std::map<std::pair<std::string, std::uint64_t>, std::uint64_t> found;  // (place, allocations) -> bytes
  for (const json& leak : report.at("leaks")) {
    found[{leak.at("place"), leak.at("allocations")}] = leak.at("bytes");
    EXPECT_THAT(leak.at("stack")[1].at("function").get<std::string>(), HasSubstr("leakOnThread")) << leak;
  }
  // Thread t: t + 1 allocations of 1000 (t + 1) bytes on device t % 2; threads 0 and 2 share device 0 and a
  // site, as do 1 and 3.
  const std::map<std::pair<std::string, std::uint64_t>, std::uint64_t> expected = {
      {{"MLU 0", 1 + 3}, 1 * 1000 + 3 * 3000},
      {{"MLU 1", 2 + 4}, 2 * 2000 + 4 * 4000},
  };
  EXPECT_EQ(found, expected) << report.dump(1);
  EXPECT_THAT(r.err, HasSubstr("opscope memcheck: 30000 bytes leaked in 10 allocations from 2 sites"));
  fs::remove_all(root);
}

TEST(MemcheckThreads, ExitFromAnotherThreadWritesTheReport) {
  const fs::path root = tempDir("memcheck_exit");
  const opscope_test::Run r = run({MEMCHECK_PROBE_PATH, "exit-thread"}, memcheck(root));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = readJson(onlyResultDir(root) / "memcheck.json");
  ASSERT_EQ(report.at("leaks").size(), 1u);
  EXPECT_EQ(report.at("leaks")[0].at("bytes"), 3 * 512);
  // deviceAlloc (inlined), then the function that called it.
  EXPECT_THAT(report.at("leaks")[0].at("stack")[1].at("function").get<std::string>(),
              HasSubstr("leakThenExit"));
  fs::remove_all(root);
}

// Every ERROR block of a run's stderr, by kind.
std::multimap<std::string, std::string> errorBlocks(const std::string& err) {
  std::multimap<std::string, std::string> blocks;
  const std::string head = "opscope memcheck: ERROR: ";
  for (auto at = err.find(head); at != std::string::npos;) {
    const auto next = err.find("\nopscope", at + 1);
    const std::string block =
        err.substr(at + head.size(), next == std::string::npos ? next : next - at - head.size());
    blocks.emplace(block.substr(0, block.find_first_of(": ")), block);
    at = next == std::string::npos ? next : err.find(head, next);
  }
  return blocks;
}

// An op and a copy into freed memory: both named, with the free's and the allocation's backtraces; the
// quarantine kept the block, so nothing else broke.
TEST(MemcheckErrors, UseAfterFreeByAnOpAndByACopy) {
  const fs::path root = tempDir("memcheck_uaf");
  const opscope_test::Run r = run({MEMCHECK_PROBE_PATH, "use-after-free"}, memcheck(root));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto blocks = errorBlocks(r.err);
  ASSERT_EQ(blocks.count("use-after-free"), 2u) << r.err;
  auto it = blocks.find("use-after-free");
  const std::string op = it->second, copy = std::next(it)->second;
  EXPECT_THAT(op, ::testing::ContainsRegex("fill #1 argument y at 0x[0-9a-f]+ is 0 bytes inside a 4096-byte "
                                           "allocation on MLU 0 that was freed"));
  EXPECT_THAT(op, ::testing::ContainsRegex("\n    #1 0x[0-9a-f]+ in [^\n]*useAfterFree"));
  EXPECT_THAT(copy, ::testing::ContainsRegex("mlurtMemcpy writes 0x[0-9a-f]+, 128 bytes inside a 4096-byte"));
  for (const std::string& block : {op, copy}) {
    EXPECT_THAT(block,
                ::testing::ContainsRegex("freed before at:\n    #0 0x[0-9a-f]+ in [^\n]*useAfterFree"));
    EXPECT_THAT(block, HasSubstr("allocated at:\n    #0 "));
  }
  EXPECT_EQ(blocks.size(), 2u) << r.err;
  EXPECT_THAT(r.out, HasSubstr("done"));
  fs::remove_all(root);
}

// memcheck_probe's fill of 1030 floats into 4096 bytes: an out-of-bounds argument before the op, and the 24
// bytes it wrote into the red zone after it, each reported once.
void expectFillPastTheEnd(const std::string& err) {
  const auto blocks = errorBlocks(err);
  ASSERT_EQ(blocks.count("out-of-bounds-argument"), 1u) << err;
  EXPECT_THAT(
      blocks.find("out-of-bounds-argument")->second,
      ::testing::ContainsRegex("fill #1 argument y spans 4120 bytes from 0x[0-9a-f]+, 24 bytes past the "
                               "end of a 4096-byte allocation on MLU 0"));
  ASSERT_EQ(blocks.count("heap-buffer-overflow"), 1u) << err;
  EXPECT_THAT(blocks.find("heap-buffer-overflow")->second,
              HasSubstr("heap-buffer-overflow on MLU 0: 24 bytes past the end of a 4096-byte allocation, "
                        "written by fill #1\n"));
}

// A tensor that runs 24 bytes past its allocation: refused by memcheck's check before the op (an
// out-of-bounds argument) and seen in the red zone after it (a heap-buffer-overflow by the op).
TEST(MemcheckErrors, OutOfBoundsArgumentAndTheOverflowItWrites) {
  const fs::path root = tempDir("memcheck_oob");
  const opscope_test::Run r = run({MEMCHECK_PROBE_PATH, "oob-argument"}, memcheck(root));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expectFillPastTheEnd(r.err);
  fs::remove_all(root);
}

TEST(MemcheckErrors, CopyPastTheEndOfAnAllocation) {
  const fs::path root = tempDir("memcheck_memcpy");
  const opscope_test::Run r = run({MEMCHECK_PROBE_PATH, "memcpy-overflow"}, memcheck(root));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto blocks = errorBlocks(r.err);
  ASSERT_EQ(blocks.size(), 1u) << r.err;
  EXPECT_THAT(blocks.begin()->second,
              ::testing::ContainsRegex("heap-buffer-overflow on MLU 0: mlurtMemcpy reads 4100 bytes from "
                                       "0x[0-9a-f]+, 4 bytes past the end of a 4096-byte allocation"));
  EXPECT_THAT(blocks.begin()->second,
              ::testing::ContainsRegex("\n    #0 0x[0-9a-f]+ in [^\n]*memcpyOverflow"));
  fs::remove_all(root);
}

// An asynchronous memset past the end: named when it is enqueued, and its bytes in the red zone found again
// when the block's red zones are checked after the free (at exit here), with the free's backtrace.
TEST(MemcheckErrors, AnOverflowIsFoundAgainAfterTheFree) {
  const fs::path root = tempDir("memcheck_memset");
  const opscope_test::Run r = run({MEMCHECK_PROBE_PATH, "memset-overflow"}, memcheck(root));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto blocks = errorBlocks(r.err);
  ASSERT_EQ(blocks.count("heap-buffer-overflow"), 2u) << r.err;
  auto it = blocks.find("heap-buffer-overflow");
  const std::string first = it->second, second = std::next(it)->second;
  EXPECT_THAT(first + second,
              ::testing::ContainsRegex("on MLU 0: mlurtMemsetAsync writes 4100 bytes from 0x[0-9a-f]+, 4 "
                                       "bytes past the end of a 4096-byte allocation\n"));
  EXPECT_THAT(first + second,
              ::testing::ContainsRegex("on MLU 0: 4 bytes past the end of a 4096-byte allocation, found "
                                       "after it was freed at:\n    #0 0x[0-9a-f]+ in "
                                       "[^\n]*memsetOverflow"));
  EXPECT_EQ(readJson(onlyResultDir(root) / "memcheck.json").at("errors").size(), 2u);
  fs::remove_all(root);
}

// MLU_SIM_FAULT=relu:oob=4: each relu writes 4 bytes past its output. Reported as a heap-buffer-overflow
// by relu with the number OP_DUMP_ARGS gives its first call, once per call site (mnist calls relu from
// three places in its forward pass), and the results are unchanged (the red zone took the bytes).
TEST(MemcheckErrors, AnOpWritingPastItsOutputIsNamed) {
  const fs::path root = tempDir("memcheck_relu_oob");
  const opscope_test::Run r = run(mnistCommand(MNIST_TRAIN_PATH, 2, 4),
                                  memcheck(root, {{"MLU_SIM_FAULT", "relu:oob=4"}, {"OP_DUMP_ARGS", "1"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto at = r.err.find(" relu (mluopRelu)");
  ASSERT_NE(at, std::string::npos) << r.err;
  const std::string seq = r.err.substr(r.err.rfind('#', at) + 1, at - r.err.rfind('#', at) - 1);
  const auto blocks = errorBlocks(r.err);
  ASSERT_EQ(blocks.count("heap-buffer-overflow"), 3u) << r.err;
  EXPECT_EQ(blocks.size(), 3u) << r.err;
  EXPECT_THAT(blocks.find("heap-buffer-overflow")->second,
              ::testing::ContainsRegex("heap-buffer-overflow on MLU 0: 4 bytes past the end of a [0-9]+-byte "
                                       "allocation, written by relu #" +
                                       seq +
                                       "\n    #0 0x[0-9a-f]+ in "
                                       "examples::Ops::relu"));
  const json report = readJson(onlyResultDir(root) / "memcheck.json");
  EXPECT_EQ(report.at("errors").size(), 3u);
  EXPECT_EQ(report.at("leaks").size(), 0u);
  const opscope_test::Run plain =
      run(mnistCommand(MNIST_TRAIN_PATH, 2, 4), {{"MLU_SIM_FAULT", "relu:oob=4"}});
  EXPECT_EQ(losses(r.out), losses(plain.out));
  fs::remove_all(root);
}

// A program's own allocator announcing its pieces (opscope.h): every error is the piece's, not the 64 KiB
// block's — the fill past piece A's end (an out-of-bounds argument, and the bytes its red zone in the
// allocator's padding took), B's double free, the fill of A after its free — and the only leak is piece C,
// at its own site; the block the pieces came from, never freed, is a pool and not a leak.
TEST(MemcheckPool, ErrorsAndLeaksArePerPieceAndThePoolIsNoLeak) {
  const fs::path root = tempDir("memcheck_pool");
  const opscope_test::Run r = run({MEMCHECK_PROBE_PATH, "pool"}, memcheck(root));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expectFillPastTheEnd(r.err);
  const auto blocks = errorBlocks(r.err);
  ASSERT_EQ(blocks.count("double-free"), 1u) << r.err;
  EXPECT_THAT(blocks.find("double-free")->second,
              ::testing::ContainsRegex("opscope_pool_free of 0x[0-9a-f]+, a 1024-byte allocation on MLU 0 "
                                       "that was already freed"));
  EXPECT_THAT(blocks.find("double-free")->second,
              ::testing::ContainsRegex(
                  "allocated at:\n    #0 0x[0-9a-f]+ in opscope_pool_alloc [^\n]*opscope.h:[0-9]+\n"
                  "    #1 0x[0-9a-f]+ in [^\n]*Pool::piece"));
  ASSERT_EQ(blocks.count("use-after-free"), 1u) << r.err;
  EXPECT_THAT(blocks.find("use-after-free")->second,
              ::testing::ContainsRegex("fill #2 argument y at 0x[0-9a-f]+ is 0 bytes inside a 4096-byte "
                                       "allocation on MLU 0 that was freed"));
  EXPECT_EQ(blocks.size(), 4u) << r.err;
  const json report = readJson(onlyResultDir(root) / "memcheck.json");
  ASSERT_EQ(report.at("leaks").size(), 1u) << report.dump(2);
  const json& leak = report.at("leaks").at(0);
  EXPECT_EQ(leak.at("bytes"), 2048);
  EXPECT_EQ(leak.at("allocations"), 1);
  bool kept = false;
  for (const json& frame : leak.at("stack"))
    kept = kept || frame.value("function", "").find("keptPiece") != std::string::npos;
  EXPECT_TRUE(kept) << leak.dump(2);
  EXPECT_THAT(r.err, HasSubstr("2048 bytes leaked in 1 allocations from 1 sites"));
  // Without the hook the annotations do nothing and the program runs the same.
  const opscope_test::Run plain = run({MEMCHECK_PROBE_PATH, "pool"});
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_THAT(plain.out, HasSubstr("done"));
  fs::remove_all(root);
}

// A piece handed out again while work queued before its free still writes the old piece's bytes
// (stream-ordered reuse): memcheck paints the new piece's red zone after that work, so it is no overflow.
TEST(MemcheckPool, StreamOrderedReuseIsNoOverflow) {
  const fs::path root = tempDir("memcheck_pool_reuse");
  const opscope_test::Run r = run({MEMCHECK_PROBE_PATH, "pool-reuse"}, memcheck(root));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("; 0 memory errors")) << r.err;
  EXPECT_THAT(r.out, HasSubstr("done"));
  fs::remove_all(root);
}

// opscope run --memcheck: memcheck with backtraces, the program's exit status, the report in --out.
TEST(MemcheckLauncher, RunMemcheckWritesTheReport) {
  const fs::path root = tempDir("memcheck_launcher");
  const opscope_test::Run r =
      run({OPSCOPE_PATH, "run", "--memcheck", "--out", root.string(), "--", LEAKY_PATH},
          {{"OPSCOPE_HOOK_LIB", LIBOPSCOPE_PATH}});
  ASSERT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.err, HasSubstr("opscope memcheck: 172032 bytes leaked in 102 allocations from 3 sites"));
  EXPECT_EQ(memcheckSites(readJson(onlyResultDir(root) / "memcheck.json")), leakySites());
  fs::remove_all(root);
}

// The demos free everything, make no memory error, and compute the same losses with memcheck on.
TEST(MemcheckDemos, NoLeakNoErrorAndBitIdenticalResults) {
  const fs::path root = tempDir("memcheck_demos");
  for (const auto& command : {mnistCommand(MNIST_TRAIN_PATH, 3, 8), llamaCommand(LLAMA_TRAIN_PATH, 3)}) {
    const opscope_test::Run plain = run(command);
    const opscope_test::Run checked = run(command, memcheck(root));
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    ASSERT_EQ(checked.exit_code, 0) << checked.err;
    EXPECT_EQ(losses(checked.out), losses(plain.out)) << command[0];
    EXPECT_FALSE(losses(plain.out).empty());
    EXPECT_THAT(checked.err,
                HasSubstr("opscope memcheck: 0 bytes leaked in 0 allocations from 0 sites; 0 memory "
                          "errors\n"));
    EXPECT_THAT(checked.err, ::testing::ContainsRegex(
                                 "opscope memcheck: peak on MLU 0: [1-9][0-9]* bytes after op #[1-9]"));
  }
  fs::remove_all(root);
}

// MLU_SIM_MEMORY_MB=256 and a batch whose activations do not fit: mnist_train's mlurtMalloc fails, and
// memcheck leaves memory_snapshot.json naming the failed request (its size, where the program asked) and
// what was live then, by site; `opscope summary` and the report say so. memcheck's own quarantine is given
// back before a request is refused: a batch that fits without memcheck fits with it.
TEST(MemcheckOutOfMemory, AFailedAllocationLeavesASnapshotOfWhatWasLive) {
  const fs::path root = tempDir("memcheck_oom");
  const opscope_test::Run r =
      run(mnistCommand(MNIST_TRAIN_PATH, 1, 2048),
          memcheck(root, {{"MLU_SIM_MEMORY_MB", "256"}, {"MEM_CHECK_ENABLE_BACKTRACE", "1"}}));
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err,
              ::testing::ContainsRegex("opscope memcheck: out of memory on MLU 0: a request of [0-9]+ bytes "
                                       "failed with [0-9]+ bytes in use in [0-9]+ allocations from [0-9]+ "
                                       "sites; what was live: [^\n]*memory_snapshot.json"));
  const fs::path dir = onlyResultDir(root);
  const json s = readJson(dir / "memory_snapshot.json");
  EXPECT_EQ(s.at("format_version"), 1);
  const json& request = s.at("failed_request");
  const auto failed = request.at("bytes").get<std::uint64_t>();
  // The runtime's own words for the failure (an independent figure): the size asked, and what was in use of
  // the device's 256 MiB, which the live allocations memcheck lists are a part of (the rest: their red
  // zones).
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m,
                                std::regex("out of memory: ([0-9]+) bytes asked of device 0, ([0-9]+) of "
                                           "268435456 bytes in use")))
      << r.err;
  const std::uint64_t asked = std::stoull(m[1]);  // the program's request with memcheck's red zones around it
  EXPECT_LE(failed, asked) << s.dump(1);
  EXPECT_LE(asked - failed, 4096u) << s.dump(1);
  const std::uint64_t in_use = std::stoull(m[2]);
  EXPECT_GT(in_use + asked, std::uint64_t{268435456});
  EXPECT_EQ(request.at("place"), "MLU 0");
  std::string frames;
  for (const json& f : request.at("stack")) frames += f.value("function", "") + "\n";
  EXPECT_THAT(frames, HasSubstr("main")) << frames;
  const json& live = s.at("live");
  ASSERT_FALSE(live.empty());
  std::uint64_t sum = 0;
  for (const json& site : live) sum += site.at("bytes").get<std::uint64_t>();
  EXPECT_EQ(sum, s.at("live_summary").at("bytes").get<std::uint64_t>());
  EXPECT_EQ(live.size(), s.at("live_summary").at("sites").get<std::size_t>());
  EXPECT_GT(sum, 0u);  // the weights and the batch
  EXPECT_LE(sum, in_use);
  const opscope_test::Run summary = run({OPSCOPE_PATH, "summary", dir.string()});
  EXPECT_THAT(summary.out,
              ::testing::ContainsRegex("OUT OF MEMORY on MLU 0: a request of " + std::to_string(failed) +
                                       " bytes \\([^)]*\\) failed at [^\n]* with [0-9]+ bytes"))
      << summary.out;
  EXPECT_THAT(summary.out, HasSubstr("    live: "));
  // The report's page shows the failed request and what was live, in real headless Chromium.
  const opscope_test::Run report = run({OPSCOPE_PATH, "report", dir.string()});
  ASSERT_LE(report.exit_code, 1) << report.all();  // 1: the verdict has findings
  const std::string dom = renderInChromium(dir / "report.html");
  EXPECT_THAT(dom, HasSubstr("Out of memory (memory_snapshot.json)"));
  EXPECT_THAT(dom, ::testing::ContainsRegex(
                       "a request of [0-9.]+ [KMG]?i?B on MLU 0 failed, with [0-9.]+ [KMG]?i?B in use"));
  EXPECT_THAT(dom, HasSubstr("Live then, site 1:"));
  // A batch that fits without memcheck (192 in 256 MiB) fits with it: the quarantine is given back first.
  ASSERT_EQ(run(mnistCommand(MNIST_TRAIN_PATH, 3, 192), {{"MLU_SIM_MEMORY_MB", "256"}}).exit_code, 0);
  const opscope_test::Run fits =
      run(mnistCommand(MNIST_TRAIN_PATH, 3, 192), memcheck(root, {{"MLU_SIM_MEMORY_MB", "256"}}));
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  fs::remove_all(root);
}

// The same failure under `opscope run` with no tool asked for: the out-of-memory snapshot is on by default
// (memcheck's allocation table with backtraces, nothing else), so memory_snapshot.json is there, with no red
// zones: the failed request is exactly what the runtime says was asked, and what was live is what it had in
// use, up to its 256-byte rounding of each allocation. OP_OOM_SNAPSHOT=0 turns it off.
TEST(MemcheckOutOfMemory, OpscopeRunKeepsTheSnapshotWithoutMemcheck) {
  const fs::path root = tempDir("oom_default");
  std::vector<std::string> args = {OPSCOPE_PATH, "run", "--out", root.string(), "--"};
  const std::vector<std::string> mnist = mnistCommand(MNIST_TRAIN_PATH, 1, 2048);
  args.insert(args.end(), mnist.begin(), mnist.end());
  const opscope_test::Run r = run(args, {{"MLU_SIM_MEMORY_MB", "256"}});
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err,
              ::testing::ContainsRegex("opscope: out of memory on MLU 0: a request of [0-9]+ bytes failed "
                                       "with [0-9]+ bytes in use in [0-9]+ allocations from [0-9]+ sites; "
                                       "what was live: [^\n]*memory_snapshot.json"));
  const fs::path dir = onlyResultDir(root);
  EXPECT_FALSE(fs::exists(dir / "memcheck.json")) << "no memcheck report: memcheck was off";
  const json run_json = readJson(dir / "run.json");
  EXPECT_EQ(run_json.at("tools").at("oom_snapshot"), true);
  EXPECT_EQ(run_json.at("tools").at("memcheck"), false);
  const json s = readJson(dir / "memory_snapshot.json");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m,
                                std::regex("out of memory: ([0-9]+) bytes asked of device 0, ([0-9]+) of "
                                           "268435456 bytes in use")))
      << r.err;
  EXPECT_EQ(s.at("failed_request").at("bytes").get<std::uint64_t>(), std::stoull(m[1]));
  const std::uint64_t in_use = std::stoull(m[2]);
  const std::uint64_t live = s.at("live_summary").at("bytes").get<std::uint64_t>();
  const std::uint64_t allocations = s.at("live_summary").at("allocations").get<std::uint64_t>();
  EXPECT_LE(live, in_use);
  EXPECT_LE(in_use, live + 256 * allocations) << s.dump(1);
  std::string frames;
  for (const json& f : s.at("failed_request").at("stack")) frames += f.value("function", "") + "\n";
  EXPECT_THAT(frames, HasSubstr("Trainer::forward")) << frames;
  const opscope_test::Run summary = run({OPSCOPE_PATH, "summary", dir.string()});
  EXPECT_THAT(summary.out, HasSubstr("Memory: memcheck was off"));
  EXPECT_THAT(summary.out, HasSubstr("OUT OF MEMORY on MLU 0: a request of " + std::string(m[1])));
  // The page shows it in place of memcheck's section, and its verdict names it (real headless Chromium).
  const opscope_test::Run report = run({OPSCOPE_PATH, "report", dir.string()});
  ASSERT_LE(report.exit_code, 1) << report.all();
  const std::string dom = renderInChromium(dir / "report.html");
  EXPECT_THAT(dom, HasSubstr("data-rendered=\"ok\""));
  EXPECT_THAT(dom, HasSubstr("Memcheck was off"));
  EXPECT_THAT(dom, HasSubstr("Out of memory (memory_snapshot.json)"));
  EXPECT_THAT(dom, ::testing::ContainsRegex("out of memory: a request of [0-9.]+ [KMG]?i?B on MLU 0 failed"));
  EXPECT_THAT(dom, HasSubstr("Live then, site 1:"));
  // Off: no snapshot (and the run leaves nothing else to write).
  fs::remove_all(root);
  const opscope_test::Run off = run(args, {{"MLU_SIM_MEMORY_MB", "256"}, {"OP_OOM_SNAPSHOT", "0"}});
  EXPECT_NE(off.exit_code, 0);
  EXPECT_THAT(off.err, ::testing::Not(HasSubstr("memory_snapshot.json")));
  fs::remove_all(root);
}

// Each step mnist_train marks (opscope_step) gets its peak and what it ends with: 6 steps, every one ending
// with what the first ended with (the weights and their momentum: mnist frees each step's tensors), every
// peak at least its end, and the highest of them the run's peak, which `opscope summary` says.
TEST(MemcheckSteps, EachMarkedStepHasItsPeakAndWhatItEndsWith) {
  const fs::path root = tempDir("memcheck_steps");
  const opscope_test::Run r = run(mnistCommand(MNIST_TRAIN_PATH, 6, 16), memcheck(root));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path dir = onlyResultDir(root);
  const json report = readJson(dir / "memcheck.json");
  const json& steps = report.at("steps");
  ASSERT_EQ(steps.size(), 6u) << report.dump(1);
  std::uint64_t highest = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].at("step"), i + 1);
    EXPECT_EQ(steps[i].at("place"), "MLU 0");
    EXPECT_EQ(steps[i].at("end"), steps[0].at("end")) << "step " << i + 1;
    EXPECT_GE(steps[i].at("peak").get<std::uint64_t>(), steps[i].at("end").get<std::uint64_t>());
    highest = std::max(highest, steps[i].at("peak").get<std::uint64_t>());
  }
  ASSERT_EQ(report.at("peaks").size(), 1u);
  EXPECT_EQ(highest, report.at("peaks")[0].at("bytes").get<std::uint64_t>());
  const opscope_test::Run summary = run({OPSCOPE_PATH, "summary", dir.string()});
  EXPECT_THAT(summary.out,
              ::testing::ContainsRegex(
                  fmt::format("per step on MLU 0 \\(device memory\\): 6 steps marked; in use at a step's end "
                              "{0} -> {0} bytes \\(\\+0\\); highest peak {1} bytes",
                              steps[0].at("end").get<std::uint64_t>(), highest)))
      << summary.out;
  fs::remove_all(root);
}
}  // namespace
}  // namespace opscope_test
