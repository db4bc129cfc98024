// Benchmark of the elementwise kernels: a 16 Mi-element float32 add (c = a + alpha * b) through mluopAdd
// and a queue sync, reporting the bytes moved per second (two reads and one write per element). For
// comparison, the same add as a plain single-threaded host loop over host memory.
#include <mlu/mluops.h>
#include <mlu/mlurt.h>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

constexpr std::int64_t kElements = std::int64_t{16} << 20;
constexpr std::int64_t kBytesPerElement = 3 * sizeof(float);  // read a, read b, write c

// A contiguous float32 device buffer of n elements with its descriptor.
class DeviceVector {
 public:
  DeviceVector(benchmark::State& state, std::int64_t n, float value) {
    if (mlurtMalloc(&data_, static_cast<std::size_t>(n) * sizeof(float)) != MLURT_SUCCESS) {
      state.SkipWithError(mlurtGetLastErrorMessage());
      return;
    }
    std::vector<float> host(static_cast<std::size_t>(n), value);
    std::memcpy(data_, host.data(), host.size() * sizeof(float));  // device memory is host-addressable
    mluopCreateTensorDescriptor(&desc_);
    mluopSetTensorDescriptor(desc_, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 1, &n);
  }
  ~DeviceVector() {
    if (desc_ != nullptr) mluopDestroyTensorDescriptor(desc_);
    if (data_ != nullptr) mlurtFree(data_);
  }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  mluopTensorDescriptor_t desc() const { return desc_; }
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  mluopTensorDescriptor_t desc_ = nullptr;
};

// mluopAdd of 16 Mi float32 elements on the device, waiting for each kernel.
void BM_DeviceAddFloat32(benchmark::State& state) {
  mlurtQueue_t queue = nullptr;
  mluopHandle_t handle = nullptr;
  if (mlurtQueueCreate(&queue) != MLURT_SUCCESS || mluopCreate(&handle) != MLUOP_STATUS_SUCCESS ||
      mluopSetQueue(handle, queue) != MLUOP_STATUS_SUCCESS) {
    state.SkipWithError("could not create a queue and a handle");
    return;
  }
  {
    DeviceVector a(state, kElements, 1.0f), b(state, kElements, 2.0f), c(state, kElements, 0.0f);
    for (auto _ : state) {
      if (mluopAdd(handle, 0.5f, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data()) !=
          MLUOP_STATUS_SUCCESS) {
        state.SkipWithError(mluopGetLastErrorMessage());
        break;
      }
      if (mlurtQueueSync(queue) != MLURT_SUCCESS) {
        state.SkipWithError(mlurtGetLastErrorMessage());
        break;
      }
    }
    if (static_cast<const float*>(c.data())[kElements - 1] != 2.0f) state.SkipWithError("wrong result");
  }
  state.SetBytesProcessed(state.iterations() * kElements * kBytesPerElement);
  state.SetItemsProcessed(state.iterations() * kElements);
  mluopDestroy(handle);
  mlurtQueueDestroy(queue);
}
BENCHMARK(BM_DeviceAddFloat32)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same add as a single-threaded loop over host vectors: what one core does without the library.
void BM_HostLoopAddFloat32(benchmark::State& state) {
  std::vector<float> a(static_cast<std::size_t>(kElements), 1.0f), b(a.size(), 2.0f), c(a.size());
  for (auto _ : state) {
    const float alpha = 0.5f;
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = a[i] + alpha * b[i];
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kElements * kBytesPerElement);
  state.SetItemsProcessed(state.iterations() * kElements);
}
BENCHMARK(BM_HostLoopAddFloat32)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
