// tolerance.h — which tolerance auto-compare judges an output with.
#pragma once

#include <opscope/compare/op_class.h>
#include <opscope/config.h>
#include <opscope/tolerance.h>

#include <mlu/mluops.h>
#include <mlu/op_args.h>

#include <optional>

namespace opscope::compare {

// What OP_AUTOCOMPARE_VERDICT=class (the default) judges an output of an op of class c in dtype with:
// exact ops (0, 0); reductions in float32 64 ULPs, in float16 and bfloat16 1 ULP, each plus 1e-4 of the
// reference's RMS (Tolerance::ulps, rms); nullopt where the dtype's tolerance applies (elementwise and
// random ops, float64, integers).
std::optional<Tolerance> classTolerance(OpClass c, mluopDataType_t dtype);

// The op's own default for outputs of this dtype, where its accumulation length needs a wider tolerance
// than the dtype's (mlu/op_tolerance.h); nullopt otherwise.
std::optional<Tolerance> opDefaultTolerance(mlu::OpId op, mluopDataType_t dtype);

// In priority order: <OP>_AUTOCOMPARE_ERROR_TOLERANCE_<DTYPE>; then, under OP_AUTOCOMPARE_VERDICT=class
// (the default), classTolerance; AUTOCOMPARE_ERROR_TOLERANCE_<DTYPE>, AUTOCOMPARE_ERROR_TOLERANCE, the op's
// default, the dtype's default (metrics.h). Auto-compare and op-replay --acc_check judge with it.
Tolerance toleranceFor(const Config& config, mlu::OpId op, mluopDataType_t dtype);

}  // namespace opscope::compare
