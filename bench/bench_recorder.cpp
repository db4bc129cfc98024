// The flight recorder's cost per collective on the host (issue 24's goal: 200 ns), side by side with its
// parts' anchors in the same run: the runtime's own mlurtLaunchHostFunc (the recorder queues two per
// transfer) and a libunwind backtrace interned by core's StackTable (one per transfer). The recorder runs
// in-process on a real queue, fed the RuntimeCalls the hook would give it.
#include <opscope/config.h>
#include <opscope/op_call.h>
#include <opscope/recorder/flight_recorder.h>
#include <opscope/run_info.h>
#include <opscope/stacks.h>

#include <mlu/mlurt.h>

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace {

void noop(void*) {}

void BM_LaunchHostFunc(benchmark::State& state) {
  mlurtQueue_t queue = nullptr;
  mlurtQueueCreate(&queue);
  for (auto _ : state) mlurtLaunchHostFunc(queue, &noop, nullptr);
  mlurtQueueSync(queue);
  mlurtQueueDestroy(queue);
}
BENCHMARK(BM_LaunchHostFunc);

void BM_Backtrace(benchmark::State& state) {
  opscope::StackTable stacks(16, opscope::AddressRange{});
  for (auto _ : state) benchmark::DoNotOptimize(stacks.capture());
}
BENCHMARK(BM_Backtrace);

void BM_RecordCollective(benchmark::State& state) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("opscope-bench-recorder-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  opscope::Config config;
  config.flight_recorder = true;  // Config's default is off (the parser turns it on in a rank of several)
  config.collective_timeout_s = 0;
  opscope::RunInfo run;
  run.rank = 0;
  run.world_size = 2;
  run.result_dir = dir.string();
  auto recorder = opscope::recorder::makeFlightRecorder(config, run);
  mlurtQueue_t queue = nullptr;
  mlurtQueueCreate(&queue);
  opscope::RuntimeCall call;
  call.kind = opscope::RuntimeCallKind::kCollective;
  call.symbol = "mluclAllReduce";
  call.queue = queue;
  call.collective.kind = opscope::Collective::kAllReduce;
  call.collective.comm = 1;
  call.collective.rank = 0;
  call.collective.size = 2;
  call.collective.count = 1024;
  call.collective.dtype = 1;
  call.collective.op = 0;
  std::uint64_t seq = 0;
  for (auto _ : state) {
    recorder->beforeRuntimeCall(call);
    call.collective.seq = ++seq;
    recorder->onRuntimeCall(call);
  }
  mlurtQueueSync(queue);
  mlurtQueueDestroy(queue);
  recorder.reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_RecordCollective);

}  // namespace

BENCHMARK_MAIN();
