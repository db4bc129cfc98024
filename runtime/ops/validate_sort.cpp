// Argument checks of the sequence, sorting and selection ops (arange, cumsum, sort, topk). Messages say what
// is wrong with the actual values; the entry point prefixes the op.
#include "elementwise_shapes.h"
#include "index_shapes.h"
#include "reduce_shapes.h"
#include "validate.h"

#include "checks.h"

#include <cmath>
#include <limits>
#include <string_view>

namespace mlu {
namespace {

using index_shapes::checkDisjoint;
using index_shapes::checkOutput;
using index_shapes::exactAlias;
using index_shapes::memoryOverlaps;
using reduce::Shape;
using reduce::shapeOf;

bool isIntegerOrBool(mluopDataType_t t) { return !isFloating(t) && t != MLUOP_DTYPE_DOUBLE; }

// The largest and smallest values an integer dtype holds, as doubles (exact up to 2^53; int64's range
// is checked against +-2^63, which no double between them misses).
void integerRange(mluopDataType_t t, double& lo, double& hi) {
  switch (t) {
    case MLUOP_DTYPE_INT8:
      lo = -128, hi = 127;
      return;
    case MLUOP_DTYPE_UINT8:
      lo = 0, hi = 255;
      return;
    case MLUOP_DTYPE_INT16:
      lo = -32768, hi = 32767;
      return;
    case MLUOP_DTYPE_INT32:
      lo = -2147483648.0, hi = 2147483647.0;
      return;
    default:
      lo = -9223372036854775808.0, hi = 9223372036854775807.0;
      return;
  }
}

// x and the two outputs of sort and topk: values of x's dtype and int64 indices, both of `shape`.
Status checkValuesAndIndices(const TensorView& x, const TensorView& values, const TensorView& indices,
                             const Shape& shape) {
  MLU_RETURN_IF_ERROR(checks::sameDtype("values", values, "x", x));
  if (indices.dtype != MLUOP_DTYPE_INT64)
    return badParam("indices is {}; expected int64", dtypeName(indices.dtype));
  MLU_RETURN_IF_ERROR(reduce::expectShape("values", values, shape));
  MLU_RETURN_IF_ERROR(reduce::expectShape("indices", indices, shape));
  MLU_RETURN_IF_ERROR(checkOutput("values", values));
  MLU_RETURN_IF_ERROR(checkOutput("indices", indices));
  MLU_RETURN_IF_ERROR(checkDisjoint("values", values, "x", x));
  MLU_RETURN_IF_ERROR(checkDisjoint("indices", indices, "x", x));
  return checkDisjoint("indices", indices, "values", values);
}

// sort's and topk's tensors present, and dim (normalized into d) one of x's.
template <typename Args>
Status checkSelectionArgs(const Args& a, int& d) {
  MLU_RETURN_IF_ERROR(checks::tensor("x", a.x));
  MLU_RETURN_IF_ERROR(checks::tensor("values", a.values));
  MLU_RETURN_IF_ERROR(checks::tensor("indices", a.indices));
  return reduce::normalizeDim(a.dim, a.x.ndim, "dim", d);
}

}  // namespace

Status validate(const arange_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  if (a.y.ndim != 1) return badParam("y has shape {}; expected 1 dim", a.y.shapeString());
  if (a.y.dtype == MLUOP_DTYPE_BOOL) return badParam("y is bool; arange makes numbers");
  if (!std::isfinite(a.start) || !std::isfinite(a.step)) {
    return badParam("start = {} and step = {}; expected finite numbers", a.start, a.step);
  }
  if (a.step == 0) return badParam("step is 0; expected a nonzero step");
  const std::int64_t n = a.y.dim(0);
  if (isIntegerOrBool(a.y.dtype) && n > 0) {
    const double last = a.start + static_cast<double>(n - 1) * a.step;
    double lo = 0, hi = 0;
    integerRange(a.y.dtype, lo, hi);
    if (std::trunc(a.start) != a.start || std::trunc(a.step) != a.step) {
      return badParam("start = {} and step = {} for {} y; an integer sequence needs whole numbers", a.start,
                      a.step, dtypeName(a.y.dtype));
    }
    if (a.start < lo || a.start > hi || last < lo || last > hi) {
      return badParam("the sequence from {} to {} leaves {}'s range [{}, {}]", a.start, last,
                      dtypeName(a.y.dtype), lo, hi);
    }
  }
  return checkOutput("y", a.y);
}

Status validate(const cumsum_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("x", a.x));
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  int d = 0;
  MLU_RETURN_IF_ERROR(reduce::normalizeDim(a.dim, a.x.ndim, "dim", d));
  const bool same = a.y.dtype == a.x.dtype && a.x.dtype != MLUOP_DTYPE_BOOL;
  const bool widened = a.y.dtype == MLUOP_DTYPE_INT64 && isIntegerOrBool(a.x.dtype);
  if (!same && !widened) {
    return badParam("y is {} for {} x; expected x's dtype, or int64 for an integer or bool x",
                    dtypeName(a.y.dtype), dtypeName(a.x.dtype));
  }
  MLU_RETURN_IF_ERROR(reduce::expectShape("y", a.y, shapeOf(a.x)));
  MLU_RETURN_IF_ERROR(checkOutput("y", a.y));
  // In place (y exactly x) is allowed: each element is read before it is written.
  if (memoryOverlaps(a.y, a.x) && !(a.y.dtype == a.x.dtype && exactAlias(a.x, a.y))) {
    return badParam(
        "y overlaps x in memory without being the same elements; y may only be x itself (in place)");
  }
  return Status::success();
}

Status validate(const sort_args& a) {
  int d = 0;
  MLU_RETURN_IF_ERROR(checkSelectionArgs(a, d));
  return checkValuesAndIndices(a.x, a.values, a.indices, shapeOf(a.x));
}

Status validate(const topk_args& a) {
  int d = 0;
  MLU_RETURN_IF_ERROR(checkSelectionArgs(a, d));
  const std::int64_t size = a.x.ndim == 0 ? 1 : a.x.dim(d);
  if (a.k < 0 || a.k > size) {
    return badParam("k = {} is out of range for dim {} of x {} (size {}; expected 0 to {})", a.k, d,
                    a.x.shapeString(), size, size);
  }
  Shape shape = shapeOf(a.x);
  if (!shape.empty()) shape[static_cast<std::size_t>(d)] = a.k;
  return checkValuesAndIndices(a.x, a.values, a.indices, shape);
}

}  // namespace mlu
