// memcheck_probe MODE — small programs with one memory bug each (or none), for memcheck's tests:
//   double-free     frees a device allocation twice, twice over from the same line (one report)
//   invalid-free    frees a pointer that was never allocated
//   interior-free   frees a pointer 256 bytes into a live allocation
//   host-double-free  frees pinned host memory twice
//   mismatched-free frees pinned host memory with mlurtFree (then with mlurtHostFree, as it should)
//   threads         4 threads on 2 devices; thread t leaks (t + 1) allocations of 1000 * (t + 1) bytes
//                   on device t % 2 from leakOnThread(), and frees everything else
//   exit-thread     leaks 3 allocations of 512 bytes, then a second thread calls exit(0)
//   use-after-free  fills a freed tensor with an op (mluopFill), then copies into it (mlurtMemcpy)
//   oob-argument    fills 1030 floats through a pointer to a 4096-byte allocation (its red zone takes them)
//   memcpy-overflow copies 4100 bytes out of a 4096-byte allocation
//   memset-overflow sets 4100 bytes of a 4096-byte allocation on a queue (mlurtMemsetAsync), then frees it
//   uninit-read     relu reads a 4096-byte allocation nothing wrote (MEM_CHECK_INIT's case)
//   partial-write   the same after a copy wrote its first 2048 bytes
//   uninit-copy     relu of a fully written input, then a device-to-host copy of 256 bytes nothing wrote
//   all-written     relu of a fully written input, its output copied back: nothing to report
//   race            a copy into x on queue 1 (behind a 200 ms host function), relu reading x on queue 2,
//   twice race-ordered    the same with a notifier between them: nothing to report (MEM_CHECK_RACE's cases)
//   race-host-func  an asynchronous copy of y into pinned host memory h on queue 1 (behind a 200 ms host
//                   function), and a host function on queue 2 reading h (said by opscope_host_access);
//                   race-host-func-ordered: a notifier between them
//   race-host-read  the same copy, and the host thread reading h straight after enqueueing it;
//                   race-host-read-ordered: after mlurtQueueSync
//   pool            an allocator of its own (opscope.h's pool annotations) hands out pieces A (4096 bytes),
//                   B (1024) and C (2048) of one 64 KiB block: fills 1030 floats into A, frees B twice, frees
//                   A and fills it again, keeps C (a leak) and never frees the block (not a leak: a pool)
#include <mlu/mluops.h>
#include <mlu/mlurt.h>
#include <opscope.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

void* deviceAlloc(std::size_t bytes) {
  void* p = nullptr;
  if (mlurtMalloc(&p, bytes) != MLURT_SUCCESS) {
    std::fprintf(stderr, "memcheck_probe: mlurtMalloc failed: %s\n", mlurtGetLastErrorMessage());
    std::exit(3);
  }
  return p;
}

// The runtime refuses the bad frees too; the probe says so (and so its calls are not tail calls, whose
// callers would leave no frame on the stack).
__attribute__((noinline)) void expectRefused(mlurtStatus_t status, const char* what) {
  if (status == MLURT_SUCCESS) std::printf("memcheck_probe: %s was accepted\n", what);
}

__attribute__((noinline)) void freeTwice(void* p) {
  if (mlurtFree(p) != MLURT_SUCCESS) std::puts("memcheck_probe: the first free failed");
  expectRefused(mlurtFree(p), "the second free");
}

// Rounds from a volatile, so that the loop stays one call site: the second round's double free is the same
// site as the first's, reported once.
volatile int g_rounds = 2;

__attribute__((noinline)) void doubleFree() {
  for (int round = 0; round < g_rounds; ++round) freeTwice(deviceAlloc(4096));
}

__attribute__((noinline)) void invalidFree() {
  static char not_device_memory[64];
  expectRefused(mlurtFree(not_device_memory), "the free of host memory");
}

__attribute__((noinline)) void interiorFree() {
  char* p = static_cast<char*>(deviceAlloc(4096));
  expectRefused(mlurtFree(p + 256), "the interior free");
  if (mlurtFree(p) != MLURT_SUCCESS) std::puts("memcheck_probe: the free failed");
}

