// profile_probe — a small MLU program for the profiler's tests: each iteration fills a device buffer, adds
// it to another (an op each), copies the sum back with mlurtMemcpyAsync, and syncs its queue every 8
// iterations. What happens after the iterations depends on the mode:
//   profile_probe run N        returns from main (frees everything first)
//   profile_probe threads N    4 threads, on devices 0 and 1 (MLU_SIM_DEVICE_COUNT=2), each with a queue of
//                              its own, run N iterations each
//   profile_probe sigint N     sends itself SIGINT with work still queued (likewise sigterm)
//   profile_probe sigterm-storm N  sends itself SIGTERM, and a second thread keeps sending more every 100 µs
//                              for 2 s, so that some arrive while the first one's flush runs
//   profile_probe segv N       raises SIGSEGV; abort N calls abort()
//   profile_probe exit-thread N  a second thread calls exit(0) while main goes on running iterations
//   profile_probe callback N   installs an activity callback of its own first, and prints how many task
//                              records it received ("records K") after the iterations
// It prints "iterations N" before the end it was asked for.
#include <mlu/mluops.h>
#include <mlu/mlurt.h>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr std::int64_t kElements = 4096;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "profile_probe: %s failed: %s / %s\n", what, mluopGetLastErrorMessage(),
                 mlurtGetLastErrorMessage());
    std::exit(3);
  }
}

struct Worker {
  mluopHandle_t handle = nullptr;
  mlurtQueue_t queue = nullptr;
  mluopTensorDescriptor_t desc = nullptr;
  float* a = nullptr;
  float* b = nullptr;
  float* c = nullptr;
  float* host = nullptr;

  explicit Worker(int device, bool own_queue) {
    check(mlurtSetDevice(device) == MLURT_SUCCESS, "mlurtSetDevice");
    check(mluopCreate(&handle) == MLUOP_STATUS_SUCCESS, "mluopCreate");
    if (own_queue) {
      check(mlurtQueueCreate(&queue) == MLURT_SUCCESS, "mlurtQueueCreate");
      check(mluopSetQueue(handle, queue) == MLUOP_STATUS_SUCCESS, "mluopSetQueue");
    }
    check(mluopCreateTensorDescriptor(&desc) == MLUOP_STATUS_SUCCESS, "descriptor");
    const std::int64_t dims[1] = {kElements};
    check(mluopSetTensorDescriptor(desc, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 1, dims) ==
              MLUOP_STATUS_SUCCESS,
          "descriptor");
    const std::size_t bytes = kElements * sizeof(float);
    check(mlurtMalloc(reinterpret_cast<void**>(&a), bytes) == MLURT_SUCCESS, "mlurtMalloc");
    check(mlurtMalloc(reinterpret_cast<void**>(&b), bytes) == MLURT_SUCCESS, "mlurtMalloc");
    check(mlurtMalloc(reinterpret_cast<void**>(&c), bytes) == MLURT_SUCCESS, "mlurtMalloc");
    check(mlurtHostMalloc(reinterpret_cast<void**>(&host), bytes) == MLURT_SUCCESS, "mlurtHostMalloc");
    check(mluopFill(handle, 1.0, desc, b) == MLUOP_STATUS_SUCCESS, "fill");
  }

  void iteration(int i) {
    check(mluopFill(handle, static_cast<double>(i), desc, a) == MLUOP_STATUS_SUCCESS, "fill");
    check(mluopAdd(handle, 2.0f, desc, a, desc, b, desc, c) == MLUOP_STATUS_SUCCESS, "add");
    check(mlurtMemcpyAsync(host, c, kElements * sizeof(float), queue, MLURT_MEMCPY_DEVICE_TO_HOST) ==
              MLURT_SUCCESS,
          "mlurtMemcpyAsync");
    if (i % 8 == 7) check(mlurtQueueSync(queue) == MLURT_SUCCESS, "mlurtQueueSync");
  }

  void release() {
    check(mlurtQueueSync(queue) == MLURT_SUCCESS, "mlurtQueueSync");
    mlurtFree(a);
    mlurtFree(b);
    mlurtFree(c);
    mlurtHostFree(host);
    mluopDestroyTensorDescriptor(desc);
    mluopDestroy(handle);
    if (queue != nullptr) mlurtQueueDestroy(queue);
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: profile_probe run|threads|sigint|sigterm|segv|abort|exit-thread N\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int n = std::atoi(argv[2]);
  if (mode == "threads") {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([t, n] {
        Worker w(t % 2, true);
        for (int i = 0; i < n; ++i) w.iteration(i);
        w.release();
      });
    }
    for (auto& t : threads) t.join();
    std::printf("iterations %d\n", 4 * n);
    return 0;
  }
  static std::atomic<int> records{0};
  if (mode == "callback") {
    check(mlurtSetActivityCallback([](const mlurtActivityRecord_t*, void*) { records.fetch_add(1); },
                                   nullptr) == MLURT_SUCCESS,
          "mlurtSetActivityCallback");
  }
  Worker w(0, false);
  for (int i = 0; i < n; ++i) w.iteration(i);
  std::printf("iterations %d\n", n);
  std::fflush(stdout);
  if (mode == "callback") {
    w.release();
    std::printf("records %d\n", records.load());
    return 0;
  }
  if (mode == "run") {
    w.release();
    return 0;
  }
  if (mode == "sigint" || mode == "sigterm") {
    kill(getpid(), mode == "sigint" ? SIGINT : SIGTERM);
    std::this_thread::sleep_for(std::chrono::seconds(10));  // the signal ends the program before this does
    return 4;
  }
  if (mode == "sigterm-storm") {
    std::atomic<bool> first{false};
    std::thread storm([&] {
      while (!first.load()) std::this_thread::yield();
      for (int i = 0; i < 20000; ++i) {
        kill(getpid(), SIGTERM);
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    });
    storm.detach();
    first = true;
    kill(getpid(), SIGTERM);
    std::this_thread::sleep_for(std::chrono::seconds(10));  // the signal ends the program before this does
    return 4;
  }
  if (mode == "segv") raise(SIGSEGV);
  if (mode == "abort") std::abort();
  if (mode == "exit-thread") {
    std::thread([] { std::exit(0); }).detach();
    for (int i = 0;; ++i) w.iteration(i);  // until the other thread's exit() ends the process
  }
  return 2;
}
