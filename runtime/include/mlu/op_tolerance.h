// op_tolerance.h — part of the op schema: the ops whose results auto-compare must judge with a wider
// tolerance than their dtype's default (1e-5 float32, 1e-3 float16, 1e-2 bfloat16, atol and rtol), because
// the device accumulates long sums in float32 (blocked, in a different order) while the CPU reference
// accumulates in float64. Each entry was set from the largest difference seen on the demos' op streams,
// with headroom; the reason is on its line.
#pragma once

#include <mlu/mluops.h>
#include <mlu/op_args.h>

#include <array>

namespace mlu {

struct OpToleranceDefault {
  OpId op;
  mluopDataType_t dtype;
  double atol;
  double rtol;
};

inline constexpr std::array<OpToleranceDefault, 0> kOpToleranceDefaults{{}};

}  // namespace mlu
