// allocation.h — what memcheck knows of one allocation, and of one memory error: the records its parts
// (allocation_table.h, red_zones.h, error_log.h) pass to each other and report.h writes out.
#pragma once

#include <opscope/framework_site.h>
#include <opscope/stacks.h>

#include <mlu/op_args.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace opscope::memcheck {

// Where an allocation lives: a device (>= 0) or pinned host memory.
inline constexpr int kPinnedHost = -1;
std::string placeName(int device);  // "MLU 0", "pinned host memory"

struct LiveAllocation {
  std::uintptr_t ptr = 0;
  std::size_t size = 0;
  int device = 0;
  std::uint32_t thread = 0;
  std::uint64_t op_seq = 0;               // op calls made before it
  mlu::OpId last_op = mlu::OpId::kCount;  // the op of op_seq (kCount: none)
  std::int64_t time = 0;                  // TickClock ticks from memcheck's start
  StackId stack = 0;
  // The program's steps marked before it (opscope_step, or its framework's), and where the program made it
  // (its framework's site: module, line); null when not known.
  std::uint32_t step = 0;
  const FrameworkSite* site = nullptr;
  // Red zones around the program's bytes (device memory): the real block starts front bytes before ptr.
  std::size_t front = 0;
  std::size_t back = 0;
  // A block the program's own allocator hands out pieces of (opscope.h's opscope_pool_alloc): not itself a
  // leak; its pieces are checked and reported instead.
  bool pool = false;
};

struct MemoryError {
  // "double-free", "invalid-free", "interior-free", "alloc-dealloc-mismatch", "heap-buffer-overflow",
  // "use-after-free", "out-of-bounds-argument"
  std::string kind;
  std::string message;  // one line, without the kind
  StackId stack = 0;    // the offending call's
  StackId alloc_stack = 0;
  StackId free_stack = 0;  // the earlier free's (double free)
  // No backtrace was taken for the call on purpose: the message names its framework site (module, Python
  // line), and unwinding every op of a framework would cost a walk of its stack per op.
  bool site_only = false;
  std::uint64_t op_seq = 0;
  // How many times it happened at its site (the same site found again is counted, not reported again).
  std::uint64_t count = 1;
};

struct Peak {
  int device = 0;
  std::uint64_t bytes = 0;
  std::uint64_t op_seq = 0;          // op calls made when the peak was reached
  mlu::OpId op = mlu::OpId::kCount;  // the op of op_seq (kCount: none)
  // Where the program made the allocation that reached it, and the bytes live then by module (the
  // allocations' sites'; "" for none), most first, at most kPeakModules: empty when no site is known.
  const FrameworkSite* site = nullptr;
  std::vector<std::pair<std::string, std::uint64_t>> modules;
};
inline constexpr std::size_t kPeakModules = 8;

// The end of a step the program marked (opscope_step), at one place: the most in use during the step and
// what was in use at its end.
struct StepMark {
  std::uint32_t step = 0;  // steps marked so far, this one included (1: the first)
  int device = 0;
  std::uint64_t peak = 0;
  std::uint64_t end = 0;
};

}  // namespace opscope::memcheck
