// The run report: the model read from hand-made result directories (figures worked out by hand), the CLI's
// errors, and real runs of mnist_train / leaky under `opscope run`, reported with `opscope report` and
// rendered by real headless Chromium (--dump-dom): every section, the findings, no script error, and the
// same counts as `opscope summary` and as the run's own stderr.
#include <opscope/report/report.h>

#include <opscope/results/csv.h>
#include "chromium_page.h"
#include "demo_runs.h"
#include "subprocess.h"
#include "test_data.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <regex>
#include "result_files.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using nlohmann::json;
using opscope_test::readFile;
using opscope_test::renderInChromium;
using opscope_test::runOpscope;
using opscope_test::tempDir;
using opscope_test::withoutScriptsAndStyles;
using opscope_test::writeFile;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

// How the page's tables and charts fit at a window `width` px wide, as Chromium lays them out: per table box
// (`.scroll`, which scrolls sideways when its table is wider than the card) and chart (`.chart`), its
// section, the table's class, the width the table needs (scrollWidth) and the width the box has
// (clientWidth). Measured by a script appended to a copy of the page, which first opens every op's rows by
// input shapes (the widest the ops table gets), then writes the widths into the DOM that --dump-dom prints.
struct TableFit {
  std::string section, table;
  long needed = 0, has = 0;
};
std::vector<TableFit> tableFits(const fs::path& page, int width) {
  const fs::path dir = tempDir("report_fit");
  const fs::path copy = dir / "measured.html";
  std::string html = readFile(page);
  const std::size_t end = html.rfind("</body>");
  EXPECT_NE(end, std::string::npos);
  html.insert(end, R"(<script>
Array.prototype.forEach.call(document.querySelectorAll('button.toggle'), function (b) { b.click(); });
document.body.setAttribute('data-open', String(document.querySelectorAll('tr.sub').length));
document.body.setAttribute('data-fit', JSON.stringify(Array.prototype.map.call(document.querySelectorAll('.scroll, .chart'),
  function (s) { var sec = s.closest('section'), t = s.querySelector('table');
    return [sec ? sec.id : '', t ? t.className : (s.classList.contains('chart') ? 'chart' : ''), s.scrollWidth, s.clientWidth]; })));
</script>
)");
  writeFile(copy, html);
  const fs::path profile = dir / "profile";
  const opscope_test::Run r = opscope_test::run(
      {CHROMIUM_PATH, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
       "--disable-background-networking", "--disable-component-update", "--no-first-run",
       "--user-data-dir=" + profile.string(), fmt::format("--window-size={},1000", width), "--dump-dom",
       "file://" + copy.string()},
      {{"HOME", profile.string()}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  fs::remove_all(dir);
  std::smatch m;
  std::vector<TableFit> out;
  if (!std::regex_search(r.out, m, std::regex("data-fit=\"([^\"]*)\""))) {
    ADD_FAILURE() << "no measurement in the page";
    return out;
  }
  std::smatch open;
  EXPECT_TRUE(std::regex_search(r.out, open, std::regex("data-open=\"([1-9][0-9]*)\"")))
      << "no op's rows by input shapes were opened";
  const std::string text = std::regex_replace(m[1].str(), std::regex("&quot;"), "\"");
  for (const json& t : json::parse(text)) out.push_back({t[0], t[1], t[2], t[3]});
  return out;
}

// Whether the rendered DOM holds text (without printing the whole page when it does not).
bool contains(const std::string& dom, const std::string& text) { return dom.find(text) != std::string::npos; }

// The data-value of the element with data-count="name" in a dumped DOM; -1 when there is none.
long long domCount(const std::string& dom, const std::string& name) {
  const std::regex tag("<[^>]*data-count=\"" + name + "\"[^>]*>");
  std::smatch m;
  if (!std::regex_search(dom, m, tag)) return -1;
  const std::string element = m.str();
  std::smatch v;
  if (!std::regex_search(element, v, std::regex("data-value=\"([0-9]+)\""))) return -1;
  return std::stoll(v[1]);
}

// The counts `opscope summary` prints, by the same names as the page's data-count attributes.
std::map<std::string, long long> summaryCounts(const std::string& text) {
  std::map<std::string, long long> out;
  std::smatch m;
  if (std::regex_search(text, m, std::regex(R"(Ops \(profiler\): (\d+) op calls)")))
    out["op-calls"] = std::stoll(m[1]);
  if (std::regex_search(
          text, m,
          std::regex(
              R"(Accuracy \(auto-compare\): (\d+) ops compared \((\d+) tensors\): (\d+) passed, (\d+) failed)"))) {
    out["ops-compared"] = std::stoll(m[1]);
    out["tensors-compared"] = std::stoll(m[2]);
    out["ops-passed"] = std::stoll(m[3]);
    out["ops-failed"] = std::stoll(m[4]);
  }
  if (std::regex_search(text, m, std::regex(R"(Fallbacks: (\d+) ops)")))
    out["fallback-ops"] = std::stoll(m[1]);
  if (std::regex_search(text, m, std::regex(R"(Overflow: (\d+) op calls)")))
    out["overflow-ops"] = std::stoll(m[1]);
  if (std::regex_search(
          text, m,
          std::regex(
              R"(Memory \(memcheck\): (\d+) bytes leaked in (\d+) allocations from (\d+) sites; (\d+) memory errors)"))) {
    out["leaked-bytes"] = std::stoll(m[1]);
    out["leaked-allocations"] = std::stoll(m[2]);
    out["leak-sites"] = std::stoll(m[3]);
    out["memory-errors"] = std::stoll(m[4]);
  }
  if (std::regex_search(text, m, std::regex(R"(Capture: (\d+) ops, (\d+) tensors, (\d+) bytes)"))) {
    out["captured-ops"] = std::stoll(m[1]);
    out["captured-tensors"] = std::stoll(m[2]);
    out["captured-bytes"] = std::stoll(m[3]);
  }
  return out;
}

const std::vector<std::string> kSections = {"verdict",  "run",    "ops",    "accuracy",
                                            "fallback", "memory", "capture"};

// What every rendered report must satisfy: the scripts ran to the end without an error, every section is
// there, and each count on the page equals the one `opscope summary` prints for the same directory.
std::string checkReport(const fs::path& dir, const std::string& artifact = {}) {
  const opscope_test::Run report = runOpscope({"report", dir.string()});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  EXPECT_THAT(report.out, HasSubstr("Verdict:"));
  const fs::path page = dir / "report.html";
  EXPECT_TRUE(fs::exists(page));
  EXPECT_LT(fs::file_size(page), 20u << 20);
  const std::string html = readFile(page);
  // Nothing is loaded from elsewhere: no script, stylesheet, image or font by address (the SVG namespace
  // and the Perfetto link the page names are not loads).
  EXPECT_THAT(html, Not(::testing::ContainsRegex("<script[^>]* src=")));
  EXPECT_THAT(html, Not(::testing::ContainsRegex("<link[^>]* href=")));
  EXPECT_THAT(html, Not(::testing::ContainsRegex("(src=|url\\(|@import)[\"' ]*(https?:|//)")));
  const std::string dom =
      renderInChromium(page, artifact.empty() ? fs::path() : fs::path(OPSCOPE_ARTIFACT_DIR) / artifact);
  EXPECT_TRUE(contains(dom, "data-rendered=\"ok\"")) << "the page's script did not finish";
  EXPECT_FALSE(contains(dom, "class=\"script-error\""));
  for (const std::string& id : kSections) EXPECT_TRUE(contains(dom, "id=\"" + id + "\"")) << id;
  const opscope_test::Run summary = runOpscope({"summary", dir.string()});
  EXPECT_EQ(summary.exit_code, 0) << summary.err;
  const auto counts = summaryCounts(summary.out);
  for (const auto& [name, value] : counts)
    EXPECT_EQ(domCount(dom, name), value) << name << "\n" << summary.out;
  return dom;
}

// A damaged directory still gets its summary and its page: both exit 0, and the report warns about `file`.
// Returns the summary's text.
std::string summaryAndReportDespite(const fs::path& dir, const std::string& file) {
  const opscope_test::Run summary = runOpscope({"summary", dir.string()});
  EXPECT_EQ(summary.exit_code, 0) << summary.err;
  const opscope_test::Run report = runOpscope({"report", dir.string()});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  EXPECT_THAT(report.err, HasSubstr("warning: " + file));
  return summary.out;
}

// --- the model, from hand-made directories ---------------------------------------------------------------

TEST(ReportText, HumanBytes) {
  EXPECT_EQ(opscope::report::humanBytes(512), "512 B");
  EXPECT_EQ(opscope::report::humanBytes(4096), "4.0 KiB");
  EXPECT_EQ(opscope::report::humanBytes(53429636), "51.0 MiB");  // 53429636 / 2^20 = 50.95
  EXPECT_EQ(opscope::report::humanBytes(3ull << 29), "1.5 GiB");
}

TEST(ReportCsv, SplitsQuotedFields) {
  EXPECT_EQ(opscope::results::splitCsvLine("a,\"[1, 2]\",,\"say \"\"hi\"\"\""),
            (std::vector<std::string>{"a", "[1, 2]", "", "say \"hi\""}));
  EXPECT_EQ(opscope::results::splitCsvLine(""), (std::vector<std::string>{""}));
}

// A run with every tool's files written by hand: the figures of the model are worked out below.
fs::path handMadeRun(const std::string& name) {
  const fs::path dir = tempDir(name);
  writeFile(dir / "run.json",
            R"J({"command":"prog --x","pid":42,"rank":-1,"start_time":"2026-11-25T10:00:00Z",
    "ended":"exit","duration_s":1.5,"version":"0.1.0","options":{"OP_TIME_MEASURE":"1"},
    "tools":{"capture":false,"compare":true,"profile":true,"memcheck":true,"fallback":true,"overflow":false},
    "findings":{"fallback":{"ops":[{"op":"relu","forced":3,"automatic":0}]}}})J");
  writeFile(dir / "time_measure.csv",
            "name,seq,thread,device,queue,host_ms,device_ms,device_tasks,fallback,shapes\n"
            "add,1,0,0,1,0.010000,2.000000,1,,\"a float32[2]; b float32[2]\"\n"
            "relu,2,0,0,1,0.020000,1.000000,1,,\"x float32[2]\"\n"
            "add,3,0,0,1,0.030000,4.000000,1,,\"a float32[2]; b float32[2]\"\n"
            "add,4,0,0,1,0.050000,8.000000,1,,\"a float32[4]; b float32[4]\"\n"
            "add,5,0,0,1,0.020000,6.000000,1,,\"a float32[4]; b float32[4]\"\n"
            "relu,6,0,0,1,0.010000,0.500000,1,,\"x float32[2]\"\n");
  writeFile(dir / "autocompare.csv",
            "seq,op,thread,device,queue,tensor,dtype,shape,allclose,max_abs_diff,max_rel_diff,mae,cosine,"
            "mismatch_ratio,diff1,diff2,diff3,dev_nan,ref_nan,dev_inf,ref_inf,atol,rtol,verdict\n"
            "1,add,0,0,1,output c,float32,\"[2]\",True,0,0,0,1,0,0,0,0,0,0,0,0,1e-05,1e-05,pass\n"
            "2,relu,0,0,1,output "
            "y,float32,\"[2]\",False,0.5,0.25,0.1,0.9,0.5,0.1,0.1,0.25,0,0,0,0,1e-05,1e-05,fail\n"
            "2,relu,0,0,1,input x,float32,\"[2]\",True,0,0,0,1,0,0,0,0,0,0,0,0,1e-05,1e-05,pass\n"
            "3,add,0,0,1,output c,float32,\"[2]\",True,0,0,0,1,0,0,0,0,0,0,0,0,1e-05,1e-05,pass\n");
  writeFile(
      dir / "memcheck.json",
      R"J({"tool":"opscope memcheck","errors":[],"peaks":[{"place":"MLU 0","device":0,"bytes":300,"op_seq":2,"op":"relu"}],
    "leaks":[{"bytes":100,"allocations":1,"place":"MLU 0","device":0,"stack":[{"address":"0x1","function":"leakHere()","module":"prog","offset":"0x1","file":"a.cpp","line":7}]}],
    "summary":{"leaked_bytes":100,"leaked_allocations":1,"leak_sites":1,"errors":0}})J");
  writeFile(dir / "memcheck_timeline.csv", "time_ms,op_seq,place,bytes\n0.5,0,MLU 0,300\n1.0,2,MLU 0,100\n");
  writeFile(dir / "trace.json",
            "{\"traceEvents\":[\n"
            "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":42,\"args\":{\"name\":\"host (pid 42)\"}},\n"
            "{\"ph\":\"X\",\"cat\":\"mlu_op\",\"name\":\"add\",\"pid\":4194304,\"tid\":1,\"ts\":10.0,\"dur\":"
            "2000.0},\n"
            "{\"ph\":\"X\",\"cat\":\"mlu_op\",\"name\":\"relu\",\"pid\":4194304,\"tid\":1,\"ts\":3000.0,"
            "\"dur\":1000.0},\n"
            "{\"ph\":\"X\",\"cat\":\"mlu_op\",\"name\":\"add\",\"pid\":4194305,\"tid\":2,\"ts\":5000.0,"
            "\"dur\":4000.0}\n"
            "],\"displayTimeUnit\":\"ms\"}\n");
  return dir;
}

