// Device and pinned memory: allocation, alignment, capacity and out-of-memory, bad frees, pointer
// attributes.
#include "test_util.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

namespace mlurt_test {
namespace {

using MemoryTest = RuntimeTest;
using PinnedMemoryTest = RuntimeTest;
using PointerAttributesTest = RuntimeTest;

bool inRange(const void* p, const mlurtDeviceProp_t& prop) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  return address >= prop.addressBase && address < prop.addressLimit;
}

// ---- device memory ----

TEST_F(MemoryTest, MallocGivesAlignedWritableMemoryOfTheCurrentDevice) {
  const mlurtDeviceProp_t prop = properties(0);
  const mlurtDeviceCounters_t before = counters(0);
  for (const size_t size : {size_t{1}, size_t{255}, size_t{256}, size_t{257}, size_t{4096}, kMiB + 3}) {
    void* p = nullptr;
    ASSERT_OK(mlurtMalloc(&p, size));
    ASSERT_NE(p, nullptr) << size;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kAlignment, 0u) << size;
    EXPECT_TRUE(inRange(p, prop)) << size;
    EXPECT_LE(reinterpret_cast<uintptr_t>(p) + size, prop.addressLimit) << size;
    // Device memory is host-addressable: every byte can be written and read back.
    auto* bytes = static_cast<unsigned char*>(p);
    for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<unsigned char>(i * 7 + 1);
    bool same = true;
    for (size_t i = 0; i < size; ++i) same = same && bytes[i] == static_cast<unsigned char>(i * 7 + 1);
    EXPECT_TRUE(same) << size;
    EXPECT_EQ(counters(0).bytesInUse - before.bytesInUse, roundUp(size)) << size;
    ASSERT_OK(mlurtFree(p));
  }
  EXPECT_EQ(counters(0).bytesInUse, before.bytesInUse);
}

TEST_F(MemoryTest, MallocOfZeroBytesGivesNull) {
  const mlurtDeviceCounters_t before = counters(0);
  int dummy = 0;
  void* p = &dummy;
  ASSERT_OK(mlurtMalloc(&p, 0));
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(counters(0).totalAllocations, before.totalAllocations);
  EXPECT_EQ(counters(0).bytesInUse, before.bytesInUse);
}

TEST_F(MemoryTest, FreeOfNullIsANoOp) {
  const mlurtDeviceCounters_t before = counters(0);
  EXPECT_OK(mlurtFree(nullptr));
  EXPECT_EQ(mlurtPeekAtLastError(), MLURT_SUCCESS);
  EXPECT_EQ(counters(0).liveAllocations, before.liveAllocations);
}

TEST_F(MemoryTest, AllocationsDoNotOverlap) {
  const mlurtDeviceCounters_t before = counters(0);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<size_t> size_of(1, 10000);
  std::vector<std::pair<uintptr_t, size_t>> blocks;
  size_t expected_bytes = 0;
  for (int i = 0; i < 300; ++i) {
    void* p = nullptr;
    const size_t size = size_of(rng);
    ASSERT_OK(mlurtMalloc(&p, size));
    blocks.emplace_back(reinterpret_cast<uintptr_t>(p), size);
    expected_bytes += roundUp(size);
    // Free every third block at once, to mix reuse of freed space into the picture.
    if (i % 3 == 2) {
      ASSERT_OK(mlurtFree(p));
      blocks.pop_back();
      expected_bytes -= roundUp(size);
    }
  }
  EXPECT_EQ(counters(0).bytesInUse - before.bytesInUse, expected_bytes);
  EXPECT_EQ(counters(0).liveAllocations - before.liveAllocations, blocks.size());
  std::sort(blocks.begin(), blocks.end());
  for (size_t i = 0; i + 1 < blocks.size(); ++i) {
    EXPECT_LE(blocks[i].first + blocks[i].second, blocks[i + 1].first) << "blocks " << i << " and " << i + 1;
  }
  for (const auto& [base, size] : blocks) ASSERT_OK(mlurtFree(reinterpret_cast<void*>(base)));
  EXPECT_EQ(counters(0).bytesInUse, before.bytesInUse);
  EXPECT_EQ(counters(0).liveAllocations, before.liveAllocations);
}

