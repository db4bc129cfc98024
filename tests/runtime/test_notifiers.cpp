// Notifiers (placement, query, sync, cross-queue waits, elapsed time), the device clock and the activity
// callback.
#include "test_util.h"

#include <time.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mlurt_test {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

using NotifierTest = RuntimeTest;
using ActivityTest = RuntimeTest;
using TimestampTest = RuntimeTest;

// ---- creation and handles ----

TEST_F(NotifierTest, CreateWithValidFlags) {
  for (const unsigned flags : {unsigned{MLURT_NOTIFIER_DEFAULT}, unsigned{MLURT_NOTIFIER_DISABLE_TIMING}}) {
    mlurtNotifier_t notifier = nullptr;
    ASSERT_OK(mlurtNotifierCreate(&notifier, flags));
    EXPECT_NE(notifier, nullptr);
    EXPECT_OK(mlurtNotifierDestroy(notifier));
  }
}

TEST_F(NotifierTest, CreateWithUnknownFlagsIsAnInvalidValue) {
  for (const unsigned flags : {0x80u, 0x2u, 0x3u, 0xffffffffu}) {
    mlurtNotifier_t notifier = nullptr;
    EXPECT_FAILS_WITH(mlurtNotifierCreate(&notifier, flags), MLURT_ERROR_INVALID_VALUE, "flag");
  }
}

TEST_F(NotifierTest, DestroyedHandleIsInvalidEverywhere) {
  mlurtNotifier_t dead = nullptr;
  ASSERT_OK(mlurtNotifierCreate(&dead, MLURT_NOTIFIER_DEFAULT));
  ASSERT_OK(mlurtNotifierDestroy(dead));
  ScopedNotifier live;
  ScopedQueue queue;
  ASSERT_OK(mlurtPlaceNotifier(live.get(), queue.get()));
  ASSERT_OK(mlurtQueueSync(queue.get()));
  float ms = -1.0f;
  EXPECT_FAILS_WITH(mlurtNotifierDestroy(dead), MLURT_ERROR_INVALID_HANDLE, "notifier");
  EXPECT_FAILS_WITH(mlurtNotifierQuery(dead), MLURT_ERROR_INVALID_HANDLE, "notifier");
  EXPECT_FAILS_WITH(mlurtNotifierSync(dead), MLURT_ERROR_INVALID_HANDLE, "notifier");
  EXPECT_FAILS_WITH(mlurtPlaceNotifier(dead, queue.get()), MLURT_ERROR_INVALID_HANDLE, "notifier");
  EXPECT_FAILS_WITH(mlurtQueueWaitNotifier(queue.get(), dead), MLURT_ERROR_INVALID_HANDLE, "notifier");
  EXPECT_FAILS_WITH(mlurtNotifierElapsedTime(&ms, dead, live.get()), MLURT_ERROR_INVALID_HANDLE, "notifier");
  EXPECT_FAILS_WITH(mlurtNotifierElapsedTime(&ms, live.get(), dead), MLURT_ERROR_INVALID_HANDLE, "notifier");
  EXPECT_EQ(ms, -1.0f);
  EXPECT_OK(mlurtQueueSync(queue.get()));
}

TEST_F(NotifierTest, MadeUpHandlesAreInvalid) {
  ScopedQueue queue;
  const std::vector<mlurtNotifier_t> fakes = {
      reinterpret_cast<mlurtNotifier_t>(uintptr_t{0xdead0}),
      reinterpret_cast<mlurtNotifier_t>(uintptr_t{3}),
      // A queue handle is not a notifier handle.
      reinterpret_cast<mlurtNotifier_t>(queue.get()),
  };
  for (const mlurtNotifier_t fake : fakes) {
    SCOPED_TRACE(reinterpret_cast<uintptr_t>(fake));
    EXPECT_FAILS_WITH(mlurtNotifierQuery(fake), MLURT_ERROR_INVALID_HANDLE, "notifier");
    EXPECT_FAILS_WITH(mlurtNotifierSync(fake), MLURT_ERROR_INVALID_HANDLE, "notifier");
    EXPECT_FAILS_WITH(mlurtPlaceNotifier(fake, queue.get()), MLURT_ERROR_INVALID_HANDLE, "notifier");
    EXPECT_FAILS_WITH(mlurtNotifierDestroy(fake), MLURT_ERROR_INVALID_HANDLE, "notifier");
  }
  // NULL is no notifier either (unlike a NULL queue, it has no default meaning).
  EXPECT_THAT(mlurtNotifierQuery(nullptr), AnyOf(MLURT_ERROR_INVALID_HANDLE, MLURT_ERROR_INVALID_VALUE));
  EXPECT_THAT(mlurtPlaceNotifier(nullptr, queue.get()),
              AnyOf(MLURT_ERROR_INVALID_HANDLE, MLURT_ERROR_INVALID_VALUE));
  EXPECT_OK(mlurtQueueSync(queue.get()));
}

