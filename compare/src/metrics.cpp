#include <opscope/compare/metrics.h>

#include <opscope/tensor_snapshot.h>

#include <mlu/dtype.h>

#include <fmt/format.h>

#include <cmath>
#include <cstring>

namespace opscope::compare {
namespace {

double load(mluopDataType_t dtype, const void* data, std::int64_t i) {
  return elementAsDouble(dtype, static_cast<const std::byte*>(data), static_cast<std::size_t>(i));
}

}  // namespace

Tolerance defaultTolerance(mluopDataType_t dtype) {
  switch (dtype) {
    case MLUOP_DTYPE_FLOAT:
      return {1e-5, 1e-5};
    case MLUOP_DTYPE_HALF:
      return {1e-3, 1e-3};
    case MLUOP_DTYPE_BFLOAT16:
      return {1e-2, 1e-2};
    case MLUOP_DTYPE_DOUBLE:
      return {1e-8, 1e-8};
    default:
      return {0, 0};
  }
}

Metrics compareTensors(mluopDataType_t dtype, const void* e, const void* b, std::int64_t count,
                       Tolerance tol) {
  Metrics m;
  m.count = count;
  m.tolerance = tol;
  const double th = mlu::isHalfType(dtype) ? 1e-4 : 1e-6;
  double sum_abs = 0, sum_abs_ref = 0, sum_sq = 0, sum_sq_ref = 0, dot = 0, sum_sq_dev = 0;
  std::int64_t mismatches = 0, finite = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    const double x = load(dtype, e, i);
    const double y = load(dtype, b, i);
    m.dev_nan += std::isnan(x);
    m.ref_nan += std::isnan(y);
    m.dev_inf += std::isinf(x);
    m.ref_inf += std::isinf(y);
    bool close;
    if (std::isnan(x) || std::isnan(y)) {
      close = std::isnan(x) && std::isnan(y);
    } else if (std::isinf(x) || std::isinf(y)) {
      close = x == y;
    } else {
      const double d = std::fabs(x - y);
      close = d <= tol.atol + tol.rtol * std::fabs(y);
      ++finite;
      m.max_abs_diff = std::max(m.max_abs_diff, d);
      if (y != 0) m.max_rel_diff = std::max(m.max_rel_diff, d / std::fabs(y));
      sum_abs += d;
      sum_abs_ref += std::fabs(y);
      sum_sq += d * d;
      sum_sq_ref += y * y;
      sum_sq_dev += x * x;
      dot += x * y;
      m.diff3 = std::max(m.diff3, std::fabs(y) > th ? d / std::fabs(y) : d);
    }
    if (!close) ++mismatches;
  }
  m.allclose = mismatches == 0;
  m.mismatch_ratio = count > 0 ? static_cast<double>(mismatches) / static_cast<double>(count) : 0;
  m.mae = finite > 0 ? sum_abs / static_cast<double>(finite) : 0;
  m.diff1 = sum_abs / (sum_abs_ref + 1e-9);
  m.diff2 = std::sqrt(sum_sq / (sum_sq_ref + 1e-9));
  // Two all-zero tensors are identical: cosine 1.
  const double norms = std::sqrt(sum_sq_dev) * std::sqrt(sum_sq_ref);
  m.cosine = norms > 0 ? dot / norms : (sum_sq_dev == 0 && sum_sq_ref == 0 ? 1.0 : 0.0);
  return m;
}

std::string formatMetrics(const Metrics& m) {
  return fmt::format(
      "allclose: {} max_abs_diff: {:.3e} max_rel_diff: {:.3e} mae: {:.3e} cosine: {:.6f} mismatch_ratio: "
      "{:.3e} "
      "diff1: {:.3e} diff2: {:.3e} diff3: {:.3e} nan: {}/{} inf: {}/{} atol: {:g} rtol: {:g}",
      m.allclose ? "True" : "False", m.max_abs_diff, m.max_rel_diff, m.mae, m.cosine, m.mismatch_ratio,
      m.diff1, m.diff2, m.diff3, m.dev_nan, m.ref_nan, m.dev_inf, m.ref_inf, m.tolerance.atol,
      m.tolerance.rtol);
}

}  // namespace opscope::compare
