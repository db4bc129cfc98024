// The profiler's host-side cost per op call, and the size of an op span in trace.json.
//
// BM_ProfiledOpCall drives the profiler tool itself as the hook does around every op call it watches
// (before() and after() on the calling thread, the writer thread serializing in the background), with the
// OpCall of a 4-D add; BM_UnprofiledOpCall is the same loop without the tool. The argument is the pace:
// each iteration first spins that many nanoseconds, outside the calls the profiler sees (a real op call
// through the hook takes about 1.5 us before the profiler adds anything: bench_hooks), so that the writer
// thread keeps up as it does in a program; the cost per call is the difference of the two at the same pace.
// At pace 0 the loop records millions of calls a second, faster than the writer serializes them: the backlog
// then costs the recording thread fresh chunk memory (page faults), which is what a burst of tiny ops costs.
// BM_ProfiledOpCallTimed times the calls themselves instead (bursts of 16, paced), without the loop's clock
// reads that the difference of the two loops also subtracts: the stricter figure.
// Counter op_span_bytes: the trace bytes per op span with its arguments. The whole path — a real op call
// through libopscope.so with and without OP_TIME_MEASURE=1, which adds the hook's reading of the call's
// descriptors and the device span, flow and counter events to this — is bench_hooks' BM_FillOneElement:
//     LD_PRELOAD=build/lib/libopscope.so build/bin/bench_hooks
//     OP_TIME_MEASURE=1 LD_PRELOAD=build/lib/libopscope.so build/bin/bench_hooks
// Trace bytes per event of whole runs: build/bin/trace-check prints them for any trace.
#include <opscope/config.h>
#include <opscope/profiler/profiler_tool.h>
#include <opscope/run_info.h>

#include <benchmark/benchmark.h>
#include <mlu/mlurt.h>
#include <mlu/op_args.h>

#include <filesystem>
#include <memory>
#include <string>

namespace {

// The device clock (CLOCK_MONOTONIC), as the hook reads it around a call.
std::int64_t monotonicNs() { return static_cast<std::int64_t>(mlurtGetTimestampNs()); }

// The op call's own time: spins until ns have passed since start.
void spinUntil(std::int64_t start, std::int64_t ns) {
  while (ns > 0 && monotonicNs() - start < ns) {
  }
}

mlu::TensorView tensor4d() {
  mlu::TensorView v;
  v.dtype = MLUOP_DTYPE_FLOAT;
  v.ndim = 4;
  v.dims = {32, 64, 28, 28};
  v.strides = {64 * 28 * 28, 28 * 28, 28, 1};
  v.present = true;
  return v;
}

// The profiler tool writing to a fresh result directory (removed at the end), and the OpCall of a 4-D add
// it is driven with, as the hook would.
struct ProfiledAdd {
  explicit ProfiledAdd(const char* name, bool gzip = false)
      : dir(std::filesystem::temp_directory_path() / name) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    opscope::Config config;
    config.time_measure = true;
    config.trace_gzip = gzip;  // OP_TRACE_GZIP=1: the writer thread compresses (zlib level 6)
    opscope::RunInfo run = opscope::makeRunInfo(dir.string());
    run.result_dir = dir.string();
    profiler = opscope::profiler::makeProfilerTool(config, run);
    args.alpha = 1.0f;
    args.a = args.b = args.c = tensor4d();
    call.op = mlu::opIdOf<mlu::add_args>();
    call.name = mlu::add_args::kName;
    call.symbol = mlu::add_args::kSymbol;
    call.args = &args;
    call.args_ok = true;
    call.queue_id = 1;
  }
  ProfiledAdd(const ProfiledAdd&) = delete;  // call points at args
  ProfiledAdd& operator=(const ProfiledAdd&) = delete;
  ~ProfiledAdd() {
    profiler.reset();
    std::filesystem::remove_all(dir);
  }

  std::filesystem::path dir;
  mlu::add_args args;
  opscope::OpCall call;
  std::unique_ptr<opscope::Tool> profiler;
};

void BM_ProfiledOpCall(benchmark::State& state) {
  ProfiledAdd p("opscope_bench_profiler");
  std::uint64_t calls = 0;
  const std::int64_t pace = state.range(0);
  for (auto _ : state) {
    p.call.seq = ++calls;
    spinUntil(monotonicNs(), pace);
    p.call.hook_start_ns = p.call.host_start_ns = monotonicNs();
    p.profiler->before(p.call);
    p.call.host_end_ns = monotonicNs();
    p.profiler->after(p.call);
  }
  p.profiler->flush();  // after the timed loop: trace.json is complete
  const auto bytes = std::filesystem::file_size(p.dir / "trace.json");
  // Each call is one op span with its arguments (no kernel was enqueued, so no flow or device span).
  state.counters["op_span_bytes"] = static_cast<double>(bytes) / static_cast<double>(calls);
}
BENCHMARK(BM_ProfiledOpCall)->Arg(0)->Arg(1000)->Iterations(200000)->Repetitions(3);

// The calling thread's cost alone, without subtracting two noisy loops: bursts of kBurst calls timed
// together (two clock reads per burst, ~1 ns per call), the pace between bursts untimed, so that the writer
// drains as in a program. The time reported per iteration is one call's.
// Argument 1 of BM_ProfiledOpCallTimed: OP_TRACE_GZIP=1. The compression runs on the writer thread, so the
// calling thread pays for it only when the two share a core (this machine has two).
void BM_ProfiledOpCallTimed(benchmark::State& state) {
  constexpr int kBurst = 16;
  ProfiledAdd p("opscope_bench_profiler_timed", state.range(1) != 0);
  std::uint64_t calls = 0;
  const std::int64_t pace = state.range(0);
  for (auto _ : state) {
    spinUntil(monotonicNs(), pace * kBurst);
    const std::int64_t start = monotonicNs();
    for (int i = 0; i < kBurst; ++i) {
      p.call.seq = ++calls;
      p.call.hook_start_ns = p.call.host_start_ns = start;
      p.profiler->before(p.call);
      p.call.host_end_ns = start;
      p.profiler->after(p.call);
    }
    state.SetIterationTime(static_cast<double>(monotonicNs() - start) * 1e-9 / kBurst);
  }
  p.profiler->flush();
}
BENCHMARK(BM_ProfiledOpCallTimed)
    ->Args({1000, 0})
    ->Args({1000, 1})
    ->ArgNames({"pace", "gzip"})
    ->UseManualTime()
    ->Iterations(20000)
    ->Repetitions(5);

// The same loop with the clock reads and the pace only: what the loop costs without a profiler.
void BM_UnprofiledOpCall(benchmark::State& state) {
  opscope::OpCall call;
  const std::int64_t pace = state.range(0);
  for (auto _ : state) {
    spinUntil(monotonicNs(), pace);
    call.hook_start_ns = call.host_start_ns = monotonicNs();
    call.host_end_ns = monotonicNs();
    benchmark::DoNotOptimize(call);
  }
}
BENCHMARK(BM_UnprofiledOpCall)->Arg(0)->Arg(1000)->Repetitions(3);

}  // namespace

BENCHMARK_MAIN();
