// multi_queue_program — a plain program (no opscope API) for the capture tests: THREADS threads on the
// simulated devices round-robin (thread t on device t % device count), each with its own queue and handle,
// each running STEPS rounds of
//     fill(a, 1000 * t + k); fill(b, t + 0.5); add(c = a + b); and, in place, mul_scalar(c, c, 2)
// with no synchronization between the ops of a round, so a capture that does not sync the right queue
// before snapshotting sees another round's values. Every value is exact in float32, so the test can
// check each captured op's inputs and outputs by hand.
//
// With a fourth argument "copy", a is then overwritten by an asynchronous copy from the host of 7 + k before
// the add (a write no op makes: the stats capture must not take a's statistics from the fill).
//
// usage: multi_queue_program [THREADS [STEPS [ELEMENTS [copy]]]]   (defaults 4, 25, 4096); prints "ok" at the
// end.
#include <mlu/mluops.h>
#include <mlu/mlurt.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "multi_queue_program: %s failed: %s %s\n", what, mlurtGetLastErrorMessage(),
                 mluopGetLastErrorMessage());
    std::exit(1);
  }
}

// A wrong result is said and counted, and the thread finishes its work: the program then exits 1 from
// main. (exit() from a worker while the others still call the library would race with the libraries'
// static destructors.)
std::atomic<int> g_wrong_results{0};
bool g_copy = false;

void worker(int t, int device, int steps, std::int64_t n) {
  check(mlurtSetDevice(device) == MLURT_SUCCESS, "mlurtSetDevice");
  mlurtQueue_t queue = nullptr;
  check(mlurtQueueCreate(&queue) == MLURT_SUCCESS, "mlurtQueueCreate");
  mluopHandle_t handle = nullptr;
  check(mluopCreate(&handle) == MLUOP_STATUS_SUCCESS, "mluopCreate");
  check(mluopSetQueue(handle, queue) == MLUOP_STATUS_SUCCESS, "mluopSetQueue");
  mluopTensorDescriptor_t desc = nullptr;
  check(mluopCreateTensorDescriptor(&desc) == MLUOP_STATUS_SUCCESS, "mluopCreateTensorDescriptor");
  const std::int64_t dims[1] = {n};
  check(
      mluopSetTensorDescriptor(desc, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 1, dims) == MLUOP_STATUS_SUCCESS,
      "mluopSetTensorDescriptor");
  void *a = nullptr, *b = nullptr, *c = nullptr;
  const auto bytes = static_cast<std::size_t>(n) * sizeof(float);
  check(mlurtMalloc(&a, bytes) == MLURT_SUCCESS && mlurtMalloc(&b, bytes) == MLURT_SUCCESS &&
            mlurtMalloc(&c, bytes) == MLURT_SUCCESS,
        "mlurtMalloc");
  for (int k = 0; k < steps; ++k) {
    check(mluopFill(handle, 1000.0 * t + k, desc, a) == MLUOP_STATUS_SUCCESS, "mluopFill a");
    check(mluopFill(handle, t + 0.5, desc, b) == MLUOP_STATUS_SUCCESS, "mluopFill b");
    if (g_copy) {
      const std::vector<float> seven(static_cast<std::size_t>(n), 7.0f + static_cast<float>(k));
      check(mlurtMemcpyAsync(a, seven.data(), bytes, queue, MLURT_MEMCPY_HOST_TO_DEVICE) == MLURT_SUCCESS,
            "mlurtMemcpyAsync");
      check(mlurtQueueSync(queue) == MLURT_SUCCESS, "mlurtQueueSync");  // (the host vector goes)
    }
    check(mluopAdd(handle, 1.0f, desc, a, desc, b, desc, c) == MLUOP_STATUS_SUCCESS, "mluopAdd");
    check(mluopMulScalar(handle, desc, c, 2.0, desc, c) == MLUOP_STATUS_SUCCESS, "mluopMulScalar");
  }
  std::vector<float> host(static_cast<std::size_t>(n));
  check(mlurtQueueSync(queue) == MLURT_SUCCESS, "mlurtQueueSync");
  check(mlurtMemcpy(host.data(), c, bytes, MLURT_MEMCPY_DEVICE_TO_HOST) == MLURT_SUCCESS, "mlurtMemcpy");
  const float a_last = g_copy ? 7.0f + static_cast<float>(steps - 1) : 1000.0f * t + (steps - 1);
  const float expected = 2.0f * (a_last + t + 0.5f);
  if (host[0] != expected || host[host.size() - 1] != expected) {
    std::fprintf(stderr, "multi_queue_program: thread %d: the result check failed: %g, expected %g\n", t,
                 static_cast<double>(host[0]), static_cast<double>(expected));
    ++g_wrong_results;
  }
  mlurtFree(a);
  mlurtFree(b);
  mlurtFree(c);
  mluopDestroyTensorDescriptor(desc);
  mluopDestroy(handle);
  mlurtQueueDestroy(queue);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 4;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 25;
  const std::int64_t n = argc > 3 ? std::atoll(argv[3]) : 4096;
  g_copy = argc > 4 && std::string(argv[4]) == "copy";
  if (threads < 1 || steps < 1 || n < 1 || (argc > 4 && !g_copy)) {
    std::fprintf(stderr, "usage: multi_queue_program [THREADS [STEPS [ELEMENTS [copy]]]]\n");
    return 2;
  }
  int devices = 0;
  check(mlurtGetDeviceCount(&devices) == MLURT_SUCCESS && devices > 0, "mlurtGetDeviceCount");
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t, t % devices, steps, n);
  for (auto& th : pool) th.join();
  if (g_wrong_results > 0) return 1;
  std::printf("ok\n");
  return 0;
}
