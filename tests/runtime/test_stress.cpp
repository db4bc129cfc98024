// Many threads using the runtime at once: allocations, asynchronous copies and syncs on queues of their
// own, and concurrent creation of queues and notifiers.
#include "test_util.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mlurt_test {
namespace {

using StressTest = RuntimeTest;

// The first failure seen by any thread, with its context.
class FirstFailure {
 public:
  void record(const std::string& what) {
    ++count_;
    std::lock_guard lock(mutex_);
    if (first_.empty()) first_ = what;
  }
  int count() const { return count_.load(); }
  std::string first() const {
    std::lock_guard lock(mutex_);
    return first_;
  }

 private:
  std::atomic<int> count_{0};
  mutable std::mutex mutex_;
  std::string first_;
};

TEST_F(StressTest, EightThreadsCopyingThroughQueuesOfTheirOwn) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 10'000;
  constexpr size_t kMinSize = 256;
  constexpr size_t kMaxSize = 8192;
  const int count = deviceCount();
  ASSERT_GE(count, 1);

  std::vector<size_t> free_before(static_cast<size_t>(count));
  std::vector<mlurtDeviceCounters_t> counters_before(static_cast<size_t>(count));
  std::vector<uint64_t> rounds_per_device(static_cast<size_t>(count), 0);
  for (int d = 0; d < count; ++d) {
    free_before[d] = freeBytes(d);
    counters_before[d] = counters(d);
  }
  for (int t = 0; t < kThreads; ++t) rounds_per_device[t % count] += kRounds;

  FirstFailure failures;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, count, &failures] {
      const int device = t % count;
      auto fail = [&](int round, const char* what) {
        failures.record("thread " + std::to_string(t) + " round " + std::to_string(round) + ": " + what +
                        ": " + lastMessage());
      };
      if (mlurtSetDevice(device) != MLURT_SUCCESS) return fail(-1, "mlurtSetDevice");
      mlurtQueue_t queue = nullptr;
      if (mlurtQueueCreate(&queue) != MLURT_SUCCESS) return fail(-1, "mlurtQueueCreate");
      std::vector<unsigned char> src(kMaxSize);
      std::vector<unsigned char> dst(kMaxSize);
      for (int round = 0; round < kRounds; ++round) {
        const size_t size = kMinSize + (static_cast<size_t>(round) * 977 + static_cast<size_t>(t) * 131) %
                                           (kMaxSize - kMinSize + 1);
        const auto first = static_cast<unsigned char>(round * 7 + t);
        const auto last = static_cast<unsigned char>(round * 13 + t * 3 + 1);
        src[0] = first;
        src[size / 2] = static_cast<unsigned char>(first ^ 0x5a);
        src[size - 1] = last;
        dst[0] = static_cast<unsigned char>(~first);
        dst[size / 2] = first;
        dst[size - 1] = static_cast<unsigned char>(~last);

        void* device_ptr = nullptr;
        if (mlurtMalloc(&device_ptr, size) != MLURT_SUCCESS) {
          fail(round, "mlurtMalloc");
          break;
        }
        bool ok = true;
        if (mlurtMemcpyAsync(device_ptr, src.data(), size, queue, MLURT_MEMCPY_HOST_TO_DEVICE) !=
            MLURT_SUCCESS) {
          fail(round, "mlurtMemcpyAsync H2D");
          ok = false;
        } else if (mlurtMemcpyAsync(dst.data(), device_ptr, size, queue, MLURT_MEMCPY_DEVICE_TO_HOST) !=
                   MLURT_SUCCESS) {
          fail(round, "mlurtMemcpyAsync D2H");
          ok = false;
        } else if (mlurtQueueSync(queue) != MLURT_SUCCESS) {
          fail(round, "mlurtQueueSync");
          ok = false;
        } else if (dst[0] != first || dst[size / 2] != static_cast<unsigned char>(first ^ 0x5a) ||
                   dst[size - 1] != last) {
          fail(round, "data mismatch after the round trip");
          ok = false;
        }
        if (ok && round % 1000 == 0) {
          mlurtPointerAttributes_t a{};
          if (mlurtPointerGetAttributes(&a, device_ptr) != MLURT_SUCCESS || a.type != MLURT_MEMORY_DEVICE ||
              a.device != device || a.size != size) {
            fail(round, "wrong pointer attributes");
            ok = false;
          }
        }
        if (mlurtFree(device_ptr) != MLURT_SUCCESS) {
          fail(round, "mlurtFree");
          ok = false;
        }
        if (!ok) break;
      }
      if (mlurtQueueDestroy(queue) != MLURT_SUCCESS) fail(kRounds, "mlurtQueueDestroy");
      if (mlurtPeekAtLastError() != MLURT_SUCCESS) fail(kRounds, "a last error was left behind");
    });
  }
  for (auto& thread : threads) thread.join();

  EXPECT_EQ(failures.count(), 0) << "first failure: " << failures.first();
  for (int d = 0; d < count; ++d) {
    SCOPED_TRACE("device " + std::to_string(d));
    EXPECT_EQ(freeBytes(d), free_before[d]);
    const mlurtDeviceCounters_t after = counters(d);
    EXPECT_EQ(after.bytesInUse, counters_before[d].bytesInUse);
    EXPECT_EQ(after.liveAllocations, counters_before[d].liveAllocations);
    EXPECT_EQ(after.totalAllocations - counters_before[d].totalAllocations, rounds_per_device[d]);
    EXPECT_EQ(after.tasksRun - counters_before[d].tasksRun, 2 * rounds_per_device[d]);
    EXPECT_GE(after.peakBytesInUse, counters_before[d].bytesInUse + kMinSize);
  }
}

