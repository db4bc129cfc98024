#include <opscope/compare/metrics.h>
#include <opscope/compare/op_class.h>
#include <opscope/compare/tolerance.h>

#include <mlu/op_tolerance.h>

namespace opscope::compare {

std::optional<Tolerance> classTolerance(OpClass c, mluopDataType_t dtype) {
  if (c == OpClass::kExact) return Tolerance{0, 0};
  if (c != OpClass::kReduction) return std::nullopt;
  // Measured on the clean runs of docs/compare.md (every reduction output of mnist_train, llama_train in
  // three dtypes, torch_mnist and torch_gpt): beyond these ULPs, the largest difference needed 1.6e-5 of
  // the output's RMS in float32 and 2.8e-6 in the half types; the planted faults of issue 48 needed 7.3e-4
  // (conv2d_backward_filter, float32, 1.0001 on 5%) and 7.5e-3 (linear, bfloat16, 1.005 on 5%).
  switch (dtype) {
    case MLUOP_DTYPE_FLOAT:
      return Tolerance{0, 0, 64, 1e-4};
    case MLUOP_DTYPE_HALF:
    case MLUOP_DTYPE_BFLOAT16:
      return Tolerance{0, 0, 1, 1e-4};
    default:  // float64 (its reference is no wider) and the integers: the tolerance
      return std::nullopt;
  }
}

std::optional<Tolerance> opDefaultTolerance(mlu::OpId op, mluopDataType_t dtype) {
  for (const auto& entry : mlu::kOpToleranceDefaults) {
    if (entry.op == op && entry.dtype == dtype) return Tolerance{entry.atol, entry.rtol};
  }
  return std::nullopt;
}

Tolerance toleranceFor(const Config& config, mlu::OpId op, mluopDataType_t dtype) {
  if (const auto it = config.op_tolerance.find({op, dtype}); it != config.op_tolerance.end())
    return it->second;
  if (!config.verdict_tolerance_only) {
    if (const std::optional<Tolerance> by_class = classTolerance(opClass(op), dtype)) return *by_class;
  }
  if (const auto it = config.dtype_tolerance.find(dtype); it != config.dtype_tolerance.end())
    return it->second;
  if (config.tolerance) return *config.tolerance;
  if (const auto own = opDefaultTolerance(op, dtype)) return *own;
  return defaultTolerance(dtype);
}

}  // namespace opscope::compare
