// The memory of one simulated device: an address range reserved with mmap (so it never overlaps the host
// heap), committed on demand, and carved up by a best-fit allocator with coalescing.
#pragma once

#include <mlu/mlurt.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace mlurt {

inline constexpr std::size_t kDeviceAlignment = 256;

// A live allocation: its base and the size the caller asked for.
struct Allocation {
  std::uintptr_t base = 0;
  std::size_t size = 0;
};

struct MemoryUsage {
  std::size_t in_use = 0;  // bytes, after rounding to kDeviceAlignment
  std::size_t peak = 0;
  std::uint64_t live = 0;
  std::uint64_t total = 0;
};

class DeviceMemory {
 public:
  // Reserves capacity bytes of address space; throws std::runtime_error when the reservation fails.
  DeviceMemory(int device, std::size_t capacity);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // Allocates size (> 0) bytes; on failure records the error and returns it.
  mlurtStatus_t allocate(std::size_t size, void** out);
  // Frees the allocation whose base is ptr; on failure records the error and returns it.
  mlurtStatus_t release(void* ptr);

  // True when p lies in this device's address range (allocated or not).
  bool inRange(std::uintptr_t p) const { return p >= base_ && p < base_ + capacity_; }
  // The live allocation containing p, if any.
  std::optional<Allocation> find(std::uintptr_t p) const;

  MemoryUsage usage() const;
  std::size_t capacity() const { return capacity_; }
  std::uintptr_t base() const { return base_; }

 private:
  void insertFree(std::size_t offset, std::size_t length);
  void eraseFree(std::map<std::size_t, std::size_t>::iterator it);
  void releasePages(std::size_t free_begin, std::size_t free_end, std::size_t freed_begin,
                    std::size_t freed_end);

  const int device_;
  std::size_t capacity_ = 0;  // bytes usable, a multiple of the page size
  std::uintptr_t base_ = 0;
  std::size_t committed_ = 0;  // [0, committed_) is readable and writable

  mutable std::mutex mutex_;
  std::map<std::size_t, std::size_t> free_by_offset_;           // offset -> length
  std::set<std::pair<std::size_t, std::size_t>> free_by_size_;  // (length, offset)
  std::map<std::uintptr_t, std::size_t> live_;                  // base -> requested size
  MemoryUsage usage_;
};

}  // namespace mlurt