// ---- query and sync ----

TEST_F(NotifierTest, NeverPlacedNotifierIsComplete) {
  ScopedNotifier notifier;
  EXPECT_OK(mlurtNotifierQuery(notifier.get()));
  EXPECT_OK(mlurtNotifierSync(notifier.get()));
}

TEST_F(NotifierTest, PlacedBehindWorkIsNotReadyUntilTheWorkerReachesIt) {
  Gate gate;
  ScopedQueue queue;
  ScopedNotifier notifier;
  OpenAtExit opener(gate);
  std::atomic<bool> before_ran{false};
  ASSERT_OK(mlurtLaunchHostFunc(queue.get(), Gate::hostFn, &gate));
  ASSERT_OK(launchHost(queue.get(), [&] { before_ran = true; }));
  ASSERT_OK(mlurtPlaceNotifier(notifier.get(), queue.get()));
  EXPECT_EQ(mlurtNotifierQuery(notifier.get()), MLURT_ERROR_NOT_READY);
  EXPECT_EQ(mlurtNotifierQuery(notifier.get()), MLURT_ERROR_NOT_READY);
  gate.open();
  EXPECT_OK(mlurtNotifierSync(notifier.get()));
  EXPECT_TRUE(before_ran.load()) << "the notifier completed before the work ahead of it";
  EXPECT_OK(mlurtNotifierQuery(notifier.get()));
}

TEST_F(NotifierTest, SyncWaitsForASleepingHostFunction) {
  ScopedQueue queue;
  ScopedNotifier notifier;
  std::atomic<bool> slept{false};
  ASSERT_OK(launchHost(queue.get(), [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    slept = true;
  }));
  ASSERT_OK(mlurtPlaceNotifier(notifier.get(), queue.get()));
  EXPECT_EQ(mlurtNotifierQuery(notifier.get()), MLURT_ERROR_NOT_READY);
  ASSERT_OK(mlurtNotifierSync(notifier.get()));
  EXPECT_TRUE(slept.load());
  EXPECT_OK(mlurtNotifierQuery(notifier.get()));
}

TEST_F(NotifierTest, ReplacingFollowsTheLatestPlacement) {
  Gate gate;
  ScopedQueue free_running;
  ScopedQueue held;
  ScopedNotifier notifier;
  OpenAtExit opener(gate);
  ASSERT_OK(mlurtPlaceNotifier(notifier.get(), free_running.get()));
  ASSERT_OK(mlurtQueueSync(free_running.get()));
  EXPECT_OK(mlurtNotifierQuery(notifier.get()));
  ASSERT_OK(mlurtLaunchHostFunc(held.get(), Gate::hostFn, &gate));
  ASSERT_OK(mlurtPlaceNotifier(notifier.get(), held.get()));
  EXPECT_EQ(mlurtNotifierQuery(notifier.get()), MLURT_ERROR_NOT_READY)
      << "still answering for the old placement";
  gate.open();
  EXPECT_OK(mlurtNotifierSync(notifier.get()));
  EXPECT_OK(mlurtNotifierQuery(notifier.get()));
}

TEST_F(NotifierTest, PlacedOnTheNullQueue) {
  ScopedNotifier notifier;
  std::atomic<bool> ran{false};
  ASSERT_OK(launchHost(nullptr, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ran = true;
  }));
  ASSERT_OK(mlurtPlaceNotifier(notifier.get(), nullptr));
  ASSERT_OK(mlurtNotifierSync(notifier.get()));
  EXPECT_TRUE(ran.load());
}

// ---- queue waits ----