// Each result file says its format version (opscope/results/): a file a newer opscope wrote is refused with
// the reason, and what it would have said is unknown, not empty (no "no leaks" from a memcheck.json not
// read).
TEST(ReportModel, FilesInANewerFormatVersionAreRefusedWithTheReason) {
  const fs::path dir = handMadeRun("report_newer_formats");
  {
    const json m = opscope::report::loadRun(dir);
    EXPECT_TRUE(m["warnings"].empty()) << m["warnings"].dump();  // the same files in the current version
  }
  writeFile(dir / "run.json", R"({"format_version":2,"command":"prog --x","pid":42,"ended":"exit"})");
  writeFile(dir / "memcheck.json", R"({"format_version":3,"summary":{"leaked_bytes":0,"leaked_allocations":0,
    "leak_sites":0,"errors":0},"leaks":[],"errors":[],"peaks":[]})");
  writeFile(dir / "trace.json",
            "{\"traceEvents\":[\n"
            "{\"ph\":\"X\",\"cat\":\"mlu_op\",\"name\":\"add\",\"pid\":4194304,\"tid\":1,\"ts\":10.0,\"dur\":"
            "2000.0}\n"
            "],\"displayTimeUnit\":\"ms\",\"otherData\":{\"tool\":\"opscope\",\"format_version\":4}}\n");
  const json m = opscope::report::loadRun(dir);
  const std::string warnings = m["warnings"].dump();
  EXPECT_THAT(warnings, HasSubstr("run.json is in format version 2, newer than this opscope reads (1)"));
  EXPECT_THAT(warnings, HasSubstr("memcheck.json is in format version 3, newer than this opscope reads (1)"));
  EXPECT_THAT(warnings, HasSubstr("trace.json is in format version 4, newer than this opscope reads (1)"));
  EXPECT_TRUE(m["run"]["command"].get<std::string>().empty()) << m["run"];  // not read
  EXPECT_TRUE(m["memory"].contains("unreadable")) << m["memory"];
}

