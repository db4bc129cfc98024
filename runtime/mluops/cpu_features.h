// cpu_features.h — what the CPU running the device's kernels has, checked once: the kernels choose their
// AVX2+FMA and AVX-512 forms at run time from these (the build needs no -march flag for them).
#pragma once

namespace mlu {

inline bool cpuHasAvx2Fma() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
}

inline bool cpuHasAvx512f() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return has;
}

}  // namespace mlu
