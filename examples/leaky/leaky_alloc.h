// leaky_alloc.h — how examples/leaky allocates: device memory (mlurtMalloc) in `leaky`, the C heap
// (malloc) in `leaky_host`, the same program built for valgrind, whose leak report is the independent
// oracle memcheck's is tested against. The allocation is a macro so that both builds allocate on the same
// source line, from the same function.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>

#ifdef LEAKY_HOST_MALLOC
#define LEAKY_ALLOC(ptr, bytes) ((ptr) = std::malloc(bytes))
#define LEAKY_FREE(ptr) std::free(ptr)
#else
#include <mlu/mlurt.h>
#define LEAKY_ALLOC(ptr, bytes) leaky::check(mlurtMalloc(&(ptr), (bytes)), "mlurtMalloc")
#define LEAKY_FREE(ptr) leaky::check(mlurtFree(ptr), "mlurtFree")
#endif

namespace leaky {

#ifndef LEAKY_HOST_MALLOC
__attribute__((noinline)) inline void check(mlurtStatus_t status, const char* what) {
  if (status == MLURT_SUCCESS) return;
  std::fprintf(stderr, "leaky: %s: %s\n", what, mlurtGetErrorString(status));
  std::exit(1);
}
#endif

// Keeps the compiler from dropping an allocation whose pointer is never used (it is only leaked).
inline void keep(void* p) { asm volatile("" : : "g"(p) : "memory"); }

// In libleaky_lib.so: allocates `bytes` once per call and drops the pointer.
void libraryLeak(std::size_t bytes);

}  // namespace leaky
