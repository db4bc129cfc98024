// opscope diff: where two runs' op calls first differ. Real runs of mnist_train captured in statistics or
// whole-tensor mode, one with a fault planted in a kernel, others changed by hand in their capture.db: the
// first divergence is the planted fault's call (which auto-compare, an independent finder, names too), a run
// on the CPU reference agrees with the device, and the page renders in real headless Chromium.
#include <opscope/report/report.h>

#include "chromium_page.h"
#include "demo_runs.h"
#include "subprocess.h"
#include "test_data.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <regex>
#include "result_files.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using nlohmann::json;
using opscope_test::readFile;
using opscope_test::renderInChromium;
using opscope_test::runOpscope;
using opscope_test::tempDir;
using opscope_test::writeFile;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

// mnist_train for `steps` steps under --capture --capture-mode=stats (and `tools`); its result directory.
fs::path captureRun(const std::string& name, int steps, const opscope_test::Env& env = {},
                    const std::vector<std::string>& tools = {}, const std::string& mode = "stats") {
  const fs::path root = tempDir(name);
  std::vector<std::string> args = {"run", "--capture", "--capture-mode=" + mode};
  args.insert(args.end(), tools.begin(), tools.end());
  args.insert(args.end(), {"--out", root.string(), "--"});
  const auto command = opscope_test::mnistCommand(MNIST_TRAIN_PATH, steps, 8);
  args.insert(args.end(), command.begin(), command.end());
  const opscope_test::Run r = runOpscope(args, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return opscope_test::onlyResultDir(root);
}

fs::path statsRun(const std::string& name, int steps, const opscope_test::Env& env = {},
                  const std::vector<std::string>& tools = {}) {
  return captureRun(name, steps, env, tools);
}

// A copy of capture.db `from` beside it, named `name`, changed by the SQL `change`.
fs::path alteredCopy(const fs::path& from, const std::string& name, const std::string& change) {
  const fs::path to = from.parent_path().parent_path() / name;
  fs::copy_file(from, to);
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(to.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, change.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
  return to;
}

// The calls with statistics of run A and of run B, as `opscope diff` prints them (-1 when it does not).
std::pair<long, long> callCounts(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m,
                         std::regex(R"(A: .* \((\d+) calls with statistics\)\n  B: .* \((\d+) calls)")))
    return {-1, -1};
  return {std::stol(m[1]), std::stol(m[2])};
}

