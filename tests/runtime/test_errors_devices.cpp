// Errors (status strings, the per-thread last error) and devices (count, current device, properties,
// memory info, counters, device-wide synchronization).
#include "test_util.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace mlurt_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

using ErrorTest = RuntimeTest;
using DeviceTest = RuntimeTest;

// ---- errors ----

TEST_F(ErrorTest, ErrorStringStartsWithTheEnumNameForEveryStatus) {
  const std::vector<std::string> names = {
      "MLURT_SUCCESS",
      "MLURT_ERROR_INVALID_VALUE",
      "MLURT_ERROR_INVALID_DEVICE",
      "MLURT_ERROR_OUT_OF_MEMORY",
      "MLURT_ERROR_INVALID_POINTER",
      "MLURT_ERROR_INVALID_MEMCPY_DIRECTION",
      "MLURT_ERROR_INVALID_HANDLE",
      "MLURT_ERROR_NOT_READY",
      "MLURT_ERROR_LAUNCH_FAILED",
      "MLURT_ERROR_NOTIFIER_TIMING_DISABLED",
      "MLURT_ERROR_NOTIFIER_NOT_PLACED",
      "MLURT_ERROR_NOT_PERMITTED",
      "MLURT_ERROR_SHUTDOWN",
      "MLURT_ERROR_INTERNAL",
  };
  ASSERT_EQ(names.size(), static_cast<size_t>(MLURT_ERROR_INTERNAL) + 1);
  std::set<std::string> distinct;
  for (size_t i = 0; i < names.size(); ++i) {
    const char* text = mlurtGetErrorString(static_cast<mlurtStatus_t>(i));
    ASSERT_NE(text, nullptr) << "status " << i;
    EXPECT_THAT(std::string(text), StartsWith(names[i])) << "status " << i;
    // The name alone is not a description: "NAME: what it means".
    EXPECT_GT(std::string(text).size(), names[i].size() + 2) << "status " << i << ": " << text;
    // A name is not the prefix of another status' name ("..._INVALID_VALUE" vs "..._INVALID_VALUE_X").
    if (std::string(text).size() > names[i].size()) {
      const char next = text[names[i].size()];
      EXPECT_FALSE(std::isalnum(static_cast<unsigned char>(next)) || next == '_') << text;
    }
    distinct.insert(text);
  }
  EXPECT_EQ(distinct.size(), names.size());
}

TEST_F(ErrorTest, ErrorStringOfAnOutOfRangeStatusSaysUnknown) {
  for (const int raw : {999, 14, -1}) {
    const char* text = mlurtGetErrorString(static_cast<mlurtStatus_t>(raw));
    ASSERT_NE(text, nullptr) << raw;
    EXPECT_THAT(text, HasSubstrNoCase("unknown")) << raw << ": " << text;
  }
}

TEST_F(ErrorTest, GetLastErrorReturnsAndResetsPeekDoesNot) {
  EXPECT_EQ(mlurtGetLastError(), MLURT_SUCCESS);
  EXPECT_EQ(mlurtSetDevice(-1), MLURT_ERROR_INVALID_DEVICE);
  EXPECT_EQ(mlurtPeekAtLastError(), MLURT_ERROR_INVALID_DEVICE);
  EXPECT_EQ(mlurtPeekAtLastError(), MLURT_ERROR_INVALID_DEVICE);
  EXPECT_EQ(mlurtGetLastError(), MLURT_ERROR_INVALID_DEVICE);
  EXPECT_EQ(mlurtGetLastError(), MLURT_SUCCESS);
  EXPECT_EQ(mlurtPeekAtLastError(), MLURT_SUCCESS);
}

TEST_F(ErrorTest, MessageDescribesTheLatestFailure) {
  EXPECT_FAILS_WITH(mlurtSetDevice(12345), MLURT_ERROR_INVALID_DEVICE, "device");
  EXPECT_FAILS_WITH(mlurtGetDeviceCount(nullptr), MLURT_ERROR_INVALID_VALUE, "count");
  EXPECT_THAT(lastMessage(), Not(HasSubstr("12345")));
  EXPECT_EQ(mlurtGetLastError(), MLURT_ERROR_INVALID_VALUE);
}

