// allocation_table.h — memcheck's table of the program's live allocations (device and pinned host), the
// frees it remembers, the memory in use per place over the run (its peaks and a sampled timeline), and what a
// free that matches no live allocation is. Plain data, no device access and no lock: the tool holds one lock
// over it.
#pragma once

#include "allocation.h"
#include "spare_nodes.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace opscope::memcheck {

class AllocationTable {
 public:
  // freed_remembered: how many past frees are kept (to tell a double free from a free of a pointer never
  // allocated); timeline_samples: past this many samples the timeline stops (the peaks do not).
  explicit AllocationTable(std::size_t freed_remembered = std::size_t{1} << 16,
                           std::size_t timeline_samples = std::size_t{1} << 20);

  // A new allocation: in use from a.time_ns (its address, if freed before, is no longer "freed").
  void add(const LiveAllocation& a);

  // The free of the live allocation at ptr made by the matching allocator (pinned: mlurtHostMalloc, else
  // mlurtMalloc): removed, remembered as freed by free_stack, and returned. Nothing when there is none.
  std::optional<LiveAllocation> release(std::uintptr_t ptr, bool pinned, StackId free_stack,
                                        std::int64_t time_ns, std::uint64_t op_seq);

  // A free of ptr that release() refused: a double free, a free inside an allocation, a free by the wrong
  // allocator, or of a pointer never allocated. Its kind, message and the stacks memcheck knows.
  MemoryError badFree(std::uintptr_t ptr, bool pinned, StackId stack, std::uint64_t op_seq) const;

  // The live allocation that contains ptr (at_start: or starts at it). A 0-byte allocation contains its
  // start.
  const LiveAllocation* containing(std::uintptr_t ptr, bool at_start) const;

  std::vector<LiveAllocation> live() const;  // by address
  std::vector<Peak> peaks() const;           // by place
  std::uint64_t inUse(int device) const;

  struct Sample {
    std::int64_t time_ns;
    std::uint64_t op_seq;
    int device;
    std::uint64_t bytes;  // in use on the place after the change
  };
  // memcheck_timeline.csv: time_ms,op_seq,place,bytes
  std::string timelineCsv() const;

 private:
  struct Freed {
    std::size_t size = 0;
    int device = 0;
    StackId alloc_stack = 0;
    StackId free_stack = 0;
    std::uint64_t number = 0;  // which free of the run
  };
  void sample(std::int64_t time_ns, std::uint64_t op_seq, int device, std::uint64_t bytes);

  const std::size_t freed_remembered_;
  const std::size_t timeline_samples_;
  using Live = std::map<std::uintptr_t, LiveAllocation>;
  using FreedMap = std::unordered_map<std::uintptr_t, Freed>;
  Live live_;
  FreedMap freed_;
  // Nodes of entries that left the maps, for the next entries (spare_nodes.h): a few kept.
  static constexpr std::size_t kSpareNodes = 256;
  SpareNodes<Live> spare_live_;
  SpareNodes<FreedMap> spare_freed_;
  std::deque<std::pair<std::uintptr_t, std::uint64_t>> freed_order_;  // (address, free number), oldest first
  std::uint64_t frees_ = 0;
  // Per place (pinned host memory, each device), by place: a handful, searched in line (a map lookup, three
  // per allocation and free, was a tenth of the table's cost).
  struct Place {
    std::uint64_t in_use = 0;
    Peak peak;
  };
  Place& place(int device);
  std::vector<Place> places_;
  std::vector<Sample> timeline_;
};

}  // namespace opscope::memcheck
