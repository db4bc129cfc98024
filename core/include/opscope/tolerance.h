// tolerance.h — an accuracy tolerance: |device − reference| ≤ atol + rtol·|reference|, and each dtype's
// default (auto-compare's, and `opscope diff`'s for statistics).
#pragma once

#include <mlu/mluops.h>

namespace opscope {

struct Tolerance {
  double atol = 0;
  double rtol = 0;
  // Auto-compare's verdict of a reduction (compare/op_class.h) adds, per element, `ulps` units in the last
  // place of the dtype at the reference and `rms` times the reference tensor's root mean square (what a
  // sum that nearly cancels may lose): |d - r| <= atol + rtol·|r| + ulps·ulp(r) + rms·RMS(reference).
  // compareTensors folds rms·RMS into the atol it reports.
  double ulps = 0;
  double rms = 0;
};

// The default tolerance of a dtype: float32 1e-5,1e-5; float16 1e-3,1e-3; bfloat16 1e-2,1e-2; float64
// 1e-8,1e-8; integer and bool types exact.
inline Tolerance defaultTolerance(mluopDataType_t dtype) {
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

}  // namespace opscope