__attribute__((noinline)) void hostDoubleFree() {
  void* p = nullptr;
  mlurtHostMalloc(&p, 1024);
  if (mlurtHostFree(p) != MLURT_SUCCESS) std::puts("memcheck_probe: the first free failed");
  expectRefused(mlurtHostFree(p), "the second free");
}

__attribute__((noinline)) void mismatchedFree() {
  void* p = nullptr;
  mlurtHostMalloc(&p, 2048);
  expectRefused(mlurtFree(p), "mlurtFree of pinned host memory");
  if (mlurtHostFree(p) != MLURT_SUCCESS) std::puts("memcheck_probe: the right free failed");
}

__attribute__((noinline)) void leakOnThread(int t) {
  mlurtSetDevice(t % 2);
  std::vector<void*> freed;
  for (int i = 0; i < 10; ++i) freed.push_back(deviceAlloc(64));
  for (int i = 0; i <= t; ++i) deviceAlloc(1000 * static_cast<std::size_t>(t + 1));
  for (void* p : freed) mlurtFree(p);
}

// A count the compiler cannot see, so that the loop stays one call site (a loop of 3 may be unrolled).
volatile int g_leaks = 3;

__attribute__((noinline)) void leakThenExit() {
  for (int i = 0; i < g_leaks; ++i) deviceAlloc(512);
  std::thread([] { std::exit(0); }).join();
}

// A float32 tensor of n elements at data, filled with 1 by the kernel library.
mluopStatus_t fill(void* data, std::int64_t n) {
  mluopHandle_t handle = nullptr;
  mluopCreate(&handle);
  mluopTensorDescriptor_t desc = nullptr;
  mluopCreateTensorDescriptor(&desc);
  mluopSetTensorDescriptor(desc, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 1, &n);
  const mluopStatus_t status = mluopFill(handle, 1.0, desc, data);
  mlurtDeviceSynchronize();
  mluopDestroyTensorDescriptor(desc);
  mluopDestroy(handle);
  return status;
}

mluopStatus_t relu(void* x, void* y, std::int64_t n) {
  mluopHandle_t handle = nullptr;
  mluopCreate(&handle);
  mluopTensorDescriptor_t desc = nullptr;
  mluopCreateTensorDescriptor(&desc);
  mluopSetTensorDescriptor(desc, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 1, &n);
  const mluopStatus_t status = mluopRelu(handle, desc, x, desc, y);
  mlurtDeviceSynchronize();
  mluopDestroyTensorDescriptor(desc);
  mluopDestroy(handle);
  return status;
}

// MEM_CHECK_INIT's cases: x is 1024 floats; how much of it is written before relu reads it all, and whether
// y, which relu writes, is copied back.
__attribute__((noinline)) void initCase(std::size_t written_bytes, bool copy_unwritten) {
  void* x = deviceAlloc(4096);
  void* y = deviceAlloc(4096);
  const std::vector<char> host(4096, 0);
  if (written_bytes > 0 &&
      mlurtMemcpy(x, host.data(), written_bytes, MLURT_MEMCPY_HOST_TO_DEVICE) != MLURT_SUCCESS)
    std::puts("memcheck_probe: the copy was refused");
  if (relu(x, y, 1024) != MLUOP_STATUS_SUCCESS) std::puts("memcheck_probe: relu was refused");
  std::vector<char> back(4096);
  mlurtMemcpy(back.data(), y, back.size(), MLURT_MEMCPY_DEVICE_TO_HOST);  // relu wrote all of y
  if (copy_unwritten) {
    void* z = deviceAlloc(256);
    mlurtMemcpy(back.data(), z, 256, MLURT_MEMCPY_DEVICE_TO_HOST);  // nothing ever wrote z
    mlurtFree(z);
  }
  mlurtFree(x);
  mlurtFree(y);
}

void sleep200(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(200)); }

// What MEM_CHECK_RACE's cases share: float buffers x and y of n elements on the device, queues 1 and 2 with a
// handle on each, a descriptor of n floats; all gone (after the device's work) at the end of the case.
struct TwoQueues {
  const std::int64_t n;
  void* x = deviceAlloc(static_cast<std::size_t>(n) * 4);
  void* y = deviceAlloc(static_cast<std::size_t>(n) * 4);
  mlurtQueue_t q1 = nullptr, q2 = nullptr;
  mluopHandle_t h1 = nullptr, h2 = nullptr;
  mluopTensorDescriptor_t desc = nullptr;
  mlurtNotifier_t notifier = nullptr;

