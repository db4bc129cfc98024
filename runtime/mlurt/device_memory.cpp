#include "device_memory.h"

#include "errors.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace mlurt {
namespace {

constexpr std::size_t kCommitStep = std::size_t{64} << 20;     // grow the committed prefix 64 MiB at a time
constexpr std::size_t kReleaseMinimum = std::size_t{1} << 20;  // give pages back to the OS from 1 MiB up

std::size_t roundUp(std::size_t value, std::size_t step) { return (value + step - 1) / step * step; }
std::size_t roundDown(std::size_t value, std::size_t step) { return value / step * step; }
std::size_t pageSize() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

}  // namespace

DeviceMemory::DeviceMemory(int device, std::size_t capacity)
    : device_(device), capacity_(roundUp(capacity, pageSize())) {
  // PROT_NONE reserves address space without committing memory; allocate() commits what it hands out.
  void* p = mmap(nullptr, capacity_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    throw std::runtime_error(fmt::format("cannot reserve {} bytes of address space for device {}: {}",
                                         capacity_, device_, std::strerror(errno)));
  }
  base_ = reinterpret_cast<std::uintptr_t>(p);
  insertFree(0, capacity_);
}

DeviceMemory::~DeviceMemory() { munmap(reinterpret_cast<void*>(base_), capacity_); }

void DeviceMemory::insertFree(std::size_t offset, std::size_t length) {
  free_by_offset_.emplace(offset, length);
  free_by_size_.emplace(length, offset);
}

void DeviceMemory::eraseFree(std::map<std::size_t, std::size_t>::iterator it) {
  free_by_size_.erase({it->second, it->first});
  free_by_offset_.erase(it);
}

mlurtStatus_t DeviceMemory::allocate(std::size_t size, void** out) {
  if (size > capacity_) {
    return fail(MLURT_ERROR_OUT_OF_MEMORY,
                "mlurtMalloc: out of memory: {} bytes asked of device {}, which has {}", size, device_,
                capacity_);
  }
  const std::size_t length = roundUp(size, kDeviceAlignment);
  std::lock_guard lock(mutex_);
  if (usage_.in_use + length > capacity_) {
    return fail(MLURT_ERROR_OUT_OF_MEMORY,
                "mlurtMalloc: out of memory: {} bytes asked of device {}, {} of {} bytes in use", size,
                device_, usage_.in_use, capacity_);
  }
  // Best fit: the smallest free block that holds length; the lowest address among equals.
  auto fit = free_by_size_.lower_bound({length, 0});
  if (fit == free_by_size_.end()) {
    return fail(MLURT_ERROR_OUT_OF_MEMORY,
                "mlurtMalloc: out of memory: no free block of {} bytes on device {} ({} of {} bytes in use, "
                "fragmented)",
                size, device_, usage_.in_use, capacity_);
  }
  const auto [block_length, offset] = *fit;
  const std::size_t end = offset + length;
  if (end > committed_) {
    const std::size_t new_committed = std::min(capacity_, roundUp(end, kCommitStep));
    if (mprotect(reinterpret_cast<void*>(base_ + committed_), new_committed - committed_,
                 PROT_READ | PROT_WRITE) != 0) {
      return fail(MLURT_ERROR_OUT_OF_MEMORY,
                  "mlurtMalloc: out of memory: the host refused to commit {} bytes: {}",
                  new_committed - committed_, std::strerror(errno));
    }
    committed_ = new_committed;
  }
  eraseFree(free_by_offset_.find(offset));
  if (block_length > length) insertFree(end, block_length - length);

  const std::uintptr_t address = base_ + offset;
  live_.emplace(address, size);
  usage_.in_use += length;
  usage_.peak = std::max(usage_.peak, usage_.in_use);
  ++usage_.live;
  ++usage_.total;
  *out = reinterpret_cast<void*>(address);
  return MLURT_SUCCESS;
}

mlurtStatus_t DeviceMemory::release(void* ptr) {
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard lock(mutex_);
  auto it = live_.find(address);
  if (it == live_.end()) {
    auto after = live_.upper_bound(address);
    if (after != live_.begin()) {
      auto containing = std::prev(after);
      if (address < containing->first + containing->second) {
        return fail(
            MLURT_ERROR_INVALID_POINTER,
            "mlurtFree: {} points {} bytes into the {}-byte allocation at {:#x} of device {}; free its base",
            ptr, address - containing->first, containing->second, containing->first, device_);
      }
    }
    return fail(
        MLURT_ERROR_INVALID_POINTER,
        "mlurtFree: {} is not a live allocation of device {} (double free, or never returned by mlurtMalloc)",
        ptr, device_);
  }
  const std::size_t length = roundUp(it->second, kDeviceAlignment);
  live_.erase(it);
  usage_.in_use -= length;
  --usage_.live;

  // Coalesce with the free neighbours on both sides.
  const std::size_t freed_begin = address - base_;
  std::size_t begin = freed_begin;
  std::size_t end = freed_begin + length;
  auto next = free_by_offset_.lower_bound(end);
  if (next != free_by_offset_.end() && next->first == end) {
    end += next->second;
    eraseFree(next);
  }
  auto prev = free_by_offset_.lower_bound(begin);
  if (prev != free_by_offset_.begin()) {
    --prev;
    if (prev->first + prev->second == begin) {
      begin = prev->first;
      eraseFree(prev);
    }
  }
  insertFree(begin, end - begin);
  releasePages(begin, end, freed_begin, freed_begin + length);
  return MLURT_SUCCESS;
}

// Returns to the OS the pages of the freed block that are now wholly free; they stay mapped and read back
// as zeros. Small blocks are skipped: the system call would cost more than the memory is worth.
void DeviceMemory::releasePages(std::size_t free_begin, std::size_t free_end, std::size_t freed_begin,
                                std::size_t freed_end) {
  const std::size_t page = pageSize();
  const std::size_t lo = std::max(roundUp(free_begin, page), roundDown(freed_begin, page));
  const std::size_t hi = std::min({roundDown(free_end, page), roundUp(freed_end, page), committed_});
  if (hi > lo && hi - lo >= kReleaseMinimum) {
    madvise(reinterpret_cast<void*>(base_ + lo), hi - lo, MADV_DONTNEED);
  }
}

std::optional<Allocation> DeviceMemory::find(std::uintptr_t p) const {
  std::lock_guard lock(mutex_);
  auto after = live_.upper_bound(p);
  if (after == live_.begin()) return std::nullopt;
  auto it = std::prev(after);
  if (p >= it->first + it->second) return std::nullopt;
  return Allocation{it->first, it->second};
}

MemoryUsage DeviceMemory::usage() const {
  std::lock_guard lock(mutex_);
  return usage_;
}

}  // namespace mlurt
