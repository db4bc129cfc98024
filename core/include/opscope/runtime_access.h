// runtime_access.h — what the tools share to reach the MLU runtime from inside libopscope.so: the clock the
// hook times calls with, and the real runtime functions (the next definitions after libopscope.so, so
// that a tool's own calls are not seen by the hook's wrappers).
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <ctime>

namespace opscope {

// CLOCK_MONOTONIC in nanoseconds (the runtime's device timestamps use the same clock).
inline std::int64_t monotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The real definition of a runtime function, or nullptr when the process has none (it never loaded the
// runtime: a shell the hook was preloaded into, say).
template <typename Fn>
Fn realRuntimeFunction(const char* symbol) {
  void* fn = dlsym(RTLD_NEXT, symbol);
  if (fn == nullptr) fn = dlsym(RTLD_DEFAULT, symbol);
  return reinterpret_cast<Fn>(fn);
}

}  // namespace opscope