TEST_F(MemoryTest, LargeAllocationIsHostAddressableAcrossItsWholeRange) {
  // 96 MiB: more than one commit step of a lazily committed device; touch one byte per page.
  constexpr size_t kSize = 96 * kMiB;
  DeviceBuffer buffer(kSize);
  ASSERT_NE(buffer.get(), nullptr);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (size_t i = 0; i < kSize; i += page) buffer.bytes()[i] = static_cast<unsigned char>(i / page);
  buffer.bytes()[kSize - 1] = 0x77;
  bool same = true;
  for (size_t i = 0; i < kSize; i += page)
    same = same && buffer.bytes()[i] == static_cast<unsigned char>(i / page);
  EXPECT_TRUE(same);
  EXPECT_EQ(buffer.bytes()[kSize - 1], 0x77);
}

TEST_F(MemoryTest, AllocationLargerThanTheDeviceIsOutOfMemory) {
  const mlurtDeviceCounters_t before = counters(0);
  const size_t total = properties(0).totalMem;
  for (const size_t size : {total + 1, total + kMiB, total * 2, SIZE_MAX, SIZE_MAX - 100}) {
    void* p = nullptr;
    EXPECT_FAILS_WITH(mlurtMalloc(&p, size), MLURT_ERROR_OUT_OF_MEMORY, "memory");
  }
  EXPECT_EQ(counters(0).bytesInUse, before.bytesInUse);
  EXPECT_EQ(counters(0).liveAllocations, before.liveAllocations);
  // Still usable.
  DeviceBuffer small(100);
  EXPECT_NE(small.get(), nullptr);
}

TEST_F(MemoryTest, AllocationLargerThanFreeMemoryFailsAndWorksAgainAfterAFree) {
  const mlurtDeviceCounters_t before = counters(0);
  const size_t free_at_start = freeBytes(0);
  ASSERT_GE(free_at_start, 64 * kMiB);
  // Three quarters of the free memory (6 GiB by default): lazily committed, never touched.
  const size_t big_size = free_at_start / 4 * 3 / kAlignment * kAlignment;
  void* big = nullptr;
  ASSERT_OK(mlurtMalloc(&big, big_size));
  const size_t free_with_big = freeBytes(0);
  EXPECT_EQ(free_at_start - free_with_big, big_size);

  // Half of the original free memory no longer fits; neither does one byte more than what is free.
  void* p = nullptr;
  EXPECT_FAILS_WITH(mlurtMalloc(&p, free_at_start / 2), MLURT_ERROR_OUT_OF_MEMORY, "memory");
  EXPECT_FAILS_WITH(mlurtMalloc(&p, free_with_big + 1), MLURT_ERROR_OUT_OF_MEMORY, "memory");
  EXPECT_EQ(freeBytes(0), free_with_big) << "a failed allocation changed the free memory";

  // Recovery: after the free, the same request succeeds.
  ASSERT_OK(mlurtFree(big));
  void* half = nullptr;
  ASSERT_OK(mlurtMalloc(&half, free_at_start / 2));
  EXPECT_NE(half, nullptr);
  static_cast<unsigned char*>(half)[0] = 1;
  ASSERT_OK(mlurtFree(half));
  EXPECT_EQ(freeBytes(0), free_at_start);
  EXPECT_EQ(counters(0).bytesInUse, before.bytesInUse);
  EXPECT_GE(counters(0).peakBytesInUse, before.bytesInUse + big_size);
}

