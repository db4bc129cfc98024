#include "allocation_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace opscope::memcheck {

std::string placeName(int device) {
  return device == kPinnedHost ? std::string("pinned host memory") : fmt::format("MLU {}", device);
}

AllocationTable::AllocationTable(std::size_t freed_remembered, std::size_t timeline_samples,
                                 const char* device_free)
    : freed_remembered_(freed_remembered), device_free_(device_free), timeline_samples_(timeline_samples) {}

void AllocationTable::add(const LiveAllocation& a) {
  insertReusing(live_, spare_live_, a.ptr, a);
  Place& p = place(a.device);
  const std::uint64_t in_use = p.in_use += a.size;
  p.step_peak = std::max(p.step_peak, in_use);
  sample(a.time, a.op_seq, a.device, in_use);
  if (a.site != nullptr) module_bytes_[holder(a.device, *a.site)] += a.size;
  Peak& peak = p.peak;
  if (in_use > peak.bytes) {
    peak.bytes = in_use;
    peak.op_seq = a.op_seq;
    peak.op = a.last_op;
    peak.site = a.site;
    peak.modules.clear();
    if (a.site != nullptr) {  // what each module holds now, the most first
      for (auto it = module_bytes_.lower_bound(Holder{a.device, false, std::string_view()});
           it != module_bytes_.end() && std::get<0>(it->first) == a.device; ++it) {
        const auto& [device, outside, name] = it->first;
        if (it->second > 0)
          peak.modules.emplace_back((outside ? "(no module) at " : "") + std::string(name), it->second);
      }
      const std::size_t kept = std::min(peak.modules.size(), kPeakModules);
      std::partial_sort(peak.modules.begin(), peak.modules.begin() + static_cast<std::ptrdiff_t>(kept),
                        peak.modules.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
      peak.modules.resize(kept);
    }
  }
}

std::optional<LiveAllocation> AllocationTable::release(std::uintptr_t ptr, bool pinned, StackId free_stack,
                                                       std::int64_t time, std::uint64_t op_seq) {
  const auto it = live_.find(ptr);
  if (it == live_.end() || (it->second.device == kPinnedHost) != pinned) return std::nullopt;
  const LiveAllocation a = it->second;
  eraseKeeping(live_, spare_live_, it, kSpareNodes);
  sample(time, op_seq, a.device, place(a.device).in_use -= a.size);
  if (a.site != nullptr) {
    if (auto m = module_bytes_.find(holder(a.device, *a.site)); m != module_bytes_.end()) m->second -= a.size;
  }
  const Freed freed{ptr, a.size, a.device, a.stack, free_stack};
  if (freed_.size() < freed_remembered_) {
    freed_.push_back(freed);
  } else if (freed_remembered_ > 0) {
    freed_[freed_next_] = freed;
    freed_next_ = (freed_next_ + 1) % freed_remembered_;
  }
  return a;
}

MemoryError AllocationTable::badFree(std::uintptr_t ptr, bool pinned, StackId stack,
                                     std::uint64_t op_seq) const {
  MemoryError e;
  e.stack = stack;
  e.op_seq = op_seq;
  const char* what = pinned ? "mlurtHostFree" : device_free_;
  // The address's latest free, if it is remembered and the address was not handed out again since (then it
  // is live: an allocation of the other allocator, below).
  const Freed* freed = nullptr;
  if (live_.find(ptr) == live_.end()) {
    // Newest first: from the slot before freed_next_ back around the ring.
    for (std::size_t i = 0; i < freed_.size() && freed == nullptr; ++i) {
      const Freed& f = freed_[(freed_next_ + freed_.size() - 1 - i) % freed_.size()];
      if (f.ptr == ptr) freed = &f;
    }
  }
  if (freed != nullptr) {
    e.kind = "double-free";
    e.message = fmt::format("{} of {:#x}, a {}-byte allocation on {} that was already freed", what, ptr,
                            freed->size, placeName(freed->device));
    e.alloc_stack = freed->alloc_stack;
    e.free_stack = freed->free_stack;
  } else if (const LiveAllocation* owner = containing(ptr, false)) {
    e.kind = "interior-free";
    e.message = fmt::format("{} of {:#x}, {} bytes inside a {}-byte allocation on {} at {:#x}", what, ptr,
                            ptr - owner->ptr, owner->size, placeName(owner->device), owner->ptr);
    e.alloc_stack = owner->stack;
  } else if (const auto live = live_.find(ptr); live != live_.end()) {
    // Allocated, by the other allocator: pinned host memory passed to mlurtFree, or device memory to
    // mlurtHostFree.
    const LiveAllocation& a = live->second;
    const bool by_host = a.device == kPinnedHost;
    e.kind = "alloc-dealloc-mismatch";
    e.message = fmt::format("{} of {:#x}, a {}-byte allocation on {} made by {} (free it with {})", what, ptr,
                            a.size, placeName(a.device), by_host ? "mlurtHostMalloc" : "mlurtMalloc",
                            by_host ? "mlurtHostFree" : "mlurtFree");
    e.alloc_stack = a.stack;
  } else {
    e.kind = "invalid-free";
    e.message = fmt::format("{} of {:#x}, which was never allocated", what, ptr);
  }
  return e;
}

const LiveAllocation* AllocationTable::containing(std::uintptr_t ptr, bool at_start) const {
  auto it = live_.upper_bound(ptr);
  if (it == live_.begin()) return nullptr;
  --it;
  const LiveAllocation& a = it->second;
  const bool inside = at_start ? ptr >= a.ptr : ptr > a.ptr;
  return inside && ptr < a.ptr + std::max<std::size_t>(a.size, 1) ? &a : nullptr;
}

bool AllocationTable::markPool(std::uintptr_t ptr) {
  auto it = live_.upper_bound(ptr);
  if (it == live_.begin()) return false;
  --it;
  LiveAllocation& a = it->second;
  if (ptr >= a.ptr + std::max<std::size_t>(a.size, 1)) return false;
  a.pool = true;
  return true;
}

std::vector<LiveAllocation> AllocationTable::live() const {
  std::vector<LiveAllocation> out;
  out.reserve(live_.size());
  for (const auto& [ptr, a] : live_) out.push_back(a);
  return out;
}

AllocationTable::Place& AllocationTable::place(int device) {
  auto it = places_.begin();
  while (it != places_.end() && it->peak.device < device) ++it;
  if (it == places_.end() || it->peak.device != device) {
    it = places_.insert(it, Place{});
    it->peak.device = device;
  }
  return *it;
}

std::vector<Peak> AllocationTable::peaks() const {
  std::vector<Peak> out;
  for (const Place& p : places_) out.push_back(p.peak);
  return out;
}

void AllocationTable::markStep(std::uint32_t step) {
  for (Place& p : places_) {
    if (step_marks_.size() < kMaxStepMarks) {
      step_marks_.push_back({step, p.peak.device, std::max(p.step_peak, p.in_use), p.in_use});
    } else {
      ++steps_dropped_;
    }
    p.step_peak = p.in_use;
  }
}

std::uint64_t AllocationTable::inUse(int device) const {
  for (const Place& p : places_) {
    if (p.peak.device == device) return p.in_use;
  }
  return 0;
}

std::string AllocationTable::timelineCsv(double ns_per_tick) const {
  std::string csv;
  csv.reserve(timeline_.size() * 24 + 32);
  csv = "time_ms,op_seq,place,bytes\n";
  for (const Sample& t : timeline_) {
    fmt::format_to(std::back_inserter(csv), "{:.6f},{},{},{}\n",
                   static_cast<double>(t.time) * ns_per_tick / 1e6, t.op_seq, placeName(t.device), t.bytes);
  }
  return csv;
}

void AllocationTable::sample(std::int64_t time, std::uint64_t op_seq, int device, std::uint64_t bytes) {
  if (timeline_.size() < timeline_samples_) timeline_.push_back({time, op_seq, device, bytes});
}

}  // namespace opscope::memcheck
