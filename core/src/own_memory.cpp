#include <opscope/own_memory.h>

#include <array>
#include <atomic>

namespace opscope {
namespace {

// Process-wide, as device memory is: memcheck adds to it, the profiler reads it (tools never call each
// other; both reach core).
std::array<std::atomic<std::int64_t>, kOwnMemoryDevices> g_own_bytes{};

}  // namespace

void addOwnDeviceBytes(int device, std::int64_t bytes) {
  if (device >= 0 && device < kOwnMemoryDevices)
    g_own_bytes[static_cast<std::size_t>(device)].fetch_add(bytes, std::memory_order_relaxed);
}

std::int64_t ownDeviceBytes(int device) {
  if (device < 0 || device >= kOwnMemoryDevices) return 0;
  return g_own_bytes[static_cast<std::size_t>(device)].load(std::memory_order_relaxed);
}

}  // namespace opscope
