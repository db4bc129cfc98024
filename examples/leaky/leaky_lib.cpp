// libleaky_lib.so: a shared library of its own that leaks, so that a leak site lies outside the executable.
#include "leaky_alloc.h"

namespace leaky {

__attribute__((visibility("default"))) void libraryLeak(std::size_t bytes) {
  void* table = nullptr;
  LEAKY_ALLOC(table, bytes);  // leak: site 1 (libleaky_lib.so)
  keep(table);
}

}  // namespace leaky