  explicit TwoQueues(std::int64_t elements) : n(elements) {
    mlurtQueueCreate(&q1);
    mlurtQueueCreate(&q2);
    mluopCreate(&h1);
    mluopCreate(&h2);
    mluopSetQueue(h1, q1);
    mluopSetQueue(h2, q2);
    mluopCreateTensorDescriptor(&desc);
    mluopSetTensorDescriptor(desc, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 1, &n);
  }
  TwoQueues(const TwoQueues&) = delete;
  TwoQueues& operator=(const TwoQueues&) = delete;
  ~TwoQueues() {
    mlurtDeviceSynchronize();
    mluopDestroyTensorDescriptor(desc);
    mluopDestroy(h1);
    mluopDestroy(h2);
    if (notifier != nullptr) mlurtNotifierDestroy(notifier);
    mlurtQueueDestroy(q1);
    mlurtQueueDestroy(q2);
    mlurtFree(x);
    mlurtFree(y);
  }
  std::size_t bytes() const { return static_cast<std::size_t>(n) * 4; }
  // What queue 2 does from here on waits for what queue 1 was given so far (a notifier between them).
  void order() {
    mlurtNotifierCreate(&notifier, 0);
    mlurtPlaceNotifier(notifier, q1);
    mlurtQueueWaitNotifier(q2, notifier);
  }
};

// MEM_CHECK_RACE's case: a host-to-device copy into x on queue 1, behind a 200 ms host function, and relu
// reading x on queue 2; ordered: a notifier placed on queue 1 after the copy, waited on by queue 2 first.
__attribute__((noinline)) void raceCase(bool ordered) {
  TwoQueues t(4096);
  const std::vector<float> host(static_cast<std::size_t>(t.n), 1.5f);
  mlurtLaunchHostFunc(t.q1, sleep200, nullptr);
  mlurtMemcpyAsync(t.x, host.data(), t.bytes(), t.q1, MLURT_MEMCPY_HOST_TO_DEVICE);
  if (ordered) t.order();
  // Twice: the same pair of accesses again is counted, not reported again.
  for (int i = 0; i < 2; ++i) {
    if (mluopRelu(t.h2, t.desc, t.x, t.desc, t.y) != MLUOP_STATUS_SUCCESS)
      std::puts("memcheck_probe: relu was refused");
  }
  mlurtDeviceSynchronize();
  std::vector<float> out(static_cast<std::size_t>(t.n));
  mlurtMemcpy(out.data(), t.y, t.bytes(), MLURT_MEMCPY_DEVICE_TO_HOST);
  int wrong = 0;
  for (float v : out) wrong += v != 1.5f;
  std::printf("memcheck_probe: %d of %lld outputs wrong\n", wrong, static_cast<long long>(t.n));
}

// More of MEM_CHECK_RACE's cases, each behind a 200 ms host function on queue 1: two fills of x, on queue 1
// and queue 2 (two writers); relu writing y on queue 1 and an asynchronous copy of y to the host on queue 2
// (a copy on the wrong stream).
__attribute__((noinline)) void raceCase2(bool two_writers) {
  TwoQueues t(1024);
  mluopFill(t.h1, 2.0, t.desc, t.x);
  mlurtDeviceSynchronize();
  mlurtLaunchHostFunc(t.q1, sleep200, nullptr);
  std::vector<float> host(static_cast<std::size_t>(t.n));
  if (two_writers) {
    mluopFill(t.h1, 1.0, t.desc, t.x);
    mluopFill(t.h2, 3.0, t.desc, t.x);
  } else {
    mluopRelu(t.h1, t.desc, t.x, t.desc, t.y);
    mlurtMemcpyAsync(host.data(), t.y, t.bytes(), t.q2, MLURT_MEMCPY_DEVICE_TO_HOST);
  }
  mlurtDeviceSynchronize();
}

// A host function's (or the host thread's) read of pinned memory that a copy on queue 1 writes.
struct PinnedRead {
  const float* h;
  std::int64_t n;
  double sum = 0;
};

void readPinned(void* p) {
  auto* r = static_cast<PinnedRead*>(p);
  opscope_host_access(r->h, static_cast<std::size_t>(r->n) * 4, 0);
  for (std::int64_t i = 0; i < r->n; ++i) r->sum += r->h[i];
}