TEST_F(NotifierTest, QueueWaitingOnAnotherQueuesNotifierDoesNotStartEarly) {
  ScopedQueue a;
  ScopedQueue b;
  ScopedNotifier n;
  std::atomic<bool> flag{false};
  std::atomic<bool> flag_seen{false};
  ASSERT_OK(launchHost(a.get(), [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    flag = true;
  }));
  ASSERT_OK(mlurtPlaceNotifier(n.get(), a.get()));
  ASSERT_OK(mlurtQueueWaitNotifier(b.get(), n.get()));
  ASSERT_OK(launchHost(b.get(), [&] { flag_seen = flag.load(); }));
  ASSERT_OK(mlurtQueueSync(b.get()));
  EXPECT_TRUE(flag_seen.load()) << "queue b ran before queue a reached the notifier";
  EXPECT_OK(mlurtQueueSync(a.get()));
}

TEST_F(NotifierTest, QueueWaitDoesNotBlockTheCaller) {
  Gate gate;
  ScopedQueue a;
  ScopedQueue b;
  ScopedNotifier n;
  OpenAtExit opener(gate);
  std::atomic<bool> b_ran{false};
  ASSERT_OK(mlurtLaunchHostFunc(a.get(), Gate::hostFn, &gate));
  ASSERT_OK(mlurtPlaceNotifier(n.get(), a.get()));
  ASSERT_OK(mlurtQueueWaitNotifier(b.get(), n.get()));  // returns while the gate is still closed
  ASSERT_OK(launchHost(b.get(), [&] { b_ran = true; }));
  EXPECT_FALSE(gate.isOpen());
  EXPECT_EQ(mlurtQueueQuery(b.get()), MLURT_ERROR_NOT_READY);
  EXPECT_FALSE(b_ran.load());
  gate.open();
  ASSERT_OK(mlurtQueueSync(b.get()));
  EXPECT_TRUE(b_ran.load());
}

TEST_F(NotifierTest, WaitOnANeverPlacedNotifierDoesNotWait) {
  ScopedQueue queue;
  ScopedNotifier n;
  std::atomic<bool> ran{false};
  ASSERT_OK(mlurtQueueWaitNotifier(queue.get(), n.get()));
  ASSERT_OK(launchHost(queue.get(), [&] { ran = true; }));
  ASSERT_OK(mlurtQueueSync(queue.get()));
  EXPECT_TRUE(ran.load());
}