TEST_F(ErrorTest, LastErrorIsPerThread) {
  EXPECT_FAILS_WITH(mlurtSetDevice(-7), MLURT_ERROR_INVALID_DEVICE, "device");
  const std::string main_message = lastMessage();

  mlurtStatus_t other_initial = MLURT_ERROR_INTERNAL;
  std::string other_initial_message = "unset";
  mlurtStatus_t other_after = MLURT_SUCCESS;
  std::thread other([&] {
    other_initial = mlurtPeekAtLastError();
    other_initial_message = lastMessage();
    EXPECT_EQ(mlurtGetDeviceCount(nullptr), MLURT_ERROR_INVALID_VALUE);
    other_after = mlurtPeekAtLastError();
  });
  other.join();

  EXPECT_EQ(other_initial, MLURT_SUCCESS) << "a new thread starts without an error";
  EXPECT_EQ(other_initial_message, "");
  EXPECT_EQ(other_after, MLURT_ERROR_INVALID_VALUE);
  // The other thread's failure left this thread's error alone.
  EXPECT_EQ(mlurtPeekAtLastError(), MLURT_ERROR_INVALID_DEVICE);
  EXPECT_EQ(lastMessage(), main_message);
  EXPECT_EQ(mlurtGetLastError(), MLURT_ERROR_INVALID_DEVICE);
}

// ---- devices ----

TEST_F(DeviceTest, DefaultDeviceCountIsTwo) {
  if (!defaultEnvironment()) GTEST_SKIP() << "MLU_SIM_* set in the environment";
  int count = -1;
  ASSERT_OK(mlurtGetDeviceCount(&count));
  EXPECT_EQ(count, kDefaultDeviceCount);
}

TEST_F(DeviceTest, SetDeviceChangesTheCurrentDevice) {
  EXPECT_EQ(currentDevice(), 0);
  const int count = deviceCount();
  for (int d = count - 1; d >= 0; --d) {
    ASSERT_OK(mlurtSetDevice(d));
    EXPECT_EQ(currentDevice(), d);
  }
}

TEST_F(DeviceTest, SetDeviceRejectsMissingDevices) {
  const int count = deviceCount();
  ASSERT_GE(count, 2);
  ASSERT_OK(mlurtSetDevice(1));
  for (const int bad : {-1, count, count + 1, 1 << 30}) {
    EXPECT_FAILS_WITH(mlurtSetDevice(bad), MLURT_ERROR_INVALID_DEVICE, "device");
    EXPECT_EQ(currentDevice(), 1) << "a failed mlurtSetDevice(" << bad << ") changed the current device";
  }
}

TEST_F(DeviceTest, CurrentDeviceIsPerThread) {
  ASSERT_GE(deviceCount(), 2);
  ASSERT_OK(mlurtSetDevice(1));
  int seen_by_new_thread = -1;
  int after_set = -1;
  std::thread other([&] {
    EXPECT_OK(mlurtGetDevice(&seen_by_new_thread));
    EXPECT_OK(mlurtSetDevice(0));
    EXPECT_OK(mlurtGetDevice(&after_set));
  });
  other.join();
  EXPECT_EQ(seen_by_new_thread, 0);
  EXPECT_EQ(after_set, 0);
  EXPECT_EQ(currentDevice(), 1);
}

