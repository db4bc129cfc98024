// bench_gemm — throughput of the device's GEMM-based ops through the public C API (op call + queue sync):
// a 1024x1024x1024 float32 matmul, the MNIST net's second convolution (x [64, 32, 26, 26], w [64, 32, 3, 3])
// forward at batch 64, and, when a CBLAS was found at configure time (OPSCOPE_HAVE_BLAS), the same matmul
// through cblas_sgemm side by side. Each reports GFLOP/s (2 flops per multiply-add) as a counter.
#include <mlu/mluops.h>
#include <mlu/mlurt.h>

#include <benchmark/benchmark.h>

#ifdef OPSCOPE_HAVE_BLAS
#include <cblas.h>
#endif

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "bench_gemm: %s failed: %s %s\n", what, mluopGetLastErrorMessage(),
                 mlurtGetLastErrorMessage());
    std::exit(1);
  }
}

// A float32 device tensor filled with small deterministic values.
class DeviceTensor {
 public:
  explicit DeviceTensor(const std::vector<std::int64_t>& dims) {
    std::int64_t n = 1;
    for (std::int64_t d : dims) n *= d;
    bytes_ = static_cast<std::size_t>(n) * sizeof(float);
    check(mlurtMalloc(&data_, bytes_) == MLURT_SUCCESS, "mlurtMalloc");
    std::vector<float> values(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = static_cast<float>((i * 7919 % 1000) / 1000.0 - 0.5);
    std::memcpy(data_, values.data(), bytes_);  // device memory is host-addressable in the simulation
    check(mluopCreateTensorDescriptor(&desc_) == MLUOP_STATUS_SUCCESS, "mluopCreateTensorDescriptor");
    check(mluopSetTensorDescriptor(desc_, dims.size() == 4 ? MLUOP_LAYOUT_NCHW : MLUOP_LAYOUT_ARRAY,
                                   MLUOP_DTYPE_FLOAT, static_cast<int>(dims.size()),
                                   dims.data()) == MLUOP_STATUS_SUCCESS,
          "mluopSetTensorDescriptor");
  }
  ~DeviceTensor() {
    mluopDestroyTensorDescriptor(desc_);
    mlurtFree(data_);
  }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  mluopTensorDescriptor_t desc() const { return desc_; }
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  mluopTensorDescriptor_t desc_ = nullptr;
};

class Handle {
 public:
  Handle() {
    check(mlurtQueueCreate(&queue_) == MLURT_SUCCESS, "mlurtQueueCreate");
    check(mluopCreate(&handle_) == MLUOP_STATUS_SUCCESS, "mluopCreate");
    check(mluopSetQueue(handle_, queue_) == MLUOP_STATUS_SUCCESS, "mluopSetQueue");
  }
  ~Handle() {
    mluopDestroy(handle_);
    mlurtQueueDestroy(queue_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  operator mluopHandle_t() const { return handle_; }
  void sync() const { check(mlurtQueueSync(queue_) == MLURT_SUCCESS, "mlurtQueueSync"); }

 private:
  mlurtQueue_t queue_ = nullptr;
  mluopHandle_t handle_ = nullptr;
};

void setFlops(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops_per_iteration * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

void BM_DeviceMatmul(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  Handle handle;
  DeviceTensor a({n, n}), b({n, n}), c({n, n});
  for (auto _ : state) {
    check(mluopMatmul(handle, false, false, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data()) ==
              MLUOP_STATUS_SUCCESS,
          "mluopMatmul");
    handle.sync();
  }
  setFlops(state, 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n));
}
BENCHMARK(BM_DeviceMatmul)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

#ifdef OPSCOPE_HAVE_BLAS
void BM_BlasSgemm(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::size_t count = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  std::vector<float> a(count, 0.25f), b(count, 0.5f), c(count);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  setFlops(state, 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n));
}
BENCHMARK(BM_BlasSgemm)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

// The MNIST net's second convolution at batch 64: x [64, 32, 26, 26] * w [64, 32, 3, 3] -> y [64, 64, 24,
// 24].
void BM_DeviceConv2dForwardMnist(benchmark::State& state) {
  Handle handle;
  DeviceTensor x({64, 32, 26, 26}), w({64, 32, 3, 3}), bias({64}), y({64, 64, 24, 24});
  mluopConvolutionDescriptor_t conv = nullptr;
  check(mluopCreateConvolutionDescriptor(&conv) == MLUOP_STATUS_SUCCESS, "mluopCreateConvolutionDescriptor");
  const int padding[2] = {0, 0}, stride[2] = {1, 1}, dilation[2] = {1, 1};
  check(mluopSetConvolutionDescriptor(conv, padding, stride, dilation, 1) == MLUOP_STATUS_SUCCESS,
        "mluopSetConvolutionDescriptor");
  size_t bytes = 0;
  check(mluopGetConvolutionForwardWorkspaceSize(handle, conv, x.desc(), w.desc(), y.desc(), &bytes) ==
            MLUOP_STATUS_SUCCESS,
        "mluopGetConvolutionForwardWorkspaceSize");
  void* workspace = nullptr;
  if (bytes > 0) check(mlurtMalloc(&workspace, bytes) == MLURT_SUCCESS, "mlurtMalloc");
  for (auto _ : state) {
    check(mluopConvolutionForward(handle, conv, x.desc(), x.data(), w.desc(), w.data(), bias.desc(),
                                  bias.data(), workspace, bytes, y.desc(), y.data()) == MLUOP_STATUS_SUCCESS,
          "mluopConvolutionForward");
    handle.sync();
  }
  setFlops(state, 2.0 * 64 * 64 * 24 * 24 * 32 * 3 * 3);
  state.counters["workspace_MiB"] = static_cast<double>(bytes) / (1 << 20);
  if (workspace != nullptr) mlurtFree(workspace);
  mluopDestroyConvolutionDescriptor(conv);
}
BENCHMARK(BM_DeviceConv2dForwardMnist)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
