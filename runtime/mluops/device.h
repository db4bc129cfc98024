// device.h — the device side of every op: after the entry point has checked the arguments (validate and
// the device rules), device(launch, args) enqueues the op's kernel with launch.enqueue. The kernels are
// the device's own numerics: half types computed in float32 and rounded once per op, blocked
// accumulation, fast approximations of transcendental functions.
#pragma once

#include "launch.h"

#include <mlu/op_args.h>
#include <mlu/status.h>

namespace mlu {

#define MLUOP_DECLARE_DEVICE(op, Symbol, ARGS) Status device(const Launch& launch, const op##_args& args);
MLUOP_FOR_EACH_OP(MLUOP_DECLARE_DEVICE)
#undef MLUOP_DECLARE_DEVICE

}  // namespace mlu