TEST_F(DeviceTest, NullOutPointersAreInvalidValues) {
  size_t bytes = 0;
  mlurtQueue_t queue = nullptr;
  ASSERT_OK(mlurtQueueGetDefault(0, &queue));
  EXPECT_FAILS_WITH(mlurtGetDeviceCount(nullptr), MLURT_ERROR_INVALID_VALUE, "NULL");
  EXPECT_FAILS_WITH(mlurtGetDevice(nullptr), MLURT_ERROR_INVALID_VALUE, "NULL");
  EXPECT_FAILS_WITH(mlurtGetDeviceProperties(nullptr, 0), MLURT_ERROR_INVALID_VALUE, "NULL");
  EXPECT_FAILS_WITH(mlurtMemGetInfo(nullptr, &bytes), MLURT_ERROR_INVALID_VALUE, "NULL");
  EXPECT_FAILS_WITH(mlurtMemGetInfo(&bytes, nullptr), MLURT_ERROR_INVALID_VALUE, "NULL");
  EXPECT_FAILS_WITH(mlurtDeviceGetCounters(0, nullptr), MLURT_ERROR_INVALID_VALUE, "NULL");
  EXPECT_FAILS_WITH(mlurtMalloc(nullptr, 256), MLURT_ERROR_INVALID_VALUE, "NULL");
  EXPECT_FAILS_WITH(mlurtHostMalloc(nullptr, 256), MLURT_ERROR_INVALID_VALUE, "NULL");
  EXPECT_FAILS_WITH(mlurtPointerGetAttributes(nullptr, &bytes), MLURT_ERROR_INVALID_VALUE, "NULL");
  EXPECT_FAILS_WITH(mlurtQueueCreate(nullptr), MLURT_ERROR_INVALID_VALUE, "NULL");
  EXPECT_FAILS_WITH(mlurtQueueGetDefault(0, nullptr), MLURT_ERROR_INVALID_VALUE, "NULL");
  EXPECT_FAILS_WITH(mlurtQueueGetDevice(queue, nullptr), MLURT_ERROR_INVALID_VALUE, "NULL");
  EXPECT_FAILS_WITH(mlurtQueueGetId(queue, nullptr), MLURT_ERROR_INVALID_VALUE, "NULL");
  EXPECT_FAILS_WITH(mlurtLaunchHostFunc(queue, nullptr, nullptr), MLURT_ERROR_INVALID_VALUE, "NULL");
  EXPECT_FAILS_WITH(mlurtNotifierCreate(nullptr, MLURT_NOTIFIER_DEFAULT), MLURT_ERROR_INVALID_VALUE, "NULL");
  ScopedNotifier notifier;
  EXPECT_FAILS_WITH(mlurtNotifierElapsedTime(nullptr, notifier.get(), notifier.get()),
                    MLURT_ERROR_INVALID_VALUE, "NULL");
}

TEST_F(DeviceTest, PropertiesOfEveryDevice) {
  const int count = deviceCount();
  ASSERT_GE(count, 1);
  for (int d = 0; d < count; ++d) {
    mlurtDeviceProp_t prop;
    std::memset(&prop, 0xcd, sizeof(prop));
    ASSERT_OK(mlurtGetDeviceProperties(&prop, d));
    const size_t name_length = strnlen(prop.name, sizeof(prop.name));
    EXPECT_GT(name_length, 0u) << "device " << d;
    EXPECT_LT(name_length, sizeof(prop.name)) << "device " << d << ": name not NUL-terminated";
    EXPECT_EQ(prop.device, d);
    EXPECT_GE(prop.coreCount, 1);
    EXPECT_EQ(prop.memAlignment, kAlignment);
    EXPECT_GT(prop.totalMem, 0u);
    EXPECT_LT(prop.addressBase, prop.addressLimit);
    EXPECT_NE(prop.addressBase, 0u);
    EXPECT_GE(prop.addressLimit - prop.addressBase, prop.totalMem) << "device " << d;
    EXPECT_EQ(prop.addressBase % kAlignment, 0u);
  }
}

TEST_F(DeviceTest, PropertiesFollowTheDefaultConfiguration) {
  if (!defaultEnvironment()) GTEST_SKIP() << "MLU_SIM_* set in the environment";
  const unsigned hw = std::thread::hardware_concurrency();
  for (int d = 0; d < deviceCount(); ++d) {
    const mlurtDeviceProp_t prop = properties(d);
    EXPECT_EQ(prop.totalMem, kDefaultMemoryBytes) << "device " << d;
    EXPECT_EQ(prop.coreCount, hw == 0 ? 1 : static_cast<int>(hw)) << "device " << d;
  }
}

TEST_F(DeviceTest, DeviceNamesDiffer) {
  ASSERT_GE(deviceCount(), 2);
  EXPECT_STRNE(properties(0).name, properties(1).name);
}

TEST_F(DeviceTest, PropertiesOfAMissingDevice) {
  mlurtDeviceProp_t prop{};
  EXPECT_FAILS_WITH(mlurtGetDeviceProperties(&prop, -1), MLURT_ERROR_INVALID_DEVICE, "device");
  EXPECT_FAILS_WITH(mlurtGetDeviceProperties(&prop, deviceCount()), MLURT_ERROR_INVALID_DEVICE, "device");
}

