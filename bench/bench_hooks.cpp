// The cost of the hook layer. Run it twice and compare:
//     build/bin/bench_hooks                                        the libraries called directly
//     LD_PRELOAD=build/lib/libopscope.so build/bin/bench_hooks      through the wrappers, every tool off
//     OP_CAPTURE=1 LD_PRELOAD=... build/bin/bench_hooks             with capture on (sync + copies per op)
// The label of each result says which library answered the call.
#include <mlu/mluops.h>
#include <mlu/mlurt.h>

#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <cstdint>
#include <string>

namespace {

// "direct" or "hooked": which shared object defines the mluopFill this program calls.
std::string mode() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&mluopFill), &info) == 0 || info.dli_fname == nullptr) return "unknown";
  return std::string(info.dli_fname).find("libopscope") != std::string::npos ? "hooked" : "direct";
}

// One tiny op: a fill of one float32 element, enqueued (the caller's cost), with a sync every 256 calls so
// the queue does not grow without bound.
void BM_FillOneElement(benchmark::State& state) {
  mluopHandle_t handle = nullptr;
  mluopCreate(&handle);
  mluopTensorDescriptor_t desc = nullptr;
  mluopCreateTensorDescriptor(&desc);
  const std::int64_t dims[1] = {1};
  mluopSetTensorDescriptor(desc, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 1, dims);
  void* data = nullptr;
  mlurtMalloc(&data, 4);
  std::int64_t n = 0;
  for (auto _ : state) {
    if (mluopFill(handle, 1.0, desc, data) != MLUOP_STATUS_SUCCESS)
      state.SkipWithError(mluopGetLastErrorMessage());
    if (++n % 256 == 0) mlurtDeviceSynchronize();
  }
  mlurtDeviceSynchronize();
  mlurtFree(data);
  mluopDestroyTensorDescriptor(desc);
  mluopDestroy(handle);
  state.SetLabel(mode());
}
BENCHMARK(BM_FillOneElement);

// A cheap runtime call: mlurtQueueQuery on an idle queue.
void BM_QueueQuery(benchmark::State& state) {
  mlurtQueue_t queue = nullptr;
  mlurtQueueCreate(&queue);
  for (auto _ : state) benchmark::DoNotOptimize(mlurtQueueQuery(queue));
  mlurtQueueDestroy(queue);
  state.SetLabel(mode());
}
BENCHMARK(BM_QueueQuery);

}  // namespace

BENCHMARK_MAIN();