TEST_F(StressTest, ThreadsCreateAndDestroyQueuesAndNotifiers) {
  constexpr int kThreads = 6;
  constexpr int kRounds = 200;
  const int count = deviceCount();
  FirstFailure failures;
  std::atomic<int> ran{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, count, &failures, &ran] {
      auto fail = [&](int round, const char* what) {
        failures.record("thread " + std::to_string(t) + " round " + std::to_string(round) + ": " + what +
                        ": " + lastMessage());
      };
      if (mlurtSetDevice(t % count) != MLURT_SUCCESS) return fail(-1, "mlurtSetDevice");
      for (int round = 0; round < kRounds; ++round) {
        mlurtQueue_t a = nullptr;
        mlurtQueue_t b = nullptr;
        mlurtNotifier_t n = nullptr;
        if (mlurtQueueCreate(&a) != MLURT_SUCCESS || mlurtQueueCreate(&b) != MLURT_SUCCESS ||
            mlurtNotifierCreate(&n, round % 2 == 0 ? MLURT_NOTIFIER_DEFAULT
                                                   : MLURT_NOTIFIER_DISABLE_TIMING) != MLURT_SUCCESS) {
          fail(round, "create");
          break;
        }
        // b waits for a: a host function on a, a notifier, then work on b.
        if (launchHost(a, [&ran] { ++ran; }) != MLURT_SUCCESS || mlurtPlaceNotifier(n, a) != MLURT_SUCCESS ||
            mlurtQueueWaitNotifier(b, n) != MLURT_SUCCESS ||
            launchHost(b, [&ran] { ++ran; }) != MLURT_SUCCESS) {
          fail(round, "enqueue");
        }
        // Destroy in an order that leaves b waiting on a destroyed notifier for a while.
        if (mlurtNotifierDestroy(n) != MLURT_SUCCESS) fail(round, "mlurtNotifierDestroy");
        if (mlurtQueueDestroy(b) != MLURT_SUCCESS) fail(round, "mlurtQueueDestroy b");
        if (mlurtQueueDestroy(a) != MLURT_SUCCESS) fail(round, "mlurtQueueDestroy a");
        if (mlurtQueueQuery(a) != MLURT_ERROR_INVALID_HANDLE) fail(round, "destroyed queue still valid");
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.count(), 0) << "first failure: " << failures.first();
  EXPECT_EQ(ran.load(), kThreads * kRounds * 2);
}

}  // namespace
}  // namespace mlurt_test
