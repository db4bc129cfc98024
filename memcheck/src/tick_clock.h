// tick_clock.h — the clock memcheck reads on every allocation and free: the CPU's time-stamp counter where it
// is invariant (one rdtsc, ~10 ns here, where clock_gettime(CLOCK_MONOTONIC) takes ~23 ns: two reads a
// malloc+free pair were a fifth of memcheck's cost without backtraces), else CLOCK_MONOTONIC itself. Ticks
// count from the clock's start; nsPerTick() gives the rate measured from then to now against
// CLOCK_MONOTONIC, for turning them into times when results are written.
#pragma once

#include <opscope/runtime_access.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define OPSCOPE_HAVE_RDTSC 1
#else
#define OPSCOPE_HAVE_RDTSC 0
#endif

namespace opscope::memcheck {

class TickClock {
 public:
  TickClock() : tsc_(invariantTsc()), start_ns_(monotonicNs()), start_(raw()) {}

  // Ticks since the start.
  std::int64_t now() const { return raw() - start_; }

  // Nanoseconds per tick, measured from the start to now (1 without a time-stamp counter). Ticks read on
  // another core may be a few apart (the counters of an invariant TSC are synchronized by the kernel).
  double nsPerTick() const {
    if (!tsc_) return 1.0;
    const std::int64_t ticks = now();
    const std::int64_t ns = monotonicNs() - start_ns_;
    return ticks > 0 && ns > 0 ? static_cast<double>(ns) / static_cast<double>(ticks) : 1.0;
  }

 private:
  std::int64_t raw() const {
#if OPSCOPE_HAVE_RDTSC
    if (tsc_) return static_cast<std::int64_t>(__rdtsc());
#endif
    return monotonicNs();
  }

  // Whether the time-stamp counter ticks at one rate whatever the CPU's frequency and sleep state
  // (/proc/cpuinfo's constant_tsc and nonstop_tsc flags).
  static bool invariantTsc() {
#if OPSCOPE_HAVE_RDTSC
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("flags", 0) != 0) continue;
      std::istringstream words(line);
      bool constant = false, nonstop = false;
      for (std::string w; words >> w;) {
        constant |= w == "constant_tsc";
        nonstop |= w == "nonstop_tsc";
      }
      return constant && nonstop;
    }
#endif
    return false;
  }

  const bool tsc_;
  const std::int64_t start_ns_;
  const std::int64_t start_;
};

}  // namespace opscope::memcheck
