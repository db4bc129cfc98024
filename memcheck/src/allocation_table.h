// allocation_table.h — memcheck's table of the program's live allocations (device and pinned host), the
// frees it remembers, the memory in use per place over the run (its peaks and a sampled timeline), and what a
// free that matches no live allocation is. Plain data, no device access and no lock: the tool holds one lock
// over it.
#pragma once

#include "allocation.h"
#include "spare_nodes.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace opscope::memcheck {

class AllocationTable {
 public:
  // freed_remembered: how many past frees are kept (to tell a double free from a free of a pointer never
  // allocated); timeline_samples: past this many samples the timeline stops (the peaks do not).
  // device_free: the call that frees a device allocation of the table, as errors name it.
  explicit AllocationTable(std::size_t freed_remembered = std::size_t{1} << 16,
                           std::size_t timeline_samples = std::size_t{1} << 20,
                           const char* device_free = "mlurtFree");

  // A new allocation: in use from a.time (its address, if freed before, is no longer "freed").
  void add(const LiveAllocation& a);

  // The free of the live allocation at ptr made by the matching allocator (pinned: mlurtHostMalloc, else
  // mlurtMalloc): removed, remembered as freed by free_stack, and returned. Nothing when there is none.
  std::optional<LiveAllocation> release(std::uintptr_t ptr, bool pinned, StackId free_stack,
                                        std::int64_t time, std::uint64_t op_seq);

  // A free of ptr that release() refused: a double free, a free inside an allocation, a free by the wrong
  // allocator, or of a pointer never allocated. Its kind, message and the stacks memcheck knows.
  MemoryError badFree(std::uintptr_t ptr, bool pinned, StackId stack, std::uint64_t op_seq) const;

  // The live allocation that contains ptr (at_start: or starts at it). A 0-byte allocation contains its
  // start.
  const LiveAllocation* containing(std::uintptr_t ptr, bool at_start) const;
  // Marks the live allocation containing ptr as a pool (LiveAllocation::pool); false when there is none.
  bool markPool(std::uintptr_t ptr);

  std::vector<LiveAllocation> live() const;  // by address
  std::vector<Peak> peaks() const;           // by place
  std::uint64_t inUse(int device) const;

  // The program marked the end of its step `step` (opscope_step): each place's peak since the last mark and
  // what is in use now. At most kMaxStepMarks are kept (then stepsDropped() counts the rest).
  static constexpr std::size_t kMaxStepMarks = std::size_t{1} << 16;
  void markStep(std::uint32_t step);
  const std::vector<StepMark>& stepMarks() const { return step_marks_; }
  std::uint64_t stepsDropped() const { return steps_dropped_; }

  struct Sample {
    std::int64_t time;  // TickClock ticks
    std::uint64_t op_seq;
    int device;
    std::uint64_t bytes;  // in use on the place after the change
  };
  // memcheck_timeline.csv: time_ms,op_seq,place,bytes (times: ticks * ns_per_tick)
  std::string timelineCsv(double ns_per_tick) const;

 private:
  struct Freed {
    std::uintptr_t ptr = 0;
    std::size_t size = 0;
    int device = 0;
    StackId alloc_stack = 0;
    StackId free_stack = 0;
  };
  void sample(std::int64_t time, std::uint64_t op_seq, int device, std::uint64_t bytes);

  const std::size_t freed_remembered_;
  const char* const device_free_;
  const std::size_t timeline_samples_;
  using Live = std::map<std::uintptr_t, LiveAllocation>;
  Live live_;
  // Nodes of entries that left the map, for the next entries (spare_nodes.h): a few kept.
  static constexpr std::size_t kSpareNodes = 256;
  SpareNodes<Live> spare_live_;
  // The last freed_remembered_ frees, a ring (the oldest overwritten at freed_next_ once it is full): only a
  // bad free reads it, newest first, so that a good free costs one store instead of the hash-map insert and
  // erase, and the queue of free order, that remembering it by address took (half of the table's cost).
  std::vector<Freed> freed_;
  std::size_t freed_next_ = 0;
  // Per place (pinned host memory, each device), by place: a handful, searched in line (a map lookup, three
  // per allocation and free, was a tenth of the table's cost).
  struct Place {
    std::uint64_t in_use = 0;
    std::uint64_t step_peak = 0;  // the most in use since the last step mark
    Peak peak;
  };
  std::vector<StepMark> step_marks_;
  std::uint64_t steps_dropped_ = 0;
  Place& place(int device);
  std::vector<Place> places_;
  // Live bytes by (place, module of the allocation's site, or its line when made outside every module), for
  // the peaks' breakdown; only allocations with a site count.
  // Key: (place, outside every module, the module or the line).
  using Holder = std::tuple<int, bool, std::string_view>;
  std::map<Holder, std::uint64_t> module_bytes_;
  static Holder holder(int device, const FrameworkSite& site) {
    return site.module.empty() ? Holder{device, true, site.source} : Holder{device, false, site.module};
  }
  std::vector<Sample> timeline_;
};

}  // namespace opscope::memcheck