TEST_F(NotifierTest, DestroyingANotifierAQueueWaitsOnIsAllowed) {
  Gate gate;
  ScopedQueue a;
  ScopedQueue b;
  OpenAtExit opener(gate);
  mlurtNotifier_t n = nullptr;
  ASSERT_OK(mlurtNotifierCreate(&n, MLURT_NOTIFIER_DEFAULT));
  std::atomic<bool> a_done{false};
  std::atomic<bool> seen_a_done{false};
  ASSERT_OK(mlurtLaunchHostFunc(a.get(), Gate::hostFn, &gate));
  ASSERT_OK(launchHost(a.get(), [&] { a_done = true; }));
  ASSERT_OK(mlurtPlaceNotifier(n, a.get()));
  ASSERT_OK(mlurtQueueWaitNotifier(b.get(), n));
  ASSERT_OK(launchHost(b.get(), [&] { seen_a_done = a_done.load(); }));
  EXPECT_OK(mlurtNotifierDestroy(n));
  EXPECT_EQ(mlurtNotifierQuery(n), MLURT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(mlurtQueueQuery(b.get()), MLURT_ERROR_NOT_READY);
  gate.open();
  ASSERT_OK(mlurtQueueSync(b.get()));  // the wait completes when the placement does
  EXPECT_TRUE(seen_a_done.load());
  EXPECT_OK(mlurtQueueSync(a.get()));
}

TEST_F(NotifierTest, WaitAcrossDevices) {
  ASSERT_GE(deviceCount(), 2);
  Gate gate;
  std::unique_ptr<ScopedQueue> on1;
  {
    DeviceScope scope(1);
    on1 = std::make_unique<ScopedQueue>();
  }
  ScopedQueue on0;
  ScopedNotifier n;
  OpenAtExit opener(gate);
  std::atomic<bool> device1_done{false};
  std::atomic<bool> seen{false};
  ASSERT_OK(mlurtLaunchHostFunc(on1->get(), Gate::hostFn, &gate));
  ASSERT_OK(launchHost(on1->get(), [&] { device1_done = true; }));
  ASSERT_OK(mlurtPlaceNotifier(n.get(), on1->get()));
  ASSERT_OK(mlurtQueueWaitNotifier(on0.get(), n.get()));
  ASSERT_OK(launchHost(on0.get(), [&] { seen = device1_done.load(); }));
  EXPECT_EQ(mlurtQueueQuery(on0.get()), MLURT_ERROR_NOT_READY);
  gate.open();
  ASSERT_OK(mlurtQueueSync(on0.get()));
  EXPECT_TRUE(seen.load());
  ASSERT_OK(mlurtQueueSync(on1->get()));
}

// ---- elapsed time ----

TEST_F(NotifierTest, ElapsedTimeAroundASleepingHostFunction) {
  ScopedQueue queue;
  ScopedNotifier start;
  ScopedNotifier end;
  ASSERT_OK(mlurtPlaceNotifier(start.get(), queue.get()));
  ASSERT_OK(launchSleep(queue.get(), std::chrono::milliseconds(50)));
  ASSERT_OK(mlurtPlaceNotifier(end.get(), queue.get()));
  ASSERT_OK(mlurtQueueSync(queue.get()));
  float ms = -1.0f;
  ASSERT_OK(mlurtNotifierElapsedTime(&ms, start.get(), end.get()));
  EXPECT_GE(ms, 50.0f);
  EXPECT_LE(ms, 500.0f);
}

TEST_F(NotifierTest, ElapsedTimeBetweenTwoQueues) {
  ScopedQueue a;
  ScopedQueue b;
  ScopedNotifier start;
  ScopedNotifier end;
  ASSERT_OK(mlurtPlaceNotifier(start.get(), a.get()));
  ASSERT_OK(mlurtQueueSync(a.get()));
  ASSERT_OK(mlurtPlaceNotifier(end.get(), b.get()));
  ASSERT_OK(mlurtQueueSync(b.get()));
  float ms = -1.0f;
  ASSERT_OK(mlurtNotifierElapsedTime(&ms, start.get(), end.get()));
  EXPECT_GE(ms, 0.0f) << "end was placed after start completed";
}

TEST_F(NotifierTest, ElapsedTimeOfATimingDisabledNotifier) {
  ScopedQueue queue;
  ScopedNotifier timed;
  ScopedNotifier untimed(MLURT_NOTIFIER_DISABLE_TIMING);
  ASSERT_OK(mlurtPlaceNotifier(timed.get(), queue.get()));
  ASSERT_OK(mlurtPlaceNotifier(untimed.get(), queue.get()));
  ASSERT_OK(mlurtQueueSync(queue.get()));
  EXPECT_OK(mlurtNotifierQuery(untimed.get()));
  float ms = -1.0f;
  EXPECT_FAILS_WITH(mlurtNotifierElapsedTime(&ms, timed.get(), untimed.get()),
                    MLURT_ERROR_NOTIFIER_TIMING_DISABLED, "timing");
  EXPECT_FAILS_WITH(mlurtNotifierElapsedTime(&ms, untimed.get(), timed.get()),
                    MLURT_ERROR_NOTIFIER_TIMING_DISABLED, "timing");
  EXPECT_EQ(ms, -1.0f);
}

TEST_F(NotifierTest, ElapsedTimeOfANeverPlacedNotifier) {
  ScopedQueue queue;
  ScopedNotifier placed;
  ScopedNotifier never;
  ASSERT_OK(mlurtPlaceNotifier(placed.get(), queue.get()));
  ASSERT_OK(mlurtQueueSync(queue.get()));
  float ms = -1.0f;
  EXPECT_FAILS_WITH(mlurtNotifierElapsedTime(&ms, placed.get(), never.get()), MLURT_ERROR_NOTIFIER_NOT_PLACED,
                    "placed");
  EXPECT_FAILS_WITH(mlurtNotifierElapsedTime(&ms, never.get(), placed.get()), MLURT_ERROR_NOTIFIER_NOT_PLACED,
                    "placed");
  EXPECT_EQ(ms, -1.0f);
}

TEST_F(NotifierTest, ElapsedTimeOfANotifierNotYetCompleted) {
  Gate gate;
  ScopedQueue queue;
  ScopedNotifier start;
  ScopedNotifier end;
  OpenAtExit opener(gate);
  ASSERT_OK(mlurtPlaceNotifier(start.get(), queue.get()));
  ASSERT_OK(mlurtLaunchHostFunc(queue.get(), Gate::hostFn, &gate));
  ASSERT_OK(mlurtPlaceNotifier(end.get(), queue.get()));
  ASSERT_OK(mlurtNotifierSync(start.get()));
  float ms = -1.0f;
  EXPECT_EQ(mlurtNotifierElapsedTime(&ms, start.get(), end.get()), MLURT_ERROR_NOT_READY);
  EXPECT_EQ(ms, -1.0f);
  gate.open();
  ASSERT_OK(mlurtQueueSync(queue.get()));
  EXPECT_OK(mlurtNotifierElapsedTime(&ms, start.get(), end.get()));
  EXPECT_GE(ms, 0.0f);
}

TEST_F(NotifierTest, ElapsedTimeWithANullResultIsAnInvalidValue) {
  ScopedQueue queue;
  ScopedNotifier a;
  ScopedNotifier b;
  ASSERT_OK(mlurtPlaceNotifier(a.get(), queue.get()));
  ASSERT_OK(mlurtPlaceNotifier(b.get(), queue.get()));
  ASSERT_OK(mlurtQueueSync(queue.get()));
  EXPECT_FAILS_WITH(mlurtNotifierElapsedTime(nullptr, a.get(), b.get()), MLURT_ERROR_INVALID_VALUE, "null");
}

// ---- device clock ----

uint64_t monotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

TEST_F(TimestampTest, DeviceClockIsClockMonotonic) {
  uint64_t previous = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t before = monotonicNs();
    const uint64_t now = mlurtGetTimestampNs();
    const uint64_t after = monotonicNs();
    ASSERT_LE(before, now);
    ASSERT_LE(now, after);
    ASSERT_LE(previous, now);
    previous = now;
  }
}