__attribute__((noinline)) void raceHostCase(bool in_host_function, bool ordered) {
  TwoQueues t(1024);
  void* h = nullptr;
  mlurtHostMalloc(&h, t.bytes());
  mlurtMemset(t.y, 0, t.bytes());
  std::memset(h, 0xff, t.bytes());
  mlurtLaunchHostFunc(t.q1, sleep200, nullptr);
  mlurtMemcpyAsync(h, t.y, t.bytes(), t.q1, MLURT_MEMCPY_DEVICE_TO_HOST);
  PinnedRead read{static_cast<const float*>(h), t.n};
  if (in_host_function) {
    if (ordered) t.order();
    mlurtLaunchHostFunc(t.q2, readPinned, &read);
    mlurtQueueSync(t.q2);
  } else {
    if (ordered) mlurtQueueSync(t.q1);
    readPinned(&read);
  }
  mlurtDeviceSynchronize();
  std::printf("memcheck_probe: the host read %s\n", read.sum == 0 ? "zeros (the copy's)" : "stale bytes");
  mlurtHostFree(h);
}

__attribute__((noinline)) void useAfterFree() {
  void* p = deviceAlloc(4096);
  mlurtFree(p);
  if (fill(p, 1024) != MLUOP_STATUS_SUCCESS) std::puts("memcheck_probe: the fill was refused");
  const std::vector<char> host(64, 1);
  if (mlurtMemcpy(static_cast<char*>(p) + 128, host.data(), host.size(), MLURT_MEMCPY_HOST_TO_DEVICE) !=
      MLURT_SUCCESS) {
    std::puts("memcheck_probe: the copy was refused");
  }
}

__attribute__((noinline)) void oobArgument() {
  void* p = deviceAlloc(4096);
  if (fill(p, 1030) != MLUOP_STATUS_SUCCESS) std::puts("memcheck_probe: the fill was refused");
  mlurtFree(p);
}

__attribute__((noinline)) void memcpyOverflow() {
  void* p = deviceAlloc(4096);
  std::vector<char> host(4100);
  if (mlurtMemcpy(host.data(), p, host.size(), MLURT_MEMCPY_DEVICE_TO_HOST) != MLURT_SUCCESS)
    std::puts("memcheck_probe: the copy was refused");
  mlurtFree(p);
}

__attribute__((noinline)) void memsetOverflow() {
  void* p = deviceAlloc(4096);
  mlurtQueue_t queue = nullptr;
  mlurtQueueCreate(&queue);
  if (mlurtMemsetAsync(p, 0, 4100, queue) != MLURT_SUCCESS)
    std::puts("memcheck_probe: the memset was refused");
  mlurtQueueSync(queue);
  mlurtQueueDestroy(queue);
  if (mlurtFree(p) != MLURT_SUCCESS) std::puts("memcheck_probe: the free failed");
}

// A bump allocator over one block, as a caching allocator would carve it: each piece followed by the padding
// memcheck asks for, rounded to 512 bytes.
class Pool {
 public:
  Pool() : block_(static_cast<char*>(deviceAlloc(64 << 10))), padding_(opscope_pool_padding()) {}
  __attribute__((noinline)) void* piece(std::size_t bytes) {
    void* p = block_ + used_;
    used_ += (bytes + padding_ + 511) / 512 * 512;
    opscope_pool_alloc(p, bytes);
    return p;
  }
  __attribute__((noinline)) void give(void* p) { opscope_pool_free(p); }

 private:
  char* block_;  // never freed: the program ends holding its pool
  std::size_t padding_;
  std::size_t used_ = 0;
};

// Kept to the end: a leak. (The pointer goes through a volatile so that the call is not a tail call, which
// would leave no frame of this function on the stack.)
void* volatile g_kept = nullptr;
__attribute__((noinline)) void keptPiece(Pool& pool) { g_kept = pool.piece(2048); }

__attribute__((noinline)) void poolErrors() {
  Pool pool;
  void* a = pool.piece(4096);
  void* b = pool.piece(1024);
  keptPiece(pool);
  if (fill(a, 1030) != MLUOP_STATUS_SUCCESS) std::puts("memcheck_probe: the fill was refused");
  pool.give(b);
  pool.give(b);
  pool.give(a);
  if (fill(a, 16) != MLUOP_STATUS_SUCCESS) std::puts("memcheck_probe: the second fill was refused");
}

