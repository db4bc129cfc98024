// examples/leaky — a program that leaks device memory from three call sites, for memcheck's report:
//   1. once, 65536 bytes, in a shared library of its own (libleaky_lib.so: leaky::libraryLeak);
//   2. once, 4096 bytes, through a helper inlined into leakThroughInlinedHelper();
//   3. 100 times (`leaky N`: N times), 1024 bytes each, in the loop of leakInLoop().
// Everything else it allocates (device and pinned host memory) is freed. Built twice: `leaky` allocates
// device memory, `leaky_host` the C heap (for valgrind, see leaky_alloc.h).
#include "leaky_alloc.h"

#ifndef LEAKY_HOST_MALLOC
#include <mlu/mlurt.h>
#endif

namespace {

__attribute__((always_inline)) inline void* inlinedHelper(std::size_t bytes) {
  void* p = nullptr;
  LEAKY_ALLOC(p, bytes);  // leak: site 2 (inlined)
  return p;
}

__attribute__((noinline)) void leakThroughInlinedHelper() { leaky::keep(inlinedHelper(4096)); }

__attribute__((noinline)) void leakInLoop(int times) {
  for (int i = 0; i < times; ++i) {
    void* p = nullptr;
    LEAKY_ALLOC(p, 1024);  // leak: site 3 (100 allocations)
    leaky::keep(p);
  }
}

// Allocations that are freed: not leaks.
__attribute__((noinline)) void noLeak() {
  void* a = nullptr;
  void* b = nullptr;
  LEAKY_ALLOC(a, 8192);
  LEAKY_ALLOC(b, 300);
  leaky::keep(a);
  leaky::keep(b);
  LEAKY_FREE(b);
  LEAKY_FREE(a);
#ifndef LEAKY_HOST_MALLOC
  void* pinned = nullptr;
  leaky::check(mlurtHostMalloc(&pinned, 4096), "mlurtHostMalloc");
  leaky::check(mlurtHostFree(pinned), "mlurtHostFree");
#endif
}

}  // namespace

int main(int argc, char** argv) {
  noLeak();
  leaky::libraryLeak(65536);
  leakThroughInlinedHelper();
  leakInLoop(argc > 1 ? std::atoi(argv[1]) : 100);  // (opscope diff of two memcheck runs: `leaky 0`)
  noLeak();
  std::puts("leaky: done");
  return 0;
}