TEST_F(MemoryTest, FreedNeighboursCoalesceIntoOneBlock) {
  const mlurtDeviceCounters_t before = counters(0);
  if (before.liveAllocations != 0) GTEST_SKIP() << "live allocations left by other tests fragment device 0";
  const size_t free_at_start = freeBytes(0);
  const size_t quarter = free_at_start / 4 / kAlignment * kAlignment;
  void* blocks[4] = {};
  for (void*& block : blocks) ASSERT_OK(mlurtMalloc(&block, quarter));
  // Free in an order that leaves holes first, then joins them from both sides.
  for (const int i : {1, 3, 0, 2}) ASSERT_OK(mlurtFree(blocks[i]));
  EXPECT_EQ(freeBytes(0), free_at_start);

  // The whole device in one allocation: only possible if the freed blocks were merged again.
  void* all = nullptr;
  ASSERT_OK(mlurtMalloc(&all, free_at_start));
  EXPECT_EQ(freeBytes(0), 0u);
  void* more = nullptr;
  EXPECT_FAILS_WITH(mlurtMalloc(&more, 1), MLURT_ERROR_OUT_OF_MEMORY, "memory");
  ASSERT_OK(mlurtFree(all));
  EXPECT_EQ(freeBytes(0), free_at_start);
  EXPECT_EQ(counters(0).bytesInUse, before.bytesInUse);
}

TEST_F(MemoryTest, DoubleFreeIsAnInvalidPointer) {
  const mlurtDeviceCounters_t before = counters(0);
  void* p = nullptr;
  ASSERT_OK(mlurtMalloc(&p, 512));
  ASSERT_OK(mlurtFree(p));
  EXPECT_FAILS_WITH(mlurtFree(p), MLURT_ERROR_INVALID_POINTER, "free");
  // The second free did not release anything again.
  EXPECT_EQ(counters(0).bytesInUse, before.bytesInUse);
  EXPECT_EQ(counters(0).liveAllocations, before.liveAllocations);
}

TEST_F(MemoryTest, FreeOfHostMemoryIsAnInvalidPointer) {
  std::vector<char> heap(4096);
  const auto small = std::make_unique<int>(3);
  void* raw = std::malloc(128);
  ASSERT_NE(raw, nullptr);
  int stack_value = 0;
  for (void* host : {static_cast<void*>(heap.data()), static_cast<void*>(small.get()), raw,
                     static_cast<void*>(&stack_value)}) {
    EXPECT_EQ(mlurtFree(host), MLURT_ERROR_INVALID_POINTER) << host;
    EXPECT_EQ(mlurtPeekAtLastError(), MLURT_ERROR_INVALID_POINTER);
    EXPECT_NE(lastMessage(), "") << "no message";
  }
  std::free(raw);
}

TEST_F(MemoryTest, FreeOfAnInteriorPointerFailsAndKeepsTheAllocation) {
  const mlurtDeviceCounters_t before = counters(0);
  void* p = nullptr;
  ASSERT_OK(mlurtMalloc(&p, 1024));
  auto* bytes = static_cast<unsigned char*>(p);
  for (const size_t offset : {size_t{16}, size_t{1}, size_t{256}, size_t{1023}}) {
    EXPECT_EQ(mlurtFree(bytes + offset), MLURT_ERROR_INVALID_POINTER) << offset;
    EXPECT_EQ(mlurtPeekAtLastError(), MLURT_ERROR_INVALID_POINTER);
    EXPECT_NE(lastMessage(), "") << "no message";
  }
  const mlurtPointerAttributes_t a = attributes(p);
  EXPECT_EQ(a.type, MLURT_MEMORY_DEVICE);
  EXPECT_EQ(a.base, p);
  EXPECT_EQ(a.size, 1024u);
  EXPECT_EQ(counters(0).liveAllocations - before.liveAllocations, 1u);
  std::vector<unsigned char> data(1024, 0x3c);
  EXPECT_OK(mlurtMemcpy(p, data.data(), data.size(), MLURT_MEMCPY_HOST_TO_DEVICE));
  EXPECT_OK(mlurtFree(p));
  EXPECT_EQ(counters(0).bytesInUse, before.bytesInUse);
}

TEST_F(MemoryTest, FreeOfAnUnallocatedDeviceAddressIsAnInvalidPointer) {
  const mlurtDeviceProp_t prop = properties(0);
  void* top = reinterpret_cast<void*>(prop.addressLimit - kAlignment);
  EXPECT_FAILS_WITH(mlurtFree(top), MLURT_ERROR_INVALID_POINTER, "free");
}

