#include <opscope/compare/metrics.h>
#include <opscope/compare/op_class.h>
#include <opscope/compare/tolerance.h>

#include <mlu/op_tolerance.h>

namespace opscope::compare {

std::optional<Tolerance> opDefaultTolerance(mlu::OpId op, mluopDataType_t dtype) {
  for (const auto& entry : mlu::kOpToleranceDefaults) {
    if (entry.op == op && entry.dtype == dtype) return Tolerance{entry.atol, entry.rtol};
  }
  return std::nullopt;
}

Tolerance toleranceFor(const Config& config, mlu::OpId op, mluopDataType_t dtype) {
  if (const auto it = config.op_tolerance.find({op, dtype}); it != config.op_tolerance.end())
    return it->second;
  if (!config.verdict_tolerance_only && opClass(op) == OpClass::kExact) return Tolerance{0, 0};
  if (const auto it = config.dtype_tolerance.find(dtype); it != config.dtype_tolerance.end())
    return it->second;
  if (config.tolerance) return *config.tolerance;
  if (const auto own = opDefaultTolerance(op, dtype)) return *own;
  return defaultTolerance(dtype);
}

}  // namespace opscope::compare
