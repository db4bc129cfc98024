// The cost of memcheck per allocation: one mlurtMalloc + mlurtFree pair of 256 bytes, made from 40 frames
// down the stack (a program's allocations are rarely made from main). Run it under each setting and compare
// the medians; bench/memcheck_cost.sh does that, with heaptrack on BM_HostMallocFree (the same loop on the C
// heap) in the same run:
//     build/bin/bench_memcheck                                                 the runtime called directly
//     LD_PRELOAD=build/lib/libopscope.so MEM_CHECK=1 build/bin/bench_memcheck  the allocation table only
//     ... MEM_CHECK_ENABLE_BACKTRACE=1 MEM_CHECK_BACKTRACE_DEPTH=16 (or 32)     with backtraces
// The label says which library answered mlurtMalloc and which memcheck setting was on.
#include <mlu/mlurt.h>

#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace {

constexpr int kStackDepth = 40;

std::string label() {
  Dl_info info{};
  std::string label = "direct";
  if (dladdr(reinterpret_cast<void*>(&mlurtMalloc), &info) != 0 && info.dli_fname != nullptr &&
      std::string(info.dli_fname).find("libopscope") != std::string::npos) {
    label = "hooked";
  }
  const char* on = std::getenv("MEM_CHECK");
  if (label == "hooked" && on != nullptr && std::string(on) == "1") {
    const char* bt = std::getenv("MEM_CHECK_ENABLE_BACKTRACE");
    const char* depth = std::getenv("MEM_CHECK_BACKTRACE_DEPTH");
    label += " memcheck";
    if (bt != nullptr && std::string(bt) == "1")
      label += std::string(" backtrace depth ") + (depth ? depth : "32");
  }
  return label;
}

// Runs body() kStackDepth frames further down the stack.
template <typename F>
__attribute__((noinline)) void deep(int depth, F& body) {
  if (depth == 0) {
    body();
  } else {
    deep(depth - 1, body);
  }
  benchmark::ClobberMemory();  // not a tail call: each level keeps its frame
}

void BM_DeviceMallocFree(benchmark::State& state) {
  auto body = [&] {
    for (auto _ : state) {
      void* p = nullptr;
      if (mlurtMalloc(&p, 256) != MLURT_SUCCESS) state.SkipWithError("mlurtMalloc failed");
      benchmark::DoNotOptimize(p);
      mlurtFree(p);
    }
  };
  deep(kStackDepth, body);
  state.SetLabel(label());
}
BENCHMARK(BM_DeviceMallocFree);

// The same loop on the C heap, for heaptrack (which sees malloc, not mlurtMalloc).
void BM_HostMallocFree(benchmark::State& state) {
  auto body = [&] {
    for (auto _ : state) {
      void* p = std::malloc(256);
      benchmark::DoNotOptimize(p);
      std::free(p);
    }
  };
  deep(kStackDepth, body);
  state.SetLabel(label());
}
BENCHMARK(BM_HostMallocFree);

}  // namespace

BENCHMARK_MAIN();
