// Benchmarks of the simulated runtime's basic costs: allocation, an empty task round trip, a large copy.
#include <mlu/mlurt.h>

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

void check(benchmark::State& state, mlurtStatus_t status) {
  if (status != MLURT_SUCCESS) state.SkipWithError(mlurtGetLastErrorMessage());
}

// mlurtMalloc + mlurtFree of one block of state.range(0) bytes.
void BM_MallocFree(benchmark::State& state) {
  const auto size = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* p = nullptr;
    check(state, mlurtMalloc(&p, size));
    benchmark::DoNotOptimize(p);
    check(state, mlurtFree(p));
  }
}
BENCHMARK(BM_MallocFree)->Arg(256)->Arg(1 << 20)->Arg(64 << 20);

mlurtStatus_t emptyKernel(void*) { return MLURT_SUCCESS; }

// Enqueue of an empty kernel and a sync on it: the round trip to the queue's worker thread.
void BM_EnqueueSyncEmptyTask(benchmark::State& state) {
  mlurtQueue_t queue = nullptr;
  check(state, mlurtQueueCreate(&queue));
  for (auto _ : state) {
    check(state, mlurtLaunchKernel(queue, "empty", emptyKernel, nullptr, nullptr, nullptr));
    check(state, mlurtQueueSync(queue));
  }
  check(state, mlurtQueueDestroy(queue));
}
BENCHMARK(BM_EnqueueSyncEmptyTask)->UseRealTime();

// Host-to-device copy of 64 MiB, from pageable or pinned host memory (state.range(0) = 1: pinned).
void BM_MemcpyH2D64MiB(benchmark::State& state) {
  constexpr size_t kBytes = size_t{64} << 20;
  const bool pinned = state.range(0) != 0;
  std::vector<char> pageable;
  void* host = nullptr;
  if (pinned) {
    check(state, mlurtHostMalloc(&host, kBytes));
  } else {
    pageable.resize(kBytes);
    host = pageable.data();
  }
  std::memset(host, 1, kBytes);
  void* device = nullptr;
  check(state, mlurtMalloc(&device, kBytes));
  check(state, mlurtMemcpy(device, host, kBytes, MLURT_MEMCPY_HOST_TO_DEVICE));  // touch the pages once
  for (auto _ : state) {
    check(state, mlurtMemcpy(device, host, kBytes, MLURT_MEMCPY_HOST_TO_DEVICE));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBytes));
  check(state, mlurtFree(device));
  if (pinned) check(state, mlurtHostFree(host));
}
BENCHMARK(BM_MemcpyH2D64MiB)->ArgName("pinned")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