TEST(ReportModel, HandMadeRunGivesHandComputedFigures) {
  const fs::path dir = handMadeRun("report_hand_made");
  const json m = opscope::report::loadRun(dir);
  EXPECT_TRUE(m["warnings"].empty()) << m["warnings"].dump();
  EXPECT_EQ(m["run"]["command"], "prog --x");
  // ops: 6 calls, 21.5 ms of device time. Warm-up is the first call of each op and input shapes: add #1
  // (2 ms) and #4 (8 ms), relu #2 (1 ms): 3 calls, 11 ms. After it add has #3 (4 ms, 0.03 ms host) and #5
  // (6 ms, 0.02 ms host): 10 ms, mean 5, max 6, host 0.05; relu #6 0.5 ms; add's share 10 / 10.5.
  const json& ops = m["ops"];
  EXPECT_EQ(ops["calls"], 6);
  EXPECT_DOUBLE_EQ(ops["device_ms"].get<double>(), 21.5);
  EXPECT_EQ(ops["warmup"]["calls"], 3);
  EXPECT_DOUBLE_EQ(ops["warmup"]["device_ms"].get<double>(), 11.0);
  ASSERT_EQ(ops["table"].size(), 2u);
  const json& add = ops["table"][0];
  EXPECT_EQ(add["name"], "add");
  EXPECT_EQ(add["calls"], 4);
  EXPECT_EQ(add["warmup_calls"], 2);
  EXPECT_DOUBLE_EQ(add["device_total_ms"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(add["device_mean_ms"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(add["device_max_ms"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(add["warmup_device_ms"].get<double>(), 10.0);
  EXPECT_NEAR(add["host_total_ms"].get<double>(), 0.05, 1e-12);
  EXPECT_NEAR(add["share"].get<double>(), 1000.0 / 10.5, 1e-9);
  // By input shapes, the slower first: [4] (6 ms after its 8 ms warm-up), then [2] (4 ms after 2 ms).
  ASSERT_EQ(add["shapes"].size(), 2u);
  EXPECT_EQ(add["shape_count"], 2);
  EXPECT_EQ(add["shapes"][0]["shapes"], "a float32[4]; b float32[4]");
  EXPECT_EQ(add["shapes"][0]["calls"], 2);
  EXPECT_DOUBLE_EQ(add["shapes"][0]["device_total_ms"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(add["shapes"][0]["warmup_device_ms"].get<double>(), 8.0);
  EXPECT_DOUBLE_EQ(add["shapes"][1]["device_total_ms"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(ops["table"][1]["device_total_ms"].get<double>(), 0.5);
  // Timed while compare, memcheck and fallback ran.
  EXPECT_EQ(ops["alongside"], json::parse(R"(["compare","memcheck","fallback"])"));
  // The timeline: two device tracks, three spans from 10 us to 9000 us.
  const json& tl = ops["timeline"];
  EXPECT_EQ(tl["spans_total"], 3);
  EXPECT_EQ(tl["tracks"].size(), 2u);
  EXPECT_EQ(tl["tracks"][1]["name"], "MLU 1 queue 2");
  EXPECT_DOUBLE_EQ(tl["start_us"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(tl["end_us"].get<double>(), 9000.0);
  // accuracy: three ops (seq 1, 2, 3), four tensors; relu #2 fails (one of its two tensors).
  const json& acc = m["accuracy"];
  EXPECT_EQ(acc["ops_compared"], 3);
  EXPECT_EQ(acc["tensors"], 4);
  EXPECT_EQ(acc["ops_passed"], 2);
  EXPECT_EQ(acc["ops_failed"], 1);
  EXPECT_EQ(acc["first_failure"]["op"], "relu");
  EXPECT_EQ(acc["first_failure"]["seq"], 2);
  EXPECT_EQ(acc["rows"][0]["verdict"], "fail");  // failures first
  EXPECT_DOUBLE_EQ(acc["rows"][0]["max_rel_diff"].get<double>(), 0.25);
  EXPECT_TRUE(acc["rows"][0]["replay"].is_null()) << "nothing was captured to replay";
  // fallback from run.json; overflow off; memory from memcheck.json and the timeline.
  EXPECT_EQ(m["fallback"]["ops"][0]["forced"], 3);
  EXPECT_TRUE(m["overflow"].is_null());
  EXPECT_EQ(m["memory"]["leaked_bytes"], 100);
  EXPECT_EQ(m["memory"]["series"][0]["points"].size(), 2u);
  EXPECT_TRUE(m["capture"].is_null());
  const std::string text = opscope::report::renderSummary(m);
  EXPECT_THAT(text, HasSubstr("Accuracy (auto-compare): 3 ops compared (4 tensors): 2 passed, 1 failed"));
  EXPECT_THAT(text, HasSubstr("first failing op: relu #2 (output y)"));
  EXPECT_THAT(text, HasSubstr("leak: 100 bytes in 1 allocations on MLU 0 from leakHere() a.cpp:7"));
  EXPECT_THAT(text, HasSubstr("Capture: not enabled for this run"));
  EXPECT_THAT(text, HasSubstr("slowest op: add (95.2% of device time after warm-up, 10.000 ms in 2 calls)"));
  EXPECT_THAT(text, HasSubstr("caveat: timed while compare, memcheck, fallback ran"));
  EXPECT_THAT(text, HasSubstr("warm-up: the first call of each op and input shapes (3 calls, 11.000 ms"));
  EXPECT_THAT(text,
              HasSubstr("- 2 calls, 6.000 ms after warm-up (mean 6.000 ms): a float32[4]; b float32[4]"));
  EXPECT_THAT(text, HasSubstr("peak on MLU 0: 300 bytes (300 B) after op #2 (relu)"));
  // What next: the profiler alone for speed, the leak's source line for memory (nothing was captured, so
  // there is no op-replay command for the failure).
  ASSERT_EQ(m["next"].size(), 2u) << m["next"].dump();
  EXPECT_EQ(m["next"][0]["about"], "speed");
  EXPECT_EQ(m["next"][0]["command"], "opscope run --profile -- prog --x");
  EXPECT_EQ(m["next"][1]["about"], "memory");
  EXPECT_EQ(m["next"][1]["site"], "leakHere() a.cpp:7");
  EXPECT_THAT(text, HasSubstr("next (speed): "));
  EXPECT_THAT(text, HasSubstr("      leakHere() a.cpp:7\n"));
  fs::remove_all(dir);
}

// Where the device time went, on a trace small enough to work by hand (µs; docs/profiler.md's rules):
//   host thread 100:  matmul call 10..20 (seq 1), mlurtPlaceNotifier 25..27, mlurtMemcpyAsync 40..45,
//                     mlurtQueueWaitNotifier 46..48, frame nn.Module: fc 350..550 around the relu call
//                     500..520 (seq 3), blocking mlurtMemcpy 650..770; step 0..1000
//   queue 1:          matmul 30..330, notifier at 330, relu 600..700, memcpy D2H 705..725
//   queue 2:          memcpy H2D 100..200, queue_wait 300..360
// Device: kernels 300 + 100 = 400, copies 100 + 20 = 120, 100 of them overlapping; busy 420, idle 580:
//   0..30     next matmul asked at 10: host-bound 10 (program code), not started 20
//   330..360  the wait on the notifier: 30
//   360..600  next relu asked at 500: host-bound 140 (in nn.Module: fc), not started 100
//   700..705  next D2H asked at 650: not started 5
//   725..1000 nothing next: the host in mlurtMemcpy 45 (a copy), program code 230
// Critical path, back from 1000: program code 230, mlurtMemcpy 770 -> 725 (45, it waited for the D2H),
// D2H 20, queue gap 5, relu 100, launch 600 -> 520 (80: relu was asked after matmul ended), then the host:
// relu call 20, fc 150, program code 302 + 1 + 13 + 5 + 10, the four calls 2 + 5 + 2 + 10.
// Device 120, latency 85, host 795: 1000.
TEST(ReportModel, DeviceTimeOfAHandMadeTraceIsTheHandWorkedOne) {
  const fs::path dir = tempDir("report_device_time");
  writeFile(dir / "run.json", R"({"command":"p","pid":100,"ended":"exit","tools":{"profile":true}})");
  const std::string h = R"("pid":100,"tid":100)", q1 = R"("pid":4194304,"tid":1)",
                    q2 = R"("pid":4194304,"tid":2)";
  auto x = [](const std::string& cat, const std::string& name, const std::string& where, double ts,
              double dur, const std::string& args) {
    return fmt::format(R"({{"ph":"X","cat":"{}","name":"{}",{},"ts":{},"dur":{},"args":{{{}}}}},)", cat, name,
                       where, ts, dur, args) +
           "\n";
  };
  std::string trace = "{\"traceEvents\":[\n";
  trace += x("user_annotation", "ProfilerStep#0", h, 0, 1000, R"("step":0)");
  trace += x("mlu_op", "matmul", h, 10, 10, R"("seq":1)");
  trace += x("mlu_runtime", "mlurtPlaceNotifier", h, 25, 2, R"("correlation":6)");
  trace += x("memcpy", "mlurtMemcpyAsync", h, 40, 5, R"("correlation":2)");
  trace += x("mlu_runtime", "mlurtQueueWaitNotifier", h, 46, 2, R"("correlation":5)");
  trace += x("python_function", "nn.Module: fc", h, 350, 200, "");
  trace += x("mlu_op", "relu", h, 500, 20, R"("seq":3)");
  trace += x("memcpy", "mlurtMemcpy", h, 650, 120, R"("correlation":4)");
  trace += x("mlu_op", "matmul", q1, 30, 300, R"("seq":1)");
  trace += x("mlu_runtime", "notifier", q1, 330, 0, R"("correlation":6)");
  trace += x("mlu_op", "relu", q1, 600, 100, R"("seq":3)");
  trace += x("memcpy", "memcpy D2H", q1, 705, 20, R"("correlation":4)");
  trace += x("memcpy", "memcpy H2D", q2, 100, 100, R"("correlation":2)");
  trace += x("mlu_runtime", "queue_wait", q2, 300, 60, R"("correlation":5)");
  trace += x("opscope", "memcpy D2H", R"("pid":4194304,"tid":4294901767)", 800, 150, R"("correlation":9)");
  trace.resize(trace.size() - 2);  // the last ",\n"
  trace += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"tool\":\"opscope\"}}\n";
  writeFile(dir / "trace.json", trace);
  const json m = opscope::report::loadRun(dir);
  ASSERT_EQ(m["warnings"].size(), 1u) << m["warnings"].dump();  // (no time_measure.csv: said, and not needed)
  EXPECT_THAT(m["warnings"][0].get<std::string>(), HasSubstr("time_measure.csv: missing"));
  const json& d = m["ops"]["device_time"];
  ASSERT_TRUE(d.is_object()) << m["ops"].dump();
  EXPECT_DOUBLE_EQ(d["run_ms"].get<double>(), 1.0);
  EXPECT_EQ(d["steps"], 1);
  ASSERT_EQ(d["devices"].size(), 1u);
  const json& dev = d["devices"][0];
  auto near = [](const json& v, double us) { EXPECT_NEAR(v.get<double>(), us / 1000.0, 1e-9) << v; };
  near(dev["window_ms"], 1000);
  near(dev["busy_ms"], 420);
  near(dev["compute_ms"], 400);
  near(dev["copy_ms"], 120);
  near(dev["compute_and_copy_ms"], 100);
  near(dev["idle_ms"], 580);
  near(dev["idle"]["host_bound_ms"], 10 + 140 + 230);
  near(dev["idle"]["host_copy_ms"], 45);
  near(dev["idle"]["notifier_ms"], 30);
  near(dev["idle"]["queued_ms"], 20 + 100 + 5);
  near(dev["idle"]["host_collective_ms"], 0);
  ASSERT_EQ(dev["host_in_idle"].size(), 3u) << dev["host_in_idle"].dump();
  EXPECT_EQ(dev["host_in_idle"][0]["name"], "(program code outside traced calls)");
  near(dev["host_in_idle"][0]["ms"], 240);
  EXPECT_EQ(dev["host_in_idle"][1]["name"], "nn.Module: fc");
  near(dev["host_in_idle"][1]["ms"], 140);
  EXPECT_EQ(dev["host_in_idle"][2]["name"], "mlurtMemcpy");
  near(dev["host_in_idle"][2]["ms"], 45);
  // opscope's own task (its track) is no part of it; the two queues are.
  ASSERT_EQ(dev["queues"].size(), 2u);
  near(dev["queues"][1]["busy_ms"], 100);
  near(dev["queues"][1]["idle"]["notifier_ms"], 60);
  const json& path = d["critical_path"];
  near(path["ms"], 1000);
  near(path["device_ms"], 120);
  near(path["latency_ms"], 85);
  near(path["host_ms"], 795);
  std::map<std::string, double> on_path;
  for (const json& p : path["top"])
    on_path[p["name"].get<std::string>() + " " + p["where"].get<std::string>()] = p["ms"];
  EXPECT_EQ(path["top"][0]["name"], "(program code outside traced calls)");
  EXPECT_NEAR(on_path["(program code outside traced calls) host"], 0.561, 1e-9);
  EXPECT_NEAR(on_path["nn.Module: fc host"], 0.150, 1e-9);
  EXPECT_NEAR(on_path["relu device"], 0.100, 1e-9);
  EXPECT_NEAR(on_path["(launch: the call had asked, the task had not started) latency"], 0.080, 1e-9);
  EXPECT_NEAR(on_path["mlurtMemcpy host"], 0.045, 1e-9);
  EXPECT_NEAR(on_path["relu host"], 0.020, 1e-9);
  EXPECT_NEAR(on_path["memcpy D2H device"], 0.020, 1e-9);
  EXPECT_NEAR(on_path["matmul host"], 0.010, 1e-9);
  EXPECT_EQ(on_path.count("matmul device"), 0u) << "matmul ended before the host asked for relu";
  ASSERT_EQ(d["step_rows"].size(), 1u);
  near(d["step_rows"][0]["busy_ms"], 420);
  near(d["step_rows"][0]["host_bound_ms"], 380 + 45);
  EXPECT_EQ(d["slowest_step"]["step"], 0);
  // The summary says the same.
  const std::string text = opscope::report::renderSummary(m);
  EXPECT_THAT(text, HasSubstr("MLU 0: busy 0.4 ms (42.0%): kernels 0.4 ms, copies 0.1 ms, of them kernels "
                              "overlapping copies 0.1 ms"));
  EXPECT_THAT(text,
              HasSubstr("Critical path of the 1 step (1.0 ms): device 0.1 ms (12.0%), host 0.8 ms (79.5%)"));
  fs::remove_all(dir);
}

// A program that does not wait for the device each step (as PyTorch training loops run): the host marks
// steps 0..100 and 100..200 while the device runs step 0's conv 30..400 and step 1's 400..700. Each step
// ends when its last task does, and starts when the step before ended: step 0 is 0..400 (the conv 370 on
// the device, its launch 10 after the call 10..20 asked, the call 10 and program code 10 before it on the
// host), step 1 is 400..700 (its conv alone, 300). The steps never overlap: 700 in all.
TEST(ReportModel, StepsOfAProgramThatRunsAheadOfTheDeviceEndWithTheirWork) {
  const fs::path dir = tempDir("report_device_time_ahead");
  writeFile(dir / "run.json", R"({"command":"p","pid":100,"ended":"exit","tools":{"profile":true}})");
  const std::string h = R"("pid":100,"tid":100)", q = R"("pid":4194304,"tid":1)";
  auto x = [](const std::string& cat, const std::string& name, const std::string& where, double ts,
              double dur, const std::string& args) {
    return fmt::format(R"({{"ph":"X","cat":"{}","name":"{}",{},"ts":{},"dur":{},"args":{{{}}}}})", cat, name,
                       where, ts, dur, args);
  };
  const std::string trace = "{\"traceEvents\":[\n" +
                            x("user_annotation", "ProfilerStep#0", h, 0, 100, R"("step":0)") + ",\n" +
                            x("user_annotation", "ProfilerStep#1", h, 100, 100, R"("step":1)") + ",\n" +
                            x("mlu_op", "conv2d_forward", h, 10, 10, R"("seq":1)") + ",\n" +
                            x("mlu_op", "conv2d_forward", h, 110, 10, R"("seq":2)") + ",\n" +
                            x("mlu_op", "conv2d_forward", q, 30, 370, R"("seq":1)") + ",\n" +
                            x("mlu_op", "conv2d_forward", q, 400, 300, R"("seq":2)") +
                            "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"tool\":\"opscope\"}}\n";
  writeFile(dir / "trace.json", trace);
  const json m = opscope::report::loadRun(dir);
  const json& d = m["ops"]["device_time"];
  ASSERT_TRUE(d.is_object()) << m.dump();
  auto near = [](const json& v, double us) { EXPECT_NEAR(v.get<double>(), us / 1000.0, 1e-9) << v; };
  const json& path = d["critical_path"];
  near(path["ms"], 700);
  near(path["device_ms"], 670);
  near(path["host_ms"], 20);
  near(path["latency_ms"], 10);
  ASSERT_EQ(d["step_rows"].size(), 2u);
  const json& s0 = d["step_rows"][0];
  const json& s1 = d["step_rows"][1];
  near(s0["ms"], 400);
  near(s0["path_device_ms"], 370);
  near(s1["ms"], 300);
  near(s1["path_device_ms"], 300);
  near(s1["path_host_ms"], 0);
  near(s1["busy_ms"], 300);
  near(s1["idle_ms"], 0);
  EXPECT_EQ(d["slowest_step"]["step"], 0);
  fs::remove_all(dir);
}

TEST(ReportModel, ThinnedSeriesKeepThePeak) {
  const fs::path dir = handMadeRun("report_thin");
  std::string csv = "time_ms,op_seq,place,bytes\n";
  for (int i = 0; i < 10000; ++i)
    csv += std::to_string(i) + ",0,MLU 0," + std::to_string(i == 4321 ? 999999 : i % 7) + "\n";
  writeFile(dir / "memcheck_timeline.csv", csv);
  opscope::report::Limits limits;
  limits.memory_points = 100;
  const json m = opscope::report::loadRun(dir, limits);
  const json& points = m["memory"]["series"][0]["points"];
  EXPECT_LE(points.size(), 100u);
  double peak = 0;
  for (const json& p : points) peak = std::max(peak, p[1].get<double>());
  EXPECT_EQ(peak, 999999.0);
  fs::remove_all(dir);
}

// The caps that keep the page small: the first failures by op number before any pass, and the longest
// device spans; the totals still count everything.
TEST(ReportModel, LongRunsAreCappedKeepingWhatMatters) {
  const fs::path dir = handMadeRun("report_caps");
  std::string csv =
      "seq,op,thread,device,queue,tensor,dtype,shape,allclose,max_abs_diff,max_rel_diff,mae,cosine,"
      "mismatch_ratio,diff1,diff2,diff3,dev_nan,ref_nan,dev_inf,ref_inf,atol,rtol,verdict\n";
  // 300 ops in a shuffled order (multiplying by 7 mod 300); every third fails.
  for (int i = 0; i < 300; ++i) {
    const int seq = (i * 7) % 300 + 1;
    const bool fail = seq % 3 == 0;
    csv += std::to_string(seq) + ",add,0,0,1,output c,float32,\"[2]\"," + (fail ? "False" : "True") +
           ",0,0,0,1,0,0,0,0,0,0,0,0,1e-05,1e-05," + (fail ? "fail" : "pass") + "\n";
  }
  writeFile(dir / "autocompare.csv", csv);
  opscope::report::Limits limits;
  limits.compare_rows = 5;
  limits.timeline_spans = 2;
  const json m = opscope::report::loadRun(dir, limits);
  const json& acc = m["accuracy"];
  EXPECT_EQ(acc["ops_compared"], 300);
  EXPECT_EQ(acc["ops_failed"], 100);
  EXPECT_EQ(acc["rows_total"], 300);
  ASSERT_EQ(acc["rows"].size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(acc["rows"][i]["seq"], 3 * (i + 1)) << i;
  EXPECT_EQ(acc["first_failure"]["seq"], 3);
  // The two longest of the three spans (2000 and 4000 us), in time order.
  const json& tl = m["ops"]["timeline"];
  EXPECT_EQ(tl["spans_total"], 3);
  EXPECT_EQ(tl["spans_shown"], 2);
  std::vector<double> durations;
  for (const json& track : tl["tracks"]) {
    for (const json& span : track["spans"]) durations.push_back(span[1].get<double>());
  }
  EXPECT_THAT(durations, ::testing::UnorderedElementsAre(2000.0, 4000.0));
  fs::remove_all(dir);
}

TEST(ReportModel, NotAResultDirectoryIsAClearError) {
  EXPECT_THROW(opscope::report::loadRun("/nonexistent/opscope"), opscope::report::ReportError);
  const fs::path empty = tempDir("report_empty");
  try {
    opscope::report::loadRun(empty);
    ADD_FAILURE() << "an empty directory was accepted";
  } catch (const opscope::report::ReportError& e) {
    EXPECT_THAT(e.what(), HasSubstr("not an opscope result directory"));
  }
  fs::remove_all(empty);
}

// Corrupt and truncated files: each is a warning, and everything else is still reported.
TEST(ReportModel, ACorruptFileIsAWarningAndTheRestStays) {
  const fs::path dir = handMadeRun("report_corrupt");
  const std::string memcheck = readFile(dir / "memcheck.json");
  writeFile(dir / "memcheck.json", memcheck.substr(0, memcheck.size() / 2));  // truncated
  writeFile(dir / "capture.db", "this is not a database, it is text padded out to look like one......");
  // A trace left unfinished (the program was killed with SIGKILL): its last event cut in half.
  const std::string trace = readFile(dir / "trace.json");
  fs::remove(dir / "trace.json");
  writeFile(dir / "trace.json.tmp", trace.substr(0, trace.rfind("\"tid\":2")));
  json run = json::parse(readFile(dir / "run.json"));
  run["tools"]["capture"] = true;
  writeFile(dir / "run.json", run.dump());
  const json m = opscope::report::loadRun(dir);
  const std::string warnings = m["warnings"].dump();
  EXPECT_THAT(warnings, HasSubstr("memcheck.json: not valid JSON"));
  EXPECT_THAT(warnings, HasSubstr("capture.db"));
  EXPECT_EQ(m["accuracy"]["ops_failed"], 1);
  EXPECT_EQ(m["ops"]["calls"], 6);
  EXPECT_THAT(warnings, HasSubstr("trace.json.tmp: the trace was not finished"));
  EXPECT_THAT(warnings, HasSubstr("trace.json.tmp: 1 malformed events skipped"));
  EXPECT_EQ(m["ops"]["timeline"]["spans_total"], 2) << "the two whole device spans before the cut";
  EXPECT_EQ(m["memory"]["series"][0]["points"].size(), 2u);
  const opscope_test::Run summary = runOpscope({"summary", dir.string()});
  EXPECT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_THAT(summary.out, HasSubstr("warning: memcheck.json: not valid JSON"));
  fs::remove_all(dir);
}

// A run.json with members of the wrong types (hand-edited, damaged): they are left out with a warning, and
// the summary and page still come out; an overflow finding without a first op is shown as a count.
TEST(ReportModel, ARunJsonWithWrongTypesIsAWarning) {
  const fs::path dir = handMadeRun("report_odd_run_json");
  writeFile(dir / "run.json", R"J({"command":42,"pid":"abc","rank":"x","ended":"exit","options":[1],
    "tools":{"profile":"yes","compare":true,"memcheck":true,"overflow":true},
    "findings":{"fallback":{"no":"ops"},"overflow check":{"ops":0}}})J");
  const json m = opscope::report::loadRun(dir);
  const std::string warnings = m["warnings"].dump();
  EXPECT_THAT(warnings, HasSubstr("run.json: some members are not what opscope writes"));
  EXPECT_THAT(warnings, HasSubstr("findings.fallback"));
  EXPECT_EQ(m["run"]["command"], "");
  EXPECT_TRUE(m["run"]["pid"].is_null());
  EXPECT_EQ(m["tools"]["profile"], true) << "from time_measure.csv, as \"yes\" is not a boolean";
  EXPECT_TRUE(m["fallback"].is_null());
  EXPECT_EQ(m["overflow"]["ops"], 0);
  const std::string summary = summaryAndReportDespite(dir, "run.json");
  EXPECT_THAT(summary, HasSubstr("Overflow: 0 op calls produced NaN/Inf"));
  fs::remove_all(dir);
}

// A memcheck.json of the wrong shapes: a leak that is not an object, a frame that is a string, a summary
// count that is text. Those are left out with one warning; the well-formed leak, error and counts stay, and
// the summary and the page still come out.
TEST(ReportModel, AMemcheckJsonOfTheWrongShapesIsAWarning) {
  const fs::path dir = handMadeRun("report_odd_memcheck_json");
  writeFile(dir / "memcheck.json", R"J({"summary":{"leaked_bytes":100,"leaked_allocations":"one",
    "leak_sites":1,"errors":1},"peaks":[7,{"place":"MLU 0","bytes":300,"op_seq":2}],
    "leaks":[{"bytes":100,"allocations":1,"place":"MLU 0","stack":[{"function":"leakHere()","file":"a.cpp",
      "line":7}]},7,{"bytes":5,"stack":["not a frame"]}],
    "errors":[{"kind":"double-free","message":"m","stack":[{"function":"freeTwice()","inlined":"yes"}]},
      {"kind":"invalid-free","message":"n","stack":[{"function":"freeOnce()"}]}]})J");
  const json m = opscope::report::loadRun(dir);
  EXPECT_THAT(m["warnings"].dump(), HasSubstr("memcheck.json: some members are not what memcheck writes"));
  EXPECT_EQ(m["memory"]["leaked_bytes"], 100);
  EXPECT_EQ(m["memory"]["leaked_allocations"], 0) << "\"one\" is not a count";
  EXPECT_EQ(m["memory"]["errors_total"], 1);
  ASSERT_EQ(m["memory"]["leaks"].size(), 1u);
  EXPECT_EQ(m["memory"]["leaks"][0]["stack"][0]["function"], "leakHere()");
  ASSERT_EQ(m["memory"]["errors"].size(), 1u);
  EXPECT_EQ(m["memory"]["errors"][0]["kind"], "invalid-free");
  EXPECT_EQ(m["memory"]["peaks"].size(), 1u);
  const std::string summary = summaryAndReportDespite(dir, "memcheck.json");
  EXPECT_THAT(summary, HasSubstr("leak: 100 bytes in 1 allocations on MLU 0 from leakHere() a.cpp:7"));
  EXPECT_THAT(summary, HasSubstr("error: invalid-free n at freeOnce()"));
  fs::remove_all(dir);
}

// memcheck.json's per-step marks, hand-worked: MLU 0 ends its steps with 10, 30, 20 and 20 bytes (growths
// +20, -10, 0), its highest peak 50 in step 2; marks of the wrong shapes are left out with one warning. A
// memory_snapshot.json of the wrong shapes keeps what is well formed.
TEST(ReportModel, StepsAndAnOutOfMemorySnapshotAreSummedAndCheckedForShape) {
  const fs::path dir = handMadeRun("report_steps");
  writeFile(dir / "memcheck.json", R"J({"format_version":1,"summary":{"leaked_bytes":0,"leaked_allocations":0,
    "leak_sites":0,"errors":0},"peaks":[],"leaks":[],"errors":[],
    "steps":[{"step":1,"place":"MLU 0","peak":15,"end":10},{"step":2,"place":"MLU 0","peak":50,"end":30},
      {"step":3,"place":"MLU 0","peak":35,"end":20},{"step":4,"place":"MLU 0","peak":20,"end":20},
      {"step":5,"place":"MLU 0","peak":-1,"end":20},7,{"step":6,"peak":1,"end":1}],
    "piece_peaks":[{"place":"MLU 0","bytes":40,"op_seq":9,"op":"ne","site":"GPT at m.py:138 in GPT.forward",
      "modules":[{"module":"transformer.h.0.attn","bytes":30},{"module":"<b>bold</b>","bytes":10},{"module":7}]}]})J");
  writeFile(dir / "memory_snapshot.json", R"J({"format_version":1,"failures":2,
    "failed_request":{"bytes":4096,"place":"MLU 0","stack":[{"function":"askForMore()","file":"b.cpp","line":3}]},
    "live_summary":{"bytes":"many","allocations":3,"sites":2},
    "live":[{"bytes":300,"allocations":2,"place":"MLU 0","stack":[{"function":"holdIt()","file":"c.cpp","line":9}]},
      {"bytes":"x"},{"bytes":5,"allocations":1,"stack":"not frames"}]})J");
  const json m = opscope::report::loadRun(dir);
  ASSERT_EQ(m["memory"]["steps"].size(), 1u) << m["memory"].dump();
  const json& st = m["memory"]["steps"][0];
  EXPECT_EQ(st["place"], "MLU 0");
  EXPECT_EQ(st["steps"], 4);
  EXPECT_EQ(st["first_end"], 10);
  EXPECT_EQ(st["last_end"], 20);
  EXPECT_EQ(st["growth"], 10);
  EXPECT_EQ(st["max_peak"], 50);
  EXPECT_EQ(st["max_peak_step"], 2);
  ASSERT_EQ(st["rows"].size(), 4u);
  EXPECT_EQ(st["rows"][1]["growth"], 20);
  EXPECT_EQ(st["rows"][2]["growth"], -10);
  EXPECT_THAT(m["warnings"].dump(), HasSubstr("memcheck.json: some members are not what memcheck writes"));
  const json& oom = m["memory"]["oom"];
  EXPECT_EQ(oom["failed_request"]["bytes"], 4096);
  EXPECT_EQ(oom["failed_request"]["place"], "MLU 0");
  EXPECT_EQ(oom["failed_request"]["stack"][0]["function"], "askForMore()");
  EXPECT_FALSE(oom["live_summary"].contains("bytes")) << "\"many\" is not a count";
  ASSERT_EQ(oom["live"].size(), 2u);
  EXPECT_EQ(oom["live"][0]["bytes"], 300);
  EXPECT_EQ(oom["live"][1]["stack"], json::array()) << "a stack that is not frames is left out";
  EXPECT_THAT(m["warnings"].dump(),
              HasSubstr("memory_snapshot.json: some members are not what memcheck writes"));
  const std::string summary = summaryAndReportDespite(dir, "memory_snapshot.json");
  EXPECT_THAT(summary,
              HasSubstr("per step on MLU 0 (device memory): 4 steps marked; in use at a step's end 10 -> 20 "
                        "bytes (+10); highest peak 50 bytes (50 B) in step 2"));
  EXPECT_THAT(
      summary,
      HasSubstr("OUT OF MEMORY on MLU 0: a request of 4096 bytes (4.0 KiB) failed at askForMore() b.cpp:3"));
  EXPECT_THAT(summary, HasSubstr("    live: 300 bytes in 2 allocations from holdIt() c.cpp:9"));
  EXPECT_THAT(summary,
              HasSubstr("peak of the program's tensors on MLU 0: 40 bytes (40 B) at GPT at m.py:138 in "
                        "GPT.forward; held then by module:\n    30 bytes (30 B) in transformer.h.0.attn\n"));
  // The page, in headless Chromium: the per-step table, the out-of-memory card and the peak by module, a
  // module name that is markup shown as text, and every table within its card at 1,280 px.
  const std::string dom = renderInChromium(dir / "report.html");
  EXPECT_TRUE(contains(dom, "Per step — MLU 0, device memory"));
  EXPECT_TRUE(contains(dom, "Out of memory (memory_snapshot.json)"));
  EXPECT_TRUE(contains(dom, "a request of 4.0 KiB on MLU 0 failed"));
  EXPECT_TRUE(contains(dom, "Peak of the program's tensors — MLU 0"));
  EXPECT_TRUE(contains(dom, "<code>transformer.h.0.attn</code>"));
  EXPECT_TRUE(contains(dom, "&lt;b&gt;bold&lt;/b&gt;"));
  EXPECT_FALSE(contains(dom, "<b>bold</b>"));
  for (const TableFit& f : tableFits(dir / "report.html", 1280))
    EXPECT_LE(f.needed, f.has) << f.section << " (" << f.table << ") needs " << f.needed << " px";
  fs::remove_all(dir);
}

// Result files are untrusted: a FIFO or a link to /dev/zero in a trace's place, a run.json nested 200,000
// deep or too large, and a missing memcheck.json are each a warning within seconds (under timeout), and the
// memory verdict is then "unknown", never "no leaks".
TEST(ReportModel, HostileFilesAreRefusedAndTheMemoryVerdictIsNeverALie) {
  const fs::path dir = handMadeRun("report_hostile");
  const std::string run_json = readFile(dir / "run.json");
  auto summary = [&] {
    const auto r =
        opscope_test::run({"/usr/bin/timeout", "-s", "KILL", "10", OPSCOPE_PATH, "summary", dir.string()});
    EXPECT_EQ(r.exit_code, 0) << "summary did not finish within 10 s, or failed\n" << r.all();
    return r.all();
  };
  fs::remove(dir / "memcheck.json");  // the run says memcheck was on
  std::string out = summary();
  EXPECT_THAT(out, HasSubstr("memory: unknown (memcheck.json: cannot open)"));
  EXPECT_THAT(out, Not(HasSubstr("no leaks")));
  const json m = opscope::report::loadRun(dir);
  EXPECT_EQ(m["memory"]["unreadable"], "memcheck.json: cannot open");

  const std::string trace = readFile(dir / "trace.json");
  fs::remove(dir / "trace.json");
  ASSERT_EQ(::mkfifo((dir / "trace.json").c_str(), 0600), 0);
  EXPECT_THAT(summary(), HasSubstr("trace.json: not a regular file"));
  // And no time_measure.csv either: how many ops ran, and how fast, is unknown, not "0 op calls" and "not
  // profiled".
  const std::string times = readFile(dir / "time_measure.csv");
  fs::remove(dir / "time_measure.csv");
  out = summary();
  EXPECT_THAT(out, HasSubstr("Ops (profiler): unknown: time_measure.csv is missing and the trace cannot be "
                             "read: trace.json: not a regular file"));
  EXPECT_THAT(out, HasSubstr("speed: unknown (time_measure.csv is missing"));
  EXPECT_THAT(out, Not(HasSubstr("0 op calls")));
  EXPECT_THAT(out, Not(HasSubstr("not profiled")));
  writeFile(dir / "time_measure.csv", times);
  fs::remove(dir / "trace.json");
  fs::create_symlink("/dev/zero", dir / "trace.json");
  EXPECT_THAT(summary(), HasSubstr("trace.json: not a regular file"));
  fs::remove(dir / "trace.json");
  // Numbers no integer can hold (found by fuzz_result_json: a double out of range converted to long is
  // undefined behaviour, which the ASan+UBSan build of this test would report).
  writeFile(dir / "trace.json",
            R"({"traceEvents":[{"name":"x","ph":"X","ts":1,"dur":1,"pid":4.4e94,"tid":1},)"
            R"({"name":"y","ph":"X","ts":1,"dur":1,"pid":4194304,"tid":1e300}]})");
  writeFile(dir / "memcheck.json",
            R"({"summary":{"leaked_bytes":0,"leaked_allocations":0,"leak_sites":0,)"
            R"("errors":0},"peaks":[{"place":"MLU 0","bytes":1e300,"op_seq":-1e300}]})");
  writeFile(dir / "run.json", R"({"command":"x","pid":1e300,"rank":-1e300,"tools":{"memcheck":true}})");
  out = summary();
  EXPECT_THAT(out, HasSubstr("trace.json: 2 malformed events skipped"));
  EXPECT_THAT(out, HasSubstr("peak on MLU 0: 0 bytes"));
  EXPECT_THAT(out, HasSubstr("(pid ?)"));
  // One endless line in the profiler's line format: a 1 GiB event (a sparse file, its bytes NULs) is
  // skipped as malformed, read in pieces; the summary's address space is held to 800 MB where no sanitizer
  // needs more.
  writeFile(dir / "trace.json", "{\"traceEvents\":[\n{\"ph\":\"X\",\"pid\":4194304,\"name\":\"");
  fs::resize_file(dir / "trace.json", std::uintmax_t{1} << 30);
  {
    std::ofstream tail(dir / "trace.json", std::ios::app);
    tail << "\"}\n]}\n";
  }
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  const std::vector<std::string> limited = {"/usr/bin/timeout", "-s",      "KILL",      "20",
                                            OPSCOPE_PATH,       "summary", dir.string()};
#else
  const std::vector<std::string> limited = {
      "/usr/bin/prlimit", "--as=800000000", "/usr/bin/timeout", "-s", "KILL", "20",
      OPSCOPE_PATH,       "summary",        dir.string()};
#endif
  const auto endless = opscope_test::run(limited);
  EXPECT_EQ(endless.exit_code, 0) << endless.all();
  EXPECT_THAT(endless.out, HasSubstr("trace.json: 1 malformed events skipped"));
  writeFile(dir / "trace.json", trace);

  writeFile(dir / "run.json", std::string(200000, '[') + std::string(200000, ']'));
  EXPECT_THAT(summary(), HasSubstr("run.json: nested deeper than 64 levels"));
  std::string open_object = run_json.substr(0, run_json.rfind('}'));  // "{...": a member can follow
  writeFile(dir / "run.json", open_object + ",\"pad\":\"" + std::string(std::size_t{17} << 20, 'x') + "\"}");
  EXPECT_THAT(summary(), HasSubstr("more than the 16 MiB such a file can be"));
  fs::remove_all(dir);
}

// Trace events whose members have the wrong types are skipped and counted, the rest of the trace is read;
// an autocompare.csv with no rows is "no op was compared", not "all 0 compared ops match".
TEST(ReportModel, TraceEventsOfWrongTypesAreSkippedAndNothingComparedIsSaid) {
  const fs::path dir = handMadeRun("report_odd_trace");
  writeFile(
      dir / "trace.json",
      "{\"traceEvents\":[\n"
      "{\"ph\":\"X\",\"name\":\"add\",\"pid\":4194304,\"tid\":1,\"ts\":\"10.0\",\"dur\":2000.0},\n"
      "{\"ph\":\"X\",\"name\":\"relu\",\"pid\":4194304,\"tid\":1,\"ts\":3000.0,\"dur\":1000.0},\n"
      "{\"ph\":\"C\",\"name\":\"device memory\",\"pid\":4194304,\"ts\":1.0,\"args\":{\"bytes\":\"9\"}},\n"
      "{\"ph\":\"X\",\"name\":\"add\",\"pid\":4194305,\"tid\":2,\"ts\":5000.0,\"dur\":4000.0}\n"
      "],\"displayTimeUnit\":\"ms\"}\n");
  const std::string compare = readFile(dir / "autocompare.csv");
  writeFile(dir / "autocompare.csv", compare.substr(0, compare.find('\n') + 1));
  const json m = opscope::report::loadRun(dir);
  EXPECT_THAT(m["warnings"].dump(), HasSubstr("trace.json: 2 malformed events skipped"));
  EXPECT_EQ(m["ops"]["timeline"]["spans_total"], 2);
  EXPECT_EQ(m["accuracy"]["ops_compared"], 0);
  const opscope_test::Run summary = runOpscope({"summary", dir.string()});
  EXPECT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_THAT(summary.out, HasSubstr("accuracy: no op was compared"));
  const std::string dom = checkReport(dir);
  EXPECT_TRUE(contains(dom, "no op was compared"));
  fs::remove_all(dir);
}

// A device span whose name is missing, not a string, or empty is drawn under the name "?".
TEST(ReportModel, TraceSpansWithoutAUsableNameAreNamedQuestionMark) {
  const fs::path dir = handMadeRun("report_nameless_trace");
  writeFile(dir / "trace.json",
            "{\"traceEvents\":[\n"
            "{\"ph\":\"X\",\"name\":\"\",\"pid\":4194304,\"tid\":1,\"ts\":10.0,\"dur\":2000.0},\n"
            "{\"ph\":\"X\",\"name\":7,\"pid\":4194304,\"tid\":1,\"ts\":3000.0,\"dur\":1000.0},\n"
            "{\"ph\":\"X\",\"pid\":4194304,\"tid\":1,\"ts\":5000.0,\"dur\":1000.0},\n"
            "{\"ph\":\"X\",\"name\":\"add\",\"pid\":4194304,\"tid\":1,\"ts\":7000.0,\"dur\":1000.0}\n"
            "],\"displayTimeUnit\":\"ms\"}\n");
  const json m = opscope::report::loadRun(dir);
  const json& timeline = m["ops"]["timeline"];
  EXPECT_EQ(timeline["spans_total"], 4);
  EXPECT_EQ(timeline["names"], json::array({"?", "add"}));
  fs::remove_all(dir);
}

// Text from the run is shown as text: a command line holding "</script>", "<!--<script>" and markup neither
// ends the page's embedded data nor becomes elements.
TEST(ReportPage, MarkupInTheRunIsShownAsText) {
  const fs::path dir = handMadeRun("report_markup");
  json run = json::parse(readFile(dir / "run.json"));
  const std::string command = "prog --tag '</script><!--<script>' <b>bold</b> & done";
  run["command"] = command;
  writeFile(dir / "run.json", run.dump());
  const std::string html = opscope::report::renderHtml(opscope::report::loadRun(dir));
  EXPECT_EQ(html.find("</script><!--"), std::string::npos);
  const std::string dom = checkReport(dir);
  EXPECT_TRUE(contains(dom, "&lt;b&gt;bold&lt;/b&gt; &amp; done"));
  EXPECT_FALSE(contains(dom, "<b>bold</b>"));
  fs::remove_all(dir);
}

// A tool this viewer has no section for (one added after it): it is listed with the tools, and its findings
// are shown as run.json holds them, in the summary and on the page; oversized findings are left out.
TEST(ReportPage, AToolWithoutASectionOfItsOwnIsStillShown) {
  const fs::path dir = handMadeRun("report_new_tool");
  json run = json::parse(readFile(dir / "run.json"));
  run["tools"]["flight recorder"] = true;
  run["findings"]["flight recorder"] = {{"collectives", 12}, {"last", "all_reduce #12 <done>"}};
  run["findings"]["huge"] = std::string(20 * 1024, 'x');
  run["findings"][std::string(100, 'n')] = 1;
  writeFile(dir / "run.json", run.dump());
  const opscope_test::Run summary = runOpscope({"summary", dir.string()});
  EXPECT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_THAT(summary.out, ::testing::ContainsRegex("tools: [^\n]*flight recorder"));
  EXPECT_THAT(summary.out, HasSubstr("Findings of flight recorder:\n{\n \"collectives\": 12,"));
  EXPECT_THAT(summary.out, HasSubstr("warning: run.json: the findings of huge are over 16 KiB; left out"));
  EXPECT_THAT(summary.out,
              HasSubstr("warning: run.json: findings under a name over 64 characters; left out"));
  const std::string dom = checkReport(dir);
  EXPECT_TRUE(contains(dom, "<h3>flight recorder</h3>"));
  EXPECT_TRUE(contains(dom, "all_reduce #12 &lt;done&gt;"));
  fs::remove_all(dir);
}

// The framework's own CPU fallback (opscope_framework_fallback, torch_mlu's): a section of its own on the
// page, a warning in the verdict, its lines in the summary. Rows that are not {op, calls} are left out with
// a warning, and the rest still shown.
TEST(ReportPage, TheFrameworksCpuFallbackIsListed) {
  const fs::path dir = handMadeRun("report_framework_fallback");
  json run = json::parse(readFile(dir / "run.json"));
  run["findings"]["framework fallback"] = {
      {"ops", {{{"op", "aten::cumsum.out"}, {"calls", 3}}, {{"op", "aten::<b>odd</b>"}, {"calls", 1}}}},
      {"other_calls", 0}};
  writeFile(dir / "run.json", run.dump());
  const opscope_test::Run summary = runOpscope({"summary", dir.string()});
  EXPECT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_THAT(summary.out,
              HasSubstr("Framework ops on the CPU (the framework's own fallback): 2 ops, 4 calls\n"
                        "  aten::cumsum.out"));
  EXPECT_THAT(summary.out, Not(HasSubstr("Findings of framework fallback")));
  const std::string dom = checkReport(dir);
  EXPECT_EQ(domCount(dom, "framework-fallback-ops"), 2);
  EXPECT_TRUE(contains(dom, "framework ops ran on the CPU"));
  EXPECT_TRUE(contains(dom, "aten::cumsum.out"));
  EXPECT_TRUE(contains(dom, "aten::&lt;b&gt;odd&lt;/b&gt;"));

  run["findings"]["framework fallback"] = {
      {"ops", {{{"op", "aten::cumsum.out"}, {"calls", 3}}, {{"op", 7}, {"calls", "x"}}, "row"}},
      {"other_calls", "many"}};
  writeFile(dir / "run.json", run.dump());
  const json m = opscope::report::loadRun(dir);
  EXPECT_THAT(m["warnings"].dump(), HasSubstr("framework fallback"));
  ASSERT_EQ(m["framework_fallback"]["ops"].size(), 1u);
  EXPECT_EQ(m["framework_fallback"]["other_calls"], 0);
  run["findings"]["framework fallback"] = "not an object";
  writeFile(dir / "run.json", run.dump());
  EXPECT_EQ(opscope::report::loadRun(dir)["framework_fallback"]["ops"].size(), 0u);
  EXPECT_THAT(summaryAndReportDespite(dir, "run.json"), HasSubstr("framework fallback"));
  fs::remove_all(dir);
}

// run.json's regions of the program (opscope.compare() and the others): a table in the summary and in the
// run section of the page, the labels shown as text; rows of the wrong shape are left out and said.
TEST(ReportPage, TheProgramsRegionsAreListed) {
  const fs::path dir = handMadeRun("report_regions");
  json run = json::parse(readFile(dir / "run.json"));
  run["findings"]["regions"] = {
      {"regions",
       {{{"label", "compare#1"}, {"tool", "autocompare"}, {"opened", 1}, {"calls", 36}, {"taken", 30}},
        {{"label", "<i>step</i>"}, {"tool", "profiler"}, {"opened", 2}, {"calls", 72}, {"taken", 72}}}},
      {"other_regions", 0}};
  writeFile(dir / "run.json", run.dump());
  const opscope_test::Run summary = runOpscope({"summary", dir.string()});
  EXPECT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_THAT(summary.out,
              ::testing::ContainsRegex("Regions of the program [^\n]*: 2\n[^\n]*\n  compare#1 +"
                                       "autocompare +1 +36 +30\n  <i>step</i> +profiler +2 +72 +72\n"));
  EXPECT_THAT(summary.out, Not(HasSubstr("Findings of regions")));
  const std::string dom = checkReport(dir);
  EXPECT_TRUE(contains(dom, "Regions of the program"));
  EXPECT_TRUE(contains(dom, "compare#1"));
  EXPECT_TRUE(contains(dom, "&lt;i&gt;step&lt;/i&gt;"));

  run["findings"]["regions"] = {{"regions", {{{"label", 5}, {"tool", "x"}}, "row"}}, {"other_regions", -1}};
  writeFile(dir / "run.json", run.dump());
  const json m = opscope::report::loadRun(dir);
  EXPECT_THAT(m["warnings"].dump(), HasSubstr("findings.regions"));
  EXPECT_EQ(m["regions"]["regions"].size(), 0u);
  EXPECT_EQ(m["regions"]["other_regions"], 0);
  fs::remove_all(dir);
}

// The dtype cast's and the perturbation check's findings: sections of the summary and lines of its verdict;
// a hand-edited or damaged run.json's rows of the wrong shape are left out and said, the page still made.
TEST(ReportPage, TheDtypeCastAndThePerturbationCheckAreSummarized) {
  const fs::path dir = handMadeRun("report_accuracy_checks");
  json run = json::parse(readFile(dir / "run.json"));
  run["findings"]["dtype cast"] = {
      {"ops", {{{"op", "linear"}, {"from", "bfloat16"}, {"to", "float32"}, {"calls", 132}}}},
      {"refused", json::array()}};
  run["findings"]["perturbation check"] = {
      {"checked", 12}, {"runs", 38}, {"flagged", 2}, {"first", "softmax_forward #4 (upcast, output y)"}};
  writeFile(dir / "run.json", run.dump());
  const opscope_test::Run summary = runOpscope({"summary", dir.string()});
  EXPECT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_THAT(summary.out,
              HasSubstr("Dtype cast (OP_DTYPE_CAST): 1 op ran on the device in a wider dtype\n"
                        "  linear                            132 calls in float32 instead of bfloat16"));
  EXPECT_THAT(summary.out,
              HasSubstr("Perturbation check (OP_PERTURB): 12 ops checked (38 runs on perturbed "
                        "inputs), 2 flagged\n  first flagged: softmax_forward #4 (upcast, output y)"));
  EXPECT_THAT(summary.out, HasSubstr("  UNSTABLE OPS: 2 op checks flagged by the perturbation check; first: "
                                     "softmax_forward #4 (upcast, output y) (perturb.csv)"));
  EXPECT_THAT(summary.out, Not(HasSubstr("Findings of dtype cast")));
  const std::string dom = checkReport(dir);
  EXPECT_EQ(domCount(dom, "dtype-cast-ops"), 1);
  EXPECT_EQ(domCount(dom, "perturb-flagged"), 2);
  EXPECT_TRUE(contains(dom, "perturbation checks flagged"));
  EXPECT_TRUE(contains(dom, "softmax_forward #4 (upcast, output y)"));
  EXPECT_TRUE(contains(dom, "1 op ran in a wider dtype (OP_DTYPE_CAST)"));
  EXPECT_FALSE(contains(dom, "<h3>dtype cast</h3>"));  // not also under "Other tools"

  run["findings"]["dtype cast"] = {{"ops", {{{"op", "linear"}, {"from", 3}, {"calls", -1}}, "row"}}};
  run["findings"]["perturbation check"] = {{"checked", "many"}, {"flagged", 1}};
  writeFile(dir / "run.json", run.dump());
  const json m = opscope::report::loadRun(dir);
  EXPECT_THAT(m["warnings"].dump(), HasSubstr("dtype cast"));
  EXPECT_THAT(m["warnings"].dump(), HasSubstr("perturbation check"));
  EXPECT_EQ(m["dtype_cast"]["ops"].size(), 0u);
  EXPECT_TRUE(m["perturb"].is_null());
  EXPECT_THAT(summaryAndReportDespite(dir, "run.json"), HasSubstr("dtype cast"));
  fs::remove_all(dir);
}

// What compare sampled (OP_AUTOCOMPARE_SAMPLE): a line of the accuracy section and of the verdict, a note on
// the page with the count skipped; a damaged "sampled" member is left out and said.
TEST(ReportPage, WhatCompareSampledIsSaid) {
  const fs::path dir = handMadeRun("report_sampled");
  json run = json::parse(readFile(dir / "run.json"));
  run["findings"]["autocompare"] = {{"sampled",
                                     {{"sample", "first:4"},
                                      {"what", "the first 4 calls of each op signature"},
                                      {"taken", 120},
                                      {"skipped", 5480},
                                      {"steps", 50},
                                      {"signatures", 30}}}};
  writeFile(dir / "run.json", run.dump());
  const opscope_test::Run summary = runOpscope({"summary", dir.string()});
  EXPECT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_THAT(summary.out,
              HasSubstr("  sampled (OP_AUTOCOMPARE_SAMPLE=first:4): the first 4 calls of each op "
                        "signature; 120 calls compared, 5480 not (30 op signatures), over 50 "
                        "steps\n"));
  EXPECT_THAT(summary.out, Not(HasSubstr("Findings of autocompare")));
  const std::string dom = checkReport(dir);
  EXPECT_EQ(domCount(dom, "compare-skipped"), 5480);
  EXPECT_TRUE(contains(dom, "OP_AUTOCOMPARE_SAMPLE=first:4"));

  run["findings"]["autocompare"] = {{"sampled", {{"sample", 4}, {"taken", -1}}}};
  writeFile(dir / "run.json", run.dump());
  const json m = opscope::report::loadRun(dir);
  EXPECT_THAT(m["warnings"].dump(), HasSubstr("sampled"));
  EXPECT_TRUE(m["sampling"].is_null());
  fs::remove_all(dir);
}

TEST(ReportCli, BadArgumentsAndUnwritableOutputAreClearErrors) {
  opscope_test::Run r = runOpscope({"report"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("report needs a result directory"));
  r = runOpscope({"summary", "/nonexistent/opscope"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/opscope: not a directory"));
  r = runOpscope({"report", "--bogus", "x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown option '--bogus'"));
  // A root of result directories: the error names the newest run in it.
  const fs::path dir = handMadeRun("report_cli_root/20261125-100000-42");
  r = runOpscope({"report", dir.parent_path().string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("the newest is " + dir.string()));
  // An output that cannot be written: a clear error, and the result directory is as it was.
  const auto before = std::distance(fs::directory_iterator(dir), fs::directory_iterator());
  r = runOpscope({"report", dir.string(), "--out", "/dev/null/report.html"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot write /dev/null/report.html.tmp"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), before);
  // --out elsewhere works.
  const fs::path out = dir.parent_path() / "elsewhere.html";
  r = runOpscope({"report", dir.string(), "--out", out.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out));
  fs::remove_all(dir.parent_path());
}

// --- real runs, rendered in Chromium ----------------------------------------------------------------------

// Runs mnist_train under `opscope run` with the given tools; returns its result directory and its stderr.
std::pair<fs::path, std::string> runMnist(const std::string& name, const std::vector<std::string>& tools,
                                          const opscope_test::Env& env = {}) {
  const fs::path root = tempDir(name);
  std::vector<std::string> args = {"run"};
  args.insert(args.end(), tools.begin(), tools.end());
  args.insert(args.end(), {"--out", root.string(), "--"});
  const auto command = opscope_test::mnistCommand(MNIST_TRAIN_PATH, 2, 8);
  args.insert(args.end(), command.begin(), command.end());
  const opscope_test::Run r = runOpscope(args, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return {opscope_test::onlyResultDir(root), r.err};
}

long long stderrCount(const std::string& err, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(err, m, std::regex(pattern))) return -1;
  return std::stoll(m[1]);
}

// The showcase: every tool on, one planted bug (conv2d_backward_filter's kernel off by 0.1% in 5% of its
// output), as make demo runs it.
TEST(ReportPage, AFaultedRunRendersWithEverySectionAndTheFailingOp) {
  const auto [dir, err] = runMnist("report_faulted", {"--capture", "--compare", "--profile", "--memcheck"},
                                   {{"MLU_SIM_FAULT", "conv2d_backward_filter:scale=1.001@0.05"}});
  ASSERT_FALSE(dir.empty());
  const std::string dom = checkReport(dir, "report-faulted.png");
  EXPECT_TRUE(contains(dom, "conv2d_backward_filter"));
  EXPECT_TRUE(contains(dom, "class=\"first-failure\""));
  // The first failure's box names the planted op (the op table names it too: look inside the box).
  const auto box = dom.find("class=\"first-failure\"");
  ASSERT_NE(box, std::string::npos);
  EXPECT_NE(dom.substr(box, 400).find("conv2d_backward_filter"), std::string::npos) << dom.substr(box, 400);
  EXPECT_TRUE(contains(dom, "--acc_check"));
  // Only the overflow check was off (automatic fallback is on by default: its section lists no op).
  const std::regex not_enabled("class=\"not-enabled\"");
  EXPECT_EQ(std::distance(std::sregex_iterator(dom.begin(), dom.end(), not_enabled), std::sregex_iterator()),
            1);
  EXPECT_TRUE(contains(dom, "OP_OVERFLOW_CHECK=1"));
  EXPECT_EQ(domCount(dom, "fallback-ops"), 0);
  // The page's counts are the run's own (its stderr lines).
  EXPECT_EQ(domCount(dom, "ops-failed"),
            stderrCount(err, R"(autocompare: \d+ ops compared \(\d+ tensors\), \d+ passed, (\d+) failed)"));
  EXPECT_EQ(domCount(dom, "ops-compared"), stderrCount(err, R"(autocompare: (\d+) ops compared)"));
  EXPECT_EQ(domCount(dom, "op-calls"), stderrCount(err, R"(opscope profiler: (\d+) op calls)"));
  EXPECT_EQ(domCount(dom, "captured-ops"), stderrCount(err, R"(captured (\d+) ops)"));
  EXPECT_EQ(domCount(dom, "captured-tensors"), stderrCount(err, R"(captured \d+ ops, (\d+) tensors)"));
  EXPECT_GT(domCount(dom, "ops-failed"), 0);
  EXPECT_EQ(domCount(dom, "leaked-bytes"), 0);
  // At 1,280 px every table fits its card, the accuracy table's 17 columns too: nothing scrolls sideways.
  const std::vector<TableFit> fits = tableFits(dir / "report.html", 1280);
  EXPECT_EQ(fits.size(), 10u)
      << "options, ops, device time, critical path, steps, the ops' timeline, accuracy, "
         "memory peaks, memory over time, memory per step";
  bool accuracy = false;
  for (const TableFit& f : fits) {
    EXPECT_LE(f.needed, f.has) << f.section << " (" << f.table << ") needs " << f.needed << " px";
    EXPECT_GT(f.has, 1000) << f.section;
    accuracy |= f.section == "accuracy";
  }
  EXPECT_TRUE(accuracy);
  // The memory over time: a chart drawn in the page (SVG, nothing loaded), within its card.
  EXPECT_EQ(std::count_if(fits.begin(), fits.end(),
                          [](const TableFit& f) { return f.section == "memory" && f.table == "chart"; }),
            1);
  EXPECT_TRUE(contains(dom, "Allocated bytes over time — MLU 0"));
  for (const char* column : {">diff2<", ">diff3<", ">NaN dev/ref<", ">Inf dev/ref<", ">atol / rtol<"})
    EXPECT_TRUE(contains(dom, column)) << column;
  EXPECT_TRUE(contains(dom, "replay-row\"")) << "a failing row's op-replay command";
  // The timings were taken alongside the other tools: the page says so, and what to run instead.
  EXPECT_TRUE(contains(dom, "Timed alongside capture, compare, memcheck"));
  EXPECT_THAT(readFile(dir / "summary.txt"), HasSubstr("caveat: timed while capture, compare, memcheck ran"));
  EXPECT_TRUE(contains(dom, "What next"));
  EXPECT_TRUE(contains(dom, "Warm-up (ms)"));
  EXPECT_TRUE(contains(dom, "class=\"toggle\"")) << "ops with more than one input shape expand";
  const json model = opscope::report::loadRun(dir);
  ASSERT_GE(model["next"].size(), 2u) << model["next"].dump();
  EXPECT_EQ(model["next"][0]["about"], "accuracy");
  EXPECT_EQ(model["next"][0]["command"], model["accuracy"]["rows"][0]["replay"]);
  EXPECT_EQ(model["next"][1]["about"], "speed");
  EXPECT_THAT(model["next"][1]["command"].get<std::string>(), HasSubstr("opscope run --profile -- "));
  // The memory peak names its op: the op of that seq in time_measure.csv.
  ASSERT_EQ(model["memory"]["peaks"].size(), 1u);
  const json& peak = model["memory"]["peaks"][0];
  std::map<std::uint64_t, std::string> op_of_seq;
  opscope::results::CsvReader csv(dir / "time_measure.csv", {"seq", "name"});
  csv.forEach([&](const std::vector<std::string>& f) {
    op_of_seq[std::stoull(f[csv.column("seq")])] = f[csv.column("name")];
  });
  ASSERT_GT(peak["op_seq"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(peak["op"], op_of_seq.at(peak["op_seq"].get<std::uint64_t>()));
  // The replay command the page gives reproduces the failure.
  const std::string replay = model["accuracy"]["rows"][0]["replay"];
  // By the failing row's call number, the one the finding shows ("#seq").
  std::smatch id;
  ASSERT_TRUE(std::regex_search(replay, id, std::regex("--seq (\\d+)"))) << replay;
  EXPECT_EQ(std::stoll(id[1]), model["accuracy"]["rows"][0]["seq"].get<long long>());
  const opscope_test::Run rerun =
      opscope_test::run({OP_REPLAY_PATH, dir.string(), "--seq", id[1], "--acc_check"},
                        {{"MLU_SIM_FAULT", "conv2d_backward_filter:scale=1.001@0.05"}});
  EXPECT_THAT(rerun.all(), HasSubstr("conv2d_backward_filter"));
  EXPECT_THAT(rerun.all(), HasSubstr("allclose: False"));
  fs::remove_all(dir.parent_path());
}

// OP_CAPTURE_MODE=stats with a NaN planted in relu: the capture section names the first call whose outputs
// hold a NaN, and what next is its op-replay command (it was kept whole).
TEST(ReportPage, AStatsCaptureNamesTheFirstNanAndHowToReplayIt) {
  const auto [dir, err] =
      runMnist("report_stats", {"--capture", "--capture-mode=stats"}, {{"MLU_SIM_FAULT", "relu:nan@0.001"}});
  ASSERT_FALSE(dir.empty());
  const std::string dom = checkReport(dir, "report-stats.png");
  EXPECT_TRUE(contains(dom, "first NaN/Inf in outputs"));
  EXPECT_GT(domCount(dom, "stats-calls"), 0);
  const json model = opscope::report::loadRun(dir);
  const json& first = model["capture"]["stats"]["first_nan"];
  ASSERT_TRUE(first.is_object()) << model["capture"].dump();
  EXPECT_EQ(first["op"], "relu");
  EXPECT_TRUE(contains(dom, fmt::format("relu #{}", first["seq"].get<std::int64_t>())));
  ASSERT_FALSE(model["next"].empty());
  EXPECT_EQ(model["next"][0]["command"], first["replay"]);
  EXPECT_THAT(first["replay"].get<std::string>(),
              HasSubstr(fmt::format("--seq {} --acc_check", first["seq"].get<std::int64_t>())));
  const opscope_test::Run summary = runOpscope({"summary", dir.string()});
  EXPECT_THAT(summary.out, HasSubstr(fmt::format("first NaN/Inf in the outputs of relu #{}",
                                                 first["seq"].get<std::int64_t>())));
  fs::remove_all(dir.parent_path());
}

TEST(ReportPage, ACleanRunRendersWithNothingWrong) {
  const auto [dir, err] = runMnist("report_clean", {"--compare", "--profile", "--memcheck"});
  ASSERT_FALSE(dir.empty());
  const std::string dom = checkReport(dir, "report-clean.png");
  EXPECT_TRUE(contains(dom, "Where the device time went"));
  EXPECT_TRUE(contains(dom, "Critical path of the 2 steps"));
  EXPECT_EQ(domCount(dom, "ops-failed"), 0);
  EXPECT_EQ(domCount(dom, "memory-errors"), 0);
  EXPECT_FALSE(contains(dom, "class=\"first-failure\""));
  EXPECT_EQ(domCount(dom, "captured-ops"), -1) << "capture was off";
  fs::remove_all(dir.parent_path());
}

// mnist_train profiled with 250 ms planted in each max_pool2d_forward kernel (far above any kernel's own
// time, sanitizer builds included): the program waits for the device every step (it reads the loss), so the
// delay is on each step's critical path, and first there (step 0 also initializes the weights: the run's
// path, and each later step's). The device's busy time is the sum of its spans (one queue runs one task at
// a time), as the op table's.
TEST(ReportModel, ADelayPlantedInAKernelIsFirstOnTheCriticalPath) {
  const auto [dir, err] =
      runMnist("report_delay", {"--profile"}, {{"MLU_SIM_FAULT", "max_pool2d_forward:delay=250"}});
  ASSERT_FALSE(dir.empty());
  const json m = opscope::report::loadRun(dir);
  const json& d = m["ops"]["device_time"];
  ASSERT_TRUE(d.is_object()) << m["ops"].dump();
  EXPECT_EQ(d["steps"], 2);
  const json& path = d["critical_path"];
  ASSERT_FALSE(path["top"].empty());
  EXPECT_EQ(path["top"][0]["name"], "max_pool2d_forward") << path.dump();
  EXPECT_EQ(path["top"][0]["where"], "device");
  EXPECT_GE(path["top"][0]["ms"].get<double>(), 2 * 250.0) << "one call a step, 250 ms each";
  EXPECT_NEAR(
      path["device_ms"].get<double>() + path["host_ms"].get<double>() + path["latency_ms"].get<double>(),
      path["ms"].get<double>(), 0.01);
  for (const json& row : d["step_rows"]) {
    if (row["step"] != 0) {
      EXPECT_EQ(row["top"][0]["name"], "max_pool2d_forward") << row.dump();
    }
  }
  ASSERT_EQ(d["devices"].size(), 1u);
  const json& dev = d["devices"][0];
  EXPECT_NEAR(dev["compute_ms"].get<double>(), m["ops"]["device_ms"].get<double>(), 0.01);
  EXPECT_NEAR(dev["busy_ms"].get<double>() + dev["idle_ms"].get<double>(), dev["window_ms"].get<double>(),
              0.01);
  const json& idle = dev["idle"];
  EXPECT_NEAR(idle["host_bound_ms"].get<double>() + idle["host_copy_ms"].get<double>() +
                  idle["host_collective_ms"].get<double>() + idle["notifier_ms"].get<double>() +
                  idle["queued_ms"].get<double>(),
              dev["idle_ms"].get<double>(), 0.01);
  const opscope_test::Run summary = runOpscope({"summary", dir.string()});
  EXPECT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_THAT(summary.out, ::testing::ContainsRegex("Critical path of the 2 steps \\([0-9.]+ ms\\): device"));
  EXPECT_THAT(summary.out, ::testing::ContainsRegex("\n    max_pool2d_forward +device +[0-9.]+ ms"));
  EXPECT_THAT(summary.out, HasSubstr("    MLU 0: busy "));
  fs::remove_all(dir.parent_path());
}

// One tool: the page says which sections were not enabled, and how to enable them.
TEST(ReportPage, AOneToolRunSaysTheOthersWereNotEnabled) {
  const auto [dir, err] = runMnist("report_profile_only", {"--profile"});
  ASSERT_FALSE(dir.empty());
  const std::string dom = checkReport(dir, "report-profile-only.png");
  EXPECT_GT(domCount(dom, "op-calls"), 0);
  // Timed alone: no caveat, and the next step for speed is to capture the slowest op and time it apart.
  EXPECT_FALSE(contains(dom, "Timed alongside"));
  EXPECT_THAT(readFile(dir / "summary.txt"), Not(HasSubstr("caveat")));
  const json model = opscope::report::loadRun(dir);
  ASSERT_EQ(model["next"].size(), 1u) << model["next"].dump();
  EXPECT_EQ(model["next"][0]["command"], "opscope run --capture='^" +
                                             model["ops"]["table"][0]["name"].get<std::string>() + "$' -- " +
                                             model["run"]["command"].get<std::string>());
  for (const char* flag : {"--compare", "--memcheck", "--capture", "OP_OVERFLOW_CHECK=1"}) {
    EXPECT_TRUE(contains(dom, flag)) << "the page says how to turn it on";
  }
  for (const char* name : {"ops-compared", "leaked-bytes", "captured-ops"})
    EXPECT_EQ(domCount(dom, name), -1);
  const opscope_test::Run summary = runOpscope({"summary", dir.string()});
  EXPECT_THAT(summary.out, HasSubstr("Accuracy (auto-compare): not enabled for this run"));
  EXPECT_THAT(summary.out, HasSubstr("Memory (memcheck): not enabled for this run"));
  fs::remove_all(dir.parent_path());
}

// Only the fallback list: its counts come from run.json.
TEST(ReportPage, AFallbackOnlyRunShowsTheOpsThatFellBack) {
  const auto [dir, err] = runMnist("report_fallback_only", {"--fallback=relu"});
  ASSERT_FALSE(dir.empty());
  const std::string dom = checkReport(dir);
  EXPECT_EQ(domCount(dom, "fallback-ops"), 1);
  EXPECT_TRUE(contains(dom, "relu"));
  const json model = opscope::report::loadRun(dir);
  EXPECT_EQ(model["fallback"]["ops"][0]["op"], "relu");
  // The run's own count: "opscope:   relu   N calls (forced by the fallback list)".
  EXPECT_EQ(model["fallback"]["ops"][0]["forced"].get<long long>(),
            stderrCount(err, R"(relu +(\d+) calls \(forced)"));
  fs::remove_all(dir.parent_path());
}

// NaN planted in relu, found by the overflow check and by compare (without capture: the failing ops'
// tensors are stored with their compare results, so the replay command is still given).
TEST(ReportPage, OverflowFindingsAndCompareOnlyReplays) {
  const auto [dir, err] = runMnist("report_overflow", {"--compare"},
                                   {{"MLU_SIM_FAULT", "relu:nan@0.001"}, {"OP_OVERFLOW_CHECK", "1"}});
  ASSERT_FALSE(dir.empty());
  const std::string dom = checkReport(dir);
  EXPECT_EQ(domCount(dom, "overflow-ops"), stderrCount(err, R"(overflow: (\d+) op calls? produced NaN/Inf)"));
  EXPECT_GT(domCount(dom, "overflow-ops"), 0);
  EXPECT_TRUE(contains(dom, "relu #"));
  const json model = opscope::report::loadRun(dir);
  EXPECT_EQ(model["overflow"]["first"]["op"], "relu");
  EXPECT_EQ(model["accuracy"]["first_failure"]["op"], "relu");
  EXPECT_THAT(model["accuracy"]["rows"][0]["replay"].get<std::string>(), HasSubstr("--acc_check"));
  fs::remove_all(dir.parent_path());
}

// A memory error: its kind, message and the function of its call site (memcheck_probe double-free).
TEST(ReportPage, MemoryErrorsShowTheirKindAndSite) {
  const fs::path root = tempDir("report_double_free");
  const opscope_test::Run r =
      runOpscope({"run", "--memcheck", "--out", root.string(), "--", MEMCHECK_PROBE_PATH, "double-free"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const fs::path dir = opscope_test::onlyResultDir(root);
  ASSERT_FALSE(dir.empty());
  const std::string dom = checkReport(dir, "report-double-free.png");
  EXPECT_EQ(domCount(dom, "memory-errors"), 1);
  EXPECT_TRUE(contains(dom, "double-free"));
  EXPECT_TRUE(contains(dom, "already freed"));
  EXPECT_TRUE(contains(dom, "freeTwice"));
  fs::remove_all(root);
}

// A race between a copy and a host function (memcheck_probe race-host-func): a line of the verdict with
// its count and first pair, and the error's card says what to do.
TEST(ReportPage, RacesHaveAVerdictLineAndWhatToDo) {
  const fs::path root = tempDir("report_race");
  const opscope_test::Run r = runOpscope(
      {"run", "--memcheck-race", "--out", root.string(), "--", MEMCHECK_PROBE_PATH, "race-host-func"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const fs::path dir = opscope_test::onlyResultDir(root);
  ASSERT_FALSE(dir.empty());
  const std::string dom = checkReport(dir);
  EXPECT_EQ(domCount(dom, "memory-errors"), 1);
  EXPECT_EQ(domCount(dom, "races"), 1);
  EXPECT_EQ(domCount(dom, "uninitialized-reads"), -1);  // no such line
  EXPECT_TRUE(contains(dom, "pair of accesses on different queues that nothing orders"));
  EXPECT_TRUE(contains(dom, "a host function on queue"));
  EXPECT_TRUE(contains(dom, "What the second access sees depends on timing"));
  fs::remove_all(root);
}

// Leaks and memory errors with their symbolized sites (examples/leaky).
TEST(ReportPage, LeakSitesShowTheirFunctions) {
  const fs::path root = tempDir("report_leaky");
  const opscope_test::Run r = runOpscope({"run", "--memcheck", "--out", root.string(), "--", LEAKY_PATH});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const fs::path dir = opscope_test::onlyResultDir(root);
  ASSERT_FALSE(dir.empty());
  const std::string dom = checkReport(dir, "report-leaky.png");
  EXPECT_EQ(domCount(dom, "leaked-bytes"), 172032);
  EXPECT_EQ(domCount(dom, "leak-sites"), 3);
  EXPECT_TRUE(contains(dom, "leakInLoop"));
  EXPECT_TRUE(contains(dom, "leaky.cpp"));
  EXPECT_TRUE(contains(dom, "libraryLeak"));
  fs::remove_all(root);
}

}  // namespace

// autocompare.csv's op class and ULPs (compare/op_class.h) reach the model and the summary's failure table;
// an older file without those columns still loads, its ULPs shown as "-".
TEST(ReportModel, TheOpClassAndUlpsOfAFailureAreShownWhenTheFileHasThem) {
  const fs::path dir = handMadeRun("report_ulps");
  {
    const json m = opscope::report::loadRun(dir);  // the older header
    EXPECT_TRUE(m["warnings"].empty()) << m["warnings"].dump();
    const json& row = m["accuracy"]["rows"][0];
    EXPECT_EQ(row["op"], "relu");
    EXPECT_TRUE(row["max_ulp"].is_null());
    EXPECT_EQ(row["op_class"], "");
    EXPECT_THAT(opscope::report::renderSummary(m),
                ::testing::ContainsRegex("relu +output y .* 0.900000 +-\n"));
  }
  writeFile(
      dir / "autocompare.csv",
      "seq,op,thread,device,queue,tensor,dtype,shape,allclose,max_abs_diff,max_rel_diff,mae,cosine,"
      "mismatch_ratio,diff1,diff2,diff3,dev_nan,ref_nan,dev_inf,ref_inf,atol,rtol,verdict,module,source,"
      "forward_op,region,op_class,max_ulp,mean_ulp\n"
      "2,relu,0,0,1,output y,float32,\"[2]\",False,3e-06,1e-06,1e-6,0.9,0.5,0.1,0.1,0.25,0,0,0,0,0,0,fail,"
      "\"\",\"\",\"\",\"\",exact,17,0.06\n");
  const json m = opscope::report::loadRun(dir);
  EXPECT_TRUE(m["warnings"].empty()) << m["warnings"].dump();
  const json& row = m["accuracy"]["rows"][0];
  EXPECT_EQ(row["op_class"], "exact");
  EXPECT_DOUBLE_EQ(row["max_ulp"].get<double>(), 17);
  EXPECT_DOUBLE_EQ(row["mean_ulp"].get<double>(), 0.06);
  EXPECT_THAT(opscope::report::renderSummary(m),
              ::testing::ContainsRegex("relu +output y .* 0.900000 +17\n"));
  fs::remove_all(dir);
}