// ---- activity callback ----

// A copy of an activity record (its name is only valid during the callback).
struct Activity {
  mlurtActivityKind_t kind;
  std::string name;
  int device;
  uint64_t queue_id;
  uint64_t task_id;
  uint64_t start_ns;
  uint64_t end_ns;
  size_t bytes;
  mlurtStatus_t status;
  std::thread::id thread;
  uint64_t correlation = 0;
};

// Installs itself as the activity callback for its lifetime.
class Recorder {
 public:
  Recorder() { EXPECT_OK(mlurtSetActivityCallback(&Recorder::callback, this)); }
  ~Recorder() { EXPECT_OK(mlurtSetActivityCallback(nullptr, nullptr)); }
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // The records of one queue, in the order they arrived.
  std::vector<Activity> of(uint64_t queue_id) const {
    std::lock_guard lock(mutex_);
    std::vector<Activity> result;
    for (const Activity& a : records_) {
      if (a.queue_id == queue_id) result.push_back(a);
    }
    return result;
  }

 private:
  static void callback(const mlurtActivityRecord_t* r, void* user) {
    auto* self = static_cast<Recorder*>(user);
    std::lock_guard lock(self->mutex_);
    self->records_.push_back(Activity{r->kind, r->name == nullptr ? "<null>" : r->name, r->device, r->queueId,
                                      r->taskId, r->startNs, r->endNs, r->bytes, r->status,
                                      std::this_thread::get_id(), r->correlationId});
  }

  mutable std::mutex mutex_;
  std::vector<Activity> records_;
};

