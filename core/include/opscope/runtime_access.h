// runtime_access.h — what the tools share to reach the MLU runtime from inside libopscope.so: the clock the
// hook times calls with, and the real runtime functions (the next definitions after libopscope.so, so
// that a tool's own calls are not seen by the hook's wrappers).
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <ctime>
#include <stdexcept>
#include <string>

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

// The same, for a function a tool cannot work without: throws std::runtime_error naming it when missing.
template <typename Fn>
Fn requiredRuntimeFunction(const char* symbol) {
  const Fn fn = realRuntimeFunction<Fn>(symbol);
  if (fn == nullptr) throw std::runtime_error(std::string("the MLU runtime has no ") + symbol);
  return fn;
}

}  // namespace opscope