TEST_F(MemoryTest, FreeWorksWhateverTheCurrentDevice) {
  ASSERT_GE(deviceCount(), 2);
  const mlurtDeviceCounters_t before = counters(1);
  void* p = nullptr;
  {
    DeviceScope scope(1);
    ASSERT_OK(mlurtMalloc(&p, 300));
  }
  EXPECT_EQ(counters(1).bytesInUse - before.bytesInUse, 512u);
  EXPECT_OK(mlurtFree(p));  // device 0 is current
  EXPECT_EQ(counters(1).bytesInUse, before.bytesInUse);
}

TEST_F(MemoryTest, AllocationOnDeviceOneLandsInItsRange) {
  ASSERT_GE(deviceCount(), 2);
  const mlurtDeviceCounters_t before0 = counters(0);
  const mlurtDeviceCounters_t before1 = counters(1);
  ASSERT_OK(mlurtSetDevice(1));
  void* p = nullptr;
  ASSERT_OK(mlurtMalloc(&p, 1000));
  EXPECT_TRUE(inRange(p, properties(1)));
  EXPECT_FALSE(inRange(p, properties(0)));
  const mlurtPointerAttributes_t a = attributes(p);
  EXPECT_EQ(a.type, MLURT_MEMORY_DEVICE);
  EXPECT_EQ(a.device, 1);
  EXPECT_EQ(a.base, p);
  EXPECT_EQ(a.size, 1000u);
  EXPECT_EQ(counters(1).bytesInUse - before1.bytesInUse, 1024u);
  EXPECT_EQ(counters(0).bytesInUse, before0.bytesInUse);
  ASSERT_OK(mlurtFree(p));
  EXPECT_EQ(counters(1).bytesInUse, before1.bytesInUse);
}

TEST_F(MemoryTest, ThreadsAllocateConcurrently) {
  const mlurtDeviceCounters_t before = counters(0);
  constexpr int kThreads = 4;
  constexpr int kRounds = 500;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures] {
      std::vector<void*> mine;
      for (int i = 0; i < kRounds; ++i) {
        void* p = nullptr;
        if (mlurtMalloc(&p, static_cast<size_t>(1 + (i * 131 + t) % 5000)) != MLURT_SUCCESS) ++failures[t];
        mine.push_back(p);
        if (i % 2 == 1) {
          if (mlurtFree(mine.front()) != MLURT_SUCCESS) ++failures[t];
          mine.erase(mine.begin());
        }
      }
      for (void* p : mine) {
        if (mlurtFree(p) != MLURT_SUCCESS) ++failures[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  const mlurtDeviceCounters_t after = counters(0);
  EXPECT_EQ(after.bytesInUse, before.bytesInUse);
  EXPECT_EQ(after.liveAllocations, before.liveAllocations);
  EXPECT_EQ(after.totalAllocations - before.totalAllocations, uint64_t{kThreads} * kRounds);
}

// ---- pinned host memory ----

TEST_F(PinnedMemoryTest, HostMallocGivesPageAlignedWritableMemory) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (const size_t size : {size_t{1}, size_t{100}, page, page + 1, 3 * kMiB}) {
    void* p = nullptr;
    ASSERT_OK(mlurtHostMalloc(&p, size));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % page, 0u) << size;
    std::memset(p, 0x5a, size);
    EXPECT_EQ(static_cast<unsigned char*>(p)[size - 1], 0x5a);
    for (int d = 0; d < deviceCount(); ++d) EXPECT_FALSE(inRange(p, properties(d))) << size;
    EXPECT_OK(mlurtHostFree(p));
  }
}

TEST_F(PinnedMemoryTest, ZeroBytesAndNull) {
  int dummy = 0;
  void* p = &dummy;
  ASSERT_OK(mlurtHostMalloc(&p, 0));
  EXPECT_EQ(p, nullptr);
  EXPECT_OK(mlurtHostFree(nullptr));
}