// Correlation ids: the tasks a thread enqueues carry the id it set, whatever the kind of task, and the
// enqueued count says how many it enqueued.
TEST_F(ActivityTest, TasksCarryTheEnqueueingThreadsCorrelationId) {
  ScopedQueue queue;
  Recorder recorder;
  void* buffer = nullptr;
  ASSERT_OK(mlurtMalloc(&buffer, 256));
  const uint64_t count_before = mlurtGetEnqueuedCount();
  EXPECT_EQ(mlurtSetCorrelationId(42), 0u);
  ASSERT_OK(mlurtMemsetAsync(buffer, 0, 256, queue.get()));
  ASSERT_OK(mlurtLaunchHostFunc(
      queue.get(), [](void*) {}, nullptr));
  uint64_t other_thread_count = 0;
  std::thread([&] {  // another thread's tasks are not tagged with this thread's id
    ASSERT_OK(mlurtMemsetAsync(buffer, 1, 256, queue.get()));
    other_thread_count = mlurtGetEnqueuedCount();
  })
      .join();
  EXPECT_EQ(mlurtSetCorrelationId(7), 42u);
  ASSERT_OK(mlurtMemsetAsync(buffer, 2, 256, queue.get()));
  EXPECT_EQ(mlurtSetCorrelationId(0), 7u);
  ASSERT_OK(mlurtMemsetAsync(buffer, 3, 256, queue.get()));
  EXPECT_EQ(mlurtGetEnqueuedCount() - count_before, 4u);
  EXPECT_EQ(other_thread_count, 1u);
  ASSERT_OK(mlurtQueueSync(queue.get()));
  ASSERT_OK(mlurtFree(buffer));
  std::uint64_t queue_id = 0;
  ASSERT_OK(mlurtQueueGetId(queue.get(), &queue_id));
  const auto records = recorder.of(queue_id);
  ASSERT_EQ(records.size(), 5u);
  EXPECT_EQ(records[0].correlation, 42u);
  EXPECT_EQ(records[0].kind, MLURT_ACTIVITY_MEMSET);
  EXPECT_EQ(records[1].correlation, 42u);
  EXPECT_EQ(records[1].kind, MLURT_ACTIVITY_HOST_FUNC);
  EXPECT_EQ(records[2].correlation, 0u);
  EXPECT_EQ(records[3].correlation, 7u);
  EXPECT_EQ(records[4].correlation, 0u);
}

TEST_F(ActivityTest, KernelRecord) {
  ScopedQueue queue;
  Recorder recorder;
  const uint64_t before = mlurtGetTimestampNs();
  uint64_t task_id = 0;
  ASSERT_OK(launchKernel(
      queue.get(), "my_kernel",
      [] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        return MLURT_SUCCESS;
      },
      &task_id));
  ASSERT_OK(mlurtQueueSync(queue.get()));
  const uint64_t after = mlurtGetTimestampNs();
  const std::vector<Activity> records = recorder.of(queue.id());
  ASSERT_EQ(records.size(), 1u);
  const Activity& r = records[0];
  EXPECT_EQ(r.kind, MLURT_ACTIVITY_KERNEL);
  EXPECT_EQ(r.name, "my_kernel");
  EXPECT_EQ(r.device, 0);
  EXPECT_EQ(r.queue_id, queue.id());
  EXPECT_EQ(r.task_id, task_id);
  EXPECT_LE(before, r.start_ns);
  EXPECT_LE(r.start_ns, r.end_ns);
  EXPECT_LE(r.end_ns, after);
  EXPECT_GE(r.end_ns - r.start_ns, 2'000'000u) << "the kernel slept 2 ms";
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_EQ(r.status, MLURT_SUCCESS);
  EXPECT_NE(r.thread, std::this_thread::get_id()) << "called on the worker";
}