TEST_F(DeviceTest, AddressRangesAreDisjointAndAwayFromHostMemory) {
  const int count = deviceCount();
  std::vector<mlurtDeviceProp_t> props;
  for (int d = 0; d < count; ++d) props.push_back(properties(d));
  for (int a = 0; a < count; ++a) {
    for (int b = a + 1; b < count; ++b) {
      const bool disjoint =
          props[a].addressLimit <= props[b].addressBase || props[b].addressLimit <= props[a].addressBase;
      EXPECT_TRUE(disjoint) << "devices " << a << " and " << b << " overlap";
    }
  }
  std::vector<char> heap(1 << 20);
  const auto small_heap = std::make_unique<int>(5);
  char stack[64] = {};
  for (const void* host : {static_cast<const void*>(heap.data()), static_cast<const void*>(small_heap.get()),
                           static_cast<const void*>(stack)}) {
    const auto p = reinterpret_cast<uintptr_t>(host);
    for (int d = 0; d < count; ++d) {
      EXPECT_FALSE(p >= props[d].addressBase && p < props[d].addressLimit)
          << "host pointer " << host << " lies in device " << d << "'s range";
    }
  }
}

TEST_F(DeviceTest, MemGetInfoReportsTheCurrentDevice) {
  ASSERT_GE(deviceCount(), 2);
  size_t free0 = 0;
  size_t total0 = 0;
  ASSERT_OK(mlurtMemGetInfo(&free0, &total0));
  EXPECT_EQ(total0, properties(0).totalMem);
  EXPECT_LE(free0, total0);
  const size_t free1_before = freeBytes(1);

  // 1 MiB + 1 byte takes 1 MiB + 256 bytes of device 0, and nothing of device 1.
  void* p = nullptr;
  ASSERT_OK(mlurtMalloc(&p, kMiB + 1));
  size_t free_now = 0;
  size_t total_now = 0;
  ASSERT_OK(mlurtMemGetInfo(&free_now, &total_now));
  EXPECT_EQ(total_now, total0);
  EXPECT_EQ(free0 - free_now, kMiB + kAlignment);
  EXPECT_EQ(freeBytes(1), free1_before);

  ASSERT_OK(mlurtSetDevice(1));
  size_t free1 = 0;
  size_t total1 = 0;
  ASSERT_OK(mlurtMemGetInfo(&free1, &total1));
  EXPECT_EQ(total1, properties(1).totalMem);
  EXPECT_EQ(free1, free1_before);

  ASSERT_OK(mlurtFree(p));
  EXPECT_EQ(freeBytes(0), free0);
}

TEST_F(DeviceTest, CountersTrackAllocations) {
  const mlurtDeviceCounters_t before = counters(0);
  const mlurtDeviceCounters_t other_before = counters(deviceCount() - 1);
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_OK(mlurtMalloc(&a, 1000));  // 1024 after rounding
  ASSERT_OK(mlurtMalloc(&b, 256));   // 256
  const mlurtDeviceCounters_t during = counters(0);
  EXPECT_EQ(during.bytesInUse - before.bytesInUse, 1024u + 256u);
  EXPECT_EQ(during.liveAllocations - before.liveAllocations, 2u);
  EXPECT_EQ(during.totalAllocations - before.totalAllocations, 2u);
  EXPECT_GE(during.peakBytesInUse, during.bytesInUse);
  EXPECT_GE(during.peakBytesInUse, before.peakBytesInUse);

  ASSERT_OK(mlurtFree(a));
  const mlurtDeviceCounters_t half = counters(0);
  EXPECT_EQ(half.bytesInUse - before.bytesInUse, 256u);
  EXPECT_EQ(half.liveAllocations - before.liveAllocations, 1u);
  EXPECT_EQ(half.peakBytesInUse, during.peakBytesInUse) << "the peak never goes down";

  ASSERT_OK(mlurtFree(b));
  const mlurtDeviceCounters_t after = counters(0);
  EXPECT_EQ(after.bytesInUse, before.bytesInUse);
  EXPECT_EQ(after.liveAllocations, before.liveAllocations);
  EXPECT_EQ(after.totalAllocations - before.totalAllocations, 2u);
  EXPECT_GE(after.peakBytesInUse, before.bytesInUse + 1024u + 256u);

  if (deviceCount() > 1) {
    const mlurtDeviceCounters_t other_after = counters(deviceCount() - 1);
    EXPECT_EQ(other_after.bytesInUse, other_before.bytesInUse);
    EXPECT_EQ(other_after.totalAllocations, other_before.totalAllocations);
  }
}

