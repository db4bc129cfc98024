// tolerance.h — which tolerance auto-compare judges an output with.
#pragma once

#include <opscope/config.h>
#include <opscope/tolerance.h>

#include <mlu/mluops.h>
#include <mlu/op_args.h>

#include <optional>

namespace opscope::compare {

// The op's own default for outputs of this dtype, where its accumulation length needs a wider tolerance
// than the dtype's (mlu/op_tolerance.h); nullopt otherwise.
std::optional<Tolerance> opDefaultTolerance(mlu::OpId op, mluopDataType_t dtype);

// In priority order: <OP>_AUTOCOMPARE_ERROR_TOLERANCE_<DTYPE>; then, under OP_AUTOCOMPARE_VERDICT=class
// (the default), {0, 0} for an op of the exact class (op_class.h: it must match the reference exactly);
// AUTOCOMPARE_ERROR_TOLERANCE_<DTYPE>, AUTOCOMPARE_ERROR_TOLERANCE, the op's default, the dtype's default
// (metrics.h). Auto-compare and op-replay --acc_check judge with it.
Tolerance toleranceFor(const Config& config, mlu::OpId op, mluopDataType_t dtype);

}  // namespace opscope::compare