TEST_F(PinnedMemoryTest, PinnedMemoryIsNotDeviceMemory) {
  const mlurtDeviceCounters_t before = counters(0);
  void* p = nullptr;
  ASSERT_OK(mlurtHostMalloc(&p, 8192));
  EXPECT_EQ(counters(0).bytesInUse, before.bytesInUse);
  EXPECT_EQ(mlurtFree(p), MLURT_ERROR_INVALID_POINTER);
  EXPECT_EQ(mlurtPeekAtLastError(), MLURT_ERROR_INVALID_POINTER);
  EXPECT_NE(lastMessage(), "") << "no message";
  // Still live pinned memory after the refused mlurtFree.
  EXPECT_EQ(attributes(p).type, MLURT_MEMORY_PINNED);
  static_cast<unsigned char*>(p)[8191] = 1;
  EXPECT_OK(mlurtHostFree(p));
}

TEST_F(PinnedMemoryTest, HostFreeRefusesWhatIsNotLivePinnedMemory) {
  void* device = nullptr;
  ASSERT_OK(mlurtMalloc(&device, 256));
  EXPECT_EQ(mlurtHostFree(device), MLURT_ERROR_INVALID_POINTER);
  EXPECT_EQ(mlurtPeekAtLastError(), MLURT_ERROR_INVALID_POINTER);
  EXPECT_NE(lastMessage(), "") << "no message";
  EXPECT_EQ(attributes(device).type, MLURT_MEMORY_DEVICE) << "mlurtHostFree released device memory";
  EXPECT_OK(mlurtFree(device));

  void* raw = std::malloc(64);
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(mlurtHostFree(raw), MLURT_ERROR_INVALID_POINTER);
  EXPECT_NE(lastMessage(), "") << "no message";
  std::free(raw);

  void* pinned = nullptr;
  ASSERT_OK(mlurtHostMalloc(&pinned, 1000));
  EXPECT_EQ(mlurtHostFree(static_cast<char*>(pinned) + 8), MLURT_ERROR_INVALID_POINTER) << "interior";
  EXPECT_OK(mlurtHostFree(pinned));
  EXPECT_FAILS_WITH(mlurtHostFree(pinned), MLURT_ERROR_INVALID_POINTER, "free");
}

// ---- pointer attributes ----

TEST_F(PointerAttributesTest, DevicePointerAndInteriorPointer) {
  void* p = nullptr;
  ASSERT_OK(mlurtMalloc(&p, 1000));
  const mlurtPointerAttributes_t a = attributes(p);
  EXPECT_EQ(a.type, MLURT_MEMORY_DEVICE);
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(a.base, p);
  EXPECT_EQ(a.size, 1000u) << "the size asked for, not the rounded one";
  for (const size_t offset : {size_t{1}, size_t{100}, size_t{999}}) {
    const mlurtPointerAttributes_t inner = attributes(static_cast<char*>(p) + offset);
    EXPECT_EQ(inner.type, MLURT_MEMORY_DEVICE) << offset;
    EXPECT_EQ(inner.device, 0) << offset;
    EXPECT_EQ(inner.base, p) << offset;
    EXPECT_EQ(inner.size, 1000u) << offset;
  }
  ASSERT_OK(mlurtFree(p));
}

TEST_F(PointerAttributesTest, PinnedPointer) {
  PinnedBuffer pinned(5000);
  for (const size_t offset : {size_t{0}, size_t{10}, size_t{4999}}) {
    const mlurtPointerAttributes_t a = attributes(pinned.bytes() + offset);
    EXPECT_EQ(a.type, MLURT_MEMORY_PINNED) << offset;
    EXPECT_EQ(a.device, -1) << offset;
    EXPECT_EQ(a.base, pinned.get()) << offset;
    EXPECT_EQ(a.size, 5000u) << offset;
  }
}