// A clean run against one with a fault planted in conv2d_backward_filter's kernel, both captured in `mode`:
// the first divergence is the faulted op's first call — the call auto-compare (an independent finder, run on
// the faulted run) names as its first failure — and its faulted tensor is described as `detail` (a regex).
// The device against a run with every op on the CPU reference: no divergence.
void expectThePlantedFaultFirstAndNoneAgainstTheCpu(const std::string& mode, const std::string& detail) {
  const fs::path clean = captureRun("diff_clean_" + mode, 3, {}, {}, mode);
  const fs::path faulted =
      captureRun("diff_faulted_" + mode, 3, {{"MLU_SIM_FAULT", "conv2d_backward_filter:scale=1.001@0.05"}},
                 {"--compare"}, mode);
  const fs::path page = clean.parent_path() / "diff.html";
  const opscope_test::Run d = runOpscope({"diff", clean.string(), faulted.string(), "--html", page.string()});
  EXPECT_EQ(d.exit_code, 1) << d.all();
  const json model = opscope::report::loadRun(faulted);
  const json& first = model["accuracy"]["first_failure"];
  ASSERT_TRUE(first.is_object());
  EXPECT_EQ(first["op"], "conv2d_backward_filter");
  const auto seq = first["seq"].get<std::int64_t>();
  EXPECT_THAT(d.out, HasSubstr(fmt::format("first divergence: conv2d_backward_filter call 1 (A #{}, B #{})",
                                           seq, seq)));
  EXPECT_THAT(d.out, ::testing::ContainsRegex(detail));
  // --html: the same findings as a page, private to the user, which Chromium reads.
  EXPECT_THAT(d.out, HasSubstr("page: "));
  ASSERT_TRUE(fs::exists(page));
  EXPECT_EQ(fs::status(page).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  const std::string dom = renderInChromium(page);
  EXPECT_THAT(dom, HasSubstr(fmt::format("First divergence: conv2d_backward_filter call 1 (A #{}, B #{})",
                                         seq, seq)));
  EXPECT_THAT(dom, HasSubstr("Largest divergences"));
  EXPECT_THAT(dom, HasSubstr("<b>output grad_w</b>"));
  const fs::path cpu = captureRun("diff_cpu_" + mode, 3, {{"OP_FALLBACK_LIST", ".*"}}, {}, mode);
  const opscope_test::Run same = runOpscope({"diff", clean.string(), (cpu / "capture.db").string()});
  EXPECT_EQ(same.exit_code, 0) << same.all();
  EXPECT_THAT(same.out, HasSubstr("0 diverging"));
  EXPECT_THAT(same.out, HasSubstr("no divergence"));
  for (const fs::path& dir : {clean, faulted, cpu}) fs::remove_all(dir.parent_path());
}

TEST(OpscopeDiff, APlantedFaultIsTheFirstDivergenceAndTheCpuFallbackAgrees) {
  expectThePlantedFaultFirstAndNoneAgainstTheCpu("stats",
                                                 "calls with statistics\\)(.|\n)*output grad_w: mean");
}

// The same with whole tensors (tensors mode): each pair of tensors that are not bit-identical is compared by
// auto-compare's metrics; the planted error is 0.1 % of 5 % of the elements, and the metrics say so.
TEST(OpscopeDiff, WholeTensorCapturesAreComparedByAutoComparesMetrics) {
  expectThePlantedFaultFirstAndNoneAgainstTheCpu(
      "tensors", "captured calls\\)(.|\n)*output grad_w: max_abs_diff [0-9.e-]+, max_rel_diff 0\\.000999");
}

// A run one step longer: its last step's calls are only in it, and the calls both runs made are aligned
// and bit-identical (nothing shifted).
TEST(OpscopeDiff, CallsOnlyOneRunMadeShiftNothing) {
  const fs::path two = statsRun("diff_two", 2), three = statsRun("diff_three", 3);
  const opscope_test::Run d = runOpscope({"diff", two.string(), three.string()});
  EXPECT_EQ(d.exit_code, 1) << d.all();
  const auto [a, b] = callCounts(d.out);
  ASSERT_GT(a, 0) << d.out;
  EXPECT_LT(a, b);
  EXPECT_THAT(d.out, HasSubstr(fmt::format("{} pairs, {} bit-identical, 0 diverging", a, a)));
  EXPECT_THAT(d.out, HasSubstr("calls only in B"));
  EXPECT_THAT(d.out, HasSubstr("no divergence in the aligned calls"));
  for (const fs::path& dir : {two, three}) fs::remove_all(dir.parent_path());
}

// llama_train in float32 against bfloat16: every call of the float32 run is paired with the same op's call
// in the bfloat16 one (the casts only the bfloat16 run makes are listed apart), and the floating tensors of
// different dtypes are compared by value at bfloat16's tolerance, not called different for their dtype.
TEST(OpscopeDiff, Float32AndBfloat16RunsAlignOpByOp) {
  std::vector<fs::path> dirs;
  for (const std::string dtype : {"float32", "bfloat16"}) {
    const fs::path root = tempDir("diff_llama_" + dtype);
    std::vector<std::string> args = {"run",   "--capture",   "--capture-mode=stats",
                                     "--out", root.string(), "--"};
    const auto command = opscope_test::llamaCommand(LLAMA_TRAIN_PATH, 2, dtype);
    args.insert(args.end(), command.begin(), command.end());
    const opscope_test::Run r = runOpscope(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    dirs.push_back(opscope_test::onlyResultDir(root));
  }
  const opscope_test::Run d = runOpscope({"diff", dirs[0].string(), dirs[1].string()});
  EXPECT_EQ(d.exit_code, 1) << d.all();
  const auto [a, b] = callCounts(d.out);
  ASSERT_GT(a, 0) << d.out;
  EXPECT_LT(a, b);
  EXPECT_THAT(d.out, HasSubstr(fmt::format("aligned by op name and call order: {} pairs", a)));
  EXPECT_THAT(d.out, HasSubstr(fmt::format("copy: {} calls only in B", b - a)));
  EXPECT_THAT(d.out, Not(::testing::ContainsRegex(R"(float32\[[0-9, ]*\] vs bfloat16\[)")))
      << "compared by value";
  for (const fs::path& dir : dirs) fs::remove_all(dir.parent_path());
}

// The floor of runs in two dtypes is that of every aligned pair, also of a pair read after the ones it
// loosens (the diff reads both runs once more at that floor): the first call's float32 output moved by 0.002
// (beyond float32's tolerance, within bfloat16's) is no divergence when the last call's output is bfloat16 in
// B. Read once, the first call would have been judged at float32's tolerance.
TEST(OpscopeDiff, ALaterPairInTwoDtypesLoosensTheToleranceOfEveryPair) {
  const fs::path run = statsRun("diff_floor", 1);
  const fs::path db = run / "capture.db";
  // The rowid of the first float32 output of the first (min) or last (max) call that has one.
  const auto output_of = [](const char* which) {
    return fmt::format(
        "SELECT min(s.rowid) FROM tensor_stats s JOIN ops o USING (op_id) WHERE s.role = 'output' AND "
        "s.dtype = 'float32' AND o.seq = (SELECT {}(o2.seq) FROM ops o2 JOIN tensor_stats s2 USING (op_id) "
        "WHERE s2.role = 'output' AND s2.dtype = 'float32')",
        which);
  };
  const std::string move = "UPDATE tensor_stats SET mean = mean + 0.002, checksum = 'moved' WHERE rowid = (" +
                           output_of("min") + ")";
  const fs::path moved = alteredCopy(db, "moved.db", move);
  opscope_test::Run r = runOpscope({"diff", db.string(), moved.string()});
  EXPECT_EQ(r.exit_code, 1) << r.all();
  EXPECT_THAT(r.out, HasSubstr(", 1 diverging")) << "at float32's tolerance";
  const fs::path both = alteredCopy(
      db, "both.db",
      move + "; UPDATE tensor_stats SET dtype = 'bfloat16' WHERE rowid = (" + output_of("max") + ")");
  r = runOpscope({"diff", db.string(), both.string()});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.out, HasSubstr(", 0 diverging")) << r.out;
  fs::remove_all(run.parent_path());
}

TEST(OpscopeDiff, RunsCapturedDifferentlyAndBadArgumentsAreClearErrors) {
  const fs::path tensors = captureRun("diff_tensors", 2, {}, {}, "tensors");
  ASSERT_FALSE(tensors.empty());
  opscope_test::Run r = runOpscope({"diff", tensors.string(), tensors.string()});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.out, HasSubstr("0 diverging"));
  // Statistics against whole tensors: said, not guessed at.
  const fs::path stats = statsRun("diff_hostile", 1);
  r = runOpscope({"diff", tensors.string(), stats.string()});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, HasSubstr("holds whole tensors and"));
  EXPECT_THAT(r.err, HasSubstr("statistics: capture both runs the same way"));
  // A hostile tensors capture whose blob is shorter than its row says (and its hash changed, so that it is
  // read): a clear error, nothing read past the blob.
  const fs::path short_blob =
      alteredCopy(tensors / "capture.db", "short.db",
                  "UPDATE blobs SET data = zeroblob(3), hash = 1 WHERE blob_id = (SELECT "
                  "r.blob_id FROM tensor_refs r JOIN ops o USING(op_id) WHERE o.captured "
                  "AND r.role = 'output' AND r.nbytes > 8 LIMIT 1)");
  r = runOpscope({"diff", tensors.string(), short_blob.string()});
  EXPECT_EQ(r.exit_code, 3) << r.all();
  EXPECT_THAT(r.err, HasSubstr("has 3 bytes of data where its row says"));
  // An op name that is markup (a hostile capture.db) is text on the page.
  const fs::path named =
      alteredCopy(tensors / "capture.db", "named.db",
                  "UPDATE ops SET name = '<img src=x onerror=alert(1)>' WHERE seq = (SELECT "
                  "min(seq) FROM ops)");
  const fs::path named_page = tensors.parent_path() / "named.html";
  r = runOpscope({"diff", tensors.string(), named.string(), "--html", named_page.string()});
  EXPECT_EQ(r.exit_code, 1) << r.all();
  const std::string markup = readFile(named_page);
  EXPECT_THAT(markup, HasSubstr("<code>&lt;img src=x onerror=alert(1)&gt;</code>"));
  EXPECT_THAT(markup, Not(HasSubstr("<img")));
  // --html without a file, or to a place it cannot be written.
  r = runOpscope({"diff", tensors.string(), tensors.string(), "--html"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--html needs a file name"));
  r = runOpscope({"diff", tensors.string(), tensors.string(), "--html", "/nonexistent/dir/diff.html"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/dir/diff.html"));
  r = runOpscope({"diff", "/nonexistent/run", tensors.string()});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/run: no capture.db there"));
  // Not a database at all.
  const fs::path junk = tensors.parent_path() / "junk.db";
  writeFile(junk, std::string(4096, 'x'));
  r = runOpscope({"diff", junk.string(), tensors.string()});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, HasSubstr("junk.db"));
  // A hostile capture.db whose tensor_stats is a view that would recurse without end: refused at once.
  const fs::path hostile =
      alteredCopy(stats / "capture.db", "hostile.db",
                  "DROP TABLE tensor_stats; CREATE VIEW tensor_stats AS WITH RECURSIVE "
                  "r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x AS op_id FROM r");
  r = runOpscope({"diff", hostile.string(), stats.string()});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, HasSubstr("'tensor_stats' is not a table as opscope writes it"));
  // Statistics opscope never writes (an Inf min against a finite one took the tolerance with it: "no
  // divergence"): refused, naming the call.
  const fs::path infinite =
      alteredCopy(stats / "capture.db", "infinite.db",
                  "UPDATE tensor_stats SET min = -1e999 WHERE rowid = (SELECT min(rowid) FROM tensor_stats)");
  r = runOpscope({"diff", stats.string(), infinite.string()});
  EXPECT_EQ(r.exit_code, 3) << r.all();
  EXPECT_THAT(r.err,
              ::testing::ContainsRegex("infinite.db: call [0-9]+ [a-z_0-9]+: [a-z]+ [a-z_0-9]+: statistics "
                                       "opscope does not write \\(min -inf\\)"));
  const fs::path text_l2 =
      alteredCopy(stats / "capture.db", "text_l2.db",
                  "UPDATE tensor_stats SET l2 = 'big' WHERE rowid = (SELECT max(rowid) FROM tensor_stats)");
  r = runOpscope({"diff", text_l2.string(), stats.string()});
  EXPECT_EQ(r.exit_code, 3) << r.all();
  EXPECT_THAT(r.err, HasSubstr("(L2 not a number)"));
  // No checksum on either side is not "the same bytes": two runs whose statistics differ, checksums gone.
  const std::string first_output =
      "(SELECT min(rowid) FROM tensor_stats WHERE role = 'output' AND dtype = 'float32' AND numel > 1)";
  const fs::path unsummed =
      alteredCopy(stats / "capture.db", "unsummed.db", "UPDATE tensor_stats SET checksum = NULL");
  const fs::path unsummed_moved =
      alteredCopy(stats / "capture.db", "unsummed_moved.db",
                  "UPDATE tensor_stats SET checksum = NULL; UPDATE tensor_stats SET mean = mean + 1, "
                  "max = max + 1, min = min + 1 WHERE rowid = " +
                      first_output);
  r = runOpscope({"diff", unsummed.string(), unsummed_moved.string()});
  EXPECT_EQ(r.exit_code, 1) << r.all();
  EXPECT_THAT(r.out, HasSubstr("first divergence"));
  // A capture.db of a schema this opscope does not know, or with no meta table: refused, as op-replay does.
  const fs::path future = alteredCopy(stats / "capture.db", "future.db",
                                      "UPDATE meta SET value = '999' WHERE key = 'schema_version'");
  r = runOpscope({"diff", stats.string(), future.string()});
  EXPECT_EQ(r.exit_code, 3) << r.all();
  EXPECT_THAT(
      r.err,
      HasSubstr("future.db: capture.db: capture schema version 999; this opscope reads versions 1 to"));
  const fs::path metaless = alteredCopy(stats / "capture.db", "metaless.db", "DROP TABLE meta");
  r = runOpscope({"diff", metaless.string(), stats.string()});
  EXPECT_EQ(r.exit_code, 3) << r.all();
  EXPECT_THAT(r.err, HasSubstr("(no meta table: not a capture opscope wrote)"));
  fs::remove_all(stats.parent_path());
  // Whole tensors without their blobs' hashes are compared by their bytes, not taken for equal.
  const fs::path hashless =
      alteredCopy(tensors / "capture.db", "hashless.db", "UPDATE blobs SET hash = NULL");
  const fs::path hashless_moved = alteredCopy(
      tensors / "capture.db", "hashless_moved.db",
      "UPDATE blobs SET hash = NULL; UPDATE blobs SET data = zeroblob(length(data)) WHERE blob_id = (SELECT "
      "r.blob_id FROM tensor_refs r JOIN ops o USING(op_id) WHERE o.captured AND r.role = 'output' AND "
      "r.dtype = 'float32' AND r.nbytes > 64 LIMIT 1)");
  r = runOpscope({"diff", hashless.string(), hashless_moved.string()});
  EXPECT_EQ(r.exit_code, 1) << r.all();
  EXPECT_THAT(r.out, HasSubstr("first divergence"));
  // A capture.db damaged in the middle (its second half overwritten): an error that names the run, with
  // the code of an unreadable run (3), not the usage code (2).
  const fs::path damaged = alteredCopy(tensors / "capture.db", "damaged.db", "SELECT 1");
  {
    const auto size = static_cast<std::streamoff>(fs::file_size(damaged));
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(size / 2);
    const std::string junk(static_cast<std::size_t>(size - size / 2), '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  r = runOpscope({"diff", tensors.string(), damaged.string()});
  EXPECT_EQ(r.exit_code, 3) << r.all();
  EXPECT_THAT(r.err, HasSubstr("damaged.db"));
  // A capture.db that cannot be read for its permissions is said so, not "no capture.db there" (as root,
  // read by an unprivileged user: root reads it anyway).
  {
    const fs::path locked = alteredCopy(tensors / "capture.db", "locked.db", "SELECT 1");
    fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_write);
    std::vector<std::string> argv = {OPSCOPE_PATH, "diff", locked.string(), locked.string()};
    if (::geteuid() == 0)
      argv.insert(argv.begin(), {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"});
    fs::permissions(locked.parent_path(), fs::perms::others_exec, fs::perm_options::add);
    r = opscope_test::run(argv);
    EXPECT_EQ(r.exit_code, 3) << r.all();
    EXPECT_THAT(r.err, HasSubstr("locked.db: cannot read it: Permission denied"));
  }
  r = runOpscope({"diff", tensors.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("diff needs two runs"));
  fs::remove_all(tensors.parent_path());
}

}  // namespace

namespace {

// mnist_train for `steps` steps under --profile; its result directory.
fs::path profileRun(const std::string& name, int steps, const opscope_test::Env& env = {}) {
  const fs::path root = tempDir(name);
  std::vector<std::string> args = {"run", "--profile", "--out", root.string(), "--"};
  const auto command = opscope_test::mnistCommand(MNIST_TRAIN_PATH, steps, 8);
  args.insert(args.end(), command.begin(), command.end());
  const opscope_test::Run r = runOpscope(args, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return opscope_test::onlyResultDir(root);
}

}  // namespace

// Two profiled runs of mnist_train, the second with a 20 ms sleep planted in max_pool2d_forward's kernel:
// `opscope diff` names max_pool2d_forward first among the ops that got slower, with about 20 ms more per
// call, and its signature likewise; the page renders in headless Chromium.
TEST(OpscopeDiff, TwoProfiledRunsNameTheOpADelayWasPlantedInFirstWithItsTimePerCall) {
  const fs::path a = profileRun("time_a", 3);
  const fs::path b = profileRun("time_b", 3, {{"MLU_SIM_FAULT", "max_pool2d_forward:delay=20"}});
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  const fs::path page = a.parent_path() / "time.html";
  const opscope_test::Run d = runOpscope({"diff", a.string(), b.string(), "--html", page.string()});
  ASSERT_EQ(d.exit_code, 0) << d.all();
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(d.out, m,
                        std::regex(R"(ops that got slower \(device time, largest change first\):\n)"
                                   R"(  max_pool2d_forward +\+([0-9.]+) ms \(\+([0-9.]+) ms per call\))"
                                   R"(   calls 3 -> 3, mean)")))
      << d.out;
  const double per_call = std::stod(m[2]);
  EXPECT_GE(per_call, 15.0)
      << d.out;  // the kernel sleeps 20 ms; the op itself, ~1 ms, varies with the machine
  EXPECT_LE(per_call, 60.0) << d.out;
  EXPECT_NEAR(std::stod(m[1]), 3 * per_call, 0.01) << d.out;
  EXPECT_THAT(d.out, ::testing::ContainsRegex(
                         "input signatures that got slower:\n  max_pool2d_forward \\[x float32\\[8,"));
  EXPECT_THAT(d.out, HasSubstr("page: "));
  EXPECT_EQ(fs::status(page).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  const std::string dom = renderInChromium(page);
  EXPECT_THAT(dom, HasSubstr("Where the time went"));
  EXPECT_THAT(dom, ::testing::ContainsRegex("<td><code>max_pool2d_forward</code></td><td class=\"num\">\\+"));
  // The files themselves do as well as their directories.
  const opscope_test::Run files =
      runOpscope({"diff", (a / "time_measure.csv").string(), (b / "time_measure.csv").string()});
  EXPECT_EQ(files.exit_code, 0) << files.all();
  EXPECT_THAT(files.out,
              HasSubstr("ops that got slower (device time, largest change first):\n  max_pool2d_forward"));
  fs::remove_all(a.parent_path());
  fs::remove_all(b.parent_path());
}

// Hand-worked profiles: the totals, the change per call, the views by signature and by module, the
// signatures only one run has, and rows a hostile file holds (not numbers, NaN, negative, short) skipped
// and counted; an op name that is markup is text on the page; a run that is neither profiled nor captured
// is a clear error.
TEST(OpscopeDiff, ProfilesAreSummedByOpSignatureAndModuleAndBadRowsAreSkipped) {
  const fs::path dir = tempDir("time_hand");
  const std::string header =
      "name,seq,thread,device,queue,host_ms,device_ms,device_tasks,fallback,shapes,"
      "framework_op,module\n";
  writeFile(dir / "a.csv", header +
                               "mm,1,0,0,1,0.1,1.0,1,,\"a float32[2,3]\",aten::mm,model.fc\n"
                               "mm,2,0,0,1,0.1,3.0,1,,\"a float32[2,3]\",aten::mm,model.fc\n"
                               "relu,3,0,0,1,0.05,0.5,1,,\"x float32[4]\",aten::relu,model.act\n"
                               "old,4,0,0,1,0.01,2.0,1,,\"x float32[9]\",,\n");
  writeFile(dir / "time_measure.csv", header +
                                          "mm,1,0,0,1,0.1,2.0,1,,\"a float32[2,3]\",aten::mm,model.fc\n"
                                          "mm,2,0,0,1,0.1,6.0,1,,\"a float32[2,3]\",aten::mm,model.fc\n"
                                          "relu,3,0,0,1,0.05,0.25,1,,\"x float32[4]\",aten::relu,model.act\n"
                                          "<b>new</b>,4,0,0,1,0.02,1.5,1,,\"y float32[1]\",,\n"
                                          "mm,5,0,0,1,0.1,nan,1,,\"a float32[2,3]\",,\n"
                                          "mm,6,0,0,1,-1,1.0,1,,\"a float32[2,3]\",,\n"
                                          "mm,7,0,0,1,0.1,abc,1,,\"a float32[2,3]\",,\n"
                                          "mm,8,0\n");
  const fs::path page = dir / "hand.html";
  const opscope_test::Run d =
      runOpscope({"diff", (dir / "a.csv").string(), dir.string(), "--html", page.string()});
  ASSERT_EQ(d.exit_code, 0) << d.all();
  // A: 1 + 3 + 0.5 + 2 = 6.5 ms in 4 calls; B: 2 + 6 + 0.25 + 1.5 = 9.75 ms in 4 (the bad rows left out).
  EXPECT_THAT(d.out,
              HasSubstr("device time in ops: 6.500 ms -> 9.750 ms (+3.250 ms, +50.0%); op calls 4 -> 4; "
                        "host time in op calls 0.260 ms -> 0.270 ms\n"));
  EXPECT_THAT(d.out, HasSubstr("(rows that do not parse, skipped: 0 in A, 4 in B)"));
  EXPECT_THAT(
      d.out,
      ::testing::ContainsRegex(
          "ops that got slower \\(device time, largest change first\\):\n"
          "  mm +\\+4\\.000 ms \\(\\+2\\.000 ms per call\\)   calls 2 -> 2, mean 2\\.000 -> 4\\.000 ms\n"
          "  <b>new</b> +\\+1\\.500 ms   calls 0 -> 1, mean 0\\.000 -> 1\\.500 ms\n"));
  EXPECT_THAT(d.out,
              ::testing::ContainsRegex("ops that got faster:\n"
                                       "  old +-2\\.000 ms   calls 1 -> 0, mean 2\\.000 -> 0\\.000 ms\n"
                                       "  relu +-0\\.250 ms \\(-0\\.250 ms per call\\)   calls 1 -> 1"));
  EXPECT_THAT(d.out, ::testing::ContainsRegex("input signatures that got slower:\n"
                                              "  mm \\[a float32\\[2,3\\]\\] +\\+4\\.000 ms"));
  EXPECT_THAT(d.out, ::testing::ContainsRegex("modules that got slower:\n  model\\.fc +\\+4\\.000 ms"));
  EXPECT_THAT(d.out, ::testing::ContainsRegex("modules that got faster:\n  model\\.act +-0\\.250 ms"));
  EXPECT_THAT(d.out, ::testing::ContainsRegex("new input signatures, only in B \\(1\\):\n"
                                              "  <b>new</b> \\[y float32\\[1\\]\\] +\\+1\\.500 ms"));
  EXPECT_THAT(d.out, ::testing::ContainsRegex("vanished input signatures, only in A \\(1\\):\n"
                                              "  old \\[x float32\\[9\\]\\] +-2\\.000 ms"));
  const std::string markup = readFile(page);
  EXPECT_THAT(markup, HasSubstr("<code>&lt;b&gt;new&lt;/b&gt;</code>"));
  EXPECT_THAT(markup, Not(HasSubstr("<b>new")));
  // Neither profiled nor captured: said, with what to do.
  const fs::path empty = dir / "empty";
  fs::create_directories(empty);
  const opscope_test::Run none = runOpscope({"diff", empty.string(), dir.string()});
  EXPECT_EQ(none.exit_code, 3) << none.all();
  EXPECT_THAT(none.err, HasSubstr("or profile both runs, --profile, to compare their time"));
  // A time_measure.csv without its columns.
  writeFile(empty / "time_measure.csv", "name,seq\nmm,1\n");
  const opscope_test::Run columns = runOpscope({"diff", empty.string(), dir.string()});
  EXPECT_EQ(columns.exit_code, 3) << columns.all();
  EXPECT_THAT(columns.err, HasSubstr("time_measure.csv: no column 'host_ms'"));
  fs::remove_all(dir);
}

// Two memcheck runs of examples/leaky, one leaking 100 allocations in its loop (`leaky`) and one not
// (`leaky 0`): `opscope diff` names the loop's site as the one that leaks more, with the bytes and
// allocations (1024 bytes each), and the peak's growth; the two sites both runs leak from are the same
// sites in both, though loaded at other addresses, so they are not listed. The page renders in Chromium.
TEST(OpscopeDiff, TwoMemcheckRunsNameTheSiteThatLeaksMore) {
  const fs::path root = tempDir("memory_diff");
  auto memcheckRun = [&](const std::string& name, const std::vector<std::string>& args) {
    std::vector<std::string> command = {"run", "--memcheck", "--out", (root / name).string(),
                                        "--",  LEAKY_PATH};
    command.insert(command.end(), args.begin(), args.end());
    const opscope_test::Run r = runOpscope(command);
    EXPECT_EQ(r.exit_code, 0) << r.all();
    return opscope_test::onlyResultDir(root / name);
  };
  const fs::path clean = memcheckRun("clean", {"0"});
  const fs::path leaking = memcheckRun("leaking", {});
  const fs::path page = root / "memory.html";
  const opscope_test::Run d = runOpscope({"diff", clean.string(), leaking.string(), "--html", page.string()});
  ASSERT_EQ(d.exit_code, 0) << d.all();
  EXPECT_THAT(d.out,
              HasSubstr("leaked: 69632 bytes in 2 allocations -> 172032 bytes in 102 allocations (+102400 "
                        "bytes)\n"));
  EXPECT_THAT(d.out, ::testing::ContainsRegex(
                         "peak in use on MLU 0: [0-9]+ bytes -> [0-9]+ bytes \\(\\+102400 bytes\\)"));
  EXPECT_THAT(d.out,
              ::testing::ContainsRegex(
                  "sites that leak more in B \\(largest growth first\\) \\(1\\):\n"
                  " +\\+102400 bytes  0 -> 100 allocations \\(0 bytes -> 102400 bytes\\)  \\(anonymous "
                  "namespace\\)::leakInLoop\\(int\\) [^ ]*examples/leaky/leaky.cpp:[0-9]+ <- main "));
  EXPECT_THAT(d.out, Not(HasSubstr("libraryLeak")));
  EXPECT_THAT(d.out, Not(HasSubstr("sites that leak less")));
  const std::string dom = renderInChromium(page);
  EXPECT_THAT(dom, HasSubstr("Where the device memory went"));
  EXPECT_THAT(dom, HasSubstr("leakInLoop(int)"));
  // The other way round: the loop's site leaks less.
  const opscope_test::Run back = runOpscope({"diff", leaking.string(), clean.string()});
  EXPECT_THAT(back.out,
              ::testing::ContainsRegex("sites that leak less in B \\(1\\):\n +-102400 bytes  100 -> 0"));
  fs::remove_all(root);
}

// Hostile memcheck.json files: entries that are not what memcheck writes are skipped and counted, a
// function name that is markup is text on the page, and a file of another format version is a clear error.
TEST(OpscopeDiff, HostileMemcheckFilesAreReadBounded) {
  const fs::path dir = tempDir("memory_hostile");
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "b");
  const std::string frame = R"({"function": "<img src=x onerror=alert(1)>", "file": "f.cpp", "line": 3})";
  writeFile(
      dir / "a" / "memcheck.json",
      R"({"format_version": 1, "leaks": [], "peaks": [{"place": "MLU 0", "bytes": 10}], "errors": []})");
  writeFile(
      dir / "b" / "memcheck.json",
      R"({"format_version": 1, "leaks": [{"bytes": 64, "allocations": 2, "place": "MLU 0", "stack": [)" +
          frame +
          R"(]}, {"bytes": -1, "allocations": 1, "stack": []}, {"bytes": 8, "allocations": 1, "stack": "x"}, 7],)"
          R"( "peaks": [{"place": "MLU 0", "bytes": 74}, {"bytes": 3}], "errors": [{"kind": "double-free", "count": 2}, {}]})");
  const fs::path page = dir / "m.html";
  const opscope_test::Run d =
      runOpscope({"diff", (dir / "a").string(), (dir / "b").string(), "--html", page.string()});
  ASSERT_EQ(d.exit_code, 0) << d.all();
  EXPECT_THAT(d.out,
              HasSubstr("leaked: 0 bytes in 0 allocations -> 64 bytes in 2 allocations (+64 bytes)\n"));
  EXPECT_THAT(d.out, HasSubstr("peak in use on MLU 0: 10 bytes -> 74 bytes (+64 bytes)\n"));
  EXPECT_THAT(d.out, HasSubstr("memory errors, double-free: 0 -> 2\n"));
  EXPECT_THAT(d.out, HasSubstr("(entries that are not what memcheck writes, skipped: 0 in A, 5 in B)"));
  EXPECT_THAT(
      d.out,
      HasSubstr("+64 bytes  0 -> 2 allocations (0 bytes -> 64 bytes)  <img src=x onerror=alert(1)> f.cpp:3"));
  const std::string markup = readFile(page);
  EXPECT_THAT(markup, HasSubstr("<code>&lt;img src=x onerror=alert(1)&gt; f.cpp:3</code>"));
  EXPECT_THAT(markup, Not(HasSubstr("<img")));
  writeFile(dir / "b" / "memcheck.json", R"({"format_version": 99, "leaks": []})");
  const opscope_test::Run version = runOpscope({"diff", (dir / "a").string(), (dir / "b").string()});
  EXPECT_EQ(version.exit_code, 3) << version.all();
  EXPECT_THAT(version.err, HasSubstr("memcheck.json"));
  EXPECT_THAT(version.err, HasSubstr("99"));
  writeFile(dir / "b" / "memcheck.json", "[1, 2");
  const opscope_test::Run broken = runOpscope({"diff", (dir / "a").string(), (dir / "b").string()});
  EXPECT_EQ(broken.exit_code, 3) << broken.all();
  EXPECT_THAT(broken.err, HasSubstr("memcheck.json: not valid JSON"));
  fs::remove_all(dir);
}
