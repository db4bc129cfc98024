// Copies and memsets: directions, bounds, cross-device copies, asynchronous forms and their ordering.
#include "test_util.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

namespace mlurt_test {
namespace {

using ::testing::AnyOf;
using ::testing::Each;
using ::testing::HasSubstr;

using MemcpyTest = RuntimeTest;
using MemsetTest = RuntimeTest;

std::vector<unsigned char> pattern(size_t size, unsigned seed) {
  std::vector<unsigned char> data(size);
  for (size_t i = 0; i < size; ++i) data[i] = static_cast<unsigned char>((i * 31 + seed) ^ (i >> 8));
  return data;
}

std::vector<unsigned char> readDevice(const void* device, size_t size) {
  std::vector<unsigned char> out(size);
  EXPECT_OK(mlurtMemcpy(out.data(), device, size, MLURT_MEMCPY_DEVICE_TO_HOST));
  return out;
}

const char* kindName(mlurtMemcpyKind_t kind) {
  switch (kind) {
    case MLURT_MEMCPY_HOST_TO_DEVICE:
      return "H2D";
    case MLURT_MEMCPY_DEVICE_TO_HOST:
      return "D2H";
    case MLURT_MEMCPY_DEVICE_TO_DEVICE:
      return "D2D";
    case MLURT_MEMCPY_HOST_TO_HOST:
      return "H2H";
  }
  return "?";
}

// ---- synchronous copies ----

TEST_F(MemcpyTest, RoundTripThroughDeviceMemoryPreservesData) {
  constexpr size_t kSize = kMiB + 123;
  const std::vector<unsigned char> input = pattern(kSize, 7);
  DeviceBuffer a(kSize);
  DeviceBuffer b(kSize);
  ASSERT_OK(mlurtMemcpy(a.get(), input.data(), kSize, MLURT_MEMCPY_HOST_TO_DEVICE));
  EXPECT_EQ(std::memcmp(a.get(), input.data(), kSize), 0) << "H2D did not land in device memory";
  ASSERT_OK(mlurtMemcpy(b.get(), a.get(), kSize, MLURT_MEMCPY_DEVICE_TO_DEVICE));
  std::vector<unsigned char> output(kSize, 0);
  ASSERT_OK(mlurtMemcpy(output.data(), b.get(), kSize, MLURT_MEMCPY_DEVICE_TO_HOST));
  EXPECT_TRUE(output == input);
}

TEST_F(MemcpyTest, DeviceToDeviceBetweenTwoDevices) {
  ASSERT_GE(deviceCount(), 2);
  constexpr size_t kSize = 256 * 1024 + 5;
  const std::vector<unsigned char> input = pattern(kSize, 3);
  DeviceBuffer on0(kSize);
  std::unique_ptr<DeviceBuffer> on1;
  {
    DeviceScope scope(1);
    on1 = std::make_unique<DeviceBuffer>(kSize);
  }
  ASSERT_EQ(attributes(on1->get()).device, 1);
  ASSERT_OK(mlurtMemcpy(on0.get(), input.data(), kSize, MLURT_MEMCPY_HOST_TO_DEVICE));
  ASSERT_OK(mlurtMemcpy(on1->get(), on0.get(), kSize, MLURT_MEMCPY_DEVICE_TO_DEVICE));
  EXPECT_TRUE(readDevice(on1->get(), kSize) == input);

  // And back, from device 1 to device 0, with device 1 current.
  ASSERT_OK(mlurtMemset(on0.get(), 0, kSize));
  ASSERT_OK(mlurtSetDevice(1));
  ASSERT_OK(mlurtMemcpy(on0.get(), on1->get(), kSize, MLURT_MEMCPY_DEVICE_TO_DEVICE));
  EXPECT_TRUE(readDevice(on0.get(), kSize) == input);
  ASSERT_OK(mlurtSetDevice(0));
  on1.reset();
}

TEST_F(MemcpyTest, CopiesToAnotherDeviceThanTheCurrentOne) {
  ASSERT_GE(deviceCount(), 2);
  std::unique_ptr<DeviceBuffer> on1;
  {
    DeviceScope scope(1);
    on1 = std::make_unique<DeviceBuffer>(4096);
  }
  const std::vector<unsigned char> input = pattern(4096, 11);
  ASSERT_OK(mlurtMemcpy(on1->get(), input.data(), input.size(), MLURT_MEMCPY_HOST_TO_DEVICE));
  EXPECT_TRUE(readDevice(on1->get(), input.size()) == input);
  on1.reset();
}

TEST_F(MemcpyTest, PinnedMemoryCountsAsHostMemory) {
  constexpr size_t kSize = 100000;
  PinnedBuffer pinned_in(kSize);
  PinnedBuffer pinned_out(kSize);
  const std::vector<unsigned char> input = pattern(kSize, 5);
  std::memcpy(pinned_in.get(), input.data(), kSize);
  DeviceBuffer device(kSize);
  ASSERT_OK(mlurtMemcpy(device.get(), pinned_in.get(), kSize, MLURT_MEMCPY_HOST_TO_DEVICE));
  ASSERT_OK(mlurtMemcpy(pinned_out.get(), device.get(), kSize, MLURT_MEMCPY_DEVICE_TO_HOST));
  EXPECT_EQ(std::memcmp(pinned_out.get(), input.data(), kSize), 0);
  // Host to host, pinned and pageable mixed.
  std::vector<unsigned char> pageable(kSize, 0);
  ASSERT_OK(mlurtMemcpy(pageable.data(), pinned_out.get(), kSize, MLURT_MEMCPY_HOST_TO_HOST));
  EXPECT_TRUE(pageable == input);
}

TEST_F(MemcpyTest, HostToHost) {
  const std::vector<unsigned char> input = pattern(1000, 9);
  std::vector<unsigned char> output(1000, 0);
  ASSERT_OK(mlurtMemcpy(output.data(), input.data(), input.size(), MLURT_MEMCPY_HOST_TO_HOST));
  EXPECT_TRUE(output == input);
}

TEST_F(MemcpyTest, CopiesFromAndIntoTheMiddleOfAnAllocation) {
  DeviceBuffer device(1024);
  ASSERT_OK(mlurtMemset(device.get(), 0, 1024));
  const std::vector<unsigned char> input = pattern(100, 1);
  ASSERT_OK(mlurtMemcpy(device.bytes() + 300, input.data(), 100, MLURT_MEMCPY_HOST_TO_DEVICE));
  // Up to the very last byte of the allocation is fine.
  ASSERT_OK(mlurtMemcpy(device.bytes() + 924, input.data(), 100, MLURT_MEMCPY_HOST_TO_DEVICE));
  std::vector<unsigned char> back(100, 0);
  ASSERT_OK(mlurtMemcpy(back.data(), device.bytes() + 300, 100, MLURT_MEMCPY_DEVICE_TO_HOST));
  EXPECT_TRUE(back == input);
  const std::vector<unsigned char> all = readDevice(device.get(), 1024);
  EXPECT_EQ(all[299], 0);
  EXPECT_EQ(all[400], 0);
  EXPECT_EQ(all[1023], input[99]);
}

struct DirectionCase {
  const char* what;
  void* dst;
  const void* src;
  mlurtMemcpyKind_t kind;
};

TEST_F(MemcpyTest, WrongDirectionIsRejected) {
  DeviceBuffer device(4096);
  DeviceBuffer device2(4096);
  PinnedBuffer pinned(4096);
  std::vector<unsigned char> host(4096, 0x11);
  std::vector<unsigned char> host2(4096, 0x22);
  ASSERT_OK(mlurtMemset(device.get(), 0x33, 4096));
  ASSERT_OK(mlurtMemset(device2.get(), 0x44, 4096));
  const std::vector<DirectionCase> cases = {
      {"H2D from device memory", device.get(), device2.get(), MLURT_MEMCPY_HOST_TO_DEVICE},
      {"H2D into host memory", host.data(), host2.data(), MLURT_MEMCPY_HOST_TO_DEVICE},
      {"H2D into pinned memory", pinned.get(), host2.data(), MLURT_MEMCPY_HOST_TO_DEVICE},
      {"H2D backwards", host.data(), device.get(), MLURT_MEMCPY_HOST_TO_DEVICE},
      {"D2H from host memory", host.data(), host2.data(), MLURT_MEMCPY_DEVICE_TO_HOST},
      {"D2H from pinned memory", host.data(), pinned.get(), MLURT_MEMCPY_DEVICE_TO_HOST},
      {"D2H into device memory", device.get(), device2.get(), MLURT_MEMCPY_DEVICE_TO_HOST},
      {"D2H backwards", device.get(), host.data(), MLURT_MEMCPY_DEVICE_TO_HOST},
      {"D2D from host memory", device.get(), host.data(), MLURT_MEMCPY_DEVICE_TO_DEVICE},
      {"D2D into host memory", host.data(), device.get(), MLURT_MEMCPY_DEVICE_TO_DEVICE},
      {"D2D into pinned memory", pinned.get(), device.get(), MLURT_MEMCPY_DEVICE_TO_DEVICE},
      {"H2H into device memory", device.get(), host.data(), MLURT_MEMCPY_HOST_TO_HOST},
      {"H2H from device memory", host.data(), device.get(), MLURT_MEMCPY_HOST_TO_HOST},
  };
  for (const DirectionCase& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(mlurtMemcpy(c.dst, c.src, 16, c.kind), MLURT_ERROR_INVALID_MEMCPY_DIRECTION);
    EXPECT_EQ(mlurtPeekAtLastError(), MLURT_ERROR_INVALID_MEMCPY_DIRECTION);
    EXPECT_THAT(lastMessage(), AnyOf(HasSubstrNoCase("direction"), HasSubstr(kindName(c.kind))));
  }
  // Nothing was copied by the refused calls.
  EXPECT_THAT(host, Each(0x11));
  EXPECT_THAT(readDevice(device.get(), 4096), Each(0x33));
  EXPECT_THAT(readDevice(device2.get(), 4096), Each(0x44));
}

TEST_F(MemcpyTest, CopyPastTheEndOfAnAllocationIsRejected) {
  DeviceBuffer device(1000);
  DeviceBuffer small(100);
  ASSERT_OK(mlurtMemset(device.get(), 0x21, 1000));
  ASSERT_OK(mlurtMemset(small.get(), 0x43, 100));
  std::vector<unsigned char> host(4096, 0x65);
  // The rounding of the allocation to 256 bytes is not extra room: 1000 bytes asked, 1000 usable.
  EXPECT_FAILS_WITH(mlurtMemcpy(device.get(), host.data(), 1001, MLURT_MEMCPY_HOST_TO_DEVICE),
                    MLURT_ERROR_INVALID_VALUE, "bytes");
  EXPECT_FAILS_WITH(mlurtMemcpy(device.bytes() + 900, host.data(), 101, MLURT_MEMCPY_HOST_TO_DEVICE),
                    MLURT_ERROR_INVALID_VALUE, "bytes");
  EXPECT_FAILS_WITH(mlurtMemcpy(host.data(), device.bytes() + 900, 200, MLURT_MEMCPY_DEVICE_TO_HOST),
                    MLURT_ERROR_INVALID_VALUE, "bytes");
  EXPECT_FAILS_WITH(mlurtMemcpy(small.get(), device.get(), 200, MLURT_MEMCPY_DEVICE_TO_DEVICE),
                    MLURT_ERROR_INVALID_VALUE, "bytes");
  EXPECT_FAILS_WITH(mlurtMemcpy(device.get(), small.get(), 200, MLURT_MEMCPY_DEVICE_TO_DEVICE),
                    MLURT_ERROR_INVALID_VALUE, "bytes");
  EXPECT_FAILS_WITH(mlurtMemcpy(device.get(), host.data(), 4096, MLURT_MEMCPY_HOST_TO_DEVICE),
                    MLURT_ERROR_INVALID_VALUE, "bytes");
  // Nothing was written by the refused copies.
  EXPECT_THAT(readDevice(device.get(), 1000), Each(0x21));
  EXPECT_THAT(readDevice(small.get(), 100), Each(0x43));
  EXPECT_THAT(host, Each(0x65));
  // Exactly up to the end is fine.
  EXPECT_OK(mlurtMemcpy(device.get(), host.data(), 1000, MLURT_MEMCPY_HOST_TO_DEVICE));
}

TEST_F(MemcpyTest, CopyWithAFreedDevicePointerIsRejected) {
  void* p = nullptr;
  ASSERT_OK(mlurtMalloc(&p, 4096));
  ASSERT_OK(mlurtFree(p));
  std::vector<unsigned char> host(4096, 1);
  EXPECT_THAT(mlurtMemcpy(p, host.data(), 64, MLURT_MEMCPY_HOST_TO_DEVICE),
              AnyOf(MLURT_ERROR_INVALID_POINTER, MLURT_ERROR_INVALID_VALUE));
  EXPECT_THAT(mlurtMemcpy(host.data(), p, 64, MLURT_MEMCPY_DEVICE_TO_HOST),
              AnyOf(MLURT_ERROR_INVALID_POINTER, MLURT_ERROR_INVALID_VALUE));
}

TEST_F(MemcpyTest, ZeroBytesIsANoOp) {
  DeviceBuffer device(256);
  ASSERT_OK(mlurtMemset(device.get(), 0x7e, 256));
  std::vector<unsigned char> host(256, 0x01);
  EXPECT_OK(mlurtMemcpy(device.get(), host.data(), 0, MLURT_MEMCPY_HOST_TO_DEVICE));
  EXPECT_OK(mlurtMemcpy(host.data(), device.get(), 0, MLURT_MEMCPY_DEVICE_TO_HOST));
  EXPECT_OK(mlurtMemcpyAsync(device.get(), host.data(), 0, nullptr, MLURT_MEMCPY_HOST_TO_DEVICE));
  EXPECT_OK(mlurtMemset(device.get(), 0, 0));
  EXPECT_OK(mlurtMemsetAsync(device.get(), 0, 0, nullptr));
  EXPECT_OK(mlurtQueueSync(nullptr));
  EXPECT_THAT(host, Each(0x01));
  EXPECT_THAT(readDevice(device.get(), 256), Each(0x7e));
}

TEST_F(MemcpyTest, NullPointersAreInvalidValues) {
  DeviceBuffer device(256);
  std::vector<unsigned char> host(256);
  EXPECT_FAILS_WITH(mlurtMemcpy(nullptr, host.data(), 16, MLURT_MEMCPY_HOST_TO_DEVICE),
                    MLURT_ERROR_INVALID_VALUE, "null");
  EXPECT_FAILS_WITH(mlurtMemcpy(device.get(), nullptr, 16, MLURT_MEMCPY_HOST_TO_DEVICE),
                    MLURT_ERROR_INVALID_VALUE, "null");
  EXPECT_FAILS_WITH(mlurtMemcpy(host.data(), nullptr, 16, MLURT_MEMCPY_HOST_TO_HOST),
                    MLURT_ERROR_INVALID_VALUE, "null");
  EXPECT_FAILS_WITH(mlurtMemcpyAsync(nullptr, device.get(), 16, nullptr, MLURT_MEMCPY_DEVICE_TO_HOST),
                    MLURT_ERROR_INVALID_VALUE, "null");
  EXPECT_FAILS_WITH(mlurtMemset(nullptr, 0, 16), MLURT_ERROR_INVALID_VALUE, "null");
  EXPECT_FAILS_WITH(mlurtMemsetAsync(nullptr, 0, 16, nullptr), MLURT_ERROR_INVALID_VALUE, "null");
}

TEST_F(MemcpyTest, InvalidKindIsAnInvalidValue) {
  DeviceBuffer device(256);
  std::vector<unsigned char> host(256);
  // A C caller may pass any int as the kind: the runtime must reject it without undefined behaviour. (The
  // out-of-range value is only ever a prvalue here, never stored in an enum-typed variable.)
  for (const int raw : {42, -1, 4}) {
    EXPECT_EQ(mlurtMemcpy(device.get(), host.data(), 16, static_cast<mlurtMemcpyKind_t>(raw)),
              MLURT_ERROR_INVALID_VALUE)
        << raw;
    EXPECT_EQ(mlurtPeekAtLastError(), MLURT_ERROR_INVALID_VALUE);
    EXPECT_THAT(lastMessage(),
                AnyOf(HasSubstr(std::to_string(raw)), HasSubstrNoCase("kind"), HasSubstrNoCase("direction")));
    EXPECT_EQ(mlurtMemcpyAsync(device.get(), host.data(), 16, nullptr, static_cast<mlurtMemcpyKind_t>(raw)),
              MLURT_ERROR_INVALID_VALUE)
        << raw;
  }
  EXPECT_OK(mlurtQueueSync(nullptr));
}

TEST_F(MemcpyTest, SynchronousCopyIsOrderedAfterTheDefaultQueue) {
  DeviceBuffer device(64);
  ASSERT_OK(mlurtMemset(device.get(), 0, 64));
  // Work on the default queue writes device memory later; the synchronous copy must wait for it.
  unsigned char* bytes = device.bytes();
  ASSERT_OK(launchHost(nullptr, [bytes] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::memset(bytes, 0x9d, 64);
  }));
  std::vector<unsigned char> host(64, 0);
  ASSERT_OK(mlurtMemcpy(host.data(), device.get(), 64, MLURT_MEMCPY_DEVICE_TO_HOST));
  EXPECT_THAT(host, Each(0x9d));
}

// ---- asynchronous copies ----

TEST_F(MemcpyTest, AsyncCopyRunsInQueueOrderAfterSync) {
  constexpr size_t kSize = 64 * 1024;
  const std::vector<unsigned char> input = pattern(kSize, 13);
  DeviceBuffer device(kSize);
  ASSERT_OK(mlurtMemset(device.get(), 0, kSize));
  Gate gate;
  ScopedQueue queue;
  OpenAtExit opener(gate);
  ASSERT_OK(mlurtLaunchHostFunc(queue.get(), Gate::hostFn, &gate));
  ASSERT_OK(mlurtMemcpyAsync(device.get(), input.data(), kSize, queue.get(), MLURT_MEMCPY_HOST_TO_DEVICE));
  std::vector<unsigned char> output(kSize, 0);
  ASSERT_OK(mlurtMemcpyAsync(output.data(), device.get(), kSize, queue.get(), MLURT_MEMCPY_DEVICE_TO_HOST));
  // The queue is held by the gate: neither copy may have run yet.
  EXPECT_EQ(mlurtQueueQuery(queue.get()), MLURT_ERROR_NOT_READY);
  EXPECT_THAT(std::vector<unsigned char>(device.bytes(), device.bytes() + kSize), Each(0));
  gate.open();
  ASSERT_OK(mlurtQueueSync(queue.get()));
  EXPECT_TRUE(output == input);
}

TEST_F(MemcpyTest, AsyncCopyOnTheNullQueueUsesTheDefaultQueueOfTheCurrentDevice) {
  ASSERT_GE(deviceCount(), 2);
  ASSERT_OK(mlurtSetDevice(1));
  DeviceBuffer device(4096);
  const std::vector<unsigned char> input = pattern(4096, 17);
  Gate gate;
  mlurtQueue_t default1 = nullptr;
  ASSERT_OK(mlurtQueueGetDefault(1, &default1));
  OpenAtExit opener(gate, default1, /*drain=*/true);
  ASSERT_OK(mlurtLaunchHostFunc(default1, Gate::hostFn, &gate));
  ASSERT_OK(mlurtMemcpyAsync(device.get(), input.data(), input.size(), nullptr, MLURT_MEMCPY_HOST_TO_DEVICE));
  // Held behind the gate on device 1's default queue.
  EXPECT_EQ(mlurtQueueQuery(nullptr), MLURT_ERROR_NOT_READY);
  EXPECT_EQ(mlurtQueueQuery(default1), MLURT_ERROR_NOT_READY);
  gate.open();
  ASSERT_OK(mlurtQueueSync(nullptr));
  EXPECT_EQ(std::memcmp(device.get(), input.data(), input.size()), 0);
  EXPECT_OK(mlurtQueueQuery(default1));
}

TEST_F(MemcpyTest, AsyncCopyChecksItsArgumentsAtOnce) {
  ScopedQueue queue;
  DeviceBuffer device(512);
  std::vector<unsigned char> host(1024, 0);
  EXPECT_EQ(mlurtMemcpyAsync(host.data(), host.data() + 512, 16, queue.get(), MLURT_MEMCPY_HOST_TO_DEVICE),
            MLURT_ERROR_INVALID_MEMCPY_DIRECTION);
  EXPECT_EQ(mlurtPeekAtLastError(), MLURT_ERROR_INVALID_MEMCPY_DIRECTION);
  EXPECT_FAILS_WITH(
      mlurtMemcpyAsync(device.get(), host.data(), 513, queue.get(), MLURT_MEMCPY_HOST_TO_DEVICE),
      MLURT_ERROR_INVALID_VALUE, "bytes");
  // Rejected copies leave no sticky error behind.
  EXPECT_OK(mlurtQueueSync(queue.get()));
}

TEST_F(MemcpyTest, AsyncCopiesOnDifferentQueuesAndDevices) {
  ASSERT_GE(deviceCount(), 2);
  constexpr size_t kSize = 32 * 1024;
  const std::vector<unsigned char> input = pattern(kSize, 23);
  DeviceBuffer on0(kSize);
  ScopedQueue queue0;
  std::unique_ptr<DeviceBuffer> on1;
  std::unique_ptr<ScopedQueue> queue1;
  {
    DeviceScope scope(1);
    on1 = std::make_unique<DeviceBuffer>(kSize);
    queue1 = std::make_unique<ScopedQueue>();
  }
  ASSERT_OK(mlurtMemcpyAsync(on0.get(), input.data(), kSize, queue0.get(), MLURT_MEMCPY_HOST_TO_DEVICE));
  ASSERT_OK(mlurtQueueSync(queue0.get()));
  ASSERT_OK(mlurtMemcpyAsync(on1->get(), on0.get(), kSize, queue1->get(), MLURT_MEMCPY_DEVICE_TO_DEVICE));
  std::vector<unsigned char> output(kSize, 0);
  ASSERT_OK(mlurtMemcpyAsync(output.data(), on1->get(), kSize, queue1->get(), MLURT_MEMCPY_DEVICE_TO_HOST));
  ASSERT_OK(mlurtQueueSync(queue1->get()));
  EXPECT_TRUE(output == input);
  queue1.reset();
  on1.reset();
}

// ---- memset ----

TEST_F(MemsetTest, SetsExactlyTheBytesAsked) {
  DeviceBuffer device(1024);
  ASSERT_OK(mlurtMemset(device.get(), 0x00, 1024));
  ASSERT_OK(mlurtMemset(device.bytes() + 10, 0xa5, 20));
  const std::vector<unsigned char> all = readDevice(device.get(), 1024);
  for (size_t i = 0; i < all.size(); ++i) {
    const unsigned char want = (i >= 10 && i < 30) ? 0xa5 : 0x00;
    ASSERT_EQ(all[i], want) << "byte " << i;
  }
  ASSERT_OK(mlurtMemset(device.get(), 0xff, 1024));
  EXPECT_THAT(readDevice(device.get(), 1024), Each(0xff));
}

TEST_F(MemsetTest, HostOrPinnedMemoryIsAnInvalidPointer) {
  std::vector<unsigned char> host(64, 1);
  int stack_value = 0;
  PinnedBuffer pinned(64);
  std::memset(pinned.get(), 1, 64);
  EXPECT_EQ(mlurtMemset(host.data(), 0, 64), MLURT_ERROR_INVALID_POINTER);
  EXPECT_EQ(mlurtPeekAtLastError(), MLURT_ERROR_INVALID_POINTER);
  EXPECT_THAT(lastMessage(), HasSubstrNoCase("device"));
  EXPECT_EQ(mlurtMemset(&stack_value, 0, sizeof(stack_value)), MLURT_ERROR_INVALID_POINTER);
  EXPECT_EQ(mlurtMemset(pinned.get(), 0, 64), MLURT_ERROR_INVALID_POINTER);
  EXPECT_EQ(mlurtMemsetAsync(host.data(), 0, 64, nullptr), MLURT_ERROR_INVALID_POINTER);
  EXPECT_OK(mlurtQueueSync(nullptr));
  EXPECT_THAT(host, Each(1));
  EXPECT_EQ(stack_value, 0);
  EXPECT_EQ(pinned.bytes()[0], 1);
}

TEST_F(MemsetTest, PastTheEndIsAnInvalidValue) {
  DeviceBuffer device(300);
  ASSERT_OK(mlurtMemset(device.get(), 0x12, 300));
  EXPECT_FAILS_WITH(mlurtMemset(device.get(), 0, 301), MLURT_ERROR_INVALID_VALUE, "bytes");
  EXPECT_FAILS_WITH(mlurtMemset(device.bytes() + 200, 0, 101), MLURT_ERROR_INVALID_VALUE, "bytes");
  EXPECT_FAILS_WITH(mlurtMemsetAsync(device.get(), 0, 512, nullptr), MLURT_ERROR_INVALID_VALUE, "bytes");
  EXPECT_OK(mlurtQueueSync(nullptr));
  EXPECT_THAT(readDevice(device.get(), 300), Each(0x12));
}

TEST_F(MemsetTest, AsyncMemsetThenAsyncCopyBackSeesTheValue) {
  constexpr size_t kSize = 8192;
  DeviceBuffer device(kSize);
  ScopedQueue queue;
  std::vector<unsigned char> host(kSize, 0);
  for (const int value : {0x5c, 0x00, 0xe1}) {
    ASSERT_OK(mlurtMemsetAsync(device.get(), value, kSize, queue.get()));
    ASSERT_OK(mlurtMemcpyAsync(host.data(), device.get(), kSize, queue.get(), MLURT_MEMCPY_DEVICE_TO_HOST));
    ASSERT_OK(mlurtQueueSync(queue.get()));
    EXPECT_THAT(host, Each(static_cast<unsigned char>(value))) << value;
  }
}

TEST_F(MemsetTest, AsyncMemsetWaitsForEarlierWorkOnItsQueue) {
  DeviceBuffer device(256);
  ASSERT_OK(mlurtMemset(device.get(), 0x01, 256));
  Gate gate;
  ScopedQueue queue;
  OpenAtExit opener(gate);
  ASSERT_OK(mlurtLaunchHostFunc(queue.get(), Gate::hostFn, &gate));
  ASSERT_OK(mlurtMemsetAsync(device.get(), 0x02, 256, queue.get()));
  EXPECT_EQ(device.bytes()[0], 0x01) << "the memset ran before the task ahead of it";
  gate.open();
  ASSERT_OK(mlurtQueueSync(queue.get()));
  EXPECT_THAT(readDevice(device.get(), 256), Each(0x02));
}

}  // namespace
}  // namespace mlurt_test
