// validate.h — the argument checks of every op, shared by the device kernels and the CPU reference so that
// both accept exactly the same calls. Each returns BAD_PARAM (or NOT_SUPPORTED) with a message naming the
// op and what is wrong: "conv2d_forward: input channels 3 do not match filter channels 1 x groups 1".
#pragma once

#include <mlu/op_args.h>
#include <mlu/status.h>

namespace mlu {

#define MLUOP_DECLARE_VALIDATE(op, Symbol, ARGS) Status validate(const op##_args& args);
MLUOP_FOR_EACH_OP(MLUOP_DECLARE_VALIDATE)
#undef MLUOP_DECLARE_VALIDATE

}  // namespace mlu
