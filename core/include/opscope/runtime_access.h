// runtime_access.h — the one way opscope reaches the real MLU runtime and kernel library from inside
// libopscope.so, and the clock the hook times calls with. A function is looked up as the next definition
// after the caller's object (dlsym RTLD_NEXT), so that opscope's own calls are not seen by its wrappers:
// the hook's wrappers take the next one only (nextFunction; anything else would be the wrapper itself), the
// tools the next or, in a program that links a tool without the hook (the in-process tests), any
// (realRuntimeFunction), and requiredRuntimeFunction when a tool cannot work without it. (A tool's plain
// calls of the runtime's API, mlurtQueueSync(q), reach the real function too: inside a tool the hook's
// wrappers forward at once, under the recursion guard. Memcheck looks its functions up here because it
// must not be seen making the allocations it makes in the program's place.)
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

// symbol in an MLU library the program loaded privately (dlopen without RTLD_GLOBAL, as Python loads an
// extension module and its dependencies: PyTorch programs reach the MLU that way), which RTLD_NEXT and
// RTLD_DEFAULT do not search; nullptr when no loaded MLU library defines it. Matched by soname, loading
// nothing (RTLD_NOLOAD).
inline void* inPrivatelyLoadedMluLibrary(const char* symbol) {
  for (const char* soname : {"libmlurt.so", "libmluops.so", "libmlucl.so"}) {
    void* library = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
    if (library == nullptr) continue;
    void* fn = dlsym(library, symbol);
    dlclose(library);  // drops the reference RTLD_NOLOAD took; the program's own keeps it loaded
    if (fn != nullptr) return fn;
  }
  return nullptr;
}

// The next definition of symbol after the calling object (or in a privately loaded MLU library), or
// nullptr.
template <typename Fn>
Fn nextFunction(const char* symbol) {
  void* fn = dlsym(RTLD_NEXT, symbol);
  if (fn == nullptr) fn = inPrivatelyLoadedMluLibrary(symbol);
  return reinterpret_cast<Fn>(fn);
}

// The real definition of a runtime function, or nullptr when the process has none (it never loaded the
// runtime: a shell the hook was preloaded into, say).
template <typename Fn>
Fn realRuntimeFunction(const char* symbol) {
  Fn fn = nextFunction<Fn>(symbol);
  if (fn == nullptr) fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, symbol));
  return fn;
}

// The same, for a function a tool cannot work without: throws std::runtime_error naming it when missing.
template <typename Fn>
Fn requiredRuntimeFunction(const char* symbol) {
  const Fn fn = realRuntimeFunction<Fn>(symbol);
  if (fn == nullptr) throw std::runtime_error(std::string("the MLU runtime has no ") + symbol);
  return fn;
}

}  // namespace opscope