// Stream-ordered reuse, as PyTorch's caching allocator does it: a memset of piece A is still queued (behind
// a slow host function) when A is freed and its memory handed out again as a smaller piece B, whose red zone
// lies in A's old bytes. The memset is A's, queued before the free: not an overflow of B.
void slowHostFunction(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(200)); }

__attribute__((noinline)) void poolReuse() {
  Pool pool;
  void* a = pool.piece(8192);
  if (mlurtLaunchHostFunc(nullptr, slowHostFunction, nullptr) != MLURT_SUCCESS ||
      mlurtMemsetAsync(static_cast<char*>(a) + 256, 0x11, 4096, nullptr) != MLURT_SUCCESS) {
    std::puts("memcheck_probe: the queued work was refused");
  }
  pool.give(a);
  opscope_pool_alloc(a, 256);  // B: at A's address, its zone where the memset will write
  if (fill(a, 64) != MLUOP_STATUS_SUCCESS) std::puts("memcheck_probe: the fill was refused");
  mlurtDeviceSynchronize();
  pool.give(a);
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (std::strcmp(mode, "double-free") == 0) {
    doubleFree();
  } else if (std::strcmp(mode, "invalid-free") == 0) {
    invalidFree();
  } else if (std::strcmp(mode, "interior-free") == 0) {
    interiorFree();
  } else if (std::strcmp(mode, "host-double-free") == 0) {
    hostDoubleFree();
  } else if (std::strcmp(mode, "mismatched-free") == 0) {
    mismatchedFree();
  } else if (std::strcmp(mode, "threads") == 0) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back(leakOnThread, t);
    for (auto& t : threads) t.join();
  } else if (std::strcmp(mode, "exit-thread") == 0) {
    leakThenExit();
  } else if (std::strcmp(mode, "use-after-free") == 0) {
    useAfterFree();
  } else if (std::strcmp(mode, "oob-argument") == 0) {
    oobArgument();
  } else if (std::strcmp(mode, "memcpy-overflow") == 0) {
    memcpyOverflow();
  } else if (std::strcmp(mode, "memset-overflow") == 0) {
    memsetOverflow();
  } else if (std::strcmp(mode, "pool") == 0) {
    poolErrors();
  } else if (std::strcmp(mode, "pool-reuse") == 0) {
    poolReuse();
  } else if (std::strcmp(mode, "uninit-read") == 0) {
    initCase(0, false);
  } else if (std::strcmp(mode, "partial-write") == 0) {
    initCase(2048, false);
  } else if (std::strcmp(mode, "uninit-copy") == 0) {
    initCase(4096, true);
  } else if (std::strcmp(mode, "all-written") == 0) {
    initCase(4096, false);
  } else if (std::strcmp(mode, "race") == 0) {
    raceCase(false);
  } else if (std::strcmp(mode, "race-ordered") == 0) {
    raceCase(true);
  } else if (std::strcmp(mode, "race-two-writers") == 0) {
    raceCase2(true);
  } else if (std::strcmp(mode, "race-copy-stream") == 0) {
    raceCase2(false);
  } else if (std::strncmp(mode, "race-host-", 10) == 0 &&
             (std::strcmp(mode + 10, "func") == 0 || std::strcmp(mode + 10, "func-ordered") == 0 ||
              std::strcmp(mode + 10, "read") == 0 || std::strcmp(mode + 10, "read-ordered") == 0)) {
    raceHostCase(mode[10] == 'f', std::strstr(mode, "-ordered") != nullptr);
  } else {
    std::fprintf(stderr,
                 "usage: memcheck_probe "
                 "double-free|invalid-free|interior-free|host-double-free|threads|exit-thread|"
                 "use-after-free|oob-argument|memcpy-overflow|memset-overflow|pool|pool-reuse|"
                 "uninit-read|partial-write|uninit-copy|all-written|race|race-ordered|race-two-writers|"
                 "race-copy-stream|race-host-func[-ordered]|race-host-read[-ordered]\n");
    return 2;
  }
  std::puts("memcheck_probe: done");
  return 0;
}