TEST_F(DeviceTest, CountersOfAMissingDevice) {
  mlurtDeviceCounters_t c{};
  EXPECT_FAILS_WITH(mlurtDeviceGetCounters(-1, &c), MLURT_ERROR_INVALID_DEVICE, "device");
  EXPECT_FAILS_WITH(mlurtDeviceGetCounters(deviceCount(), &c), MLURT_ERROR_INVALID_DEVICE, "device");
}

TEST_F(DeviceTest, TasksRunCountsFinishedTasksOfTheDevice) {
  ASSERT_GE(deviceCount(), 2);
  const uint64_t before0 = counters(0).tasksRun;
  const uint64_t before1 = counters(1).tasksRun;
  {
    DeviceScope scope(1);
    ScopedQueue queue;
    std::atomic<int> ran{0};
    for (int i = 0; i < 5; ++i) ASSERT_OK(launchHost(queue.get(), [&] { ++ran; }));
    ASSERT_OK(launchKernel(queue.get(), "count_me", [] { return MLURT_SUCCESS; }));
    ASSERT_OK(mlurtQueueSync(queue.get()));
    EXPECT_EQ(ran.load(), 5);
    EXPECT_EQ(counters(1).tasksRun - before1, 6u);
  }
  EXPECT_EQ(counters(0).tasksRun, before0) << "device 1's tasks were counted for device 0";
}

TEST_F(DeviceTest, DeviceSynchronizeWaitsForEveryQueueOfTheDevice) {
  ScopedQueue a;
  ScopedQueue b;
  std::atomic<bool> a_done{false};
  std::atomic<bool> b_done{false};
  std::atomic<bool> default_done{false};
  ASSERT_OK(launchHost(a.get(), [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    a_done = true;
  }));
  ASSERT_OK(launchHost(b.get(), [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    b_done = true;
  }));
  ASSERT_OK(launchHost(nullptr, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
    default_done = true;
  }));
  ASSERT_OK(mlurtDeviceSynchronize());
  EXPECT_TRUE(a_done.load());
  EXPECT_TRUE(b_done.load());
  EXPECT_TRUE(default_done.load());
}

TEST_F(DeviceTest, DeviceSynchronizeOnlyWaitsForTheCurrentDevice) {
  ASSERT_GE(deviceCount(), 2);
  Gate gate;
  ScopedQueue queue0;
  std::unique_ptr<ScopedQueue> queue1;
  {
    DeviceScope scope(1);
    queue1 = std::make_unique<ScopedQueue>();
  }
  OpenAtExit opener(gate);
  ASSERT_OK(mlurtLaunchHostFunc(queue1->get(), Gate::hostFn, &gate));
  ASSERT_OK(launchSleep(queue0.get(), std::chrono::milliseconds(10)));
  ASSERT_OK(mlurtDeviceSynchronize());  // device 0: must not wait for the gate on device 1
  EXPECT_EQ(mlurtQueueQuery(queue1->get()), MLURT_ERROR_NOT_READY);
  EXPECT_FALSE(gate.isOpen());
  gate.open();
  EXPECT_OK(mlurtQueueSync(queue1->get()));
  queue1.reset();
}

TEST_F(DeviceTest, DeviceSynchronizeReturnsAStickyErrorOnce) {
  ScopedQueue good;
  ScopedQueue bad;
  ASSERT_OK(launchKernel(good.get(), "fine_kernel", [] { return MLURT_SUCCESS; }));
  ASSERT_OK(launchKernel(bad.get(), "broken_kernel", [] {
    mlurtKernelSetErrorMessage("wrong tile size");
    return MLURT_ERROR_LAUNCH_FAILED;
  }));
  EXPECT_FAILS_WITH(mlurtDeviceSynchronize(), MLURT_ERROR_LAUNCH_FAILED, "broken_kernel");
  EXPECT_THAT(lastMessage(), HasSubstr("wrong tile size"));
  // Reported once: neither the device nor the queue reports it again.
  EXPECT_OK(mlurtDeviceSynchronize());
  EXPECT_OK(mlurtQueueSync(bad.get()));
  EXPECT_OK(mlurtQueueSync(good.get()));
}

}  // namespace
}  // namespace mlurt_test