TEST_F(ActivityTest, CopyMemsetHostFunctionNotifierAndWaitRecords) {
  ScopedQueue queue;
  ScopedQueue other;
  ScopedNotifier n;
  DeviceBuffer device(4096);
  std::vector<unsigned char> host(4096, 1);
  Recorder recorder;
  ASSERT_OK(mlurtPlaceNotifier(n.get(), other.get()));
  ASSERT_OK(mlurtMemcpyAsync(device.get(), host.data(), 4096, queue.get(), MLURT_MEMCPY_HOST_TO_DEVICE));
  ASSERT_OK(mlurtMemsetAsync(device.get(), 0, 1000, queue.get()));
  ASSERT_OK(launchHost(queue.get(), [] {}));
  ASSERT_OK(mlurtQueueWaitNotifier(queue.get(), n.get()));
  ASSERT_OK(mlurtPlaceNotifier(n.get(), queue.get()));
  ASSERT_OK(mlurtMemcpyAsync(host.data(), device.get(), 2048, queue.get(), MLURT_MEMCPY_DEVICE_TO_HOST));
  ASSERT_OK(mlurtQueueSync(queue.get()));
  ASSERT_OK(mlurtQueueSync(other.get()));
  const std::vector<Activity> records = recorder.of(queue.id());
  ASSERT_EQ(records.size(), 6u);
  EXPECT_EQ(records[0].kind, MLURT_ACTIVITY_MEMCPY);
  EXPECT_EQ(records[0].bytes, 4096u);
  EXPECT_THAT(records[0].name, HasSubstrNoCase("memcpy"));
  EXPECT_EQ(records[1].kind, MLURT_ACTIVITY_MEMSET);
  EXPECT_EQ(records[1].bytes, 1000u);
  EXPECT_EQ(records[2].kind, MLURT_ACTIVITY_HOST_FUNC);
  EXPECT_EQ(records[2].bytes, 0u);
  EXPECT_EQ(records[3].kind, MLURT_ACTIVITY_QUEUE_WAIT);
  EXPECT_EQ(records[4].kind, MLURT_ACTIVITY_NOTIFIER);
  EXPECT_EQ(records[5].kind, MLURT_ACTIVITY_MEMCPY);
  EXPECT_EQ(records[5].bytes, 2048u);
  EXPECT_NE(records[0].name, records[5].name) << "H2D and D2H copies are named apart";
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].device, 0) << i;
    EXPECT_EQ(records[i].status, MLURT_SUCCESS) << i;
    EXPECT_FALSE(records[i].name.empty()) << i;
    EXPECT_LE(records[i].start_ns, records[i].end_ns) << i;
    if (i > 0) {
      EXPECT_GT(records[i].task_id, records[i - 1].task_id) << i;
      EXPECT_LE(records[i - 1].end_ns, records[i].start_ns)
          << "task " << i << " started before the previous ended";
    }
  }
}

TEST_F(ActivityTest, FailedKernelRecordCarriesItsStatus) {
  ScopedQueue queue;
  Recorder recorder;
  uint64_t task_id = 0;
  ASSERT_OK(launchKernel(
      queue.get(), "failing_kernel", [] { return MLURT_ERROR_LAUNCH_FAILED; }, &task_id));
  EXPECT_EQ(mlurtQueueSync(queue.get()), MLURT_ERROR_LAUNCH_FAILED);
  const std::vector<Activity> records = recorder.of(queue.id());
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].task_id, task_id);
  EXPECT_EQ(records[0].name, "failing_kernel");
  EXPECT_EQ(records[0].status, MLURT_ERROR_LAUNCH_FAILED);
}

TEST_F(ActivityTest, RecordsOfAQueueOnDeviceOne) {
  ASSERT_GE(deviceCount(), 2);
  ASSERT_OK(mlurtSetDevice(1));
  ScopedQueue queue;
  Recorder recorder;
  uint64_t task_id = 0;
  ASSERT_OK(launchKernel(
      queue.get(), "device_one_kernel", [] { return MLURT_SUCCESS; }, &task_id));
  ASSERT_OK(mlurtQueueSync(queue.get()));
  const std::vector<Activity> records = recorder.of(queue.id());
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].device, 1);
  EXPECT_EQ(records[0].task_id, task_id);
}

TEST_F(ActivityTest, NoRecordsAfterTheCallbackIsRemoved) {
  ScopedQueue queue;
  uint64_t first = 0;
  {
    Recorder recorder;
    ASSERT_OK(launchKernel(
        queue.get(), "seen", [] { return MLURT_SUCCESS; }, &first));
    ASSERT_OK(mlurtQueueSync(queue.get()));
    EXPECT_EQ(recorder.of(queue.id()).size(), 1u);
  }
  // A second recorder sees only what runs while it is installed.
  ASSERT_OK(launchKernel(queue.get(), "unseen", [] { return MLURT_SUCCESS; }));
  ASSERT_OK(mlurtQueueSync(queue.get()));
  Recorder later;
  uint64_t last = 0;
  ASSERT_OK(launchKernel(
      queue.get(), "seen_again", [] { return MLURT_SUCCESS; }, &last));
  ASSERT_OK(mlurtQueueSync(queue.get()));
  const std::vector<Activity> records = later.of(queue.id());
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].name, "seen_again");
  EXPECT_EQ(records[0].task_id, last);
}

}  // namespace
}  // namespace mlurt_test
