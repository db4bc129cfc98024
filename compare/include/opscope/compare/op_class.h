// op_class.h — what auto-compare and op-replay may expect of an op's result against the CPU reference, by
// the kind of work the op does (docs/compare.md, "Verdicts by op class"):
//
//   exact        moves, selects or compares values with no arithmetic on them (copy, permute, concat, split,
//                the index ops, relu and its backward, max-pool, max/min, comparisons, logical and bitwise
//                ops, rounding to integers, clamp, sort): the device must give the reference's values
//                exactly, whatever the dtype (NaN equals NaN, -0 equals +0). A fault of one part in a
//                million is a bug, and the dtype's tolerance would let it through.
//   elementwise  arithmetic on each element (add, exp, gelu, the optimizers' steps ...): the tolerance.
//   reduction    sums over many elements, whose order the device may choose (reductions, GEMM, convolution,
//                pooling by averages, normalizations, softmax, losses, attention): the tolerance.
//   random       random numbers, drawn from their Philox seed and offset: the tolerance.
#pragma once

#include <mlu/op_args.h>

#include <cstdint>
#include <string_view>

namespace opscope::compare {

enum class OpClass : std::uint8_t { kExact, kElementwise, kReduction, kRandom };

OpClass opClass(mlu::OpId op);
std::string_view opClassName(OpClass c);

}  // namespace opscope::compare
