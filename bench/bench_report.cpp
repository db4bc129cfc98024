// The run report on a run of a million op calls: how long `opscope report` takes to read the result
// directory (loadRun) and write the page (renderHtml), and how big the page is (counter page_bytes; the
// goal is under 20 MB whatever the run's length).
//
// The result directory is made once, synthetically, in the files' own formats: a million op calls in
// time_measure.csv, their host and device spans and flows in trace.json (one event per line, as the
// profiler writes it), a compared output per op in autocompare.csv (one op in a thousand failing), two
// memory samples per op in memcheck_timeline.csv, and a memcheck.json with three leak sites.
//     build/bin/bench_report [--ops=N]   (default 1000000; the directory goes under $TMPDIR)
#include <opscope/report/report.h>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

namespace fs = std::filesystem;

namespace {

std::size_t g_ops = 1'000'000;

class File {
 public:
  explicit File(const fs::path& path) : f_(std::fopen(path.c_str(), "w")) {
    if (f_ == nullptr) {
      std::fprintf(stderr, "bench_report: cannot write %s\n", path.c_str());
      std::exit(1);
    }
  }
  ~File() { std::fclose(f_); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  void put(const std::string& s) { std::fwrite(s.data(), 1, s.size(), f_); }

 private:
  std::FILE* f_;
};

fs::path makeRun(std::size_t ops) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("opscope_bench_report_{}", ops);
  if (fs::exists(dir / "run.json")) return dir;  // made by an earlier run of the bench
  fs::create_directories(dir);
  static constexpr const char* kNames[] = {
      "conv2d_forward",  "relu",    "matmul", "add", "softmax_forward", "layer_norm_forward",
      "dropout_forward", "sgd_step"};
  {
    File f(dir / "time_measure.csv");
    f.put("name,seq,thread,device,queue,host_ms,device_ms,device_tasks,fallback,shapes\n");
    for (std::size_t i = 1; i <= ops; ++i) {
      f.put(fmt::format("{},{},0,0,1,0.004000,{:.6f},1,,\"x float32[32,64,28,28]; y float32[32,64,28,28]\"\n",
                        kNames[i % 8], i, 0.01 + static_cast<double>(i % 97) * 0.001));
    }
  }
  {
    File f(dir / "trace.json");
    f.put(
        "{\"traceEvents\":[\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":7,\"args\":{\"name\":\"host "
        "(pid 7)\"}}");
    double ts = 0;
    for (std::size_t i = 1; i <= ops; ++i) {
      const char* name = kNames[i % 8];
      const double dur = 10 + static_cast<double>(i % 97);
      f.put(fmt::format(
          ",\n{{\"ph\":\"X\",\"cat\":\"mlu_op\",\"name\":\"{}\",\"pid\":7,\"tid\":7,\"ts\":{:.3f},\"dur\":4."
          "000,"
          "\"args\":{{\"op_id\":1,\"seq\":{},\"device\":0,\"queue\":1,\"x\":\"float32[32,64,28,28]\"}}}}",
          name, ts, i));
      f.put(
          fmt::format(",\n{{\"ph\":\"s\",\"cat\":\"mlu_op\",\"name\":\"mlu_op\",\"id\":{},\"pid\":7,\"tid\":"
                      "7,\"ts\":{:.3f}}}",
                      i, ts));
      f.put(fmt::format(
          ",\n{{\"ph\":\"X\",\"cat\":\"mlu_op\",\"name\":\"{}\",\"pid\":4194304,\"tid\":1,\"ts\":{:.3f},"
          "\"dur\":{:.3f},\"args\":{{\"seq\":{}}}}}",
          name, ts + 5, dur, i));
      f.put(fmt::format(
          ",\n{{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"mlu_op\",\"name\":\"mlu_op\",\"id\":{},\"pid\":4194304,"
          "\"tid\":1,\"ts\":{:.3f}}}",
          i, ts + 5));
      ts += dur + 6;
    }
    f.put("\n],\"displayTimeUnit\":\"ms\"}\n");
  }
  {
    File f(dir / "autocompare.csv");
    f.put(
        "seq,op,thread,device,queue,tensor,dtype,shape,allclose,max_abs_diff,max_rel_diff,mae,cosine,"
        "mismatch_ratio,diff1,diff2,diff3,dev_nan,ref_nan,dev_inf,ref_inf,atol,rtol,verdict\n");
    for (std::size_t i = 1; i <= ops; ++i) {
      const bool fail = i % 1000 == 0;
      f.put(fmt::format(
          "{},{},0,0,1,output y,float32,\"[32, 64, 28, 28]\",{},{},{},1e-08,1,{},1e-08,1e-08,1e-07,0,0,0,0,"
          "1e-05,1e-05,{}\n",
          i, kNames[i % 8], fail ? "False" : "True", fail ? 0.01 : 1e-7, fail ? 0.02 : 1e-6,
          fail ? 0.01 : 0.0, fail ? "fail" : "pass"));
    }
  }
  {
    File f(dir / "memcheck_timeline.csv");
    f.put("time_ms,op_seq,place,bytes\n");
    for (std::size_t i = 1; i <= ops; ++i) {
      const double t = static_cast<double>(i) * 0.1;
      f.put(fmt::format("{:.6f},{},MLU 0,{}\n{:.6f},{},MLU 0,{}\n", t, i, 1048576 + (i % 4096) * 256,
                        t + 0.05, i, 1048576));
    }
  }
  {
    File f(dir / "memcheck.json");
    std::string leaks;
    for (int s = 0; s < 3; ++s) {
      leaks += fmt::format(
          "{}{{\"bytes\":{},\"allocations\":1,\"place\":\"MLU "
          "0\",\"device\":0,\"stack\":[{{\"address\":\"0x1\","
          "\"function\":\"site{}()\",\"module\":\"prog\",\"offset\":\"0x1\",\"file\":\"a.cpp\",\"line\":{}}}]"
          "}}",
          s ? "," : "", 4096 << s, s, 10 + s);
    }
    f.put(fmt::format(
        "{{\"tool\":\"opscope memcheck\",\"errors\":[],\"peaks\":[{{\"place\":\"MLU 0\",\"device\":0,"
        "\"bytes\":2097152,\"op_seq\":4095}}],\"leaks\":[{}],\"summary\":{{\"leaked_bytes\":28672,"
        "\"leaked_allocations\":3,\"leak_sites\":3,\"errors\":0}}}}",
        leaks));
  }
  File(dir / "run.json")
      .put(fmt::format(
          "{{\"command\":\"synthetic {} "
          "ops\",\"pid\":7,\"rank\":-1,\"ended\":\"exit\",\"tools\":{{\"capture\":false,"
          "\"compare\":true,\"profile\":true,\"memcheck\":true,\"fallback\":false,\"overflow\":false}}}}",
          ops));
  return dir;
}

void BM_ReportOfAMillionOps(benchmark::State& state) {
  const fs::path dir = makeRun(g_ops);
  std::size_t bytes = 0;
  for (auto _ : state) {
    const nlohmann::json model = opscope::report::loadRun(dir);
    const std::string page = opscope::report::renderHtml(model);
    bytes = page.size();
    benchmark::DoNotOptimize(page.data());
  }
  state.counters["ops"] = static_cast<double>(g_ops);
  state.counters["page_bytes"] = static_cast<double>(bytes);
  state.counters["page_MB"] = static_cast<double>(bytes) / 1e6;
}
BENCHMARK(BM_ReportOfAMillionOps)->Unit(benchmark::kSecond)->Iterations(1)->Repetitions(1);

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--ops=", 6) == 0) g_ops = std::strtoull(argv[i] + 6, nullptr, 10);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
