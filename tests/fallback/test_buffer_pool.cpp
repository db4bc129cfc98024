// The host copies' BufferPool: blocks are reused, best fit, capped, and a lease keeps its pool alive.
#include <opscope/host_copy.h>

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

using opscope::BufferPool;

TEST(BufferPool, AReleasedBlockServesTheNextRequestOfAtMostItsSize) {
  auto pool = std::make_shared<BufferPool>();
  std::byte* first = nullptr;
  {
    BufferPool::Lease a = pool->acquire(1 << 20);
    ASSERT_EQ(a.size(), std::size_t{1} << 20);
    std::memset(a.data(), 0x5a, a.size());  // writable, whole
    first = a.data();
  }
  const BufferPool::Lease b = pool->acquire(1000);
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(b.size(), 1000u);
  const BufferPool::Lease c = pool->acquire(2 << 20);  // larger than anything free: a new block
  EXPECT_NE(c.data(), first);
}

TEST(BufferPool, TheSmallestBlockThatFitsIsChosen) {
  auto pool = std::make_shared<BufferPool>();
  std::byte *big = nullptr, *small = nullptr;
  {
    BufferPool::Lease a = pool->acquire(4096), b = pool->acquire(64);
    big = a.data();
    small = b.data();
  }
  EXPECT_EQ(pool->acquire(32).data(), small);
  EXPECT_EQ(pool->acquire(100).data(), big);
}

TEST(BufferPool, KeepsAtMostKMaxFreeBlocksDroppingTheSmallest) {
  auto pool = std::make_shared<BufferPool>();
  std::vector<std::byte*> seen;
  {
    std::vector<BufferPool::Lease> leases;
    for (std::size_t i = 0; i <= BufferPool::kMaxFree; ++i) {
      leases.push_back(pool->acquire(100 + i));  // sizes 100 .. 100 + kMaxFree
      seen.push_back(leases.back().data());
    }
  }
  // The 100-byte block went (freed: malloc may hand its address out again, so that is not checked);
  // every other one is still there for a request of its size.
  std::vector<BufferPool::Lease> again;
  for (std::size_t i = 1; i <= BufferPool::kMaxFree; ++i) {
    again.push_back(pool->acquire(100 + i));
    EXPECT_EQ(again.back().data(), seen[i]) << i;
  }
}

TEST(BufferPool, ALeaseOutlivesThePoolsOtherOwners) {
  auto pool = std::make_shared<BufferPool>();
  BufferPool::Lease lease = pool->acquire(256);
  pool.reset();  // the tool that owned it is gone; the lease still holds the pool
  std::memset(lease.data(), 1, lease.size());
  BufferPool::Lease moved = std::move(lease);
  EXPECT_TRUE(lease.empty());
  EXPECT_EQ(moved.size(), 256u);
}

TEST(BufferPool, ZeroBytesIsAnEmptyLease) {
  auto pool = std::make_shared<BufferPool>();
  const BufferPool::Lease l = pool->acquire(0);
  EXPECT_TRUE(l.empty());
  EXPECT_EQ(l.data(), nullptr);
}

TEST(BufferPool, HoldsAtMostKMaxFreeBytesFreeingTheLargestFirst) {
  auto pool = std::make_shared<BufferPool>();
  const std::size_t big = BufferPool::kMaxFreeBytes / 2 + 1;  // two of these exceed the cap
  std::byte* small = nullptr;
  {
    BufferPool::Lease a = pool->acquire(big), b = pool->acquire(big), c = pool->acquire(4096);
    small = c.data();
  }
  // One big block had to go; the small one stayed and still serves a small request.
  EXPECT_EQ(pool->acquire(100).data(), small);
  const BufferPool::Lease first = pool->acquire(big);  // the big block that stayed
  EXPECT_EQ(first.size(), big);
}
