// own_memory.h — device memory opscope's tools hold themselves (memcheck's red zones, the program's freed
// blocks it keeps in its quarantine, its buffers), per device: the profiler's "device memory" counter shows
// the program's memory alone (the runtime's bytes in use less these), and a counter of its own shows
// opscope's. Tools add and take away as they allocate and free; thread-safe and lock-free.
#pragma once

#include <cstdint>

namespace opscope {

// Devices past this are not counted (their counter shows the runtime's bytes in use unchanged).
inline constexpr int kOwnMemoryDevices = 64;

void addOwnDeviceBytes(int device, std::int64_t bytes);  // bytes may be negative
std::int64_t ownDeviceBytes(int device);                 // 0 for a device out of range

}  // namespace opscope