TEST_F(PointerAttributesTest, OrdinaryHostPointers) {
  std::vector<char> heap(100);
  int stack_value = 0;
  for (const void* host : {static_cast<const void*>(heap.data()), static_cast<const void*>(&stack_value),
                           static_cast<const void*>(&kMiB)}) {
    const mlurtPointerAttributes_t a = attributes(host);
    EXPECT_EQ(a.type, MLURT_MEMORY_HOST) << host;
    EXPECT_EQ(a.device, -1) << host;
    EXPECT_EQ(a.base, nullptr) << host;
    EXPECT_EQ(a.size, 0u) << host;
  }
}

TEST_F(PointerAttributesTest, NullIsUnknown) {
  const mlurtPointerAttributes_t a = attributes(nullptr);
  EXPECT_EQ(a.type, MLURT_MEMORY_UNKNOWN);
  EXPECT_EQ(a.device, -1);
  EXPECT_EQ(a.base, nullptr);
  EXPECT_EQ(a.size, 0u);
}

TEST_F(PointerAttributesTest, FreedOrUnallocatedDeviceAddressIsUnknownWithItsDevice) {
  ASSERT_GE(deviceCount(), 2);
  void* p = nullptr;
  {
    DeviceScope scope(1);
    ASSERT_OK(mlurtMalloc(&p, 4096));
  }
  ASSERT_OK(mlurtFree(p));
  const mlurtPointerAttributes_t freed = attributes(p);
  EXPECT_EQ(freed.type, MLURT_MEMORY_UNKNOWN);
  EXPECT_EQ(freed.device, 1);
  EXPECT_EQ(freed.base, nullptr);
  EXPECT_EQ(freed.size, 0u);

  const mlurtPointerAttributes_t top =
      attributes(reinterpret_cast<const void*>(properties(0).addressLimit - 1));
  EXPECT_EQ(top.type, MLURT_MEMORY_UNKNOWN);
  EXPECT_EQ(top.device, 0);
}

TEST_F(PointerAttributesTest, NullAttributesIsAnInvalidValue) {
  DeviceBuffer buffer(64);
  EXPECT_FAILS_WITH(mlurtPointerGetAttributes(nullptr, buffer.get()), MLURT_ERROR_INVALID_VALUE, "null");
}

// mlurtFree waits for work already queued on the device (which may still use the memory), as cudaFree
// does; the work completes before the memory is released.
TEST_F(MemoryTest, FreeWaitsForWorkQueuedOnTheDevice) {
  ScopedQueue queue;
  void* p = nullptr;
  ASSERT_OK(mlurtMalloc(&p, 4096));
  std::atomic<bool> done{false};
  ASSERT_OK(launchHost(queue.get(), [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    std::memset(p, 7, 4096);  // still a live allocation: the free has not happened yet
    done = true;
  }));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_OK(mlurtFree(p));
  EXPECT_TRUE(done.load());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
}

// A sticky error met while a free waits stays for the next sync, which reports it.
TEST_F(MemoryTest, FreeLeavesAStickyErrorForTheNextSync) {
  ScopedQueue queue;
  void* p = nullptr;
  ASSERT_OK(mlurtMalloc(&p, 256));
  ASSERT_OK(launchKernel(queue.get(), "failing_kernel", [] { return MLURT_ERROR_INVALID_VALUE; }));
  ASSERT_OK(mlurtFree(p));
  EXPECT_EQ(mlurtQueueSync(queue.get()), MLURT_ERROR_LAUNCH_FAILED);
  EXPECT_THAT(lastMessage(), ::testing::HasSubstr("failing_kernel"));
}

// From a host function a free cannot wait for its own queue: it frees at once instead of deadlocking.
TEST_F(MemoryTest, FreeFromAHostFunctionDoesNotDeadlock) {
  ScopedQueue queue;
  void* p = nullptr;
  ASSERT_OK(mlurtMalloc(&p, 256));
  mlurtStatus_t status = MLURT_ERROR_INTERNAL;
  ASSERT_OK(launchHost(queue.get(), [&] { status = mlurtFree(p); }));
  ASSERT_OK(mlurtQueueSync(queue.get()));
  EXPECT_EQ(status, MLURT_SUCCESS);
  EXPECT_EQ(attributes(p).type, MLURT_MEMORY_UNKNOWN);
}

}  // namespace
}  // namespace mlurt_test
