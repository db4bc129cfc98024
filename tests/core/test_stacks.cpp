// StackTable (core/src/stacks.cpp): how many of opscope's own frames it unwinds on top of the depth kept is
// learned from the stacks it captures; a later stack with more of them still keeps the program's frames.
// Here the test binary plays opscope (its frames are the "own" frames skipped) and libc's frames below main
// play the program's.
#include <opscope/stacks.h>

#include <gtest/gtest.h>

#include <vector>

namespace {

// capture() called `extra` frames deeper than the test's own body (none of them inlined away).
[[gnu::noinline]] opscope::StackId captureDeeper(opscope::StackTable& table, int extra) {
  if (extra == 0) return table.capture();
  const opscope::StackId id = captureDeeper(table, extra - 1);
  asm volatile("" ::: "memory");  // not a tail call
  return id;
}

opscope::AddressRange thisBinary() {
  return opscope::moduleRangeOf(reinterpret_cast<const void*>(&captureDeeper));
}

TEST(StackTable, AStackWithMoreOwnFramesThanLearnedStillKeepsTheProgramsFrames) {
  constexpr int kDepth = 2;
  // What a fresh table keeps from 16 frames deeper: it unwinds its first stacks deep enough for them.
  opscope::StackTable fresh(kDepth, thisBinary());
  const std::vector<std::uintptr_t> expected = fresh.frames(captureDeeper(fresh, 16));
  ASSERT_FALSE(expected.empty()) << "no frame below the test binary's (libc's, under main)";
  for (std::uintptr_t f : expected) EXPECT_FALSE(thisBinary().contains(f));

  // A table that has learned from shallow stacks how many own frames to unwind, then a deep one.
  opscope::StackTable table(kDepth, thisBinary());
  for (int i = 0; i < 200; ++i) ASSERT_EQ(table.frames(captureDeeper(table, 0)), expected);
  EXPECT_EQ(table.frames(captureDeeper(table, 16)), expected);
  EXPECT_EQ(table.frames(captureDeeper(table, 0)), expected);
  // The same stack is the same id, from the thread's cache or the table.
  EXPECT_EQ(captureDeeper(table, 5), captureDeeper(table, 5));
}

TEST(StackTable, TwoTablesKeepTheirOwnIdsForTheSameStack) {
  opscope::StackTable a(8, {}), b(8, {});
  const std::uintptr_t one[] = {1, 2, 3}, two[] = {4, 5};
  const opscope::StackId a2 = a.intern(two, 2);
  const opscope::StackId a1 = a.intern(one, 3);
  const opscope::StackId b1 = b.intern(one, 3);  // b's first stack, a's second: another id
  EXPECT_NE(a1, b1);
  EXPECT_EQ(a.intern(one, 3), a1);
  EXPECT_EQ(b.intern(one, 3), b1);
  EXPECT_EQ(a.frames(a1), (std::vector<std::uintptr_t>{1, 2, 3}));
  EXPECT_EQ(b.frames(b1), (std::vector<std::uintptr_t>{1, 2, 3}));
  EXPECT_EQ(a.frames(a2), (std::vector<std::uintptr_t>{4, 5}));
}

}  // namespace
